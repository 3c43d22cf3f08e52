"""FedMiD, federated mirror descent = local proximal SGD (Yuan, Zaheer, Reddi, ICML 2021).

Paper: "Federated Composite Optimization" (ICML 2021), a baseline of "Fast Composite
Optimization and Statistical Recovery in Federated Learning" (Sec. 4).
Per round (canonical form, eta_s = server_lr):
  sample m clients uniformly without replacement; send them w_r;
  each runs E steps u <- P_{lam eta_c}(u - eta_c * grad f(u; xi)) from u = w_r;
  uploads u_k - w_r; the server sets
  w_{r+1} = P_{lam eta_s eta_c E}(w_r + eta_s * sum_k pi~_k (u_k - w_r)).
Traffic per participant: 1 model down (w_r), 1 model up (u_k - w_r).
"""

from __future__ import annotations

from pydantic import Field

from algorithms.base import Algorithm
from algorithms.composite import (
    CompositeParams,
    aggregation_weights,
    initial_point,
    make_regularizer,
    regularizer_value,
    weighted_sum,
)
from algorithms.ops import Broadcast, Train, Upload
from algorithms.prox import prox


class FedMiDParams(CompositeParams):
    server_lr: float = Field(1.0, gt=0, description="eta_s, server step size.")


def fedmid_step(w, grad, carry, client, shared, k):
    """One local proximal SGD step: u <- P_{lam eta_c}(u - eta_c * s * grad)."""
    v = w.double() - shared["lr"] * shared["grad_scale"] * grad.double()
    return prox(v, shared["lam"] * shared["lr"], shared["reg"]).to(w.dtype), carry


class FedMiD(Algorithm):
    name = "fedmid"
    accepts_selection = True  # averages whoever takes part: any selection policy ([selection])
    Params = FedMiDParams

    def __init__(self, ctx):
        super().__init__(ctx)
        self.reg = make_regularizer(ctx, self.hp)
        self.w = initial_point(ctx, self.hp)  # float64 server state

    def round(self, r):
        ctx, hp = self.ctx, self.hp
        selected = ctx.sample(ctx.clients_per_round)
        yield Broadcast(selected, ctx.model_bits)
        shared = {"lr": ctx.lr, "lam": hp.lam, "reg": self.reg, "grad_scale": hp.grad_scale}
        result = yield Train(selected, self.w.float(), ctx.local_steps, fedmid_step, shared=shared)
        arrived = yield Upload(selected, ctx.model_bits)
        if not arrived.any():
            return
        done = selected[arrived]
        delta = weighted_sum(result.params[arrived].double() - self.w, aggregation_weights(ctx, hp, done))
        tau = hp.lam * hp.server_lr * ctx.lr * ctx.local_steps
        self.w = prox(self.w + hp.server_lr * delta, tau, self.reg)

    @property
    def model(self):
        return self.w.float()

    def metrics(self):
        return {"reg": regularizer_value(self.w, self.reg, self.hp.lam)}
