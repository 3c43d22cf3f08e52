"""Composite-objective algorithms: FedMiD, FedDA, Fast-FedDA, C-FedDA, MC-FedDA.

"Fast Composite Optimization and Statistical Recovery in Federated Learning" (Algorithms 1-3)
and "Federated Composite Optimization" (FedDA, FedMiD): equivalences with a shared random
stream (Fast-FedDA with mu = 0, alpha = 1, gamma = 1/eta_c is FedDA; with E = 1 and eps = inf it
is C-FedDA), the vectors each method sends per round (charged per transmission), batched =
per-client loop for the prox-heavy steps, and the estimation metrics of the recovery data sets.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest
import torch

from edgefl.data import build_federated_data
from edgefl.estimation import recovery_metrics, support_f1
from edgefl.runner import Simulation

from conftest import make_scenario, run_rounds

LASSO = {
    "name": "sparse_regression",
    "num_clients": 8,
    "samples_per_client": 30,
    "test_per_client": 5,
    "regression_dim": 40,
    "regression_sparsity": 10,
}
LOWRANK = {
    "name": "low_rank_matrix",
    "num_clients": 8,
    "samples_per_client": 40,
    "test_per_client": 5,
    "matrix_side": 6,
    "matrix_rank": 2,
}


COMPOSITE = {
    "local_steps": 5,
    "clients_per_round": 4,
    "batch_size": 5,
    "lr": 0.01,
    "lam": 0.05,
    "grad_scale": 0.5,
    "init_std": 1.0,
}


def scenario(name, rounds=10, data=LASSO, **kw):
    """make_scenario on a recovery data set with the regression model; ``kw`` overrides COMPOSITE."""
    return make_scenario(name, rounds=rounds, data=data, model="regression", threads=1, **{**COMPOSITE, **kw})


def models(s, record_trace=False):
    sim = Simulation(s, record_trace=record_trace)
    return run_rounds(sim), sim


def test_fast_fedda_with_mu_zero_is_fedda():
    lr = 0.01
    fast, _ = models(scenario("fast_fedda", rounds=15, mu=0.0, gamma=1 / lr, preset="constant"))
    fedda, _ = models(scenario("fedda", rounds=15, server_lr=1.0))
    for a, b in zip(fast, fedda):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(fast[0], fast[-1])  # it did move


def test_fast_fedda_with_one_local_step_and_no_constraint_is_c_fedda():
    kw = dict(rounds=12, local_steps=1, mu=0.1, gamma=40.0)
    fast, _ = models(scenario("fast_fedda", **kw))
    cfd, _ = models(scenario("c_fedda", epsilon=math.inf, **kw))
    for a, b in zip(fast, cfd):
        assert torch.allclose(a, b, rtol=1e-6, atol=1e-6)


def test_mc_fedda_with_one_stage_is_c_fedda_and_stages_switch():
    kw = dict(rounds=8, mu=0.1, gamma=30.0, epsilon=50.0)
    one, _ = models(scenario("mc_fedda", stage_lambdas=[0.05], stage_rounds=[], **kw))
    cfd, _ = models(scenario("c_fedda", lam=0.05, **kw))
    for a, b in zip(one, cfd):
        assert torch.equal(a, b)
    multi, sim = models(scenario("mc_fedda", stage_lambdas=[0.2, 0.1, 0.05], stage_rounds=[3, 2], **kw))
    alg = sim.algorithm
    assert alg.stage.index == 2 and alg.stage.lam == 0.05 and alg.stage.eps == 50.0 / 4
    assert alg.stage.rounds == 3  # rounds 5, 6, 7
    for a, b in zip(multi[:3], one[:3]):
        assert not torch.equal(a, b)  # a larger lambda in stage 0


def _bits_per_client_round(sim):
    down, up = defaultdict(float), defaultdict(float)
    for phase in sim.engine.trace:
        for client, acts in phase.chains.items():
            for a in acts:
                if a.kind == "download":
                    down[(phase.round, client)] += a.bits
                elif a.kind == "upload":
                    up[(phase.round, client)] += a.bits
    return down, up


@pytest.mark.parametrize(
    "name,down_vectors,down_scalars,up_vectors",
    [
        ("fedmid", 1, 0, 1),
        ("fedda", 1, 1, 1),
        ("fast_fedda", 3, 0, 2),
        ("c_fedda", 3, 0, 1),
        ("mc_fedda", 3, 0, 1),
    ],
)
def test_vectors_sent_per_participant_per_round(name, down_vectors, down_scalars, up_vectors):
    _, sim = models(scenario(name, rounds=6), record_trace=True)
    d = sim.algorithm.ctx.model_bits
    s = sim.algorithm.ctx.scalar_bits
    down, up = _bits_per_client_round(sim)
    assert set(down) == set(up) and len(up) == 6 * 4  # m = 4 participants per round
    seen: set = set()
    for (r, c), bits in up.items():
        assert bits == up_vectors * d
        expected = down_vectors * d + down_scalars * s
        if name in ("c_fedda", "mc_fedda") and c not in seen:  # the stage's anchor, eps, lam once
            expected += d + 2 * s
        seen.add(c)
        assert down[(r, c)] == expected


@pytest.mark.parametrize(
    "name,extra",
    [
        ("c_fedda", {"epsilon": 3.0}),  # an active l1 constraint inside the client steps
        ("fast_fedda", {}),
        ("fedmid", {"radius": 3.0}),
    ],
)
def test_batched_steps_equal_the_per_client_loop(name, extra):
    batched, _ = models(scenario(name, rounds=4, executor="batched", **extra))
    loop, _ = models(scenario(name, rounds=4, executor="loop", **extra))
    for a, b in zip(batched, loop):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-5)


def test_active_constraint_is_respected_by_the_server_iterate():
    _, sim = models(scenario("c_fedda", rounds=6, epsilon=3.0))
    alg = sim.algorithm
    from algorithms.prox import reg_value

    assert float(reg_value(alg.stage.w - alg.stage.anchor, alg.reg)) <= 3.0 * (1 + 1e-9)
    assert alg.metrics()["constraint_used"] == pytest.approx(1.0, rel=1e-6)
    assert alg.metrics()["client_boundary_steps"] > 0  # the client steps met the constraint too


def test_nuclear_norm_algorithms_run_batched_and_report_rank():
    data = {**LOWRANK}
    for name in ("fedmid", "fast_fedda", "c_fedda"):
        extra = {"regularizer": "nuclear", "lam": 0.5, "matrix_shape": [6, 6]}
        if name == "c_fedda":
            extra.update(epsilon=2.0, cprox_iters=30)
        batched, sim = models(scenario(name, rounds=3, data=data, **extra))
        loop, _ = models(scenario(name, rounds=3, data=data, executor="loop", **extra))
        assert torch.allclose(batched[-1], loop[-1], rtol=1e-4, atol=1e-4)
        m = recovery_metrics(batched[-1], sim.data.true_params)
        assert set(m) == {"fro_error", "op_error", "rank"} and 0 <= m["rank"] <= 6


def test_recovery_data_sets_and_metrics():
    lasso = build_federated_data(
        "sparse_regression", 4, 0, samples_per_client=20, test_per_client=3, regression_dim=30, regression_sparsity=7
    )
    assert lasso.train_x.shape == (80, 30) and lasso.test_x.shape == (12, 30)
    assert lasso.true_params.tolist() == [1.0] * 7 + [0.0] * 23
    w = torch.cat([lasso.true_params, torch.zeros(1)])  # + bias
    m = recovery_metrics(w, lasso.true_params)
    assert m["l2_error"] == 0 and m["support_f1"] == 1 and m["nonzeros"] == 7
    assert support_f1(np.array([1.0, 0.0, 0.005, 0.0]), np.array([1.0, 1.0, 0.0, 0.0]), 0.0) == pytest.approx(0.5)
    assert support_f1(np.array([1.0, 0.0, 0.005, 0.0]), np.array([1.0, 1.0, 0.0, 0.0]), 0.01) == pytest.approx(2 / 3)
    low = build_federated_data("low_rank_matrix", 3, 0, samples_per_client=10, matrix_side=5, matrix_rank=2)
    assert low.input_shape == (5, 5) and torch.linalg.matrix_rank(low.true_params) == 2
    # responses follow the model: residual variance ~ noise variance (1)
    x, y = low.client_train(0)
    resid = y - torch.einsum("nij,ij->n", x, low.true_params)
    assert float(resid.var()) < 4.0


def test_recovery_metrics_reach_the_runner_rows():
    sim = Simulation(scenario("fast_fedda", rounds=30))
    rows = sim.run(progress=False).metrics
    assert rows[0]["l2_error"] > rows[-1]["l2_error"]  # it recovers
    assert {"l2_error", "l1_error", "support_f1", "support_f1_001", "nonzeros", "reg"} <= set(rows[-1])
