"""The plots of one run drawn from its events and clients (edgefl.run_plots, docs/run-plots.md): written by
``edgefl run``, counts that match the event log, the Gantt chart's rounds, the cell map's skip for scenarios
that give the SNR, and the aggregation of large populations."""

from __future__ import annotations

import collections
import time
from pathlib import Path

import matplotlib.collections
import matplotlib.image
import matplotlib.pyplot as plt
import numpy as np
import pytest

from edgefl import run_plots
from edgefl.api import PLOT_KINDS, run
from edgefl.plots import plot_run
from edgefl.runner import Simulation
from edgefl.scenario import load_scenario
from edgefl.sim.activities import Event

REPO = Path(__file__).resolve().parents[1]
PHONES = REPO / "scenarios" / "phones-in-a-cell.toml"
QUICKSTART = REPO / "scenarios" / "quickstart.toml"
EVENT_PLOTS = ("gantt.png", "energy_rounds.png", "energy_snr.png", "cell_map.png", "uploads_missed.png")


@pytest.fixture(scope="module")
def phones(tmp_path_factory):
    """Four rounds of 50 walking phones, with a deadline tight enough to cut several uploads a round."""
    out = tmp_path_factory.mktemp("phones") / "out"
    r = run(PHONES, overrides={"run.rounds": 4, "run.eval_every": 4, "network.deadline_s": 0.25}, progress=False)
    r.save(out, plots=True)
    return r, out


@pytest.fixture(scope="module")
def quickstart():
    return run(QUICKSTART, overrides={"run.rounds": 2}, progress=False)


def test_edgefl_run_writes_the_event_plots(phones):
    _, out = phones
    for name in EVENT_PLOTS + ("accuracy.png", "energy_clients.png", "battery.png"):
        image = matplotlib.image.imread(out / name)
        assert image.shape[0] > 200 and image.shape[1] > 200, name
        assert image[..., :3].std() > 0.01, name  # not blank


def test_uploads_missed_counts_are_the_clients_of_the_event_log(phones):
    r, _ = phones
    why = {}  # (round, client) -> why its upload did not arrive: cut before lost before any other stop
    rank = {"cut": 0, "lost": 1}
    for e in r.raw.events:
        if e.kind not in ("tail", "idle") and e.status != "ok":
            status = e.status if e.status in rank else "other"
            key = (e.round, e.client)
            if key not in why or rank.get(status, 2) < rank.get(why[key], 2):
                why[key] = status
    counts = run_plots.uploads_missed_per_round(r.raw.events, rounds=4)
    for status in ("cut", "lost", "other"):
        per_round = collections.Counter(k[0] for k, v in why.items() if v == status)
        assert counts[status].tolist() == [per_round[k] for k in range(4)], status
    assert counts["cut"].sum() > 0  # the tight deadline cuts uploads
    # every upload that did not arrive is in the plot (one upload per client and round in FedAvg)
    assert sum(int(c.sum()) for c in counts.values()) == r.summary["uploads_missed"]

    fig = run_plots.draw_uploads_missed(r.raw.events, rounds=4)
    ax = fig.axes[0]
    cut_bars = next(c for c in ax.collections if c.get_label() == "cut (deadline)")  # one rectangle a round
    assert [round(float(np.ptp(p.vertices[:4, 1]))) for p in cut_bars.get_paths()] == counts["cut"].tolist()
    plt.close(fig)


def test_the_events_csv_frame_gives_the_same_counts(phones):
    r, _ = phones  # Result.events: events.csv as a DataFrame, rounds numbered from 1
    from_frame = run_plots.uploads_missed_per_round(r.events, rounds=4)
    from_events = run_plots.uploads_missed_per_round(r.raw.events, rounds=4)
    assert all((from_frame[k] == from_events[k]).all() for k in from_events)


def test_energy_per_round_adds_up_to_the_metrics(phones):
    r, _ = phones
    per = run_plots.energy_per_round(r.raw.events, rounds=4)
    for category in ("compute", "uplink", "downlink", "idle"):
        cumulative = r.metrics[f"{category}_energy_j"].to_numpy()
        assert np.allclose(np.cumsum(per[category]), cumulative, rtol=1e-9, atol=1e-12), category


