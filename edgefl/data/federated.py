"""The federated data set the engine trains on, and how it is built from a scenario's [data] keys.

Layout: all clients' training samples in one tensor, client-contiguous; client i owns rows
``train_offsets[i]:train_offsets[i+1]``. The per-client test sets use the same layout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from edgefl.data.errors import DataError
from edgefl.data.idx import DISPLAY_NAMES, NUM_CLASSES, load_idx_dataset
from edgefl.data.partition import (
    client_test_indices,
    dirichlet_partition,
    stratified_sample,
    stratified_split,
    zipf_sizes,
)
from edgefl.data.synthetic import synthetic_alpha_beta

DATASET_NAMES: tuple[str, ...] = (
    "synthetic", "mnist", "fashion_mnist", "kmnist",
    # issue 6: prioritized FL (edgefl/data/priority.py) and statistical recovery (edgefl/data/regression.py)
    "synthetic_priority", "image_priority", "sparse_regression", "low_rank_matrix",
)

# MNIST's pixel mean and std (of the [0,1]-scaled training images), the customary normalisation.
# Used for Fashion-MNIST and KMNIST too: one fixed affine map per pixel, which a linear model or
# CNN absorbs; per-dataset constants would not change what the models can learn.
IMAGE_MEAN = 0.1307
IMAGE_STD = 0.3081
IMAGE_SHAPE = (1, 28, 28)

SYNTHETIC_TRAIN_FRACTION = 0.9  # FedProx/LEAF: first floor(0.9 n_k) samples train, rest test


@dataclass
class FederatedData:
    """Every client's training and test samples, concatenated client by client."""

    name: str
    num_classes: int
    input_shape: tuple[int, ...]
    train_x: torch.Tensor  # float32 [n_train_total, *input_shape]
    train_y: torch.Tensor  # int64 [n_train_total]
    train_offsets: np.ndarray  # int64 [N + 1]
    test_x: torch.Tensor  # float32 [n_test_total, *input_shape]
    test_y: torch.Tensor  # int64 [n_test_total]
    test_offsets: np.ndarray  # int64 [N + 1]
    source: str = ""  # how the pools were made, e.g. "MNIST-10k: t10k split 80/20"
    global_test_x: torch.Tensor | None = None  # the whole held-out pool, for a global accuracy
    global_test_y: torch.Tensor | None = None
    # Optional extras (issue 6): the ground truth of a statistical-recovery data set (w* [p] or
    # W* [rows, cols], for edgefl.estimation), and each client's role ("priority" /
    # "non_priority", for prioritized FL); None where a data set has none.
    true_params: torch.Tensor | None = None
    client_roles: np.ndarray | None = None

    def __post_init__(self) -> None:
        for split, x, y, offsets in (
            ("train", self.train_x, self.train_y, self.train_offsets),
            ("test", self.test_x, self.test_y, self.test_offsets),
        ):
            if offsets.ndim != 1 or offsets[0] != 0 or np.any(np.diff(offsets) < 0):
                raise ValueError(f"{split}_offsets must start at 0 and be non-decreasing")
            if not (offsets[-1] == x.shape[0] == y.shape[0]):
                raise ValueError(f"{split}_offsets end at {offsets[-1]} but there are {x.shape[0]} rows")
            if tuple(x.shape[1:]) != tuple(self.input_shape):
                raise ValueError(f"{split}_x rows have shape {tuple(x.shape[1:])}, expected {self.input_shape}")
        if self.train_offsets.shape != self.test_offsets.shape:
            raise ValueError("train_offsets and test_offsets must describe the same clients")

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
        if torch.is_floating_point(self.train_y):  # regression targets: no class mix
            return {
                "name": self.name, "source": self.source, "num_clients": self.num_clients,
                "input_shape": list(self.input_shape), "train_total": int(self.train_offsets[-1]),
                "test_total": int(self.test_offsets[-1]), "train_size": _min_median_max(self.train_sizes),
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


def _min_median_max(values: np.ndarray) -> dict:
    return {"min": float(np.min(values)), "median": float(np.median(values)), "max": float(np.max(values))}


def _histograms(labels: np.ndarray, offsets: np.ndarray, num_classes: int) -> np.ndarray:
    return np.stack(
        [np.bincount(labels[offsets[i] : offsets[i + 1]], minlength=num_classes) for i in range(len(offsets) - 1)]
    ).astype(np.int64)


def _offsets(sizes: list[int] | np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def images_to_tensor(images: np.ndarray) -> torch.Tensor:
    """uint8 [n, 28, 28] -> float32 [n, 1, 28, 28], scaled to [0, 1] then (x - 0.1307) / 0.3081."""
    x = torch.from_numpy(np.ascontiguousarray(images)).to(torch.float32).div_(255.0)
    return x.sub_(IMAGE_MEAN).div_(IMAGE_STD).unsqueeze(1)


def _proportional_test_sizes(train_sizes: np.ndarray, test_pool_size: int) -> np.ndarray:
    """n_test_i = round(|test pool| * d_i / sum d), at least 1 (drdm.md §5 option "size proportional to d_i")."""
    share = test_pool_size * train_sizes / train_sizes.sum()
    return np.maximum(np.floor(share + 0.5).astype(np.int64), 1)


def _build_idx(
    name: str,
    num_clients: int,
    seeds: list[np.random.SeedSequence],
    *,
    dir: str | Path | None,
    dirichlet_alpha: float,
    zipf_sigma: float,
    test_fraction: float,
    test_per_client: int | None,
    max_train_samples: int | None,
) -> FederatedData:
    split_rng, subsample_rng, partition_rng, test_rng = (np.random.default_rng(s) for s in seeds)
    if dir is None:
        raise DataError(
            f"data.dir is not set: {DISPLAY_NAMES[name]} needs the directory holding its IDX files "
            f"(at least t10k-images-idx3-ubyte(.gz) and t10k-labels-idx1-ubyte(.gz)); set data.dir "
            f"or use data.name = 'synthetic'"
        )
    splits = load_idx_dataset(name, dir)
    if splits["train"] is not None:
        train_images, train_labels = splits["train"]
        test_images, test_labels = splits["test"]
        source = f"{DISPLAY_NAMES[name]}: train split for training, t10k split for testing"
    else:
        # Only the 10k test split exists ("MNIST-10k"): drdm.md §5 [R] splits it 80/20, stratified.
        images, labels = splits["test"]
        train_idx, test_idx = stratified_split(labels, test_fraction, split_rng)
        train_images, train_labels = images[train_idx], labels[train_idx]
        test_images, test_labels = images[test_idx], labels[test_idx]
        source = (
            f"{DISPLAY_NAMES[name]}-10k: t10k split only, stratified "
            f"{len(train_idx)}/{len(test_idx)} into train/test pools"
        )
    if max_train_samples is not None:
        if max_train_samples < num_clients:
            raise DataError(
                f"data.max_train_samples = {max_train_samples}: expected at least one sample per "
                f"client ({num_clients})"
            )
        if max_train_samples < len(train_labels):
            keep = stratified_sample(train_labels, max_train_samples, subsample_rng)
            train_images, train_labels = train_images[keep], train_labels[keep]
            source += f"; train pool subsampled to {max_train_samples}"

    sizes = zipf_sizes(len(train_labels), num_clients, zipf_sigma)
    if sizes.min() < 1:
        raise DataError(
            f"with {len(train_labels)} training samples, {num_clients} clients and data.zipf_sigma = "
            f"{zipf_sigma}, client {int(np.argmin(sizes)) + 1} gets no training data; use fewer "
            f"clients, a smaller zipf_sigma or more samples"
        )
    parts = dirichlet_partition(train_labels, sizes, dirichlet_alpha, partition_rng, NUM_CLASSES)

    if test_per_client is None:
        test_sizes = _proportional_test_sizes(sizes, len(test_labels))
    else:
        if test_per_client < 1:
            raise DataError(f"data.test_per_client = {test_per_client}: expected at least 1 (or unset)")
        test_sizes = np.full(num_clients, test_per_client, dtype=np.int64)
    test_parts = [
        client_test_indices(np.bincount(train_labels[part], minlength=NUM_CLASSES), test_labels, int(n), test_rng)
        for part, n in zip(parts, test_sizes)
    ]

    train_order = np.concatenate(parts)
    test_order = np.concatenate(test_parts)
    return FederatedData(
        name=name,
        num_classes=NUM_CLASSES,
        input_shape=IMAGE_SHAPE,
        train_x=images_to_tensor(train_images[train_order]),
        train_y=torch.from_numpy(train_labels[train_order].astype(np.int64)),
        train_offsets=_offsets([len(p) for p in parts]),
        test_x=images_to_tensor(test_images[test_order]),
        test_y=torch.from_numpy(test_labels[test_order].astype(np.int64)),
        test_offsets=_offsets([len(p) for p in test_parts]),
        source=source,
        global_test_x=images_to_tensor(test_images),
        global_test_y=torch.from_numpy(test_labels.astype(np.int64)),
    )


def _build_synthetic(
    num_clients: int,
    seed_sequence: np.random.SeedSequence,
    *,
    alpha: float,
    beta: float,
    dim: int,
    num_classes: int,
    samples_per_client: int | None,
) -> FederatedData:
    if samples_per_client is not None and samples_per_client < 2:
        raise DataError(
            f"data.samples_per_client = {samples_per_client}: a synthetic client needs at least 2 "
            f"samples (one to train on, one to test)"
        )
    clients = synthetic_alpha_beta(
        num_clients,
        alpha,
        beta,
        np.random.default_rng(seed_sequence),
        dim=dim,
        num_classes=num_classes,
        samples_per_client=samples_per_client,
    )
    train_x, train_y, test_x, test_y = [], [], [], []
    for x, y in clients:
        n_train = min(math.floor(SYNTHETIC_TRAIN_FRACTION * len(y)), len(y) - 1)  # >= 1 test sample
        train_x.append(x[:n_train])
        train_y.append(y[:n_train])
        test_x.append(x[n_train:])
        test_y.append(y[n_train:])
    test_x_all = torch.from_numpy(np.concatenate(test_x))
    test_y_all = torch.from_numpy(np.concatenate(test_y))
    return FederatedData(
        name="synthetic",
        num_classes=num_classes,
        input_shape=(dim,),
        train_x=torch.from_numpy(np.concatenate(train_x)),
        train_y=torch.from_numpy(np.concatenate(train_y)),
        train_offsets=_offsets([len(y) for y in train_y]),
        test_x=test_x_all,
        test_y=test_y_all,
        test_offsets=_offsets([len(y) for y in test_y]),
        source=f"Synthetic({alpha:g}, {beta:g}), d = {dim}, {num_classes} classes, 90/10 split per client",
        global_test_x=test_x_all,
        global_test_y=test_y_all,
    )


def build_federated_data(
    name: str,
    num_clients: int,
    seed: int,
    *,
    dir: str | Path | None = None,
    dirichlet_alpha: float = float("inf"),
    zipf_sigma: float = 0.0,
    test_fraction: float = 0.2,
    test_per_client: int | None = None,
    max_train_samples: int | None = None,
    synthetic_alpha: float = 1.0,
    synthetic_beta: float = 1.0,
    synthetic_dim: int = 60,
    synthetic_classes: int = 10,
    samples_per_client: int | None = None,
    # issue 6 data sets (ignored by the others)
    priority_clients: int | None = None,
    priority_classes: int | None = 4,
    shards_per_client: int = 2,
    image_dataset: str = "mnist",
    noise_skew: float = 1.5,
    label_noise: float = 0.5,
    irrelevant_fraction: float = 1.0,
    regression_dim: int = 1024,
    regression_sparsity: int = 512,
    matrix_side: int = 32,
    matrix_rank: int = 16,
    noise_std: float = 1.0,
) -> FederatedData:
    """Build the federated data set of a run; the same arguments and seed give identical tensors.

    Image data sets (mnist, fashion_mnist, kmnist; IDX files in ``dir``):
      - train pool = train split and test pool = t10k split; when only t10k is present
        ("MNIST-10k"), a stratified split of it with ``test_fraction`` (drdm.md §5 [R]);
      - ``max_train_samples`` first subsamples the train pool, stratified (quick runs);
      - client sizes ``zipf_sizes(pool, N, zipf_sigma)``, class mixes ``dirichlet_partition``
        with ``dirichlet_alpha``;
      - per-client test sets from the test pool, class mix following the client's training
        histogram, ``test_per_client`` images each, or when unset round(|test pool| * d_i / sum d)
        (at least 1): about 67 per client for MNIST-10k and N = 30;
      - pixels scaled to [0, 1] and normalised with MNIST's mean/std for all three; shape (1, 28, 28).
      ``samples_per_client`` and the ``synthetic_*`` keys are ignored.

    Synthetic (FedProx Synthetic(alpha, beta)): each client's own samples, the first
    floor(0.9 n_k) for training and the rest (at least 1) for testing. ``dir``,
    ``dirichlet_alpha``, ``zipf_sigma``, ``test_fraction``, ``test_per_client`` and
    ``max_train_samples`` are ignored: the generator fixes sizes and class mixes itself.

    Random streams: one ``SeedSequence(seed)`` spawns independent streams for the pool split,
    the subsample, the partition and the test sets, so changing e.g. ``test_per_client`` leaves
    the training partition unchanged.

    Issue 6 data sets (details in their modules):
      - ``synthetic_priority`` (edgefl/data/priority.py): Synth(alpha, beta) priority devices plus
        non-priority clients with label noise and irrelevant data (``priority_clients``,
        ``noise_skew``, ``label_noise``, ``irrelevant_fraction``, ``synthetic_*``);
      - ``image_priority``: ``image_dataset`` split into label-sorted shards
        (``shards_per_client``), ``priority_clients`` holding ``priority_classes`` classes;
      - ``sparse_regression`` / ``low_rank_matrix`` (edgefl/data/regression.py): the Fast-FedDA
        paper's synthetic recovery problems (``regression_dim``, ``regression_sparsity``,
        ``matrix_side``, ``matrix_rank``, ``noise_std``, ``samples_per_client`` default 128,
        ``test_per_client`` default 32), with ``true_params``.
    """
    if name not in DATASET_NAMES:
        raise DataError(f"data.name = {name!r} is not a known data set: expected one of {', '.join(DATASET_NAMES)}")
    if num_clients < 1:
        raise DataError(f"data.num_clients = {num_clients}: expected at least 1")
    seeds = np.random.SeedSequence(seed).spawn(4)
    if name == "synthetic_priority":
        from edgefl.data.priority import build_synthetic_priority

        return build_synthetic_priority(
            num_clients, seeds[0], priority_clients=priority_clients, alpha=synthetic_alpha, beta=synthetic_beta,
            dim=synthetic_dim, num_classes=synthetic_classes, skew=noise_skew, label_noise=label_noise,
            irrelevant_fraction=irrelevant_fraction, samples_per_client=samples_per_client,
        )
    if name == "image_priority":
        from edgefl.data.priority import build_image_priority

        return build_image_priority(
            num_clients, seeds, dataset=image_dataset, dir=dir, shards_per_client=shards_per_client,
            priority_clients=priority_clients, priority_classes=priority_classes, test_fraction=test_fraction,
            test_per_client=test_per_client,
        )
    if name in ("sparse_regression", "low_rank_matrix"):
        from edgefl.data.regression import build_regression_data

        return build_regression_data(
            name, num_clients, seeds[0], samples_per_client=samples_per_client, test_per_client=test_per_client,
            dim=regression_dim, sparsity=regression_sparsity, side=matrix_side, rank=matrix_rank, noise_std=noise_std,
        )
    if name == "synthetic":
        return _build_synthetic(
            num_clients,
            seeds[0],
            alpha=synthetic_alpha,
            beta=synthetic_beta,
            dim=synthetic_dim,
            num_classes=synthetic_classes,
            samples_per_client=samples_per_client,
        )
    return _build_idx(
        name,
        num_clients,
        seeds,
        dir=dir,
        dirichlet_alpha=dirichlet_alpha,
        zipf_sigma=zipf_sigma,
        test_fraction=test_fraction,
        test_per_client=test_per_client,
        max_train_samples=max_train_samples,
    )
