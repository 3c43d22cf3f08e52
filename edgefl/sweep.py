"""Sweeps: one scenario over a grid of keys x seeds, resumable, re-priced where that is exact.

A sweep point is one combination of grid values with one seed (run.seed + 0..K-1). Points
that differ only in channel keys (anything in [network] or [devices] except the message
sizes ``network.bits_per_param`` and ``network.header_bits``, which are baked into a trace)
have the same learning trajectory whenever the channel cannot change who participates (no
deadline, no outage; the engine's ``can_change_participation``). Such points share one
training per (learning keys, seed): it runs once on the ideal engine with ``record_trace``,
and its op trace is re-priced for every channel point (mode ``repriced``). Every other
point is co-simulated in full (mode ``cosimulated``).

Layout of a sweep folder::

    sweep.json      the manifest: the sweep's definition (base scenario, grid, seeds) and points
    points/ID.json  one finished point (its per-round metrics rows), written atomically
    computed.log    one line per point computed, appended after its file is in place
    results.csv     every point's rows, assembled (atomically) from points/ when all are done

Resuming is rerunning: a point whose file exists is not computed again. A rerun with
another definition into the same folder is refused unless ``force``.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import os
import shutil
import tempfile
import time
import tomllib
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Callable

from edgefl.results import atomic_write_text, write_csv
from edgefl.scenario import Scenario, ScenarioError, apply_overrides, check_sweep_key, read_toml, scenario_from_dict

FORMAT = 1
MANIFEST = "sweep.json"
POINTS_DIR = "points"
COMPUTED_LOG = "computed.log"
RESULTS = "results.csv"
REPRICED, COSIMULATED = "repriced", "cosimulated"
TAU_KEY = "algorithm.local_steps"
# [network] keys that change the op trace itself (the bits of every message): not re-priceable.
TRACE_NETWORK_KEYS = ("bits_per_param", "header_bits")


class SweepError(ValueError):
    """A user mistake about a sweep (bad --grid, a folder holding another sweep). Exit 2."""


# -- the plan: which points, which of them share a training --------------------------------
@dataclass
class SweepPoint:
    values: dict[str, Any]  # grid key -> value
    seed: int
    scenario: Scenario
    id: str  # content hash of the point's resolved scenario
    mode: str  # REPRICED or COSIMULATED
    training: str | None  # content hash of what the learning depends on (REPRICED only)

    @property
    def label(self) -> str:
        return ", ".join([f"{k}={v}" for k, v in self.values.items()] + [f"seed={self.seed}"])


@dataclass
class SweepPlan:
    source: str
    base: Scenario
    grid: dict[str, list]
    seeds: list[int]
    points: list[SweepPoint]

    def definition(self) -> dict:
        """What a rerun must match to resume into the same folder."""
        return _jsonable({
            "scenario": self.base.model_dump(mode="json", exclude={"sweep"}),
            "grid": [[key, values] for key, values in self.grid.items()],  # a list: keeps the order
            "seeds": self.seeds,
        })

    @property
    def num_trainings(self) -> int:
        """Learning runs of the whole sweep: one per training group + one per co-simulated point."""
        groups = {p.training for p in self.points if p.mode == REPRICED}
        return len(groups) + sum(p.mode == COSIMULATED for p in self.points)


def _jsonable(obj):
    return json.loads(json.dumps(obj, sort_keys=True))


def _hash(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


def parse_grid(text: str, option: str = "--grid") -> tuple[str, list]:
    """``key=v1,v2,...`` -> (key, [values]); each value a TOML literal, else a string.
    ``option`` names the command-line option in error messages."""
    if "=" not in text:
        raise SweepError(f"{option} {text!r}: expected key=v1,v2,..., e.g. {option} network.snr_db=0,10,20")
    key, raw = (part.strip() for part in text.split("=", 1))
    try:
        check_sweep_key(key)
    except ValueError as exc:
        raise SweepError(f"{option} {text!r}: {exc}") from None
    values = []
    for item in (v.strip() for v in raw.split(",")):
        if not item:
            raise SweepError(f"{option} {text!r}: empty value in the list")
        try:
            values.append(tomllib.loads(f"v = {item}")["v"])
        except tomllib.TOMLDecodeError:
            values.append(item)
    if len({repr(v) for v in values}) != len(values):
        raise SweepError(f"{option} {text!r}: repeated values")
    return key, values


def participation_depends_on_channel(scenario: Scenario) -> bool:
    """``SimPyPricer.can_change_participation`` on this scenario's channel (a deadline, an outage)."""
    from edgefl.physical import build_population, network_params
    from edgefl.sim import SimPyPricer

    s = scenario  # FLOPs do not matter here: the question is only who can miss the round
    population = build_population(s.network, s.devices, s.data.num_clients, 1.0, 1.0, s.run.seed)
    return SimPyPricer(network_params(s.network), population, s.run.seed).can_change_participation