def test_gantt_shows_the_first_round_and_the_worst(phones):
    r, _ = phones
    counts = run_plots.uploads_missed_per_round(r.raw.events, rounds=4)
    total = sum(counts.values())
    worst = int(np.argmax(total))
    assert run_plots.gantt_rounds(r.raw.events) == sorted({0, worst})
    assert run_plots.gantt_rounds(r.raw.events, rounds=[2, 4, 99]) == [1, 3]  # numbered from 1; 99 absent
    fig = run_plots.draw_gantt(r.raw.events, rounds=[2, 4], deadline_s=0.25)
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title().split(":")[0] for ax in panels] == ["round 2", "round 4"]
    for ax, r_ in zip(panels, (1, 3)):  # the deadline line, 0.25 s after the round's start
        assert any(np.allclose(line.get_xdata(), 0.25) for line in ax.get_lines())
        # one row a client of the round, top to bottom, labelled with its id
        clients = sorted({e.client for e in r.raw.events if e.round == r_})
        assert [int(t.get_text()) for t in ax.texts] == clients
        assert [t.get_position()[1] for t in ax.texts] == list(range(len(clients)))
    plt.close(fig)


def test_an_asynchronous_gantt_marks_each_chains_own_deadline_not_one_per_phase():
    """FedBuff's chains start whenever a slot frees and run across rounds: the deadline of each chain is drawn on
    its row at its dispatch + deadline_s (the moments the pricer started the chains, recorded here), no line
    across the panel."""
    deadline = 0.4
    scenario = load_scenario(
        PHONES, ["algorithm.name=fedbuff", "algorithm.fedbuff.buffer_size=3", "run.rounds=6", "run.eval_every=6"]
    )
    sim = Simulation(scenario)
    dispatched: dict[int, list[float]] = collections.defaultdict(list)  # client -> the times its chains started
    start_chains = sim.pricer.start_chains

    def record(phase):
        for client in phase.chains:
            dispatched[client].append(sim.pricer.now)
        return start_chains(phase)

    sim.pricer.start_chains = record
    result = sim.run(progress=False)
    ev = run_plots.event_arrays(result.events)
    starts = run_plots.chain_starts(ev)
    own = ~np.isin(ev.kind, ("tail", "idle"))
    for i in np.flatnonzero(own):  # each activity belongs to its client's latest chain started by then
        assert starts[i] == max(t for t in dispatched[ev.client[i]] if t <= ev.start_s[i] + 1e-12)
    assert np.isnan(starts[~own]).all()
    spanning = {(c, s) for c, s, r in zip(ev.client[own], starts[own], ev.round[own])}
    assert len(spanning) < len({(c, s, r) for c, s, r in zip(ev.client[own], starts[own], ev.round[own])})

    fig = run_plots.draw_gantt(
        result.events, deadline_s=deadline, chains=True, round_ends=run_plots.round_ends(result.metrics)
    )
    panels = [ax for ax in fig.axes if ax.get_title()]
    for ax in panels:
        name, number = ax.get_title().split(":")[0].rsplit(" ", 1)
        assert name == "server update"  # an asynchronous run's round is one server update
        rnd = int(number) - 1
        shown = [int(t.get_text()) for t in ax.texts]
        here = own & (ev.round == rnd) & np.isin(ev.client, shown)
        expected = sorted({(shown.index(int(c)), s + deadline) for c, s in zip(ev.client[here], starts[here])})
        marks = [c for c in ax.collections if isinstance(c, matplotlib.collections.LineCollection)]
        assert len(marks) == 1 and not any(line.get_linestyle() == "--" for line in ax.get_lines())  # no axvline
        drawn = sorted(((seg[0][1] + seg[1][1]) / 2, seg[0][0]) for seg in marks[0].get_segments())
        offset = drawn[0][1] - next(x for row, x in expected if row == drawn[0][0])  # times since the round's start
        assert [row for row, _ in drawn] == [row for row, _ in expected]
        np.testing.assert_allclose([x for _, x in drawn], [x + offset for _, x in expected], rtol=0, atol=1e-9)
    assert "after each chain's start" in " ".join(t.get_text() for t in fig.legends[0].get_texts())
    plt.close(fig)
    api = run(PHONES, overrides={"algorithm.name": "fedasync", "run.rounds": 3}, progress=False).plot("gantt")
    assert "after each chain's start" in " ".join(t.get_text() for t in api.legends[0].get_texts())  # as gantt.png
    plt.close(api)


