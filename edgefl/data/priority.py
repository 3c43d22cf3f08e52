"""Priority / non-priority clients for prioritized FL ("Utilizing Free Clients in Federated
Learning for Focused Model Enhancement", Sec. 2 and 4).

Every client gets a role in ``FederatedData.client_roles``: ``"priority"`` (its data defines the
objective) or ``"non_priority"`` (a free client that may help when aligned).

``synthetic_priority`` -- Synth(alpha, beta) with noisy non-priority clients (Sec. 4 and App. B.2,
"Non-priority noise", a proposal: the paper names the knobs but gives no formula):
  - |P| priority devices drawn as in Synthetic(alpha, beta) (sizes n_k = floor(LogNormal(4, 2)) + 50,
    capped at 1000), weights p_k = D_k / sum_P D;
  - non-priority client j = 0..|Q|-1: r_j = j / (|Q| - 1), level l_j = r_j^(1/skew);
    n_j clean samples (same size law), each from a priority device k ~ Categorical(p_k);
    each clean label flipped with probability label_noise * l_j to a uniform other class;
    round(irrelevant_fraction * l_j * n_j) irrelevant points from a fresh Synth(alpha, beta)
    device, labelled by it; shuffled. Client j = 0 is clean; the last has 50% flips and as many
    irrelevant as clean points (defaults label_noise = 0.5, irrelevant_fraction = 1);
  - every client: first floor(0.9 n) samples train, the rest (>= 1) test.
  Clients 0..|P|-1 are the priority devices, then the non-priority clients in order of noise.

``image_priority`` -- an MNIST-family image set split McMahan-style (Sec. 4 and App. B.1): sort the
training pool by label, cut it into N * shards_per_client equal shards, deal them to clients at
random; draw |P| priority clients uniformly, redrawn until together they hold exactly
``priority_classes`` distinct classes (the paper's "only 4 classes" with |P| = 2). Per-client
test sets follow each client's training class mix (as for the other image sets).
"""

from __future__ import annotations

from typing import ClassVar, Literal, Optional

import numpy as np
from pydantic import Field, PositiveInt, model_validator

from edgefl.data.errors import DataError
from edgefl.data.federated import (
    IMAGE_SHAPE,
    FederatedData,
    client_offsets,
    images_to_tensor,
    proportional_test_sizes,
    seed_streams,
    split_each_client,
)
from edgefl.data.idx import NUM_CLASSES
from edgefl.data.images import IdxParams, ImageName, load_pools
from edgefl.data.pools import client_test_sets
from edgefl.data.synthetic import SyntheticKeys, synthetic_devices, synthetic_sample_counts

PRIORITY = "priority"
NON_PRIORITY = "non_priority"


def _check_priority_count(params) -> None:
    count = params.priority_clients
    if count is not None and count > params.num_clients:
        raise ValueError(f"data.priority_clients = {count}: expected 1..num_clients ({params.num_clients})")


def noise_levels(num_non_priority: int, skew: float) -> np.ndarray:
    """l_j = (j / (|Q| - 1))^(1/skew), j = 0..|Q|-1 (a single client gets level 0)."""
    if skew <= 0:
        raise DataError(f"data.noise_skew = {skew}: expected > 0")
    if num_non_priority <= 1:
        return np.zeros(num_non_priority)
    r = np.arange(num_non_priority) / (num_non_priority - 1)
    return r ** (1.0 / skew)


