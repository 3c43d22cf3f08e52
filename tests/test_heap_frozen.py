"""Simulation.run keeps the heap that exists when it starts out of the garbage collector's full collections
(gc.freeze) and gives it back at its end (edgefl.collector.frozen_during_run): garbage is still collected, runs in
threads share one freeze, and a process that froze its heap for good (the `edgefl` command) keeps it frozen."""

from __future__ import annotations

import gc
import weakref

import edgefl.collector as collector
from edgefl.collector import frozen_during_run
from edgefl.runner import Simulation
from edgefl.seed_axis import run_together

from conftest import make_scenario


class Node:
    """An object in a reference cycle: only the collector frees it."""

    def __init__(self):
        self.me = self


def test_a_run_freezes_the_heap_it_found_and_unfreezes_it_at_its_end():
    gc.unfreeze()
    sim = Simulation(make_scenario("fedavg", rounds=2))
    before = Node()
    dropped = weakref.ref(before)
    seen = []

    def on_round(row):
        seen.append(gc.get_freeze_count())
        made = weakref.ref(Node())  # garbage made during the run: collected during the run
        gc.collect()
        assert made() is None

    sim.run(progress=False, on_round=on_round)
    assert seen and min(seen) > 0  # frozen during every round
    assert gc.get_freeze_count() == 0  # and given back after
    del before  # a cycle that existed before a run ...
    gc.collect()
    assert dropped() is None  # ... is collected once it is no longer frozen


def test_runs_in_threads_share_one_freeze():
    gc.unfreeze()
    with frozen_during_run():
        frozen = gc.get_freeze_count()
        assert frozen > 0
        with frozen_during_run():  # a second run starts while the first goes on
            pass
        assert gc.get_freeze_count() > frozen / 2  # its end did not unfreeze the first run's heap
    assert gc.get_freeze_count() == 0
    seen = []
    sims = [Simulation(make_scenario("fedavg", seed=seed, rounds=2)) for seed in (1, 2)]
    run_together(sims, lambda sim: sim.run(progress=False, on_round=lambda row: seen.append(gc.get_freeze_count())))
    assert len(seen) == 4 and min(seen) > 0
    assert gc.get_freeze_count() == 0


def test_a_heap_frozen_by_the_process_stays_frozen(monkeypatch):
    gc.unfreeze()
    monkeypatch.setattr(collector, "_PROCESS_FROZEN", False)  # (set back after the test: the others' process)
    collector.freeze_process()  # as the `edgefl` command does once its modules are imported (edgefl.cli.settle_imports)
    frozen = gc.get_freeze_count()
    try:
        Simulation(make_scenario("fedavg", rounds=1)).run(progress=False)
        assert gc.get_freeze_count() > frozen / 2  # not unfrozen (a frozen object freed by its count leaves it)
    finally:
        gc.unfreeze()


# What a process of its own keeps frozen when it ends (edgefl.collector.freeze_at_exit): an atexit handler registered
# before the freeze runs after it (LIFO) and sees the heap frozen, the objects made last included (LATE); without the
# freeze it sees them unfrozen.
SEES_FROZEN = (
    "import atexit, gc, os, sys; atexit.register(lambda: print('frozen', gc.get_freeze_count() >= len(LATE))); "
)
LATE = "; LATE = [[] for _ in range(100_000)]"  # more objects than a process holds before it starts


def _ends_frozen(code: str) -> str:
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", SEES_FROZEN + code + LATE], capture_output=True, text=True, cwd=root)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()[-1]  # (the last line: after what the code printed)


def test_a_process_that_asked_ends_with_its_heap_frozen():
    assert _ends_frozen("gc.unfreeze()") == "frozen False"  # (the check can fail)
    assert _ends_frozen("from edgefl.collector import freeze_at_exit; freeze_at_exit()") == "frozen True"


def test_a_sweep_worker_ends_with_its_heap_frozen():
    # the pool's initializer (edgefl.sweeps.jobs): its parent waits for it to end before writing results.csv
    assert _ends_frozen("from edgefl.sweeps.jobs import start_worker; start_worker(os.getppid())") == "frozen True"


def test_the_edgefl_command_ends_with_its_heap_frozen():
    # what it made after its imports too (e.g. a sweep's torch, imported once the scenario is valid)
    assert _ends_frozen("from edgefl.cli import main; sys.argv = ['edgefl', 'scenarios']; main()") == "frozen True"
