"""The Synthetic(alpha, beta) federated data set of FedProx (Li et al., 2020), also in LEAF.

Rule ("Utilizing Free Clients in Federated Learning for Focused Model Enhancement",
App. B.2, "Synthetic(alpha, beta)"; reference: FedProx's
``data/synthetic_*/generate_synthetic.py``), with d = ``dim`` and C = ``num_classes``:

1. Sigma = diag(j^-1.2), j = 1..d.
2. Per device k: u_k ~ N(0, alpha), B_k ~ N(0, beta) (numpy ``scale``, i.e. standard deviation);
   v_k in R^d elementwise ~ N(B_k, 1); W_k in R^{d x C} and b_k in R^C elementwise ~ N(u_k, 1).
3. n_k = floor(LogNormal(4, 2)) + 50, capped at ``max_samples`` (the reference has no cap;
   our default cap is 1000); x ~ N(v_k, Sigma); y = argmax softmax(x W_k + b_k).

alpha controls how much the clients' models differ, beta how much their inputs differ.
Samples are i.i.d. within a client, so the reference's shuffle before the 90/10 split changes
nothing in distribution and is left to the caller's split.

The ``synthetic`` data set (:class:`SyntheticData`): each client's own samples, the first
floor(0.9 n_k) for training and the rest (at least 1) for testing; the generator fixes sizes and
class mixes itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Optional

import numpy as np
from pydantic import Field, PositiveInt

from edgefl.data.errors import DataError
from edgefl.data.federated import DataParams, FederatedData, seed_streams, split_each_client


@dataclass(frozen=True)
class SyntheticDevice:
    """One device's data law: inputs ~ N(mean, diag(variances)), labels = argmax(x W + b)."""

    mean: np.ndarray  # v_k, [dim]
    variances: np.ndarray  # diag of Sigma, [dim]
    weights: np.ndarray  # W_k, [dim, num_classes]
    bias: np.ndarray  # b_k, [num_classes]

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """n samples: x float32 [n, dim], y int64 [n]."""
        noise = rng.standard_normal((n, self.mean.shape[0]))
        x = self.mean + noise * np.sqrt(self.variances)
        y = np.argmax(x @ self.weights + self.bias, axis=1)  # argmax softmax = argmax logits
        return x.astype(np.float32), y.astype(np.int64)


def synthetic_covariance_diagonal(dim: int) -> np.ndarray:
    """Sigma_jj = j^-1.2 for j = 1..dim."""
    return np.arange(1, dim + 1, dtype=np.float64) ** -1.2


def synthetic_sample_counts(num_clients: int, rng: np.random.Generator, max_samples: int | None = 1000) -> np.ndarray:
    """n_k = floor(LogNormal(4, 2)) + 50, capped at max_samples (None: no cap)."""
    counts = np.floor(rng.lognormal(4.0, 2.0, num_clients)).astype(np.int64) + 50
    if max_samples is not None:
        counts = np.minimum(counts, max_samples)
    return counts


def synthetic_devices(
    num_clients: int,
    alpha: float,
    beta: float,
    rng: np.random.Generator,
    *,
    dim: int = 60,
    num_classes: int = 10,
) -> list[SyntheticDevice]:
    """Draw each device's (v_k, W_k, b_k): u and B for all devices, all v_k, then W_k, b_k per device."""
    variances = synthetic_covariance_diagonal(dim)
    u = rng.normal(0.0, alpha, num_clients)
    b_mean = rng.normal(0.0, beta, num_clients)
    means = [rng.normal(b_mean[k], 1.0, dim) for k in range(num_clients)]
    devices = []
    for k in range(num_clients):
        weights = rng.normal(u[k], 1.0, (dim, num_classes))
        bias = rng.normal(u[k], 1.0, num_classes)
        devices.append(SyntheticDevice(means[k], variances, weights, bias))
    return devices