def test_cell_map_uses_the_last_positions_of_moving_devices(phones):
    r, _ = phones
    x, y, real = run_plots.device_positions(r.raw.clients, r.raw.positions)
    last = r.positions[r.positions["round"] == r.positions["round"].max()].sort_values("client")
    assert real and np.allclose(x, last["x_m"]) and np.allclose(y, last["y_m"])
    fixed = run_plots.device_positions(r.raw.clients)  # no positions: distance on evenly spread angles
    assert not fixed[2] and np.allclose(np.hypot(fixed[0], fixed[1]), r.clients["distance_m"])
    fig = run_plots.draw_cell_map(r.raw.clients, None, 500.0)
    assert "angles not modelled: devices spread evenly" in fig._suptitle.get_text()
    plt.close(fig)


def test_cell_map_is_skipped_when_the_scenario_gives_the_snr(quickstart, tmp_path):
    assert run_plots.draw_cell_map(quickstart.raw.clients) is None
    quickstart.save(tmp_path / "out", plots=True)
    written = {p.name for p in (tmp_path / "out").glob("*.png")}
    assert "cell_map.png" not in written
    assert {"gantt.png", "energy_rounds.png", "energy_snr.png", "uploads_missed.png"} <= written
    fig = run_plots.draw_energy_snr(quickstart.raw.clients)
    assert len([ax for ax in fig.axes if ax.get_xlabel()]) == 1  # no distance: the SNR panel only
    plt.close(fig)


def test_result_plot_draws_every_kind(quickstart):
    for kind in PLOT_KINDS:
        if kind == "cell-map":
            with pytest.raises(ValueError, match="no distance"):
                quickstart.plot(kind)
            continue
        fig = quickstart.plot(kind)
        assert fig.axes, kind
        plt.close(fig)


def synthetic_run(clients: int, rounds: int, per_round: int, seed: int = 0):
    """Clients rows and an event log of ``per_round`` clients a round (download, compute, upload; one in
    ten uploads cut at 1 s), without a simulation."""
    rng = np.random.default_rng(seed)
    rows = [
        {
            "client": i,
            "device_class": "phone" if i % 3 else "sensor",
            "distance_m": float(rng.uniform(35, 500)),
            "uplink_snr_db": float(rng.normal(10, 8)),
            "compute_energy_j": 1.0,
            "uplink_energy_j": 2.0,
            "downlink_energy_j": 0.5,
            "idle_energy_j": 0.1,
            "energy_j": 3.6,
        }
        for i in range(clients)
    ]
    events = []
    for r in range(rounds):
        t0 = float(r)
        for c in rng.choice(clients, per_round, replace=False).tolist():
            down, comp, up = rng.uniform(0.01, 0.2, 3)
            cut = rng.random() < 0.1
            t1, t2 = t0 + down, t0 + down + comp
            t3 = t0 + 1.0 if cut else t2 + up
            events += [
                Event(r, 0, c, "download", "broadcast", t0, t1, 1e5, 0.0, 0.01, "downlink", "ok"),
                Event(r, 0, c, "compute", "train", t1, t2, 0.0, 1e6, 0.1, "compute", "ok"),
                Event(
                    r, 0, c, "upload", "upload", t2, min(t3, t0 + 1.0), 1e5, 0.0, 0.2, "uplink", "cut" if cut else "ok"
                ),
            ]
    return rows, events


def test_large_populations_are_aggregated(tmp_path):
    clients, events = synthetic_run(clients=5000, rounds=3, per_round=2000)  # 18,000 events
    started = time.process_time()  # this process's CPU time: steady while other processes load the machine
    written = plot_run(tmp_path, [], clients, title="synthetic", events=events)
    assert time.process_time() - started < 8
    assert {p.name for p in written} >= set(EVENT_PLOTS)
    for path in written:  # nothing with a bar (or a row) per client: every figure stays small
        assert matplotlib.image.imread(path).shape[1] < 2000, path.name
    fig = run_plots.draw_gantt(events, deadline_s=1.0)
    for ax in (a for a in fig.axes if a.get_title()):
        assert len(ax.texts) == run_plots.MAX_GANTT_ROWS  # one client label a row
        assert f"{run_plots.MAX_GANTT_ROWS} of 2000 devices shown" in ax.get_title()
    plt.close(fig)


