"""Shared pieces of the composite-objective algorithms (FedMiD, FedDA, Fast-FedDA, C-/MC-FedDA).

Objective: phi(w) = grad_scale * L(w) + lam * R(w) (+ the ball W = {||w|| <= radius}), with
L the data loss of the run's model (mean squared error for ``regression``, cross-entropy
otherwise) and R the l1 or nuclear norm (algorithms/prox.py). ``grad_scale`` multiplies every
stochastic gradient: the papers' squared loss is 1/2 (y - x^T w)^2, the ``regression`` model's
is (y - x^T w)^2, so ``grad_scale = 0.5`` reproduces the papers' problem exactly.

The keys below are common to the five algorithms (they become ``[algorithm]`` keys).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal, Optional

import numpy as np
from pydantic import Field

from algorithms.base import Context, HyperParams
from algorithms.prox import Regularizer, reg_value

if TYPE_CHECKING:  # torch is imported where it is used: validating a scenario must not load it (docs/architecture.md)
    import torch


class CompositeParams(HyperParams):
    lam: float = Field(1e-4, ge=0, description="lambda, weight of the regulariser R.")
    regularizer: Literal["l1", "nuclear"] = Field("l1", description="R: entrywise l1 or nuclear norm.")
    matrix_shape: Optional[tuple[int, int]] = Field(
        None, description="nuclear: (rows, cols) of the leading block; default: square, from the first tensor."
    )
    reg_coords: Optional[int] = Field(
        None, ge=1, description="l1: penalise only the first k coordinates (default all)."
    )
    radius: float = Field(
        math.inf, gt=0, allow_inf_nan=True, description="rho of the ball ||w|| <= rho (inf: no ball)."
    )
    grad_scale: float = Field(1.0, gt=0, description="Multiplies every gradient (0.5: the papers' 1/2 squared loss).")
    init_std: Optional[float] = Field(
        None, ge=0, description="w0 ~ N(0, init_std^2) (seeded; 0: w0 = 0) instead of the model's init."
    )
    weighting: Literal["data_size", "uniform"] = Field("data_size", description="pi_k = n_k / N, or uniform.")


def make_regularizer(ctx: Context, hp: CompositeParams) -> Regularizer:
    if hp.regularizer == "nuclear":
        shape = hp.matrix_shape
        if shape is None:
            first = int(np.prod(ctx.param_layout[0][1])) if ctx.param_layout else ctx.dim
            side = math.isqrt(first)
            if side * side != first:
                raise ValueError(
                    f"nuclear norm: the first tensor has {first} entries, not a square; set algorithm.matrix_shape"
                )
            shape = (side, side)
        rows, cols = shape
        return Regularizer("nuclear", shape=(rows, cols), radius=hp.radius)
    return Regularizer("l1", coords=hp.reg_coords, radius=hp.radius)


def initial_point(ctx: Context, hp: CompositeParams) -> torch.Tensor:
    """w0 in float64: the model's seeded init, or N(0, init_std^2) from a child of the
    algorithm's stream (spawning does not advance the stream: client sampling is unchanged)."""
    import torch

    if hp.init_std is None:
        return ctx.init_params.double().clone()
    if hp.init_std == 0:
        return torch.zeros(ctx.dim, dtype=torch.float64)
    rng = np.random.default_rng(ctx.rng.spawn(1)[0].integers(2**63))
    return torch.from_numpy(rng.normal(0.0, hp.init_std, ctx.dim))


def aggregation_weights(ctx: Context, hp: CompositeParams, clients: np.ndarray) -> torch.Tensor:
    """pi~_k over ``clients`` (normalised to sum 1), float64 [C]."""
    import torch

    if hp.weighting == "uniform" or len(clients) == 0:
        w = np.ones(len(clients))
    else:
        w = ctx.train_sizes[clients].astype(np.float64)
    return torch.from_numpy(w / max(w.sum(), 1e-300))


def weighted_sum(rows: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:

    return (weights[:, None] * rows.double()).sum(dim=0)


def regularizer_value(w: torch.Tensor, reg: Regularizer, lam: float) -> float:

    return float(lam * reg_value(w.double(), reg))


def alpha(t: int, preset: str, a: float) -> float:
    """alpha_t: 1 (experiments preset) or (t + a)^2 (theory preset)."""
    return 1.0 if preset == "constant" else float((t + a) ** 2)


def alpha_sum(t: int, preset: str, a: float) -> float:
    """A_t = sum_{i=0}^{t} alpha_i (closed form)."""
    if preset == "constant":
        return float(t + 1)
    n = t + 1
    return float(n * a * a + a * t * (t + 1) + t * (t + 1) * (2 * t + 1) / 6)