def pricing_mode(scenario: Scenario) -> str:
    if scenario.run.engine != "simpy" or participation_depends_on_channel(scenario):
        return COSIMULATED
    return REPRICED


def learning_config(scenario: Scenario) -> dict:
    """Everything the learning trajectory (and the op trace) depends on."""
    dump = scenario.model_dump(mode="json", exclude={"sweep", "devices"})
    dump["network"] = {k: dump["network"][k] for k in TRACE_NETWORK_KEYS}
    dump["run"].pop("engine")
    return dump


def _set_key(raw: dict, key: str, value) -> None:
    section, name = key.split(".")
    node = raw.setdefault(section, {})
    if not isinstance(node, dict):
        raise SweepError(f"{section!r} is not a section")
    node[name] = value


def load_raw(path: Path, overrides: list[str]) -> dict:
    """The scenario file as a dict, data.dir resolved against the file, --set applied."""
    raw = read_toml(path)
    data = raw.get("data")
    if isinstance(data, dict) and isinstance(data.get("dir"), str):
        data["dir"] = str((path.parent / Path(data["dir"]).expanduser()).resolve())
    return apply_overrides(raw, overrides)


def plan_sweep(path: Path, overrides: list[str] | None = None, grids: list[str] | None = None,
               seeds: int | None = None) -> SweepPlan:
    """Validate the scenario, the grid and every point's scenario. Raises ScenarioError/SweepError."""
    path = Path(path)
    source = str(path)
    raw = load_raw(path, overrides or [])
    base = scenario_from_dict(raw, source=source)
    grid = {k: list(v) for k, v in base.sweep.grid.items()}
    for text in grids or []:
        key, values = parse_grid(text)
        grid[key] = values  # a --grid replaces the file's grid for that key
    num_seeds = base.sweep.seeds if seeds is None else seeds
    if num_seeds < 1:
        raise SweepError(f"--seeds must be >= 1, got {num_seeds}")
    seed_values = [base.run.seed + k for k in range(num_seeds)]
    point_raw = copy.deepcopy({k: v for k, v in raw.items() if k != "sweep"})
    points = []
    for combo in itertools.product(*grid.values()):
        values = dict(zip(grid, combo))
        raw_point = copy.deepcopy(point_raw)
        for key, value in values.items():
            _set_key(raw_point, key, value)
        label = ", ".join(f"{k}={v!r}" for k, v in values.items())
        scenario = scenario_from_dict(raw_point, source=f"{source} [sweep point {label}]" if label else source)
        for seed in seed_values:
            s = scenario.model_copy(update={"run": scenario.run.model_copy(update={"seed": seed})})
            dump = s.model_dump(mode="json", exclude={"sweep"})
            mode = pricing_mode(s)
            training = _hash(learning_config(s)) if mode == REPRICED else None
            points.append(SweepPoint(values, seed, s, _hash({"format": FORMAT, "scenario": dump}), mode, training))
    return SweepPlan(source, base, grid, seed_values, points)


# -- work: trainings and co-simulations ---------------------------------------------------
@dataclass
class Task:
    """One learning run: a training re-priced for ``points`` (REPRICED), or one co-simulation."""

    mode: str
    scenario: Scenario  # what is trained (REPRICED: on the ideal engine, with a trace)
    points: list[SweepPoint] = field(default_factory=list)


def make_tasks(points: list[SweepPoint]) -> list[Task]:
    tasks: dict[str, Task] = {}
    for p in points:
        if p.mode == REPRICED:
            if p.training not in tasks:
                s = p.scenario
                trainer = s.model_copy(update={"run": s.run.model_copy(update={"engine": "ideal"})})
                tasks[p.training] = Task(REPRICED, trainer)
            tasks[p.training].points.append(p)
        else:
            tasks[p.id] = Task(COSIMULATED, p.scenario, [p])
    return list(tasks.values())


def repriced_rows(metrics: list[dict], costs) -> list[dict]:
    """The training's metrics rows with time and energy taken from the re-priced rounds."""
    from energy import CATEGORIES

    by_round = {c.round: c for c in costs}
    last = None
    rows = []
    for row in metrics:
        last = by_round.get(row["round"] - 1, last)  # a round without phases costs nothing
        by_cat = last.energy_by_category_j if last else {c: 0.0 for c in CATEGORIES}
        new = dict(row)
        new["sim_time_s"] = float(last.end_s) if last else 0.0
        new["energy_j"] = float(sum(by_cat.values()))
        for c in CATEGORIES:
            new[f"{c}_energy_j"] = float(by_cat[c])
        rows.append(new)
    return rows


