"""Scenario dicts written with an algorithm's own keys beside the common ones, moved into the algorithm's
own table (`[algorithm.<name>]`, as edgefl.scenario requires since algorithm keys moved to their tables), and the
runs of jobs holding such dicts, their seeds trained together."""

from __future__ import annotations

import copy
import time
from typing import Callable


def with_own_table(scenario: dict) -> dict:
    """A copy of ``scenario`` whose [algorithm] keeps the common keys (edgefl.scenario.AlgorithmSection) and
    holds every other key in [algorithm.<name>]."""
    from edgefl.scenario import AlgorithmSection

    out = copy.deepcopy(scenario)
    algorithm = out["algorithm"]
    own = {
        k: algorithm.pop(k)
        for k in list(algorithm)
        if k not in AlgorithmSection.model_fields and k != algorithm["name"]
    }
    if own:
        algorithm.setdefault(algorithm["name"], {}).update(own)
    return out


def run_seeds_of(jobs: list[dict], record: Callable) -> list:
    """The runs of ``jobs`` (each with a ``scenario`` dict as above; a worker process, 1 torch thread), those that
    differ only in the seed trained together (edgefl.seed_axis.run_seeds: each run's numbers are its solo run's):
    ``record(job, sim, result, wall_s)`` of each, ``wall_s`` its share of the group's wall time."""
    import torch

    from edgefl.scenario import scenario_from_dict
    from edgefl.seed_axis import run_seeds

    torch.set_num_threads(1)
    started = time.time()
    scenarios = [scenario_from_dict(with_own_table(job["scenario"])) for job in jobs]
    runs = run_seeds(scenarios, run=lambda sim: (sim, sim.run(progress=False)))
    wall_s = (time.time() - started) / len(jobs)
    return [record(job, sim, result, wall_s) for job, (sim, result) in zip(jobs, runs)]


def seedless(job: dict) -> str:
    """A job's scenario but its seed: run_keyed's ``together`` for :func:`run_seeds_of`."""
    from edgefl.seed_axis import seedless

    return seedless(job["scenario"])
