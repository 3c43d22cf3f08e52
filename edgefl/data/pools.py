"""Data sets made of two labelled pools, a training pool and a test pool, split among the clients by
``data.partition``: the MNIST family (``images.py``), CIFAR (``cifar.py``), and the writers' data of LEAF
and per-client npz folders pooled (``writers.py``).

Construction ("Distributionally Robust Federated Learning with Client Drift Minimization", Sec. IV-A):
  - ``max_train_samples`` first subsamples the train pool, stratified (quick runs);
  - client sizes ``zipf_sizes(pool, N, zipf_sigma)``;
  - class mixes: ``partition = "dirichlet"``: ``dirichlet_partition`` with ``dirichlet_alpha`` (inf: the
    uniform mix); ``partition = "iid"``: the same with alpha = inf, i.e. shuffle and cut;
  - per-client test sets from the test pool, class mix following the client's training histogram,
    ``test_per_client`` samples each, or when unset round(|test pool| * d_i / sum d) (at least 1).

Random streams (:func:`~edgefl.data.federated.seed_streams`): pool split, subsample, partition, test sets,
so changing e.g. ``test_per_client`` leaves the training partition unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Literal, Optional

import numpy as np
from pydantic import Field, PositiveInt, model_validator

from edgefl.data.errors import DataError
from edgefl.data.federated import DataParams, client_offsets, proportional_test_sizes
from edgefl.data.partition import (
    client_test_indices,
    dirichlet_partition,
    stratified_sample,
    stratified_split,
    zipf_sizes,
)

if TYPE_CHECKING:  # torch is imported where it is used: validating a scenario must not load it (docs/architecture.md)
    import torch


PoolPartition = Literal["dirichlet", "iid"]


class PoolKeys(DataParams):
    """The keys of splitting a training pool among the clients (see the module's docstring)."""

    partition: PoolPartition = Field(
        "dirichlet",
        description='How the pool is split among the clients: "dirichlet" (class mixes ~ Dir(dirichlet_alpha)) '
        'or "iid" (shuffle and cut: dirichlet_alpha = inf).',
    )
    dirichlet_alpha: float = Field(
        math.inf, ge=0, allow_inf_nan=True, description="Class-mix concentration; inf = uniform mix."
    )
    zipf_sigma: float = Field(0.0, ge=0, description="Dataset-size skew: d_i proportional to i^-sigma.")
    test_per_client: Optional[PositiveInt] = Field(None, description="Per-client test size; default: proportional.")
    max_train_samples: Optional[PositiveInt] = Field(None, description="Subsample the training pool (quick runs).")

    @model_validator(mode="after")
    def _pool_keys_agree(self):
        if self.max_train_samples is not None and self.max_train_samples < self.num_clients:
            raise ValueError(
                f"data.max_train_samples = {self.max_train_samples}: expected at least one sample "
                f"per client ({self.num_clients})"
            )
        if self.partition == "iid" and not math.isinf(self.dirichlet_alpha):
            raise ValueError(
                f'data.dirichlet_alpha = {self.dirichlet_alpha} with data.partition = "iid": the iid split is '
                f'the uniform mix (alpha = inf); use partition = "dirichlet" for a class skew, or drop dirichlet_alpha'
            )
        return self

    @property
    def class_alpha(self) -> float:
        """The Dirichlet concentration of the class mixes: inf for the iid split."""
        return math.inf if self.partition == "iid" else self.dirichlet_alpha


@dataclass
class Pools:
    """A data set's training and test pools (inputs as read, e.g. uint8 images; labels int64)."""

    train_x: np.ndarray
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray
    source: str  # how the pools were made, e.g. "CIFAR-10: data_batch_1..5 for training, test_batch for testing"


def split_one_pool(
    x: np.ndarray, y: np.ndarray, test_fraction: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A data set with only its test split (MNIST-10k, a CIFAR test file alone): (train x, train y, test x,
    test y), a stratified split with ``test_fraction`` of it testing ([R], not in the DRDM paper)."""
    train_idx, test_idx = stratified_split(y, test_fraction, rng)
    return x[train_idx], y[train_idx], x[test_idx], y[test_idx]


def client_test_sets(
    train_labels: np.ndarray,
    parts: list[np.ndarray],
    test_labels: np.ndarray,
    test_sizes: np.ndarray,
    rng: np.random.Generator,
    num_classes: int,
) -> list[np.ndarray]:
    """Each client's test indices into the test pool, following its training class mix."""
    return [
        client_test_indices(np.bincount(train_labels[part], minlength=num_classes), test_labels, int(n), rng)
        for part, n in zip(parts, test_sizes)
    ]


def federate_pools(
    pools: Pools,
    keys: PoolKeys,
    num_classes: int,
    to_tensor: Callable[[np.ndarray], torch.Tensor],
    subsample_rng: np.random.Generator,
    partition_rng: np.random.Generator,
    test_rng: np.random.Generator,
) -> dict:
    """The pools split among ``keys.num_clients`` clients (the module's docstring): the FederatedData
    keyword arguments but name, num_classes and input_shape; ``to_tensor`` turns inputs as read into the
    model's float32 inputs, each row on its own (elementwise: the clients' test rows are copied from the
    converted test pool, the same bits as converting them)."""
    import torch

    train_x, train_y, source = pools.train_x, pools.train_y, pools.source
    if keys.max_train_samples is not None and keys.max_train_samples < len(train_y):
        keep = stratified_sample(train_y, keys.max_train_samples, subsample_rng)
        train_x, train_y = train_x[keep], train_y[keep]
        source += f"; train pool subsampled to {keys.max_train_samples}"

    n = keys.num_clients
    sizes = zipf_sizes(len(train_y), n, keys.zipf_sigma)
    if sizes.min() < 1:
        raise DataError(
            f"with {len(train_y)} training samples, {n} clients and data.zipf_sigma = "
            f"{keys.zipf_sigma}, client {int(np.argmin(sizes)) + 1} gets no training data; use fewer "
            f"clients, a smaller zipf_sigma or more samples"
        )
    parts = dirichlet_partition(train_y, sizes, keys.class_alpha, partition_rng, num_classes)
    if keys.test_per_client is None:
        test_sizes = proportional_test_sizes(sizes, len(pools.test_y))
    else:
        test_sizes = np.full(n, keys.test_per_client, dtype=np.int64)
    test_parts = client_test_sets(train_y, parts, pools.test_y, test_sizes, test_rng, num_classes)

    train_order = np.concatenate(parts)
    test_order = np.concatenate(test_parts)
    global_test_x = to_tensor(pools.test_x)
    return dict(
        train_x=to_tensor(train_x[train_order]),
        train_y=torch.from_numpy(train_y[train_order].astype(np.int64)),
        train_offsets=client_offsets([len(p) for p in parts]),
        test_x=None,  # the rows test_order of global_test_x, gathered if read (to_tensor's of them: the same bits)
        test_y=torch.from_numpy(pools.test_y[test_order].astype(np.int64)),
        test_offsets=client_offsets([len(p) for p in test_parts]),
        source=source,
        global_test_x=global_test_x,
        global_test_y=torch.from_numpy(pools.test_y.astype(np.int64)),
        test_pool_rows=test_order,
    )
