"""Asynchronous servers (FedAsync, FedBuff): the Dispatch / NextArrival ops, their algorithms' must-show
checks (issue 22), their keys and what they refuse."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from algorithms.asynchronous import staleness_weight
from algorithms.base import Algorithm
from algorithms.ops import Dispatch, NextArrival, Train, sgd_step
from edgefl.plugins import PluginError
from edgefl.runner import Simulation
from edgefl.scenario import ScenarioError, load_scenario

from conftest import make_scenario, run_rounds

# The shipped phones-in-a-cell scenario (MNIST, SimPy: FDMA, Rayleigh, batteries, mobility, ...) made small.
SMALL_PHONES = ["data.num_clients=20", "algorithm.local_steps=3", "run.eval_every=4"]
# Unequal client data (so FedAvg's uniform weighting differs from its data-size weighting).
UNEQUAL = {"name": "synthetic", "num_clients": 12}


def _curve(scenario) -> list[tuple[float, float, float]]:
    rows = Simulation(scenario).run(progress=False).metrics
    return [(row["acc_mean"], row["acc_worst"], row["loss"]) for row in rows]


def test_fedbuff_with_one_buffer_of_everyone_finishing_together_is_fedavg_uniform_round_for_round():
    """K = C = m, η_g = 1, constant weights, every chain ending at the same instant (the ideal engine): each
    server update is a synchronous FedAvg round with uniform weights (FedBuff paper; system-models.md)."""
    common = dict(rounds=8, clients_per_round=4, local_steps=3, lr=0.1, data=UNEQUAL)
    fedavg = _curve(make_scenario("fedavg", weighting="uniform", **common))
    fedbuff = _curve(
        make_scenario("fedbuff", buffer_size=4, concurrency=4, server_lr=1.0, staleness="constant", **common)
    )
    assert len(fedavg) == len(fedbuff) == 8
    np.testing.assert_allclose(np.array(fedbuff), np.array(fedavg), rtol=0, atol=1e-6)
    # the comparison can fail: a half step on the server is another trajectory
    other = _curve(
        make_scenario("fedbuff", buffer_size=4, concurrency=4, server_lr=0.5, staleness="constant", **common)
    )
    assert np.abs(np.array(other) - np.array(fedavg)).max() > 1e-3


def test_fedasync_with_one_client_and_alpha_one_is_sequential_sgd_on_it():
    one = {"name": "synthetic", "num_clients": 1, "samples_per_client": 60}
    scenario = make_scenario(
        "fedasync", data=one, clients_per_round=1, rounds=5, local_steps=4, alpha=1.0, staleness="constant"
    )
    models = run_rounds(Simulation(scenario))
    reference = Simulation(scenario)  # the same seed: the same minibatch stream
    w = reference.context.init_params.clone()
    for r, model in enumerate(models):
        result = reference.executor.train(Train(np.array([0]), w, 4, sgd_step, shared={"lr": 0.05}))
        w = result.params[0]
        assert torch.equal(model, w), f"round {r + 1}"
    # with alpha < 1 it is not: the server keeps part of its model
    half = run_rounds(Simulation(scenario.model_copy(update={"algorithm": _with(scenario, alpha=0.5)})))
    assert not torch.allclose(half[-1], models[-1])


def _with(scenario, **hp):
    name = scenario.algorithm.name
    tables = dict(scenario.algorithm.tables())
    tables[name] = {**tables.get(name, {}), **hp}
    return scenario.algorithm.model_copy(update=tables)


def test_fedbuff_drops_updates_staler_than_max_staleness_by_hand():
    """The ideal engine: 4 clients start at version 0 and end at once; a buffer of 2 makes version 1 from the
    first two, and the other two are then 1 update old: with max_staleness = 0 both are dropped, the 4 free
    slots are filled from version 1, and version 2 comes from two of those (staleness 0)."""
    scenario = make_scenario("fedbuff", rounds=2, clients_per_round=4, buffer_size=2, max_staleness=0)
    sim = Simulation(scenario)
    rows = sim.run(progress=False).metrics
    assert [row["staleness_max"] for row in rows] == [0.0, 0.0]
    assert [row["updates_dropped"] for row in rows] == [0.0, 2.0]
    assert [row["uploads_arrived"] for row in rows] == [2, 4]  # round 2: the 2 dropped and the 2 applied
    ends = sim.engine.chain_ends
    assert [(e.round, e.version, e.staleness) for e in ends] == [(0, 0, 0), (0, 0, 0), (1, 0, 1), (1, 0, 1)] + [
        (1, 1, 0)
    ] * 2
    assert len(sim.engine.in_flight) == 2  # two chains of version 1 still running at the end
    # without max_staleness the stale pair makes version 2, weighted 1/sqrt(2)
    rows = (
        Simulation(make_scenario("fedbuff", rounds=2, clients_per_round=4, buffer_size=2)).run(progress=False).metrics
    )
    assert [row["staleness_mean"] for row in rows] == [0.0, 1.0] and rows[1]["updates_dropped"] == 0.0


def test_staleness_functions_by_hand():
    assert staleness_weight("constant", 7, 0.5, 4) == 1.0
    assert staleness_weight("polynomial", 3, 0.5, 4) == pytest.approx(0.5)  # 1/sqrt(1 + 3)
    assert staleness_weight("polynomial", 0, 2.0, 4) == 1.0
    assert staleness_weight("hinge", 4, 1.0, 4) == 1.0
    assert staleness_weight("hinge", 6, 1.0, 4) == pytest.approx(1 / 3)  # 1 / (1 (6 − 4) + 1)


@pytest.mark.parametrize(
    ("name", "keys", "expected"),
    [
        ("fedbuff", {"buffer_sise": 3}, "buffer_sise"),
        ("fedbuff", {"buffer_size": 0}, "buffer_size"),
        ("fedbuff", {"server_lr": -1.0}, "server_lr"),
        ("fedbuff", {"staleness": "linear"}, "staleness"),
        ("fedbuff", {"concurrency": 50}, "concurrency = 50"),
        ("fedasync", {"alpha": 1.5}, "alpha"),
        ("fedasync", {"max_staleness": 3}, "max_staleness"),  # FedBuff's key, not FedAsync's
    ],
)
def test_their_keys_are_validated(name, keys, expected):
    with pytest.raises(ScenarioError, match=expected):
        make_scenario(name, **keys)


@pytest.mark.parametrize("name", ["fedasync", "fedbuff"])
def test_over_selection_and_round_planning_controllers_are_refused_clearly(name):
    from edgefl.scenario import scenario_from_dict

    base = make_scenario(name).model_dump(mode="json", exclude_none=True)
    over = {**base, "algorithm": {**base["algorithm"], "over_selection": 0.3}}
    with pytest.raises(ScenarioError, match="over_selection.*asynchronous"):
        scenario_from_dict(over)
    run = {**base["run"], "engine": "simpy"}
    with pytest.raises(ScenarioError, match='control.name = "adaptive_tau".*"static" or "deadline_fit"'):
        scenario_from_dict({**base, "run": run, "control": {"name": "adaptive_tau"}})


class _DispatchesTwice(Algorithm):
    name = "twice"

    def __init__(self, ctx):
        super().__init__(ctx)
        self.w = ctx.init_params.clone()

    def round(self, r):
        yield Dispatch(Train(np.array([0, 1]), self.w, 1, shared={"lr": 0.1}), r, 1.0, 1.0)
        yield Dispatch(Train(np.array([1]), self.w, 1, shared={"lr": 0.1}), r, 1.0, 1.0)

    @property
    def model(self):
        return self.w


def test_a_client_has_at_most_one_dispatched_chain():
    sim = Simulation(make_scenario())
    sim.algorithm = _DispatchesTwice(sim.context)
    with pytest.raises(PluginError, match="Dispatch of client 1, whose dispatched chain is still running"):
        sim.engine.run_round(sim.algorithm, 0)


def test_next_arrival_returns_result_version_and_start_of_each_chain_in_start_order():
    sim = Simulation(make_scenario())
    engine, ctx = sim.engine, sim.context

    class Probe(_DispatchesTwice):
        got: list = []

        def round(self, r):
            yield Dispatch(Train(np.array([3, 1]), self.w, 2, shared={"lr": 0.05}), 7, 1.0, 1.0)
            yield Dispatch(Train(np.array([0]), self.w + 1, 2, shared={"lr": 0.05}), 8, 1.0, 1.0)
            for _ in range(4):
                self.got.append((yield NextArrival()))

    probe = Probe(ctx)
    engine.run_round(probe, 9)
    first, second, third, none = probe.got
    assert none is None
    assert [(a.client, a.version, a.staleness, a.arrived) for a in (first, second, third)] == [
        (1, 7, 2, True),
        (3, 7, 2, True),
        (0, 8, 1, True),
    ]
    assert [a.more_now for a in (first, second, third)] == [True, True, False]
    assert torch.equal(third.start, probe.w + 1) and torch.equal(first.start, probe.w)
    assert not torch.equal(first.params, first.start)  # it trained
    assert engine.selected_count[[0, 1, 3]].tolist() == [1, 1, 1] and engine.arrived_count.sum() == 3


def test_chain_ends_that_differ_in_their_last_bits_are_one_instant():
    """Issue 28: arrivals that coincide in exact arithmetic but differ by ~1e-17 s were two instants (the first
    taken alone, more_now False: the server refilled its slots and updated in between, so some uploads got a
    version or staleness off by one). 0.1 + 0.2 and 0.3 are one instant: taken in client order, more_now True."""
    from edgefl.deployment import build_population, network_params
    from edgefl.scenario import scenario_from_dict
    from edgefl.sim import SimPyPricer

    s = scenario_from_dict(
        {"data": {"num_clients": 3}, "algorithm": {"clients_per_round": 3}, "network": {"snr_db": 20.0}}
    )
    pricer = SimPyPricer(network_params(s.network), build_population(s.network, s.devices, 3, 1.0, 1.0, seed=0), 0)
    env = pricer.env
    assert 0.1 + 0.2 != 0.3 and abs((0.1 + 0.2) - 0.3) < 1e-12

    def ends_at(t):
        yield env.timeout(t)

    for client, t in ((2, 0.3), (0, 0.1 + 0.2), (1, 0.5)):
        pricer._flight_done[client] = True
        pricer._in_flight(client, env.process(ends_at(t)))
    assert pricer.next_arrival() == (0, True)
    assert pricer.arrived_by_now()  # client 2 ended at the same instant
    assert pricer.next_arrival() == (2, True)
    assert not pricer.arrived_by_now()
    assert pricer.next_arrival() == (1, True) and pricer.now == 0.5
    assert pricer.next_arrival() is None


# -- on the SimPy engine ---------------------------------------------------------------------------
def _simpy_scenario(algorithm: str, network: dict | None = None, devices: dict | None = None, **hp):
    """make_scenario on the SimPy engine, with [devices] (and [network]) tables."""
    from edgefl.scenario import scenario_from_dict

    base = make_scenario(algorithm, engine="simpy", network=network, **hp).model_dump(mode="json", exclude_none=True)
    return scenario_from_dict({**base, "devices": {**base.get("devices", {}), **(devices or {})}})


def test_fedbuff_is_fedavg_uniform_on_a_network_where_everyone_finishes_together():
    """The SimPy engine, equal devices at one SNR, no fading, no stragglers, FDMA: every chain of a dispatch ends
    at the same instant, and FedBuff (K = C = m, η_g = 1, constant) is FedAvg with uniform weights round for round:
    accuracy and loss to 1e-6, and the same simulated time and energy (the same chains)."""
    network = {"snr_db": 20.0, "bandwidth_mhz": 1.0, "access": "fdma", "fading": "none"}
    common = dict(rounds=6, clients_per_round=4, local_steps=3, lr=0.1, data=UNEQUAL, network=network)
    fedavg = Simulation(_simpy_scenario("fedavg", weighting="uniform", **common)).run(progress=False).metrics
    fedbuff = (
        Simulation(
            _simpy_scenario("fedbuff", buffer_size=4, concurrency=4, server_lr=1.0, staleness="constant", **common)
        )
        .run(progress=False)
        .metrics
    )
    for key in ("acc_mean", "acc_worst", "loss", "sim_time_s", "energy_j"):
        np.testing.assert_allclose(
            [r[key] for r in fedbuff], [r[key] for r in fedavg], rtol=1e-9, atol=1e-6, err_msg=key
        )
    assert [r["staleness_max"] for r in fedbuff] == [0.0] * 6
    assert fedavg[-1]["sim_time_s"] > 0 and fedavg[-1]["energy_j"] > 0


def test_a_hand_timeline_of_three_clients_of_different_speeds(tmp_path):
    """FedAsync, concurrency 3, three clients computing 1 s, 2.5 s and 4 s per chain (40 samples of 2.5e9 cycles
    at 1, 0.4 and 0.25 GHz), their messages a few ms (c). Each arrival makes a version; the freed client restarts
    from it. By hand (fast F, mid M, slow S; times ≈ without c):

        t ≈ 1    F (from v0)  update 1: staleness 0 ; F restarts from v1
        t ≈ 2    F (v1)       update 2: staleness 0 ; F from v2
        t ≈ 2.5  M (v0)       update 3: staleness 2 ; M from v3 (ends ≈ 5.0)
        t ≈ 3    F (v2)       update 4: staleness 1 ; F from v4
        t ≈ 4    S (v0)       update 5: staleness 4 ; (4 + c: before F's 4 + 4c)
        t ≈ 4    F (v4)       update 6: staleness 1 ; F from v6
        t ≈ 5    M (v3)       update 7: staleness 3 ; (5 + 2c: before F's 5 + 5c)
        t ≈ 5    F (v6)       update 8: staleness 1
    """
    from edgefl.runner import write_results

    devices = {
        "cpu_ghz": 0.25,
        "cycles_per_sample": 2.5e7,
        "classes": [{"name": "fast", "share": 1 / 3, "cpu_ghz": 1.0}, {"name": "mid", "share": 1 / 3, "cpu_ghz": 0.4}],
    }
    network = {"snr_db": 20.0, "bandwidth_mhz": 1.0, "access": "dedicated", "fading": "none", "rate": "shannon"}
    scenario = _simpy_scenario(
        "fedasync",
        network=network,
        devices=devices,
        data={"name": "synthetic", "num_clients": 3, "samples_per_client": 60},
        rounds=8,
        clients_per_round=3,
        local_steps=5,
        batch_size=8,
        staleness="constant",
    )
    sim = Simulation(scenario)
    result = sim.run(progress=False)
    write_results(result, tmp_path / "out", plots=False)
    name = {c: str(label) for c, label in enumerate(sim.population.device_class)}
    order = ["fast", "fast", "mid", "fast", "base", "fast", "mid", "fast"]
    versions = [0, 1, 0, 2, 0, 4, 3, 6]
    staleness = [0, 0, 2, 1, 4, 1, 3, 1]
    approx_s = [1, 2, 2.5, 3, 4, 4, 5, 5]

    import csv

    with open(tmp_path / "out" / "events.csv") as handle:
        uploads = [row for row in csv.DictReader(handle) if row["kind"] == "upload"]
    uploads.sort(key=lambda row: float(row["end_s"]))
    assert [name[int(row["client"])] for row in uploads] == order
    assert [int(row["model_version"]) for row in uploads] == versions
    assert [int(row["staleness"]) for row in uploads] == staleness
    assert [int(row["round"]) for row in uploads] == list(range(1, 9))  # update k is made in round k
    with open(tmp_path / "out" / "metrics.csv") as handle:
        metrics = list(csv.DictReader(handle))
    assert [float(row["staleness_max"]) for row in metrics] == staleness
    assert [float(row["sim_time_s"]) for row in metrics] == [float(row["end_s"]) for row in uploads]
    np.testing.assert_allclose([float(row["end_s"]) for row in uploads], approx_s, atol=0.1)


@pytest.mark.parametrize("name", ["fedasync", "fedbuff"])
def test_a_client_whose_chain_fails_at_once_is_not_sampled_again_in_the_round(name):
    """A device the round's online mask calls online may fail its chain at once (gone offline, empty battery): no
    simulated time passes, and sampling it again at once would spin for ever. Here client 0's chains always fail
    at once, and every client is in flight (concurrency = N): the round goes on with the others."""
    sim = Simulation(make_scenario(name, rounds=4, clients_per_round=4, data={**SYNTHETIC, "num_clients": 4}))
    pricer = sim.engine.pricer
    arrive = pricer.next_arrival

    def failing_client_0():
        ended = arrive()
        return None if ended is None else (ended[0], ended[0] != 0)

    pricer.next_arrival = failing_client_0
    rows = sim.run(progress=False).metrics
    assert len(rows) == 4
    assert sim.engine.missed_count[0] == sim.engine.selected_count[0] <= 4  # at most once per round
    assert sim.engine.arrived_count[1:].sum() > 0


SYNTHETIC = {"name": "synthetic", "samples_per_client": 40}


def test_a_sweep_co_simulates_asynchronous_points():
    """Their learning depends on the order uploads arrive in: one training re-priced on another network is not
    that network's run."""
    from edgefl.sweeps.plan import COSIMULATED, REPRICED, pricing_mode

    assert pricing_mode(make_scenario("fedavg", engine="simpy")) == REPRICED
    assert pricing_mode(make_scenario("fedbuff", engine="simpy")) == COSIMULATED
    assert pricing_mode(make_scenario("fedasync", engine="simpy")) == COSIMULATED


PHONES = Path(__file__).resolve().parents[1] / "scenarios" / "phones-in-a-cell.toml"


@pytest.mark.parametrize(
    "case",
    [
        ["compression.name=qsgd", "compression.bits=4"],
        ["compression.name=topk", "algorithm.fedasync.concurrency=3"],
        ["model.name=mlp", "algorithm.fedasync.concurrency=3", "run.rounds=8", "network.deadline_s=2"],
        ["run.threads=2"],
    ],
    ids=["mnist-linear-qsgd", "mnist-linear-topk", "mnist-mlp", "mnist-linear-two-threads"],
)
def test_chains_dispatched_one_at_a_time_train_together_with_the_numbers_of_training_each_at_once(monkeypatch, case):
    """On the SimPy engine FedAsync refills one slot per arrival; the chains dispatched since the last training are
    trained together when one of them ends (Engine.settle). Their minibatches were drawn at dispatch and update
    compression (its stream, its error feedback) runs in dispatch order: the run equals one that trains each Dispatch
    at once (as the engine did before), in fewer executor calls. Byte-identical on MNIST with one CPU thread (linear
    and vmapped MLP); where the CPU's matrix products round a stacked row's last bits apart (several threads; or the
    small products of a 60-input model, a few 1e-8 seen), within 1e-6."""
    import edgefl.sim.engine as engine_module

    sets = [*SMALL_PHONES, "algorithm.name=fedasync", "algorithm.fedasync.concurrency=5", "run.rounds=16"]
    scenario = load_scenario(PHONES, [*sets, "run.threads=1", *case])
    calls: list[int] = []
    together = engine_module.train_together
    monkeypatch.setattr(engine_module, "train_together", lambda jobs: calls.append(len(jobs)) or together(jobs))

    def run():
        sim = Simulation(scenario)
        return sim.run(progress=False), sim.algorithm.model.clone()

    deferred, deferred_model = run()
    trained_together = list(calls)
    dispatch = engine_module.Engine._dispatch
    monkeypatch.setattr(engine_module.Engine, "_dispatch", lambda self, op: (dispatch(self, op), self.settle())[0])
    calls.clear()
    at_once, at_once_model = run()
    assert set(calls) == {1}  # the reference: every Dispatch trained by itself
    assert max(trained_together) > 1 and len(trained_together) < len(calls)
    assert [(e.client, e.end_s, e.arrived, e.version) for e in deferred.chain_ends] == [
        (e.client, e.end_s, e.arrived, e.version) for e in at_once.chain_ends
    ]
    if scenario.data.name == "mnist" and scenario.run.threads == 1:
        assert torch.equal(deferred_model, at_once_model)
        assert repr(deferred.metrics) == repr(at_once.metrics)  # (floats' reprs round-trip; NaN equals NaN here)
    else:
        torch.testing.assert_close(deferred_model, at_once_model, rtol=0, atol=1e-6)
        for key in ("loss", "acc_mean", "energy_j", "sim_time_s"):
            values = [[r[key] for r in result.metrics if r[key] is not None] for result in (deferred, at_once)]
            assert len(values[0]) == len(values[1]) > 0
            np.testing.assert_allclose(*values, rtol=0, atol=1e-6, err_msg=key)


def test_an_operations_clients_are_checked_for_duplicates_also_for_one_client():
    """A Dispatch's Train, Broadcast and Upload of one client skip np.unique (benchmarks [8]); duplicates still raise."""
    from algorithms.ops import Broadcast, Upload

    assert Broadcast(np.array([7]), 1.0).clients.tolist() == [7]
    assert Upload(7, 1.0).clients.tolist() == [7]  # (a scalar: one client)
    assert Broadcast([], 1.0).clients.tolist() == []
    with pytest.raises(ValueError, match="duplicates: \\[3, 1, 3\\]"):
        Broadcast(np.array([3, 1, 3]), 1.0)
    with pytest.raises(ValueError, match="duplicates"):
        Upload([2, 2], 1.0)
