"""The SimPy engine itself: it is the co-simulation a run executes, one environment per run, its
vectorised physics agrees with the scalar link formulas, deadline ties, and the extension point."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import simpy

from edgefl.cli import main
from edgefl.deployment import build_population, network_params
from edgefl.runner import Simulation
from edgefl.scenario import scenario_from_dict
from edgefl.sim import Activity, PhaseRecord, SimPyPricer
from edgefl.sim.physics import COMPUTE, MeanSnr

REPO = Path(__file__).resolve().parents[1]
N = 10


def world(access, fading="none", deadline_s=None, budget=False, idle_power_w=0.05):
    network = {"bandwidth_mhz": 1.0, "access": access, "fading": fading}
    if budget:
        network.update(cell_radius_m=600.0, shadowing_std_db=8.0)
    else:
        network["snr_db"] = 10.0
    if deadline_s is not None:
        network["deadline_s"] = deadline_s
    s = scenario_from_dict(
        {
            "data": {"num_clients": N},
            "network": network,
            "devices": {
                "cpu_ghz": 1.0,
                "cycles_per_sample": 2e4,
                "idle_power_w": idle_power_w,
                "classes": [{"name": "slow", "share": 0.3, "cpu_ghz": 0.5}],
            },
        }
    )
    return network_params(s.network), build_population(s.network, s.devices, N, 1e5, 3e4, seed=0)


def tiny_simulation(**network):
    return Simulation(
        scenario_from_dict(
            {
                "run": {"rounds": 3, "seed": 2},
                "data": {"name": "synthetic", "num_clients": 6, "samples_per_client": 30},
                "algorithm": {"name": "fedavg", "local_steps": 2, "clients_per_round": 3, "batch_size": 8},
                "network": {"snr_db": 10.0, "fading": "rayleigh", "access": "fdma", **network},
            }
        )
    )


@pytest.fixture
def simpy_steps(monkeypatch) -> list:
    """Every ``simpy.Environment.step`` call from now on, as the environment that made it."""
    steps = []
    original = simpy.Environment.step

    def counting_step(env):
        steps.append(env)
        return original(env)

    monkeypatch.setattr(simpy.Environment, "step", counting_step)
    return steps


def test_a_default_run_executes_simpy_events(simpy_steps):
    steps = simpy_steps
    sim = tiny_simulation()
    assert sim.scenario.run.engine == "simpy"  # the default
    result = sim.run(progress=False)
    # Every activity is at least one timeout or band event, plus process starts and ends.
    assert len(steps) > 2 * len(result.events)
    assert {id(env) for env in steps} == {id(sim.pricer.env)}  # one environment for the whole run
    assert sim.pricer.env.now == pytest.approx(result.summary["sim_time_s"])


def test_edgefl_run_on_the_default_engine_steps_simpy(simpy_steps, tmp_path):
    steps = simpy_steps
    path = tmp_path / "s.toml"
    path.write_text(
        "[run]\nrounds = 2\n[data]\nnum_clients = 6\nsamples_per_client = 30\n"
        "[algorithm]\nclients_per_round = 3\nlocal_steps = 2\n"
    )
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet", "--no-plots"]) == 0
    events = (tmp_path / "out" / "events.csv").read_text().splitlines()[1:]
    # The default network (a band of its own, no fading): each phase's chains run on own clocks, and SimPy's clock
    # passes the phase in one event (edgefl.sim.pricer._on_own_clocks); a shared band steps every activity
    # (test_a_default_run_executes_simpy_events).
    phases = {tuple(line.split(",")[:2]) for line in events}
    assert len(events) > 0 and len(steps) >= len(phases) > 0
    assert len({id(env) for env in steps}) == 1


def test_simulated_time_is_continuous_across_rounds():
    sim = tiny_simulation()
    result = sim.run(progress=False)
    starts = [e.start_s for e in sorted(result.events, key=lambda e: e.timeline_key())]
    ends = {r["round"]: r["sim_time_s"] for r in result.metrics}
    assert starts == sorted(starts) and starts[0] == 0.0
    assert all(b > a for a, b in zip(list(ends.values()), list(ends.values())[1:]))


def test_simpy_reference_is_rejected_with_a_message_naming_simpy(tmp_path, capsys):
    path = tmp_path / "s.toml"
    path.write_text('[run]\nengine = "simpy_reference"\n')
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "run.engine" in err and '"simpy"' in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("budget", [False, True])
def test_vectorised_mean_snr_matches_the_scalar_link_formula(budget):
    _, population = world("fdma", budget=budget)
    mean = MeanSnr(population.uplink)
    gains = np.random.default_rng(0).exponential(size=N)
    for bandwidth in (1e6, 1e6 / 3, 2.5e5):
        got = mean.instantaneous(bandwidth, np.arange(N), gains)
        want = [population.uplink[c].snr_linear(bandwidth, gains[c]) for c in range(N)]
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=0)


@pytest.mark.parametrize("budget", [False, True])
def test_shared_mean_snr_read_from_every_clients_table_is_the_clients_own(budget, monkeypatch):
    """MeanSnr.shared of a small population reads the clients' rows from a table of every client at every share
    (made once): bit for bit the table computed for those clients alone (a large population's path), and a moved
    population's table is its own."""
    from edgefl.sim import physics

    _, population = world("fdma", budget=budget)
    rng = np.random.default_rng(2)
    kept = MeanSnr(population.uplink)
    for sharers in (1, 3, N):
        clients = rng.permutation(N)[: max(1, N // 2)]
        for bandwidth in (1e6, 2.5e5):
            shares, got = kept.shared(bandwidth, sharers, clients)
            again = kept.shared(bandwidth, sharers, clients)[1]  # (read from the table made by the first ask)
            monkeypatch.setattr(physics, "SHARED_TABLE_CELLS", 0)  # computed for the clients alone
            want_shares, want = MeanSnr(population.uplink).shared(bandwidth, sharers, clients)
            monkeypatch.undo()
            np.testing.assert_array_equal(shares, want_shares)
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(again, want)
            assert got.shape == (len(clients), sharers)
    assert kept._by_share  # (the small population's tables were kept)


@pytest.mark.parametrize("budget", [False, True])
def test_moved_mean_snr_is_the_mean_snr_of_the_moved_links(budget):
    """MeanSnr.moved (a moving population's mean SNRs from arrays) gives the arrays, and the SNRs, that MeanSnr
    gives reading every moved link (Link.moved) again: bit for bit, also when moved a second time, and with the
    noise N0·B·NF the unmoved one kept (MeanSnr._noise_w, shared by its moved copies)."""
    from edgefl.sim.mobility import MovedLinks

    _, population = world("fdma", budget=budget)
    rng = np.random.default_rng(1)
    for links, power_w in ((population.uplink, None), (population.downlink, 20.0)):
        first, loss_db = rng.uniform(80.0, 130.0, size=N), rng.uniform(80.0, 130.0, size=N)
        moved = [
            lk if lk.mode != "budget" else lk.moved(lk.tx_power_w if power_w is None else power_w, loss)
            for lk, loss in zip(links, loss_db.tolist())
        ]
        once = MovedLinks(links, first, power_w)
        source = MeanSnr(links)
        for bandwidth in (1e6, 2.5e5):  # (its noise kept before the moves)
            source(bandwidth), source.shared(bandwidth, 3, np.arange(N))
        want, got = MeanSnr(moved), source.moved(once).moved(MovedLinks(once, loss_db))
        assert list(got._budget) == list(want._budget)
        for name, column in want._budget.items():
            np.testing.assert_array_equal(got._budget[name], column)
        for bandwidth in (1e6, 2.5e5):
            np.testing.assert_array_equal(got(bandwidth), want(bandwidth))
            np.testing.assert_array_equal(got(bandwidth, interference=False), want(bandwidth, interference=False))
            for sharers in (1, 3):
                np.testing.assert_array_equal(
                    got.shared(bandwidth, sharers, np.arange(N))[1], want.shared(bandwidth, sharers, np.arange(N))[1]
                )
        assert got._noise is source._noise and (len(source._noise) == 6) == budget  # (read, not made anew)
        if budget:  # (the path loss reaches the SNRs)
            assert not np.array_equal(got(1e6), MeanSnr(links)(1e6))


def test_moved_mean_snr_of_a_few_clients_is_their_rows_of_every_clients():
    """A moved population's mean SNRs asked for a few clients (MeanSnr.of, MeanSnr.shared: a dispatched chain's plan)
    are computed for them alone, bit for bit their rows of every client's (one client's row read as a slice), and
    kept nowhere (the next move makes them anew); asked for many, every client's are made and kept."""
    from edgefl.sim.mobility import MovedLinks

    _, population = world("fdma", budget=True)
    rng = np.random.default_rng(3)
    for links, power_w in ((population.uplink, None), (population.downlink, 20.0)):
        source = MeanSnr(links)
        moved_links = MovedLinks(links, rng.uniform(80.0, 130.0, size=N), power_w)
        every = MeanSnr(moved_links)  # (not moved: every client's, the general path)
        for clients in (np.array([N - 1]), np.array([0]), np.array([7, 2])):
            moved = source.moved(moved_links)
            for bandwidth in (1e6, 2.5e5):
                got = moved.of(bandwidth, clients)
                assert got.shape == (len(clients),)
                np.testing.assert_array_equal(got, every(bandwidth)[clients])
                for sharers in (1, 4):
                    shares, table = moved.shared(bandwidth, sharers, clients)
                    want_shares, want = every.shared(bandwidth, sharers, np.arange(N))
                    np.testing.assert_array_equal(shares, want_shares)
                    np.testing.assert_array_equal(table, want[clients])
            assert not moved._by_bandwidth and not moved._by_share  # (computed for the clients alone)
        many = source.moved(moved_links)
        np.testing.assert_array_equal(many.of(1e6, np.arange(N)[::2]), every(1e6)[::2])
        assert many._by_bandwidth  # (every client's, kept)


@pytest.mark.parametrize("access", ["dedicated", "fdma", "tdma"])
def test_activities_ending_exactly_at_the_deadline(access):
    """Ties with the deadline: a computation ending exactly at the deadline completes (its timeout
    was queued before the deadline's stop), an upload starting at that instant is cut."""
    network, population = world(access, deadline_s=0.5)
    pricer = SimPyPricer(network, population, 0)
    chains = {
        c: [Activity("compute", "train", samples=25_000.0)]  # 5e8 cycles at 1 GHz: 0.5 s
        + ([Activity("upload", "upload", bits=1e3)] if c % 2 else [])
        for c in range(N)
    }
    completed = pricer.price_phase(PhaseRecord(0, 0, chains))
    fast = [c for c in range(N) if population.cpu_hz[c] == 1e9]
    assert fast and all(completed[c] == (c % 2 == 0) for c in fast)
    assert pricer.now == 0.5


def test_before_step_hook_delays_training_and_charges_the_wait_as_idle():
    """The worked example of docs/architecture.md: a foreground app keeps the device busy for a
    while before it can train; the wait is idle time and shifts everything after it."""
    network, population = world("dedicated", idle_power_w=0.2)
    busy_s = {c: 0.01 * (c + 1) for c in range(N)}
    plain, busy = SimPyPricer(network, population, 0), SimPyPricer(network, population, 0)

    def foreground_app(client, step):
        if step.kind == COMPUTE:
            yield busy.env.timeout(busy_s[client])

    busy.before_step = foreground_app
    chains = {
        c: [
            Activity("download", "broadcast", bits=1e4),
            Activity("compute", "train", samples=100.0),
            Activity("upload", "upload", bits=1e4),
        ]
        for c in range(N)
    }
    plain.price_phase(PhaseRecord(0, 0, chains))
    busy.price_phase(PhaseRecord(0, 0, chains))
    for c in range(N):
        mine = [e for e in busy.events if e.client == c]
        ref = [e for e in plain.events if e.client == c]
        (idle,) = [e for e in mine if e.kind == "idle"]
        assert idle.energy_j == pytest.approx(0.2 * busy_s[c], rel=1e-12)
        (compute,) = [e for e in mine if e.kind == "compute"]
        (compute_ref,) = [e for e in ref if e.kind == "compute"]
        assert compute.start_s == pytest.approx(compute_ref.start_s + busy_s[c], rel=1e-12)
        assert compute.energy_j == compute_ref.energy_j
    assert busy.ledger.by_category()["idle"] == pytest.approx(0.2 * sum(busy_s.values()), rel=1e-12)


def test_no_hand_written_event_queue_in_the_package():
    sources = [p for p in (REPO / "edgefl").rglob("*.py")]
    assert sources
    assert not [p for p in sources if "heapq" in p.read_text()]
    assert not (REPO / "edgefl" / "dedicated_pricing.py").exists()


def test_fdma_two_equal_uploads_share_the_band_and_finish_together():
    network, population = world("fdma")
    pricer = SimPyPricer(network, population, 0)
    bits = 1e5
    pricer.price_phase(
        PhaseRecord(0, 0, {0: [Activity("upload", "upload", bits=bits)], 1: [Activity("upload", "upload", bits=bits)]})
    )
    rate_half_band = 0.5e6 * math.log2(1 + 10.0)  # 10 dB over B/2
    assert pricer.now == pytest.approx(bits / rate_half_band, rel=1e-12)


def test_fdma_uploads_whose_first_attempt_gets_through_carry_their_rate_table_alone():
    """FDMA planning with retransmissions: an upload whose first attempt gets through on any share is sent once, so
    it carries the first attempt's rates alone (no per-attempt lists), also where a later attempt, never sent, would
    be in outage; the others carry every attempt's rates and failures."""
    from edgefl.sim.physics import PhasePhysics, faded

    s = scenario_from_dict(
        {
            "data": {"num_clients": N},
            "network": {
                "bandwidth_mhz": 1.0,
                "access": "fdma",
                "fading": "rayleigh",
                "rate": "mcs",
                "snr_db": 2.0,
                "max_retransmissions": 3,
            },
            "devices": {"cpu_ghz": 1.0, "cycles_per_sample": 2e4},
        }
    )
    network, population = network_params(s.network), build_population(s.network, s.devices, N, 1e5, 3e4, seed=0)
    uploaders = [3, 7]  # (two sharers: a phase whose first attempts all get through is common)
    chains = {c: [Activity("upload", "upload", bits=1e4)] for c in uploaders}
    seen = set()
    for seed in range(60):
        physics = PhasePhysics(network, population, np.random.default_rng(seed))
        gains = np.random.default_rng(seed).exponential(1.0, size=(2, 1 + network.max_retransmissions))  # (as plan)
        shares, mean = physics.mean_up_snr.shared(network.bandwidth_hz, 2, np.array(uploaders))
        rates = physics._rate(shares[None, None, :], faded(mean[:, None, :], gains[:, :, None]), "up")
        fails = rates == 0  # [upload, attempt, sharers]
        plans = physics.plan(PhaseRecord(0, 0, chains), uploaders)
        first_ok = not fails[:, 0].any()
        sent = rates if first_ok else np.where(fails, physics.nominal_rate(shares[None, :], mean, "up")[:, None], rates)
        for k, c in enumerate(uploaders):
            (step,) = plans[c]
            np.testing.assert_array_equal(step.rates_bps, sent[k, 0])  # (a failed attempt: at the mean SNR's rates)
            assert (step.fdma_attempts is None) == first_ok
        seen.add((first_ok, bool(fails.any())))
    assert (True, True) in seen and (False, True) in seen  # (both paths, a later attempt failing on the first)
