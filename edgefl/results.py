"""Writing a run's results: atomically, deterministically.

Everything is first written into a temporary sibling folder, which replaces the target
folder only when complete, so an interrupted or failed run leaves nothing half-written.
Floats are written with ``repr`` (shortest round-trip form): the same numbers give the
same bytes. Which folders edgefl may write at all is decided here too, by one rule for every
command (:func:`claim`): a folder holding edgefl's marker, or an empty or new one.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import os
import re
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from edgefl.errors import UserError
from energy import CATEGORIES

# The columns of a run's files (metrics.csv, clients.csv, positions.csv, battery.csv), in their order
POSITION_COLUMNS = ("round", "client", "x_m", "y_m", "distance_m")
BATTERY_COLUMNS = ("round", "client", "device_class", "level_j", "harvested_j")
ENERGY_COLUMNS = [f"{c}_energy_j" for c in CATEGORIES]  # booked, by category (energy.CATEGORIES)
METRIC_COLUMNS = [
    "round",
    "sim_time_s",
    "energy_j",  # booked: every joule charged so far
    "committed_energy_j",  # ... plus what runs on if the run stops here (docs/model.md §8)
    *ENERGY_COLUMNS,
    "acc_mean",
    "acc_worst",
    "acc_std",
    "loss",
    "uploads_arrived",
    "uploads_missed",
]
CLIENT_COLUMNS = [
    "client",
    "device_class",
    "train_samples",
    "test_samples",
    "cpu_ghz",
    "distance_m",
    "uplink_snr_db",
    *ENERGY_COLUMNS,
    "energy_j",
    "times_trained",
    "uploads_arrived",
    "uploads_missed",
    "final_acc",
]
CELL_COLUMNS = [
    "cell",
    "los",
    "sinr_db",
    "handovers",
    "x_m",
    "y_m",
]  # several cells only (docs/multi-cell.md): a single cell's file stays


def _cell(value):
    if type(value) is float:  # most cells: first, without the isinstance checks
        return repr(value) if math.isfinite(value) else ""
    if isinstance(value, (float, np.floating)):
        return repr(float(value)) if math.isfinite(value) else ""  # no NaN or inf in a results file: empty
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


# -- who owns a folder: the one rule of every command that writes (run, sweep, compare, optimal-tau, plot, and
# the Python API's Result.save and sweep). edgefl writes into, adds to or replaces only a folder that holds its
# marker, or an empty or new one; anything else is refused (OutputError, exit 2) before anything is touched,
# unless the command's --force asks to replace it. Nothing is guessed from file names. ---------------------------
MARKER = ".edgefl-results"  # in every folder edgefl writes; its "kind: ..." line says which command wrote it
MARKER_TEXT = "written by edgefl; edgefl may write into or replace this folder\nkind: {kind}\n"
# What wrote a folder, and what each kind of writer may write into besides a new or empty folder: a run replaces
# a run's folder; a sweep (and `compare`, a sweep with a summary) adds to a sweep's folder; optimal-tau and plot
# add their tables and figures to any folder edgefl wrote.
WRITES_INTO = {"run": {"run"}, "sweep": {"sweep"}, "analysis": {"run", "sweep", "analysis"}}
KIND_WORDS = {"run": "a run's results", "sweep": "a sweep", "analysis": "optimal-tau's or plot's outputs"}
ANY_KIND = "edgefl"  # a marker that names no kind (edgefl before kinds, or a user's `touch`): any writer's
# In edgefl's hidden temporary and backup folders beside a target while it writes: the writer's pid and the
# target's name, the proof :func:`recover` needs before it touches them.
WRITER = ".edgefl-writer"
# The first line of a run checkpoint (edgefl.checkpoint), with its writer's pid: what proves a file is one.
CHECKPOINT_MAGIC = b"edgefl checkpoint"

NEW, EMPTY, OWN, REPLACE = "new", "empty", "own", "replace"  # how a target may be written (see claim)


class OutputError(UserError):
    """A results folder that cannot or must not be written (exit 2)."""


def checkpoint_file(target: Path) -> Path:
    """Where the checkpoint of a run writing ``target`` lives: ``.NAME.checkpoint`` beside it (edgefl.checkpoint)."""
    target = Path(target)
    return target.with_name(f".{target.name}.checkpoint")


def checkpoint_header() -> bytes:
    """The first line of a checkpoint this process writes."""
    return CHECKPOINT_MAGIC + f"; pid {os.getpid()}\n".encode()


def is_checkpoint(path: Path) -> bool:
    """Whether ``path`` is a file that begins as edgefl's checkpoints do (then edgefl may replace or remove it)."""
    if not Path(path).is_file():  # not a folder, and never open() a pipe (it would block)
        return False
    try:
        with open(path, "rb") as handle:
            return handle.read(len(CHECKPOINT_MAGIC)) == CHECKPOINT_MAGIC
    except OSError:
        return False


