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


def atomic_write_text(path: Path, text: str) -> None:
    """Write a file via a temporary file + rename (never a half file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_csv(path: Path, header: list[str], rows) -> None:
    """:func:`write_csv` via a temporary file + rename (never a half file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write_csv(Path(tmp), header, rows)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextmanager
def atomic_directory(target: Path):
    """Yield a temporary folder; on success it replaces ``target``, on error it is removed."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(target, old)
    os.replace(tmp, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
