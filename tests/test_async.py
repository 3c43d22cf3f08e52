"""Asynchronous servers (FedAsync, FedBuff): the Dispatch / NextArrival ops, their algorithms' must-show
checks (issue 22), their keys and what they refuse."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from algorithms.base import Algorithm, staleness_weight
from algorithms.ops import Dispatch, NextArrival, Train, sgd_step
from edgefl.plugins import PluginError
from edgefl.runner import Simulation
from edgefl.scenario import ScenarioError

from conftest import make_scenario, run_rounds

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
