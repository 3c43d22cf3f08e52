"""Sweeps: one scenario over a grid of keys x seeds, resumable, re-priced where that is exact;
the energy-optimal τ from a sweep's results; their figures and commands.

Modules, each importing only those above it (rounds-to-target, the one definition, is :mod:`edgefl.target`):

- :mod:`~edgefl.sweeps.plan`: the points of a sweep and which of them share a training
  (:func:`plan_sweep`, :func:`parse_grid`, :class:`SweepError`).
- :mod:`~edgefl.sweeps.jobs`: run a list of picklable jobs on N workers (process pool or Ray),
  with a progress bar and an atomic on-disk cache (:func:`run_jobs`); also the job runner of
  the scripts in ``experiments/``.
- :mod:`~edgefl.sweeps.store`: the sweep folder (manifest, one file per finished point,
  results.csv).
- :mod:`~edgefl.sweeps.run`: trainings, co-simulations and re-pricing (:func:`run_sweep`).
- :mod:`~edgefl.sweeps.analysis`: energy-to-target and τ* (:func:`optimal_tau`).
- :mod:`~edgefl.sweeps.plots`: the figures (matplotlib; not imported here).
- :mod:`~edgefl.sweeps.cli`: ``edgefl sweep | optimal-tau | plot`` (registered by :mod:`edgefl.cli`).
"""

from edgefl.sweeps.analysis import OptimalTau, optimal_tau
from edgefl.sweeps.jobs import run_jobs
from edgefl.sweeps.plan import COSIMULATED, REPRICED, TAU_KEY, SweepError, SweepPlan, SweepPoint, parse_grid, plan_sweep
from edgefl.sweeps.run import SweepSummary, run_sweep
from edgefl.sweeps.store import load_manifest, read_point
from edgefl.target import Target, parse_target, rounds_to_target

__all__ = [
    "COSIMULATED",
    "REPRICED",
    "TAU_KEY",
    "OptimalTau",
    "SweepError",
    "SweepPlan",
    "SweepPoint",
    "SweepSummary",
    "Target",
    "load_manifest",
    "optimal_tau",
    "parse_grid",
    "parse_target",
    "plan_sweep",
    "read_point",
    "rounds_to_target",
    "run_jobs",
    "run_sweep",
]
