"""The errors a user can fix: one root, :class:`UserError`; ``edgefl`` prints one without a traceback and exits
with its ``exit_code`` (2 unless a subclass says otherwise). The CLI and the Python API catch the root once.

- :class:`ScenarioError`: a mistake in a scenario file or an override (``edgefl.scenario``);
- :class:`DataError`: missing or corrupt data, an unknown data set, impossible sizes (``edgefl.data``);
- ``PluginError`` (``edgefl.plugins``, exit 4), ``CheckpointError``, ``OutputError``, ``SweepError``;
- :class:`WorkerDied` (exit 75).

ScenarioError and DataError are ValueErrors too (as they were before the root existed).
"""

from __future__ import annotations


class UserError(Exception):
    """A mistake the user can fix; printed without a traceback, exit code 2."""

    exit_code = 2


class ScenarioError(UserError, ValueError):
    """A user mistake in a scenario file or override. The CLI prints it and exits 2."""


class DataError(UserError, ValueError):
    """A user mistake about data: a missing or corrupt file, an unknown dataset, impossible sizes.

    The message names the file or setting, what was expected and what to do; the CLI prints it
    as a clean error without a traceback.
    """


class WorkerDied(UserError):
    """A worker process of a sweep died (killed, out of memory): what finished is saved, rerunning resumes.
    Exit code 75 (sysexits.h EX_TEMPFAIL: try again)."""

    exit_code = 75
