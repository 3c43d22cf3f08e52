"""LEAF's JSON data sets (Caldas et al., "LEAF: A Benchmark for Federated Settings", 2018; github.com/TalwalkarLab/leaf):
FEMNIST (``femnist``: one writer per client) and Shakespeare (``shakespeare``: one speaking role per client).

Files, as LEAF's ``preprocess.sh`` writes them (``data/<name>/data/``): ``train/*.json`` and ``test/*.json``
(``-t sample``: every writer in both, its samples split; ``-t user``: each writer in one of them). ``data.dir``
is the folder holding ``train/`` and ``test/``; a folder of unsplit ``*.json`` (LEAF's ``all_data/``) is read as
writers without test samples. Each file is one JSON object::

    {"users": [...], "num_samples": [...], "user_data": {"<writer>": {"x": [...], "y": [...]}, ...}}

(Shakespeare's files may also hold "hierarchies"). As LEAF's own reader (``models/utils/model_utils.py``
``read_dir``) the writers are the keys of "user_data", in sorted order; "users" and "num_samples" are not used
(LEAF's Shakespeare test files overstate num_samples by 79 per writer: ``split_data.py`` drops the 79 test
samples that overlap the training text). A writer in two files of one folder is an error.

Encodings (LEAF's reference models):
  - FEMNIST: x = 784 numbers, a 28 x 28 grey image row by row (LEAF writes pixel / 255: white 1.0, ink near 0),
    kept as they are (LEAF's CNN takes them so); shape (1, 28, 28). y = class 0..61 (10 digits, 26 upper-case,
    26 lower-case letters).
  - Shakespeare: x = a text of 80 characters, y = the next character; each character becomes its index in LEAF's
    ``ALL_LETTERS`` (``models/utils/language_utils.py``: ``word_to_indices``, ``letter_to_vec``), 80 classes.
    The inputs (``encoding = "indices"``) are the 80 indices as float32, shape (80,), the one input type of
    edgefl's data: a sequence model embeds ``x.long()``; ``encoding = "one_hot"`` gives each character's one-hot
    vector (LEAF's ``letter_to_vec``), shape (80, 80), for the linear and mlp models. A character outside
    ALL_LETTERS is an error (LEAF's ``find`` would give -1).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field, PositiveInt

from edgefl.data.errors import DataError
from edgefl.data.writers import Writer, WriterKeys, Writers
from edgefl.input_files import special_file

LEAF_REPO = "https://github.com/TalwalkarLab/leaf"

# LEAF's character set (models/utils/language_utils.py): index = the character's class.
ALL_LETTERS = "\n !\"&'(),-.0123456789:;>?ABCDEFGHIJKLMNOPQRSTUVWXYZ[]abcdefghijklmnopqrstuvwxyz}"
_CHAR_INDEX = np.full(128, -1, dtype=np.int64)
_CHAR_INDEX[[ord(c) for c in ALL_LETTERS]] = np.arange(len(ALL_LETTERS))

FEMNIST_SHAPE = (1, 28, 28)
FEMNIST_CLASSES = 62

# The full data sets (LEAF paper, Table 1), for the memory estimate before the files are read.
FULL_SIZE = {"femnist": (3_550, 805_263), "shakespeare": (1_129, 4_226_158)}  # (writers, samples)


def _read_json(path: Path) -> Any:
    special = special_file(path)
    if special is not None:
        raise DataError(f"LEAF file '{path}' is {special}, not a regular file")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DataError(f"cannot read LEAF file '{path}': {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise DataError(f"'{path}' is not UTF-8 text (byte {exc.start}): expected a LEAF JSON file") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"'{path}' line {exc.lineno} column {exc.colno}: not valid JSON ({exc.msg})") from None


def read_leaf_file(path: str | Path) -> dict[str, tuple[list, list]]:
    """One LEAF JSON file: writer -> (x list, y list), as in the file (checked: the structure, one y per x)."""
    path = Path(path)
    data = _read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("user_data"), dict):
        got = f"keys {sorted(data)}" if isinstance(data, dict) else f"a JSON {type(data).__name__}"
        raise DataError(
            f'\'{path}\': expected a LEAF JSON object with "user_data" (and "users", "num_samples"), got {got}'
        )
    writers = {}
    for name, entry in data["user_data"].items():
        where = f"'{path}': user_data[{name!r}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("x"), list) or not isinstance(entry.get("y"), list):
            raise DataError(f'{where}: expected an object with lists "x" (the samples) and "y" (their labels)')
        if len(entry["x"]) != len(entry["y"]):
            raise DataError(
                f"{where}: x has {len(entry['x'])} samples and y {len(entry['y'])} labels: expected one label per sample"
            )
        writers[name] = (entry["x"], entry["y"])
    return writers


def _describe(value: Any) -> str:
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, str):
        return f"a text of {len(value)} characters"
    return f"{value!r}"


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def class_labels(ys: list, classes: int, where: str) -> np.ndarray:
    """Integer class labels 0..classes-1 as int64 (DataError naming the first bad one)."""
    for i, v in enumerate(ys):
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < classes:
            raise DataError(f"{where}.y[{i}] = {v!r}: expected a class label, an integer in 0..{classes - 1}")
    return np.asarray(ys, dtype=np.int64).reshape(len(ys))


def femnist_samples(xs: list, ys: list, where: str) -> tuple[np.ndarray, np.ndarray]:
    """FEMNIST x (lists of 784 numbers) and y (0..61) -> float32 [n, 1, 28, 28], int64 [n]."""
    pixels = FEMNIST_SHAPE[1] * FEMNIST_SHAPE[2]
    try:
        parsed = np.asarray(xs) if xs else np.zeros((0, pixels))
    except ValueError:  # ragged lists
        parsed = None
    if parsed is None or parsed.dtype.kind not in "iuf" or parsed.shape[1:] != (pixels,):
        for i, x in enumerate(xs):  # the slow path, only to name the first bad sample
            if not isinstance(x, list) or len(x) != pixels or not all(_is_number(v) for v in x):
                detail = _describe(x)
                if isinstance(x, list) and len(x) == pixels:
                    j = next(j for j, v in enumerate(x) if not _is_number(v))
                    detail = f"entry {j} is {x[j]!r}"
                raise DataError(
                    f"{where}.x[{i}]: expected {pixels} numbers (a 28 x 28 image, row by row), got {detail}"
                )
        raise DataError(f"{where}.x: expected lists of {pixels} numbers (a 28 x 28 image, row by row)")
    x_arr = parsed.astype(np.float32).reshape(len(xs), *FEMNIST_SHAPE)
    finite = np.isfinite(x_arr).reshape(len(xs), -1).all(axis=1)
    if not finite.all():
        raise DataError(f"{where}.x[{int(np.argmin(finite))}]: holds NaN or infinity: expected finite pixel values")
    return x_arr, class_labels(ys, FEMNIST_CLASSES, where)


def character_indices(texts: list, length: int, where: str, key: str) -> np.ndarray:
    """Texts of ``length`` characters -> their indices in ALL_LETTERS, int64 [n, length]."""
    for i, text in enumerate(texts):
        if not isinstance(text, str) or len(text) != length:
            raise DataError(f"{where}.{key}[{i}]: expected a text of {length} character(s), got {_describe(text)}")
    codes = np.frombuffer("".join(texts).encode("utf-32-le"), dtype="<u4").astype(np.int64)
    index = np.where(codes < 128, _CHAR_INDEX[np.minimum(codes, 127)], -1)
    bad = np.flatnonzero(index < 0)
    if bad.size:
        i, j = divmod(int(bad[0]), length)
        position = f"[{i}][{j}]" if length > 1 else f"[{i}]"
        raise DataError(
            f"{where}.{key}{position} = {chr(int(codes[bad[0]]))!r} is not one of LEAF's {len(ALL_LETTERS)} "
            f"characters (ALL_LETTERS of {LEAF_REPO} models/utils/language_utils.py)"
        )
    return index.reshape(len(texts), length)


def shakespeare_samples(
    xs: list, ys: list, where: str, length: int, encoding: str = "indices"
) -> tuple[np.ndarray, np.ndarray]:
    """Shakespeare x (texts of ``length`` characters) and y (the next character) -> inputs float32, labels int64 [n]:
    ``encoding`` "indices": [n, length], each character's index; "one_hot": [n, length, 80], LEAF's letter_to_vec
    of each character."""
    indices = character_indices(xs, length, where, "x")
    x = np.eye(len(ALL_LETTERS), dtype=np.float32)[indices] if encoding == "one_hot" else indices.astype(np.float32)
    return x, character_indices(ys, 1, where, "y").reshape(len(ys))


def leaf_folders(directory: Path, display: str) -> tuple[list[Path], list[Path] | None]:
    """(training files, test files or None): train/*.json and test/*.json, or the unsplit *.json of the folder."""
    hint = f"run LEAF's preprocess.sh ({LEAF_REPO}, data/{display.lower()}) and set data.dir to its data/ folder"
    if not directory.is_dir():
        raise DataError(
            f"data.dir '{directory}' does not exist or is not a directory: expected a folder holding LEAF's "
            f"{display} train/ and test/ folders of JSON files; {hint}"
        )
    if (directory / "train").is_dir():
        train = sorted((directory / "train").glob("*.json"))
        if not train:
            raise DataError(f"'{directory / 'train'}' holds no .json files: expected LEAF's {display} files; {hint}")
        test_dir = directory / "test"
        test = sorted(test_dir.glob("*.json")) if test_dir.is_dir() else None
        if test_dir.is_dir() and not test:
            raise DataError(f"'{test_dir}' holds no .json files: expected LEAF's {display} test files; {hint}")
        return train, test
    unsplit = sorted(directory.glob("*.json"))
    if not unsplit:
        nested = sorted(p.parent for p in directory.glob("*/train") if p.is_dir())
        found = f"; found a train/ folder in '{nested[0]}', use that folder instead" if nested else ""
        raise DataError(
            f"data.dir '{directory}' has no train/ folder and no .json files: expected LEAF's {display} JSON{found}; "
            f"{hint}"
        )
    return unsplit, None


