"""The error a user can fix: `edgefl` prints it without a traceback and exits with code 2."""

from __future__ import annotations


class UserError(Exception):
    """A mistake the user can fix; printed without a traceback, exit code 2."""