def claim_checkpoint(target: Path) -> Path:
    """The checkpoint file of a run writing ``target`` (:func:`checkpoint_file`), or OutputError if something that is
    not an edgefl checkpoint is in its place (a run saving checkpoints would replace it)."""
    path = checkpoint_file(target)
    if (path.exists() or path.is_symlink()) and not is_checkpoint(path):
        raise OutputError(
            f"{path}: is in the place of the run's checkpoint and is not an edgefl checkpoint; move it, "
            "or choose another --out"
        )
    return path


def marker_kind(folder: Path) -> str | None:
    """The kind named in ``folder``'s marker (:data:`ANY_KIND` if it names none), or None without a marker."""
    marker = Path(folder) / MARKER
    if not marker.is_file():  # absent, a folder; never open() a pipe (it would block)
        return None
    try:
        with open(marker, encoding="utf-8", errors="replace") as handle:
            text = handle.read(4096)
    except OSError:  # unreadable
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "kind" and value.strip():
            return value.strip()
    return ANY_KIND


def mark(folder: Path, kind: str) -> None:
    """Put edgefl's marker of ``kind`` into ``folder``."""
    (Path(folder) / MARKER).write_text(MARKER_TEXT.format(kind=kind))


def _never_results(target: Path) -> str | None:
    """Why ``target`` can never be a results folder (edgefl would fill or replace it): the filesystem root, the
    home folder or the current folder, or a folder above one of them; None if it can be one."""
    try:
        resolved = target.resolve()
    except (OSError, RuntimeError):  # a loop of links: not a folder (see _ownership)
        return None
    if resolved == Path(resolved.anchor):
        return "the filesystem root"
    places = []
    for what, where in (("the current folder", Path.cwd), ("the home folder", Path.home)):
        try:
            places.append((what, where().resolve()))
        except (OSError, RuntimeError):  # deleted, or no home folder known
            pass
    for what, place in places:
        if resolved == place:
            return what
        if resolved in place.parents:
            return f"a folder above {what}"
    return None


def _ownership(target: Path, kind: str, force: bool, option: str, force_option: bool) -> str:
    where = f"{option} {target}" if option else str(target)
    why = _never_results(target)
    if why is not None:
        raise OutputError(
            f"{where}: is {why}, never a results folder; give the results a folder of their own, "
            f"e.g. {option or '--out'} results/NAME"
        )
    if target.is_symlink() and not target.is_dir():
        raise OutputError(f"{where}: a link to something that is not a folder; choose another {option or '--out'}")
    if target.exists() and not target.is_dir():
        raise OutputError(
            f"{where}: is a file, not a results folder; choose another {option or '--out'} (edgefl does "
            "not move or delete files)"
        )
    state = NEW
    if target.is_dir():
        found = marker_kind(target)
        if found is not None and (found == ANY_KIND or found in WRITES_INTO[kind]):
            state = OWN
        else:
            try:
                names = sorted(p.name for p in itertools.islice(target.iterdir(), 4))
            except OSError as exc:
                raise OutputError(
                    f"{where}: cannot read it ({exc.strerror or exc}); choose another {option or '--out'}"
                ) from None
            if not names:
                state = EMPTY
            elif force:
                state = REPLACE
            else:
                if found is not None:
                    what = KIND_WORDS.get(found, f"a folder of kind {found}")
                    held = f"holds {what} written by edgefl, not {KIND_WORDS[kind]}"
                else:
                    held = (
                        f"not an edgefl results folder (it holds files edgefl did not write: "
                        f"{', '.join(names[:3])}{', ...' if len(names) > 3 else ''}, and no {MARKER} marker); "
                        "edgefl writes only into a new or empty folder or one it wrote"
                    )
                if found is None and (target / "sweep.json").is_file():  # only a hint: the rule does not guess
                    held += (
                        f" (if it is a sweep of an edgefl from before the marker, mark it as one: "
                        f"echo 'kind: sweep' > {target / MARKER})"
                    )
                raise OutputError(
                    f"{where}: {held}; choose another {option or '--out'}"
                    + (", or pass --force to replace the folder and everything in it" if force_option else "")
                )
    if state != NEW and kind != "run":  # written in place: the folder itself must be writable
        if not os.access(target, os.W_OK | os.X_OK):
            raise OutputError(f"{where}: cannot write in it (permission denied); choose another {option or '--out'}")
        return state
    parent = target.parent  # a run's folder is created or replaced by a rename in its parent
    while not parent.exists():  # the first existing ancestor must let us create the folder
        parent = parent.parent
    if not parent.is_dir():
        raise OutputError(f"{where}: {parent} is a file, not a folder; choose another {option or '--out'}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{where}: cannot write in {parent} (permission denied); choose another {option or '--out'}")
    return state