class LeafKeys(WriterKeys):
    """Keys of LEAF's JSON data sets."""

    dir: Path = Field(
        description="Folder holding LEAF's train/ and test/ folders of JSON files (LEAF's data/<name>/data), or "
        "a folder of unsplit .json files. Relative to the scenario file."
    )

    def layout(self) -> tuple[tuple[int, ...], int]:  # pragma: no cover - interface
        raise NotImplementedError

    def samples(self, xs: list, ys: list, where: str) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
        """The inputs and labels of one writer's samples, encoded (DataError naming the first bad one)."""
        raise NotImplementedError

    def estimated_samples(self) -> float:
        writers, samples = FULL_SIZE[self.name]
        if self.partition == "natural":
            return self.num_clients * samples / writers  # the mean writer of the full data set
        return float(samples)

    def read_writers(self) -> Writers:
        display = {"femnist": "FEMNIST", "shakespeare": "Shakespeare"}[self.name]
        train_files, test_files = leaf_folders(self.dir, display)
        train = self._read_folder(train_files)
        test = self._read_folder(test_files) if test_files is not None else {}
        writers = []
        for name in sorted(train):
            x, y, origin = train[name]
            if test_files is None:
                writers.append(Writer(name, x, y, origin))
            else:
                x_test, y_test, _ = test.get(name, (x[:0], y[:0], ""))
                writers.append(Writer(name, x, y, origin, x_test, y_test))
        test_only = [Writer(name, *test[name]) for name in sorted(set(test) - set(train))]
        input_shape, classes = self.layout()
        test_dir = self.dir / "test"
        return Writers(
            writers,
            f"{display} (LEAF JSON in '{self.dir}')",
            classes,
            input_shape,
            test_only,
            self._encoding_note(),
            f" in '{test_dir}': the natural partition tests each writer on its own test samples, so every writer "
            "must be in both train/ and test/ (LEAF's preprocess.sh -t sample; -t user puts each writer in one "
            'of them): re-run preprocess.sh with -t sample, or use data.partition = "dirichlet" or "iid"',
            "speaking roles" if self.name == "shakespeare" else "writers",
        )

    def _encoding_note(self) -> str:
        return ""

    def _read_folder(self, files: list[Path]) -> dict[str, tuple[np.ndarray, np.ndarray, str]]:
        """writer -> (x, y, file) of every file of one folder; a writer in two files is an error."""
        found: dict[str, tuple[np.ndarray, np.ndarray, str]] = {}
        for path in files:
            for name, (xs, ys) in read_leaf_file(path).items():
                if name in found:
                    raise DataError(
                        f"writer {name!r} is in both '{found[name][2]}' and '{path}': expected each writer in one "
                        "file of a folder"
                    )
                x, y = self.samples(xs, ys, f"'{path}': user_data[{name!r}]")
                found[name] = (x, y, str(path))
        return found


