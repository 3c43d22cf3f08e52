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
