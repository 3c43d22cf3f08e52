"""The one error type of the data layer (defined with the other user errors in :mod:`edgefl.errors`)."""

from __future__ import annotations

from edgefl.errors import DataError

__all__ = ["DataError"]