def claim(target: Path, kind: str, force: bool = False, option: str = "--out", force_option: bool = True) -> str:
    """The ownership rule: how ``kind`` (a key of :data:`WRITES_INTO`) may write ``target``, or OutputError (before
    anything is touched). NEW: absent; EMPTY: an empty folder; OWN: a folder with edgefl's marker of a kind it
    writes into; REPLACE: any other folder, only with ``force`` (the caller replaces it whole). Never a file, the
    filesystem root, the home folder or the current folder. Then, and only then, :func:`recover` what a killed
    writer left beside ``target`` (which may put the previous results back: the rule is applied again).
    ``option``: the command-line option naming ``target``, for the messages; ``force_option``: whether the
    command has a --force to suggest."""
    target = Path(target)
    state = _ownership(target, kind, force, option, force_option)
    if recover(target):
        state = _ownership(target, kind, force, option, force_option)
    return state


def check_target(target: Path, force: bool = False) -> str:
    """:func:`claim` for a run's results folder (``edgefl run --out``, ``Result.save``)."""
    return claim(target, "run", force)


def open_folder(target: Path, kind: str, force: bool = False, option: str = "--out", force_option: bool = True) -> str:
    """:func:`claim` ``target`` for a writer that adds files to it in place (a sweep, optimal-tau, plot), then make it
    ready: created if new, emptied if REPLACE, marked as ``kind``'s if it had no marker. Returns the claim."""
    target = Path(target)
    state = claim(target, kind, force, option, force_option)
    try:
        if state == REPLACE:  # --force: the user asked to replace what is there
            for path in target.iterdir():
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink()
        target.mkdir(parents=True, exist_ok=True)
        if state != OWN:
            mark(target, kind)
    except OSError as exc:
        raise OutputError(f"{option} {target}: cannot write: {exc.strerror or exc}") from None
    return state


def empty_again(target: Path, state: str) -> None:
    """Undo :func:`open_folder` after a failure that wrote nothing worth keeping: a NEW folder removed, an EMPTY
    or REPLACE one emptied (what is in it is edgefl's). An OWN folder is left as it is."""
    target = Path(target)
    if state == NEW:
        shutil.rmtree(target, ignore_errors=True)
    elif state in (EMPTY, REPLACE) and target.is_dir():
        for path in target.iterdir():
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)


# -- a killed writer's leftovers beside a target: found and proven edgefl's before anything is touched ---------
def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _writer_text(target: Path) -> str:
    return f"edgefl writer\npid {os.getpid()}\ntarget {Path(target).name}\n"


def _dead_writer(path: Path, target: Path, pid: int) -> bool:
    """Whether ``path`` (a hidden folder beside ``target`` whose name carries ``pid``) holds edgefl's writer file
    for ``target`` with that pid, and that process is gone: only then is it a killed writer's."""
    if not (path / WRITER).is_file():  # never open() a pipe (it would block)
        return False
    try:
        text = (path / WRITER).read_text(errors="replace")[:1000]
    except OSError:
        return False
    return text == f"edgefl writer\npid {pid}\ntarget {target.name}\n" and not _pid_alive(pid)


