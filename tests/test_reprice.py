"""Re-pricing a recorded trace equals a full co-simulation on that channel.

A sweep trains once per (learning keys, seed) on the ideal engine, records the op trace and
re-prices it for every channel point with the SimPy pricer.
Here every re-priced point is checked against a full SimPy co-simulation of the same point:
energies and times to 1e-9 relative, learning metrics identical.
"""

from __future__ import annotations

import pytest
import torch

import algorithms
from edgefl.deployment import build_population, network_params
from edgefl.runner import Simulation
from edgefl.scenario import scenario_from_dict
from edgefl.sim import SimPyPricer
from edgefl.sim.engine import reprice_rounds
from edgefl.sweeps.plan import COSIMULATED, REPRICED, plan_sweep
from edgefl.sweeps.run import run_sweep
from edgefl.sweeps.store import read_point

torch.set_num_threads(1)

ENERGY_COLUMNS = ("sim_time_s", "energy_j", "compute_energy_j", "uplink_energy_j", "downlink_energy_j", "idle_energy_j")
LEARNING_COLUMNS = ("acc_mean", "acc_worst", "acc_std", "loss", "uploads_arrived", "uploads_missed")

BASE = """
[run]
seed = 7
rounds = 4

[data]
name = "synthetic"
num_clients = 8
samples_per_client = 40
synthetic_alpha = 0.5
synthetic_beta = 0.5

[algorithm]
name = "{algorithm}"
local_steps = 3
clients_per_round = 5
lr = 0.05

[network]
snr_db = 10.0
bandwidth_mhz = 1.0

[devices]
cpu_ghz = 1.5
cycles_per_sample = 20000
idle_power_w = 0.05
static_power_w = 0.02
circuit_power_w = 0.1
"""


def assert_rows_match(repriced: list[dict], cosimulated: list[dict]) -> None:
    assert len(repriced) == len(cosimulated)
    for a, b in zip(repriced, cosimulated):
        assert a["round"] == b["round"]
        for column in ENERGY_COLUMNS:
            assert a[column] == pytest.approx(b[column], rel=1e-9, abs=1e-300), (a["round"], column)
        for column in LEARNING_COLUMNS:
            assert a[column] == b[column], (a["round"], column)


def sweep_and_compare(tmp_path, grids: list[str], algorithm: str = "fedavg", sample_every: int = 1):
    scenario_file = tmp_path / "s.toml"
    scenario_file.write_text(BASE.format(algorithm=algorithm))
    plan = plan_sweep(scenario_file, grids=grids, seeds=2)
    summary = run_sweep(plan, tmp_path / "sweep", progress=False)
    assert summary.computed == len(plan.points)
    checked = 0
    for point in plan.points[::sample_every]:
        record = read_point(tmp_path / "sweep", point.id)
        assert record["mode"] == point.mode
        full = Simulation(point.scenario).run(progress=False)  # full SimPy co-simulation of this point
        assert_rows_match(record["rows"], full.metrics)
        checked += 1
    return plan, summary, checked


def test_repriced_equals_cosimulated_dedicated_fdma_tdma_with_rayleigh_fading(tmp_path):
    plan, summary, checked = sweep_and_compare(
        tmp_path,
        [
            "network.access=dedicated,fdma,tdma",
            "network.fading=rayleigh",
            "network.snr_db=0,25",
            "network.bandwidth_mhz=0.5,4",
        ],
        sample_every=3,
    )
    assert {p.mode for p in plan.points} == {REPRICED}
    assert summary.trainings == 2  # one per seed: 24 points share 2 trainings
    assert checked >= 8
    accesses = {p.values["network.access"] for p in plan.points[::3]}
    assert accesses == {"dedicated", "fdma", "tdma"}


def test_repriced_equals_cosimulated_rician_link_budget_and_device_keys(tmp_path):
    plan, summary, checked = sweep_and_compare(
        tmp_path,
        [
            "network.fading=rician,none",
            "devices.tx_power_dbm=10,23",
            "network.access=dedicated,tdma",
        ],
    )
    assert summary.trainings == 2
    assert checked == len(plan.points)


