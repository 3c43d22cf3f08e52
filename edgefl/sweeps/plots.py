"""Plots of a sweep (PNG, PDF or SVG: the suffix of the path each function is given; matplotlib Agg): τ* heatmap over two channel axes (SNR x bandwidth, or
whichever two the grid has, :func:`heatmap_axes`), energy-to-target versus τ, the compute /
transmission split, accuracy versus cumulative energy per τ, and the Pareto front of energy versus
rounds-to-target. A figure that shows some channel points of many says which and how many."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import algorithms as algorithm_registry  # noqa: E402
from edgefl.figures import save_figure  # noqa: E402
from edgefl.sweeps.analysis import OptimalTau, TauStats, pareto_front  # noqa: E402
from edgefl.sweeps.common import TAU_KEY  # noqa: E402
from edgefl.target import energy_at, energy_definition  # noqa: E402

SNR, BW, ALGORITHM = "network.snr_db", "network.bandwidth_mhz", "algorithm.name"
DISTANCE, TX_POWER = "network.distance_m", "devices.tx_power_dbm"
LABELS = {
    SNR: "SNR {:g} dB",
    BW: "{:g} MHz",
    TAU_KEY: "τ = {}",
    ALGORITHM: "{}",
    DISTANCE: "{:g} m",
    TX_POWER: "{:g} dBm",
    "network.cell_radius_m": "cell {:g} m",
    "network.cells": "{} cells",
    "network.reuse": "reuse {}",
    "network.sectors": "{} sectors a site",
    "control.name": "controller {}",
}
AXIS_LABELS = {
    SNR: "SNR (dB)",
    BW: "bandwidth per device (MHz)",
    DISTANCE: "distance (m)",
    TX_POWER: "transmit power (dBm)",
    "network.cell_radius_m": "cell radius (m)",
}
MAX_PANELS = 6  # channel points drawn one panel each; beyond, a representative few (and the figure says so)
LINESTYLES = ["-", "--", ":", "-."]


def _label(keys, values) -> str:
    return ", ".join(LABELS[k].format(v) if k in LABELS else f"{k} = {v}" for k, v in zip(keys, values))


def _order(values) -> tuple:
    """Sort key for tuples of grid values: numbers numerically, then anything else as text."""
    return tuple((0, v, "") if isinstance(v, (int, float)) else (1, 0, str(v)) for v in values)


def log_ticks(lo: float, hi: float, least: int = 3) -> list[float]:
    """Ticks for a log axis from ``lo`` to ``hi`` (> 0) with at least ``least`` labels: powers of ten, else
    1-2-5 of each decade, else every 1..9 of each decade, else round numbers evenly spaced (a range narrower
    than a factor of ~1.5, where a log axis looks linear)."""
    if not (0 < lo < hi and math.isfinite(hi)):
        return []
    decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
    for subs in ((1,), (1, 2, 5), tuple(range(1, 10))):
        ticks = [m * 10.0**k for k in decades for m in subs if lo <= m * 10.0**k <= hi]
        if len(ticks) >= least:
            return ticks
    return [float(v) for v in matplotlib.ticker.MaxNLocator(nbins=4).tick_values(lo, hi) if lo <= v <= hi]


def _readable_log_axis(ax, axis="y") -> None:
    """Tick labels in plain numbers, at least three (:func:`log_ticks`), none on the minor ticks. Call it
    once the data are drawn (it reads the axis limits)."""
    target, (lo, hi) = (ax.yaxis, ax.get_ylim()) if axis == "y" else (ax.xaxis, ax.get_xlim())
    ticks = log_ticks(lo, hi)
    if ticks:
        target.set_major_locator(matplotlib.ticker.FixedLocator(ticks))
    target.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:.3g}"))
    target.set_minor_formatter(matplotlib.ticker.NullFormatter())


def _tau_axis(ax, taus) -> None:
    """τ is a whole number: ticks at the τ values (at most 12 of them), else at whole numbers."""
    taus = sorted(set(taus))
    if 0 < len(taus) <= 12:
        ax.set_xticks(taus, [str(t) for t in taus])
    else:
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))


def _save(fig, path: Path) -> Path:
    return save_figure(fig, path)  # laid out by the figure's constrained layout (_grid): titles never overlap


def rounds_axis(names, what: str = "to target") -> tuple[str, dict[str, str]]:
    """The label of an axis of rounds ``what`` that shows the algorithms ``names`` side by side, and what to add
    under each name: an asynchronous server's round is one server update (docs/asynchronous.md), not a synchronous
    round. All synchronous: "rounds to target", no marks; all asynchronous: "server updates to target"; mixed:
    the label says both (on two lines) and each asynchronous name is marked "server updates"."""
    names = list(dict.fromkeys(n for n in names if n is not None))
    kinds = {n: algorithm_registry.is_algorithm(n) and algorithm_registry.get(n).asynchronous for n in names}
    if not any(kinds.values()):
        return f"rounds {what}", {n: "" for n in names}
    if all(kinds.values()):
        return f"server updates {what}", {n: "" for n in names}
    return f"rounds {what}\n(asynchronous: server updates)", {n: "\nserver updates" if kinds[n] else "" for n in names}


def _grid(n: int, width=4.6, height=3.6):
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False, layout="constrained")
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def representative(channels: list[tuple], cost_per_round: dict[tuple, float], count: int = 3) -> list[tuple]:
    """The most expensive, a median and the cheapest channel point (transmission J per round)."""
    ordered = sorted(channels, key=lambda c: -cost_per_round.get(c, 0.0))
    if len(ordered) <= count:
        return ordered
    picks = [ordered[round(i * (len(ordered) - 1) / (count - 1))] for i in range(count)]
    return list(dict.fromkeys(picks))


def _panels(channels: list[tuple], cost_per_round: dict[tuple, float]) -> tuple[list[tuple], str]:
    """Every channel point when there are at most :data:`MAX_PANELS`, in grid order; else the costliest, a
    median and the cheapest, with a sentence that says so (for the figure's title; "" when all are drawn)."""
    if len(channels) <= MAX_PANELS:
        return sorted(channels, key=_order), ""
    picks = representative(channels, cost_per_round)
    return picks, (
        f"{len(picks)} of {len(channels)} channel points: the costliest, a median and the cheapest "
        "(transmission energy per round); the tables have every point"
    )


def heatmap_axes(keys: list[str], channels: list[tuple]) -> tuple[str, str] | None:
    """The two channel axes of the τ* heatmap, (rows, columns): SNR x bandwidth when the grid has both;
    else bandwidth across and the first other channel key of the grid down (e.g. distance or transmit power
    of a link budget); else the first two. Only keys with two values or more count; the algorithm is never
    an axis. None when fewer than two such keys."""
    axes = [k for i, k in enumerate(keys) if k != ALGORITHM and len({c[i] for c in channels}) >= 2]
    if SNR in axes and BW in axes:
        return SNR, BW
    if BW in axes and len(axes) >= 2:
        return next(k for k in axes if k != BW), BW
    return (axes[0], axes[1]) if len(axes) >= 2 else None


def _value_text(value) -> str:
    return f"{value:g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


# -- optimal-tau figures --------------------------------------------------------------------
def plot_tau_heatmap(result: OptimalTau, path: Path) -> Path | None:
    """τ* over the two channel axes of :func:`heatmap_axes` (a panel per value of the other channel keys);
    None when the grid has fewer than two channel keys with two values or more."""
    keys = result.channel_keys
    chosen = heatmap_axes(keys, [c.channel for c in result.per_channel])
    if chosen is None:
        return None
    y_key, x_key = chosen
    i_snr, i_bw = keys.index(y_key), keys.index(x_key)
    other = [k for k in keys if k not in (y_key, x_key)]
    facets: dict[tuple, dict] = {}
    for c in result.per_channel:
        facet = tuple(v for k, v in enumerate(c.channel) if k not in (i_snr, i_bw))
        facets.setdefault(facet, {})[(c.channel[i_snr], c.channel[i_bw])] = c
    taus = sorted({s.tau for s in result.per_tau})
    cmap = plt.get_cmap("viridis", len(taus))
    fig, axes = _grid(len(facets), width=5.2, height=4.2)
    for ax, (facet, table) in zip(axes, facets.items()):
        snrs, bws = (
            sorted({k[0] for k in table}, key=lambda v: _order([v])),
            sorted({k[1] for k in table}, key=lambda v: _order([v])),
        )
        grid = np.full((len(snrs), len(bws)), np.nan)
        for (s, b), c in table.items():
            if c.tau_star is not None:
                grid[snrs.index(s), bws.index(b)] = taus.index(c.tau_star)
        ax.imshow(grid, origin="lower", cmap=cmap, vmin=-0.5, vmax=len(taus) - 0.5, aspect="auto")
        for (s, b), c in table.items():  # τ* in bold, the set of τ not significantly worse below it
            tau = c.tau_star
            color = "white" if tau is not None and taus.index(tau) < len(taus) / 2 else "black"
            ax.text(
                bws.index(b),
                snrs.index(s) + 0.12,
                "–" if tau is None else str(tau),
                ha="center",
                va="center",
                color=color,
                fontsize=10,
                fontweight="bold",
            )
            if tau is not None:
                ax.text(
                    bws.index(b),
                    snrs.index(s) - 0.22,
                    c.tau_set_label,
                    ha="center",
                    va="center",
                    color=color,
                    fontsize=7,
                )
        ax.set_xticks(range(len(bws)), [_value_text(b) for b in bws])
        ax.set_yticks(range(len(snrs)), [_value_text(s) for s in snrs])
        ax.set_xlabel(AXIS_LABELS.get(x_key, x_key))
        ax.set_ylabel(AXIS_LABELS.get(y_key, y_key))
        ax.set_title(
            "energy-optimal τ* (bold) and its set" + (f" ({_label(other, facet)})" if other else ""), fontsize=9
        )
    title = (
        f"target {result.target}, reached at the first evaluated round where the metric and its centred "
        f"{result.window}-evaluation moving average both reach it; – = not reached. Set: τ whose energy is not "
        f"significantly above τ*'s (paired over seeds, {result.confidence:.0%})"
    )
    fig.suptitle(textwrap.fill(title, width=int(fig.get_figwidth() * 14)), fontsize=8)  # ~14 characters per inch
    return _save(fig, path)


def plot_energy_curves(result: OptimalTau, path: Path) -> Path:
    """Energy-to-target versus τ: a line per value of the heatmap's row axis (SNR, or e.g. distance), one
    panel per value of the other channel keys (bandwidth, ...)."""
    keys = result.channel_keys
    chosen = heatmap_axes(keys, [c.channel for c in result.per_channel])
    split = chosen[0] if chosen else None
    panels: dict[tuple, dict] = {}
    for c in result.per_channel:
        panel = tuple(v for k, v in zip(keys, c.channel) if k != split)
        line = c.channel[keys.index(split)] if split else None
        panels.setdefault(panel, {})[line] = c
    panel_keys = [k for k in keys if k != split]
    fig, axes = _grid(len(panels))
    colors = plt.get_cmap("plasma")
    for i, (ax, (panel, lines)) in enumerate(zip(axes, sorted(panels.items(), key=lambda kv: _order(kv[0])))):
        for j, (line, c) in enumerate(sorted(lines.items(), key=lambda kv: _order([kv[0]]))):
            ok = [s for s in c.candidates if s.eligible]
            color = colors(j / max(1, len(lines) - 1) * 0.85)
            ax.errorbar(
                [s.tau for s in ok],
                [s.energy_mean for s in ok],
                yerr=[0 if math.isnan(s.energy_ci) else s.energy_ci for s in ok],
                color=color,
                marker="o",
                ms=3,
                capsize=2,
                label=_label([split], [line]) if split else None,
            )
            if c.best is not None:
                ax.plot([c.best.tau], [c.best.energy_mean], marker="*", ms=12, color=color, mec="black", mew=0.5)
        ax.set_yscale("log")
        _readable_log_axis(ax)
        _tau_axis(ax, [s.tau for c in lines.values() for s in c.candidates])
        ax.set_xlabel("local steps τ")
        ax.set_ylabel(f"{result.energy} energy to target (J)")
        ax.set_title(_label(panel_keys, panel) or "energy to target", fontsize=10)
        ax.grid(alpha=0.3, which="both")
        if split and i == 0:
            ax.legend(fontsize=7, title=AXIS_LABELS.get(split, split), title_fontsize=7, ncol=2)
    fig.suptitle(f"energy to reach {result.target} (mean ± CI over seeds; ★ = τ*)", fontsize=10)
    return _save(fig, path)


def _per_round_transmit(c) -> float:
    values = [s.transmit_mean / s.rounds_mean for s in c.candidates if s.eligible and s.rounds_mean]
    return float(np.mean(values)) if values else 0.0


def plot_energy_split(result: OptimalTau, path: Path) -> Path:
    """Compute versus transmission energy to target per τ, at the costliest, a median and the
    cheapest channel point."""
    cost = {c.channel: _per_round_transmit(c) for c in result.per_channel}
    picks, shown = _panels([c.channel for c in result.per_channel], cost)
    by_channel = {c.channel: c for c in result.per_channel}
    fig, axes = _grid(len(picks))
    for ax, channel in zip(axes, picks):
        c = by_channel[channel]
        ok: list[TauStats] = [s for s in c.candidates if s.eligible]
        x = np.arange(len(ok))
        compute = [s.compute_mean for s in ok]
        transmit = [s.transmit_mean for s in ok]
        ax.bar(x, compute, color="#4c72b0", label="compute")
        ax.bar(x, transmit, bottom=compute, color="#dd8452", label="radio (transfers, promotions, tails)")
        ax.set_xticks(x, [("★" if s.tau == c.tau_star else "") + str(s.tau) for s in ok])
        ax.set_xlabel("local steps τ (★ = τ*)")
        ax.set_ylabel(f"{result.energy} energy to target (J)")
        ax.set_title(_label(result.channel_keys, channel), fontsize=10)
        ax.grid(alpha=0.3, axis="y")
    if axes:  # one legend for the figure, below the panels: never over a bar
        fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=2, fontsize=8)
    fig.suptitle(f"where the energy to {result.target} goes" + (f"\n{shown}" if shown else ""), fontsize=10)
    return _save(fig, path)


