"""The MNIST-family image data sets (``mnist``, ``fashion_mnist``, ``kmnist``) from IDX files.

Construction ("Distributionally Robust Federated Learning with Client Drift Minimization", Sec. IV-A):
  - train pool = train split and test pool = t10k split; when only t10k is present
    ("MNIST-10k"), a stratified split of it with ``test_fraction`` ([R], not in the paper);
  - the pools split among the clients by ``data.partition`` (``edgefl/data/pools.py``): Zipf sizes,
    Dirichlet class mixes, per-client test sets following each client's class mix, ``test_per_client``
    images each or proportional (about 67 per client for MNIST-10k and N = 30);
  - pixels scaled to [0, 1] and normalised with MNIST's mean/std for all three; shape (1, 28, 28).

Random streams (:func:`~edgefl.data.federated.seed_streams`): pool split, subsample, partition,
test sets, so changing e.g. ``test_per_client`` leaves the training partition unchanged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field

from edgefl.data.federated import IMAGE_SHAPE, DataParams, FederatedData, images_to_tensor, seed_streams
from edgefl.data.idx import DISPLAY_NAMES, NUM_CLASSES, load_idx_dataset
from edgefl.data.pools import PoolKeys, Pools, federate_pools, split_one_pool

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
    splits = load_idx_dataset(dataset, directory, shared=True)  # (read-only: the pools index them, copying)
    if splits["train"] is not None:
        (train_images, train_labels), (test_images, test_labels) = splits["train"], splits["test"]
        return train_images, train_labels, test_images, test_labels, None
    train_images, train_labels, test_images, test_labels = split_one_pool(*splits["test"], test_fraction, split_rng)
    return train_images, train_labels, test_images, test_labels, (len(train_labels), len(test_labels))


class ImageData(PoolKeys, IdxParams):
    """MNIST, Fashion-MNIST or KMNIST: Zipf client sizes, Dirichlet class mixes, per-client test
    sets following each client's class mix. IDX sets with only a test split are split train/test."""

    name: ImageName = Field(description="Which MNIST-family data set.")

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
        pools = Pools(train_images, train_labels, test_images, test_labels, source)
        return FederatedData(
            name=self.name,
            num_classes=NUM_CLASSES,
            input_shape=IMAGE_SHAPE,
            **federate_pools(pools, self, NUM_CLASSES, images_to_tensor, subsample_rng, partition_rng, test_rng),
        )
