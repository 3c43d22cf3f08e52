"""Splitting a labelled pool among clients: Zipf sizes, Dirichlet class mixes, test sets.

Rules of "Distributionally Robust Federated Learning with Client Drift Minimization"
(Sec. IV-A.2 "Datasets" and IV-A.4 "Data partitioning"). Tags: [P] stated in the paper, [R] a
reconstruction where the paper leaves a step open. Every random
choice comes from the ``numpy.random.Generator`` passed in.
"""

from __future__ import annotations

import math

import numpy as np

from edgefl.data.errors import DataError


def largest_remainder(total: int, weights: np.ndarray) -> np.ndarray:
    """Integers proportional to ``weights`` that sum exactly to ``total`` (Hamilton's method).

    Each entry is floor(total * w_i / sum w); the leftover units go one each to the largest
    fractional parts, ties to the lower index.
    """
    weights = np.asarray(weights, dtype=np.float64)
    if total < 0 or weights.size == 0 or np.any(weights < 0) or weights.sum() <= 0:
        raise ValueError("largest_remainder needs total >= 0 and non-negative weights with a positive sum")
    exact = total * weights / weights.sum()
    counts = np.floor(exact).astype(np.int64)
    leftover = int(total - counts.sum())
    order = np.argsort(-(exact - counts), kind="stable")
    counts[order[:leftover]] += 1
    return counts


def zipf_sizes(total: int, num_clients: int, sigma: float) -> np.ndarray:
    """Client dataset sizes proportional to p_i = i^-sigma / sum_j j^-sigma, summing to ``total``
    (Sec. IV-A.4 [P]). sigma = 0 gives equal sizes.

    Rounding: d_i = floor(d * p_i), then the remainder d - sum_i d_i goes one sample at a time to
    the clients with the largest fractional parts, ties to the lower index (so from client 1
    when the sizes are equal). This is the only rule among the obvious ones that reproduces the
    paper's published sizes (d = 60000, N = 30: client 1 gets 4075 / 6260 / 9210 and client 30
    gets 1469 / 1143 / 852 at sigma = 0.3 / 0.5 / 0.7); handing the remainder out strictly from
    client 1, as step 1 [R] reads, gives 4076 / 1468 at sigma = 0.3 and 851 at 0.7.
    """
    if num_clients < 1:
        raise DataError(f"data.num_clients = {num_clients}: expected at least 1")
    if total < 0:
        raise DataError(f"zipf_sizes total = {total}: expected a non-negative number of samples")
    if sigma < 0 or not math.isfinite(sigma):
        raise DataError(f"data.zipf_sigma = {sigma}: expected a finite value >= 0 (0 gives equal sizes)")
    weights = np.arange(1, num_clients + 1, dtype=np.float64) ** -sigma
    return largest_remainder(total, weights)