# -- plot figures --------------------------------------------------------------------------
def channel_panel_keys(keys: list[str]) -> list[str]:
    """Grid keys that define a channel panel: all but τ and the algorithm."""
    return [k for k in keys if k not in (TAU_KEY, ALGORITHM)]


def plot_accuracy_energy(
    rows: list[dict], grid_keys: list[str], metric: str, path: Path, channels: list[tuple] | None = None
) -> Path:
    """Metric versus cumulative energy (means over seeds), a line per τ (and per algorithm),
    one panel per channel point (default: costliest, median, cheapest)."""
    panel_keys = channel_panel_keys(grid_keys)
    panel_of = [tuple(r[k] for k in panel_keys) for r in rows]
    lines: dict[tuple, set] = {}  # panel -> its (algorithm, tau) with values of the metric
    transmit: dict[tuple, list] = {}
    for r, panel in zip(rows, panel_of):
        if r.get(metric) is not None:
            lines.setdefault(panel, set()).add((r.get(ALGORITHM), r.get(TAU_KEY)))
        transmit.setdefault(panel, []).append((r["uplink_energy_j"] + r["downlink_energy_j"]) / r["round"])
    cost = {p: float(np.mean(v)) for p, v in transmit.items()}
    picks, shown = (channels, "") if channels else _panels(list(lines), cost)
    picks = [p for p in picks if p in lines]
    curves: dict[tuple, dict] = {p: {} for p in picks}  # drawn panel -> (algorithm, tau) -> round -> [(metric, energy)]
    for r, panel in zip(rows, panel_of):
        if panel in curves and r.get(metric) is not None:
            curves[panel].setdefault((r.get(ALGORITHM), r.get(TAU_KEY)), {}).setdefault(r["round"], []).append(
                (r[metric], energy_at(r))  # committed: what stopping there costs
            )
    fig, axes = _grid(max(1, len(picks)))
    algorithms = sorted({s[0] for p in lines.values() for s in p if s[0] is not None})
    taus = sorted({s[1] for p in lines.values() for s in p if s[1] is not None})
    cmap = plt.get_cmap("viridis")
    for ax, panel in zip(axes, picks):
        for (algorithm, tau), by_round in sorted(curves[panel].items(), key=lambda kv: _order(kv[0])):
            rounds = sorted(by_round)
            acc = [np.mean([a for a, _ in by_round[k]]) for k in rounds]
            energy = [np.mean([e for _, e in by_round[k]]) for k in rounds]
            color = cmap(taus.index(tau) / max(1, len(taus) - 1) * 0.9) if tau is not None else None
            style = LINESTYLES[algorithms.index(algorithm) % len(LINESTYLES)] if algorithm else "-"
            label = " ".join(
                filter(None, [algorithm if len(algorithms) > 1 else None, f"τ={tau}" if tau is not None else None])
            )
            ax.plot(energy, acc, style, color=color, lw=1.2, label=label or None)
        ax.set_xscale("log")
        _readable_log_axis(ax, "x")
        ax.set_xlabel(f"{energy_definition(rows)} energy, all clients (J)")
        ax.set_ylabel(metric)
        ax.set_title(_label(panel_keys, panel) or metric, fontsize=10)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    fig.suptitle(f"{metric} versus energy (mean over seeds)" + (f"\n{shown}" if shown else ""), fontsize=10)
    return _save(fig, path)