def synthetic_alpha_beta(
    num_clients: int,
    alpha: float,
    beta: float,
    rng: np.random.Generator,
    *,
    dim: int = 60,
    num_classes: int = 10,
    samples_per_client: int | None = None,
    max_samples: int | None = 1000,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each client's full Synthetic(alpha, beta) sample set: x float32 [n_k, dim], y int64 [n_k].

    ``samples_per_client`` fixes n_k for every client instead of the log-normal law.
    The caller splits train and test.
    """
    if num_clients < 1:
        raise DataError(f"data.num_clients = {num_clients}: expected at least 1")
    if alpha < 0 or beta < 0:
        raise DataError(f"synthetic alpha = {alpha}, beta = {beta}: expected both >= 0 (they are standard deviations)")
    if dim < 1 or num_classes < 2:
        raise DataError(f"synthetic dim = {dim}, classes = {num_classes}: expected dim >= 1 and classes >= 2")
    if samples_per_client is not None:
        if samples_per_client < 1:
            raise DataError(f"samples_per_client = {samples_per_client}: expected at least 1")
        counts = np.full(num_clients, samples_per_client, dtype=np.int64)
    else:
        if max_samples is not None and max_samples < 1:
            raise DataError(f"synthetic max_samples = {max_samples}: expected at least 1 (or None for no cap)")
        counts = synthetic_sample_counts(num_clients, rng, max_samples)
    devices = synthetic_devices(num_clients, alpha, beta, rng, dim=dim, num_classes=num_classes)
    return [device.sample(int(n), rng) for device, n in zip(devices, counts)]


class SyntheticKeys(DataParams):
    """The Synthetic(alpha, beta) keys, shared by ``synthetic`` and ``synthetic_priority``."""

    synthetic_alpha: float = Field(1.0, ge=0, le=1e3, description="Synthetic(alpha, beta): model heterogeneity.")
    synthetic_beta: float = Field(1.0, ge=0, le=1e3, description="Synthetic(alpha, beta): data heterogeneity.")
    synthetic_dim: PositiveInt = Field(60, le=100_000, description="Number of features (at most 10^5).")
    synthetic_classes: int = Field(10, ge=2, le=10_000, description="Number of classes.")
    samples_per_client: Optional[int] = Field(
        None,
        ge=2,
        le=1_000_000,
        description="Fixed samples per client (train + test) instead of floor(LogNormal(4, 2)) + 50 capped at 1000.",
    )

    def layout(self) -> tuple[tuple[int, ...], int]:
        return (self.synthetic_dim,), self.synthetic_classes

    def estimated_bytes_per_client(self) -> float:
        """What generating the data holds per client besides its samples (edgefl.memory): its law, W_k [dim x C],
        v_k [dim] and b_k [C] in float64, kept for every client until all are sampled (synthetic_devices)."""
        dim, classes = self.synthetic_dim, self.synthetic_classes
        return 8.0 * (dim * classes + dim + classes)

    def estimated_samples(self) -> float:
        if self.samples_per_client is not None:
            return float(self.num_clients * self.samples_per_client)
        # E[min(X, c)] for X ~ LogNormal(4, 2), c = 950 (the cap minus the +50):
        # E[X; X < c] + c P(X >= c), E[X; X < c] = exp(mu + s^2/2) Phi((ln c - mu - s^2) / s)
        mu, s, c = 4.0, 2.0, 950.0
        phi = lambda z: 0.5 * (1 + math.erf(z / math.sqrt(2)))  # noqa: E731
        mean_min = math.exp(mu + s * s / 2) * phi((math.log(c) - mu - s * s) / s) + c * (
            1 - phi((math.log(c) - mu) / s)
        )
        return self.num_clients * (50.0 + mean_min)


class SyntheticData(SyntheticKeys):
    """FedProx/LEAF Synthetic(alpha, beta): every client its own data law; per client, the first
    floor(0.9 n_k) samples train and the rest test."""

    name: Literal["synthetic"] = Field("synthetic", description="FedProx Synthetic(alpha, beta).")

    def build(self, seed: int) -> FederatedData:
        clients = synthetic_alpha_beta(
            self.num_clients,
            self.synthetic_alpha,
            self.synthetic_beta,
            np.random.default_rng(seed_streams(seed)[0]),
            dim=self.synthetic_dim,
            num_classes=self.synthetic_classes,
            samples_per_client=self.samples_per_client,
        )
        return FederatedData(
            name="synthetic",
            num_classes=self.synthetic_classes,
            input_shape=(self.synthetic_dim,),
            source=(
                f"Synthetic({self.synthetic_alpha:g}, {self.synthetic_beta:g}), d = {self.synthetic_dim}, "
                f"{self.synthetic_classes} classes, 90/10 split per client"
            ),
            **split_each_client(clients),
        )
