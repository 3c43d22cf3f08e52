"""DRDM (Krouka, Ben Issaid, Bennis): distributionally robust FL with client drift minimization.

Paper: "Distributionally Robust Federated Learning with Client Drift Minimization", Sec. II
(Algorithms 1-3); where the paper leaves a choice open, the choice made is noted. It solves
min_w max_{lambda in simplex} sum_i lambda_i f_i(w): FedDyn-style local steps with a dynamic
regulariser for the primal player, DRFA's randomised-snapshot projected ascent for the dual.

Per round s (Alg. 1):
  l.1   D <- m clients drawn from lambda (i.i.d. with replacement: duplicates train once,
        weigh k_i/m in the averages, count once in the c sums)
  l.2   k' ~ Uniform{1..tau}                                   (snapshot step t' = s*tau + k')
  l.3   send w_bar and k' to D                                  (1 model + 1 integer down)
  l.4-5 each i in D: tau steps of w <- Pi_W(w - eta (grad l_i(w) - g_i - mu (w_bar - w))),
        keeping w after k' steps (Alg. 2)
  l.7   upload w_i^+ and w_i^snap                               (2 models up)
  l.10  g_i <- g_i - mu (w_i^+ - w_bar)
  l.17  c_snap <- c - (mu/N) sum_{i in D} (w_i^snap - w_bar)
  l.18  c      <- c - (mu/N) sum_{i in D} (w_i^+    - w_bar)
  l.19  w_snap <- sum_i (k_i/m) w_i^snap - c_snap / mu
  l.20  w_bar  <- sum_i (k_i/m) w_i^+    - c / mu
  l.21  lambda <- DualVariableUpdate(lambda, w_snap)            (Alg. 3, m models down, m scalars up)

Participants whose upload misses the deadline are left out of the round: their g_i is not
updated (the server never saw their models), the averages use the k_i of those that arrived.
If nobody arrived, nothing changes and there is no dual step (there is no snapshot).

``dynamic = false`` switches off the three FedDyn terms (g_i, mu (w - w_bar), c/mu): DRDM then
is DRFA exactly. Random streams: D is drawn from ``ctx.rng`` (as FedDyn/FedAvg draw
their uniform sets), k' and U from a child stream, so ``sampling = "uniform"`` with gamma = 0
follows FedDyn's trajectory step for step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Optional

import numpy as np
from pydantic import Field

from algorithms.base import Algorithm, HyperParams, weighted_mean
from algorithms.ops import Broadcast, Train, Upload, sgd_step
from algorithms.simplex import DUAL_STEP_MAX, dual_variable_update, initial_lambda, lambda_metrics, sample_by_lambda
from algorithms.state import ClientStore

if TYPE_CHECKING:  # torch is imported where it is used: validating a scenario must not load it (docs/architecture.md)
    import torch


class DRDMParams(HyperParams):
    mu: float = Field(1.0, gt=0, description="mu, dynamic-regularisation weight (tuned: docs/reproduce-drdm.md).")
    gamma: float = Field(
        1e-3, ge=0, le=DUAL_STEP_MAX, description="gamma, dual step (lambda moves by tau*gamma*v; tuned; at most 10^6)."
    )
    sampling: Literal["with_replacement", "without_replacement", "uniform"] = Field(
        "with_replacement",
        description="D ~ lambda i.i.d. (default); without replacement from max(lambda, 1e-3); "
        "or uniform without replacement (ablation).",
    )
    lambda_init: Literal["uniform", "data_size"] = Field("uniform", description="lambda^(0): 1/N or d_i/d.")
    gamma_decay: float = Field(
        1.0, gt=0, le=1, description="gamma <- gamma_decay * gamma after each round (ref. code: 0.9)."
    )
    lambda_floor: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="After each dual step lambda <- max(lambda, floor), renormalised (ref. code: 1e-3).",
    )
    dual_loss: Literal["batch", "full"] = Field(
        "batch", description="L_i on one local batch or the whole local training set."
    )
    radius: Optional[float] = Field(None, gt=0, description="Pi_W: l2 ball of this radius (None: unconstrained).")
    dynamic: bool = Field(True, description="False switches off g_i, mu (w - w_bar) and c/mu: DRFA.")


def project_ball(w: torch.Tensor, radius: float) -> torch.Tensor:
    """Pi_W for the l2 ball: w * min(1, R / ||w||)."""
    import torch

    return w * torch.clamp(radius / torch.linalg.vector_norm(w), max=1.0)


def drdm_step(w, grad, carry, client, shared, k):
    """One local step of Alg. 2 for one client: eq. 6 then eq. 5, i.e. d = grad - g - mu (w_bar - w), w - lr d.

    The same operations in the same order (the same bits), written in place on the step's own temporaries: three
    new buffers of the model's size instead of six (the Figure-4 study's local steps are mostly memory traffic)."""
    pull = shared["w_bar"] - w
    pull.mul_(shared["mu"])  # mu (w_bar - w)
    d = grad - client["g"]
    d.sub_(pull)  # Alg. 2 l.4 (eq. 6)
    d.mul_(shared["lr"])  # lr d
    w = w - d  # Alg. 2 l.5 (eq. 5)
    if "radius" in shared:
        w = project_ball(w, shared["radius"])
    return w, carry


def sgd_ball_step(w, grad, carry, client, shared, k):
    """Plain SGD (the FedDyn terms switched off), with the optional Pi_W."""
    w, carry = sgd_step(w, grad, carry, client, shared, k)
    if "radius" in shared:
        w = project_ball(w, shared["radius"])
    return w, carry


class DRDM(Algorithm):
    name = "drdm"
    Params = DRDMParams

    def __init__(self, ctx):
        import torch

        super().__init__(ctx)
        self.w = ctx.init_params.clone()  # w_bar <- w^(0)
        self.c = torch.zeros(ctx.dim)  # c <- 0
        self.g = ClientStore(ctx.num_clients, ctx.dim)  # g_i <- 0 for all i (rows only once written)
        self.lam = initial_lambda(self.hp.lambda_init, ctx.train_sizes)  # lambda^(0)
        self.gamma = self.hp.gamma
        self.aux_rng = ctx.rng.spawn(1)[0]  # k' and U; D comes from ctx.rng
        self.distinct = 0

    def sample(self) -> tuple[np.ndarray, np.ndarray]:
        """Alg. 1 l.1: (distinct clients, draw counts k_i)."""
        ctx, how = self.ctx, self.hp.sampling
        if how == "uniform":
            D = ctx.sample(ctx.clients_per_round)
            return D, np.ones(len(D), np.int64)
        return sample_by_lambda(
            ctx.rng,
            self.lam,
            ctx.selection_size(ctx.clients_per_round),
            replace=(how == "with_replacement"),
            online=ctx.online,
        )

    def round(self, r):
        import torch

        ctx, hp = self.ctx, self.hp
        N, tau, mu = ctx.num_clients, ctx.local_steps, hp.mu
        D, k = self.sample()  # Alg. 1 l.1
        k_snap = int(self.aux_rng.integers(1, tau + 1))  # Alg. 1 l.2: t' - s*tau
        yield Broadcast(D, ctx.model_bits + ctx.scalar_bits)  # Alg. 1 l.3: w_bar and k'
        shared = {"lr": ctx.lr, "mu": mu, "w_bar": self.w}
        if hp.radius is not None:
            shared["radius"] = hp.radius
        if hp.dynamic:
            g = self.g.get(D)
            result = yield Train(
                D, self.w, tau, drdm_step, shared=shared, client_args={"g": g}, record_at=k_snap
            )  # Alg. 1 l.5, Alg. 2
        else:
            result = yield Train(D, self.w, tau, sgd_ball_step, shared=shared, record_at=k_snap)
        arrived = yield Upload(D, 2 * ctx.model_bits)  # Alg. 1 l.7: w_i^+ and w_i^snap
        self.distinct = int(arrived.sum())
        if not arrived.any():
            return  # no model arrived: w_bar, c, g, lambda unchanged
        w_plus, w_snaps = result.params, result.snapshot
        if self.distinct < len(D) or not (w_plus.is_contiguous() and w_snaps.is_contiguous()):
            # the rows of those that arrived, as new tensors (all arrived: the result's own rows, no copy)
            keep = torch.as_tensor(arrived)
            D, k = D[arrived], k[arrived]
            w_plus, w_snaps = w_plus[keep], w_snaps[keep]
            if hp.dynamic:
                g = g[keep]
        weights = torch.as_tensor(k.astype(np.float64), dtype=w_plus.dtype)  # k_i (weighted_mean's, made once)
        if hp.dynamic:
            drift = w_plus - self.w  # w_i^+ - w_bar, for l.10 and l.18
            c_snap = self.c - (mu / N) * (w_snaps - self.w).sum(dim=0)  # Alg. 1 l.17
            c_new = self.c - (mu / N) * drift.sum(dim=0)  # Alg. 1 l.18
            self.g.set(D, torch.sub(g, drift.mul_(mu), out=drift))  # Alg. 1 l.10: g_i - mu (w_i^+ - w_bar)
            w_snap = weighted_mean(w_snaps, weights) - c_snap / mu  # Alg. 1 l.19
            w_new = weighted_mean(w_plus, weights) - c_new / mu  # Alg. 1 l.20
        else:
            c_new = self.c
            w_snap = weighted_mean(w_snaps, weights)
            w_new = weighted_mean(w_plus, weights)
        lam = yield from dual_variable_update(
            ctx, self.lam, w_snap, tau * self.gamma, self.aux_rng, full=hp.dual_loss == "full"
        )  # Alg. 1 l.21, Alg. 3
        if hp.lambda_floor > 0:
            lam = np.maximum(lam, hp.lambda_floor)
            lam = lam / lam.sum()
        self.lam = lam
        self.gamma *= hp.gamma_decay
        self.w, self.c = w_new, c_new  # Alg. 1 l.14

    @property
    def model(self):
        return self.w

    def metrics(self):
        return {**lambda_metrics(self.lam), "clients_distinct": float(self.distinct)}
