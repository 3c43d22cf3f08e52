"""SCAFF-PD (Yu, Karimireddy, Ma, Jordan 2023): accelerated primal-dual FL for the DRO objective.

The DRDM paper ("Distributionally Robust Federated Learning with Client Drift Minimization", Sec. IV-A.1)
describes it only as "accelerated primal-dual with SCAFFOLD-like control variates". This file
implements a **reconstruction** (not stated in that paper):
APD with dual extrapolation, control variates c_i = fresh stochastic gradients at x^r, m-of-N
uniform participation, scalings that make the aggregate direction unbiased for
sum_i lambda_i grad f_i.

  state: x, lambda, loss table L (filled once at x^0 by all N clients, charged), L_prev <- L
  per round r:
   1 S <- m clients uniformly w/o replacement; send x                     (1 model down)
   2 each i in S: L_i <- l_i(x; zeta), c_i <- grad l_i(x; zeta'); upload (scalar, vector)
   3 s <- (1 + theta) L - theta L_prev;  L_prev <- L                      (extrapolated dual gradient)
   4 lambda <- Pi( (lambda + sigma s + sigma rho (1/N) 1) / (1 + sigma rho) ),  sigma = tau gamma
   5 c <- (N/m) sum_{i in S} lambda_i c_i; send (lambda_i, c) to each i in S   (1 vector + 1 scalar down)
   6 each i in S: u <- x; tau times u <- u - eta_l [N lambda_i (grad l_i(u) - c_i) + c];
     upload du_i = u - x                                                  (1 vector up)
   7 x <- x + eta_g (1/m) sum_{i in S} du_i
Traffic per participant: 2 vectors + 1 scalar down, 2 vectors + 1 scalar up.
With a deadline, m in lines 5 and 7 counts the uploads that arrived in that phase.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from algorithms.base import Algorithm, HyperParams
from algorithms.ops import Broadcast, Evaluate, Query, Train, Upload
from algorithms.simplex import DUAL_STEP_MAX, initial_lambda, lambda_metrics, project_simplex


class ScaffPDParams(HyperParams):
    gamma: float = Field(
        1e-4,
        ge=0,
        le=DUAL_STEP_MAX,
        description="Dual step per local step: sigma = tau * gamma (as DRDM; tuned: docs/reproduce-drdm.md; at most "
        "10^6).",
    )
    theta: float = Field(1.0, ge=0, le=DUAL_STEP_MAX, description="theta, dual extrapolation (at most 10^6).")
    rho: float = Field(
        0.0,
        ge=0,
        le=DUAL_STEP_MAX,
        description="rho, weight of psi(lambda) = (rho/2)||lambda - 1/N||^2 (0: eq. 2 exactly; at most 10^6).",
    )
    eta_g: float = Field(1.0, gt=0, description="eta_g, global step size.")
    lambda_init: Literal["uniform", "data_size"] = "uniform"


def scaff_pd_step(w, grad, carry, client, shared, k):
    """u <- u - eta_l [N lambda_i (grad l_i(u) - c_i) + c]   (line 6)."""
    return w - shared["lr"] * (client["n_lambda"] * (grad - client["c_i"]) + shared["c"]), carry


class ScaffPD(Algorithm):
    name = "scaff_pd"
    Params = ScaffPDParams

    def __init__(self, ctx):
        super().__init__(ctx)
        self.x = ctx.init_params.clone()
        self.lam = initial_lambda(self.hp.lambda_init, ctx.train_sizes)
        self.table: np.ndarray | None = None  # loss table L, filled in round 0
        self.table_prev: np.ndarray | None = None

    def round(self, r):
        import torch

        ctx, hp = self.ctx, self.hp
        N, tau = ctx.num_clients, ctx.local_steps
        if self.table is None:  # the initial loss table at x^0: every client, charged
            everyone = np.arange(N)
            losses, arrived = yield Query(everyone, self.x, down_bits=ctx.model_bits, up_bits=ctx.scalar_bits)
            table = np.full(N, float(losses[torch.as_tensor(arrived)].mean()) if arrived.any() else 0.0)
            table[arrived] = losses[torch.as_tensor(arrived)].double().numpy()  # missing: the mean
            self.table, self.table_prev = table, table.copy()
        S = ctx.sample(ctx.clients_per_round)  # l.1
        yield Broadcast(S, ctx.model_bits)
        losses = yield Evaluate(S, self.x, "loss")  # l.2: L_i on zeta
        grads = yield Evaluate(S, self.x, "grad")  # l.2: c_i on zeta'
        arrived = yield Upload(S, ctx.model_bits + ctx.scalar_bits, vectors=0)  # a gradient: not compressed
        if not arrived.any():
            return
        keep = torch.as_tensor(arrived)
        S, c_i = S[arrived], grads[keep]
        self.table = self.table.copy()
        self.table[S] = losses[keep].double().numpy()
        s = (1 + hp.theta) * self.table - hp.theta * self.table_prev  # l.3
        self.table_prev = self.table.copy()
        sigma = tau * hp.gamma
        self.lam = project_simplex((self.lam + sigma * s + sigma * hp.rho / N) / (1 + sigma * hp.rho))  # l.4
        lam_S = torch.as_tensor(self.lam[S], dtype=c_i.dtype)
        c = (N / len(S)) * (lam_S[:, None] * c_i).sum(dim=0)  # l.5
        yield Broadcast(S, ctx.model_bits + ctx.scalar_bits)  # (lambda_i, c)
        result = yield Train(
            S,
            self.x,
            tau,
            scaff_pd_step,
            shared={"lr": ctx.lr, "c": c},
            client_args={"n_lambda": N * lam_S, "c_i": c_i},
        )  # l.6
        arrived = yield Upload(S, ctx.model_bits)  # du_i
        if not arrived.any():
            return
        du = result.params[torch.as_tensor(arrived)] - self.x
        self.x = self.x + (hp.eta_g / int(arrived.sum())) * du.sum(dim=0)  # l.7

    @property
    def model(self):
        return self.x

    def metrics(self):
        return lambda_metrics(self.lam)
