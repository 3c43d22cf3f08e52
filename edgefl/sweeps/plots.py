"""Plots of a sweep (PNG, matplotlib Agg): τ* heatmap over SNR x bandwidth, energy-to-target
versus τ, the compute / transmission split, accuracy versus cumulative energy per τ, and the
Pareto front of energy versus rounds-to-target."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from edgefl.sweeps.analysis import OptimalTau, TauStats, pareto_front  # noqa: E402
from edgefl.sweeps.plan import TAU_KEY  # noqa: E402

SNR, BW, ALGORITHM = "network.snr_db", "network.bandwidth_mhz", "algorithm.name"
LABELS = {SNR: "SNR {:g} dB", BW: "{:g} MHz", TAU_KEY: "τ = {}", ALGORITHM: "{}"}
LINESTYLES = ["-", "--", ":", "-."]


def _label(keys, values) -> str:
    return ", ".join(LABELS[k].format(v) if k in LABELS else f"{k} = {v}" for k, v in zip(keys, values))


def _order(values) -> tuple:
    """Sort key for tuples of grid values: numbers numerically, then anything else as text."""
    return tuple((0, v, "") if isinstance(v, (int, float)) else (1, 0, str(v)) for v in values)


def _plain_log_axis(ax, axis="y") -> None:
    target = ax.yaxis if axis == "y" else ax.xaxis
    target.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    target.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    target.set_minor_formatter(matplotlib.ticker.NullFormatter())


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _grid(n: int, width=4.6, height=3.6):
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
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


# -- optimal-tau figures --------------------------------------------------------------------
def plot_tau_heatmap(result: OptimalTau, path: Path) -> Path | None:
    keys = result.channel_keys
    if SNR not in keys or BW not in keys:
        return None
    i_snr, i_bw = keys.index(SNR), keys.index(BW)
    other = [k for k in keys if k not in (SNR, BW)]
    facets: dict[tuple, dict] = {}
    for c in result.per_channel:
        facet = tuple(v for k, v in enumerate(c.channel) if k not in (i_snr, i_bw))
        facets.setdefault(facet, {})[(c.channel[i_snr], c.channel[i_bw])] = c
    taus = sorted({s.tau for s in result.per_tau})
    cmap = plt.get_cmap("viridis", len(taus))
    fig, axes = _grid(len(facets), width=5.2, height=4.2)
    for ax, (facet, table) in zip(axes, facets.items()):
        snrs, bws = sorted({k[0] for k in table}), sorted({k[1] for k in table})
        grid = np.full((len(snrs), len(bws)), np.nan)
        for (s, b), c in table.items():
            if c.tau_star is not None:
                grid[snrs.index(s), bws.index(b)] = taus.index(c.tau_star)
        ax.imshow(grid, origin="lower", cmap=cmap, vmin=-0.5, vmax=len(taus) - 0.5, aspect="auto")
        for (s, b), c in table.items():  # τ* in bold, the set of τ not significantly worse below it
            tau = c.tau_star
            color = "white" if tau is not None and taus.index(tau) < len(taus) / 2 else "black"
            ax.text(bws.index(b), snrs.index(s) + 0.12, "–" if tau is None else str(tau), ha="center", va="center",
                    color=color, fontsize=10, fontweight="bold")
            if tau is not None:
                ax.text(bws.index(b), snrs.index(s) - 0.22, c.tau_set_label, ha="center", va="center", color=color,
                        fontsize=7)
        ax.set_xticks(range(len(bws)), [f"{b:g}" for b in bws])
        ax.set_yticks(range(len(snrs)), [f"{s:g}" for s in snrs])
        ax.set_xlabel("bandwidth per device (MHz)")
        ax.set_ylabel("SNR (dB)")
        ax.set_title("energy-optimal τ* (bold) and its set" +
                     (f" ({_label(other, facet)})" if other else ""), fontsize=9)
    fig.suptitle(f"target {result.target}: first evaluated round where the metric and its centred "
                 f"{result.window}-evaluation moving average both reach it; – = not reached\n"
                 f"set: τ whose energy is not significantly above τ*'s (paired over seeds, {result.confidence:.0%})",
                 fontsize=8)
    return _save(fig, path)


def plot_energy_curves(result: OptimalTau, path: Path) -> Path:
    """Energy-to-target versus τ: one panel per bandwidth (or per channel point), a line per SNR."""
    keys = result.channel_keys
    split = SNR if SNR in keys else None
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
            ax.errorbar([s.tau for s in ok], [s.energy_mean for s in ok],
                        yerr=[0 if math.isnan(s.energy_ci) else s.energy_ci for s in ok], color=color, marker="o",
                        ms=3, capsize=2, label=f"{line:g} dB" if split else None)
            if c.best is not None:
                ax.plot([c.best.tau], [c.best.energy_mean], marker="*", ms=12, color=color, mec="black", mew=0.5)
        ax.set_yscale("log")
        _plain_log_axis(ax)
        ax.set_xlabel("local steps τ")
        ax.set_ylabel("energy to target (J)")
        ax.set_title(_label(panel_keys, panel) or "energy to target", fontsize=10)
        ax.grid(alpha=0.3, which="both")
        if split and i == 0:
            ax.legend(fontsize=7, title="SNR", title_fontsize=7, ncol=2)
    fig.suptitle(f"energy to reach {result.target} (mean ± CI over seeds; ★ = τ*)", fontsize=10)
    return _save(fig, path)


def _per_round_transmit(c) -> float:
    values = [s.transmit_mean / s.rounds_mean for s in c.candidates if s.eligible and s.rounds_mean]
    return float(np.mean(values)) if values else 0.0


def plot_energy_split(result: OptimalTau, path: Path) -> Path:
    """Compute versus transmission energy to target per τ, at the costliest, a median and the
    cheapest channel point."""
    cost = {c.channel: _per_round_transmit(c) for c in result.per_channel}
    picks = representative([c.channel for c in result.per_channel], cost)
    by_channel = {c.channel: c for c in result.per_channel}
    fig, axes = _grid(len(picks))
    for ax, channel in zip(axes, picks):
        c = by_channel[channel]
        ok: list[TauStats] = [s for s in c.candidates if s.eligible]
        x = np.arange(len(ok))
        compute = [s.compute_mean for s in ok]
        transmit = [s.transmit_mean for s in ok]
        ax.bar(x, compute, color="#4c72b0", label="compute")
        ax.bar(x, transmit, bottom=compute, color="#dd8452", label="transmission (up + down)")
        ax.set_xticks(x, [("★" if s.tau == c.tau_star else "") + str(s.tau) for s in ok])
        ax.set_xlabel("local steps τ (★ = τ*)")
        ax.set_ylabel("energy to target (J)")
        ax.set_title(_label(result.channel_keys, channel), fontsize=10)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3, axis="y")
    fig.suptitle(f"where the energy to {result.target} goes", fontsize=10)
    return _save(fig, path)


# -- plot figures --------------------------------------------------------------------------
def channel_panel_keys(keys: list[str]) -> list[str]:
    """Grid keys that define a channel panel: all but τ and the algorithm."""
    return [k for k in keys if k not in (TAU_KEY, ALGORITHM)]


def plot_accuracy_energy(rows: list[dict], grid_keys: list[str], metric: str, path: Path,
                         channels: list[tuple] | None = None) -> Path:
    """Metric versus cumulative energy (means over seeds), a line per τ (and per algorithm),
    one panel per channel point (default: costliest, median, cheapest)."""
    panel_keys = channel_panel_keys(grid_keys)
    curves: dict[tuple, dict] = {}  # panel -> (algorithm, tau) -> round -> [(metric, energy)]
    transmit: dict[tuple, list] = {}
    for r in rows:
        panel = tuple(r[k] for k in panel_keys)
        series = (r.get(ALGORITHM), r.get(TAU_KEY))
        if r.get(metric) is not None:
            curves.setdefault(panel, {}).setdefault(series, {}).setdefault(r["round"], []).append(
                (r[metric], r["energy_j"]))
        transmit.setdefault(panel, []).append((r["uplink_energy_j"] + r["downlink_energy_j"]) / r["round"])
    cost = {p: float(np.mean(v)) for p, v in transmit.items()}
    picks = channels if channels else representative(list(curves), cost)
    picks = [p for p in picks if p in curves]
    fig, axes = _grid(max(1, len(picks)))
    algorithms = sorted({s[0] for p in curves.values() for s in p if s[0] is not None})
    taus = sorted({s[1] for p in curves.values() for s in p if s[1] is not None})
    cmap = plt.get_cmap("viridis")
    for ax, panel in zip(axes, picks):
        for (algorithm, tau), by_round in sorted(curves[panel].items(), key=lambda kv: _order(kv[0])):
            rounds = sorted(by_round)
            acc = [np.mean([a for a, _ in by_round[k]]) for k in rounds]
            energy = [np.mean([e for _, e in by_round[k]]) for k in rounds]
            color = cmap(taus.index(tau) / max(1, len(taus) - 1) * 0.9) if tau is not None else None
            style = LINESTYLES[algorithms.index(algorithm) % len(LINESTYLES)] if algorithm else "-"
            label = " ".join(filter(None, [algorithm if len(algorithms) > 1 else None,
                                           f"τ={tau}" if tau is not None else None]))
            ax.plot(energy, acc, style, color=color, lw=1.2, label=label or None)
        ax.set_xscale("log")
        _plain_log_axis(ax, "x")
        ax.set_xlabel("cumulative energy, all clients (J)")
        ax.set_ylabel(metric)
        ax.set_title(_label(panel_keys, panel) or metric, fontsize=10)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    fig.suptitle(f"{metric} versus energy (mean over seeds)", fontsize=10)
    return _save(fig, path)


# label offsets (points) tried in turn, and the text alignment that goes with each
_OFFSETS = [((4, 3), "left", "bottom"), ((4, -3), "left", "top"), ((-4, 3), "right", "bottom"),
            ((-4, -3), "right", "top"), ((0, 7), "center", "bottom"), ((0, -7), "center", "top"),
            ((9, 0), "left", "center"), ((-9, 0), "right", "center")]


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
        (px - 4 * scale, py - 4 * scale, px + 4 * scale, py + 4 * scale) for px, py in to_px(np.asarray(xy))]
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
            if inside and not any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3]
                       for j, b in enumerate(taken) if j != i):  # its own marker does not count
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


def plot_pareto(result: OptimalTau, path: Path, channels: list[tuple] | None = None) -> Path:
    """Energy-to-target versus rounds-to-target for every eligible (algorithm, τ) at a channel
    point, with the Pareto front (neither fewer rounds nor less energy is possible)."""
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
    picks = [p for p in (channels or representative(list(panels), cost)) if p in panels]
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
        ax.plot([xy[i][0] for i in front], [xy[i][1] for i in front], "-o", color="#c44e52", lw=1.5, ms=9,
                mfc="none", label="Pareto front")
        labels = [f"{algorithm + ' ' if len(algorithms) > 1 else ''}τ={s.tau}" for algorithm, s in entries]
        _place_labels(ax, xy, labels, keep=set(front))
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True, min_n_ticks=1))  # whole rounds
        ax.set_xlabel("rounds to target")
        ax.set_ylabel("energy to target (J)")
        ax.set_title(_label(panel_keys, panel) or "Pareto front", fontsize=10)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    fig.suptitle(f"energy versus rounds to {result.target} (means over seeds)", fontsize=10)
    return _save(fig, path)
