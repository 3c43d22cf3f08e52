"""Shared helpers of the algorithm tests: one tiny scenario builder and a round-by-round runner.

Test modules import them directly (``from conftest import make_scenario, run_rounds``; pytest
puts this folder on ``sys.path``), usually wrapping ``make_scenario`` with the defaults of
their own set-up, e.g. ``functools.partial(make_scenario, seed=3)``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any, Optional

import torch

from edgefl.scenario import Scenario, scenario_from_dict

# Ten clients of Synthetic(1, 1) with 40 samples each (synthetic_alpha = synthetic_beta = 1 by default).
SYNTHETIC_DATA = {"name": "synthetic", "num_clients": 10, "samples_per_client": 40}


def make_scenario(
    algorithm: str = "fedavg",
    *,
    seed: int = 5,
    rounds: int = 6,
    engine: str = "ideal",
    executor: str = "batched",
    threads: Optional[int] = None,
    data: Optional[dict] = None,
    model: str | dict = "linear",
    network: Optional[dict] = None,
    local_steps: int = 3,
    clients_per_round: int = 5,
    lr: float = 0.05,
    batch_size: int = 8,
    **hyperparams: Any,
) -> Scenario:
    """A validated scenario, small enough for a unit test.

    ``data`` replaces :data:`SYNTHETIC_DATA` as a whole (give its ``name``); ``model`` is a model
    name or a whole ``[model]`` table; ``network`` is the ``[network]`` table (defaults when
    omitted); every other keyword is an algorithm hyperparameter (``[algorithm.<name>]``).
    """
    run = {"seed": seed, "rounds": rounds, "engine": engine, "executor": executor}
    if threads is not None:
        run["threads"] = threads
    sections = {
        "run": run,
        "data": dict(SYNTHETIC_DATA if data is None else data),
        "model": {"name": model} if isinstance(model, str) else dict(model),
        "algorithm": {
            "name": algorithm,
            "local_steps": local_steps,
            "clients_per_round": clients_per_round,
            "lr": lr,
            "batch_size": batch_size,
            **({algorithm: hyperparams} if hyperparams else {}),
        },
    }
    if network is not None:
        sections["network"] = dict(network)
    return scenario_from_dict(sections)


def run_rounds(sim, rounds: Optional[int] = None) -> list[torch.Tensor]:
    """Run ``rounds`` rounds (default: the scenario's) one by one through ``sim.engine``;
    returns a copy of the global model after each."""
    models = []
    for r in range(sim.scenario.run.rounds if rounds is None else rounds):
        sim.engine.run_round(sim.algorithm, r)
        models.append(sim.algorithm.model.clone())
    return models


def load_experiment(name: str) -> ModuleType:
    """The script ``experiments/<name>.py`` as a module (experiments/ is not a package)."""
    path = Path(__file__).resolve().parents[1] / "experiments" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
