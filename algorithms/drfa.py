"""DRFA (Deng, Kamani, Mahdavi 2020): distributionally robust federated averaging.

Paper: "Distributionally Robust Federated Averaging" (NeurIPS 2020); a baseline of
"Distributionally Robust Federated Learning with Client Drift Minimization" (Sec. IV-A.1).
It is DRDM without the FedDyn terms (no g_i, no mu (w - w_bar), no c). Per round s:
  D <- m clients drawn from lambda (i.i.d. with replacement, duplicates train once, weight k_i/m)
  k' ~ Uniform{1..tau}; send w_bar and k' to D             (1 model + 1 integer down)
  each i in D: tau steps of plain SGD w <- Pi_W(w - eta grad l_i(w)), keeping w after k' steps
  upload w_i^+ and w_i^snap                                 (2 models up)
  w_bar  <- sum_i (k_i/m) w_i^+;  w_snap <- sum_i (k_i/m) w_i^snap
  lambda <- Pi_Lambda(lambda + tau gamma v) with v from a uniform query set U (Alg. 3 of DRDM)
The theory outputs averaged iterates; the last one is evaluated.
Random streams as in DRDM (D from ``ctx.rng``; k' and U from a child stream), so DRDM with
``dynamic = false`` follows DRFA's trajectory exactly.
"""

from __future__ import annotations

from typing import Literal, Optional

import numpy as np
from pydantic import Field

from algorithms.base import Algorithm, HyperParams, weighted_mean
from algorithms.drdm import sgd_ball_step
from algorithms.ops import Broadcast, Train, Upload
from algorithms.simplex import DUAL_STEP_MAX, dual_variable_update, initial_lambda, lambda_metrics, sample_by_lambda


class DRFAParams(HyperParams):
    gamma: float = Field(
        3e-4,
        ge=0,
        le=DUAL_STEP_MAX,
        description="gamma, dual step (lambda moves by tau*gamma*v; tuned: docs/reproduce-drdm.md; at most 10^6).",
    )
    sampling: Literal["with_replacement", "without_replacement"] = "with_replacement"
    lambda_init: Literal["uniform", "data_size"] = "uniform"
    gamma_decay: float = Field(1.0, gt=0, le=1, description="gamma <- gamma_decay * gamma after each round.")
    lambda_floor: float = Field(
        0.0, ge=0, lt=1, description="After each dual step lambda <- max(lambda, floor), renormalised."
    )
    dual_loss: Literal["batch", "full"] = "batch"
    radius: Optional[float] = Field(None, gt=0, description="Pi_W: l2 ball of this radius (None: unconstrained).")


class DRFA(Algorithm):
    name = "drfa"
    Params = DRFAParams

    def __init__(self, ctx):
        super().__init__(ctx)
        self.w = ctx.init_params.clone()
        self.lam = initial_lambda(self.hp.lambda_init, ctx.train_sizes)
        self.gamma = self.hp.gamma
        self.aux_rng = ctx.rng.spawn(1)[0]  # k' and U; D comes from ctx.rng
        self.distinct = 0

    def round(self, r):
        ctx, hp = self.ctx, self.hp
        tau = ctx.local_steps
        D, k = sample_by_lambda(
            ctx.rng,
            self.lam,
            ctx.selection_size(ctx.clients_per_round),
            replace=hp.sampling == "with_replacement",
            online=ctx.online,
        )
        k_snap = int(self.aux_rng.integers(1, tau + 1))  # snapshot index t' - s*tau
        yield Broadcast(D, ctx.model_bits + ctx.scalar_bits)  # w_bar and k'
        shared = {"lr": ctx.lr} if hp.radius is None else {"lr": ctx.lr, "radius": hp.radius}
        result = yield Train(D, self.w, tau, sgd_ball_step, shared=shared, record_at=k_snap)
        arrived = yield Upload(D, 2 * ctx.model_bits)  # w_i^+ and w_i^snap
        self.distinct = int(arrived.sum())
        if not arrived.any():
            return
        w_new = weighted_mean(result.params[arrived], k[arrived])
        w_snap = weighted_mean(result.snapshot[arrived], k[arrived])
        lam = yield from dual_variable_update(
            ctx, self.lam, w_snap, tau * self.gamma, self.aux_rng, full=hp.dual_loss == "full"
        )
        if hp.lambda_floor > 0:
            lam = np.maximum(lam, hp.lambda_floor)
            lam = lam / lam.sum()
        self.lam = lam
        self.gamma *= hp.gamma_decay
        self.w = w_new

    @property
    def model(self):
        return self.w

    def metrics(self):
        return {**lambda_metrics(self.lam), "clients_distinct": float(self.distinct)}
