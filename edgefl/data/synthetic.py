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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Iterator, Literal, Optional

import numpy as np
from pydantic import Field, PositiveInt

from edgefl.data.errors import DataError
from edgefl.data.federated import (
    DataParams,
    FederatedData,
    empty_tensor_array,
    seed_streams,
    split_each_client_chunks,
)

# Laws and samples are drawn in chunks of clients of about this many float64 values (8 MiB), into buffers reused from
# chunk to chunk: 10^6 clients need neither every law at once (W_k: 600 values a client at 60 features and 10 classes)
# nor a list of arrays each, and each chunk's passes (draw, scale, shift, labels, copy out) run in the cache on memory
# already mapped (a fresh 64 MiB array a chunk cost its page faults every time: over 32 MiB, malloc maps anew).
CHUNK_VALUES = 1 << 20
# Laws up to this many bytes are kept from their first draw (all of 12,520 clients at 60 x 10), more are drawn again
# (the samples' build keeps as many as the samples will take: synthetic_samples); those kept are held in blocks of
# BLOCK_VALUES or more.
KEEP_LAWS_BYTES = 1 << 26
BLOCK_VALUES = 1 << 23
PAGE_BYTES = 4096  # at most a page (4 KiB on x86-64, 4 or 16 KiB on arm64): one value written a page maps them all


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


def law_inputs(noise: np.ndarray, variances: np.ndarray, means: np.ndarray) -> np.ndarray:
    """x = v_k + noise · sqrt(Sigma), in place of ``noise`` (standard normal [..., dim], float64); ``means`` v_k
    broadcast against it. Element by element, so the same numbers whatever the batching."""
    noise *= np.sqrt(variances)
    noise += means
    return noise


