"""CIFAR-10 and CIFAR-100 (``cifar10``, ``cifar100``) from their binary versions.

Format (Krizhevsky, https://www.cs.toronto.edu/~kriz/cifar.html, "Binary version"): a file is a sequence of
fixed-size records with no header and nothing between them.
  - CIFAR-10 (folder cifar-10-batches-bin: data_batch_1.bin .. data_batch_5.bin, test_batch.bin, 10,000
    records each, 30,730,000 bytes): ``<1 x label><3072 x pixel>``, label 0..9.
  - CIFAR-100 (folder cifar-100-binary: train.bin, 50,000 records, test.bin, 10,000):
    ``<1 x coarse label><1 x fine label><3072 x pixel>``, coarse 0..19 (the superclass), fine 0..99.
  - The 3072 pixel bytes: the 1024 red values, then the 1024 green, then the 1024 blue, each channel a 32 x 32
    image in row-major order, so byte ``label_bytes + 1024 c + 32 h + w`` of a record is pixel [c, h, w].
Nothing is unpickled: the python versions of CIFAR (pickles) are not read.

The data set: the training files are the train pool and the test file the test pool (when only the test file
is present, a stratified split of it by ``test_fraction``, as for MNIST-10k), split among the clients by
``data.partition`` (``edgefl/data/pools.py``). Pixels are scaled to [0, 1], then standardised per channel
with the training pool's own mean and standard deviation (the customary per-channel normalisation, computed
from the files rather than copied as constants); shape (3, 32, 32).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field

from edgefl.data.errors import DataError
from edgefl.data.federated import FederatedData, seed_streams
from edgefl.data.pools import PoolKeys, Pools, federate_pools, split_one_pool
from edgefl.input_files import special_file

if TYPE_CHECKING:  # torch is imported where it is used: validating a scenario must not load it (docs/architecture.md)
    import torch


CIFAR_SHAPE = (3, 32, 32)
PIXEL_BYTES = 3 * 32 * 32  # 3072: R, G, B planes of 32 x 32, row-major
CIFAR_PAGE = "https://www.cs.toronto.edu/~kriz/cifar.html"


@dataclass(frozen=True)
class CifarFormat:
    """The files of one CIFAR binary version and what its records hold."""

    display: str
    folder: str  # the folder the archive extracts to
    archive: str  # the binary archive on CIFAR_PAGE, and its published md5
    archive_md5: str
    train_files: tuple[str, ...]
    test_file: str
    label_names: tuple[str, ...]  # the label bytes at the start of a record, in order ("fine label")
    label_classes: tuple[int, ...]  # each label byte's number of classes

    @property
    def record_bytes(self) -> int:
        return len(self.label_names) + PIXEL_BYTES


FORMATS: dict[str, CifarFormat] = {
    "cifar10": CifarFormat(
        "CIFAR-10",
        "cifar-10-batches-bin",
        "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz",
        "c32a1d4ab5d03f1284b67883e8d87530",
        tuple(f"data_batch_{i}.bin" for i in range(1, 6)),
        "test_batch.bin",
        ("label",),
        (10,),
    ),
    "cifar100": CifarFormat(
        "CIFAR-100",
        "cifar-100-binary",
        "https://www.cs.toronto.edu/~kriz/cifar-100-binary.tar.gz",
        "03b5dce01913d631647c71ecec9e9cb8",
        ("train.bin",),
        "test.bin",
        ("coarse label", "fine label"),
        (20, 100),
    ),
}


def _download_hint(fmt: CifarFormat) -> str:
    return f"download the binary version {fmt.archive} (md5 {fmt.archive_md5}, from {CIFAR_PAGE}) and extract it"


def read_cifar_records(path: str | Path, fmt: CifarFormat) -> tuple[np.ndarray, np.ndarray]:
    """One CIFAR binary file: (images uint8 [n, 3, 32, 32], labels int64 [n, number of label bytes]), the labels
    in the order of ``fmt.label_names``. DataError naming the file and the record for a malformed file."""
    path = Path(path)
    special = special_file(path)
    if special is not None:
        raise DataError(f"CIFAR file '{path}' is {special}, not a regular file; put the {fmt.display} files there")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read CIFAR file '{path}': {exc.strerror or exc}") from None
    size = fmt.record_bytes
    if len(raw) == 0 or len(raw) % size:
        other = "CIFAR-100's are 3074 bytes" if len(fmt.label_names) == 1 else "CIFAR-10's are 3073 bytes"
        raise DataError(
            f"'{path}' has {len(raw)} bytes: expected a whole, non-zero number of {size}-byte {fmt.display} records "
            f"({len(fmt.label_names)} label byte(s) + {PIXEL_BYTES} pixel bytes; {other}): the file is truncated or "
            f"not a {fmt.display} binary file; {_download_hint(fmt)}"
        )
    records = np.frombuffer(raw, dtype=np.uint8).reshape(-1, size)
    labels = records[:, : len(fmt.label_names)].astype(np.int64)
    for column, (name, classes) in enumerate(zip(fmt.label_names, fmt.label_classes)):
        bad = np.flatnonzero(labels[:, column] >= classes)
        if bad.size:
            i = int(bad[0])
            raise DataError(
                f"'{path}': record {i} (byte {i * size + column}): {name} {labels[i, column]} is not in "
                f"0..{classes - 1}: not a {fmt.display} binary file (the wrong data.name, or a corrupt file)"
            )
    images = np.ascontiguousarray(records[:, len(fmt.label_names) :]).reshape(-1, *CIFAR_SHAPE)
    return images, labels


def _read_split(files: list[Path], fmt: CifarFormat) -> tuple[np.ndarray, np.ndarray]:
    parts = [read_cifar_records(path, fmt) for path in files]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def load_cifar(
    name: str, directory: str | Path
) -> tuple[tuple[np.ndarray, np.ndarray] | None, tuple[np.ndarray, np.ndarray]]:
    """``((train images, labels) or None, (test images, labels))`` of CIFAR ``name`` ("cifar10" or
    "cifar100") from ``directory`` (see :func:`read_cifar_records`). The test file must exist; the training
    files are all present or all absent."""
    fmt = FORMATS[name]
    directory = Path(directory)
    if not directory.is_dir():
        raise DataError(
            f"data.dir '{directory}' does not exist or is not a directory: expected the folder {fmt.folder} "
            f"holding {fmt.test_file} and {', '.join(fmt.train_files)}; {_download_hint(fmt)}"
        )
    test = directory / fmt.test_file
    if not test.exists():
        message = f"data.dir '{directory}' has no {fmt.test_file}: expected the {fmt.display} binary files there"
        nested = directory / fmt.folder
        if (nested / fmt.test_file).exists():
            message += f"; found them in '{nested}', use that folder instead"
        elif any(directory.glob("*.json")) or (directory / "train").is_dir():
            message += ' (this looks like LEAF JSON: use data.name = "femnist" or "shakespeare")'
        raise DataError(message + f"; {_download_hint(fmt)}")
    present = [directory / f for f in fmt.train_files if (directory / f).exists()]
    if present and len(present) < len(fmt.train_files):
        missing = [f for f in fmt.train_files if not (directory / f).exists()]
        raise DataError(
            f"data.dir '{directory}' has {', '.join(p.name for p in present)} but not {', '.join(missing)}: the "
            f"training split needs all of {', '.join(fmt.train_files)} (or none, to split {fmt.test_file} "
            f"train/test); {_download_hint(fmt)}"
        )
    return (_read_split(present, fmt) if present else None), _read_split([test], fmt)


def channel_statistics(images: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel mean and standard deviation of uint8 images [n, C, H, W] scaled to [0, 1], exactly (from the
    histogram of byte values, no float copy of the images)."""
    values = np.arange(256, dtype=np.float64) / 255.0
    mean, std = [], []
    for c in range(images.shape[1]):
        counts = np.bincount(images[:, c].ravel(), minlength=256).astype(np.float64)
        m = float(counts @ values / counts.sum())
        mean.append(m)
        std.append(float(np.sqrt(counts @ (values - m) ** 2 / counts.sum())))
    return np.array(mean), np.array(std)


