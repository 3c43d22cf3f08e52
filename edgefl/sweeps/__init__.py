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
- :mod:`~edgefl.sweeps.arguments`: the arguments of ``edgefl sweep | compare | optimal-tau | plot`` (registered by
  :mod:`edgefl.cli`); :mod:`~edgefl.sweeps.cli`: the commands, imported when one runs.
"""

# What the package exports, each from its module, imported on first use (as edgefl/__init__.py): importing
# edgefl.sweeps.arguments to build the command line's parser must not load torch (sweeps.run) or scipy.stats
# (sweeps.analysis).
EXPORTS = {
    "OptimalTau": "analysis",
    "optimal_tau": "analysis",
    "run_jobs": "jobs",
    "COSIMULATED": "plan",
    "REPRICED": "plan",
    "TAU_KEY": "plan",
    "SweepError": "plan",
    "SweepPlan": "plan",
    "SweepPoint": "plan",
    "parse_grid": "plan",
    "plan_sweep": "plan",
    "SweepSummary": "run",
    "run_sweep": "run",
    "load_manifest": "store",
    "read_point": "store",
}
TARGET_EXPORTS = ("Target", "parse_target", "rounds_to_target")  # edgefl.target's


def __getattr__(name: str):
    if name in EXPORTS:
        from importlib import import_module

        return getattr(import_module(f"edgefl.sweeps.{EXPORTS[name]}"), name)
    if name in TARGET_EXPORTS:
        from edgefl import target

        return getattr(target, name)
    raise AttributeError(f"module 'edgefl.sweeps' has no attribute {name!r}")


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
