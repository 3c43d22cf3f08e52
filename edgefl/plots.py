"""Plots of one run (PNG, PDF or SVG: edgefl.figures; matplotlib Agg): accuracy per round, accuracy versus energy,
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
from edgefl.deployment import cell_map_sites_m  # noqa: E402
from edgefl.figures import DEFAULT_FORMAT, save_figure  # noqa: E402
from edgefl.run_plots import DPI, ENERGY_CATEGORIES, bars, fit_title, round_label, tight  # noqa: E402
from edgefl.target import energy_at  # noqa: E402

MAX_BARS = 200  # energy_clients.png: above this many clients, one bar per device class


def _evaluated(metrics):
    """The evaluated rounds' rows (acc_mean set: not None, nor NaN as in a DataFrame's records)."""
    return [r for r in metrics if r.get("acc_mean") is not None and not math.isnan(r["acc_mean"])]


# accuracy.png and accuracy_energy.png, and Result.plot("accuracy") / ("accuracy-energy"): one drawing each;
# x axis: a metrics.csv column and its label (None: the round's, edgefl.run_plots.round_label)
ACCURACY_FIGURES = {
    "accuracy": ("round", None),
    "accuracy-energy": ("committed_energy_j", "committed energy, all clients (J): booked + radio tails to run"),
}


def draw_accuracy(metrics, kind: str = "accuracy", title: str = "", asynchronous: bool = False):
    """Mean, mean ± std across clients and worst-client accuracy against the round (``accuracy``; the server
    update of an ``asynchronous`` run) or the cumulative energy (``accuracy-energy``); the legend below the axes,
    where it hides no curve. A Figure."""
    x_key, xlabel = ACCURACY_FIGURES[kind]
    fig, ax = plt.subplots(figsize=(6, 4.4), dpi=DPI)
    plot_accuracy(ax, metrics, x_key, xlabel or round_label(asynchronous))
    ax.set_title(fit_title(title, 6), fontsize=9)
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


def plot_battery(path: Path, battery: list[dict], title: str = "", asynchronous: bool = False) -> Path:
    """Battery level per round (server update of an ``asynchronous`` run): one thin line per device, coloured by
    device class; written to ``path`` in the format of its suffix."""
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
    ax.set_xlabel(round_label(asynchronous))
    ax.set_ylabel("battery level (J)")
    ax.set_ylim(bottom=0)
    ax.set_title(
        fit_title(f"{title}\nbattery level per device" if title else "battery level per device", 6), fontsize=9
    )
    ax.legend(fontsize=8, title="device class", title_fontsize=8, loc="lower left")  # levels fall from the top
    tight(fig)
    return _save(fig, path)


def _save(fig, path: Path) -> Path:
    return save_figure(fig, path)  # in the format of the suffix (edgefl.figures)


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
    sectors: int = 1,
    fmt: str = DEFAULT_FORMAT,
) -> list[Path]:
    """gantt, energy_rounds, uploads_missed (with an event log), energy_snr and cell_map (devices with a distance
    only), as ``<name>.<fmt>``; ``chains``: an asynchronous run (a deadline per chain, rounds are server updates)."""
    out_dir = Path(out_dir)
    written = []
    rounds = len(metrics) or None
    if events is not None and len(events):
        ev = rp.event_arrays(events)  # once, for every plot
        fig = rp.draw_gantt(ev, title, deadline_s=deadline_s, round_ends=rp.round_ends(metrics), chains=chains)
        if fig is not None:
            written.append(_save(fig, out_dir / f"gantt.{fmt}"))
        for name, draw in (("energy_rounds", rp.draw_energy_rounds), ("uploads_missed", rp.draw_uploads_missed)):
            written.append(_save(draw(ev, title, rounds, asynchronous=chains), out_dir / f"{name}.{fmt}"))
    for name, fig in (
        ("energy_snr", rp.draw_energy_snr(clients, title)),
        ("cell_map", rp.draw_cell_map(clients, positions, cell_radius_m, title, sites_m=sites_m, sectors=sectors)),
    ):
        if fig is not None:
            written.append(_save(fig, out_dir / f"{name}.{fmt}"))
    return written


def draw_energy_clients(clients: list[dict], title: str = ""):
    """Energy per client by category (:data:`edgefl.run_plots.ENERGY_CATEGORIES`), stacked; above MAX_BARS
    clients, the mean per device class. A Figure."""
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
    for category in ENERGY_CATEGORIES:
        # (files written before promotion and tail were categories of their own have no such column)
        values = [sum(c.get(f"{category.key}_energy_j", 0.0) for c in members) / len(members) for _, members in groups]
        bars(ax, positions, values, bottom, width=0.8, facecolors=category.color, label=category.label)
        bottom = [b + v for b, v in zip(bottom, values)]
    if many:
        ax.set_xticks(positions, [f"{name}\n({len(members)} clients)" for name, members in groups], fontsize=8)
        ax.set_xlabel("device class (mean over its clients)")
    else:
        step = max(1, len(groups) // 30)
        ax.set_xticks(positions[::step], [name for name, _ in groups][::step], fontsize=7)
        ax.set_xlabel("client")
    ax.set_ylabel("energy (J)")
    ax.set_title(
        fit_title(
            f"{title}\nenergy per client by category, whole run (booked = committed at its end)",
            fig.get_figwidth() - 1.2,
        ),
        fontsize=9,
    )
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # outside: hides no bar
    tight(fig)
    return fig


def plot_run(
    out_dir: Path,
    metrics: list[dict],
    clients: list[dict],
    title: str = "",
    battery: list[dict] | None = None,
    events=None,
    positions: list[dict] | None = None,
    scenario=None,
    fmt: str = DEFAULT_FORMAT,
) -> list[Path]:
    """Every plot of a run into ``out_dir``, in format ``fmt`` (png, pdf, svg: edgefl.figures); ``events``
    (RunResult.events), ``positions`` and ``scenario`` (its deadline, cell radius, cells, and whether its algorithm
    is asynchronous) for the plots of edgefl.run_plots, drawn in events.csv's order (so that `edgefl plot RUN`
    draws the same bytes). energy_clients comes last."""
    out_dir = Path(out_dir)
    written = []
    if isinstance(events, list):  # events.csv's order (timeline), whichever engine: the figures of the files
        events = sorted(events, key=lambda e: e.timeline_key())
    asynchronous = scenario is not None and algorithms.get(scenario.algorithm.name).asynchronous
    if battery:
        written.append(plot_battery(out_dir / f"battery.{fmt}", battery, title, asynchronous))
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
        sites_m=cell_map_sites_m(net),
        chains=asynchronous,
        sectors=getattr(net, "sectors", 1),
        fmt=fmt,
    )
    if _evaluated(metrics):
        for kind in ACCURACY_FIGURES:
            figure = draw_accuracy(metrics, kind, title, asynchronous)
            written.append(_save(figure, out_dir / f"{kind.replace('-', '_')}.{fmt}"))
    fig = draw_energy_clients(clients, title)
    written.append(_save(fig, out_dir / f"energy_clients.{fmt}"))
    return written


def plot_results_folder(folder: Path, out_dir: Path | None = None, fmt: str = DEFAULT_FORMAT) -> list[Path]:
    """The figures `edgefl run --plots` draws, drawn later from the files of the finished run in ``folder``
    (`edgefl plot RUN`): metrics.csv, clients.csv, events.csv, scenario.toml, and battery.csv and positions.csv
    where the run wrote them; into ``out_dir`` (default ``folder``) in format ``fmt``. The numbers are read back
    exactly (results files hold every float's repr), so the figures are the run's own."""
    import pandas as pd

    from edgefl.scenario import load_scenario

    folder = Path(folder)
    out_dir = folder if out_dir is None else Path(out_dir)

    def table(name: str) -> pd.DataFrame:
        path = folder / name
        if not path.is_file():
            return pd.DataFrame()
        return pd.read_csv(path, keep_default_na=False, na_values=[""])

    def records(name: str) -> list[dict]:
        return [{k: (None if _missing(v) else v) for k, v in row.items()} for row in table(name).to_dict("records")]

    scenario = load_scenario(folder / "scenario.toml")
    return plot_run(
        out_dir,
        records("metrics.csv"),
        records("clients.csv"),
        title=scenario.title(),
        battery=records("battery.csv"),
        events=table("events.csv"),
        positions=records("positions.csv"),
        scenario=scenario,
        fmt=fmt,
    )


def _missing(value) -> bool:
    """An empty cell of a results file (None in the run's own rows: results files write no NaN)."""
    return isinstance(value, float) and math.isnan(value)
