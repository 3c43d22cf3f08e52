"""Plots of one run drawn from its event log and client table (matplotlib Agg; docs/run-plots.md):
a Gantt chart of selected rounds, energy per round by category, energy per device against SNR and
distance, a map of the cell, and the uploads cut or lost per round.

Each ``draw_*`` function draws onto a figure (a new one when ``fig`` is None) and returns it; ``plot_run``
(edgefl.plots) saves them into a run's results folder and ``Result.plot`` (edgefl.api) returns them.
The event log is read once into numpy arrays (:func:`event_arrays`): no per-event Python loop in a plot,
so runs with 10^5+ events plot in a second or so. Rounds are numbered from 1 on every axis and title, as
in the CSV files (the engine counts from 0).
"""

from __future__ import annotations

import math
import re
import textwrap
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.collections import LineCollection, PolyCollection  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.markers import TICKLEFT  # noqa: E402
from matplotlib.patches import Circle, Patch  # noqa: E402
from matplotlib.ticker import FuncFormatter, MaxNLocator  # noqa: E402
from matplotlib.transforms import ScaledTranslation, blended_transform_factory  # noqa: E402

from edgefl.figures import DPI  # noqa: E402  (re-exported: edgefl.plots and the tests read it here)


@dataclass(frozen=True)
class EnergyCategory:
    """How the figures show one category of the energy ledger (energy.CATEGORIES)."""

    key: str  # the ledger's name: events.csv `category`, the `<key>_energy_j` columns of metrics.csv and clients.csv
    label: str  # legend text
    color: str


# Every energy split of a run's figures reads this table, in this order: energy_rounds.png, energy_clients.png
# (edgefl.plots) and Result.plot("energy") (edgefl.api). A new category of the ledger is one entry here
# (tests/test_run_plots.py checks that the table covers energy.CATEGORIES, in order).
ENERGY_CATEGORIES = (
    EnergyCategory("compute", "compute", "#4c72b0"),
    EnergyCategory("uplink", "uplink", "#dd8452"),
    EnergyCategory("downlink", "downlink", "#55a868"),
    EnergyCategory("idle", "idle", "#8c8c8c"),
    EnergyCategory("promotion", "promotion", "#8172b3"),
    EnergyCategory("tail", "radio tail", "#c9a0dc"),
)
KIND_COLORS = {
    "download": "#55a868",
    "compute": "#4c72b0",
    "upload": "#dd8452",
    "idle": "#d9d9d9",
    "tail": "#c9a0dc",
    "promotion": "#8172b3",
}
MAX_GANTT_ROWS = 40  # devices per Gantt panel; beyond, the most interesting ones (cut/lost, then slowest)
MAX_GANTT_ROUNDS = 3
MAX_SCATTER = 10_000  # energy_snr / cell_map: above this many devices, a fixed random sample of this size
MAX_ROUND_BARS = 150  # energy_rounds / uploads_missed: above this many rounds, filled areas instead of bars
MISSED = ("cut", "lost", "other")  # why an upload did not arrive (uploads_missed_per_round)
HATCHES = (None, "////", "xxxx", "....")  # ok, cut, lost, other


@dataclass(frozen=True)
class EventArrays:
    """The event log as columns (rounds from 0, as the engine counts)."""

    round: np.ndarray
    phase: np.ndarray
    client: np.ndarray
    kind: np.ndarray
    start_s: np.ndarray
    end_s: np.ndarray
    energy_j: np.ndarray
    category: np.ndarray
    status: np.ndarray

    def __len__(self) -> int:
        return len(self.round)

    @property
    def rounds(self) -> int:
        """Rounds the log covers (the last round + 1)."""
        return int(self.round.max()) + 1 if len(self) else 0


def event_arrays(events) -> EventArrays:
    """Columns of ``events``: a list of :class:`edgefl.sim.activities.Event` (RunResult.events), a DataFrame
    of events.csv (rounds from 1: Result.events) or an EventArrays (returned as is)."""
    if isinstance(events, EventArrays):
        return events
    if hasattr(events, "columns"):  # a DataFrame read from events.csv
        col = {name: events[name].to_numpy() for name in events.columns}
        first_round = 1
    else:
        from edgefl.sim.activities import Event

        events = list(events or [])
        transposed = list(zip(*events)) if events else [()] * len(Event._fields)
        col = dict(zip(Event._fields, transposed))
        first_round = 0
    return EventArrays(
        round=np.asarray(col["round"], dtype=np.int64) - first_round,
        phase=np.asarray(col["phase"], dtype=np.int64),
        client=np.asarray(col["client"], dtype=np.int64),
        kind=np.asarray(col["kind"], dtype=str),
        start_s=np.asarray(col["start_s"], dtype=float),
        end_s=np.asarray(col["end_s"], dtype=float),
        energy_j=np.asarray(col["energy_j"], dtype=float),
        category=np.asarray(col["category"], dtype=str),
        status=np.asarray(col["status"], dtype=str),
    )


