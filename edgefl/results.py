"""Writing a run's results: atomically, deterministically.

Everything is first written into a temporary sibling folder, which replaces the target
folder only when complete, so an interrupted or failed run leaves nothing half-written.
Floats are written with ``repr`` (shortest round-trip form): the same numbers give the
same bytes.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from edgefl.errors import UserError


def _cell(value):
    if isinstance(value, (float, np.floating)):
        return repr(float(value)) if np.isfinite(value) else ""  # no NaN or inf in a results file: empty
    if isinstance(value, np.integer):
        return int(value)
    return value


def write_csv(path: Path, header: list[str], rows) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        for row in rows:
            writer.writerow([_cell(v) for v in row])


def finite_or_none(obj):
    """``obj`` with every NaN or infinite float replaced by None (strict JSON has no NaN)."""
    if isinstance(obj, dict):
        return {k: finite_or_none(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_or_none(v) for v in obj]
    if isinstance(obj, (float, np.floating)):
        return float(obj) if np.isfinite(obj) else None
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


def write_json(path: Path, obj) -> None:
    """Strict JSON (RFC 8259): non-finite numbers written as null."""
    with open(path, "w") as handle:
        json.dump(finite_or_none(obj), handle, indent=2, sort_keys=True, default=float, allow_nan=False)
        handle.write("\n")


def _usual_mode(path: str | Path, folder: bool = False) -> None:
    """Give a temporary file or folder (created 0600 / 0700 by tempfile) the mode a plain open() or mkdir()
    would have (0666 / 0777 less the umask), so results are as readable as any other file the user writes."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, (0o777 if folder else 0o666) & ~umask)


@contextmanager
def atomic_file(path: Path, durable: bool = False):
    """Yield a temporary path beside ``path`` (``.NAME.<pid>.XXXX.tmp``: the writer's pid, which :func:`recover`
    reads) to write; when the block ends it replaces ``path``, so a kill leaves the old file or the new one, never
    half of one; on an error it is removed. ``durable``: on disk (fsync) before the rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp")
    os.close(fd)
    try:
        _usual_mode(tmp)
        yield Path(tmp)
        if durable:
            with open(tmp, "rb") as handle:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """Write a file via a temporary file + rename (never a half file)."""
    with atomic_file(path) as tmp:
        tmp.write_text(text)


def atomic_write_csv(path: Path, header: list[str], rows) -> None:
    """:func:`write_csv` via a temporary file + rename (never a half file)."""
    with atomic_file(path) as tmp:
        write_csv(tmp, header, rows)


# -- results folders: replaced whole, only when edgefl wrote them -------------------------------
MARKER = ".edgefl-results"  # in every folder atomic_directory writes: edgefl may replace it


class OutputError(UserError):
    """A results folder that cannot or must not be written (exit 2)."""


def _old(target: Path) -> Path:
    return target.with_name(f".{target.name}.old")


def checkpoint_file(target: Path) -> Path:
    """Where the checkpoint of a run writing ``target`` lives: ``.NAME.checkpoint`` beside it (edgefl.checkpoint)."""
    target = Path(target)
    return target.with_name(f".{target.name}.checkpoint")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def recover(target: Path) -> None:
    """Undo what a killed writer left beside ``target``: the previous results back from ``.NAME.old`` when a kill
    fell between the two renames, and the temporary folders (or checkpoint files) of writers that are no longer
    running."""
    target = Path(target)
    old = _old(target)
    if old.is_dir():
        if target.exists():  # killed after the new folder was in place: the old one is garbage
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(old, target)
    if not target.parent.is_dir():
        return
    for prefix in (f".{target.name}.", f".{checkpoint_file(target).name}."):  # the results' and the checkpoint's
        for tmp in target.parent.glob(f"{prefix}*.tmp"):
            pid = tmp.name[len(prefix):].split(".", 1)[0]
            if pid.isdigit() and not _pid_alive(int(pid)):
                if tmp.is_dir():
                    shutil.rmtree(tmp, ignore_errors=True)
                else:
                    tmp.unlink(missing_ok=True)


# What a results folder of `edgefl run` holds (a folder of only these, without the marker, was written by a
# version of edgefl from before the marker).
RUN_OUTPUTS = frozenset({"metrics.csv", "clients.csv", "events.csv", "summary.json", "scenario.toml", "battery.csv",
                         "positions.csv"})


def _written_by_edgefl(folder: Path) -> bool:
    if (folder / MARKER).exists():
        return True
    names = [p.name for p in folder.iterdir()]
    return all(name in RUN_OUTPUTS or name.endswith(".png") for name in names) and (
        not names or "summary.json" in names)


def check_target(target: Path, force: bool = False) -> None:
    """Raise OutputError unless ``target`` may be (re)written: absent, empty, written by edgefl (its marker), or
    anything when ``force``; never a file; the parent writable. Recovers a killed writer's leftovers first."""
    target = Path(target)
    recover(target)
    if target.is_symlink() and not target.is_dir():
        raise OutputError(f"--out {target}: a link to something that is not a folder; choose another --out")
    if target.exists() and not target.is_dir():
        raise OutputError(f"--out {target}: is a file, not a results folder; choose another --out (edgefl does "
                          "not move or delete files)")
    if target.is_dir() and not _written_by_edgefl(target) and not force:
        raise OutputError(f"--out {target}: not an edgefl results folder (it holds other files and no {MARKER}); "
                          "choose another folder, or pass --force to replace it with the results")
    parent = target.parent
    while not parent.exists():  # the first existing ancestor must let us create the folder
        parent = parent.parent
    if not parent.is_dir():
        raise OutputError(f"--out {target}: {parent} is a file, not a folder; choose another --out")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"--out {target}: cannot write in {parent} (permission denied); choose another --out")


@contextmanager
def atomic_directory(target: Path, force: bool = False):
    """Yield a temporary folder; on success it replaces ``target`` (see :func:`check_target`), on error it is
    removed. A kill at any moment leaves ``target`` complete, old or new, or its previous version in
    ``.NAME.old``, which :func:`recover` puts back; an OSError (full or read-only disk) is an OutputError."""
    target = Path(target)
    check_target(target, force)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp"))
        _usual_mode(tmp, folder=True)
    except OSError as exc:
        raise OutputError(f"--out {target}: cannot write: {exc.strerror or exc}") from None
    try:
        yield tmp
        (tmp / MARKER).write_text("written by edgefl; edgefl may replace this folder\n")
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError):
            raise OutputError(f"--out {target}: cannot write the results: {exc.strerror or exc}") from None
        raise
    old = None
    if target.exists():
        old = _old(target)
        shutil.rmtree(old, ignore_errors=True)
        os.replace(target, old)
    os.replace(tmp, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