def price_point(point: SweepPoint, trace, compiled, model) -> list:
    """Re-price a training's trace for one channel point: vectorised on dedicated bands,
    the SimPy pricer otherwise (both exact)."""
    from edgefl.dedicated_pricing import can_price_dedicated, price_dedicated
    from edgefl.physical import build_population, network_params
    from edgefl.sim import SimPyPricer
    from edgefl.sim.engine import reprice_rounds

    s = point.scenario
    network = network_params(s.network)
    population = build_population(s.network, s.devices, s.data.num_clients, model.train_flops_per_sample,
                                  model.eval_flops_per_sample, s.run.seed)
    if can_price_dedicated(network):
        return price_dedicated(compiled, network, population, s.run.seed)
    return reprice_rounds(trace, SimPyPricer(network, population, s.run.seed))


def run_task(task: Task, out_dir: str, on_point: Callable[[SweepPoint], None] | None = None) -> int:
    """Compute a task's points and write each one; returns how many were written.
    Runs in a worker process as well as in the main one (same numbers either way)."""
    import torch

    from edgefl.dedicated_pricing import compile_trace
    from edgefl.runner import Simulation

    torch.set_num_threads(task.scenario.run.threads or 1)
    out = Path(out_dir)
    if task.mode == COSIMULATED:
        point = task.points[0]
        result = Simulation(point.scenario).run(progress=False)
        write_point(out, point, result.metrics)
        if on_point:
            on_point(point)
        return 1
    sim = Simulation(task.scenario, record_trace=True)
    result = sim.run(progress=False)
    compiled = compile_trace(result.trace)
    for point in task.points:
        costs = price_point(point, result.trace, compiled, sim.model)
        write_point(out, point, repriced_rows(result.metrics, costs))
        if on_point:
            on_point(point)
    return len(task.points)


# -- files --------------------------------------------------------------------------------
def point_path(out: Path, point_id: str) -> Path:
    return out / POINTS_DIR / f"{point_id}.json"


def write_point(out: Path, point: SweepPoint, rows: list[dict]) -> None:
    """The point's file (temp + rename), then one line in computed.log."""
    record = {"format": FORMAT, "id": point.id, "values": point.values, "seed": point.seed,
              "mode": point.mode, "rows": [{k: _plain(v) for k, v in row.items()} for row in rows]}
    atomic_write_text(point_path(out, point.id), json.dumps(record) + "\n")
    line = json.dumps({"id": point.id, "mode": point.mode, "seed": point.seed, "values": point.values,
                       "pid": os.getpid()}) + "\n"
    fd = os.open(out / COMPUTED_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())  # one small append: whole or not at all
    finally:
        os.close(fd)


def _plain(value):
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return float(value)