def _records(rows) -> list[dict]:
    if rows is None:
        return []
    if hasattr(rows, "to_dict"):  # a DataFrame
        return rows.to_dict("records")
    return list(rows)


def _new_figure(fig, size):
    if fig is None:  # at the PNG's dpi: the layout's text metrics are then the ones savefig draws with
        return plt.figure(figsize=size, dpi=DPI)
    fig.set_size_inches(*size)
    return fig


def tight(fig, **kwargs) -> None:
    """``fig.tight_layout(**kwargs)``, then no layout engine left on the figure. tight_layout leaves a
    placeholder engine behind, and savefig draws a figure that has an engine twice (a draw without
    rendering first, for the engine): the text layout of every tick label, title and legend twice."""
    fig.tight_layout(**kwargs)
    if matplotlib.rcParams["figure.autolayout"] or matplotlib.rcParams["figure.constrained_layout.use"]:
        with matplotlib.rc_context({"figure.autolayout": False, "figure.constrained_layout.use": False}):
            fig.set_layout_engine(None)
    else:
        fig.set_layout_engine(None)


def bars(ax, x, heights, bottom=None, width: float = 0.85, **kwargs) -> PolyCollection:
    """Vertical bars as one PolyCollection: ``ax.bar`` makes one Rectangle artist per bar, each added and
    drawn on its own (~1 ms a bar; a 50-round stack of 4 categories is 200 of them). The collection's
    rectangles are the bars in ``x`` order, zero heights included; it sticks to y = 0 as bars do."""
    x = np.asarray(x, dtype=float)
    y0 = np.zeros(len(x)) if bottom is None else np.asarray(bottom, dtype=float)
    y1 = y0 + np.asarray(heights, dtype=float)
    x0, x1 = x - width / 2, x + width / 2
    corners = np.stack([np.stack(p, axis=1) for p in ((x0, y0), (x0, y1), (x1, y1), (x1, y0))], axis=1)
    collection = PolyCollection(corners, linewidths=0, **kwargs)
    collection.sticky_edges.y.append(0.0)
    ax.add_collection(collection)
    ax.autoscale_view()  # matplotlib < 3.11 updates only the data limits in add_collection
    return collection


CHAR_EM = 0.5  # mean width of a character of a title in DejaVu Sans, in em (measured: 0.45 on a run title)


def fit_title(text: str, width_in: float, fontsize: float = 9) -> str:
    """``text`` with each line wrapped to ``width_in`` inches at ``fontsize`` points: a multi-cell run's title
    (its cells, reuse, controller) is longer than a figure is wide."""
    chars = max(20, int(width_in * 72 / (CHAR_EM * fontsize)))
    lines = []
    for line in text.split("\n"):
        current = ""
        for part in re.split(r"(?<=[;,]) ", line):  # break between the title's items ("10 MHz fdma" stays whole)
            if current and len(current) + 1 + len(part) > chars:
                lines.append(current)
                current = ""
            current = f"{current} {part}" if current else part
        lines += textwrap.wrap(current, chars, break_on_hyphens=False) or [""]  # an item longer than a line
    return "\n".join(lines)


def _suptitle(fig, title: str, what: str) -> None:
    fig.suptitle(fit_title(f"{title}\n{what}" if title else what, fig.get_figwidth()), fontsize=9)


def round_label(asynchronous: bool = False) -> str:
    """The name of a round on a figure's axis: an asynchronous run's round is one server update (one model version,
    docs/asynchronous.md), which the figures say, with the CSV files' name for it."""
    return "server update (round in the CSV files)" if asynchronous else "round"


def per_round(asynchronous: bool = False) -> str:
    """The words "per round", or for an asynchronous run "per server update" (:func:`round_label`)."""
    return "per server update" if asynchronous else "per round"


# ------------------------------------------------------------------------------------------------ uploads


def _missed_status(ev: EventArrays) -> np.ndarray:
    """Per event: 0 ok (or a radio tail / idle wait), 1 cut (deadline), 2 lost (every attempt failed:
    outage or packet error), 3 any other stop (offline, failed, stopped by over-selection)."""
    work = (ev.kind != "tail") & (ev.kind != "idle") & (ev.status != "ok")  # a cut promotion: its message missed
    return np.where(~work, 0, np.where(ev.status == "cut", 1, np.where(ev.status == "lost", 2, 3)))


