"""Statistical-recovery data sets of
"Fast Composite Optimization and Statistical Recovery in Federated Learning" (Sec. 3.1 and 4).

Sparse linear regression (``sparse_regression``):
    K clients, each with a shift delta_k ~ N(0, I_p); covariates x = delta_k + z with
    z ~ N(0, Sigma), Sigma_ij = 0.5^|i-j| (drawn as the AR(1) chain z_1 = e_1,
    z_j = 0.5 z_{j-1} + sqrt(0.75) e_j); response y = x^T w* + N(0, noise_std^2);
    w* = (1_s, 0_{p-s}). Paper: K = 64, 128 samples each, p = 1024, s = 512.

Low-rank matrix estimation (``low_rank_matrix``):
    K clients, each with its own Z_k (entries N(0, 1)); X = Z_k + A with A entries N(0, 1);
    y = <X, W*> + N(0, noise_std^2); W* = diag(1_r, 0_{side-r}). Paper: 32 x 32, r = 16.
    (The reference code adds one shared matrix to every client; the spec uses a separate Z_k.)

Each client also gets ``test_per_client`` held-out samples from its own law. The ground truth
is returned as ``true_params`` (w* as [p], W* as [side, side]) for the estimation metrics.
Labels are float32 responses; the ``regression`` model (flatten -> Linear(in, 1), MSE) fits them,
and its row-major weight matches X.flatten(), so <X, W> = w . vec(X).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field, PositiveInt, model_validator

from edgefl.data.errors import DataError
from edgefl.data.federated import DataParams, FederatedData, client_offsets, seed_streams


def ar1_gaussian(n: int, dim: int, coef: float, rng: np.random.Generator) -> np.ndarray:
    """n draws of N(0, Sigma) with Sigma_ij = coef^|i-j| via the stationary AR(1) chain. The chain runs along the
    rows of the transposed draws (contiguous, no temporaries): the same arithmetic, element by element, as along
    the columns, in about 60 % of the time."""
    e = np.ascontiguousarray(rng.standard_normal((n, dim)).T)  # e[j]: coordinate j of the n draws
    z = np.empty((dim, n))
    z[0] = e[0]
    scaled = np.sqrt(1.0 - coef**2) * e
    for j in range(1, dim):
        np.multiply(z[j - 1], coef, out=z[j])
        z[j] += scaled[j]
    return np.ascontiguousarray(z.T)


def sparse_regression_clients(
    num_clients: int,
    rng: np.random.Generator,
    *,
    samples: int = 128,
    test_samples: int = 32,
    dim: int = 1024,
    sparsity: int = 512,
    noise_std: float = 1.0,
    shift_std: float = 1.0,
    ar_coef: float = 0.5,
):
    """Per-client (x_train, y_train, x_test, y_test) and w*."""
    if not 0 < sparsity <= dim:
        raise DataError(f"data.regression_sparsity = {sparsity}: expected 1..regression_dim ({dim})")
    w_star = np.concatenate([np.ones(sparsity), np.zeros(dim - sparsity)])
    clients = []
    for _ in range(num_clients):
        shift = rng.normal(0.0, shift_std, dim)
        x = shift + ar1_gaussian(samples + test_samples, dim, ar_coef, rng)
        y = x @ w_star + rng.normal(0.0, noise_std, samples + test_samples)
        clients.append((x[:samples], y[:samples], x[samples:], y[samples:]))
    return clients, w_star


def low_rank_clients(
    num_clients: int,
    rng: np.random.Generator,
    *,
    samples: int = 128,
    test_samples: int = 32,
    side: int = 32,
    rank: int = 16,
    noise_std: float = 1.0,
    shift_std: float = 1.0,
):
    """Per-client (X_train, y_train, X_test, y_test) with X [n, side, side], and W*."""
    if not 0 < rank <= side:
        raise DataError(f"data.matrix_rank = {rank}: expected 1..matrix_side ({side})")
    w_star = np.diag(np.concatenate([np.ones(rank), np.zeros(side - rank)]))
    clients = []
    for _ in range(num_clients):
        z_k = rng.normal(0.0, shift_std, (side, side))
        x = z_k + rng.standard_normal((samples + test_samples, side, side))
        y = np.einsum("nij,ij->n", x, w_star) + rng.normal(0.0, noise_std, samples + test_samples)
        clients.append((x[:samples], y[:samples], x[samples:], y[samples:]))
    return clients, w_star


class RegressionKeys(DataParams):
    """Keys of both recovery problems."""

    samples_per_client: PositiveInt = Field(128, description="Training samples per client.")
    test_per_client: PositiveInt = Field(32, description="Held-out samples per client, from its own law.")
    noise_std: float = Field(1.0, ge=0, description="Response noise std.")

    def estimated_samples(self) -> float:
        return float(self.num_clients * (self.samples_per_client + self.test_per_client))

    def _federated(self, clients, truth: np.ndarray, shape: tuple[int, ...], source: str) -> FederatedData:
        import torch

        def cat(i):
            return torch.from_numpy(np.concatenate([c[i] for c in clients]).astype(np.float32))

        test_x, test_y = cat(2), cat(3)
        return FederatedData(
            name=self.name,
            num_classes=1,
            input_shape=shape,
            train_x=cat(0),
            train_y=cat(1),
            train_offsets=client_offsets([len(c[1]) for c in clients]),
            test_x=test_x,
            test_y=test_y,
            test_offsets=client_offsets([len(c[3]) for c in clients]),
            source=source,
            global_test_x=test_x,
            global_test_y=test_y,
            true_params=torch.from_numpy(truth.astype(np.float32)),
        )


class SparseRegressionData(RegressionKeys):
    """Sparse linear regression (Fast-FedDA §5): y = x^T w* + noise, w* = (1_s, 0_{p-s}); clients differ
    by a shift of their covariates."""

    name: Literal["sparse_regression"] = Field("sparse_regression", description="Sparse linear regression.")
    regression_dim: PositiveInt = Field(1024, description="Number of features p.")
    regression_sparsity: PositiveInt = Field(512, description="Nonzeros s of w* = (1_s, 0); at most regression_dim.")

    def layout(self) -> tuple[tuple[int, ...], int]:
        return (self.regression_dim,), 1

    @model_validator(mode="after")
    def _sparsity_fits(self):
        if self.regression_sparsity > self.regression_dim:
            raise ValueError(
                f"data.regression_sparsity = {self.regression_sparsity}: expected 1..regression_dim "
                f"({self.regression_dim})"
            )
        return self

    def build(self, seed: int) -> FederatedData:
        samples, tests, dim = self.samples_per_client, self.test_per_client, self.regression_dim
        clients, truth = sparse_regression_clients(
            self.num_clients,
            np.random.default_rng(seed_streams(seed)[0]),
            samples=samples,
            test_samples=tests,
            dim=dim,
            sparsity=self.regression_sparsity,
            noise_std=self.noise_std,
        )
        return self._federated(
            clients,
            truth,
            (dim,),
            (
                f"sparse linear regression: p = {dim}, s = {self.regression_sparsity}, {samples} train + {tests} test "
                f"samples per client, client shifts N(0, I), AR(1) 0.5 covariance, noise std {self.noise_std:g}"
            ),
        )


class LowRankMatrixData(RegressionKeys):
    """Low-rank matrix estimation (Fast-FedDA §5): y = <X, W*> + noise, W* = diag(1_r, 0); clients differ
    by their own shift Z_k of X."""

    name: Literal["low_rank_matrix"] = Field("low_rank_matrix", description="Low-rank matrix estimation.")
    matrix_side: PositiveInt = Field(32, description="Side of the square W*.")
    matrix_rank: PositiveInt = Field(16, description="Rank r of W* = diag(1_r, 0); at most matrix_side.")

    def layout(self) -> tuple[tuple[int, ...], int]:
        return (self.matrix_side, self.matrix_side), 1

    @model_validator(mode="after")
    def _rank_fits(self):
        if self.matrix_rank > self.matrix_side:
            raise ValueError(f"data.matrix_rank = {self.matrix_rank}: expected 1..matrix_side ({self.matrix_side})")
        return self

    def build(self, seed: int) -> FederatedData:
        samples, tests, side, rank = self.samples_per_client, self.test_per_client, self.matrix_side, self.matrix_rank
        clients, truth = low_rank_clients(
            self.num_clients,
            np.random.default_rng(seed_streams(seed)[0]),
            samples=samples,
            test_samples=tests,
            side=side,
            rank=rank,
            noise_std=self.noise_std,
        )
        return self._federated(
            clients,
            truth,
            (side, side),
            (
                f"low-rank matrix estimation: {side} x {side}, rank {rank}, {samples} train + {tests} test "
                f"samples per client, client shifts Z_k, noise std {self.noise_std:g}"
            ),
        )
