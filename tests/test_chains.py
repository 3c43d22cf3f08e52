"""Every committed scenario: events.csv agrees with metrics.csv and clients.csv on every arrival, a client's
chain does no work after it ended early (cut, lost, offline, failed, battery, stopped), and no device is ever
in two radio states at once (docs/model.md §6 and §8)."""

from __future__ import annotations

import collections
from pathlib import Path

import numpy as np
import pytest

from edgefl.data import DataError
from edgefl.runner import Simulation
from edgefl.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = sorted(p.name for p in (ROOT / "scenarios").glob("*.toml"))
EPS = 1e-9  # s: float rounding of the simulated clock
RADIO = ("download", "upload", "promotion", "idle", "tail")  # what a device's radio (or its wait) is doing


def overlapping(intervals: list[tuple[float, float, str]]) -> list[tuple]:
    """Pairs of intervals (start, end, what) that overlap by more than EPS."""
    intervals = sorted(intervals)
    bad, last = [], None
    for interval in intervals:
        if last is not None and interval[0] < last[1] - EPS:
            bad.append((last, interval))
        if last is None or interval[1] > last[1]:
            last = interval
    return bad


def check_events(events, metrics: list[dict], clients: list[dict]) -> None:
    """The three rules, on a run's events (edgefl.sim.Event) and its metrics.csv and clients.csv rows."""
    # 1. Arrivals: the ok uploads of a round (of a client) are the uploads metrics.csv (clients.csv) counts.
    ok_uploads = [e for e in events if e.kind == "upload" and e.status == "ok"]
    per_round = collections.Counter(e.round for e in ok_uploads)
    assert [per_round[r] for r in range(len(metrics))] == [row["uploads_arrived"] for row in metrics]
    per_client = collections.Counter(e.client for e in ok_uploads)
    assert [per_client[c] for c in range(len(clients))] == [row["uploads_arrived"] for row in clients]
    # 2. A chain (one client's activities in one phase) ends at its first activity that did not complete:
    #    nothing of the chain starts after it (its radio's tail excepted), and it has at most one such activity.
    chains = collections.defaultdict(list)
    for e in events:
        if e.kind != "tail":
            chains[(e.round, e.phase, e.client)].append(e)
    for key, chain in chains.items():
        chain.sort(key=lambda e: (e.start_s, e.end_s))
        ended = [k for k, e in enumerate(chain) if e.status != "ok"]
        if ended:
            assert ended == [len(chain) - 1] or all(
                e.kind == "idle" and e.end_s <= chain[ended[0]].start_s + EPS for e in chain[ended[0] + 1 :]
            ), (key, chain)
            assert len(ended) == 1, (key, chain)
    # 3. Per device, over the whole run: its radio is in one state at a time (a transfer, a promotion, an idle
    #    wait or a tail), and its chain does one thing at a time (computing during a tail is allowed: CPU and radio).
    by_client = collections.defaultdict(list)
    for e in events:
        by_client[e.client].append(e)
    for client, rows in by_client.items():
        radio = [(e.start_s, e.end_s, f"{e.kind} r{e.round}p{e.phase}") for e in rows if e.kind in RADIO]
        assert not overlapping(radio), (client, overlapping(radio)[:3])
        work = [(e.start_s, e.end_s, f"{e.kind} r{e.round}p{e.phase}") for e in rows if e.kind != "tail"]
        assert not overlapping(work), (client, overlapping(work)[:3])
    # Every joule in the events is in the metrics, round by round.
    energy = np.bincount([e.round for e in events], weights=[e.energy_j for e in events], minlength=len(metrics))
    assert np.allclose(np.cumsum(energy), [row["energy_j"] for row in metrics], rtol=1e-9, atol=1e-12)


def run(name: str, overrides: dict):
    scenario = load_scenario(ROOT / "scenarios" / name, overrides)
    try:
        simulation = Simulation(scenario)  # the data files are read here
    except DataError as exc:
        if "data.dir" in str(exc) and "does not exist" in str(exc):
            pytest.skip(f"{name}: its data files are absent ({exc})")
        raise
    return simulation.run(progress=False)


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_committed_scenario_keeps_its_chains_and_radio_states_consistent(name):
    result = run(name, {"run.rounds": 3, "run.engine": "simpy"})  # the co-simulation, where a scenario has "ideal"
    assert result.events, name
    check_events(result.events, result.metrics, result.clients)


def test_lost_downloads_end_their_chains_on_the_quickstart_at_5_db():
    """The audit's case: at 5 dB the quickstart loses downloads (outage, no retransmission); their computation
    and upload used to be run, logged ok and charged."""
    result = run("quickstart.toml", {"network.snr_db": 5.0})
    lost = [e for e in result.events if e.kind == "download" and e.status == "lost"]
    assert len(lost) >= 10  # the case is exercised
    check_events(result.events, result.metrics, result.clients)
    after = {(e.round, e.phase, e.client) for e in lost}
    assert not [e for e in result.events if (e.round, e.phase, e.client) in after and e.kind in ("compute", "upload")]