def uploads_missed_per_round(events, rounds: int | None = None) -> dict[str, np.ndarray]:
    """Per round (index 0 = round 1), the number of distinct clients whose upload did not arrive: ``cut``
    (the deadline), ``lost`` (every attempt failed: outage or packet error) and ``other`` (the device went
    offline or failed, or over-selection stopped it), from the upload events (and, for ``other`` and a
    deadline that fired earlier, the client's other activities). A client counts once a round, under the
    first of cut, lost, other that applies."""
    ev = event_arrays(events)
    n = max(rounds or 0, ev.rounds)
    code = _missed_status(ev)
    clients = int(ev.client.max()) + 1 if len(ev) else 1
    bad = np.flatnonzero(code > 0)
    key = ev.round[bad] * clients + ev.client[bad]
    order = np.lexsort((code[bad], key))  # per (round, client): the first code (cut < lost < other)
    key, first = np.unique(key[order], return_index=True)
    worst = code[bad][order][first]
    return {name: np.bincount(key[worst == c] // clients, minlength=n)[:n] for c, name in enumerate(MISSED, start=1)}


def _other_statuses(events) -> str:
    ev = event_arrays(events)
    return " / ".join(sorted(set(ev.status[_missed_status(ev) == 3].tolist()))) or "offline / failed"


def draw_uploads_missed(events, title: str = "", rounds: int | None = None, fig=None, asynchronous: bool = False):
    """Stacked bars: the clients whose upload was cut, lost or stopped otherwise, in each round (each server update
    of an ``asynchronous`` run)."""
    counts = uploads_missed_per_round(events, rounds)
    fig = _new_figure(fig, (7, 3.8))
    ax = fig.add_subplot()
    x = np.arange(1, len(counts["cut"]) + 1)
    colors = {"cut": "#dd8452", "lost": "#c44e52", "other": "#8172b3"}
    labels = {"cut": "cut (deadline)", "lost": "lost (outage / packet error)", "other": _other_statuses(events)}
    bottom = np.zeros(len(x))
    for status in MISSED:
        if not counts[status].any() and status == "other":
            continue
        if len(x) <= MAX_ROUND_BARS:
            bars(ax, x, counts[status], bottom, facecolors=colors[status], label=labels[status])
        else:
            ax.fill_between(
                x, bottom, bottom + counts[status], step="mid", color=colors[status], label=labels[status], lw=0
            )
        bottom = bottom + counts[status]
    total = int(bottom.sum())
    ax.set_xlabel(round_label(asynchronous))
    ax.set_ylabel("uploads missed (clients)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(bottom=0, top=max(1.0, float(bottom.max(initial=0)) * 1.35))  # room for the legend
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8, loc="upper left", ncol=3)
    other = int(counts["other"].sum())
    _suptitle(
        fig,
        title,
        f"uploads missed {per_round(asynchronous)} (clients): {int(counts['cut'].sum())} cut, "
        f"{int(counts['lost'].sum())} lost"
        + (f", {other} {labels['other']}" if other else "")
        + (" (none)" if total == 0 else ""),
    )
    tight(fig)
    return fig


# ------------------------------------------------------------------------------------------------ energy


def energy_per_round(events, rounds: int | None = None) -> dict[str, np.ndarray]:
    """Energy (J) per round and category, summed over devices (index 0 = round 1)."""
    ev = event_arrays(events)
    n = max(rounds or 0, ev.rounds)
    return {
        c.key: np.bincount(ev.round, weights=np.where(ev.category == c.key, ev.energy_j, 0.0), minlength=n)[:n]
        for c in ENERGY_CATEGORIES
    }


def draw_energy_rounds(events, title: str = "", rounds: int | None = None, fig=None, asynchronous: bool = False):
    """Stacked bars (a stack plot beyond MAX_ROUND_BARS rounds): energy per round (per server update of an
    ``asynchronous`` run) by category (:data:`ENERGY_CATEGORIES`)."""
    per = energy_per_round(events, rounds)
    fig = _new_figure(fig, (7, 3.8))
    ax = fig.add_subplot()
    n = len(next(iter(per.values())))
    x = np.arange(1, n + 1)
    if n <= MAX_ROUND_BARS:
        bottom = np.zeros(n)
        for c in ENERGY_CATEGORIES:
            bars(ax, x, per[c.key], bottom, facecolors=c.color, label=c.label)
            bottom += per[c.key]
    else:
        ax.stackplot(
            x,
            *[per[c.key] for c in ENERGY_CATEGORIES],
            labels=[c.label for c in ENERGY_CATEGORIES],
            colors=[c.color for c in ENERGY_CATEGORIES],
        )
    total = sum(float(v.sum()) for v in per.values())
    ax.set_xlabel(round_label(asynchronous))
    ax.set_ylabel(f"energy in the {'server update' if asynchronous else 'round'}, all devices (J)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(bottom=0)
    _clip_last_round(ax, sum(per.values()), asynchronous)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    shares = (
        ", ".join(f"{c.label} {100 * per[c.key].sum() / total:.0f} %" for c in ENERGY_CATEGORIES)
        if total > 0
        else "no energy"
    )
    _suptitle(fig, title, f"energy booked {per_round(asynchronous)} by category (total {total:.3g} J: {shares})")
    tight(fig)
    return fig


LAST_ROUND_CLIP = 4.0  # the last bar is cut off when it is more than this many times the tallest other one


def _clip_last_round(ax, per_round_j: np.ndarray, asynchronous: bool) -> None:
    """Keep the rounds readable when the last one dwarfs them: the radio tails still running when the run ends are
    charged under its last round (docs/model.md §8), with an LTE tail often most of the run's energy. The y axis
    then stops above the other rounds and the last bar is labelled with its value."""
    if len(per_round_j) < 3:
        return
    others = float(per_round_j[:-1].max())
    last = float(per_round_j[-1])
    if others <= 0 or last <= LAST_ROUND_CLIP * others:
        return
    top = 1.6 * others
    ax.set_ylim(0, top)
    ax.annotate(
        f"{last:.3g} J ↑ (the tails still running at the end\nare charged to the last "
        f"{'server update' if asynchronous else 'round'})",
        xy=(len(per_round_j), top),
        xytext=(-4, -4),
        textcoords="offset points",
        ha="right",
        va="top",
        fontsize=8,
    )


def _client_columns(clients: list[dict]):
    energy = np.array(
        [
            c["energy_j"]
            if c.get("energy_j") is not None
            else sum(c.get(f"{k.key}_energy_j", 0.0) for k in ENERGY_CATEGORIES)
            for c in clients
        ],
        dtype=float,
    )
    snr = np.array([c.get("uplink_snr_db", np.nan) for c in clients], dtype=float)
    if clients and clients[0].get("sinr_db") is not None:  # several cells: the SINR decides the rate (interference)
        snr = np.array([np.nan if c.get("sinr_db") is None else c["sinr_db"] for c in clients], dtype=float)
    distance = np.array([np.nan if c.get("distance_m") is None else c["distance_m"] for c in clients], dtype=float)
    classes = np.array([str(c.get("device_class", "device")) for c in clients])
    ids = np.array([c.get("client", i) for i, c in enumerate(clients)], dtype=np.int64)
    return ids, energy, snr, distance, classes


def _sample(n: int) -> tuple[np.ndarray, str]:
    if n <= MAX_SCATTER:
        return np.arange(n), ""
    keep = np.sort(np.random.default_rng(0).choice(n, MAX_SCATTER, replace=False))
    return keep, f" (a random {MAX_SCATTER:,} of {n:,} devices)"


def _class_colors(classes) -> dict[str, str]:
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    names = list(dict.fromkeys(classes.tolist()))
    return {name: palette[i % len(palette)] for i, name in enumerate(names)}


def draw_energy_snr(clients, title: str = "", fig=None):
    """Energy per device against its mean uplink SNR (several cells: its SINR, clients.csv ``sinr_db``, which
    decides its rate) and, where devices have a distance, against distance; coloured by device class. None when
    no device has an uplink SNR."""
    clients = _records(clients)
    if not clients:
        return None
    ids, energy, snr, distance, classes = _client_columns(clients)
    if not np.isfinite(snr).any():
        return None
    cells = clients[0].get("sinr_db") is not None
    panels = [
        (
            "uplink_snr",
            snr,
            "mean uplink SINR over the band, before fading (dB):\ninterference from the co-channel cells"
            if cells
            else "mean uplink SNR over the band, before fading (dB)",
        )
    ]
    if np.isfinite(distance).any():
        panels.append(("distance", distance, f"distance to {'its serving' if cells else 'the'} base station (m)"))
    same = [(name, x) for name, x, _ in panels if np.nanmax(x) == np.nanmin(x)]
    if len(same) == len(panels):  # every device on the same link (e.g. one scenario SNR): one vertical strip;
        # instead, energy by client, the common link said on the axis
        words = {"uplink_snr": f"mean uplink {'SINR' if cells else 'SNR'} {{:g}} dB", "distance": "distance {:g} m"}
        link = ", ".join(words[name].format(float(np.nanmax(x))) for name, x in same)
        panels = [("client", ids.astype(float), f"client (every device has the same link: {link})")]
    keep, note = _sample(len(clients))
    colors = _class_colors(classes)
    fig = _new_figure(fig, (5.2 * len(panels), 4))
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    size = 18 if len(keep) <= 200 else max(2.0, 18 * math.sqrt(200 / len(keep)))
    for ax, (_, x, label) in zip(axes, panels):
        for name, color in colors.items():
            sel = keep[classes[keep] == name]
            ax.scatter(
                x[sel],
                energy[sel],
                s=size,
                color=color,
                alpha=0.75,
                lw=0,
                label=f"{name} ({int((classes == name).sum())})",
            )
        ax.set_xlabel(label)
        ax.set_ylabel("energy per device, whole run (J)")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8, title="device class", title_fontsize=8)
    _suptitle(
        fig,
        title,
        (
            "energy per device, all on the same link"
            if panels[0][0] == "client"
            else "energy per device against its link"
        )
        + note,
    )
    tight(fig)
    return fig


# ------------------------------------------------------------------------------------------------ cell map


def device_positions(clients, positions=None) -> tuple[np.ndarray, np.ndarray, bool] | None:
    """(x, y) in metres of every client in ``clients`` order and whether the angles are real: each moving
    device's last position from ``positions`` (positions.csv rows), otherwise its distance on an angle
    spread evenly by client index (the link budget models distances only). None without distances."""
    clients = _records(clients)
    ids = np.array([c.get("client", i) for i, c in enumerate(clients)], dtype=np.int64)
    if clients and clients[0].get("x_m") is not None:  # several cells: clients.csv has the positions
        xy = np.array([(c["x_m"], c["y_m"]) for c in clients], dtype=float)
        return xy[:, 0], xy[:, 1], True
    rows = _records(positions)
    if rows and {"client", "x_m", "y_m"} <= set(rows[0]):
        last: dict[int, tuple[float, float]] = {}
        for row in reversed(rows):  # rows in round order: the last round's come last
            last.setdefault(int(row["client"]), (row["x_m"], row["y_m"]))
            if len(last) == len(ids):
                break
        if all(int(i) in last for i in ids):
            xy = np.array([last[int(i)] for i in ids], dtype=float)
            return xy[:, 0], xy[:, 1], True
    if not clients or any(c.get("distance_m") is None for c in clients):  # stops at the first (SNR given)
        return None
    distance = np.array([c["distance_m"] for c in clients], dtype=float)
    if not np.isfinite(distance).all():
        return None
    angle = 2 * np.pi * np.arange(len(ids)) / len(ids)
    return distance * np.cos(angle), distance * np.sin(angle), False


SECTOR_COLORS = ("#4c72b0", "#dd8452", "#55a868", "#8172b3", "#937860", "#da8bc3")  # device-to-site lines, by sector
MAX_MAP_TICKS = 7  # tick labels per axis of the cell map: 19 cells span ±2.3 km at the 3GPP spacing


def draw_cell_map(
    clients,
    positions=None,
    cell_radius_m: float | None = None,
    title: str = "",
    fig=None,
    sites_m=None,
    sectors: int = 1,
):
    """The cell seen from above: base station at the centre, devices coloured by their total energy, the cell
    radius. None when the devices have no distance (scenarios that give the SNR). Several cells (``sites_m``: each
    cell's base station [C, 2], a site's ``sectors`` sharing its position, edgefl.deployment.cell_map_sites_m;
    clients with a ``cell``): every site (numbered), a line from each device to its serving cell's site (cell c is
    sector c mod ``sectors`` of site c // ``sectors``; with sectors, one colour per sector) and a ring around the
    devices that changed cell. The legend, below the map, names every mark."""
    clients = _records(clients)
    where = device_positions(clients, positions)
    if where is None:
        return None
    x, y, real = where
    _, energy, _, _, _ = _client_columns(clients)
    keep, note = _sample(len(x))
    fig = _new_figure(fig, (6, 6))
    ax = fig.add_subplot()
    size = 22 if len(keep) <= 200 else max(2.0, 22 * math.sqrt(200 / len(keep)))
    points = ax.scatter(
        x[keep], y[keep], c=energy[keep], s=size, cmap="viridis", lw=0, zorder=3, label="device (colour: its energy)"
    )
    fig.colorbar(points, ax=ax, label="energy per device, whole run (J)")
    several = sites_m is not None and len(sites_m) > 1 and bool(clients) and clients[0].get("cell") is not None
    if several:
        sites = np.asarray(sites_m, dtype=float)  # per cell
        cell = np.array([int(c["cell"]) for c in clients])[keep]
        sector = cell % sectors
        for k in range(sectors):  # one collection per sector: one artist and one legend entry each
            pick = sector == k
            segments = np.stack(
                [np.stack([x[keep][pick], y[keep][pick]], axis=1), sites[cell[pick]]], axis=1
            )  # [n, 2 ends, (x, y)]
            ax.add_collection(
                LineCollection(
                    segments,
                    colors="#999999" if sectors == 1 else SECTOR_COLORS[k % len(SECTOR_COLORS)],
                    lw=0.5,
                    zorder=2,
                    label="line: device to the base station serving it"
                    if sectors == 1
                    else f"line: device to its site, sector {k + 1} serving it",
                )
            )
        moved = np.array([int(c.get("handovers") or 0) > 0 for c in clients])[keep]
        if moved.any():
            ax.scatter(
                x[keep][moved],
                y[keep][moved],
                s=3 * size,
                facecolors="none",
                edgecolors="red",
                lw=0.8,
                zorder=4,
                label="ring: device that changed cell (handover)",
            )
        sites = sites[::sectors]  # one per site
        ax.plot(
            sites[:, 0],
            sites[:, 1],
            marker="^",
            color="black",
            ms=9,
            ls="none",
            zorder=4,
            label="base station (site number)" if sectors == 1 else f"site (its number), {sectors} sectors each",
        )
        for i, (sx, sy) in enumerate(sites):
            ax.annotate(str(i), (sx, sy), textcoords="offset points", xytext=(5, 5), fontsize=7, zorder=5)
        cell_radius_m = None  # the lines to the sites show the cells
    else:
        ax.plot(0, 0, marker="^", color="black", ms=11, ls="none", zorder=4, label="base station")
    reach = float(np.hypot(x, y).max(initial=0.0))
    if cell_radius_m:
        ax.add_patch(
            Circle(
                (0, 0),
                cell_radius_m,
                fill=False,
                ls="--",
                color="#555555",
                lw=1,
                label=f"cell radius {cell_radius_m:g} m",
            )
        )
        reach = max(reach, cell_radius_m)
    lim = 1.08 * reach if reach > 0 else 1.0
    ax.set_xlim(-lim, lim)
    ax.set_ylim(-lim, lim)
    ax.set_aspect("equal")
    unit = "km" if lim >= 5000 else "m"  # 19 cells of a few km: "−20" rather than "−20000"
    for axis in (ax.xaxis, ax.yaxis):  # round numbers, few enough not to touch (MAX_MAP_TICKS)
        axis.set_major_locator(MaxNLocator(nbins=MAX_MAP_TICKS - 1, steps=[1, 2, 2.5, 5, 10]))
        if unit == "km":
            axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / 1000:g}".replace("-", "\N{MINUS SIGN}")))
    ax.set_xlabel(f"x ({unit})")
    ax.set_ylabel(f"y ({unit})")
    ax.grid(alpha=0.3)
    columns = 2 if sectors == 1 else 1  # sectors' longer entries one a line, clear of the colour bar
    legend = ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.11), ncol=columns, frameon=False)
    fig.set_size_inches(6, 5.6 + 0.22 * math.ceil(len(legend.get_texts()) / columns))  # room below the map for it
    how = (
        "each device at its last position"
        if real
        else "angles not modelled: devices spread evenly, each at its distance"
    )
    _suptitle(fig, title, f"the {'cells' if several else 'cell'} ({how}){note}")
    tight(fig)
    return fig