# label offsets (points) tried in turn, and the text alignment that goes with each
_OFFSETS = [
    ((4, 3), "left", "bottom"),
    ((4, -3), "left", "top"),
    ((-4, 3), "right", "bottom"),
    ((-4, -3), "right", "top"),
    ((0, 7), "center", "bottom"),
    ((0, -7), "center", "top"),
    ((9, 0), "left", "center"),
    ((-9, 0), "right", "center"),
]


def _place_labels(ax, xy: list[tuple], labels: list[str], keep: set[int], fontsize: float = 7) -> None:
    """Annotate points without overlapping labels: each label takes the first offset around its point whose
    (estimated) box is free; a label with no free place is left out, except those in ``keep`` (the Pareto
    front), which take their first offset anyway. Points are labelled front first, then left to right."""
    if not xy:
        return
    ax.margins(x=0.12, y=0.1)  # room for the labels of the outermost points
    ax.autoscale_view()
    to_px = ax.transData.transform
    frame = ax.get_window_extent()
    scale = ax.figure.dpi / 72.0  # points -> pixels
    taken: list[tuple[float, float, float, float]] = [
        (px - 4 * scale, py - 4 * scale, px + 4 * scale, py + 4 * scale) for px, py in to_px(np.asarray(xy))
    ]
    order = sorted(range(len(xy)), key=lambda i: (i not in keep, xy[i][0], xy[i][1]))
    for i in order:
        px, py = to_px(xy[i])
        w, h = 0.6 * fontsize * len(labels[i]) * scale, 1.2 * fontsize * scale
        chosen = None
        for (dx, dy), ha, va in _OFFSETS:
            x0 = px + dx * scale - {"left": 0, "center": w / 2, "right": w}[ha]
            y0 = py + dy * scale - {"bottom": 0, "center": h / 2, "top": h}[va]
            box = (x0, y0, x0 + w, y0 + h)
            inside = frame.x0 <= box[0] and box[2] <= frame.x1 and frame.y0 <= box[1] and box[3] <= frame.y1
            if inside and not any(
                box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3]
                for j, b in enumerate(taken)
                if j != i
            ):  # its own marker does not count
                chosen = ((dx, dy), ha, va, box)
                break
        if chosen is None and i in keep:
            (dx, dy), ha, va = _OFFSETS[0]
            chosen = ((dx, dy), ha, va, (px, py, px + w, py + h))
        if chosen is None:
            continue
        offset, ha, va, box = chosen
        taken.append(box)
        ax.annotate(labels[i], xy[i], fontsize=fontsize, xytext=offset, textcoords="offset points", ha=ha, va=va)