def standardiser(mean: np.ndarray, std: np.ndarray):
    """uint8 images [n, C, H, W] -> float32, scaled to [0, 1] then (x - mean_c) / std_c per channel c."""
    import torch

    mean_t = torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1)
    std_t = torch.tensor(np.where(std > 0, std, 1.0), dtype=torch.float32).view(1, -1, 1, 1)

    def to_tensor(images: np.ndarray) -> torch.Tensor:
        x = torch.from_numpy(np.ascontiguousarray(images)).to(torch.float32).div_(255.0)
        return x.sub_(mean_t).div_(std_t)

    return to_tensor


class CifarKeys(PoolKeys):
    """Keys of the CIFAR data sets (binary versions)."""

    dir: Path = Field(
        description="Folder with the CIFAR binary files (cifar-10-batches-bin: data_batch_1..5.bin, test_batch.bin; "
        "cifar-100-binary: train.bin, test.bin). Relative to the scenario file."
    )
    test_fraction: float = Field(
        0.2, gt=0, lt=1, description="Test share of the stratified split when only the test file exists."
    )

    def label_column(self) -> int:
        return 0

    def layout(self) -> tuple[tuple[int, ...], int]:
        fmt = FORMATS[self.name]
        return CIFAR_SHAPE, fmt.label_classes[self.label_column()]

    def estimated_samples(self) -> float:
        return 60_000.0  # the full files: 50,000 training and 10,000 test images

    def build(self, seed: int) -> FederatedData:
        split_rng, subsample_rng, partition_rng, test_rng = (np.random.default_rng(s) for s in seed_streams(seed))
        fmt = FORMATS[self.name]
        column = self.label_column()
        train, test = load_cifar(self.name, self.dir)
        test_images, test_labels = test[0], test[1][:, column]
        label = f" ({fmt.label_names[column]}s)" if len(fmt.label_names) > 1 else ""
        if train is not None:
            train_images, train_labels = train[0], train[1][:, column]
            source = f"{fmt.display}{label}: {', '.join(fmt.train_files)} for training, {fmt.test_file} for testing"
        else:
            train_images, train_labels, test_images, test_labels = split_one_pool(
                test_images, test_labels, self.test_fraction, split_rng
            )
            source = (
                f"{fmt.display}{label}: {fmt.test_file} only, stratified {len(train_labels)}/{len(test_labels)} "
                "into train/test pools"
            )
        mean, std = channel_statistics(train_images)
        source += "; pixels standardised per channel (RGB mean {} std {})".format(
            "/".join(f"{v:.4f}" for v in mean), "/".join(f"{v:.4f}" for v in std)
        )
        classes = fmt.label_classes[column]
        pools = Pools(train_images, train_labels, test_images, test_labels, source)
        return FederatedData(
            name=self.name,
            num_classes=classes,
            input_shape=CIFAR_SHAPE,
            **federate_pools(pools, self, classes, standardiser(mean, std), subsample_rng, partition_rng, test_rng),
        )


class Cifar10Data(CifarKeys):
    """CIFAR-10, binary version: 10 classes, 50,000 training and 10,000 test images of 32 x 32 x 3."""

    name: Literal["cifar10"] = Field(description="CIFAR-10 (binary version).")


class Cifar100Data(CifarKeys):
    """CIFAR-100, binary version: 100 fine classes in 20 coarse superclasses, 50,000 + 10,000 images."""

    name: Literal["cifar100"] = Field(description="CIFAR-100 (binary version).")
    labels: Literal["fine", "coarse"] = Field(
        "fine", description='Which label of the records: "fine" (100 classes) or "coarse" (20 superclasses).'
    )

    def label_column(self) -> int:
        return FORMATS["cifar100"].label_names.index(f"{self.labels} label")