# ------------------------------------------------------------------------------------------------ gantt

DIGIT_EM = 0.64  # width of a digit in DejaVu Sans, matplotlib's default font (0.636 em), rounded up


def row_labels(ax, labels: list[str], fontsize: float, ylabel: str) -> None:
    """Rows 0, 1, ... of ``ax`` labelled with ``labels`` (numbers) as y tick labels look, and ``ylabel``
    beside them, without y ticks: a matplotlib tick is several artists whose boxes every layout pass and
    draw measure again (40 rows cost ~0.3 s a panel); here one text per row and one line of tick marks."""
    fig = ax.figure
    rows = np.arange(len(labels))
    size, pad = matplotlib.rcParams["ytick.major.size"], matplotlib.rcParams["ytick.major.pad"]
    ax.set_yticks([])
    left = blended_transform_factory(ax.transAxes, ax.transData)  # x: axes fraction, y: row
    ax.plot(
        np.zeros(len(rows)),
        rows,
        ls="none",
        marker=TICKLEFT,
        ms=size,
        mew=matplotlib.rcParams["ytick.major.width"],
        color=matplotlib.rcParams["ytick.color"],
        transform=left,
        clip_on=False,
    )
    shift = ScaledTranslation(-(size + pad) / 72, 0, fig.dpi_scale_trans)
    for y, text in zip(rows.tolist(), labels):
        ax.text(0, y, text, transform=left + shift, ha="right", va="center_baseline", fontsize=fontsize)
    width = max((len(t) for t in labels), default=0) * DIGIT_EM * fontsize  # points
    ax.set_ylabel(ylabel)
    ax.yaxis.set_label_coords(
        0,
        0.5,
        transform=ax.transAxes
        + ScaledTranslation(-(size + pad + width + matplotlib.rcParams["axes.labelpad"]) / 72, 0, fig.dpi_scale_trans),
    )