class FemnistData(LeafKeys):
    """FEMNIST (LEAF): handwritten digits and letters, 62 classes, one client per writer by default."""

    name: Literal["femnist"] = Field(description="LEAF's FEMNIST (JSON).")

    def layout(self) -> tuple[tuple[int, ...], int]:
        return FEMNIST_SHAPE, FEMNIST_CLASSES

    def samples(self, xs: list, ys: list, where: str) -> tuple[np.ndarray, np.ndarray]:
        return femnist_samples(xs, ys, where)


class ShakespeareData(LeafKeys):
    """Shakespeare (LEAF): next-character prediction, 80 classes, one client per speaking role by default."""

    name: Literal["shakespeare"] = Field(description="LEAF's Shakespeare (JSON).")
    sequence_length: PositiveInt = Field(
        80, le=100_000, description="Characters of every x (LEAF's preprocessing writes 80)."
    )
    encoding: Literal["indices", "one_hot"] = Field(
        "indices",
        description="Inputs: \"indices\" (each character's index in LEAF's ALL_LETTERS, shape [sequence_length], "
        'for a sequence model that embeds them) or "one_hot" ([sequence_length, 80], e.g. for linear or mlp).',
    )

    def layout(self) -> tuple[tuple[int, ...], int]:
        if self.encoding == "one_hot":
            return (self.sequence_length, len(ALL_LETTERS)), len(ALL_LETTERS)
        return (self.sequence_length,), len(ALL_LETTERS)

    def _encoding_note(self) -> str:
        if self.encoding == "one_hot":
            return "; x = one-hot characters (LEAF's letter_to_vec)"
        return "; x = character indices in LEAF's ALL_LETTERS, as float32"

    def samples(self, xs: list, ys: list, where: str) -> tuple[np.ndarray, np.ndarray]:
        return shakespeare_samples(xs, ys, where, self.sequence_length, self.encoding)
