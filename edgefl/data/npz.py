"""Federated data of one's own (``federated_npz``): a folder with one ``.npz`` file per client.

Format (docs/datasets.md): every ``<client>.npz`` (as written by ``numpy.savez``/``savez_compressed``) holds
  - ``x``: the client's inputs, a numeric array [n, *input_shape] (the same input shape in every file);
  - ``y``: their class labels, integers [n], 0 .. num_classes - 1;
  - optionally ``x_test`` and ``y_test`` (both or neither): the client's own test samples.
No other member. The clients are the files in the order of their names; a client without test samples gets its
last 10 % (see ``edgefl/data/writers.py``). Inputs become float32. Files are read with ``allow_pickle=False``:
an array of Python objects is refused, nothing is unpickled.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Literal, Optional

import numpy as np
from pydantic import Field, PositiveInt

from edgefl.data.errors import DataError
from edgefl.data.writers import Writer, WriterKeys, Writers
from edgefl.input_files import special_file

MEMBERS = ("x", "y", "x_test", "y_test")


def npz_files(directory: Path) -> list[Path]:
    """The folder's .npz files in name order (DataError when there is none)."""
    if not directory.is_dir():
        raise DataError(
            f"data.dir '{directory}' does not exist or is not a directory: expected a folder with one .npz file per "
            "client (x, y, optionally x_test, y_test; docs/datasets.md)"
        )
    files = sorted(directory.glob("*.npz"))
    if not files:
        raise DataError(
            f"data.dir '{directory}' holds no .npz files: expected one per client, each with arrays x and y "
            "(numpy.savez(path, x=..., y=...); docs/datasets.md)"
        )
    return files


def read_npz(path: Path, members: tuple[str, ...] = MEMBERS) -> dict[str, np.ndarray]:
    """The named members of one client's file that it holds (checked: only known members, none of objects)."""
    special = special_file(path)
    if special is not None:
        raise DataError(f"'{path}' is {special}, not a regular file")
    try:
        with open(path, "rb") as handle:
            magic = handle.read(6)
    except OSError as exc:
        raise DataError(f"cannot read '{path}': {exc.strerror or exc}") from None
    if magic == b"\x93NUMPY":
        raise DataError(f"'{path}' is a single .npy array: expected an .npz archive of x and y (numpy.savez)")
    if not zipfile.is_zipfile(path):
        raise DataError(f"'{path}' is not an .npz archive (a zip of .npy arrays, as numpy.savez writes)")
    try:
        with np.load(path, allow_pickle=False) as archive:
            names = list(archive.files)
            unknown = [n for n in names if n not in MEMBERS]
            if unknown:
                raise DataError(
                    f"'{path}' holds {', '.join(repr(n) for n in unknown)}: expected only the arrays "
                    f"{', '.join(MEMBERS)} (x_test, y_test optional)"
                )
            arrays = {}
            for name in members:
                if name not in names:
                    continue
                try:
                    arrays[name] = archive[name]
                except ValueError as exc:  # an object array: numpy refuses it without pickle
                    raise DataError(
                        f"'{path}': {name} holds Python objects ({exc}): expected a numeric array; edgefl never "
                        "unpickles"
                    ) from None
            return arrays
    except DataError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise DataError(f"'{path}' is not a readable .npz archive ({exc}): expected numpy.savez output") from None


def _labels(path: Path, arrays: dict[str, np.ndarray], key: str, num_classes: int | None) -> np.ndarray:
    y = arrays[key]
    if y.ndim != 1 or y.dtype.kind not in "iu":
        raise DataError(
            f"'{path}': {key} has dtype {y.dtype} and shape {list(y.shape)}: expected integer class labels [n]"
        )
    if y.size and y.min() < 0:
        raise DataError(f"'{path}': {key}[{int(np.argmin(y))}] = {y.min()}: expected labels >= 0")
    if num_classes is not None and y.size and y.max() >= num_classes:
        i = int(np.argmax(y))
        raise DataError(f"'{path}': {key}[{i}] = {y[i]}: expected labels in 0..{num_classes - 1} (data.num_classes)")
    return y.astype(np.int64)


