"""The sweep folder: what is done, what a rerun may reuse, and the assembled table.

Layout::

    sweep.json      the manifest: the sweep's definition (base scenario, grid, seeds) and points
    points/ID.json  one finished point (its per-round metrics rows), written atomically
    computed.log    one line per point computed, appended after its file is in place
    results.csv     every point's rows, assembled (atomically) from points/ when all are done
    .edgefl-results edgefl's marker, kind sweep (edgefl.results.open_folder: the folder may be written)
    .lock           held by the sweep writing the folder

Resuming is rerunning: a point whose file exists is not computed again, and the temporary files of a writer
killed before its rename are removed (:func:`remove_stale_temps`). A grid may grow: a rerun whose points
include every point of the folder's sweep (values or seeds added) computes the new points and reuses the
finished ones. Any other definition into the same folder is refused unless ``force``. When the points change,
the analyses of the old results (:data:`ANALYSES`: `optimal-tau`, `plot` and `compare` outputs) are removed:
they no longer describe results.csv (:func:`check_manifest` returns what it did, for the command to say).
"""

from __future__ import annotations

import csv
import fcntl
import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from edgefl.figures import FORMATS
from edgefl.results import MARKER, METRIC_COLUMNS, _cell, atomic_file, atomic_write_text
from edgefl.sweeps.common import FORMAT, SweepError

if TYPE_CHECKING:
    from edgefl.sweeps.plan import SweepPlan, SweepPoint

MANIFEST = "sweep.json"
POINTS_DIR = "points"
COMPUTED_LOG = "computed.log"
RESULTS = "results.csv"


def point_path(out: Path, point_id: str) -> Path:
    return out / POINTS_DIR / f"{point_id}.json"


@dataclass
class PointOutput:
    """What a finished point adds to the folder, made where it was computed (a worker): its file's text, and its
    rows' lines of results.csv when the table's columns are its own (:func:`results_columns` of ``extra``)."""

    text: str  # points/ID.json
    extra: tuple[str, ...]  # its rows' columns beyond METRIC_COLUMNS, in order of appearance (:func:`extra_columns`)
    lines: str  # its rows in results.csv, for the columns results_columns(extra)


def point_output(point: SweepPoint, rows: list[dict]) -> PointOutput:
    """The point's :class:`PointOutput`: the file :func:`write_point` writes, the lines :func:`assemble_results` writes."""
    plain = [row if set(map(type, row.values())) <= _PLAIN else {k: _plain(v) for k, v in row.items()} for row in rows]
    record = {"format": FORMAT, "id": point.id, "values": point.values, "seed": point.seed, "mode": point.mode}
    extra = extra_columns([plain])
    text = json.dumps({**record, "rows": plain}) + "\n"
    lines = results_lines([*point.values.values(), point.seed], point.mode, plain, results_columns(extra))
    return PointOutput(text, extra, lines)  # (its grid values in the plan's grid order, as point.values holds them)


def write_point(out: Path, point: SweepPoint, rows: list[dict] | PointOutput) -> None:
    """The point's file (temp + rename), then one line in computed.log. ``rows``: its metrics rows, or their
    :func:`point_output`."""
    output = rows if isinstance(rows, PointOutput) else point_output(point, rows)
    atomic_write_text(point_path(out, point.id), output.text)
    line = (
        json.dumps({"id": point.id, "mode": point.mode, "seed": point.seed, "values": point.values, "pid": os.getpid()})
        + "\n"
    )
    fd = os.open(out / COMPUTED_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())  # one small append: whole or not at all
    finally:
        os.close(fd)


def _plain(value):
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return float(value)


_PLAIN = {type(None), bool, int, str, float}  # the types _plain leaves as they are


