"""The one error type of the data layer."""

from __future__ import annotations


class DataError(ValueError):
    """A user mistake about data: a missing or corrupt file, an unknown dataset, impossible sizes.

    The message names the file or setting, what was expected and what to do; the CLI prints it
    as a clean error without a traceback.
    """
