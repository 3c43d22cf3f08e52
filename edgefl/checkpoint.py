"""Run checkpoints (``run.checkpoint_every = k``): a killed run continues from its last checkpoint with
``edgefl run --resume``, and its outputs are byte-identical to an uninterrupted run's (summary.json's
wall_time_s aside).

A checkpoint is the state of a run between two rounds, in one file beside the results folder
(``.NAME.checkpoint``, written atomically, removed once the results are written):

- the learning state, pickled: the algorithm (its model, control variates, duals, ... and its
  context's RNG), the engine (participation counts, recorded trace, compressor residuals and RNG,
  controller and observer), the executor's minibatch RNG streams, the process-wide RNGs, and what the
  run has produced so far (metrics rows, battery and position rows);
- the co-simulation as the journal of the calls its pricer received (:mod:`edgefl.sim.journal`),
  replayed on a fresh pricer: SimPy processes cannot be saved, but the model is deterministic.

What a fresh :class:`~edgefl.runner.Simulation` of the same scenario rebuilds identically from the seed (the
data, the model's structure, the devices, the network, the executor's buffers) is not stored: the pickle
refers to those objects by name (pickle's persistent IDs) and gets the fresh ones back.
"""

from __future__ import annotations

import pickle
import random
from pathlib import Path

import numpy as np
import torch

from edgefl import __version__
from edgefl.errors import UserError
from edgefl.results import atomic_file
from edgefl.scenario import describe_differences
from edgefl.sim.journal import replay

FORMAT = 2  # 2: the scenario's values nested, as model_dump gives them
# The Simulation's attributes rebuilt from the scenario (referred to by name), and those saved.
REBUILT = ("scenario", "data", "model", "network", "population", "pricer", "executor")
SAVED = ("algorithm", "context", "engine", "controller", "record")


class CheckpointError(UserError):
    """A checkpoint that cannot be used for this run (exit 2)."""


def _fingerprint(scenario) -> dict:
    """The scenario's values that decide the run: everything but run.checkpoint_every."""
    values = scenario.model_dump(mode="json")
    values["run"].pop("checkpoint_every", None)
    return values


class _Pickler(pickle.Pickler):
    def __init__(self, handle, rebuilt: dict[int, str]):
        super().__init__(handle, protocol=pickle.HIGHEST_PROTOCOL)
        self._rebuilt = rebuilt

    def persistent_id(self, obj):
        return self._rebuilt.get(id(obj))


class _Unpickler(pickle.Unpickler):
    def __init__(self, handle, rebuilt: dict[str, object]):
        super().__init__(handle)
        self._rebuilt = rebuilt

    def persistent_load(self, name):
        return self._rebuilt[name]


def save(simulation, path: Path) -> None:
    """Write ``simulation``'s state between two rounds to ``path`` (via a temporary file and a rename: a kill
    leaves the previous checkpoint or the new one)."""
    if hasattr(simulation.pricer, "journal") and simulation.pricer.journal is None:
        raise RuntimeError("the pricer keeps no journal: call Simulation.keep_checkpoints() before the first round")
    rebuilt = {id(getattr(simulation, name)): name for name in REBUILT}
    with atomic_file(path, durable=True) as tmp, open(tmp, "wb") as handle:
        _Pickler(handle, rebuilt).dump({
            "format": FORMAT, "version": __version__, "scenario": _fingerprint(simulation.scenario),
            "state": {name: getattr(simulation, name) for name in SAVED},
            "executor_rngs": [rng.bit_generator.state for rng in (simulation.executor.rng, simulation.executor.eval_rng)],
            "journal": getattr(simulation.pricer, "journal", None),  # None: a stateless pricer (IdealPricer)
            "process_rngs": (torch.get_rng_state(), np.random.get_state(), random.getstate()),
        })


def restore(simulation, path: Path) -> int:
    """Bring a fresh ``simulation`` (built from the same scenario, no round run) to the state saved in
    ``path``; returns the number of rounds the checkpoint had run."""
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            names = {name: getattr(simulation, name) for name in REBUILT}
            saved = _Unpickler(handle, names).load()
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, KeyError, ValueError) as exc:
        raise CheckpointError(f"{path}: not a readable edgefl checkpoint ({type(exc).__name__}: {exc}); "
                              "delete it, or run without --resume to start again") from None
    if not isinstance(saved, dict) or saved.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not an edgefl checkpoint of format {FORMAT}; delete it, or run without --resume")
    if saved["version"] != __version__:
        raise CheckpointError(f"{path}: written by edgefl {saved['version']}, this is {__version__} (the run could "
                              "not continue identically); run without --resume to start again")
    now = _fingerprint(simulation.scenario)
    if saved["scenario"] != now:
        raise CheckpointError(f"{path}: the checkpoint is of another scenario "
                              f"({describe_differences(saved['scenario'], now)}); resume with the same scenario and "
                              "--set values, or run without --resume")
    for name, value in saved["state"].items():
        setattr(simulation, name, value)
    for rng, state in zip((simulation.executor.rng, simulation.executor.eval_rng), saved["executor_rngs"]):
        rng.bit_generator.state = state
    if saved["journal"] is not None:  # the co-simulation: its calls replayed on the fresh pricer
        simulation.keep_checkpoints()
        replay(simulation.pricer, saved["journal"])
    torch_state, numpy_state, python_state = saved["process_rngs"]
    torch.set_rng_state(torch_state)
    np.random.set_state(numpy_state)
    random.setstate(python_state)
    return simulation.record.rounds_done