def test_a_hundred_thousand_events_plot_quickly(tmp_path):
    clients, events = synthetic_run(clients=20_000, rounds=10, per_round=4000)  # 120,000 events
    started = time.process_time()
    ev = run_plots.event_arrays(events)
    for draw in (run_plots.draw_energy_rounds, run_plots.draw_uploads_missed, run_plots.draw_gantt):
        plt.close(draw(ev))
    fig = run_plots.draw_energy_snr(clients)  # 20,000 devices: a sample of MAX_SCATTER points
    assert sum(len(c.get_offsets()) for c in fig.axes[0].collections) == run_plots.MAX_SCATTER
    plt.close(fig)
    assert time.process_time() - started < 8


def _box(artist, fig):
    return artist.get_window_extent(fig.canvas.get_renderer())


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


@pytest.mark.parametrize("kind", ["accuracy", "accuracy-energy"])
def test_accuracy_figures_are_one_drawing_with_the_legend_off_the_curves(quickstart, tmp_path, kind):
    from edgefl.plots import _save

    quickstart.save(tmp_path / "out", plots=True)
    fig = quickstart.plot(kind)  # the Python API's figure is the file `edgefl run` writes, byte for byte
    ax = fig.axes[0]
    fig.canvas.draw()
    assert not _overlap(_box(ax.get_legend(), fig), _box(ax.patch, fig))  # below the axes: hides no curve
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "mean",
        "mean ± std across clients (within [0, 1])",
        "worst client",
    ]
    _save(fig, tmp_path / "api.png")
    name = kind.replace("-", "_") + ".png"
    assert (tmp_path / "api.png").read_bytes() == (tmp_path / "out" / name).read_bytes()


def test_energy_snr_with_one_snr_for_every_device_draws_energy_by_client(quickstart):
    fig = run_plots.draw_energy_snr(quickstart.raw.clients)  # the quickstart: every device at 20 dB
    (ax,) = [ax for ax in fig.axes if ax.get_xlabel()]
    assert ax.get_xlabel() == "client (every device has the same link: mean uplink SNR 20 dB)"
    x = np.concatenate([c.get_offsets()[:, 0] for c in ax.collections])
    assert sorted(x) == list(range(len(quickstart.raw.clients)))  # one point per client, not one strip
    plt.close(fig)