@pytest.mark.skipif("drdm" not in algorithms.REGISTRY, reason="drdm not registered yet")
def test_repriced_equals_cosimulated_for_drdm_query_phases(tmp_path):
    plan, summary, checked = sweep_and_compare(
        tmp_path,
        [
            "network.access=dedicated,fdma",
            "network.fading=rayleigh",
            "network.snr_db=3,20",
        ],
        algorithm="drdm",
    )
    assert summary.trainings == 2
    assert checked == len(plan.points)


def test_deadline_and_outage_points_are_cosimulated_and_keep_their_own_training(tmp_path):
    plan, summary, _ = sweep_and_compare(
        tmp_path,
        [
            "network.deadline_s=0.05,1000.0",
            "network.snr_db=0,20",
        ],
    )
    assert {p.mode for p in plan.points} == {COSIMULATED}
    assert summary.trainings == len(plan.points)


def test_message_size_keys_split_trainings(tmp_path):
    """bits_per_param is baked into the trace: points differing in it cannot share a training."""
    plan, summary, _ = sweep_and_compare(
        tmp_path,
        [
            "network.bits_per_param=16,32",
            "network.snr_db=0,20",
        ],
        sample_every=2,
    )
    assert {p.mode for p in plan.points} == {REPRICED}
    assert summary.trainings == 4  # 2 message sizes x 2 seeds


def test_reprice_rounds_refuses_a_pricer_that_can_change_participation():
    s = scenario_from_dict(
        {
            "data": {"name": "synthetic", "num_clients": 4},
            "network": {"deadline_s": 1.0},
            "algorithm": {"clients_per_round": 2},
        }
    )
    population = build_population(s.network, s.devices, 4, 1.0, 1.0, 0)
    with pytest.raises(ValueError, match="deadline"):
        reprice_rounds([], SimPyPricer(network_params(s.network), population, 0))


@pytest.mark.parametrize("devices", [{}, {"tail_s": 0.4, "tail_power_w": 0.3}])
def test_reprice_rounds_reads_each_round_as_read_at_its_end(devices):
    """reprice_rounds reads every round's energy once the trace is priced (the ledger books a few batches): the same
    numbers, bit for bit, as a pricer read at each round's end, as the co-simulation's engine reads it (radio tails:
    committed energy beyond the ledger, the last round's tails charged in full by finish)."""
    s = scenario_from_dict(
        {
            "run": {"seed": 3, "rounds": 5},
            "data": {"name": "synthetic", "num_clients": 8, "samples_per_client": 40},
            "algorithm": {"name": "fedavg", "local_steps": 3, "clients_per_round": 5, "lr": 0.05},
            "network": {"snr_db": 10.0, "bandwidth_mhz": 1.0, "access_latency_s": 0.05 if devices else 0.0},
            "devices": {"cpu_ghz": 1.5, "idle_power_w": 0.05, **devices},
        }
    )
    sim = Simulation(s, record_trace=True)
    sim.run(progress=False)
    trace, model = sim.engine.trace, sim.model
    population = build_population(
        s.network, s.devices, s.data.num_clients, model.train_flops_per_sample, model.eval_flops_per_sample, 0
    )
    batched, by_round = (SimPyPricer(network_params(s.network), population, 0, record_events=False) for _ in range(2))
    costs = reprice_rounds(trace, batched)
    expected = []
    for k, phase in enumerate(trace):
        by_round.price_phase(phase)
        if k + 1 == len(trace) or trace[k + 1].round != phase.round:
            by_round.end_round(phase.round)
            committed = by_round.committed_energy_j()
            if k + 1 == len(trace):
                by_round.finish()
            expected.append((phase.round, by_round.now, by_round.ledger.by_category(), committed))
    assert [(c.round, c.end_s, c.energy_by_category_j, c.committed_energy_j) for c in costs] == expected
    assert len(costs) == 5 and costs[-1].committed_energy_j > 0
    if devices:  # tails: committed beyond the ledger at a round's end
        assert any(c.committed_energy_j > sum(c.energy_by_category_j.values()) for c in costs[:-1])


