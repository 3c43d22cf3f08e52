"""The error a user can fix: `edgefl` prints it without a traceback and exits with code 2."""

from __future__ import annotations


class UserError(Exception):
    """A mistake the user can fix; printed without a traceback, exit code 2."""

    exit_code = 2


class WorkerDied(UserError):
    """A worker process of a sweep died (killed, out of memory): what finished is saved, rerunning resumes.
    Exit code 75 (sysexits.h EX_TEMPFAIL: try again)."""

    exit_code = 75