def read_point(out: Path, point_id: str) -> dict | None:
    """A finished point's record, or None if it is not there (or not readable)."""
    try:
        record = json.loads(point_path(out, point_id).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return record if record.get("id") == point_id and record.get("format") == FORMAT else None


LOCK = ".lock"  # held (flock) by the sweep writing the folder; the kernel releases it when that process dies
# The files written (temp + rename) only while holding the lock: a kill -9 between the two leaves a temp file
# ``.NAME.XXXX.tmp`` that the next holder removes. compare.* are `edgefl compare`'s summary (written under the lock,
# in a folder per target: compare/ or compare_<target>/, edgefl.sweeps.compare.report_folder).
LOCKED_FILES = (MANIFEST, RESULTS)


def _figures(*stems: str) -> tuple[str, ...]:
    """The files of an analysis' figures, in every format it may have drawn them in (``--format``)."""
    return tuple(f"{stem}.{fmt}" for stem in stems for fmt in FORMATS)


COMPARE_FILES = ("compare.csv", "compare.txt", *_figures("compare"))


def remove_stale_temps(out: Path) -> list[Path]:
    """Remove the temporary files a killed writer of the folder left (of :data:`LOCKED_FILES` and of points/).
    Only with the lock held: then no writer of these files is alive. Returns what was removed."""
    stale = [p for name in LOCKED_FILES for p in out.glob(f".{name}.*.tmp")]
    stale += [p for name in COMPARE_FILES for p in out.glob(f"compare*/.{name}.*.tmp")]
    stale += (out / POINTS_DIR).glob(".*.json.*.tmp")
    for path in stale:
        if path.is_file():
            path.unlink(missing_ok=True)
    return stale


def lock_folder(out: Path) -> int:
    """Take the folder's lock (a file descriptor to keep open) or raise SweepError naming the holder: two sweeps
    must not compute into one folder at once. A killed sweep holds nothing: its rerun resumes."""
    out.mkdir(parents=True, exist_ok=True)
    fd = os.open(out / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 64).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise SweepError(
            f"--out {out}: another edgefl sweep (pid {holder}) is writing this folder; wait for it to "
            "finish (then rerun to reuse its points) or choose another --out"
        ) from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


# What the analysis commands write from a sweep's results.csv (edgefl.sweeps.cli: optimal-tau into
# optimal-tau_<target>[_wN][_cX]/, plot into the folder and beside optimal-tau's outputs; edgefl.sweeps.compare:
# compare/ and compare_<target>/): folder pattern -> file names. Only these files are removed when they go stale.
ANALYSES = {
    "optimal-tau_*": (
        "optimal_tau.csv",
        "tau_energy.csv",
        "optimal_tau.txt",
        *_figures("tau-heatmap", "tau-energy-curves", "tau-energy-split", "tau-pareto"),
    ),
    "compare": COMPARE_FILES,
    "compare_*": COMPARE_FILES,
    "": _figures("tau-accuracy-energy"),  # the sweep folder itself
}


def remove_stale_analyses(out: Path) -> list[Path]:
    """Remove the analysis outputs (:data:`ANALYSES`) of the folder's sweep, and their folders once empty.
    Returns what was removed (the folders, and the files outside one)."""
    removed = []
    for pattern, names in ANALYSES.items():
        for folder in sorted(out.glob(pattern)) if pattern else [out]:
            if not folder.is_dir():
                continue
            files = [folder / name for name in names if (folder / name).is_file()]
            for path in files:
                path.unlink()
            if folder != out and files and {p.name for p in folder.iterdir()} <= {MARKER}:  # nothing but edgefl's
                (folder / MARKER).unlink(missing_ok=True)
                folder.rmdir()
                removed.append(folder)
            elif files:
                removed += files
    return removed


@dataclass
class ManifestChange:
    """What :func:`check_manifest` found in the folder and did."""

    kind: str  # "new" (no sweep there), "same" (a resume), "grown" (points added), "replaced" (--force)
    old_points: int = 0  # the folder's sweep's points before
    dropped_points: int = 0  # finished points of the old sweep removed (replaced only)
    removed_analyses: list[Path] = field(default_factory=list)

    def describe(self, points: int) -> list[str]:
        """Sentences for the command's output (none for a new sweep or a resume)."""
        lines = []
        if self.kind == "grown":
            lines.append(
                f"the sweep's grid grew: {self.old_points} points before, {points} now; its finished points "
                "are reused, the new ones computed"
            )
        elif self.kind == "replaced":
            lines.append(
                f"--force: replaced the sweep in the folder ({self.old_points} points); its finished points "
                f"that are also points of this sweep are reused, {self.dropped_points} others removed"
            )
        if self.removed_analyses:
            lines.append(
                "removed the analyses of the old results (rerun optimal-tau / plot / compare for the new "
                "ones): " + ", ".join(str(p) for p in self.removed_analyses)
            )
        return lines


def check_manifest(out: Path, plan: SweepPlan, force: bool) -> ManifestChange:
    """Refuse to mix two different sweeps in one folder (unless ``force``): a rerun may only add points (grow
    the grid or the seeds), keeping every point of the folder's sweep. Then write the manifest. When the
    points change, the old analyses are removed (:func:`remove_stale_analyses`)."""
    from edgefl.scenario import describe_differences  # (here: reading a sweep folder needs no scenario schema)

    path = out / MANIFEST
    new = plan.definition()
    change = ManifestChange("new")
    if path.exists():
        try:
            manifest = json.loads(path.read_text())
            old, old_ids = manifest.get("definition"), {p["id"] for p in manifest.get("points", [])}
        except (json.JSONDecodeError, AttributeError, KeyError, TypeError):
            old, old_ids = None, set()
        new_ids = {p.id for p in plan.points}
        grown = old is not None and old != new and bool(old_ids) and old_ids <= new_ids
        if old != new and not force and not grown:
            if old is None:
                raise SweepError(f"{path} is not a sweep manifest; use --force to replace it or choose another --out")
            missing = len(old_ids - new_ids)
            raise SweepError(
                f"{out} holds a different sweep ({describe_differences(old, new)}; {missing} of its "
                f"{len(old_ids)} points are not points of this one). Rerun the same command to resume "
                "it, add values or seeds to grow it (its points are kept), use --force to replace it, "
                "or choose another --out"
            )
        if old == new:
            change = ManifestChange("same", len(old_ids))
        else:  # grown, or forced: drop the old sweep's points that are not this one's (the others are reused)
            change = ManifestChange("grown" if grown else "replaced", len(old_ids))
            for stale in (out / POINTS_DIR).glob("*.json"):
                if stale.stem not in new_ids:
                    stale.unlink()
                    change.dropped_points += 1
            (out / RESULTS).unlink(missing_ok=True)
            change.removed_analyses = remove_stale_analyses(out)
    manifest = {
        "format": FORMAT,
        "definition": new,
        "points": [
            {"id": p.id, "values": p.values, "seed": p.seed, "mode": p.mode, "training": p.training}
            for p in plan.points
        ],
    }
    atomic_write_text(path, json.dumps(manifest, indent=1) + "\n")
    return change


def load_manifest(out: Path) -> dict:
    path = Path(out) / MANIFEST
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise SweepError(f"{out}: no {MANIFEST}; is it the --out folder of an `edgefl sweep`?") from None
    except json.JSONDecodeError as exc:
        raise SweepError(f"{path}: not valid JSON ({exc})") from None


def grid_keys(out: Path) -> list[str]:
    """The grid keys of the sweep in folder ``out``, in grid order."""
    return [key for key, _ in load_manifest(out)["definition"]["grid"]]


def extra_columns(rows_per_point) -> tuple[str, ...]:
    """The columns of the points' rows beyond METRIC_COLUMNS, in order of first appearance."""
    extra: dict[str, None] = {}
    metric = frozenset(METRIC_COLUMNS)
    keys = None
    for rows in rows_per_point:
        for row in rows:
            if row.keys() == keys:
                continue  # the keys of the row before (a point's rows, mostly): none new
            keys = row.keys()
            extra.update((k, None) for k in keys if k not in metric and k not in extra)
    return tuple(extra)


def results_columns(extra: tuple[str, ...]) -> list[str]:
    """results.csv's metric columns (after grid keys, seed and round; before mode)."""
    return [c for c in METRIC_COLUMNS if c != "round"] + list(extra)


def results_lines(first: list, mode: str, rows: list[dict], metric_cols: list[str]) -> str:
    """A point's rows as lines of results.csv (:func:`edgefl.results.write_csv`'s cells and quoting): ``first`` (its
    grid values and seed), each row's round and ``metric_cols``, ``mode``."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    head, tail = [_cell(v) for v in first], _cell(mode)  # (the same in every row)
    writer.writerows([*head, _cell(row["round"]), *[_cell(v) for v in map(row.get, metric_cols)], tail] for row in rows)
    return buffer.getvalue()


def assemble_results(out: Path, plan: SweepPlan, computed: dict[str, PointOutput] | None = None) -> Path:
    """results.csv: one row per (point, seed, round), grid keys first, then seed, round,
    the metrics.csv columns and the mode. Written via temp + rename. ``computed``: the outputs of the points computed
    now, by id (their lines are written as they are where the columns are theirs); the others are read from points/."""
    computed = computed or {}
    records = {}
    for p in plan.points:
        if p.id not in computed:
            record = read_point(out, p.id)
            if record is None:
                raise RuntimeError(f"sweep point {p.label} ({p.id}) has no result file")
            records[p.id] = record
    extra = tuple(
        dict.fromkeys(
            k
            for p in plan.points
            for k in (computed[p.id].extra if p.id in computed else extra_columns([records[p.id]["rows"]]))
        )
    )
    metric_cols = results_columns(extra)
    with atomic_file(out / RESULTS) as tmp, open(tmp, "w", newline="") as handle:
        csv.writer(handle, lineterminator="\n").writerow([*plan.grid, "seed", "round", *metric_cols, "mode"])
        for p in plan.points:
            done = computed.get(p.id)
            if done is not None and done.extra == extra and list(p.values) == list(plan.grid):  # (always, but checked)
                handle.write(done.lines)
                continue
            if done is not None:  # a point without some of the table's columns: its rows from its file
                records[p.id] = read_point(out, p.id)
            record = records.pop(p.id)
            handle.write(
                results_lines([*(p.values[k] for k in plan.grid), p.seed], record["mode"], record["rows"], metric_cols)
            )
    return out / RESULTS