def synthetic_priority_clients(
    num_clients: int,
    priority_clients: int,
    rng: np.random.Generator,
    *,
    alpha: float = 1.0,
    beta: float = 1.0,
    dim: int = 60,
    num_classes: int = 10,
    skew: float = 1.5,
    label_noise: float = 0.5,
    irrelevant_fraction: float = 1.0,
    samples_per_client: int | None = None,
):
    """Per-client (x, y) arrays (priority first) and the roles array."""
    if not 1 <= priority_clients <= num_clients:
        raise DataError(f"data.priority_clients = {priority_clients}: expected 1..num_clients ({num_clients})")
    if not 0 <= label_noise <= 1 or irrelevant_fraction < 0:
        raise DataError("data.label_noise must be in [0, 1] and data.irrelevant_fraction >= 0")
    num_q = num_clients - priority_clients

    def sizes(n):
        if samples_per_client is not None:
            return np.full(n, samples_per_client, dtype=np.int64)
        return synthetic_sample_counts(n, rng)

    p_sizes = sizes(priority_clients)
    devices = synthetic_devices(priority_clients, alpha, beta, rng, dim=dim, num_classes=num_classes)
    clients = [dev.sample(int(n), rng) for dev, n in zip(devices, p_sizes)]
    weights = p_sizes / p_sizes.sum()
    levels = noise_levels(num_q, skew)
    q_sizes = sizes(num_q)
    for level, n in zip(levels, q_sizes):
        n = int(n)
        owners = rng.choice(priority_clients, size=n, p=weights)
        xs, ys = np.empty((n, dim), np.float32), np.empty(n, np.int64)
        for k in np.unique(owners):
            rows = np.flatnonzero(owners == k)
            xs[rows], ys[rows] = devices[k].sample(len(rows), rng)
        flip = rng.random(n) < label_noise * level
        shift = rng.integers(1, num_classes, size=n)  # uniform over the other classes
        ys = np.where(flip, (ys + shift) % num_classes, ys)
        extra = int(round(irrelevant_fraction * level * n))
        if extra:
            fresh = synthetic_devices(1, alpha, beta, rng, dim=dim, num_classes=num_classes)[0]
            xi, yi = fresh.sample(extra, rng)
            xs, ys = np.concatenate([xs, xi]), np.concatenate([ys, yi])
        order = rng.permutation(len(ys))
        clients.append((xs[order], ys[order]))
    roles = np.array([PRIORITY] * priority_clients + [NON_PRIORITY] * num_q)
    return clients, roles


class SyntheticPriorityData(SyntheticKeys):
    """Prioritized FL on Synthetic(alpha, beta): |P| priority devices and non-priority clients with
    label noise and irrelevant data growing with their index (edgefl/data/priority.py)."""

    has_client_roles: ClassVar[bool] = True

    name: Literal["synthetic_priority"] = Field(
        "synthetic_priority", description="Synthetic(alpha, beta) priority devices plus noisy non-priority clients."
    )
    priority_clients: Optional[PositiveInt] = Field(None, description="|P| priority clients; default: N/2 (floor).")
    noise_skew: float = Field(1.5, gt=0, description="Noise level of non-priority client j is (j/(|Q|-1))^(1/skew).")
    label_noise: float = Field(0.5, ge=0, le=1, description="Label-flip probability at noise level 1.")
    irrelevant_fraction: float = Field(1.0, ge=0, description="Irrelevant points per clean point at noise level 1.")

    @model_validator(mode="after")
    def _priority_count(self):
        _check_priority_count(self)
        return self

    def build(self, seed: int) -> FederatedData:
        n = self.num_clients
        num_p = n // 2 if self.priority_clients is None else self.priority_clients
        clients, roles = synthetic_priority_clients(
            n,
            num_p,
            np.random.default_rng(seed_streams(seed)[0]),
            alpha=self.synthetic_alpha,
            beta=self.synthetic_beta,
            dim=self.synthetic_dim,
            num_classes=self.synthetic_classes,
            skew=self.noise_skew,
            label_noise=self.label_noise,
            irrelevant_fraction=self.irrelevant_fraction,
            samples_per_client=self.samples_per_client,
        )
        return FederatedData(
            name="synthetic_priority",
            num_classes=self.synthetic_classes,
            input_shape=(self.synthetic_dim,),
            source=(
                f"Synthetic({self.synthetic_alpha:g}, {self.synthetic_beta:g}) with {num_p} priority devices "
                f"and {n - num_p} non-priority clients (noise skew {self.noise_skew:g}, label noise "
                f"{self.label_noise:g}, irrelevant fraction {self.irrelevant_fraction:g}), 90/10 split per client"
            ),
            client_roles=roles,
            **split_each_client(clients),
        )