def plot_pareto(
    result: OptimalTau, path: Path, channels: list[tuple] | None = None, sweep_algorithm: str | None = None
) -> Path:
    """Energy-to-target versus rounds-to-target for every eligible (algorithm, τ) at a channel
    point, with the Pareto front (neither fewer rounds nor less energy is possible). ``sweep_algorithm``: the sweep's
    own (its scenario's) when algorithm.name is no grid key: an asynchronous one counts server updates."""
    keys = result.channel_keys
    panel_keys = channel_panel_keys(keys)
    i_alg = keys.index(ALGORITHM) if ALGORITHM in keys else None
    panels: dict[tuple, list[tuple]] = {}
    for s in result.per_tau:
        if not s.eligible:
            continue
        panel = tuple(v for k, v in zip(keys, s.channel) if k != ALGORITHM)
        panels.setdefault(panel, []).append((s.channel[i_alg] if i_alg is not None else None, s))
    cost = {p: float(np.mean([s.transmit_mean / s.rounds_mean for _, s in v])) for p, v in panels.items()}
    picks, shown = (channels, "") if channels else _panels(list(panels), cost)
    picks = [p for p in picks if p in panels]
    fig, axes = _grid(max(1, len(picks)))
    markers = ["o", "s", "^", "D", "v"]
    for ax, panel in zip(axes, picks):
        entries = panels[panel]
        algorithms = sorted({a for a, _ in entries if a is not None})
        xy = [(s.rounds_mean, s.energy_mean) for _, s in entries]
        front = pareto_front(xy)
        for (algorithm, s), (x, y) in zip(entries, xy):
            marker = markers[algorithms.index(algorithm) % len(markers)] if algorithm else "o"
            ax.plot(x, y, marker, color="#4c72b0", ms=5, alpha=0.8)
        ax.plot(
            [xy[i][0] for i in front],
            [xy[i][1] for i in front],
            "-o",
            color="#c44e52",
            lw=1.5,
            ms=9,
            mfc="none",
            label="Pareto front",
        )
        labels = [f"{algorithm + ' ' if len(algorithms) > 1 else ''}τ={s.tau}" for algorithm, s in entries]
        _place_labels(ax, xy, labels, keep=set(front))
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True, min_n_ticks=1))  # whole rounds
        ax.set_xlabel(rounds_axis(algorithms or [sweep_algorithm])[0])
        ax.set_ylabel(f"{result.energy} energy to target (J)")
        ax.set_title(_label(panel_keys, panel) or "Pareto front", fontsize=10)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    fig.suptitle(
        f"energy versus rounds to {result.target} (means over seeds)" + (f"\n{shown}" if shown else ""), fontsize=10
    )
    return _save(fig, path)
