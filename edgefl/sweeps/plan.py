"""The plan of a sweep: which points (grid values x seeds), and which of them share a training.

A sweep point is one combination of grid values with one seed (run.seed + 0..K-1). Points
that differ only in channel keys (anything in [network] or [devices] except the message
sizes ``network.bits_per_param`` and ``network.header_bits``, which are baked into a trace)
have the same learning trajectory whenever the channel cannot change who participates (no
deadline, no outage: :func:`edgefl.sim.can_change_participation`). Such points share one
training per (learning keys, seed) and are re-priced (mode ``repriced``); every other point
is co-simulated in full (mode ``cosimulated``). How they are computed: :mod:`edgefl.sweeps.run`.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import algorithms
from edgefl.deployment import network_params
from edgefl.scenario import Scenario, apply_overrides, check_sweep_key, read_toml, scenario_from_dict
from edgefl.sim import can_change_participation
from edgefl.sweeps.common import COSIMULATED, FORMAT, REPRICED, TAU_KEY, SweepError

__all__ = ["COSIMULATED", "FORMAT", "REPRICED", "TAU_KEY", "SweepError"]  # (edgefl.sweeps.common's, named here too)

# [network] keys that change the op trace itself (the bits of every message): not re-priceable.
TRACE_NETWORK_KEYS = ("bits_per_param", "header_bits")


@dataclass
class SweepPoint:
    values: dict[str, Any]  # grid key -> value
    seed: int
    scenario: Scenario
    id: str  # content hash of the point's resolved scenario
    mode: str  # REPRICED or COSIMULATED
    training: str | None  # content hash of what the learning depends on (REPRICED only)
    group: str | None = None  # its seed_group, where known

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
        return _jsonable(
            {
                "scenario": self.base.model_dump(mode="json", exclude={"sweep"}),
                "grid": [[key, values] for key, values in self.grid.items()],  # a list: keeps the order
                "seeds": self.seeds,
            }
        )

    @property
    def num_trainings(self) -> int:
        """Learning runs of the whole sweep: one per training group + one per co-simulated point."""
        groups = {p.training for p in self.points if p.mode == REPRICED}
        return len(groups) + sum(p.mode == COSIMULATED for p in self.points)


def _jsonable(obj):
    return json.loads(json.dumps(obj, sort_keys=True))


def _hash(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


_SEED_MARK = "\x00edgefl seed\x00"  # a string no scenario holds, in place of run.seed


def _seeded_hashes(obj_of: Callable[[Any], Any], seeds: list[int]) -> list[str]:
    """``[_hash(obj_of(seed)) for seed in seeds]`` (``obj_of(seed)``: an object whose one place that depends on its
    argument is where the seed goes), its JSON text written once and the seed put into it: the keys' order does
    not depend on the values, nor a value's text on the others' (a sweep's 2,100 points, 210 texts). Why not a
    plain _hash per seed: the Figure-4 study at 30 seeds (6,300 points) hashes in 0.07 s this way, 0.40 s plainly, where
    its whole plan takes 0.2-0.5 s (1.5 s the first time in a process; 2026-11-27, a loaded 2-core machine)."""
    text, mark = json.dumps(obj_of(_SEED_MARK), sort_keys=True), json.dumps(_SEED_MARK)
    if text.count(mark) != 1:  # (never: the mark is in run.seed only)
        return [_hash(obj_of(seed)) for seed in seeds]
    before, after = text.split(mark)
    return [hashlib.sha256(f"{before}{json.dumps(seed)}{after}".encode()).hexdigest()[:16] for seed in seeds]


def parse_grid(
    text: str, option: str = "--grid", data_keys: tuple[str, ...] = (), process_keys: list[list[str]] = ()
) -> tuple[str, list]:
    """``key=v1,v2,...`` -> (key, [values]); each value a TOML literal, else a string.
    ``option`` names the command-line option in error messages; ``data_keys``: the scenario's data set's."""
    if "=" not in text:
        raise SweepError(f"{option} {text!r}: expected key=v1,v2,..., e.g. {option} network.snr_db=0,10,20")
    key, raw = (part.strip() for part in text.split("=", 1))
    try:
        check_sweep_key(key, data_keys, process_keys)
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


def pricing_mode(scenario: Scenario) -> str:
    """REPRICED when a recorded trace re-priced for this point equals its co-simulation
    (the SimPy engine, the static controller, a synchronous algorithm, and a channel that cannot change who
    participates).
    A controller plans from the channel each round: its points are co-simulated."""
    devices = scenario.devices
    if scenario.control.name != "static" or scenario.selection.name != "uniform":
        return COSIMULATED  # a controller or a selection policy decides from the channel each round
    if scenario.run.eval_every_s is not None:
        return COSIMULATED  # which rounds are evaluated depends on the point's simulated time
    if algorithms.get(scenario.algorithm.name).asynchronous:
        return COSIMULATED  # an asynchronous server learns from the order uploads arrive in: the network's timing
    if any(p.plugin_class().may_change_participation for p in scenario.process):
        return COSIMULATED  # a process that may decide who takes part (thermal does not: it changes timing only)
    if scenario.run.engine != "simpy" or can_change_participation(
        network_params(scenario.network), devices.availability, devices.p_fail, scenario.algorithm.over_selection
    ):
        return COSIMULATED
    return REPRICED


def learning_config(scenario: Scenario) -> dict:
    """Everything the learning trajectory (and the op trace) depends on."""
    dump = scenario.model_dump(mode="json", exclude={"sweep", "devices"})
    dump["network"] = {k: dump["network"][k] for k in TRACE_NETWORK_KEYS}
    dump["run"].pop("engine")
    dump.pop("process", None)  # a re-priced point's processes change timing only (pricing_mode), not the learning
    return dump


def seed_group(point: SweepPoint) -> str:
    """What a point's learning run depends on but the seed (a REPRICED point's training; a co-simulated point's
    whole scenario): the runs of one seed group differ only in ``run.seed`` and train together (edgefl.seed_axis)."""
    if point.group is not None:
        return point.group
    s = point.scenario
    return _group(learning_config(s) if point.mode == REPRICED else s.model_dump(mode="json", exclude={"sweep"}))


def _group(config: dict) -> str:
    """:func:`seed_group` of a point whose learning config (or scenario) dumps as ``config``."""
    return _hash({**config, "run": {k: v for k, v in config["run"].items() if k != "seed"}})


def _seeded(config: dict, seed: int) -> dict:
    """``config``, a dump of a scenario (or of its learning config), with run.seed = ``seed``: the dump of the same
    scenario with that seed (nothing else in it depends on the seed)."""
    return {**config, "run": {**config["run"], "seed": seed}}


def _set_key(raw: dict, key: str, value) -> None:
    """Set ``section.key`` (or ``algorithm.<name>.key``, ``process.<i>.key``) in the raw scenario."""
    *tables, name = key.split(".")
    node = raw
    for table in tables:
        if isinstance(node, list) and table.isdigit() and int(table) < len(node):
            node = node[int(table)]  # the i-th table of an array of tables ([[process]])
        else:
            node = node.setdefault(table, {})
        if not isinstance(node, (dict, list)):
            raise SweepError(f"{table!r} is not a section")
    if not isinstance(node, dict):
        raise SweepError(f"{key!r}: expected process.<i>.<key>")
    node[name] = value


def load_raw(path: Path, overrides: list[str]) -> dict:
    """The scenario file as a dict, data.dir resolved against the file, --set applied."""
    raw = read_toml(path)
    data = raw.get("data")
    if isinstance(data, dict) and isinstance(data.get("dir"), str):
        data["dir"] = str((path.parent / Path(data["dir"]).expanduser()).resolve())
    return apply_overrides(raw, overrides)


MAX_SEEDS = 1_000  # seeds per grid point ([sweep] seeds, --seeds)
MAX_POINTS = 100_000  # grid points x seeds: each is a learning run of seconds or more


def plan_sweep(
    path: Path, overrides: list[str] | None = None, grids: list[str] | None = None, seeds: int | None = None
) -> SweepPlan:
    """Validate the scenario, the grid and every point's scenario. Raises ScenarioError/SweepError."""
    path = Path(path)
    source = str(path)
    raw = load_raw(path, overrides or [])
    base = scenario_from_dict(raw, source=source)
    grid = {k: list(v) for k, v in base.sweep.grid.items()}
    for text in grids or []:
        key, values = parse_grid(text, data_keys=tuple(type(base.data).model_fields), process_keys=base.process_keys())
        grid[key] = values  # a --grid replaces the file's grid for that key
    num_seeds = base.sweep.seeds if seeds is None else seeds
    if isinstance(num_seeds, bool) or not isinstance(num_seeds, int) or not 1 <= num_seeds <= MAX_SEEDS:
        raise SweepError(f"--seeds must be an integer from 1 to {MAX_SEEDS}, got {num_seeds!r}")
    count = math.prod(len(v) for v in grid.values()) * num_seeds
    if count > MAX_POINTS:
        sizes = " x ".join(f"{len(v)} {k}" for k, v in grid.items())
        raise SweepError(
            f"the sweep has {count:,} points ({sizes} x {num_seeds} seeds), more than {MAX_POINTS:,}: "
            "at a second or more per learning run it would not end; sweep fewer values or seeds "
            "(several smaller sweeps can be analysed one by one)"
        )
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
        # what depends on the point but not its seed, once for its seeds: the pricing mode, the dumps (seeded below)
        mode = pricing_mode(scenario)
        dump = scenario.model_dump(mode="json", exclude={"sweep"})
        learning = learning_config(scenario) if mode == REPRICED else None
        group = _group(dump if learning is None else learning)
        ids = _seeded_hashes(lambda seed: {"format": FORMAT, "scenario": _seeded(dump, seed)}, seed_values)
        trainings = (
            [None] * len(seed_values)
            if learning is None
            else _seeded_hashes(lambda seed: _seeded(learning, seed), seed_values)
        )
        for seed, point_id, training in zip(seed_values, ids, trainings):
            s = scenario.model_copy(update={"run": scenario.run.model_copy(update={"seed": seed})})
            points.append(SweepPoint(values, seed, s, point_id, mode, training, group))
    return SweepPlan(source, base, grid, seed_values, points)
