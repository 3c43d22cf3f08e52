"""The batched executor against the per-client reference loop, for every registered algorithm.

Each algorithm in ``algorithms.names()`` runs a few rounds on a tiny scenario with
``run.executor = "batched"`` and with ``"loop"``; the final global model and every round's
metrics must agree to 1e-5. Algorithms registered later are covered without editing this file;
one that needs a data set none of the candidates below provides fails with the reasons.
DRDM and DRFA exercise ``record_at`` here; step masks, snapshots, the closed-form linear path
against the generic vmap path and the loop, and the threads path of convolutional models are
tested op by op in tests/test_executor.py.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch

import algorithms
from edgefl.runner import Simulation
from edgefl.scenario import ScenarioError

from conftest import make_scenario

TOL = 1e-5
METRICS = ("acc_mean", "acc_worst", "acc_std", "loss")

# Tiny data sets an algorithm may need, tried in order until one builds.
CANDIDATE_DATA = [
    {"name": "synthetic", "samples_per_client": 40},
    {"name": "synthetic_priority", "samples_per_client": 40},
    {"name": "sparse_regression", "regression_dim": 16, "regression_sparsity": 4, "samples_per_client": 40},
]


def scenario(name: str, data: dict, executor: str, model: str = "linear"):
    model = "regression" if data["name"] == "sparse_regression" else model
    return make_scenario(
        name,
        seed=7,
        rounds=3,
        executor=executor,
        data={"num_clients": 6, **data},
        model={"name": model, "hidden": 16},
        clients_per_round=3,
    )


def build(name: str, executor: str, model: str = "linear") -> Simulation:
    errors = []
    for data in CANDIDATE_DATA:
        try:
            return Simulation(scenario(name, data, executor, model))
        except (ValueError, ScenarioError, TypeError) as exc:  # this data set does not suit the algorithm
            errors.append(f"{data['name']}: {exc}")
    pytest.fail(f"{name}: no tiny scenario builds; add a candidate data set here:\n" + "\n".join(errors))


def registered_module_missing(name: str) -> bool:
    module = algorithms.REGISTRY[name].split(":")[0]
    return importlib.util.find_spec(module) is None


def run_both(name: str, model: str = "linear"):
    if registered_module_missing(name):
        pytest.skip(f"{name} is registered but its module is not written yet")
    results = {}
    for executor in ("batched", "loop"):
        sim = build(name, executor, model)
        results[executor] = (sim, sim.run(progress=False))
    return results


@pytest.mark.parametrize("name", algorithms.names())
def test_batched_equals_loop_for_every_algorithm(name):
    results = run_both(name)
    (batched, run_b), (loop, run_l) = results["batched"], results["loop"]
    assert torch.allclose(batched.algorithm.model.double(), loop.algorithm.model.double(), atol=TOL, rtol=0)
    assert len(run_b.metrics) == len(run_l.metrics) == 3
    for row_b, row_l in zip(run_b.metrics, run_l.metrics):
        for key in METRICS:
            if row_b.get(key) is None:
                assert row_l.get(key) is None
            else:
                assert row_b[key] == pytest.approx(row_l[key], abs=TOL), (key, row_b["round"])


@pytest.mark.parametrize("name", ["fedavg", "drdm", "scaffold"])
def test_batched_equals_loop_with_a_non_linear_model(name):
    """The generic path (vmap of grad) where the closed-form linear gradient does not apply."""
    if name not in algorithms.REGISTRY:
        pytest.skip(f"{name} not registered")
    results = run_both(name, model="mlp")
    assert results["batched"][0].executor.strategy == "vmap"
    assert torch.allclose(results["batched"][0].algorithm.model, results["loop"][0].algorithm.model, atol=TOL, rtol=0)


def test_the_registry_is_exercised():
    assert "fedavg" in algorithms.names() and len(algorithms.names()) >= 1
    # every registered class is importable or its module is not written yet
    for name in algorithms.names():
        if not registered_module_missing(name):
            assert issubclass(algorithms.get(name), algorithms.Algorithm)


def test_linear_models_use_the_closed_form_gradient():
    sim = Simulation(scenario("fedavg", CANDIDATE_DATA[0], "batched"))
    assert sim.executor.strategy == "linear"
    assert np.isfinite(sim.run(progress=False).metrics[-1]["loss"])
