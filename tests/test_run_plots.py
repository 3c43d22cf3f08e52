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
    return run(
        PHONES, overrides={"run.rounds": 4, "run.eval_every": 4, "network.deadline_s": 0.25}, out=out, progress=False
    ), out


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
        rnd = int(ax.get_title().split(":")[0].split()[1]) - 1
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
    quickstart.save(tmp_path / "out")
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

    quickstart.save(tmp_path / "out")
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
