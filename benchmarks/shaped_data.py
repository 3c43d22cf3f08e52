"""Workloads of the benchmark data sets' shapes, where only their sizes matter (a data plug-in, docs/extending.md).

``shaped_data:Images``: CIFAR-shaped (3 x 32 x 32, 10 classes) or FEMNIST-shaped (1 x 28 x 28, 62 classes)
images; ``shaped_data:Characters``: Shakespeare-shaped sequences of 80 character indices, 80 classes. Each
class has its own mean pattern plus Gaussian noise, so a model can learn them; every client holds the same
number of samples, labels i.i.d. uniform. For the speed and memory benchmarks (benchmarks/models.py) and the
model-size study (experiments/model_size.py): the compute, memory and message sizes are those of the real data
sets' models; the learning curves are not the real data sets'.
"""

from __future__ import annotations

import numpy as np
import torch
from pydantic import Field

from edgefl.data import DataParams, FederatedData


class Images(DataParams):
    samples_per_client: int = Field(100, gt=0, le=100_000, description="Training samples per client.")
    test_per_client: int = Field(20, gt=0, le=100_000, description="Test samples per client.")
    channels: int = Field(3, gt=0, le=16, description="Image channels (CIFAR: 3, FEMNIST: 1).")
    side: int = Field(32, ge=4, le=512, description="Image side in pixels (CIFAR: 32, FEMNIST: 28).")
    classes: int = Field(10, ge=2, le=1000, description="Classes (CIFAR-10: 10, FEMNIST: 62).")
    noise: float = Field(1.0, gt=0, le=100, description="Std of the pixels around their class's pattern.")

    def layout(self):
        return (self.channels, self.side, self.side), self.classes

    def estimated_samples(self):
        return float(self.num_clients * (self.samples_per_client + self.test_per_client))

    def build(self, seed: int) -> FederatedData:
        rng = np.random.default_rng([seed, 0x5A3ED])
        shape = (self.channels, self.side, self.side)
        patterns = rng.normal(0.0, 1.0, size=(self.classes, *shape)).astype(np.float32)

        def draw(per_client: int):
            n = per_client * self.num_clients
            y = rng.integers(0, self.classes, size=n)
            x = patterns[y] + self.noise * rng.standard_normal((n, *shape), dtype=np.float32)
            return torch.from_numpy(x), torch.from_numpy(y), np.arange(self.num_clients + 1) * per_client

        return federated(self, shape, draw, f"synthetic images {shape}, {self.classes} classes")


class Characters(DataParams):
    samples_per_client: int = Field(100, gt=0, le=100_000, description="Training sequences per client.")
    test_per_client: int = Field(20, gt=0, le=100_000, description="Test sequences per client.")
    length: int = Field(80, gt=0, le=10_000, description="Characters per sequence (LEAF Shakespeare: 80).")
    classes: int = Field(80, ge=2, le=1000, description="Characters in the vocabulary (LEAF: 80).")

    def layout(self):
        return (self.length,), self.classes

    def estimated_samples(self):
        return float(self.num_clients * (self.samples_per_client + self.test_per_client))

    def build(self, seed: int) -> FederatedData:
        rng = np.random.default_rng([seed, 0xC4A25])

        def draw(per_client: int):
            n = per_client * self.num_clients
            x = rng.integers(0, self.classes, size=(n, self.length))
            y = x[:, -1]  # a learnable next character: the last one again
            return (
                torch.from_numpy(x.astype(np.float32)),
                torch.from_numpy(y.astype(np.int64)),
                np.arange(self.num_clients + 1) * per_client,
            )

        return federated(self, (self.length,), draw, f"synthetic sequences of {self.length}, {self.classes} classes")


def federated(params, shape: tuple[int, ...], draw, source: str) -> FederatedData:
    """The clients' training and test samples, ``draw(per_client)`` each."""
    train_x, train_y, train_offsets = draw(params.samples_per_client)
    test_x, test_y, test_offsets = draw(params.test_per_client)
    return FederatedData(
        name=params.name,
        num_classes=params.classes,
        input_shape=shape,
        train_x=train_x,
        train_y=train_y,
        train_offsets=train_offsets,
        test_x=test_x,
        test_y=test_y,
        test_offsets=test_offsets,
        source=f"{source} (benchmarks/shaped_data.py)",
    )