def shard_partition(
    labels: np.ndarray, num_clients: int, shards_per_client: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """McMahan et al.: sort by label, cut N * shards equal shards, deal them out at random."""
    num_shards = num_clients * shards_per_client
    size = len(labels) // num_shards
    if size < 1:
        raise DataError(
            f"{len(labels)} training samples cannot make {num_shards} shards "
            f"({num_clients} clients x {shards_per_client}); use fewer clients or shards"
        )
    order = np.argsort(labels, kind="stable")
    shards = [order[i * size : (i + 1) * size] for i in range(num_shards)]
    deal = rng.permutation(num_shards).reshape(num_clients, shards_per_client)
    return [np.concatenate([shards[s] for s in row]) for row in deal]


def choose_priority(
    parts: list[np.ndarray],
    labels: np.ndarray,
    count: int,
    classes: int | None,
    rng: np.random.Generator,
    tries: int = 10000,
) -> np.ndarray:
    """``count`` distinct clients, redrawn until their union holds exactly ``classes`` classes."""
    n = len(parts)
    if not 1 <= count <= n:
        raise DataError(f"data.priority_clients = {count}: expected 1..num_clients ({n})")
    for _ in range(tries):
        chosen = np.sort(rng.choice(n, size=count, replace=False))
        if classes is None or len(np.unique(labels[np.concatenate([parts[c] for c in chosen])])) == classes:
            return chosen
    raise DataError(
        f"no set of {count} clients holds exactly {classes} classes after {tries} draws; change data.priority_classes"
    )


class ImagePriorityData(IdxParams):
    """Prioritized FL on an MNIST-family set: label-sorted shards dealt to clients, |P| priority
    clients together holding exactly ``priority_classes`` classes (edgefl/data/priority.py)."""

    has_client_roles: ClassVar[bool] = True

    name: Literal["image_priority"] = Field(
        "image_priority", description="MNIST-family shards with priority clients holding few classes."
    )
    image_dataset: ImageName = Field("mnist", description="Which IDX data set (in data.dir).")
    priority_clients: PositiveInt = Field(2, description="|P| priority clients.")
    priority_classes: Optional[PositiveInt] = Field(
        4, description="The priority clients together hold exactly this many classes."
    )
    shards_per_client: PositiveInt = Field(2, description="Label-sorted shards per client.")
    test_per_client: Optional[PositiveInt] = Field(None, description="Per-client test size; default: proportional.")

    @model_validator(mode="after")
    def _priority_count(self):
        _check_priority_count(self)
        return self

    def build(self, seed: int) -> FederatedData:
        import torch

        split_rng, partition_rng, role_rng, test_rng = (np.random.default_rng(s) for s in seed_streams(seed))
        n, dataset, shards = self.num_clients, self.image_dataset, self.shards_per_client
        train_images, train_labels, test_images, test_labels, split = load_pools(
            dataset, self.dir, self.test_fraction, split_rng
        )
        if split is None:
            source = f"{dataset}: train split for training, t10k for testing"
        else:
            source = f"{dataset}-10k: t10k split only, stratified {split[0]}/{split[1]}"
        parts = shard_partition(train_labels, n, shards, partition_rng)
        chosen = choose_priority(parts, train_labels, self.priority_clients, self.priority_classes, role_rng)
        roles = np.full(n, NON_PRIORITY)
        roles[chosen] = PRIORITY
        sizes = np.array([len(p) for p in parts])
        test_sizes = (
            proportional_test_sizes(sizes, len(test_labels))
            if self.test_per_client is None
            else np.full(n, self.test_per_client, dtype=np.int64)
        )
        test_parts = client_test_sets(train_labels, parts, test_labels, test_sizes, test_rng, NUM_CLASSES)
        train_order, test_order = np.concatenate(parts), np.concatenate(test_parts)
        global_test_x = images_to_tensor(test_images)
        return FederatedData(
            name="image_priority",
            num_classes=NUM_CLASSES,
            input_shape=IMAGE_SHAPE,
            train_x=images_to_tensor(train_images[train_order]),
            train_y=torch.from_numpy(train_labels[train_order].astype(np.int64)),
            train_offsets=client_offsets(sizes),
            test_x=global_test_x.index_select(0, torch.from_numpy(test_order)),  # (pixel by pixel: the same bits)
            test_y=torch.from_numpy(test_labels[test_order].astype(np.int64)),
            test_offsets=client_offsets([len(p) for p in test_parts]),
            source=(
                f"{source}; {n * shards} label-sorted shards of {sizes[0] // shards}, "
                f"{shards} per client; priority clients {chosen.tolist()}"
            ),
            global_test_x=global_test_x,
            global_test_y=torch.from_numpy(test_labels.astype(np.int64)),
            client_roles=roles,
        )