def _inputs(path: Path, arrays: dict[str, np.ndarray], key: str, labels: np.ndarray) -> np.ndarray:
    x = arrays[key]
    if x.dtype.kind not in "biuf" or x.ndim < 2:
        raise DataError(
            f"'{path}': {key} has dtype {x.dtype} and shape {list(x.shape)}: expected numbers of shape [n, features...]"
        )
    if x.shape[0] != labels.shape[0]:
        label_key = "y" if key == "x" else "y_test"
        raise DataError(
            f"'{path}': {key} has {x.shape[0]} samples and {label_key} {labels.shape[0]}: expected one label per sample"
        )
    x = x.astype(np.float32)
    finite = np.isfinite(x).reshape(len(x), -1).all(axis=1)
    if not finite.all():
        raise DataError(
            f"'{path}': {key}[{int(np.argmin(finite))}] holds NaN or infinity (as float32): expected finite inputs"
        )
    return x


class NpzData(WriterKeys):
    """Federated data of one's own: one .npz file per client (x, y, optionally x_test, y_test)."""

    name: Literal["federated_npz"] = Field(description="A folder of one .npz file per client (docs/datasets.md).")
    dir: Path = Field(description="Folder of the clients' .npz files. Relative to the scenario file.")
    num_classes: Optional[PositiveInt] = Field(
        None, le=1_000_000, description="Number of classes; default: 1 + the largest label in the files."
    )

    def _label_arrays(self) -> list[tuple[Path, dict[str, np.ndarray]]]:
        return [(path, read_npz(path, ("y", "y_test"))) for path in npz_files(self.dir)]

    def layout(self) -> tuple[tuple[int, ...], int]:
        files = npz_files(self.dir)
        first = read_npz(files[0], ("x", "y"))
        for key in ("x", "y"):
            if key not in first:
                raise DataError(f"'{files[0]}' has no array {key!r}: every client's file needs x and y")
        x = _inputs(files[0], first, "x", _labels(files[0], first, "y", self.num_classes))
        return tuple(x.shape[1:]), self.num_classes or self._largest_label() + 1

    def _largest_label(self) -> int:
        largest = 0
        for path, arrays in self._label_arrays():
            for key, y in arrays.items():
                y = _labels(path, arrays, key, None)
                largest = max(largest, int(y.max()) if y.size else 0)
        return largest

    def estimated_samples(self) -> float:
        counts = [sum(len(y) for y in arrays.values()) for _, arrays in self._label_arrays()]
        share = min(1.0, self.num_clients / len(counts)) if self.partition == "natural" else 1.0
        return float(sum(counts)) * share

    def read_writers(self) -> Writers:
        input_shape, classes = self.layout()
        writers = []
        for path in npz_files(self.dir):
            arrays = read_npz(path)
            for key in ("x", "y"):
                if key not in arrays:
                    raise DataError(f"'{path}' has no array {key!r}: every client's file needs x and y")
            if ("x_test" in arrays) != ("y_test" in arrays):
                raise DataError(f"'{path}' has only one of x_test and y_test: expected both (or neither)")
            tests = {}
            for x_key, y_key in (("x", "y"), ("x_test", "y_test")):
                if x_key not in arrays:
                    continue
                y = _labels(path, arrays, y_key, classes)
                x = _inputs(path, arrays, x_key, y)
                if tuple(x.shape[1:]) != input_shape:
                    raise DataError(
                        f"'{path}': {x_key} samples have shape {list(x.shape[1:])}, the first file's "
                        f"{list(input_shape)}: expected one input shape in every file"
                    )
                tests[x_key] = (x, y)
            x_test, y_test = tests.get("x_test", (None, None))
            writers.append(Writer(path.stem, *tests["x"], str(path), x_test, y_test))
        return Writers(
            writers,
            f"npz files in '{self.dir}'",
            classes,
            input_shape,
            no_test_hint=": its x_test and y_test are empty; give it test samples or drop them (its last 10 % test)",
            unit="clients' files",
        )
