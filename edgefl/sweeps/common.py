"""What every sweep module names: its error, the two ways a point is computed, τ's grid key, the format of a point's
id and file. Apart from :mod:`edgefl.sweeps.plan` (which re-exports them), so that `optimal-tau` and `plot`, which
read a finished sweep, do not import what planning one needs (the scenario's schema, the data sets, the engine)."""

from __future__ import annotations

from edgefl.errors import UserError

FORMAT = 1  # of a point's id and of its file; a new format makes every point new
REPRICED, COSIMULATED = "repriced", "cosimulated"
TAU_KEY = "algorithm.local_steps"
SWEEP_WORKER_MODULES = ("edgefl.sweeps.run",)  # what a sweep's workers import (its jobs' module, torch): their
# fork server imports it while the sweep is planned (edgefl.sweeps.jobs.workers_started_early)


class SweepError(UserError, ValueError):
    """A user mistake about a sweep (bad --grid, a folder holding another sweep). Exit 2."""
