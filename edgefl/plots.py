"""Plots of one run (PNG, matplotlib Agg): accuracy per round, accuracy versus energy,
energy per client by category, battery levels, and (edgefl.run_plots) a Gantt chart of selected rounds,
energy per round, energy against SNR and distance, a map of the cell and the uploads missed per round.
docs/run-plots.md shows each."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import algorithms  # noqa: E402
from edgefl import run_plots as rp  # noqa: E402
from edgefl.physical import cell_sites_m  # noqa: E402
from edgefl.run_plots import CATEGORY_COLORS, DPI, bars, tight  # noqa: E402
from edgefl.target import energy_at  # noqa: E402
from energy import CATEGORIES  # noqa: E402

MAX_BARS = 200  # energy_clients.png: above this many clients, one bar per device class
# zlib level of the PNGs: 3 encodes in ~60 % of the time of PIL's default 6 (a 770 x 418 figure: 15 ms instead of
# 25 ms); the run's figures are 5-15 % larger
PNG_COMPRESSION = 3


def _evaluated(metrics):
    """The evaluated rounds' rows (acc_mean set: not None, nor NaN as in a DataFrame's records)."""
    return [r for r in metrics if r.get("acc_mean") is not None and not math.isnan(r["acc_mean"])]


# accuracy.png and accuracy_energy.png, and Result.plot("accuracy") / ("accuracy-energy"): one drawing each
ACCURACY_FIGURES = {
    "accuracy": ("round", "round"),
    "accuracy-energy": ("committed_energy_j", "committed energy, all clients (J): booked + radio tails to run"),
}


def draw_accuracy(metrics, kind: str = "accuracy", title: str = ""):
    """Mean, mean ± std across clients and worst-client accuracy against the round (``accuracy``) or the
    cumulative energy (``accuracy-energy``); the legend below the axes, where it hides no curve. A Figure."""
    x_key, xlabel = ACCURACY_FIGURES[kind]
    fig, ax = plt.subplots(figsize=(6, 4.4), dpi=DPI)
    plot_accuracy(ax, metrics, x_key, xlabel)
    ax.set_title(title, fontsize=9)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3, fontsize=8, frameon=False)
    tight(fig)
    return fig


def plot_accuracy(ax, metrics, x_key: str, xlabel: str, label_prefix: str = ""):
    rows = _evaluated(metrics)
    x = [energy_at(r) if x_key == "committed_energy_j" else r[x_key] for r in rows]  # (older files: booked)
    mean = [r["acc_mean"] for r in rows]
    std = [r["acc_std"] for r in rows]
    ax.plot(x, mean, label=f"{label_prefix}mean")
    ax.fill_between(
        x,
        [max(0.0, m - s) for m, s in zip(mean, std)],
        [min(1.0, m + s) for m, s in zip(mean, std)],
        alpha=0.2,
        label=f"{label_prefix}mean ± std across clients (within [0, 1])",
    )
    ax.plot(x, [r["acc_worst"] for r in rows], "--", label=f"{label_prefix}worst client")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("test accuracy (per client)")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)


def plot_battery(path: Path, battery: list[dict], title: str = "") -> Path:
    """Battery level per round: one thin line per device, coloured by device class."""
    fig, ax = plt.subplots(figsize=(6, 4), dpi=DPI)
    classes = sorted({row["device_class"] for row in battery})
    colors = dict(zip(classes, plt.rcParams["axes.prop_cycle"].by_key()["color"] * 4))
    by_client: dict[int, list[tuple[int, float]]] = {}
    for row in battery:
        by_client.setdefault(row["client"], []).append((row["round"], row["level_j"]))
    class_of = {row["client"]: row["device_class"] for row in battery}
    labelled = set()
    for client, points in sorted(by_client.items()):
        cls = class_of[client]
        ax.plot(*zip(*points), lw=0.8, alpha=0.6, color=colors[cls], label=None if cls in labelled else cls)
        labelled.add(cls)
    ax.set_xlabel("round")
    ax.set_ylabel("battery level (J)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"{title}\nbattery level per device" if title else "battery level per device", fontsize=9)
    ax.legend(fontsize=8, title="device class", title_fontsize=8, loc="lower left")  # levels fall from the top
    tight(fig)
    return _save(fig, path)


def _save(fig, path: Path) -> Path:
    fig.savefig(path, dpi=DPI, pil_kwargs={"compress_level": PNG_COMPRESSION})
    plt.close(fig)
    return path


def plot_events(
    out_dir: Path,
    metrics: list[dict],
    clients: list[dict],
    events,
    title: str = "",
    positions: list[dict] | None = None,
    deadline_s: float | None = None,
    cell_radius_m: float | None = None,
    sites_m=None,
    chains: bool = False,
) -> list[Path]:
    """gantt.png, energy_rounds.png, uploads_missed.png (with an event log), energy_snr.png and
    cell_map.png (devices with a distance only); ``chains``: an asynchronous run (a deadline per chain)."""
    out_dir = Path(out_dir)
    written = []
    rounds = len(metrics) or None
    if events is not None and len(events):
        ev = rp.event_arrays(events)  # once, for every plot
        fig = rp.draw_gantt(ev, title, deadline_s=deadline_s, round_ends=rp.round_ends(metrics), chains=chains)
        if fig is not None:
            written.append(_save(fig, out_dir / "gantt.png"))
        written.append(_save(rp.draw_energy_rounds(ev, title, rounds), out_dir / "energy_rounds.png"))
        written.append(_save(rp.draw_uploads_missed(ev, title, rounds), out_dir / "uploads_missed.png"))
    for name, fig in (
        ("energy_snr.png", rp.draw_energy_snr(clients, title)),
        ("cell_map.png", rp.draw_cell_map(clients, positions, cell_radius_m, title, sites_m=sites_m)),
    ):
        if fig is not None:
            written.append(_save(fig, out_dir / name))
    return written


def plot_run(
    out_dir: Path,
    metrics: list[dict],
    clients: list[dict],
    title: str = "",
    battery: list[dict] | None = None,
    events=None,
    positions: list[dict] | None = None,
    scenario=None,
) -> list[Path]:
    """Every plot of a run into ``out_dir``; ``events`` (RunResult.events), ``positions`` and ``scenario``
    (its deadline and cell radius) for the plots of edgefl.run_plots. energy_clients.png comes last."""
    out_dir = Path(out_dir)
    written = []
    if battery:
        written.append(plot_battery(out_dir / "battery.png", battery, title))
    net = getattr(scenario, "network", None)
    written += plot_events(
        out_dir,
        metrics,
        clients,
        events,
        title,
        positions,
        deadline_s=getattr(net, "deadline_s", None),
        cell_radius_m=getattr(net, "cell_radius_m", None),
        sites_m=cell_sites_m(net)[0] if getattr(net, "cells", 1) > 1 else None,
        chains=scenario is not None and algorithms.get(scenario.algorithm.name).asynchronous,
    )
    if _evaluated(metrics):
        for kind in ACCURACY_FIGURES:
            written.append(_save(draw_accuracy(metrics, kind, title), out_dir / f"{kind.replace('-', '_')}.png"))
    many = len(clients) > MAX_BARS  # one bar per client up to MAX_BARS; beyond, the mean per device class
    groups = (
        [(str(c["client"]), [c]) for c in clients]
        if not many
        else [
            (name, [c for c in clients if c["device_class"] == name])
            for name in dict.fromkeys(c["device_class"] for c in clients)
        ]
    )
    fig, ax = plt.subplots(figsize=(min(16, max(6, len(groups) * 0.18 + 2)), 4), dpi=DPI)
    positions = list(range(len(groups)))
    bottom = [0.0] * len(groups)
    for category in CATEGORIES:
        # (files written before promotion and tail were categories of their own have no such column)
        values = [sum(c.get(f"{category}_energy_j", 0.0) for c in members) / len(members) for _, members in groups]
        bars(ax, positions, values, bottom, width=0.8, facecolors=CATEGORY_COLORS[category], label=category)
        bottom = [b + v for b, v in zip(bottom, values)]
    if many:
        ax.set_xticks(positions, [f"{name}\n({len(members)} clients)" for name, members in groups], fontsize=8)
        ax.set_xlabel("device class (mean over its clients)")
    else:
        step = max(1, len(groups) // 30)
        ax.set_xticks(positions[::step], [name for name, _ in groups][::step], fontsize=7)
        ax.set_xlabel("client")
    ax.set_ylabel("energy (J)")
    ax.set_title(f"{title}\nenergy booked per client by category, whole run (= committed at its end)", fontsize=9)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # outside: hides no bar
    tight(fig)
    written.append(_save(fig, out_dir / "energy_clients.png"))
    return written
