"""Reading a finished sweep folder back (``optimal-tau``, ``plot``, :func:`edgefl.optimal_tau`), checked
before anything is computed or written: the folder, its manifest (sweep.json) and its table (results.csv)
must be an edgefl sweep's, complete and of one sweep. Anything else is a SweepError saying what is wrong
and what to do (exit 2), never a half-written analysis.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from edgefl.input_files import special_file
from edgefl.sweeps.analysis import _value
from edgefl.sweeps.plan import COSIMULATED, REPRICED, SweepError
from edgefl.sweeps.store import MANIFEST, RESULTS, load_manifest

# what the analyses read besides the grid keys, seed, round and the target's metric (checked by the analysis)
NEEDED_COLUMNS = ("energy_j", "compute_energy_j", "uplink_energy_j", "downlink_energy_j")
RERUN = "rerun the `edgefl sweep` command that made it (it resumes and rebuilds results.csv)"


def read_sweep(folder: str | Path) -> tuple[list[str], list[str], list[dict]]:
    """The grid keys, results.csv's header and its rows (dicts of parsed cells) of the finished sweep in
    ``folder``; SweepError when it is not one (a file, a foreign or damaged manifest, results.csv truncated,
    missing a column, of another sweep, without rows, or with a non-finite number)."""
    folder = Path(folder)
    if not folder.exists():
        raise SweepError(f"{folder}: no such folder; expected the --out folder of a finished `edgefl sweep`")
    if not folder.is_dir():
        raise SweepError(
            f"{folder}: is {special_file(folder) or 'a file'}, not a folder; expected the --out folder "
            "of a finished `edgefl sweep`"
        )
    for name in (MANIFEST, RESULTS):
        what = special_file(folder / name)
        if what is not None:
            raise SweepError(f"{folder / name}: is {what}, not a file edgefl wrote; {folder} is not a sweep folder")
    keys, points = manifest_points(folder)
    header, rows = read_table(folder / RESULTS, keys)
    found = {(tuple(row[k] for k in keys), row["seed"]) for row in rows}
    expected = {(tuple(_value(_text(p["values"].get(k))) for k in keys), p["seed"]) for p in points}
    if found != expected:
        extra, missing = len(found - expected), len(expected - found)
        raise SweepError(
            f"{folder / RESULTS} does not match {folder / MANIFEST}: {missing} of the sweep's "
            f"{len(expected)} (point, seed) pairs have no rows and {extra} rows' points are not the "
            f"sweep's (a results.csv of another sweep, or an unfinished one); {RERUN}"
        )
    return keys, header, rows


def _text(value) -> str:
    return "" if value is None else str(value)


def manifest_points(folder: Path) -> tuple[list[str], list[dict]]:
    """The grid keys and the points ({"values": {key: value}, "seed": int}) of sweep.json, checked."""
    try:
        manifest = load_manifest(folder)
    except (UnicodeDecodeError, RecursionError):
        raise SweepError(f"{folder / MANIFEST}: not an edgefl sweep manifest (not JSON text); {RERUN}") from None
    bad = f"{folder / MANIFEST}: not an edgefl sweep manifest"
    definition = manifest.get("definition") if isinstance(manifest, dict) else None
    grid = definition.get("grid") if isinstance(definition, dict) else None
    points = manifest.get("points") if isinstance(manifest, dict) else None
    if not (
        isinstance(grid, list) and all(isinstance(g, list) and len(g) == 2 and isinstance(g[0], str) for g in grid)
    ):
        raise SweepError(
            f'{bad} (no "definition" with a "grid" list of [key, values]); {RERUN}, or pass the sweep\'s --out folder'
        )
    keys = [key for key, _ in grid]
    if not (
        isinstance(points, list)
        and points
        and all(
            isinstance(p, dict)
            and isinstance(p.get("values"), dict)
            and isinstance(p.get("seed"), int)
            and set(keys) <= set(p["values"])
            for p in points
        )
    ):
        raise SweepError(f'{bad} (no "points" list with each point\'s grid values and seed); {RERUN}')
    return keys, points


def read_table(path: Path, keys: list[str]) -> tuple[list[str], list[dict]]:
    """results.csv's header and rows, each line complete and every number finite."""
    try:
        with open(path, newline="") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise SweepError(f"{path}: not found; the sweep is not finished: {RERUN}") from None
    except OSError as exc:
        raise SweepError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise SweepError(f"{path}: not text (not a results.csv edgefl wrote); {RERUN}") from None
    if not text.strip():
        raise SweepError(f"{path}: empty; {RERUN}")
    if not text.endswith("\n"):
        raise SweepError(f"{path}: truncated (its last line is incomplete); {RERUN}")
    try:
        lines = list(csv.reader(text.splitlines()))
    except csv.Error as exc:
        raise SweepError(f"{path}: not a results.csv edgefl wrote ({exc}); {RERUN}") from None
    header, body = lines[0], lines[1:]
    needed = [*keys, "seed", "round", *NEEDED_COLUMNS]
    absent = [c for c in needed if c not in header]
    if absent:
        raise SweepError(
            f"{path}: no column {', '.join(absent)} (a results.csv of this sweep has the grid keys, "
            f"seed, round, the metrics.csv columns and mode); {RERUN}"
        )
    if not body:
        raise SweepError(f"{path}: holds no rows (only its header); {RERUN}")
    rows = []
    for number, line in enumerate(body, start=2):
        if len(line) != len(header):
            raise SweepError(f"{path}: line {number} has {len(line)} cells, the header {len(header)}; {RERUN}")
        row = dict(zip(header, map(_value, line)))
        for column, value in row.items():
            if isinstance(value, float) and not math.isfinite(value):
                raise SweepError(
                    f"{path}: line {number}, column {column}: {value} is not a finite number (edgefl "
                    f"writes finite numbers only); {RERUN}"
                )
        if (
            row.get("mode", REPRICED) not in (REPRICED, COSIMULATED)
            or not isinstance(row["seed"], int)
            or not isinstance(row["round"], int)
        ):
            raise SweepError(
                f"{path}: line {number}: seed and round must be integers and mode {REPRICED} or "
                f"{COSIMULATED}, got {row['seed']!r}, {row['round']!r}, {row.get('mode')!r}; {RERUN}"
            )
        rows.append(row)
    return header, rows
