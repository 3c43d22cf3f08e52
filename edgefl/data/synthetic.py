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
from typing import Iterator, Literal, Optional

import numpy as np
from pydantic import Field, PositiveInt

from edgefl.data.errors import DataError
from edgefl.data.federated import DataParams, FederatedData, seed_streams, split_each_client_chunks

# Laws and samples are drawn in chunks of clients of about this many float64 values, so that 10^6 clients need
# neither every law at once (W_k: 600 values a client at 60 features and 10 classes) nor a list of arrays each.
CHUNK_VALUES = 1 << 23
KEEP_LAWS_BYTES = CHUNK_VALUES * 8  # laws up to a chunk's size are kept from their first draw; larger: drawn again


@dataclass(frozen=True)
class SyntheticDevice:
    """One device's data law: inputs ~ N(mean, diag(variances)), labels = argmax(x W + b)."""

    mean: np.ndarray  # v_k, [dim]
    variances: np.ndarray  # diag of Sigma, [dim]
    weights: np.ndarray  # W_k, [dim, num_classes]
    bias: np.ndarray  # b_k, [num_classes]

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """n samples: x float32 [n, dim], y int64 [n]."""
        x, y = sample_laws(
            self.mean[None],
            self.variances,
            self.weights[None],
            self.bias[None],
            rng.standard_normal((1, n, len(self.mean))),
        )
        return x[0], y[0]


def sample_laws(
    means: np.ndarray, variances: np.ndarray, weights: np.ndarray, bias: np.ndarray, noise: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Samples of K devices' laws, n each: x = v_k + noise · sqrt(Sigma) (float32 [K, n, dim]) and y = argmax(x W_k
    + b_k) (int64 [K, n]; argmax softmax = argmax logits); ``noise``: standard normal [K, n, dim], overwritten."""
    noise *= np.sqrt(variances)  # in place (the caller's draw): x = v_k + noise · sqrt(Sigma), element by element
    x = np.add(noise, means[:, None, :], out=noise)
    y = np.argmax(x @ weights + bias[:, None, :], axis=2)
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


class SyntheticLaws:
    """Every device's law (v_k, W_k, b_k), drawn from ``rng`` as the rule says (u and B for all devices, all v_k,
    then W_k, b_k device after device: v_k = B_k + 1.0 · z, W_k and b_k = u_k + 1.0 · z, the numbers
    ``rng.normal(loc, 1.0, shape)`` gives), in chunks of clients (:meth:`chunk`). Large populations keep only
    where each chunk's draws start in ``rng``'s stream and draw them again when asked, so that 10^6 devices need
    no 5 GB of laws; ``rng`` is left after every law's draws either way (where the samples' draws start)."""

    def __init__(self, num_clients: int, alpha: float, beta: float, rng: np.random.Generator, dim: int, classes: int):
        self.dim, self.classes = dim, classes
        self.variances = synthetic_covariance_diagonal(dim)
        self.u = rng.normal(0.0, alpha, num_clients)
        self.b_mean = rng.normal(0.0, beta, num_clients)
        self.size = max(1, CHUNK_VALUES // (dim * classes + classes + dim))
        self.bounds = [(lo, min(lo + self.size, num_clients)) for lo in range(0, num_clients, self.size)]
        keep = num_clients * (dim * classes + classes + dim) * 8 <= KEEP_LAWS_BYTES
        self._replay = np.random.Generator(type(rng.bit_generator)())
        self._means = [self._draw(rng, (hi - lo, dim), keep) for lo, hi in self.bounds]
        self._laws = [self._draw(rng, (hi - lo, dim * classes + classes), keep) for lo, hi in self.bounds]

    @staticmethod
    def _draw(rng: np.random.Generator, shape: tuple[int, int], keep: bool):
        """Standard normals of ``shape`` from ``rng``: the array if ``keep``, else where they start (to draw again)."""
        state = None if keep else rng.bit_generator.state
        z = rng.standard_normal(shape)
        return z if keep else (state, shape)

    def _again(self, drawn) -> np.ndarray:
        if isinstance(drawn, np.ndarray):
            return drawn
        state, shape = drawn
        self._replay.bit_generator.state = state
        return self._replay.standard_normal(shape)

    def chunk(self, j: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Chunk j's (clients bounds[j]) v_k [K, dim], W_k [K, dim, classes] and b_k [K, classes]."""
        lo, hi = self.bounds[j]
        # loc + 1.0 · z as rng.normal(loc, 1.0) computes it: 1.0 · z is z, so the sum alone gives the same numbers
        means = self.b_mean[lo:hi, None] + self._again(self._means[j])
        z = self._again(self._laws[j])
        u = self.u[lo:hi, None]
        cut = self.dim * self.classes
        return means, (u + z[:, :cut]).reshape(hi - lo, self.dim, self.classes), u + z[:, cut:]


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
    laws = SyntheticLaws(num_clients, alpha, beta, rng, dim, num_classes)
    devices = []
    for j in range(len(laws.bounds)):
        means, weights, bias = laws.chunk(j)
        devices += [SyntheticDevice(m, laws.variances, w, b) for m, w, b in zip(means, weights, bias)]
    return devices


