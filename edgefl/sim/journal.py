"""A pricer's state as the calls it received: what a run checkpoint stores of the co-simulation.

Between two rounds a SimPy model holds live processes (device availability, pending timeouts, a
plug-in's background processes): Python generators, which cannot be saved. But the pricer is
deterministic: the same calls from a fresh pricer built with the same seed bring it to the same
state, bit for bit (clock, RNG streams, batteries, positions, ledger, event log). So a checkpoint
keeps the journal of the calls that change its state, and a resumed run replays it on a fresh pricer;
no second description of the model's state is kept in step by hand. Replaying costs the pricing of
the rounds so far, not their training.

A method marked :func:`journaled` is recorded when called from outside the pricer (not when one
journaled method calls another), with its arguments pickled at call time (a caller may reuse and
change them later).
"""

from __future__ import annotations

import functools
import pickle
import zlib

JOURNAL_PROTOCOL = 5


def journaled(method):
    """Record the call in ``self.journal`` (when it is a list, and the call comes from outside)."""

    @functools.wraps(method)
    def record(self, *args, **kwargs):
        if self.journal is None or self._journal_depth:
            return method(self, *args, **kwargs)
        self.journal.append((method.__name__, zlib.compress(pickle.dumps((args, kwargs), protocol=JOURNAL_PROTOCOL))))
        self._journal_depth += 1
        try:
            return method(self, *args, **kwargs)
        finally:
            self._journal_depth -= 1

    record.journaled = True
    return record


def _unpack(packed: bytes):
    return pickle.loads(zlib.decompress(packed))


def replay(pricer, journal: list[tuple[str, bytes]], loads=_unpack) -> None:
    """Make ``pricer`` (fresh, built as the journal's pricer was) receive the journal's calls again; it keeps
    recording into its own journal, so a resumed run's next checkpoint holds the whole history. Only methods
    marked :func:`journaled` are called (ValueError otherwise); ``loads``: how a call's packed arguments are read
    (edgefl.checkpoint: without running code)."""
    for name, packed in journal:
        if not getattr(getattr(type(pricer), name, None), "journaled", False):
            raise ValueError(f"{name!r} is not a journaled method of {type(pricer).__name__}")
        args, kwargs = loads(packed)
        getattr(pricer, name)(*args, **kwargs)
