"""The Synthetic(alpha, beta) federated data set of FedProx (Li et al., 2020), also in LEAF.

Rule (papers/fedalign.md, "Synthetic(alpha, beta)"; reference: FedProx's
``data/synthetic_*/generate_synthetic.py``), with d = ``dim`` and C = ``num_classes``:

1. Sigma = diag(j^-1.2), j = 1..d.
2. Per device k: u_k ~ N(0, alpha), B_k ~ N(0, beta) (numpy ``scale``, i.e. standard deviation);
   v_k in R^d elementwise ~ N(B_k, 1); W_k in R^{d x C} and b_k in R^C elementwise ~ N(u_k, 1).
3. n_k = floor(LogNormal(4, 2)) + 50, capped at ``max_samples`` (the reference has no cap;
   fedalign.md recommends 1000); x ~ N(v_k, Sigma); y = argmax softmax(x W_k + b_k).

alpha controls how much the clients' models differ, beta how much their inputs differ.
Samples are i.i.d. within a client, so the reference's shuffle before the 90/10 split changes
nothing in distribution and is left to the caller's split.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgefl.data.errors import DataError


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


def synthetic_sample_counts(
    num_clients: int, rng: np.random.Generator, max_samples: int | None = 1000
) -> np.ndarray:
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
        raise DataError(
            f"synthetic alpha = {alpha}, beta = {beta}: expected both >= 0 (they are standard deviations)"
        )
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