def read_point(out: Path, point_id: str) -> dict | None:
    """A finished point's record, or None if it is not there (or not readable)."""
    try:
        record = json.loads(point_path(out, point_id).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return record if record.get("id") == point_id and record.get("format") == FORMAT else None


def _flatten(obj, prefix=""):
    if isinstance(obj, dict):
        items = {}
        for k, v in obj.items():
            items.update(_flatten(v, f"{prefix}{k}."))
        return items
    return {prefix.rstrip("."): obj}


def check_manifest(out: Path, plan: SweepPlan, force: bool) -> None:
    """Refuse to mix two different sweeps in one folder (unless ``force``); then write the manifest."""
    path = out / MANIFEST
    new = plan.definition()
    if out.exists() and not out.is_dir():
        raise SweepError(f"--out {out}: exists and is not a folder")
    if path.exists():
        try:
            old = json.loads(path.read_text()).get("definition")
        except (json.JSONDecodeError, AttributeError):
            old = None
        if old != new and not force:
            if old is None:
                raise SweepError(f"{path} is not a sweep manifest; use --force to replace it or choose another --out")
            a, b = _flatten(old), _flatten(new)
            shown_value = lambda d, k: repr(d[k]) if k in d else "(unset)"  # noqa: E731
            diffs = [f"{k}: {shown_value(a, k)} -> {shown_value(b, k)}"
                     for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
            shown = "; ".join(diffs[:5]) + (f"; ... ({len(diffs) - 5} more)" if len(diffs) > 5 else "")
            raise SweepError(f"{out} holds a different sweep ({shown}). Rerun the same command to resume it, "
                             f"use --force to replace it, or choose another --out")
        if old != new:  # forced: drop the old sweep's points (same-scenario points are kept and reused)
            keep = {p.id for p in plan.points}
            for stale in (out / POINTS_DIR).glob("*.json"):
                if stale.stem not in keep:
                    stale.unlink()
            (out / RESULTS).unlink(missing_ok=True)
    manifest = {
        "format": FORMAT, "definition": new,
        "points": [{"id": p.id, "values": p.values, "seed": p.seed, "mode": p.mode, "training": p.training}
                   for p in plan.points],
    }
    atomic_write_text(path, json.dumps(manifest, indent=1) + "\n")


def assemble_results(out: Path, plan: SweepPlan) -> Path:
    """results.csv: one row per (point, seed, round), grid keys first, then seed, round,
    the metrics.csv columns and the mode. Written via temp + rename."""
    from edgefl.runner import METRIC_COLUMNS

    records = []
    for p in plan.points:
        record = read_point(out, p.id)
        if record is None:
            raise RuntimeError(f"sweep point {p.label} ({p.id}) has no result file")
        records.append((p, record))
    metric_cols = [c for c in METRIC_COLUMNS if c != "round"]
    for _, record in records:
        for row in record["rows"]:
            metric_cols += [k for k in row if k not in metric_cols and k not in METRIC_COLUMNS]
    header = list(plan.grid) + ["seed", "round"] + metric_cols + ["mode"]
    rows = ([*(p.values[k] for k in plan.grid), p.seed, row["round"], *(row.get(c) for c in metric_cols),
             record["mode"]] for p, record in records for row in record["rows"])
    atomic_write_csv(out / RESULTS, header, rows)
    return out / RESULTS


def atomic_write_csv(path: Path, header: list[str], rows) -> None:
    """write_csv via a temporary file + rename (never a half file)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write_csv(Path(tmp), header, rows)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# -- running ------------------------------------------------------------------------------
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


def ray_module():
    """Ray, imported only when asked for (an optional extra)."""
    try:
        import ray
    except ImportError:
        raise SweepError("--executor ray needs Ray, an optional extra that is not installed "
                         "(pip install 'edgefl[ray]'); or use the default --executor local") from None
    return ray


def run_sweep(plan: SweepPlan, out: Path, workers: int = 1, executor: str = "local", force: bool = False,
              progress: bool = True) -> SweepSummary:
    started = time.perf_counter()
    out = Path(out)
    if executor not in ("local", "ray"):
        raise SweepError(f"--executor {executor!r}: expected local or ray")
    if workers < 1:
        raise SweepError(f"--workers must be >= 1, got {workers}")
    ray = ray_module() if executor == "ray" else None
    created = not out.exists()
    check_manifest(out, plan, force)
    (out / POINTS_DIR).mkdir(exist_ok=True)
    try:
        return _compute(plan, out, workers, ray, progress, started)
    except user_errors():
        if created and not any((out / POINTS_DIR).iterdir()):
            shutil.rmtree(out, ignore_errors=True)  # e.g. missing data: leave nothing behind
        raise


def _compute(plan: SweepPlan, out: Path, workers: int, ray, progress: bool, started: float) -> SweepSummary:
    from tqdm import tqdm

    missing = [p for p in plan.points if read_point(out, p.id) is None]
    tasks = make_tasks(missing)
    bar = tqdm(total=len(plan.points), initial=len(plan.points) - len(missing), unit="point", desc="sweep",
               disable=not progress or None, dynamic_ncols=True)
    try:
        if ray is not None:
            _run_on_ray(ray, tasks, out, bar)
        elif workers == 1:
            for task in tasks:
                run_task(task, str(out), on_point=lambda _: bar.update(1))
        else:
            _run_in_pool(tasks, out, workers, bar)
    finally:
        bar.close()
    results = assemble_results(out, plan)
    return SweepSummary(
        points=len(plan.points), reused=len(plan.points) - len(missing), computed=len(missing),
        trainings=len(tasks), repriced=sum(p.mode == REPRICED for p in plan.points),
        cosimulated=sum(p.mode == COSIMULATED for p in plan.points),
        wall_s=time.perf_counter() - started, results=results,
    )


def _run_in_pool(tasks: list[Task], out: Path, workers: int, bar) -> None:
    # spawn: fresh interpreters (no forked torch thread pools); each task sets its own threads.
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        pending = {pool.submit(run_task, task, str(out)): task for task in tasks}
        try:
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    pending.pop(future)
                    bar.update(future.result())
        except BaseException:
            for future in pending:
                future.cancel()
            raise


def _run_on_ray(ray, tasks: list[Task], out: Path, bar) -> None:
    """Each task a Ray task (RAY_ADDRESS picks a cluster; ``out`` must be on shared storage)."""
    ray.init(ignore_reinit_error=True, include_dashboard=False)
    remote = ray.remote(run_task)
    pending = [remote.remote(task, str(out)) for task in tasks]
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        bar.update(ray.get(done[0]))


def load_manifest(out: Path) -> dict:
    path = Path(out) / MANIFEST
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise SweepError(f"{out}: no {MANIFEST}; is it the --out folder of an `edgefl sweep`?") from None
    except json.JSONDecodeError as exc:
        raise SweepError(f"{path}: not valid JSON ({exc})") from None


def user_errors():
    """The exceptions that mean a user mistake (for the CLI)."""
    from edgefl.data import DataError

    return (SweepError, ScenarioError, DataError)
