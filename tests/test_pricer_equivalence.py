"""The lean event loop (SimPyPricer) against the SimPy model it reproduces (SimPyReference).

Random phases (mixed chains, clients without uploads, zero-bit messages, heterogeneous
devices) and tie-heavy ones (identical clients: many events at the same instant) are priced
by both; every event row, the ledger, who completed and the clock must agree. Times and
energies come out bit-identical on the development machine; floats are compared to 1e-12
relative so that a numpy build whose vectorised log/pow differs by an ulp does not fail.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from edgefl.physical import build_population, network_params
from edgefl.scenario import scenario_from_dict
from edgefl.sim import SimPyPricer
from edgefl.sim.activities import Activity, PhaseRecord
from edgefl.sim.pricer import MeanSnr
from edgefl.sim.reference import SimPyReference

N = 10


def world(access, fading, deadline_s=None, outage_snr_db=None, budget=False, idle_power_w=0.05):
    network = {"bandwidth_mhz": 1.0, "access": access, "fading": fading}
    if budget:
        network.update(cell_radius_m=600.0, shadowing_std_db=8.0)
    else:
        network["snr_db"] = 10.0
    if deadline_s is not None:
        network["deadline_s"] = deadline_s
    if outage_snr_db is not None:
        network["outage_snr_db"] = outage_snr_db
    s = scenario_from_dict({
        "data": {"num_clients": N}, "network": network,
        "devices": {"cpu_ghz": 1.0, "cycles_per_sample": 2e4, "idle_power_w": idle_power_w, "static_power_w": 0.01,
                    "classes": [{"name": "slow", "share": 0.3, "cpu_ghz": 0.5, "tx_power_dbm": 15.0}]},
    })
    return network_params(s.network), build_population(s.network, s.devices, N, 1e5, 3e4, seed=0)


def phases(seed, identical):
    rng = np.random.default_rng(seed)
    out = []
    for r in range(4):
        for p in range(2):
            chosen = np.sort(rng.choice(N, 6, replace=False))
            phase = PhaseRecord(r, p)
            for c in chosen:
                if identical:
                    chain = [Activity("download", "broadcast", bits=2.5e5), Activity("compute", "train", samples=320.0),
                             Activity("upload", "upload", bits=2.5e5)]
                else:
                    chain = []
                    for _ in range(rng.integers(1, 5)):
                        kind = rng.choice(["download", "compute", "upload"])
                        if kind == "compute":
                            chain.append(Activity("compute", "train", samples=float(rng.integers(0, 500)),
                                                  work=str(rng.choice(["train", "eval"]))))
                        else:
                            chain.append(Activity(kind, kind, bits=float(rng.choice([0.0, 1e5, rng.uniform(1e4, 1e6)]))))
                phase.chains[int(c)] = chain
            out.append(phase)
    return out


def same_row(a: tuple, b: tuple) -> bool:
    return all(math.isclose(x, y, rel_tol=1e-12, abs_tol=1e-300) if isinstance(x, float) else x == y
               for x, y in zip(a, b))


def compare(network, population, seed, identical):
    lean, ref = SimPyPricer(network, population, 5), SimPyReference(network, population, 5)
    for phase in phases(seed, identical):
        assert lean.price_phase(phase) == ref.price_phase(phase)
        assert math.isclose(lean.now, ref.now, rel_tol=1e-12)
    assert len(lean.events) == len(ref.events)
    for a, b in zip(lean.events, ref.events):
        assert same_row(a.row(), b.row()), (a, b)
    np.testing.assert_allclose(lean.ledger.per_client(), ref.ledger.per_client(), rtol=1e-12, atol=0)
    return [e.status for e in lean.events] + [e.kind for e in lean.events]


@pytest.mark.parametrize("access,fading,deadline_s", list(itertools.product(
    ["dedicated", "fdma", "tdma"], ["none", "rayleigh"], [None, 0.3])))
@pytest.mark.parametrize("identical", [False, True])
def test_lean_event_loop_reproduces_the_simpy_model(access, fading, deadline_s, identical):
    statuses = compare(*world(access, fading, deadline_s), seed=1, identical=identical)
    if deadline_s is not None and access != "dedicated":
        assert "cut" in statuses  # the deadline really cut something
    if access == "tdma":
        assert "idle" in statuses  # someone waited for the channel


@pytest.mark.parametrize("access", ["dedicated", "fdma", "tdma"])
def test_outage_link_budget_and_rician_fading(access):
    network, population = world(access, "rician", deadline_s=2.0, outage_snr_db=8.0, budget=True)
    statuses = compare(network, population, seed=3, identical=False)
    assert "lost" in statuses


def test_activities_ending_exactly_at_the_deadline():
    """Ties with the deadline: a computation ending exactly at the deadline completes (its event
    was queued before the deadline's stop), an upload starting at that instant is cut."""
    for access in ("dedicated", "fdma", "tdma"):
        network, population = world(access, "none", deadline_s=0.5)
        lean, ref = SimPyPricer(network, population, 0), SimPyReference(network, population, 0)
        chains = {c: [Activity("compute", "train", samples=25_000.0)]  # 5e8 cycles at 1 GHz: 0.5 s
                  + ([Activity("upload", "upload", bits=0.0)] if c % 2 else []) for c in range(N)}
        phase = PhaseRecord(0, 0, chains)
        completed = lean.price_phase(phase)
        assert completed == ref.price_phase(phase)
        assert [e.row() for e in lean.events] == [e.row() for e in ref.events]
        fast = [c for c in range(N) if population.cpu_hz[c] == 1e9]
        assert all(completed[c] == (c % 2 == 0) for c in fast)  # computed in time; uploads cut


@pytest.mark.parametrize("budget", [False, True])
def test_mean_snr_matches_link_snr(budget):
    network, population = world("fdma", "rayleigh", budget=budget)
    mean = MeanSnr(population.uplink)
    gains = np.random.default_rng(0).exponential(size=N)
    for bandwidth in (1e6, 1e6 / 3, 2.5e5):
        got = mean.instantaneous(bandwidth, np.arange(N), gains)
        want = [population.uplink[c].snr_linear(bandwidth, gains[c]) for c in range(N)]
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=0)


def test_phases_priced_late_give_the_same_results():
    """Without deadline and outage, phases are simulated when the clock or the ledger is read;
    reading only at the end gives what reading after every phase gives."""
    network, population = world("fdma", "rayleigh")
    early, late = SimPyPricer(network, population, 5), SimPyPricer(network, population, 5)
    for phase in phases(seed=2, identical=False):
        answer = early.price_phase(phase)
        assert answer == dict.fromkeys(sorted(phase.chains), True) == late.price_phase(phase)
        early.now, early.ledger.total()
    assert late.now == early.now
    assert [e.row() for e in late.events] == [e.row() for e in early.events]
    np.testing.assert_array_equal(late.ledger.per_client(), early.ledger.per_client())
