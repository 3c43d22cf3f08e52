"""Messages of the command line through Python's ``logging``: one logger, ``edgefl`` (its
children ``edgefl.<module>``), written to stderr as ``edgefl: <level>: <message>``.

Levels, set by the sub-commands' flags (``edgefl run -v ...`` or ``edgefl -v run ...``):

- default: warnings and errors; the command's own report goes to stdout, progress bars to stderr;
- ``-v``: also what the command is doing (data built, engine, where results go);
- ``-vv``: also debug lines (one per round) and, for an internal error, the traceback;
- ``-q``: no progress bars; warnings and errors only.

As a library, edgefl adds no handler: the calling program decides (``logging.basicConfig``).
"""

from __future__ import annotations

import argparse
import logging
import sys

LOGGER_NAME = "edgefl"


def get_logger(name: str) -> logging.Logger:
    """The logger of an edgefl module (``__name__``), a child of ``edgefl``."""
    return logging.getLogger(name if name.startswith(LOGGER_NAME) else f"{LOGGER_NAME}.{name}")


def add_arguments(parser: argparse.ArgumentParser, top_level: bool = False) -> None:
    """-v/--verbose (repeatable) and -q/--quiet. On the top-level parser they default to 0/False;
    on a sub-command they are only set when given (so ``edgefl -v run`` keeps its -v)."""
    unset = {} if top_level else {"default": argparse.SUPPRESS}
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        **({"default": 0} if top_level else unset),
        help="more messages: -v what is being done, -vv debug lines and tracebacks",
    )
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        **({"default": False} if top_level else unset),
        help="no progress bar; warnings and errors only",
    )


class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"edgefl: {record.levelname.lower()}: {record.getMessage()}"


def configure(verbose: int = 0, quiet: bool = False) -> None:
    """Route the ``edgefl`` logger to stderr at the level the flags ask for (idempotent)."""
    logger = logging.getLogger(LOGGER_NAME)
    level = logging.WARNING if quiet or verbose <= 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logger.setLevel(level)
    for handler in list(logger.handlers):
        if getattr(handler, "_edgefl_cli", False):
            logger.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)  # the stderr of now (tests capture it)
    handler.setFormatter(_Formatter())
    handler._edgefl_cli = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.propagate = False