def _class_mix(alpha: float, num_classes: int, nonempty: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """q ~ Dir(alpha * 1) for 0 < alpha < inf; alpha = 0: one-hot (Sec. IV-A.4, step 2 [R]).

    For alpha = 0 the class is drawn uniformly among the classes whose pools are not yet empty,
    the limit of Dir(alpha) that keeps one class per client wherever the pools allow.
    """
    if alpha == 0:
        q = np.zeros(num_classes)
        candidates = np.flatnonzero(nonempty) if nonempty.any() else np.arange(num_classes)
        q[rng.choice(candidates)] = 1.0
        return q
    q = rng.dirichlet(np.full(num_classes, alpha))
    if not np.all(np.isfinite(q)) or q.sum() <= 0:  # guard against underflow at tiny alpha
        q = np.zeros(num_classes)
        q[rng.integers(num_classes)] = 1.0
    return q


def _spread_shortfall(counts: np.ndarray, shortfall: int, q: np.ndarray, remaining: np.ndarray) -> np.ndarray:
    """Add ``shortfall`` samples to ``counts``, proportional to q over the non-empty pools.

    ``remaining`` is what is left in each pool after ``counts`` was taken. Where q is zero on every
    non-empty pool (e.g. a one-hot mix), the pools' remaining sizes are the weights instead [R].
    Allocation is repeated until the shortfall is placed, since a pool can run dry again.
    """
    counts = counts.copy()
    remaining = remaining.copy()
    while shortfall > 0:
        available = remaining > 0
        if not available.any():
            raise DataError("the class pools ran out: the requested client sizes exceed the data")
        weights = np.where(available, q, 0.0)
        if weights.sum() <= 0:
            weights = remaining.astype(np.float64)
        extra = np.minimum(largest_remainder(shortfall, weights), remaining)
        counts += extra
        remaining -= extra
        shortfall -= int(extra.sum())
    return counts


def dirichlet_partition(
    labels: np.ndarray,
    sizes: np.ndarray,
    alpha: float,
    rng: np.random.Generator,
    num_classes: int,
) -> list[np.ndarray]:
    """Disjoint index arrays into ``labels``, client i getting exactly ``sizes[i]`` samples.

    Sec. IV-A.4, step 2 [R]: for each client, largest first: q ~ Dir(alpha * 1_C) (alpha = 0:
    one-hot); class counts ~ Multinomial(d_i, q); samples taken without replacement from
    shuffled class pools; when a pool runs short, the client takes what remains and the shortfall
    is spread over its other classes in proportion to q, restricted to non-empty pools.

    alpha = inf (the uniform, IID mix): each client takes a uniformly random subset of what is
    left (class counts ~ multivariate hypergeometric over the remaining pools), i.e. shuffle and
    cut. Every client's mix is then the data set's own, near uniform for the MNIST family. A
    literal uniform q with multinomial counts would drain the pools unevenly (MNIST's classes
    are not equal in size) and leave the last client the leftovers: on MNIST-10k with N = 30,
    one client had 7 classes and a 39% dominant class.
    Each client's indices are returned in shuffled order.
    """
    labels = np.asarray(labels)
    sizes = np.asarray(sizes, dtype=np.int64)
    if alpha < 0 or math.isnan(alpha):
        raise DataError(f"data.dirichlet_alpha = {alpha}: expected >= 0 (0: one class per client, inf: uniform mix)")
    if np.any(sizes < 0):
        raise DataError(f"client sizes {sizes.tolist()}: expected non-negative sizes")
    if int(sizes.sum()) > labels.shape[0]:
        raise DataError(
            f"the clients need {int(sizes.sum())} samples but the pool has {labels.shape[0]}: "
            f"reduce the client sizes or use a larger data set"
        )
    if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
        raise DataError(f"labels lie in [{labels.min()}, {labels.max()}]: expected 0..{num_classes - 1}")

    pools = [rng.permutation(np.flatnonzero(labels == c)) for c in range(num_classes)]
    taken = np.zeros(num_classes, dtype=np.int64)  # how much of each pool is used up
    pool_sizes = np.array([pool.size for pool in pools], dtype=np.int64)
    parts: list[np.ndarray] = [np.empty(0, dtype=np.int64)] * len(sizes)

    for client in np.argsort(-sizes, kind="stable"):
        size = int(sizes[client])
        remaining = pool_sizes - taken
        if math.isinf(alpha):
            counts = rng.multivariate_hypergeometric(remaining, size)
        else:
            q = _class_mix(alpha, num_classes, remaining > 0, rng)
            counts = np.minimum(rng.multinomial(size, q), remaining)
            shortfall = size - int(counts.sum())
            if shortfall > 0:
                counts = _spread_shortfall(counts, shortfall, q, remaining - counts)
        chosen = [pools[c][taken[c] : taken[c] + counts[c]] for c in range(num_classes)]
        taken += counts
        parts[client] = rng.permutation(np.concatenate(chosen)).astype(np.int64)
    return parts


def stratified_sample(labels: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` indices into ``labels`` without replacement, each class represented in proportion
    to its frequency (largest-remainder rounding). Returned sorted."""
    labels = np.asarray(labels)
    if not 0 <= n <= labels.shape[0]:
        raise DataError(f"cannot draw {n} samples from a pool of {labels.shape[0]}")
    classes, class_sizes = np.unique(labels, return_counts=True)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    per_class = largest_remainder(n, class_sizes)  # never exceeds a class size since n <= total
    chosen = [rng.choice(np.flatnonzero(labels == c), size=k, replace=False) for c, k in zip(classes, per_class)]
    return np.sort(np.concatenate(chosen)).astype(np.int64)


def stratified_split(
    labels: np.ndarray, test_fraction: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(train_idx, test_idx): round(n * test_fraction) test indices, stratified by class
    ([R]: for example an 80/20 stratified split). Both sorted, disjoint, covering all."""
    labels = np.asarray(labels)
    if not 0 < test_fraction < 1:
        raise DataError(f"data.test_fraction = {test_fraction}: expected a value strictly between 0 and 1")
    n_test = math.floor(labels.shape[0] * test_fraction + 0.5)
    if not 0 < n_test < labels.shape[0]:
        raise DataError(
            f"data.test_fraction = {test_fraction} of {labels.shape[0]} samples leaves an empty "
            f"train or test part; use more data or a fraction nearer 0.5"
        )
    test_idx = stratified_sample(labels, n_test, rng)
    is_test = np.zeros(labels.shape[0], dtype=bool)
    is_test[test_idx] = True
    return np.flatnonzero(~is_test).astype(np.int64), test_idx


def client_test_indices(
    train_class_hist: np.ndarray, test_labels: np.ndarray, n_test: int, rng: np.random.Generator
) -> np.ndarray:
    """A client's test set: ``n_test`` indices into ``test_labels`` with class counts proportional
    to the client's training class histogram (per-client test sets [R]).

    Counts use largest-remainder rounding to exactly ``n_test``. Within a class, images are drawn
    without replacement when the pool is large enough; otherwise the whole pool is taken and the
    rest drawn with replacement. Classes absent from the test pool are dropped from the histogram
    before rounding. Different clients may share images. Returned in shuffled order.
    """
    hist = np.asarray(train_class_hist, dtype=np.float64)
    test_labels = np.asarray(test_labels)
    if n_test < 1:
        raise DataError(f"data.test_per_client = {n_test}: expected at least 1")
    if hist.ndim != 1 or np.any(hist < 0) or hist.sum() <= 0:
        raise DataError("a client's training class histogram must be non-negative with at least one sample")
    present = np.bincount(test_labels, minlength=hist.size)[: hist.size] > 0
    hist = np.where(present, hist, 0.0)
    if hist.sum() <= 0:
        raise DataError(
            "the test pool has none of the classes this client trains on; use a larger test pool "
            "(data.test_fraction) or a milder class skew"
        )
    counts = largest_remainder(n_test, hist)
    chosen = []
    for c in np.flatnonzero(counts):
        pool = np.flatnonzero(test_labels == c)
        k = int(counts[c])
        if k <= pool.size:
            chosen.append(rng.choice(pool, size=k, replace=False))
        else:
            chosen.append(pool)
            chosen.append(rng.choice(pool, size=k - pool.size, replace=True))
    return rng.permutation(np.concatenate(chosen)).astype(np.int64)
