"""The dual player shared by the distributionally robust algorithms (DRDM, DRFA, SCAFF-PD).

Paper: "Distributionally Robust Federated Learning with Client Drift Minimization", Sec. II
(Algorithms 1 and 3). The dual variable lambda is a probability vector over the N clients,
kept on the server in float64 numpy. This module holds, once, what the three algorithms share:

- :func:`project_simplex`: Euclidean projection onto {lambda >= 0, sum lambda = 1}, sort-based;
- :func:`sample_by_lambda`: DRDM's/DRFA's client sampling D ~ lambda (Algorithm 1 l.1; duplicates and
  the without-replacement option are choices the paper leaves open);
- :func:`dual_variable_update`: Algorithm 3 as a generator of operations (query the snapshot on a
  uniform set U, v_i = (N/m) L_i, projected ascent with step tau*gamma);
- :func:`initial_lambda`, :func:`lambda_metrics`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np

from algorithms.ops import Query

if TYPE_CHECKING:  # torch is imported where it is used: validating a scenario must not load it (docs/architecture.md)
    import torch


LAMBDA_FLOOR = 1e-3  # the authors' reference-code floor for sampling without replacement
# The largest dual step (and extrapolation) an algorithm's keys accept: lam + tau*gamma*v with losses of order
# 1-10 and tau up to 10^4 stays far from float overflow (beyond, the projection below gets no finite input).
DUAL_STEP_MAX = 1e6


def project_simplex(y: np.ndarray) -> np.ndarray:
    """argmin_{x in simplex} ||x - y||_2 (sort-based)::

    u <- sort(y) descending; cs <- cumsum(u)
    rho <- max{ j : u_j - (cs_j - 1)/j > 0 };  shift <- (cs_rho - 1)/rho
    return max(y - shift, 0)
    """
    y = np.asarray(y, dtype=np.float64)
    if y.ndim != 1 or y.size == 0:
        raise ValueError("project_simplex expects a non-empty 1-D vector")
    u = np.sort(y)[::-1]
    cs = np.cumsum(u)
    j = np.arange(1, y.size + 1)
    rho = int(np.flatnonzero(u - (cs - 1.0) / j > 0)[-1]) + 1  # j = 1 always qualifies
    shift = (cs[rho - 1] - 1.0) / rho
    return np.maximum(y - shift, 0.0)


def initial_lambda(init: Literal["uniform", "data_size"], train_sizes: np.ndarray) -> np.ndarray:
    """lambda^(0): uniform 1/N (default) or d_i/d (reference code option)."""
    sizes = np.asarray(train_sizes, dtype=np.float64)
    if init == "uniform":
        return np.full(sizes.size, 1.0 / sizes.size)
    return sizes / sizes.sum()


def sample_by_lambda(
    rng: np.random.Generator,
    lam: np.ndarray,
    m: int,
    replace: bool = True,
    floor: float = LAMBDA_FLOOR,
    online: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """D ~ lambda. Returns (distinct clients sorted, k_i = how many of the m draws chose each).

    ``replace=True`` (default): m i.i.d. draws from Categorical(lambda); a client drawn k_i
    times trains once and is weighted k_i/m. ``replace=False``: m distinct clients drawn
    successively from max(lambda, floor) renormalised (numpy ``choice(replace=False, p=...)``);
    lambda itself is not changed. Every k_i is then 1. ``online`` (bool [N]): only those clients
    can be drawn (the weights of the others are set to 0; at most as many as are online).
    """
    lam = np.asarray(lam, dtype=np.float64)
    if replace:
        p = np.maximum(lam, 0.0)
        if online is not None:
            p = np.where(online, p, 0.0)
            if p.sum() == 0:  # the online clients all have lambda = 0: uniform among them
                p = online.astype(np.float64)
        draws = rng.choice(lam.size, size=m, replace=True, p=p / p.sum())
        clients, counts = np.unique(draws, return_counts=True)
        return clients, counts
    p = np.maximum(lam, floor)
    if online is not None:
        p = np.where(online, p, 0.0)
        m = min(m, int(np.count_nonzero(online)))
    draws = rng.choice(lam.size, size=m, replace=False, p=p / p.sum())
    return np.sort(draws), np.ones(m, dtype=np.int64)


def dual_variable_update(
    ctx, lam: np.ndarray, w_snap: torch.Tensor, step: float, rng: np.random.Generator, full: bool = False
):
    """Algorithm 3 as a generator: ``lam_new = yield from dual_variable_update(...)``.

    1  U <- m clients uniformly at random, without replacement
    2  send w_snap to every i in U                       (model_bits down)
    3  each i in U: L_i <- loss(w_snap; one local batch), no grad; upload L_i  (scalar up)
    4  v_i = (N/m) L_i for i in U, else 0
    5  return Pi_Lambda(lam + step * v)                   (step = tau * gamma)

    Clients of U whose scalar did not arrive count as not queried: the (N/m) factor uses the
    number that arrived (the inclusion probability of the answers actually used).
    """
    import torch

    N, m = ctx.num_clients, ctx.clients_per_round
    U = ctx.sample(m, rng)  # Alg. 3 l.1 (among the clients online)
    losses, arrived = yield Query(
        U, w_snap, down_bits=ctx.model_bits, up_bits=ctx.scalar_bits, what="loss", full=full
    )  # Alg. 3 l.2-3
    if not arrived.any():
        return lam
    v = np.zeros(N)
    v[U[arrived]] = (N / arrived.sum()) * losses[torch.as_tensor(arrived)].double().numpy()  # Alg. 3 l.4
    return project_simplex(lam + step * v)  # Alg. 3 l.5


def lambda_metrics(lam: np.ndarray) -> dict[str, float]:
    """Per-round columns: largest weight, smallest weight and Shannon entropy (nats; log N = uniform)."""
    lam = np.asarray(lam, dtype=np.float64)
    positive = lam[lam > 0]
    return {
        "lambda_max": float(lam.max()),
        "lambda_min": float(lam.min()),
        "lambda_entropy": float(-(positive * np.log(positive)).sum()),
    }
