"""What every data set is: the federated data the engine trains on (:class:`FederatedData`) and
the scenario keys it is built from (:class:`DataParams`).

Layout: all clients' training samples in one tensor, client-contiguous; client i owns rows
``train_offsets[i]:train_offsets[i+1]``. The per-client test sets use the same layout.

Each data set family (``edgefl/data/images.py``, ``cifar.py``, ``leaf.py``, ``npz.py``, ``synthetic.py``,
``priority.py``, ``regression.py``) subclasses :class:`DataParams` once: its ``[data]`` keys with types, defaults,
bounds and descriptions, and ``build(seed)``. ``edgefl.data.registry`` maps ``data.name`` to the
class; the scenario validates ``[data]`` against it and the runner calls ``build``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np
from pydantic import ConfigDict, Field, PositiveInt

from edgefl.numeric_keys import NumbersOnly

if TYPE_CHECKING:  # torch is imported where it is used: validating a scenario must not load it (docs/architecture.md)
    import torch


# MNIST's pixel mean and std (of the [0,1]-scaled training images), the customary normalisation.
# Used for Fashion-MNIST and KMNIST too: one fixed affine map per pixel, which a linear model or
# CNN absorbs; per-dataset constants would not change what the models can learn.
IMAGE_MEAN = 0.1307
IMAGE_STD = 0.3081
IMAGE_SHAPE = (1, 28, 28)

TRAIN_FRACTION = 0.9  # FedProx/LEAF: first floor(0.9 n_k) samples of a client train, the rest test

# Random streams of a build: one SeedSequence(seed) spawns this many independent streams; a family
# uses them in its own fixed order (e.g. pool split, subsample, partition, test sets), so changing
# one key (e.g. test_per_client) leaves the other streams unchanged.
NUM_STREAMS = 4


def seed_streams(seed: int) -> list[np.random.SeedSequence]:
    """The independent random streams of a data set built with ``seed``."""
    return np.random.SeedSequence(seed).spawn(NUM_STREAMS)


class DataParams(NumbersOnly):
    """The ``[data]`` keys every data set has. A family subclasses it once: ``name`` narrowed to a
    ``Literal`` of the names it serves, its own typed keys, and ``build``. Unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", validate_default=True, allow_inf_nan=False)

    # Whether build() gives every client a role (FederatedData.client_roles: prioritized FL, FedALIGN).
    has_client_roles: ClassVar[bool] = False

    name: str = Field(description="Data set; each has its own keys, listed below.")
    num_clients: PositiveInt = Field(30, le=10_000_000, description="N, number of clients (at most 10^7).")

    def build(self, seed: int) -> FederatedData:  # pragma: no cover - interface
        """The federated data set; the same keys and seed give identical tensors."""
        raise NotImplementedError

    def layout(self) -> tuple[tuple[int, ...], int] | None:
        """(input shape, number of classes; 1 for regression) known from the keys alone, to check the model
        and the memory before building; None if only ``build`` knows (e.g. a plug-in)."""
        return None

    def estimated_samples(self) -> float | None:
        """The expected number of samples (training + test, all clients) from the keys alone; None if unknown."""
        return None