def synthetic_samples(
    num_clients: int,
    alpha: float,
    beta: float,
    rng: np.random.Generator,
    *,
    dim: int = 60,
    num_classes: int = 10,
    samples_per_client: int | None = None,
    max_samples: int | None = 1000,
) -> tuple[np.ndarray, Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """Every client's Synthetic(alpha, beta) sample count n_k [N] and samples, chunk of clients after chunk: (n_k of
    the chunk's clients [K], x float32 [sum n_k, dim], y int64 [sum n_k]), client after client (drawn as the
    chunks are asked for). ``samples_per_client`` fixes n_k for every client instead of the log-normal law."""
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
    laws = SyntheticLaws(num_clients, alpha, beta, rng, dim, num_classes)

    def chunks() -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        for j, (lo, hi) in enumerate(laws.bounds):
            means, weights, bias = laws.chunk(j)
            n = counts[lo:hi]
            if samples_per_client is not None:  # the same n for all: the chunk's samples in sub-chunks of clients
                step = max(1, CHUNK_VALUES // (samples_per_client * dim))
                for a in range(0, hi - lo, step):
                    b = min(a + step, hi - lo)
                    noise = rng.standard_normal((b - a, samples_per_client, dim))
                    x, y = sample_laws(means[a:b], laws.variances, weights[a:b], bias[a:b], noise)
                    yield n[a:b], x.reshape(-1, dim), y.reshape(-1)
            else:
                for k in range(hi - lo):
                    x, y = sample_laws(
                        means[k : k + 1],
                        laws.variances,
                        weights[k : k + 1],
                        bias[k : k + 1],
                        rng.standard_normal((1, int(n[k]), dim)),
                    )
                    yield n[k : k + 1], x[0], y[0]

    return counts, chunks()


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
    """Each client's full Synthetic(alpha, beta) sample set: x float32 [n_k, dim], y int64 [n_k]
    (:func:`synthetic_samples`, a list of arrays per client). The caller splits train and test."""
    clients = []
    _, chunks = synthetic_samples(
        num_clients,
        alpha,
        beta,
        rng,
        dim=dim,
        num_classes=num_classes,
        samples_per_client=samples_per_client,
        max_samples=max_samples,
    )
    for n, x, y in chunks:
        cuts = np.cumsum(n)[:-1]
        clients += list(zip(np.split(x, cuts), np.split(y, cuts)))
    return clients


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
        """What generating the data holds per client besides its samples (edgefl.memory): u_k and B_k (float64);
        the laws W_k, v_k, b_k are drawn a chunk of clients at a time (SyntheticLaws), not held for all."""
        return 16.0

    def estimated_working_bytes(self) -> float:
        """What generating the data holds at once besides its result, gone once it is built (edgefl.memory): the
        laws (all, up to a chunk's size; else a chunk's draws and its W_k) and a chunk of samples (the noise in
        float64, x in float32)."""
        dim, classes = self.synthetic_dim, self.synthetic_classes
        laws = self.num_clients * (dim * classes + dim + classes) * 8
        samples = min(self.num_clients * (self.samples_per_client or 1000) * dim, CHUNK_VALUES) * 12
        return (laws if laws <= KEEP_LAWS_BYTES else 2 * CHUNK_VALUES * 8) + samples

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
        counts, chunks = synthetic_samples(
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
            **split_each_client_chunks(counts, chunks, (self.synthetic_dim,)),
        )
