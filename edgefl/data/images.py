"""The MNIST-family image data sets (``mnist``, ``fashion_mnist``, ``kmnist``) from IDX files.

Construction ("Distributionally Robust Federated Learning with Client Drift Minimization", Sec. IV-A):
  - train pool = train split and test pool = t10k split; when only t10k is present
    ("MNIST-10k"), a stratified split of it with ``test_fraction`` ([R], not in the paper);
  - ``max_train_samples`` first subsamples the train pool, stratified (quick runs);
  - client sizes ``zipf_sizes(pool, N, zipf_sigma)``, class mixes ``dirichlet_partition``
    with ``dirichlet_alpha``;
  - per-client test sets from the test pool, class mix following the client's training
    histogram, ``test_per_client`` images each, or when unset round(|test pool| * d_i / sum d)
    (at least 1): about 67 per client for MNIST-10k and N = 30;
  - pixels scaled to [0, 1] and normalised with MNIST's mean/std for all three; shape (1, 28, 28).

Random streams (:func:`~edgefl.data.federated.seed_streams`): pool split, subsample, partition,
test sets, so changing e.g. ``test_per_client`` leaves the training partition unchanged.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal, Optional

import numpy as np
import torch
from pydantic import Field, PositiveInt, model_validator

from edgefl.data.errors import DataError
from edgefl.data.federated import (
    IMAGE_SHAPE,
    DataParams,
    FederatedData,
    client_offsets,
    images_to_tensor,
    proportional_test_sizes,
    seed_streams,
)
from edgefl.data.idx import DISPLAY_NAMES, NUM_CLASSES, load_idx_dataset
from edgefl.data.partition import (
    client_test_indices,
    dirichlet_partition,
    stratified_sample,
    stratified_split,
    zipf_sizes,
)

ImageName = Literal["mnist", "fashion_mnist", "kmnist"]


class IdxParams(DataParams):
    """Keys of every data set read from MNIST-family IDX files."""

    dir: Path = Field(
        description="Folder with the IDX files: t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte (.gz or raw), "
        "optionally the train-* pair. Relative to the scenario file."
    )
    test_fraction: float = Field(
        0.2, gt=0, lt=1, description="Test share of the stratified split when only the t10k split exists."
    )

    def layout(self) -> tuple[tuple[int, ...], int]:
        return IMAGE_SHAPE, NUM_CLASSES

    def estimated_samples(self) -> float:
        return 70_000.0  # at most the full MNIST-family files (60k + 10k images)


def load_pools(dataset: str, directory: Path, test_fraction: float, split_rng: np.random.Generator):
    """(train_images, train_labels, test_images, test_labels, split): the train and t10k splits, or
    when only t10k exists a stratified split of it, ``split`` = (n_train, n_test); else None."""
    splits = load_idx_dataset(dataset, directory)
    if splits["train"] is not None:
        (train_images, train_labels), (test_images, test_labels) = splits["train"], splits["test"]
        return train_images, train_labels, test_images, test_labels, None
    images, labels = splits["test"]
    train_idx, test_idx = stratified_split(labels, test_fraction, split_rng)
    return (images[train_idx], labels[train_idx], images[test_idx], labels[test_idx], (len(train_idx), len(test_idx)))


def client_test_sets(
    train_labels: np.ndarray,
    parts: list[np.ndarray],
    test_labels: np.ndarray,
    test_sizes: np.ndarray,
    rng: np.random.Generator,
) -> list[np.ndarray]:
    """Each client's test indices into the test pool, following its training class mix."""
    return [
        client_test_indices(np.bincount(train_labels[part], minlength=NUM_CLASSES), test_labels, int(n), rng)
        for part, n in zip(parts, test_sizes)
    ]


class ImageData(IdxParams):
    """MNIST, Fashion-MNIST or KMNIST: Zipf client sizes, Dirichlet class mixes, per-client test
    sets following each client's class mix. IDX sets with only a test split are split train/test."""

    name: ImageName = Field(description="Which MNIST-family data set.")
    dirichlet_alpha: float = Field(
        math.inf, ge=0, allow_inf_nan=True, description="Class-mix concentration; inf = uniform mix."
    )
    zipf_sigma: float = Field(0.0, ge=0, description="Dataset-size skew: d_i proportional to i^-sigma.")
    test_per_client: Optional[PositiveInt] = Field(None, description="Per-client test size; default: proportional.")
    max_train_samples: Optional[PositiveInt] = Field(None, description="Subsample the training pool (quick runs).")

    @model_validator(mode="after")
    def _one_sample_per_client(self):
        if self.max_train_samples is not None and self.max_train_samples < self.num_clients:
            raise ValueError(
                f"data.max_train_samples = {self.max_train_samples}: expected at least one sample "
                f"per client ({self.num_clients})"
            )
        return self

    def build(self, seed: int) -> FederatedData:
        split_rng, subsample_rng, partition_rng, test_rng = (np.random.default_rng(s) for s in seed_streams(seed))
        display = DISPLAY_NAMES[self.name]
        train_images, train_labels, test_images, test_labels, split = load_pools(
            self.name, self.dir, self.test_fraction, split_rng
        )
        if split is None:
            source = f"{display}: train split for training, t10k split for testing"
        else:
            source = f"{display}-10k: t10k split only, stratified {split[0]}/{split[1]} into train/test pools"
        if self.max_train_samples is not None and self.max_train_samples < len(train_labels):
            keep = stratified_sample(train_labels, self.max_train_samples, subsample_rng)
            train_images, train_labels = train_images[keep], train_labels[keep]
            source += f"; train pool subsampled to {self.max_train_samples}"

        n = self.num_clients
        sizes = zipf_sizes(len(train_labels), n, self.zipf_sigma)
        if sizes.min() < 1:
            raise DataError(
                f"with {len(train_labels)} training samples, {n} clients and data.zipf_sigma = "
                f"{self.zipf_sigma}, client {int(np.argmin(sizes)) + 1} gets no training data; use fewer "
                f"clients, a smaller zipf_sigma or more samples"
            )
        parts = dirichlet_partition(train_labels, sizes, self.dirichlet_alpha, partition_rng, NUM_CLASSES)
        if self.test_per_client is None:
            test_sizes = proportional_test_sizes(sizes, len(test_labels))
        else:
            test_sizes = np.full(n, self.test_per_client, dtype=np.int64)
        test_parts = client_test_sets(train_labels, parts, test_labels, test_sizes, test_rng)

        train_order = np.concatenate(parts)
        test_order = np.concatenate(test_parts)
        return FederatedData(
            name=self.name,
            num_classes=NUM_CLASSES,
            input_shape=IMAGE_SHAPE,
            train_x=images_to_tensor(train_images[train_order]),
            train_y=torch.from_numpy(train_labels[train_order].astype(np.int64)),
            train_offsets=client_offsets([len(p) for p in parts]),
            test_x=images_to_tensor(test_images[test_order]),
            test_y=torch.from_numpy(test_labels[test_order].astype(np.int64)),
            test_offsets=client_offsets([len(p) for p in test_parts]),
            source=source,
            global_test_x=images_to_tensor(test_images),
            global_test_y=torch.from_numpy(test_labels.astype(np.int64)),
        )