@dataclass
class FederatedData:
    """Every client's training and test samples, concatenated client by client."""

    name: str
    num_classes: int
    input_shape: tuple[int, ...]
    train_x: torch.Tensor  # float32 [n_train_total, *input_shape]
    train_y: torch.Tensor  # int64 [n_train_total]
    train_offsets: np.ndarray  # int64 [N + 1]
    # float32 [n_test_total, *input_shape]; may be given as None where test_pool_rows says which rows of global_test_x
    # they are: then gathered when first read (a pooled evaluation, edgefl.metrics, never reads them: MNIST-10k's
    # 15,000 rows, 47 MB a run, not made at all). See the property below the class.
    test_x: torch.Tensor
    test_y: torch.Tensor  # int64 [n_test_total]
    test_offsets: np.ndarray  # int64 [N + 1]
    source: str = ""  # how the pools were made, e.g. "MNIST-10k: t10k split 80/20"
    global_test_x: torch.Tensor | None = None  # the whole held-out pool, for a global accuracy
    global_test_y: torch.Tensor | None = None
    # Where the clients' test sets are drawn from the held-out pool (images shared between clients, drawn with
    # replacement): test_x[i] is global_test_x[test_pool_rows[i]] and test_y[i] global_test_y[test_pool_rows[i]],
    # int64 [n_test_total]; the evaluation (edgefl.metrics) then runs the model once per pool image. None: not so.
    test_pool_rows: np.ndarray | None = None
    # Optional extras: the ground truth of a statistical-recovery data set (w* [p] or
    # W* [rows, cols], for edgefl.estimation), and each client's role ("priority" /
    # "non_priority", for prioritized FL); None where a data set has none.
    true_params: torch.Tensor | None = None
    client_roles: np.ndarray | None = None

    def __post_init__(self) -> None:
        rows = self.test_pool_rows
        given = self.__dict__["_test_x"]
        if given is None and (rows is None or self.global_test_x is None):
            raise ValueError("test_x may be None only where test_pool_rows and global_test_x give its rows")
        test_shape = tuple(given.shape) if given is not None else (len(rows), *self.global_test_x.shape[1:])
        for split, x_shape, y, offsets in (
            ("train", tuple(self.train_x.shape), self.train_y, self.train_offsets),
            ("test", test_shape, self.test_y, self.test_offsets),
        ):
            if offsets.ndim != 1 or offsets[0] != 0 or np.any(np.diff(offsets) < 0):
                raise ValueError(f"{split}_offsets must start at 0 and be non-decreasing")
            if not (offsets[-1] == x_shape[0] == y.shape[0]):
                raise ValueError(f"{split}_offsets end at {offsets[-1]} but there are {x_shape[0]} rows")
            if x_shape[1:] != tuple(self.input_shape):
                raise ValueError(f"{split}_x rows have shape {x_shape[1:]}, expected {self.input_shape}")
        if self.train_offsets.shape != self.test_offsets.shape:
            raise ValueError("train_offsets and test_offsets must describe the same clients")
        if rows is not None:
            pool = 0 if self.global_test_x is None or self.global_test_y is None else self.global_test_x.shape[0]
            if rows.shape != (test_shape[0],) or not pool or (rows.size and not 0 <= rows.min() <= rows.max() < pool):
                raise ValueError(f"test_pool_rows must be [{test_shape[0]}] rows of global_test_x ({pool})")

    @property
    def num_clients(self) -> int:
        return int(self.train_offsets.shape[0] - 1)

    @property
    def train_sizes(self) -> np.ndarray:
        return np.diff(self.train_offsets)

    @property
    def test_sizes(self) -> np.ndarray:
        return np.diff(self.test_offsets)

    def client_train(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Client i's training samples (views, no copy)."""
        lo, hi = int(self.train_offsets[i]), int(self.train_offsets[i + 1])
        return self.train_x[lo:hi], self.train_y[lo:hi]

    def client_test(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Client i's own test set (views, no copy)."""
        lo, hi = int(self.test_offsets[i]), int(self.test_offsets[i + 1])
        return self.test_x[lo:hi], self.test_y[lo:hi]

    def class_histograms(self) -> np.ndarray:
        """Training samples per class, [N, num_classes] int64."""
        return _histograms(self.train_y.numpy(), self.train_offsets, self.num_classes)

    def summary(self) -> dict:
        """Sizes and class mix in plain Python numbers (JSON-ready)."""
        import torch

        if torch.is_floating_point(self.train_y):  # regression targets: no class mix
            return {
                "name": self.name,
                "source": self.source,
                "num_clients": self.num_clients,
                "input_shape": list(self.input_shape),
                "train_total": int(self.train_offsets[-1]),
                "test_total": int(self.test_offsets[-1]),
                "train_size": _min_median_max(self.train_sizes),
                "test_size": _min_median_max(self.test_sizes),
            }
        hist = self.class_histograms()
        classes_per_client = (hist > 0).sum(axis=1)
        dominant_share = hist.max(axis=1) / np.maximum(hist.sum(axis=1), 1)
        return {
            "name": self.name,
            "source": self.source,
            "num_clients": self.num_clients,
            "num_classes": self.num_classes,
            "input_shape": list(self.input_shape),
            "train_total": int(self.train_offsets[-1]),
            "test_total": int(self.test_offsets[-1]),
            "train_size": _min_median_max(self.train_sizes),
            "test_size": _min_median_max(self.test_sizes),
            "classes_per_client": _min_median_max(classes_per_client),
            "dominant_class_share": _min_median_max(dominant_share),
        }


def _test_x(data: FederatedData) -> torch.Tensor:
    """FederatedData.test_x: as given, or (given as None) the rows test_pool_rows of global_test_x, gathered at the
    first read and kept."""
    x = data.__dict__["_test_x"]
    if x is None:
        import torch

        assert data.global_test_x is not None and data.test_pool_rows is not None  # (__post_init__)
        x = data.global_test_x.index_select(0, torch.from_numpy(np.asarray(data.test_pool_rows, dtype=np.int64)))
        data.__dict__["_test_x"] = x
    return x


def _set_test_x(data: FederatedData, x: torch.Tensor | None) -> None:
    data.__dict__["_test_x"] = x


FederatedData.test_x = property(_test_x, _set_test_x)  # type: ignore[assignment]  # (a dataclass field, lazily)


def _min_median_max(values: np.ndarray) -> dict:
    return {"min": float(np.min(values)), "median": float(np.median(values)), "max": float(np.max(values))}


HISTOGRAM_SAMPLES = 1 << 22  # samples counted by one bincount of :func:`_histograms` (its index: 32 MiB of int64)


def _histograms(labels: np.ndarray, offsets: np.ndarray, num_classes: int) -> np.ndarray:
    """Each client's samples per class (client i: labels[offsets[i]:offsets[i + 1]], classes 0..num_classes - 1):
    [N, num_classes] int64, by one bincount of client x classes + class over clients holding about HISTOGRAM_SAMPLES
    samples at a time (not one call per client: 10^6 clients' took 3 s)."""
    offsets = np.asarray(offsets, dtype=np.int64)
    n = len(offsets) - 1
    if len(labels) and (labels.min() < 0 or labels.max() >= num_classes):
        raise ValueError(f"labels from {labels.min()} to {labels.max()}: expected 0 to {num_classes - 1}")
    hist = np.empty((n, num_classes), dtype=np.int64)
    lo = 0
    while lo < n:
        hi = max(lo + 1, int(np.searchsorted(offsets, offsets[lo] + HISTOGRAM_SAMPLES, side="right")) - 1)
        hi = min(hi, n)
        owner = np.repeat(np.arange(hi - lo, dtype=np.int64) * num_classes, np.diff(offsets[lo : hi + 1]))
        owner += labels[offsets[lo] : offsets[hi]]
        hist[lo:hi] = np.bincount(owner, minlength=(hi - lo) * num_classes).reshape(hi - lo, num_classes)
        lo = hi
    return hist


def client_offsets(sizes: list[int] | np.ndarray) -> np.ndarray:
    """[0, cumsum(sizes)] as int64: the row ranges of client-contiguous samples."""
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def images_to_tensor(images: np.ndarray) -> torch.Tensor:
    """uint8 [n, 28, 28] -> float32 [n, 1, 28, 28], scaled to [0, 1] then (x - 0.1307) / 0.3081. The input may be
    read-only (a file's decoded images, shared: edgefl.data.idx): it is only read."""
    import torch

    images = np.asarray(images)
    x = torch.empty(images.shape, dtype=torch.float32)  # (torch's allocator: see empty_tensor_array)
    np.copyto(x.numpy(), images, casting="safe")  # uint8 -> float32, exact (as Tensor.to)
    return x.div_(255.0).sub_(IMAGE_MEAN).div_(IMAGE_STD).unsqueeze(1)


def proportional_test_sizes(train_sizes: np.ndarray, test_pool_size: int) -> np.ndarray:
    """n_test_i = round(|test pool| * d_i / sum d), at least 1 (size proportional to d_i [R])."""
    share = test_pool_size * train_sizes / train_sizes.sum()
    return np.maximum(np.floor(share + 0.5).astype(np.int64), 1)


def own_train_sizes(sizes: np.ndarray) -> np.ndarray:
    """How many of each client's own n samples train (:func:`own_split`): floor(0.9 n), leaving at least 1 to test."""
    sizes = np.asarray(sizes, dtype=np.int64)
    return np.minimum(np.floor(TRAIN_FRACTION * sizes).astype(np.int64), sizes - 1)


def own_split(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A client's own samples -> (train x, train y, test x, test y): the first floor(0.9 n) train, the rest
    (at least 1) test."""
    n_train = min(math.floor(TRAIN_FRACTION * len(y)), len(y) - 1)  # >= 1 test sample
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]


def empty_tensor_array(shape: tuple[int, ...], dtype) -> np.ndarray:
    """An uninitialised array of the data set's tensors, allocated by torch (numpy's view of it). Not ``np.empty``:
    numpy advises huge pages for arrays of 4 MiB or more, and on the 2-core development VM (Firecracker, huge pages
    on madvise) the first touch of such memory cost 4.1-4.4 s of CPU for 2 GB against 1.0 s through torch's
    allocator (measured 2026-11-27, alternating runs): 10 s of a 10^6-device build (4.9 GB of samples)."""
    import torch

    return torch.empty(shape, dtype=torch.from_numpy(np.empty(0, dtype=dtype)).dtype).numpy()


def split_each_client_chunks(sizes: np.ndarray, chunks, input_shape: tuple[int, ...], dtype=None) -> dict:
    """:func:`split_each_client` of clients given chunk after chunk: ``sizes`` [N] every client's sample count,
    ``chunks`` (sizes of the chunk's clients, x [their samples, *input_shape], y), client after client. Each chunk
    is copied into the arrays of the result as it comes (x cast to ``dtype``, default its own): no list of
    per-client arrays, no second copy of the data (10^6 clients of 20 samples: 4.9 GB once)."""
    import torch

    sizes = np.asarray(sizes, dtype=np.int64)
    train_sizes = own_train_sizes(sizes)
    train_offsets, test_offsets = client_offsets(train_sizes), client_offsets(sizes - train_sizes)
    arrays = None
    client = 0
    for n, x, y in chunks:
        if arrays is None:  # the arrays of the result, of the samples' own types (x: dtype if given)
            arrays = (
                empty_tensor_array((int(train_offsets[-1]), *input_shape), dtype or x.dtype),
                empty_tensor_array((int(test_offsets[-1]), *input_shape), dtype or x.dtype),
                empty_tensor_array((int(train_offsets[-1]),), y.dtype),
                empty_tensor_array((int(test_offsets[-1]),), y.dtype),
            )
        train_x, test_x, train_y, test_y = arrays
        first, last = client, client + len(n)
        train_at, train_end = train_offsets[first], train_offsets[last]
        test_at, test_end = test_offsets[first], test_offsets[last]
        if (n == n[0]).all():  # the same n for all: the first t rows of each client's n train, as [K, n, ...] views
            t = int(train_sizes[first])
            x, y = x.reshape(len(n), int(n[0]), *input_shape), y.reshape(len(n), int(n[0]))
            train_x[train_at:train_end].reshape(len(n), t, *input_shape)[...] = x[:, :t]
            test_x[test_at:test_end].reshape(len(n), int(n[0]) - t, *input_shape)[...] = x[:, t:]
            train_y[train_at:train_end].reshape(len(n), t)[...] = y[:, :t]
            test_y[test_at:test_end].reshape(len(n), int(n[0]) - t)[...] = y[:, t:]
        else:
            owner = np.repeat(np.arange(len(n)), n)
            position = np.arange(len(y)) - np.repeat(np.cumsum(n) - n, n)  # each sample's index within its client
            trains = position < train_sizes[first:last][owner]
            train_x[train_at:train_end], train_y[train_at:train_end] = x[trains], y[trains]
            test_x[test_at:test_end], test_y[test_at:test_end] = x[~trains], y[~trains]
        client = last
    assert arrays is not None and client == len(sizes), "the chunks must give every client"
    train_x, test_x, train_y, test_y = arrays
    test_x_all, test_y_all = torch.from_numpy(test_x), torch.from_numpy(test_y)
    return dict(
        train_x=torch.from_numpy(train_x),
        train_y=torch.from_numpy(train_y),
        train_offsets=train_offsets,
        test_x=test_x_all,
        test_y=test_y_all,
        test_offsets=test_offsets,
        global_test_x=test_x_all,
        global_test_y=test_y_all,
    )


def assemble_clients(clients: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]) -> dict:
    """Each client's (train x, train y, test x, test y), in client order -> the FederatedData tensors as keyword
    arguments; the global test pool is every test sample."""
    import torch

    test_x_all = torch.from_numpy(np.concatenate([c[2] for c in clients]))
    test_y_all = torch.from_numpy(np.concatenate([c[3] for c in clients]))
    return dict(
        train_x=torch.from_numpy(np.concatenate([c[0] for c in clients])),
        train_y=torch.from_numpy(np.concatenate([c[1] for c in clients])),
        train_offsets=client_offsets([len(c[1]) for c in clients]),
        test_x=test_x_all,
        test_y=test_y_all,
        test_offsets=client_offsets([len(c[3]) for c in clients]),
        global_test_x=test_x_all,
        global_test_y=test_y_all,
    )


def split_each_client(clients: list[tuple[np.ndarray, np.ndarray]]) -> dict:
    """Each client's own (x, y) -> its first floor(0.9 n) samples train, the rest (at least 1) test
    (:func:`own_split`). Returns the FederatedData tensors as keyword arguments; the global test pool is every
    test sample."""
    return assemble_clients([own_split(x, y) for x, y in clients])