def law_labels(x: np.ndarray, weights: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """y = argmax(x W_k + b_k) (argmax softmax = argmax logits) of K devices' inputs x [K, n, dim] (float64):
    int64 [K, n]. One matrix product per device (numpy's matmul over the stack), as many as it has samples."""
    logits = x @ weights
    logits += bias[:, None, :]
    return np.argmax(logits, axis=2).astype(np.int64, copy=False)


def sample_laws(
    means: np.ndarray, variances: np.ndarray, weights: np.ndarray, bias: np.ndarray, noise: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Samples of K devices' laws, n each: x = v_k + noise · sqrt(Sigma) (float32 [K, n, dim]) and y = argmax(x W_k
    + b_k) (int64 [K, n]); ``noise``: standard normal [K, n, dim], overwritten."""
    x = law_inputs(noise, variances, means[:, None, :])
    return x.astype(np.float32), law_labels(x, weights, bias)


def synthetic_covariance_diagonal(dim: int) -> np.ndarray:
    """Sigma_jj = j^-1.2 for j = 1..dim."""
    return np.arange(1, dim + 1, dtype=np.float64) ** -1.2


def synthetic_sample_counts(num_clients: int, rng: np.random.Generator, max_samples: int | None = 1000) -> np.ndarray:
    """n_k = floor(LogNormal(4, 2)) + 50, capped at max_samples (None: no cap)."""
    counts = np.floor(rng.lognormal(4.0, 2.0, num_clients)).astype(np.int64) + 50
    if max_samples is not None:
        counts = np.minimum(counts, max_samples)
    return counts


def _first_touch(memory: np.ndarray | None) -> None:
    """Writes one value a page of ``memory`` (1-D; None: nothing), so that the kernel maps its pages now."""
    if memory is not None:
        memory[:: PAGE_BYTES // memory.itemsize] = 0


class SyntheticLaws:
    """Every device's law (v_k, W_k, b_k), drawn from ``rng`` as the rule says (u and B for all devices, all v_k,
    then W_k, b_k device after device: v_k = B_k + 1.0 · z, W_k and b_k = u_k + 1.0 · z, the numbers
    ``rng.normal(loc, 1.0, shape)`` gives), in chunks of clients (:meth:`chunk`). The first chunks' draws are kept,
    up to ``keep_bytes``; of the others only where their draws start in ``rng``'s stream, to draw them again when
    asked (10^6 devices' laws are 5.4 GB). ``rng`` is left after every law's draws (where the samples' start)."""

    def __init__(
        self,
        num_clients: int,
        alpha: float,
        beta: float,
        rng: np.random.Generator,
        dim: int,
        classes: int,
        keep_bytes: float = KEEP_LAWS_BYTES,
    ):
        self.dim, self.classes = dim, classes
        self.variances = synthetic_covariance_diagonal(dim)
        self.u = rng.normal(0.0, alpha, num_clients)
        self.b_mean = rng.normal(0.0, beta, num_clients)
        row = dim * classes + classes + dim  # a law's values: v_k, then W_k and b_k
        self.size = max(1, CHUNK_VALUES // row)
        self.bounds = [(lo, min(lo + self.size, num_clients)) for lo in range(0, num_clients, self.size)]
        kept = len(self.bounds) if num_clients * row * 8 <= keep_bytes else int(keep_bytes // (self.size * row * 8))
        # Kept chunks live in blocks of BLOCK_VALUES or more, memory that the allocator maps for each block and
        # unmaps when the block's last chunk is let go (smaller arrays may stay in malloc's heap once freed).
        per_block = max(1, BLOCK_VALUES // (self.size * row))
        store: list[tuple[np.ndarray, np.ndarray]] = []
        for first in range(0, kept, per_block):
            block = self.bounds[first : min(first + per_block, kept)]
            flat = empty_tensor_array(((block[-1][1] - block[0][0]) * row,), np.float64)
            for lo, hi in block:
                at = (lo - block[0][0]) * row
                store.append((flat[at : at + (hi - lo) * dim], flat[at + (hi - lo) * dim : at + (hi - lo) * row]))
        rows = min(self.size, num_clients) if kept < len(self.bounds) else 0
        # the buffers that draws not kept go into (the first pass only advances rng), reused by every chunk
        self._mean_buffer = np.empty(rows * dim)
        self._law_buffer = np.empty(rows * (row - dim))
        self._replay = np.random.Generator(type(rng.bit_generator)())
        # every v_k, then every (W_k, b_k): (shape, into, keep) in the stream's order
        draws = [
            ((hi - lo, dim), store[j][0] if j < kept else self._mean_buffer, j < kept)
            for j, (lo, hi) in enumerate(self.bounds)
        ]
        draws += [
            ((hi - lo, row - dim), store[j][1] if j < kept else self._law_buffer, j < kept)
            for j, (lo, hi) in enumerate(self.bounds)
        ]
        # A thread maps the next kept draw's memory (its first touch: about 2 s of this pass's 12 s at 10^6 devices)
        # while this one draws into memory mapped before; each draw waits until its own memory is mapped.
        kept_memory = [into if keep else None for _, into, keep in draws] + [None]  # (None: a buffer, mapped already)
        drawn = []
        with ThreadPoolExecutor(1, thread_name_prefix="edgefl-synthetic-touch") as toucher:
            mapped = toucher.submit(_first_touch, kept_memory[0])
            for i, (shape, into, keep) in enumerate(draws):
                mapped.result()
                mapped = toucher.submit(_first_touch, kept_memory[i + 1])
                drawn.append(self._draw(rng, shape, into, keep))
        self._means, self._laws = drawn[: len(self.bounds)], drawn[len(self.bounds) :]

    @staticmethod
    def _draw(rng: np.random.Generator, shape: tuple[int, int], into: np.ndarray, keep: bool):
        """Standard normals of ``shape`` from ``rng``, drawn into ``into``: the array if ``keep``, else where they
        start (to draw them again; ``into`` is then a buffer that the next draw overwrites)."""
        state = None if keep else rng.bit_generator.state
        drawn = rng.standard_normal(out=into[: shape[0] * shape[1]].reshape(shape))
        return drawn if keep else (state, shape)

    def _again(self, store: list, j: int, buffer: np.ndarray | None) -> np.ndarray:
        """Chunk j's standard normals of ``store``: with ``buffer``, those kept (let go: used once) or drawn again
        into it; else a copy of those kept or a new array drawn again."""
        drawn = store[j]
        if isinstance(drawn, np.ndarray):
            if buffer is None:
                return drawn.copy()
            store[j] = None
            return drawn
        state, shape = drawn
        self._replay.bit_generator.state = state
        if buffer is None:
            return self._replay.standard_normal(shape)
        return self._replay.standard_normal(out=buffer[: shape[0] * shape[1]].reshape(shape))

    def chunk(self, j: int, reuse: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Chunk j's (clients bounds[j]) v_k [K, dim], W_k [K, dim, classes] and b_k [K, classes]. ``reuse``: each
        chunk asked for once, its laws computed where they were kept (then let go) or in buffers that the next call
        overwrites; else new arrays."""
        lo, hi = self.bounds[j]
        # loc + 1.0 · z as rng.normal(loc, 1.0) computes it: 1.0 · z is z, so the sum alone gives the same numbers
        means = self._again(self._means, j, self._mean_buffer if reuse else None)
        means += self.b_mean[lo:hi, None]
        z = self._again(self._laws, j, self._law_buffer if reuse else None)
        z += self.u[lo:hi, None]
        cut = self.dim * self.classes
        return means, z[:, :cut].reshape(hi - lo, self.dim, self.classes), z[:, cut:]


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
    the chunk's clients [K], x float64 [sum n_k, dim], y int64 [sum n_k]), client after client (drawn as the
    chunks are asked for; x is a buffer that the next chunk overwrites: copy what is kept, e.g. as float32, the
    data's type). ``samples_per_client`` fixes n_k for every client instead of the log-normal law."""
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
    # The laws kept from their first draw take at most what the samples will (float32 x, int64 y), and each chunk's
    # are let go as its samples are drawn: the build's peak stays about that of the samples.
    sample_bytes = int(counts.sum()) * (dim * 4 + 8)
    laws = SyntheticLaws(num_clients, alpha, beta, rng, dim, num_classes, max(KEEP_LAWS_BYTES, sample_bytes))
    return counts, _sample_chunks(counts, laws, rng)


def _sample_groups(counts: np.ndarray, bounds: list[tuple[int, int]], rows: int) -> list[tuple[int, int, int, int]]:
    """The groups of clients whose samples' noise is drawn in one call: (law chunk j, its clients a..b, the group's
    samples), as many clients of one chunk as ``rows`` samples hold (one client at least)."""
    groups = []
    for j, (lo, hi) in enumerate(bounds):
        n = counts[lo:hi]
        ends = np.cumsum(n)
        a = 0
        while a < hi - lo:
            start = ends[a] - n[a]
            b = max(a + 1, int(np.searchsorted(ends, start + rows, side="right")))
            groups.append((j, a, b, int(ends[b - 1] - start)))
            a = b
    return groups


def _sample_chunks(counts: np.ndarray, laws: SyntheticLaws, rng: np.random.Generator):
    """The samples of :func:`synthetic_samples`, drawn group of clients after group (about CHUNK_VALUES noise values
    a group, one client at least): the same draws in the same order as client after client. A thread draws the next
    group's noise (numpy draws without the GIL) while this one computes a group's inputs and labels and the caller
    copies them out, into two buffers used in turn: the draws, a stream that one thread must take in order, are
    most of the build's time, and the rest now runs beside them."""
    dim = laws.dim
    values = max(CHUNK_VALUES, int(counts.max()) * dim)
    groups = _sample_groups(counts, laws.bounds, values // dim)
    buffers = (np.empty(values), np.empty(values))

    def noise(i: int) -> np.ndarray:  # group i's standard normals, into buffer i % 2
        rows = groups[i][3]
        return rng.standard_normal(out=buffers[i % 2][: rows * dim].reshape(rows, dim))

    with ThreadPoolExecutor(1, thread_name_prefix="edgefl-synthetic-noise") as drawer:
        ahead = drawer.submit(noise, 0)
        for i, (j, a, b, rows) in enumerate(groups):
            x = ahead.result()
            if i + 1 < len(groups):  # into the other buffer, the one the caller has copied out
                ahead = drawer.submit(noise, i + 1)
            if a == 0:
                means, weights, bias = laws.chunk(j, reuse=True)
                n = counts[laws.bounds[j][0] : laws.bounds[j][1]]
                ends = np.cumsum(n)
            start = ends[a] - n[a]
            if n[a] == n[b - 1] and (n[a:b] == n[a]).all():  # the same n for all: one stacked product
                x = law_inputs(x.reshape(b - a, int(n[a]), dim), laws.variances, means[a:b, None, :])
                y = law_labels(x, weights[a:b], bias[a:b]).reshape(-1)
            else:
                law_inputs(x, laws.variances, np.repeat(means[a:b], n[a:b], axis=0))
                y = np.empty(rows, dtype=np.int64)
                for k, (first, last) in enumerate(zip(ends[a:b] - n[a:b] - start, ends[a:b] - start)):
                    y[first:last] = law_labels(x[None, first:last], weights[a + k : a + k + 1], bias[a + k : a + k + 1])
            yield n[a:b], x.reshape(rows, dim), y


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
        clients += list(zip(np.split(x.astype(np.float32), cuts), np.split(y, cuts)))
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
        laws kept from their first draw beyond the samples' size (they are kept up to the larger of that and
        KEEP_LAWS_BYTES, and let go as the samples fill the result), a chunk's laws drawn again (float64), and the
        two buffers of a group's samples (one drawn while the other is used; float64, with as much again for the means
        repeated per sample or the split's copies)."""
        dim, classes = self.synthetic_dim, self.synthetic_classes
        laws = self.num_clients * (dim * classes + dim + classes) * 8
        samples = self.estimated_samples() * (dim * 4 + 8)
        buffers = CHUNK_VALUES * 8 + max(CHUNK_VALUES, (self.samples_per_client or 1000) * dim) * 8 * 3
        return max(0.0, min(laws, KEEP_LAWS_BYTES) - samples) + buffers

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
            **split_each_client_chunks(counts, chunks, (self.synthetic_dim,), np.float32),
        )