def round_ends(metrics) -> dict[int, float]:
    """Each round's end in simulated time (s), by round from 0 as the engine counts (metrics.csv rows)."""
    return {int(row["round"]) - 1: float(row["sim_time_s"]) for row in metrics if row.get("sim_time_s") is not None}


def gantt_rounds(events, rounds=None, max_rounds: int = MAX_GANTT_ROUNDS) -> list[int]:
    """The rounds a Gantt chart shows (engine numbering, from 0): ``rounds`` (numbered from 1, as in the CSV
    files) when given, otherwise the first round and the round with the most uploads missed (cut, lost or
    other; if any)."""
    ev = event_arrays(events)
    if not len(ev):
        return []
    present = set(np.unique(ev.round).tolist())
    if rounds is not None:
        return [r for r in dict.fromkeys(int(r) - 1 for r in rounds) if r in present][:max_rounds]
    picks = [min(present)]
    missed = uploads_missed_per_round(ev)
    total = sum(missed.values())
    if total.any():
        picks.append(int(np.argmax(total)))  # the earliest of the worst rounds
    return sorted(dict.fromkeys(picks))[:max_rounds]


def _round_window(ev: EventArrays, mask: np.ndarray, r: int, round_ends: dict[int, float] | None):
    """(start, end) of round ``r`` in simulated seconds: from the metrics' end times where given (a round
    starts when the previous one ended), otherwise from its events (tails outlive the round: left out)."""
    body = mask & (ev.kind != "tail")
    if not body.any():
        body = mask
    start = float(ev.start_s[body].min())
    end = float(ev.end_s[body].max())
    if round_ends:
        start = min(start, round_ends.get(r - 1, 0.0 if r == 0 else start))
        end = round_ends.get(r, end)
    return start, end