def test_repricing_passes_each_phase_on_own_clocks_in_one_simpy_event():
    """A re-priced phase whose chains run on their own clocks passes the core's clock in one timeout, stepped: one
    SimPy event per phase (a run loop per phase left a second one queued: benchmarks [5]), and the clock ends where a
    co-simulation's does."""
    s = scenario_from_dict(
        {
            "run": {"seed": 3, "rounds": 4, "engine": "simpy"},
            "data": {"name": "synthetic", "num_clients": 8, "samples_per_client": 40},
            "algorithm": {"name": "fedavg", "local_steps": 3, "clients_per_round": 5, "lr": 0.05},
            "network": {"snr_db": 10.0, "bandwidth_mhz": 1.0},
            "devices": {"cpu_ghz": 1.5, "idle_power_w": 0.05},
        }
    )
    sim = Simulation(s, record_trace=True)
    result = sim.run(progress=False)
    trace, model = sim.engine.trace, sim.model
    population = build_population(
        s.network, s.devices, s.data.num_clients, model.train_flops_per_sample, model.eval_flops_per_sample, 3
    )
    pricer = SimPyPricer(network_params(s.network), population, 3, record_events=False)
    costs = reprice_rounds(trace, pricer)
    assert next(pricer.env._eid) == len(trace) == 4
    assert [c.end_s for c in costs] == [row["sim_time_s"] for row in result.metrics]


def test_a_trace_repriced_on_many_points_prices_each_as_a_fresh_copy_would():
    """A phase's layout (what its plan takes from the record alone: edgefl.sim.physics._Layout) is made once and read by
    every pricer that plans the phase: the same round costs and ledgers, bit for bit, as pricing a fresh copy of the
    trace on each point, also where a component changes the steps (stragglers) and for a phase planned for other
    clients (the layout is made again)."""
    import copy

    s = scenario_from_dict(
        {
            "run": {"seed": 5, "rounds": 3},
            "data": {"name": "synthetic", "num_clients": 8, "samples_per_client": 40},
            "algorithm": {"name": "fedavg", "local_steps": 3, "clients_per_round": 5, "lr": 0.05},
            "network": {"snr_db": 10.0, "bandwidth_mhz": 1.0},
            "devices": {"cpu_ghz": 1.5, "idle_power_w": 0.05},
        }
    )
    sim = Simulation(s, record_trace=True)
    sim.run(progress=False)
    trace, model = sim.engine.trace, sim.model

    def priced(point: dict, phases) -> tuple:
        t = s.model_copy(deep=True)
        t.network = t.network.model_copy(update=point.get("network", {}))
        t.devices = t.devices.model_copy(update=point.get("devices", {}))
        flops = (model.train_flops_per_sample, model.eval_flops_per_sample)
        pricer = SimPyPricer(network_params(t.network), build_population(t.network, t.devices, 8, *flops, 5), 5)
        costs = [tuple(vars(c).items()) for c in reprice_rounds(phases, pricer)]
        return costs, pricer.ledger.per_client().tobytes(), pricer.now

    points = [
        {"network": {"snr_db": 0.0}},
        {"network": {"snr_db": 30.0, "bandwidth_mhz": 5.0}},
        {"devices": {"slowdown": "exponential", "slowdown_mean": 0.5}},
        {"network": {"bandwidth_mhz": 0.5}},
    ]
    assert [priced(p, trace) for p in points] == [priced(p, copy.deepcopy(trace)) for p in points]
    phase = trace[0]
    pricer = SimPyPricer(network_params(s.network), build_population(s.network, s.devices, 8, 1.0, 1.0, 5), 5)
    every, some = sorted(phase.chains), sorted(phase.chains)[1:3]
    for clients in (every, some, every):
        plans = pricer.physics.plan(phase, clients)
        assert list(plans) == clients
        assert [[step.activity for step in plans[c]] for c in clients] == [phase.chains[c] for c in clients]