def test_battery_title_is_inside_the_figure(tmp_path):
    from edgefl.plots import plot_battery

    title = "fedavg: N = 30, m = 10, τ = 10, η = 0.05; SNR 20 dB, 1 MHz fdma"
    rows = [
        {"round": r, "client": c, "device_class": "phone", "level_j": 2.0 - 0.01 * r * c}
        for r in range(1, 5)
        for c in range(3)
    ]
    path = plot_battery(tmp_path / "battery.png", rows, title)
    image = matplotlib.image.imread(path)
    # the title's text is drawn (dark pixels) in the top rows, and no dark pixel touches the left or right edge
    top = image[: image.shape[0] // 10, :, :3].mean(axis=2)
    assert (top < 0.5).any() and not (top[:, :3] < 0.5).any() and not (top[:, -3:] < 0.5).any()


# ------------------------------------------------------------------------ figures for a paper (issue 32 item 6)


@pytest.fixture(scope="module")
def cells7():
    """Three server updates of FedBuff over 7 cells at reuse 3: a multi-cell asynchronous run."""
    overrides = {"network.cells": 7, "network.reuse": 3, "algorithm.name": "fedbuff", "run.rounds": 3}
    return run(PHONES, overrides={**overrides, "run.eval_every": 1}, progress=False)


def _texts(fig) -> str:
    """Every title of a figure (its suptitle and its axes' titles), lines joined."""
    titles = [fig._suptitle.get_text()] if fig._suptitle is not None else []
    titles += [ax.get_title() for ax in fig.axes]
    return " ".join(" ".join(titles).split())


def _legend_texts(legend) -> list[str]:
    return [t.get_text() for t in legend.get_texts()]


def test_the_energy_split_of_every_figure_reads_one_table_of_the_ledgers_categories(phones):
    from edgefl.plots import draw_energy_clients
    from energy import CATEGORIES

    assert [c.key for c in run_plots.ENERGY_CATEGORIES] == list(CATEGORIES)  # a new category: one entry there
    labels = [c.label for c in run_plots.ENERGY_CATEGORIES]
    r, _ = phones
    for fig in (
        run_plots.draw_energy_rounds(r.raw.events),
        draw_energy_clients(r.raw.clients),
        r.plot("energy"),
    ):
        assert _legend_texts(fig.axes[0].get_legend()) == labels
        plt.close(fig)


def test_multi_cell_titles_name_the_cells_the_reuse_and_the_algorithm(cells7):
    for kind in PLOT_KINDS:
        fig = cells7.plot(kind)
        text = _texts(fig)
        assert "fedbuff:" in text and "7 cells of 500 m, reuse 3" in text, (kind, text)
        plt.close(fig)
    scenario = load_scenario(PHONES, ["control.name=deadline_fit"])
    assert scenario.title().endswith("; controller deadline_fit") and "cells" not in scenario.title()
    assert "controller" not in load_scenario(PHONES, []).title()  # static: the default, not said
    sectors = load_scenario(PHONES, ["network.cells=7", "network.sectors=3", "network.reuse=3"])
    assert "; 7 sites of 500 m, 3 sectors each, reuse 3, 10 MHz" in sectors.title()


def test_titles_wrap_to_the_figure_between_items():
    title = "fedbuff: N = 50, m = 10, τ = 10, η = 0.05; 7 cells of 500 m, reuse 3, 10 MHz fdma, deadline 0.4 s"
    lines = run_plots.fit_title(title, 6).split("\n")
    assert len(lines) == 2 and all(len(line) <= 6 * 72 / (run_plots.CHAR_EM * 9) for line in lines)
    assert " ".join(lines) == title and lines[0].endswith("10 MHz fdma,")  # broken after an item, not inside one


def test_energy_snr_plots_the_sinr_where_interference_exists(cells7, phones):
    fig = cells7.plot("energy-snr")
    ax = fig.axes[0]
    assert ax.get_xlabel().startswith("mean uplink SINR") and "co-channel cells" in ax.get_xlabel()
    x = np.sort(np.concatenate([c.get_offsets()[:, 0] for c in ax.collections]))
    np.testing.assert_allclose(x, np.sort(cells7.clients["sinr_db"].to_numpy()))
    assert not np.allclose(x, np.sort(cells7.clients["uplink_snr_db"].to_numpy()))  # reuse 3 still interferes
    assert fig.axes[1].get_xlabel() == "distance to its serving base station (m)"
    plt.close(fig)
    r, _ = phones  # one cell: the SNR
    fig = r.plot("energy-snr")
    assert fig.axes[0].get_xlabel().startswith("mean uplink SNR")
    plt.close(fig)


def test_an_asynchronous_runs_rounds_are_server_updates_on_every_axis(cells7, quickstart):
    for result, name in ((cells7, run_plots.round_label(True)), (quickstart, "round")):
        for kind in ("accuracy", "energy", "energy-rounds", "uploads-missed"):
            fig = result.plot(kind)
            assert fig.axes[0].get_xlabel() == name, kind
            plt.close(fig)
    assert run_plots.round_label(True).startswith("server update")
    fig = cells7.plot("gantt")
    assert all(ax.get_title().startswith("server update ") for ax in fig.axes if ax.get_title())
    assert "up to each server update shown" in fig._suptitle.get_text()
    plt.close(fig)


def test_the_cell_maps_legend_names_every_mark(cells7):
    fig = cells7.plot("cell-map")
    ax = fig.axes[0]
    marks = [*ax.collections, *ax.lines, *ax.patches]  # the devices, the lines, the sites (texts: their numbers)
    assert all(not a.get_label().startswith("_") for a in marks)  # none left out of the legend
    named = _legend_texts(ax.get_legend())
    assert sorted(named) == sorted(a.get_label() for a in marks)  # one entry per mark drawn
    assert "line: device to the base station serving it" in named and "base station (site number)" in named
    (lines,) = [c for c in ax.collections if isinstance(c, matplotlib.collections.LineCollection)]
    sites = cell_sites(cells7)
    ends = np.array([segment[1] for segment in lines.get_segments()])
    np.testing.assert_allclose(ends, sites[cells7.clients["cell"].to_numpy()])  # each device to its serving site
    fig.canvas.draw()
    legend, axes = _box(ax.get_legend(), fig), _box(ax.patch, fig)
    assert not _overlap(legend, axes)  # below the map: hides no device
    plt.close(fig)


def cell_sites(result):
    from edgefl.deployment import cell_map_sites_m

    return cell_map_sites_m(result.scenario.network)


def hex_clients(sites, per_cell: int, sectors: int = 1, seed: int = 0):
    """clients.csv rows of devices around each site, served by cell c (site c // sectors)."""
    rng = np.random.default_rng(seed)
    cell = np.repeat(np.arange(len(sites) * sectors), per_cell)
    xy = sites[cell // sectors] + rng.normal(0, 0.2 * float(np.ptp(sites[:, 0])) / 5, (len(cell), 2))
    return [
        {"client": i, "cell": int(c), "x_m": float(x), "y_m": float(y), "distance_m": 1.0, "energy_j": 1.0}
        for i, (c, (x, y)) in enumerate(zip(cell, xy))
    ]


def test_a_sectorised_cell_map_draws_each_device_to_its_site_coloured_by_sector():
    from channel.cells import hex_sites_m

    sites = hex_sites_m(7, 500.0)
    clients = hex_clients(sites, per_cell=2, sectors=3)  # cells 0..20: sector c mod 3 of site c // 3
    fig = run_plots.draw_cell_map(clients, sites_m=np.repeat(sites, 3, axis=0), sectors=3)  # a site per cell
    ax = fig.axes[0]
    collections = [c for c in ax.collections if isinstance(c, matplotlib.collections.LineCollection)]
    assert [c.get_label() for c in collections] == [
        f"line: device to its site, sector {k} serving it" for k in (1, 2, 3)
    ]
    assert len({tuple(c.get_colors()[0]) for c in collections}) == 3
    for k, lines in enumerate(collections):
        ends = np.array([segment[1] for segment in lines.get_segments()])
        cells = np.array([c["cell"] for c in clients if c["cell"] % 3 == k])
        np.testing.assert_allclose(ends, sites[cells // 3])
    assert "site (its number), 3 sectors each" in _legend_texts(ax.get_legend())
    fig.canvas.draw()
    legend, colour_bar = _box(ax.get_legend(), fig), _box(fig.axes[1], fig)
    assert not _overlap(legend, colour_bar) and legend.x0 >= 0 and legend.x1 <= fig.bbox.x1  # clear of it
    assert legend.y0 >= 0  # the figure grows to hold the legend's rows
    (triangles,) = [line for line in ax.get_lines() if line.get_marker() == "^"]
    np.testing.assert_allclose(triangles.get_xydata(), sites)  # one triangle and one number a site
    assert [t.get_text() for t in ax.texts] == [str(i) for i in range(len(sites))]
    plt.close(fig)


@pytest.mark.parametrize("inter_site_m", [200.0, 866.0, 3000.0, 7000.0, 20000.0])
def test_cell_map_ticks_of_19_cells_are_few_and_do_not_touch(inter_site_m):
    from channel.cells import hex_sites_m

    sites = hex_sites_m(19, inter_site_m)
    fig = run_plots.draw_cell_map(hex_clients(sites, per_cell=5), sites_m=sites, title="19 cells")
    ax = fig.axes[0]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for labels in (ax.get_xticklabels(), ax.get_yticklabels()):
        shown = [t for t in labels if t.get_visible() and t.get_text()]
        assert 3 <= len(shown) <= run_plots.MAX_MAP_TICKS
        boxes = [t.get_window_extent(renderer) for t in shown]
        assert not any(_overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1 :]), [
            t.get_text() for t in shown
        ]
    assert ax.get_xlabel() == ("x (km)" if inter_site_m >= 3000 else "x (m)")
    plt.close(fig)


@pytest.mark.parametrize("last_j, clipped", [(40.0, True), (3.0, False)])
def test_energy_rounds_keeps_the_rounds_readable_when_the_last_one_dwarfs_them(last_j, clipped):
    """The tails still running when a run ends are charged to its last round (often most of an LTE run's energy):
    beyond LAST_ROUND_CLIP times the tallest other round, the axis stops above the others and the last bar is
    labelled with its value; otherwise the axis shows every bar."""
    events = [Event(r, 0, 0, "upload", "update", r, r + 0.5, 1e5, 0.0, 1.0 + r / 10, "uplink", "ok") for r in range(5)]
    events.append(Event(5, 0, 0, "tail", "tail", 5.5, 16.0, 0.0, 0.0, last_j, "tail", "ok"))
    fig = run_plots.draw_energy_rounds(events)
    ax = fig.axes[0]
    top = ax.get_ylim()[1]
    labels = [t.get_text() for t in ax.texts]
    if clipped:
        assert 1.4 < top < 5 and any(t.startswith("40 J") for t in labels), (top, labels)
    else:
        assert top >= last_j and not labels
    plt.close(fig)