def _dead_checkpoint_writer(path: Path, pid: int) -> bool:
    """Whether ``path`` is a checkpoint file being written by process ``pid`` (its first line), which is gone."""
    try:
        with open(path, "rb") as handle:
            first = handle.readline(200)
    except OSError:
        return False
    return first == CHECKPOINT_MAGIC + f"; pid {pid}\n".encode() and not _pid_alive(pid)


def _backup(target: Path) -> Path:
    """A free name for the previous results while the new ones take their place: ``.NAME.<pid>[.k].old``."""
    for k in itertools.count():
        path = target.with_name(f".{target.name}.{os.getpid()}{f'.{k}' if k else ''}.old")
        if not path.exists() and not path.is_symlink():
            return path
    raise AssertionError("unreachable")


def recover(target: Path) -> bool:
    """Undo what a killed writer of ``target`` left beside it, touching only what proves to be its: hidden
    folders named ``.NAME.<pid>.old`` (the previous results, moved aside between two renames: put back if
    ``target`` is absent, else removed) and ``.NAME.<pid>.<random>.tmp`` (results being written: removed) that
    hold :data:`WRITER` naming that pid and ``target``, and files ``..NAME.checkpoint.<pid>.<random>.tmp`` that
    begin with the checkpoint header naming that pid (a checkpoint being written: removed), where that process
    is gone. Anything else (a user's ``.NAME.old``, ``.NAME.2024.tmp``) is left alone. Call it after
    :func:`claim`'s checks; returns whether it changed anything."""
    target = Path(target)
    parent = target.parent
    if not target.name or not parent.is_dir():
        return False
    changed = False
    results, checkpoint = f".{target.name}.", f".{checkpoint_file(target).name}."
    for path in sorted(parent.iterdir()):
        name = path.name
        if name.startswith(checkpoint):
            found = re.fullmatch(r"(\d{1,9})\.\w+\.tmp", name[len(checkpoint) :], re.ASCII)
            if found and path.is_file() and not path.is_symlink() and _dead_checkpoint_writer(path, int(found[1])):
                path.unlink(missing_ok=True)
                changed = True
        elif name.startswith(results):
            found = re.fullmatch(r"(\d{1,9})(?:\.\d+)?\.old|(\d{1,9})\.\w+\.tmp", name[len(results) :], re.ASCII)
            if not found or path.is_symlink() or not path.is_dir():
                continue
            pid = int(found[1] or found[2])
            if not _dead_writer(path, target, pid):
                continue
            if found[1] and not target.exists() and not target.is_symlink():  # the previous results: back in place
                os.replace(path, target)
                (target / WRITER).unlink(missing_ok=True)
            else:
                shutil.rmtree(path, ignore_errors=True)
            changed = True
    return changed


@contextmanager
def atomic_directory(target: Path, force: bool = False):
    """Yield a temporary folder; on success it replaces ``target`` (a run's results folder: see :func:`claim`), on
    error it is removed. A kill at any moment leaves ``target`` complete, old or new, or its previous version in
    ``.NAME.<pid>.old``, which :func:`recover` puts back; an OSError (full or read-only disk) is an OutputError."""
    target = Path(target)
    check_target(target, force)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp"))
        (tmp / WRITER).write_text(_writer_text(target))  # proves the folder ours to recover() if we are killed
        _usual_mode(tmp, folder=True)
    except OSError as exc:
        raise OutputError(f"--out {target}: cannot write: {exc.strerror or exc}") from None
    try:
        yield tmp
        mark(tmp, "run")
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError):
            raise OutputError(f"--out {target}: cannot write the results: {exc.strerror or exc}") from None
        raise
    old = None
    if target.is_symlink():  # the link is replaced, not the folder it points to
        old = _backup(target)
        os.replace(target, old)
    elif target.exists():
        old = _backup(target)
        (target / WRITER).write_text(_writer_text(target))  # proves the backup ours to recover()
        os.replace(target, old)
    os.replace(tmp, target)
    (target / WRITER).unlink(missing_ok=True)
    if old is not None:
        if old.is_symlink():
            old.unlink()
        else:
            shutil.rmtree(old, ignore_errors=True)
