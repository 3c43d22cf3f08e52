"""Re-pricing a trace on several channel points at once (edgefl.sim.points): the same numbers, bit for bit, as
re-pricing it on each point alone (edgefl.sim.engine.reprice_rounds), where the points are priced together along an
array axis and where they cannot be (then one by one)."""

from __future__ import annotations

import pickle
from dataclasses import replace

import pytest
import torch

import edgefl.sim.points as points_module
from edgefl.deployment import build_population, network_params
from edgefl.runner import Simulation
from edgefl.scenario import scenario_from_dict
from edgefl.sim import SimPyPricer
from edgefl.sim.engine import reprice_rounds
from edgefl.sim.points import reprice_points, stackable

torch.set_num_threads(1)

SCENARIO = {
    "run": {"seed": 4, "rounds": 4},
    "data": {"name": "synthetic", "num_clients": 8, "samples_per_client": 40},
    "algorithm": {"name": "drdm", "local_steps": 3, "clients_per_round": 5, "lr": 0.05},
    "network": {"snr_db": 10.0, "bandwidth_mhz": 1.0},
    "devices": {"cpu_ghz": 1.5, "idle_power_w": 0.05, "static_power_w": 0.02, "circuit_power_w": 0.1},
}
CHANNELS = [
    {"snr_db": 0.0, "bandwidth_mhz": 0.5},
    {"snr_db": 10.0, "bandwidth_mhz": 1.0},
    {"snr_db": 30.0, "bandwidth_mhz": 10.0, "downlink_bandwidth_mhz": 3.0},
    {"snr_db": 7.5, "bandwidth_mhz": 2.0},
]


@pytest.fixture(scope="module")
def traced():
    s = scenario_from_dict(SCENARIO)
    sim = Simulation(s, record_trace=True)
    sim.run(progress=False)
    return s, sim.engine.trace, (sim.model.train_flops_per_sample, sim.model.eval_flops_per_sample)


def pricers(s, flops, channels, network: dict | None = None, devices: dict | None = None) -> list[SimPyPricer]:
    out = []
    for channel in channels:
        net = s.network.model_copy(update={**channel, **(network or {})})
        dev = s.devices.model_copy(update=devices or {})
        population = build_population(net, dev, s.data.num_clients, *flops, s.run.seed)
        out.append(SimPyPricer(network_params(net), population, s.run.seed, record_events=False))
    return out


def outcome(costs, pricer) -> bytes:
    return pickle.dumps(([tuple(vars(c).items()) for c in costs], pricer.ledger.per_client().tobytes()))


@pytest.mark.parametrize("budget, book_rows", [(False, 4096), (True, 4096), (True, 1)])
def test_points_priced_together_equal_each_priced_alone(traced, budget, book_rows, monkeypatch):
    """Four channel points (SNR, uplink and downlink bands) priced together: every round's end time, energy by category
    and committed energy, and every ledger cell, the same bytes as each point re-priced alone; with a configured SNR
    (every client's the same: chains that end together) and with a link budget (devices in a disk: each its rate);
    the rows booked once or at every round's end."""
    monkeypatch.setattr(points_module, "BOOK_ROWS", book_rows)
    s, trace, flops = traced
    network = {"snr_db": None, "cell_radius_m": 800.0} if budget else {}
    together = pricers(s, flops, CHANNELS, network)
    assert stackable(together, trace)
    costs = reprice_points(trace, together)
    alone = pricers(s, flops, CHANNELS, network)
    expected = [outcome(reprice_rounds(trace, p), p) for p in alone]
    assert [outcome(c, p) for c, p in zip(costs, together)] == expected
    assert len(costs[0]) == 4 and costs[0][-1].end_s > costs[2][-1].end_s  # (a slower channel ends later)
    if budget:  # (the links differ: the clients' chains end at different times)
        assert len(set(alone[1].physics.mean_up_snr(1e6).tolist())) > 1


@pytest.mark.parametrize(
    "network, devices",
    [
        ({"fading": "rayleigh"}, {}),  # a fading draw per message
        ({"access": "fdma"}, {}),  # a shared band
        ({"access_latency_s": 0.05}, {"tail_s": 0.4, "tail_power_w": 0.3}),  # radio promotions and tails
        ({}, {"slowdown": "exponential", "slowdown_mean": 0.5}),  # a component that changes the plans
    ],
)
def test_points_that_cannot_be_priced_together_are_priced_one_by_one(traced, network, devices):
    s, trace, flops = traced
    together = pricers(s, flops, CHANNELS, network, devices)
    assert not stackable(together, trace)
    costs = reprice_points(trace, together)
    alone = pricers(s, flops, CHANNELS, network, devices)
    assert [outcome(c, p) for c, p in zip(costs, together)] == [outcome(reprice_rounds(trace, p), p) for p in alone]


def test_points_with_other_devices_or_a_rate_of_zero_are_not_priced_together(traced):
    s, trace, flops = traced
    assert stackable(pricers(s, flops, CHANNELS), trace)
    other = pricers(s, flops, CHANNELS[:2]) + pricers(s, flops, CHANNELS[2:], devices={"cpu_ghz": 2.0})
    assert not stackable(other, trace)  # (the devices differ: compute times and energy)
    mcs = pricers(s, flops, CHANNELS, network={"rate": "mcs", "snr_db": -20.0})
    assert not stackable(mcs, trace)  # (an MCS table's outage: a rate of 0, a message can be lost)
    assert not stackable(pricers(s, flops, CHANNELS[:1]), trace)  # (one point: nothing to share)


def test_a_negative_message_is_refused_as_each_point_alone_refuses_it(traced):
    """The array clocks do not check each step's time (edgefl.sim.chain.OwnClocks): a trace with a negative message
    size is priced point by point, and SimPy refuses its negative delay there."""
    s, trace, flops = traced
    phase = trace[0]
    client, steps = next(iter(phase.chains.items()))
    assert steps[0].kind == "download"
    bad = replace(phase, chains={**phase.chains, client: [replace(steps[0], bits=-1.0), *steps[1:]]})
    points = pricers(s, flops, CHANNELS)
    assert stackable(points, trace) and not stackable(points, [bad])
    with pytest.raises(ValueError, match="Negative delay"):
        reprice_points([bad], points)
