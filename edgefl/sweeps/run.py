"""Running a sweep: one learning run per training group or co-simulated point, re-pricing the
recorded op trace for every channel point of a group, resumable.

Points that share a training (:mod:`edgefl.sweeps.plan`) are trained once, on the ideal engine
with ``record_trace``, the trainings of one seed group (the same but the seed) together, in one batched run over a
seed axis (:mod:`edgefl.seed_axis`: each seed's numbers are its solo run's); the trace is then re-priced for each of them with
``edgefl.sim.engine.reprice_rounds(trace, pricer)``, the pricer ``edgefl.parts.pricer_of`` builds
for that point: the same pricer and random draws a co-simulation of that point uses (so the numbers are those of a
co-simulation). Every other point is co-simulated in full. The learning runs are jobs of
:func:`edgefl.sweeps.jobs.run_jobs` (in this process, a local process pool, or Ray tasks); each
returns its points' rows and this process writes them into the sweep folder
(:mod:`edgefl.sweeps.store`) as each job finishes, so Ray workers need no shared storage.
"""

from __future__ import annotations

import os
import time
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from edgefl.errors import UserError, WorkerDied
from edgefl.parts import pricer_of
from edgefl.plugins import faults_named, import_plugins
from edgefl.results import empty_again, open_folder
from edgefl.runner import Simulation
from edgefl.scenario import Scenario
from edgefl.seed_axis import run_together, seeds_at_once
from edgefl.sim.engine import RoundCost, reprice_rounds
from edgefl.sim.points import reprice_points
from edgefl.sweeps.jobs import check_options, run_jobs
from edgefl.sweeps.plan import COSIMULATED, REPRICED, SweepError, SweepPlan, SweepPoint, seed_group
from edgefl.sweeps.store import (
    POINTS_DIR,
    PointOutput,
    assemble_results,
    check_manifest,
    lock_folder,
    point_output,
    point_path,
    read_point,
    remove_stale_temps,
    write_point,
)
from energy import CATEGORIES


@dataclass
class Task:
    """The learning runs of ``points``, one per seed of a seed group, trained together (edgefl.seed_axis): REPRICED,
    the trainings re-priced for their points; COSIMULATED, each point co-simulated. A job of :func:`run_jobs`
    (picklable)."""

    mode: str
    scenario: Scenario  # the first run's (REPRICED: its training, on the ideal engine)
    points: list[SweepPoint] = field(default_factory=list)

    @property
    def runs(self) -> int:
        return len({run_of(p) for p in self.points})


def run_of(point: SweepPoint) -> str:
    """The learning run a point's numbers come from: its training (REPRICED, shared by its channel points) or itself."""
    return point.training if point.mode == REPRICED and point.training is not None else point.id


def trainer(scenario: Scenario) -> Scenario:
    """The scenario a REPRICED point's training runs: on the ideal engine (its trace is re-priced per point)."""
    return scenario.model_copy(update={"run": scenario.run.model_copy(update={"engine": "ideal"})})


