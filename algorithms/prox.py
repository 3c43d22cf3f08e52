"""Closed-form proximal operators for composite objectives (l1 and nuclear norm), in one place.

Everything here works on ONE flat parameter vector and is written with plain tensor ops
(no ``.item()``, no Python branching on tensor values, no in-place writes to inputs), so a
client step that calls it can be batched with ``torch.func.vmap``. Branches only depend on
Python numbers fixed by the hyperparameters (e.g. whether a radius is finite).

The regulariser acts on a *block* of the flat vector: its first ``coords`` coordinates, read
as a vector (l1) or, for the nuclear norm, as a ``rows x cols`` matrix (row-major, as
``Linear.weight`` is stored). The remaining coordinates (e.g. a bias) are not penalised.
``radius`` optionally adds the ball W = {||w||_2 <= rho} over the whole vector.

Operators ("Fast Composite Optimization and Statistical Recovery in Federated Learning",
Sec. 2.1 and 3.3):
- ``soft_threshold``  S_tau(v) = sign(v) max(|v| - tau, 0)
- ``svt``             U diag(max(sigma - tau, 0)) V^T (singular value thresholding)
- ``prox``            P_tau(v) = argmin_w 1/2||w - v||^2 + tau R(w) + i_W(w): threshold, then
                      rescale into the ball (exact: the ball is radial and R a norm)
- ``cprox``           argmin 1/2||w - v||^2 + tau R(w) + i_W(w)  s.t.  R(w - w0) <= eps
                      (C-FedDA): the unconstrained prox when the constraint is inactive, else
                      l1 with rho = inf: an exact O(p log p) multiplier search (below);
                      otherwise: a Dykstra-like proximal iteration (fixed iteration count);
                      mode 'reference': threshold then project (the authors' MATLAB heuristic).

Exact l1 multiplier search. With the multiplier beta of the constraint the problem separates:
w(beta) = argmin 1/2||w - v||^2 + tau||w||_1 + beta||w - c||_1 (c = w0). Flip signs so that
c_j >= 0; then the distance of one coordinate is the sum of hinges
    |w_j(beta) - c_j| = relu(A - beta) + relu(B - beta) - relu(B - c - beta) + relu(C - beta),
    A = v - tau - c,  B = c + tau - v,  C = -v - tau,
so D(beta) = ||w(beta) - c||_1 is piecewise linear, non-increasing, with 4p knots. Sorting the
knots gives D at every knot by cumulative sums; the root of D(beta) = eps lies on one linear
piece and is found exactly. w(beta) per coordinate is the best of three candidates (left of
min(0, c), between, right of max(0, c)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # torch is imported where it is used: validating a scenario must not load it (docs/architecture.md)
    from torch import Tensor

RegKind = Literal["l1", "nuclear", "none"]


@dataclass(frozen=True)
class Regularizer:
    """R(w) on the first ``coords`` coordinates of a flat vector, plus an optional l2 ball."""

    kind: RegKind = "l1"
    coords: int | None = None  # None: all coordinates (l1) / rows*cols (nuclear)
    shape: tuple[int, int] | None = None  # nuclear: the matrix block's (rows, cols)
    radius: float = math.inf  # rho of W = {||w|| <= rho}; inf: no ball

    def __post_init__(self):
        if self.kind not in ("l1", "nuclear", "none"):
            raise ValueError(f"unknown regulariser {self.kind!r}; use 'l1', 'nuclear' or 'none'")
        if self.kind == "nuclear":
            if self.shape is None or len(self.shape) != 2:
                raise ValueError("the nuclear norm needs the matrix shape (rows, cols)")
            if self.coords is not None and self.coords != self.shape[0] * self.shape[1]:
                raise ValueError(
                    f"nuclear block of shape {self.shape} has {self.shape[0] * self.shape[1]} "
                    f"coordinates, not coords = {self.coords}"
                )
        if not self.radius > 0:
            raise ValueError(f"radius must be > 0 (inf for no ball), got {self.radius}")

    def block_size(self, dim: int) -> int:
        if self.kind == "nuclear":
            assert self.shape is not None  # __post_init__ checked it
            size = self.shape[0] * self.shape[1]
        elif self.coords is None:
            size = dim
        else:
            size = self.coords
        if size > dim:
            raise ValueError(f"the regulariser needs {size} coordinates but the model has {dim}")
        return size


# -- elementary operators --------------------------------------------------------------
def soft_threshold(v: Tensor, tau) -> Tensor:
    """S_tau(v) = sign(v) * max(|v| - tau, 0) (prox of tau*||.||_1)."""
    import torch

    return torch.sign(v) * torch.relu(v.abs() - tau)


def svt(m: Tensor, tau) -> Tensor:
    """Singular value thresholding of a matrix ``m`` [rows, cols] (prox of tau*||.||_*)."""
    import torch

    u, s, vh = torch.linalg.svd(m, full_matrices=False)
    return (u * torch.relu(s - tau).unsqueeze(-2)) @ vh


def ball_scale(u: Tensor, radius: float) -> Tensor:
    """u * min(1, rho / ||u||): projection onto the l2 ball of radius rho (no-op for inf)."""
    import torch

    if math.isinf(radius):
        return u
    norm = torch.linalg.vector_norm(u)
    return u * torch.clamp(radius / torch.clamp(norm, min=1e-300), max=1.0)


def l1_ball_project(x: Tensor, eps) -> Tensor:
    """Euclidean projection of a vector onto {||x||_1 <= eps} (sort-based, Duchi et al. 2008)."""
    import torch

    a = x.abs()
    s, _ = torch.sort(a, descending=True)
    css = torch.cumsum(s, dim=-1)
    j = torch.arange(1, x.shape[-1] + 1, dtype=x.dtype)
    positive = (s - (css - eps) / j) > 0  # true on a prefix
    count = positive.sum(dim=-1, keepdim=True).clamp(min=1)
    theta = (torch.gather(css, -1, count - 1) - eps) / count.to(x.dtype)
    projected = torch.sign(x) * torch.relu(a - torch.clamp(theta, min=0))
    inside = a.sum(dim=-1, keepdim=True) <= eps
    return torch.where(inside, x, projected)


# -- block helpers ---------------------------------------------------------------------
def _split(w: Tensor, reg: Regularizer) -> tuple[Tensor, Tensor]:
    k = reg.block_size(w.shape[-1])
    return w[..., :k], w[..., k:]


def _join(block: Tensor, rest: Tensor) -> Tensor:
    import torch

    return torch.cat([block, rest], dim=-1)


def _as_matrix(block: Tensor, reg: Regularizer) -> Tensor:
    assert reg.shape is not None  # a nuclear-norm Regularizer has one
    return block.reshape(*block.shape[:-1], *reg.shape)


def reg_value(w: Tensor, reg: Regularizer) -> Tensor:
    """R(w): the l1 or nuclear norm of the regularised block (0 for 'none')."""
    import torch

    block, _ = _split(w, reg)
    if reg.kind == "l1":
        return block.abs().sum(dim=-1)
    if reg.kind == "nuclear":
        return torch.linalg.svdvals(_as_matrix(block, reg)).sum(dim=-1)
    return torch.zeros(w.shape[:-1], dtype=w.dtype)


def threshold(v: Tensor, tau, reg: Regularizer) -> Tensor:
    """prox of tau*R alone (no ball): S_tau or SVT on the block, identity elsewhere."""
    block, rest = _split(v, reg)
    if reg.kind == "l1":
        block = soft_threshold(block, tau)
    elif reg.kind == "nuclear":
        block = svt(_as_matrix(block, reg), tau).reshape(block.shape)
    return _join(block, rest)


def prox(v: Tensor, tau, reg: Regularizer) -> Tensor:
    """P_tau(v) = argmin_w 1/2||w - v||^2 + tau R(w) + i_W(w): threshold, then into the ball."""
    return ball_scale(threshold(v, tau, reg), reg.radius)


def project_constraint(x: Tensor, anchor: Tensor, eps, reg: Regularizer, return_value: bool = False):
    """Projection onto {w : R(w - anchor) <= eps} (only the block is constrained); with
    ``return_value`` also R(x - anchor) (from the same SVD / sum), as ``(projection, value)``."""
    import torch

    block, rest = _split(x, reg)
    a_block, _ = _split(anchor, reg)
    diff = block - a_block
    value = torch.zeros(x.shape[:-1], dtype=x.dtype)
    if reg.kind == "l1":
        value = diff.abs().sum(dim=-1)
        diff = l1_ball_project(diff, eps)
    elif reg.kind == "nuclear":
        u, s, vh = torch.linalg.svd(_as_matrix(diff, reg), full_matrices=False)
        value = s.sum(dim=-1)
        s = l1_ball_project(s, eps)  # singular values are >= 0, so this is the simplex-type projection
        diff = ((u * s.unsqueeze(-2)) @ vh).reshape(diff.shape)
    out = _join(a_block + diff, rest)
    return (out, value) if return_value else out


# -- the constrained prox of C-FedDA -----------------------------------------------------
def _l1_solution(v: Tensor, c: Tensor, tau, beta) -> Tensor:
    """argmin_x 1/2(x - v)^2 + tau|x| + beta|x - c| per coordinate (beta broadcast)."""
    import torch

    lo = torch.minimum(torch.zeros_like(c), c)
    hi = torch.maximum(torch.zeros_like(c), c)
    kappa = torch.where(c >= 0, tau - beta, beta - tau)
    x1 = torch.minimum(v + tau + beta, lo)
    x2 = torch.minimum(torch.maximum(v - kappa, lo), hi)
    x3 = torch.maximum(v - tau - beta, hi)

    def obj(x):
        return 0.5 * (x - v) ** 2 + tau * x.abs() + beta * (x - c).abs()

    o1, o2, o3 = obj(x1), obj(x2), obj(x3)
    return torch.where((o1 <= o2) & (o1 <= o3), x1, torch.where(o2 <= o3, x2, x3))


def l1_multiplier(v: Tensor, c: Tensor, tau, eps) -> Tensor:
    """The multiplier beta >= 0 with ||w(beta) - c||_1 = eps (0 if already inside), exactly."""
    import torch

    sign = torch.where(c < 0, -torch.ones_like(c), torch.ones_like(c))
    vf, cf = sign * v, sign * c  # now c >= 0
    b = cf + tau - vf
    knots = torch.cat([vf - tau - cf, b, b - cf, -vf - tau], dim=-1)
    p = vf.shape[-1]
    k, order = torch.sort(knots, dim=-1, descending=True)
    # weight +1 for the knots A, B, C and -1 for B - c (the third block of ``knots``)
    s = torch.where((order >= 2 * p) & (order < 3 * p), -1.0, 1.0).to(knots.dtype)
    s0 = torch.cumsum(s, dim=-1)  # sum of weights of knots >= k_m (inclusive)
    s1 = torch.cumsum(s * k, dim=-1)
    d_at = s1 - k * s0  # D(k_m), non-decreasing in m
    reached = d_at >= eps
    first = torch.argmax(reached.to(torch.int8), dim=-1, keepdim=True).clamp(min=1)
    s0_prev = torch.gather(s0, -1, first - 1)
    s1_prev = torch.gather(s1, -1, first - 1)
    beta = (s1_prev - eps) / torch.where(s0_prev > 0, s0_prev, torch.ones_like(s0_prev))
    d0 = (torch.relu(k) * s).sum(dim=-1, keepdim=True)  # D(0)
    return torch.where(d0 > eps, torch.clamp(beta, min=0), torch.zeros_like(beta)).squeeze(-1)


def dykstra(
    v: Tensor, tau, anchor: Tensor, eps, reg: Regularizer, iters: int = 200, tol: float | None = None
) -> Tensor:
    """prox of tau R + i_W + i_{R(. - anchor) <= eps} by the Dykstra-like proximal iteration
    (x = v, p = q = 0; y = Pi_C(x + p); p += x - y; x = P_tau(y + q); q += y - x).

    ``iters`` iterations (vmap-friendly), or with ``tol`` at most ``iters`` and stopping once
    max(|x_new - x|, |x_new - y|) < tol (a data-dependent stop: server side only, not inside a client step)."""
    import torch

    x = v
    p = torch.zeros_like(v)
    q = torch.zeros_like(v)
    for _ in range(iters):
        y = project_constraint(x + p, anchor, eps, reg)
        p = x + p - y
        x_new = prox(y + q, tau, reg)
        q = y + q - x_new
        # converged: x stopped moving and the two half-steps agree (x = y at the solution)
        done = tol is not None and float(torch.maximum((x_new - x).abs().max(), (x_new - y).abs().max())) < tol
        x = x_new
        if done:
            break
    return x


def cprox(
    v: Tensor,
    tau,
    anchor: Tensor,
    eps: float,
    reg: Regularizer,
    mode: Literal["exact", "reference"] = "exact",
    iters: int = 200,
    tol: float | None = None,
    return_active: bool = False,
):
    """argmin_w 1/2||w - v||^2 + tau R(w) + i_W(w) subject to R(w - anchor) <= eps.

    ``eps = inf``: the plain prox. Otherwise the plain prox u where R(u - anchor) <= eps
    (constraint inactive), else the exact solution (mode 'exact'), or anchor + projection of
    u - anchor (mode 'reference', feasible but not the minimiser when active). ``iters`` and
    ``tol`` set the Dykstra iteration (nuclear norm, or l1 with a finite radius); ``tol`` only
    outside vmap. ``return_active``: also return whether the constraint was active (bool, per vector).
    """
    import torch

    u = prox(v, tau, reg)
    if math.isinf(eps) or reg.kind == "none":
        return (u, torch.zeros(u.shape[:-1], dtype=torch.bool)) if return_active else u
    if mode == "reference":  # the projection returns u itself when u is inside
        out, value = project_constraint(u, anchor, eps, reg, return_value=True)
        return (out, value > eps) if return_active else out
    value = reg_value(u - anchor, reg)
    inside = (value <= eps).unsqueeze(-1)
    if mode == "exact":
        if reg.kind == "l1" and math.isinf(reg.radius):
            block, rest = _split(v, reg)
            a_block, _ = _split(anchor, reg)
            beta = l1_multiplier(block, a_block, tau, eps).unsqueeze(-1)
            constrained = _join(_l1_solution(block, a_block, tau, beta), rest)
        else:
            constrained = dykstra(v, tau, anchor, eps, reg, iters, tol)
    else:
        raise ValueError(f"unknown cprox mode {mode!r}; use 'exact' or 'reference'")
    out = torch.where(inside, u, constrained)
    return (out, value > eps) if return_active else out
