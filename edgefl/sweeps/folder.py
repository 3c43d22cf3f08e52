"""Reading a finished sweep folder back (``optimal-tau``, ``plot``, :func:`edgefl.optimal_tau`), checked
before anything is computed or written: the folder, its manifest (sweep.json) and its table (results.csv)
must be an edgefl sweep's, complete and of one sweep. Anything else is a SweepError saying what is wrong
and what to do (exit 2), never a half-written analysis.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterable
from operator import itemgetter
from pathlib import Path

import numpy as np

from edgefl.input_files import special_file
from edgefl.sweeps.analysis import _value
from edgefl.sweeps.common import COSIMULATED, REPRICED, SweepError
from edgefl.sweeps.store import MANIFEST, RESULTS, load_manifest

# what the analyses read besides the grid keys, seed, round and the target's metric (checked by the analysis)
NEEDED_COLUMNS = ("energy_j", "compute_energy_j", "uplink_energy_j", "downlink_energy_j")
# ... and the columns they read where present (energy_at: committed_energy_j; the compute share: idle_energy_j)
ANALYSIS_COLUMNS = (*NEEDED_COLUMNS, "committed_energy_j", "idle_energy_j")
RERUN = "rerun the `edgefl sweep` command that made it (it resumes and rebuilds results.csv)"


def read_sweep(folder: str | Path, metrics: Iterable[str] | None = None) -> tuple[list[str], list[str], list[dict]]:
    """The grid keys, results.csv's header and its rows (dicts of parsed cells) of the finished sweep in
    ``folder``; SweepError when it is not one (a file, a foreign or damaged manifest, results.csv truncated,
    missing a column, of another sweep, without rows, or with a non-finite number). ``metrics``: the rows hold only
    the grid keys, seed, round, mode, :data:`ANALYSIS_COLUMNS` and these columns (those the header has), which is
    quicker; None: every column. Every cell is checked either way."""
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
    header, rows, columns = _read_table(folder / RESULTS, keys, metrics)
    found = set(zip(*(columns[k] for k in keys), columns["seed"]))
    expected = {(*(_value(_text(p["values"].get(k))) for k in keys), p["seed"]) for p in points}
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


def read_table(path: Path, keys: list[str], metrics: Iterable[str] | None = None) -> tuple[list[str], list[dict]]:
    """results.csv's header and rows, each line complete and every number finite (``metrics``: :func:`read_sweep`)."""
    header, rows, _ = _read_table(path, keys, metrics)
    return header, rows


def _read_table(path: Path, keys: list[str], metrics: Iterable[str] | None) -> tuple[list[str], list[dict], dict]:
    """:func:`read_table`, and the columns of the rows (name -> the values, in row order)."""
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
    needed = [*keys, "seed", "round", *NEEDED_COLUMNS]
    quick = _quick_table(text, needed, metrics)
    if quick is not None:
        return quick
    try:  # line by line: what is wrong, where (or every column, where the quick way could not tell)
        lines = list(csv.reader(text.splitlines()))
    except csv.Error as exc:
        raise SweepError(f"{path}: not a results.csv edgefl wrote ({exc}); {RERUN}") from None
    header, body = lines[0], lines[1:]
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
    return header, rows, {name: [row[name] for row in rows] for name in header}


# Where results.csv's lines may be read otherwise than by splitting them at commas: csv's quotes, and the line breaks
# of str.splitlines other than "\n" (the line-by-line reading splits there). edgefl writes none of them.
_NOT_PLAIN = '"\r\x00\x0b\x0c\x1c\x1d\x1e'
# A number that may not be finite has "nan" or "inf" in it, or a magnitude of 1e308 or more: an exponent of three
# digits (1e400 reads as inf), or more than 200 digits (cells are read quickly up to _MAX_CELL characters).
_BIG_EXPONENT = re.compile(r"e\+?[0-9_]{3}")  # (in lower case: re finds a first letter quickly)
_MAX_CELL = 200


def _quick_table(text: str, needed: list[str], metrics: Iterable[str] | None) -> tuple | None:
    """:func:`_read_table` of results.csv's ``text``, read a column at a time: only the columns the rows hold
    (``metrics``: :func:`read_sweep`), each cell parsed as :func:`_value` does. None wherever this cannot tell that the
    line-by-line reading finds nothing wrong: quoted cells, other line breaks, a needed column missing or one
    repeated, no row, a line of another length, a cell that might be a number but not a finite one (anywhere in the
    file), a seed or round not an integer, a mode of another name. The caller then reads line by line."""
    start = text.index("\n") + 1
    if not text.isascii() or any(c in text for c in _NOT_PLAIN):
        return None
    header = text[: start - 1].split(",")  # no quotes: what csv reads
    if any(c not in header for c in needed) or len(set(header)) != len(header):
        return None
    lowered = text.lower() if any(text.find(c, start) >= 0 for c in "NAIFE") else text
    if lowered.find("nan", start) >= 0 or lowered.find("inf", start) >= 0 or _BIG_EXPONENT.search(lowered, start):
        return None
    names = header if metrics is None else [c for c in header if c in {*needed, "mode", *ANALYSIS_COLUMNS, *metrics}]
    wanted = {header.index(name) for name in names}
    cell = f"[^,\n]{{0,{_MAX_CELL}}}"
    line = re.compile("^" + ",".join(f"({cell})" if i in wanted else cell for i in range(len(header))) + "$", re.M)
    lines = line.findall(text, start)
    if not lines or len(lines) != text.count("\n", start):  # no row, or a line of another length (or a long cell)
        return None
    if len(names) == 1:
        lines = [(only,) for only in lines]
    columns = {name: _parsed(list(map(itemgetter(k), lines))) for k, name in enumerate(names)}
    del lines  # (the cells' text: before the rows are made)
    integers = all(type(v) is int for v in {*columns["seed"], *columns["round"]})
    if not integers or not set(columns.get("mode", ())) <= {REPRICED, COSIMULATED}:
        return None
    return header, [dict(zip(names, cells)) for cells in zip(*columns.values())], columns


def _parsed(cells: list[str]) -> list:
    """``[_value(c) for c in cells]``, quicker: a column of few values parses each once; in a column of numbers, only
    the cells that read as a whole number can be _value's int (an integer literal), and are read by _value."""
    distinct = set(cells)
    if 4 * len(distinct) <= len(cells):  # grid values, seeds, rounds, modes
        value = {cell: _value(cell) for cell in distinct}
        return list(map(value.__getitem__, cells))
    try:
        values = list(map(float, cells))
    except ValueError:  # text, or an empty cell
        return list(map(_value, cells))
    numbers = np.array(values)
    for i in np.flatnonzero(numbers == np.trunc(numbers)).tolist():
        values[i] = _value(cells[i])
    return values
