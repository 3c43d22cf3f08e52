"""FedProx (Li et al. 2020): local steps on f_i(w) + (mu_p/2) ||w - x||^2.

Paper: "Federated Optimization in Heterogeneous Networks" (MLSys 2020).
Per round: m clients uniformly without replacement receive x
(1 model down), run tau steps of w <- w - eta (grad l_i(w) + mu_p (w - x)), upload w_i
(1 model up); the server averages as FedAvg does (d_i-weighted by default, uniform as option)
over the uploads that arrived.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from algorithms.base import Algorithm, HyperParams, weighted_mean
from algorithms.ops import Broadcast, Train, Upload


class FedProxParams(HyperParams):
    mu_p: float = Field(0.01, ge=0, description="mu_p, proximal weight (tuned: docs/reproduce-drdm.md).")
    weighting: Literal["data_size", "uniform"] = "data_size"


def fedprox_step(w, grad, carry, client, shared, k):
    """w <- w - eta (grad l_i(w) + mu_p (w - x))."""
    return w - shared["lr"] * (grad + shared["mu_p"] * (w - shared["x"])), carry


class FedProx(Algorithm):
    name = "fedprox"
    accepts_selection = True  # averages whoever takes part: any selection policy ([selection])
    Params = FedProxParams

    @classmethod
    def sums_uploads(cls, hp) -> bool:
        return hp.weighting == "uniform"  # the plain mean of the uploads: an over-the-air sum serves it

    def __init__(self, ctx):
        super().__init__(ctx)
        self.x = ctx.init_params.clone()

    def round(self, r):
        ctx, hp = self.ctx, self.hp
        S = ctx.sample(ctx.clients_per_round)
        yield Broadcast(S, ctx.model_bits)
        result = yield Train(
            S, self.x, ctx.local_steps, fedprox_step, shared={"lr": ctx.lr, "mu_p": hp.mu_p, "x": self.x}
        )
        arrived = yield Upload(S, ctx.model_bits)
        if arrived.any():
            weights = ctx.train_sizes[S[arrived]] if hp.weighting == "data_size" else None
            self.x = weighted_mean(result.params[arrived], weights)

    @property
    def model(self):
        return self.x