def _interesting(ev: EventArrays, mask: np.ndarray, limit: int) -> tuple[np.ndarray, int]:
    """The clients of the round to show: all when at most ``limit``, otherwise those whose upload was missed
    (cut, lost, other) first, then the ones that finished last (stragglers)."""
    clients = np.unique(ev.client[mask])
    if len(clients) <= limit:
        return clients, len(clients)
    index = np.searchsorted(clients, ev.client[mask])
    work = ev.kind[mask] != "tail"
    finish = np.full(len(clients), -np.inf)
    np.maximum.at(finish, index[work], ev.end_s[mask][work])
    missed = np.zeros(len(clients), dtype=bool)
    missed[index[_missed_status(ev)[mask] > 0]] = True
    order = np.lexsort((-finish, ~missed))  # missed first, then latest finish
    return np.sort(clients[order[:limit]]), len(clients)


def chain_starts(ev: EventArrays) -> np.ndarray:
    """Per event of an asynchronous run, the start (simulated time) of the chain it belongs to; nan for radio tails
    and idle waits. A chain is one client's [promotion →] download → compute → upload, dispatched as a whole; its
    events are logged under the round in progress when each ends, so a chain can span rounds: a client's activities
    in time order, a chain begins at a promotion, at a download that no promotion led into, or after an activity
    that did not complete (cut, lost, offline: that chain ended there)."""
    starts = np.full(len(ev.kind), np.nan)
    own = np.flatnonzero(~np.isin(ev.kind, ("tail", "idle")))
    if not len(own):
        return starts
    i = own[np.lexsort((ev.end_s[own], ev.start_s[own], ev.client[own]))]  # by client, then time
    kind, client = ev.kind[i], ev.client[i]
    new = np.ones(len(i), dtype=bool)
    new[1:] = (
        (client[1:] != client[:-1])
        | (kind[1:] == "promotion")
        | ((kind[1:] == "download") & (kind[:-1] != "promotion"))
        | (ev.status[i][:-1] != "ok")
    )
    first = i[new]
    starts[i] = ev.start_s[first][np.cumsum(new) - 1]
    return starts