def make_tasks(points: list[SweepPoint]) -> list[Task]:
    """The sweep's jobs: the points of one seed group (the same run but the seed, :func:`seed_group`) in as few
    jobs of at most :func:`seeds_at_once` runs as can be, of equal size, each job's seeds trained together
    (edgefl.seed_axis); the heaviest first (:func:`work`)."""
    groups: dict[tuple[str, str], list[SweepPoint]] = {}
    for p in points:
        groups.setdefault((p.mode, seed_group(p)), []).append(p)
    tasks: list[Task] = []
    for (mode, _), group in groups.items():
        runs = list(dict.fromkeys(run_of(p) for p in group))
        jobs = -(-len(runs) // seeds_at_once(group[0].scenario))
        size = -(-len(runs) // jobs)
        for lo in range(0, len(runs), size):
            these = set(runs[lo : lo + size])
            chosen = [p for p in group if run_of(p) in these]
            first = chosen[0].scenario
            tasks.append(Task(mode, trainer(first) if mode == REPRICED else first, chosen))
    return sorted(tasks, key=work, reverse=True)  # (a stable sort: tasks of equal work in the plan's order)


def work(task: Task) -> tuple[int, int]:
    """What a task costs, to order the tasks by: its runs' client steps (runs x rounds x clients per round x local
    steps), then its points (each re-priced or co-simulated). The workers take the tasks in this order, so the last
    to start are the lightest and the workers end nearly together (longest first; the Figure-4 study's τ = 30 tasks
    cost about twice its τ = 5 ones). Results do not depend on the order."""
    s = task.scenario
    return task.runs * s.run.rounds * s.algorithm.clients_per_round * s.algorithm.local_steps, len(task.points)


def repriced_rows(metrics: list[dict], costs: list[RoundCost]) -> list[dict]:
    """The training's metrics rows with time and energy taken from the re-priced rounds."""
    by_round = {c.round: c for c in costs}
    last = None
    rows = []
    for row in metrics:
        last = by_round.get(row["round"] - 1, last)  # a round without phases costs nothing
        by_cat = last.energy_by_category_j if last else {c: 0.0 for c in CATEGORIES}
        new = dict(row)
        new["sim_time_s"] = float(last.end_s) if last else 0.0
        new["energy_j"] = float(sum(by_cat.values()))
        new["committed_energy_j"] = float(last.committed_energy_j) if last else 0.0
        for c in CATEGORIES:
            new[f"{c}_energy_j"] = float(by_cat[c])
        rows.append(new)
    return rows


def price_point(point: SweepPoint, trace, model) -> list[RoundCost]:
    """Re-price a training's trace for one channel point: the SimPy pricer a co-simulation of
    the point would use (same population, same seed), fed the recorded phases."""
    # a re-priced point runs on the SimPy engine (plan.pricing_mode); its results are the ledger's, no event log
    *_, pricer = pricer_of(point.scenario, model, record_events=False)
    return reprice_rounds(trace, pricer)


POINTS_TOGETHER = 64  # at most this many channel points of a training re-priced together (their pricers held at once)


def price_points(points: list[SweepPoint], trace, model) -> list[list[RoundCost]]:
    """:func:`price_point` of each of ``points`` (channel points of one training): the same numbers, their pricers
    re-pricing the trace together where they differ only in their links' rates (edgefl.sim.points, benchmarks [5])."""
    costs: list[list[RoundCost]] = []
    for first in range(0, len(points), POINTS_TOGETHER):
        pricers = [
            pricer_of(p.scenario, model, record_events=False)[-1] for p in points[first : first + POINTS_TOGETHER]
        ]
        costs += reprice_points(trace, pricers)
    return costs


def run_task(task: Task) -> list[list[dict]]:
    """Compute a task's points: the metrics rows of each of ``task.points``, in order.
    Runs in a worker (process or Ray task) as well as in the main process (same numbers). A plug-in's
    exception is a PluginError here, where its traceback is (a worker sends back only the exception)."""
    torch.set_num_threads(task.scenario.run.threads or 1)
    with faults_named():
        import_plugins(task.scenario)  # a fresh worker: the plug-ins' files, to tell their faults
        if task.mode == COSIMULATED:  # one run per point, the seeds together
            return [result.metrics for result in run_together([Simulation(p.scenario) for p in task.points])]
        scenarios = {p.training: trainer(p.scenario) for p in task.points}  # one training per seed
        sims = [Simulation(s, record_trace=True) for s in scenarios.values()]
        trained = dict(zip(scenarios, zip(sims, run_together(sims))))  # the seeds trained together
        rows: dict[int, list[dict]] = {}  # each point's, by its place in task.points
        for training, (sim, result) in trained.items():
            places = [k for k, point in enumerate(task.points) if point.training == training]
            costs = price_points([task.points[k] for k in places], result.trace, sim.model)
            rows.update((k, repriced_rows(result.metrics, point_costs)) for k, point_costs in zip(places, costs))
        return [rows[k] for k in range(len(task.points))]


def run_task_output(task: Task) -> list[PointOutput]:
    """:func:`run_task`, each point's rows made into what it adds to the sweep folder (its file's text and results.csv
    lines, edgefl.sweeps.store.point_output) where they were computed: in the workers, beside each other, and not in
    the main process after them."""
    return [point_output(point, rows) for point, rows in zip(task.points, run_task(task))]


@dataclass
class SweepSummary:
    points: int
    reused: int  # already in the folder
    computed: int
    trainings: int  # learning runs done now (each co-simulated point counts as one)
    repriced: int  # points (of all) re-priced from a shared training
    cosimulated: int
    wall_s: float
    results: Path
    notes: list[str] = field(default_factory=list)  # what became of a sweep already in the folder (grown, replaced)


def run_sweep(
    plan: SweepPlan,
    out: Path,
    workers: int = 1,
    backend: str = "local",
    address: str | None = None,
    force: bool = False,
    progress: bool = True,
    then: Callable[[SweepSummary], None] | None = None,
) -> SweepSummary:
    """Compute the plan's missing points into ``out`` (resumable) and assemble results.csv.
    ``backend``/``address``/``workers``: see :func:`edgefl.sweeps.jobs.run_jobs`. ``then(summary)``: more
    writing into ``out`` (e.g. `edgefl compare`'s summary) while the folder's lock is still held."""
    started = time.perf_counter()
    out = Path(out)
    try:
        check_options(workers, backend, address)
    except (ValueError, ImportError) as exc:
        raise SweepError(str(exc)) from None
    claimed = open_folder(out, "sweep", force)  # edgefl's sweep folder, or a new or empty one (else exit 2)
    try:
        lock = lock_folder(out)
    except OSError as exc:
        raise SweepError(f"--out {out}: cannot write: {exc.strerror or exc}") from None
    try:
        summary = _run_locked(plan, out, workers, backend, address, force, progress, claimed, started)
        if then is not None:
            then(summary)
        return summary
    except BrokenProcessPool:
        done = len(list((out / POINTS_DIR).glob("*.json")))
        raise WorkerDied(
            f"a sweep worker process died (killed, or out of memory); the {done} points finished are "
            f"saved in {out}: rerun the same command to compute the rest"
        ) from None
    except OSError as exc:  # a full or read-only disk while writing the points
        raise SweepError(f"--out {out}: cannot write: {exc.strerror or exc}") from None
    finally:
        os.close(lock)  # releases the flock


def _run_locked(plan, out, workers, backend, address, force, progress, claimed, started) -> SweepSummary:
    remove_stale_temps(out)  # of a writer killed before its rename (we hold the lock: no writer is alive)
    change = check_manifest(out, plan, force)
    (out / POINTS_DIR).mkdir(exist_ok=True)
    try:
        present = {path.name for path in (out / POINTS_DIR).iterdir()}  # (a new folder: no file to read)
        missing = [p for p in plan.points if point_path(out, p.id).name not in present or read_point(out, p.id) is None]
        tasks = make_tasks(missing)
        computed: dict[str, PointOutput] = {}

        def store(task: Task, outputs: list[PointOutput]) -> None:
            for point, output in zip(task.points, outputs):
                write_point(out, point, output)
                computed[point.id] = PointOutput("", output.extra, output.lines)  # (its text is in its file now)

        run_jobs(
            run_task_output,
            tasks,
            workers=workers,
            backend=backend,
            address=address,
            on_result=store,
            size=lambda task: len(task.points),
            progress=progress,
            desc="sweep",
            unit="point",
        )
        results = assemble_results(out, plan, computed)
    except UserError:  # a scenario, data, sweep or plug-in mistake (edgefl.errors), or feasibility's refusal
        if not (out / POINTS_DIR).is_dir() or not any((out / POINTS_DIR).iterdir()):
            empty_again(out, claimed)  # e.g. missing data: leave nothing behind in a folder that was new or empty
        raise
    return SweepSummary(
        points=len(plan.points),
        reused=len(plan.points) - len(missing),
        computed=len(missing),
        trainings=sum(task.runs for task in tasks),
        repriced=sum(p.mode == REPRICED for p in plan.points),
        cosimulated=sum(p.mode == COSIMULATED for p in plan.points),
        wall_s=time.perf_counter() - started,
        results=results,
        notes=change.describe(len(plan.points)),
    )
