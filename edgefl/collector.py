"""The garbage collector's reach (gc.freeze): objects that live as long as the process, or as long as a run, are kept
out of its full collections, which traverse every tracked object (docs/performance.md). Only when garbage is
collected changes, never a result: nothing in edgefl depends on it."""

from __future__ import annotations

import atexit
import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_LOCK = threading.Lock()
_PROCESS_FROZEN = False  # the process froze its heap once its modules were imported (freeze_process): for good
_RUNS = 0  # runs now inside frozen_during_run (seed runs in threads: edgefl.seed_axis.run_together)
_RUNS_FROZE = False  # whether the first of them froze the heap


def freeze_process() -> None:
    """Keep every object allocated so far out of full collections, for the rest of the process (the `edgefl`
    command once its modules are imported: edgefl.cli.settle_imports)."""
    global _PROCESS_FROZEN
    with _LOCK:
        _PROCESS_FROZEN = True
        gc.freeze()


def freeze_at_exit() -> None:
    """When this process ends (atexit), keep every object out of the collections that Python's finalization runs:
    each traverses every tracked object (torch's, the data's), about 0.4-1 s of a process that imported torch
    (docs/performance.md, "Ending a process"), and what they would free, the system frees anyway when the process
    ends. Objects are still freed by their reference counts as modules are torn down; only garbage in reference
    cycles is left to the system (edgefl writes its files with ``with`` blocks, closed before). For processes of
    their own: the `edgefl` command (edgefl.cli.main) and a sweep's pool workers (edgefl.sweeps.jobs), whose
    parent waits for them to end before it writes results.csv."""
    atexit.register(gc.freeze)


@contextmanager
def frozen_during_run() -> Iterator[None]:
    """The objects that exist when the first of the runs now going starts are kept out of full collections
    (gc.freeze) until the last of them ends (gc.unfreeze). Why: a run keeps its events.csv rows as ``Event`` named
    tuples, which CPython never untracks; an asynchronous run makes ~21,000 of them, and they trigger full
    collections that traverse the whole process (torch, the data set, modules: ~250,000 objects, ~0.15-0.3 s each,
    ~0.2-0.45 ms per chain of benchmarks/run.py [8]). Frozen objects are not traversed; garbage made during the run
    is collected as before, and what was frozen and died meanwhile is collected after the unfreeze. Runs in threads
    share one freeze (a counter): one run's end never unfreezes another's heap. A process frozen by
    :func:`freeze_process` is left as it is. (Not gc.get_freeze_count() to tell: it walks every frozen object, ~18 ms
    in the `edgefl` command.) A process that called gc.freeze() itself has its heap unfrozen after a run here."""
    global _RUNS, _RUNS_FROZE
    with _LOCK:
        if _RUNS == 0 and not _PROCESS_FROZEN:
            gc.freeze()
            _RUNS_FROZE = True
        _RUNS += 1
    try:
        yield
    finally:
        with _LOCK:
            _RUNS -= 1
            if _RUNS == 0 and _RUNS_FROZE:
                _RUNS_FROZE = False
                gc.unfreeze()