def draw_gantt(
    events,
    title: str = "",
    rounds=None,
    deadline_s: float | None = None,
    round_ends: dict[int, float] | None = None,
    max_rows: int = MAX_GANTT_ROWS,
    fig=None,
    chains: bool = False,
):
    """Gantt chart of a few rounds side by side (:func:`gantt_rounds`): one row per device (at most
    ``max_rows``: :func:`_interesting`), bars for download / compute / upload, its idle wait as a light
    background, radio tails as thin bars; cut, lost (or otherwise stopped) activities hatched and marked with
    a red x; the deadline of each phase as a vertical line, or with ``chains`` (an asynchronous run, whose
    chains start at different times) the deadline of each chain on its row: its start (:func:`chain_starts`) +
    ``deadline_s``. Times are relative to the round's start.
    ``round_ends``: engine round -> simulated end time (metrics sim_time_s). None when there are no events."""
    ev = event_arrays(events)
    picks = gantt_rounds(ev, rounds)
    if not picks:
        return None
    panels = []
    for r in picks:
        mask = ev.round == r
        shown, participants = _interesting(ev, mask, max_rows)
        panels.append((r, mask, shown, participants))
    rows = max(len(shown) for _, _, shown, _ in panels)
    fig = _new_figure(fig, (5.4 * len(panels), max(3.2, 0.2 * rows + 1.9)))
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    heights = {"idle": 0.84, "tail": 0.22, "promotion": 0.22, "download": 0.6, "compute": 0.6, "upload": 0.6}
    zorders = {"idle": 1, "tail": 2, "promotion": 2, "download": 3, "compute": 3, "upload": 3}
    code_all = _missed_status(ev)
    starts_of_chain = chain_starts(ev) if chains and deadline_s is not None else None
    seen_codes: set[int] = set()
    for ax, (r, mask, shown, participants) in zip(axes, panels):
        start, end = _round_window(ev, mask, r, round_ends)
        sel = mask & np.isin(ev.client, shown)
        row = np.searchsorted(shown, ev.client[sel])
        left = ev.start_s[sel] - start
        width = ev.end_s[sel] - ev.start_s[sel]
        kind, code = ev.kind[sel], code_all[sel]
        for k, h in heights.items():
            for c in range(len(MISSED) + 1):
                pick = (kind == k) & (code == c)
                if not pick.any():
                    continue
                x0, x1 = left[pick], left[pick] + width[pick]
                y0, y1 = row[pick] - h / 2, row[pick] + h / 2
                corners = np.stack([np.stack(p, axis=1) for p in ((x0, y0), (x0, y1), (x1, y1), (x1, y0))], axis=1)
                ax.add_collection(
                    PolyCollection(  # one artist per kind and status: cheap for many bars
                        corners,
                        facecolors=KIND_COLORS[k],
                        zorder=zorders[k],
                        linewidths=0.8 if c else 0,
                        edgecolors="#c44e52" if c else "none",
                        hatch=HATCHES[c],
                    )
                )
        bad = code > 0
        if bad.any():
            seen_codes |= set(np.unique(code[bad]).tolist())
            ax.plot(left[bad] + width[bad], row[bad], "x", color="#c44e52", ms=7, mew=2, zorder=5)
        missed_here = int(len(np.unique(ev.client[mask & (code_all > 0)])))
        span = end - start
        if starts_of_chain is not None:
            chains_here = np.unique(np.stack([ev.client[sel], starts_of_chain[sel]], axis=1), axis=0)
            chains_here = chains_here[np.isfinite(chains_here[:, 1])]  # (client, chain start) of the panel's chains
            chain_rows = np.searchsorted(shown, chains_here[:, 0].astype(np.int64))
            deadlines = chains_here[:, 1] + deadline_s - start
            ax.vlines(deadlines, chain_rows - 0.45, chain_rows + 0.45, color="#c44e52", ls="--", lw=1.2, zorder=6)
            span = max(span, float(deadlines.max(initial=0.0)))
        elif deadline_s is not None:
            for p in np.unique(ev.phase[mask]).tolist():
                phase_start = (
                    start
                    if p == np.min(ev.phase[mask])
                    else float(ev.end_s[mask & (ev.phase == p - 1) & (ev.kind != "tail")].max(initial=start))
                )
                ax.axvline(phase_start - start + deadline_s, color="#c44e52", ls="--", lw=1.2, zorder=6)
                span = max(span, phase_start - start + deadline_s)
        row_labels(ax, [str(c) for c in shown.tolist()], 7 if len(shown) <= 20 else 5.5, "client")
        ax.set_ylim(len(shown) - 0.5, -0.5)  # first client on top
        ax.set_xlim(0, span * 1.04 if span > 0 else 1.0)
        ax.set_xlabel(f"time since the {'previous server update' if chains else 'round started'} (s)")
        ax.grid(alpha=0.3, axis="x")
        shown_note = (
            f"; {len(shown)} of {participants} devices shown (cut/lost, then slowest)"
            if len(shown) < participants
            else f"; {participants} devices"
        )
        ax.set_title(
            f"{'server update' if chains else 'round'} {r + 1}: {missed_here} upload{'s' if missed_here != 1 else ''} "
            f"missed{shown_note}",
            fontsize=8,
        )
    drawn = set(np.unique(ev.kind[np.isin(ev.round, picks)]).tolist())
    handles = [
        Patch(color=KIND_COLORS[k], label=k if k != "idle" else "idle (waiting)")
        for k in ("download", "compute", "upload", "idle", "promotion", "tail")
        if k in drawn
    ]
    names = {1: "cut (deadline)", 2: "lost", 3: _other_statuses(ev)}
    for c in sorted(seen_codes):
        handles.append(Patch(facecolor="white", edgecolor="#c44e52", hatch=HATCHES[c], label=names[c]))
    if deadline_s is not None:
        per = "after each chain's start" if chains else "per phase"
        handles.append(Line2D([], [], color="#c44e52", ls="--", label=f"deadline {deadline_s:g} s {per}"))
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 4 * len(panels)), fontsize=7, frameon=False)
    what = (
        "up to each server update shown (bars beyond it: radio tails)"
        if chains
        else "in the rounds shown (bars beyond the round end: radio tails)"
    )
    _suptitle(fig, title, f"who did what when, {what}")
    tight(fig, rect=(0, 0.06 if rows > 8 else 0.09, 1, 1))
    return fig
