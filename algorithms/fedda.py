"""FedDualAvg (FedDA), federated dual averaging (Yuan, Zaheer, Reddi, ICML 2021).

Paper: "Federated Composite Optimization" (ICML 2021), a baseline of "Fast Composite
Optimization and Statistical Recovery in Federated Learning" (Sec. 4).
Server dual state z (z_0 = w_0). Per round r (eta_s = server_lr):
  sample m clients; send them z_r and the round index;
  client k: z <- z_r; for j = 0..E-1: elapsed step eta~ = eta_s eta_c r E + eta_c j,
            w = P_{lam eta~}(z), G = grad f(w; xi), z <- z - eta_c G; upload Delta_k = z - z_r;
  server: z_{r+1} = z_r + eta_s sum_k pi~_k Delta_k; model w_{r+1} = P_{lam eta_s eta_c (r+1) E}(z_{r+1}).
Traffic per participant: 1 vector + 1 scalar (round index) down, 1 vector up.
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


class FedDAParams(CompositeParams):
    server_lr: float = Field(1.0, gt=0, description="eta_s, server step size.")


def fedda_step(w, grad, carry, client, shared, k):
    """z <- z - eta_c * s * G (G taken at w = P(z)); next w = P_{lam (eta0 + eta_c (k+1))}(z)."""
    z = carry["z"] - shared["lr"] * shared["grad_scale"] * grad.double()
    elapsed = shared["elapsed0"] + shared["lr"] * (k + 1)
    return prox(z, shared["lam"] * elapsed, shared["reg"]).to(w.dtype), {"z": z}


class FedDA(Algorithm):
    name = "fedda"
    accepts_selection = True  # averages whoever takes part: any selection policy ([selection])
    Params = FedDAParams

    def __init__(self, ctx):
        super().__init__(ctx)
        self.reg = make_regularizer(ctx, self.hp)
        self.z = initial_point(ctx, self.hp)  # float64 dual state
        self.w = self.z.clone()

    def round(self, r):
        ctx, hp = self.ctx, self.hp
        selected = ctx.sample(ctx.clients_per_round)
        yield Broadcast(selected, ctx.model_bits + ctx.scalar_bits)
        elapsed0 = hp.server_lr * ctx.lr * r * ctx.local_steps
        start = prox(self.z, hp.lam * elapsed0, self.reg)
        shared = {"lr": ctx.lr, "lam": hp.lam, "reg": self.reg, "grad_scale": hp.grad_scale, "elapsed0": elapsed0}
        carry = {"z": self.z.expand(len(selected), -1).clone()}
        result = yield Train(
            selected, start.float(), ctx.local_steps, fedda_step, shared=shared, carry=carry, uploads=("z",)
        )  # the server aggregates the duals z_i
        arrived = yield Upload(selected, ctx.model_bits)
        if arrived.any():
            done = selected[arrived]
            delta = weighted_sum(result.carry["z"][arrived] - self.z, aggregation_weights(ctx, hp, done))
            self.z = self.z + hp.server_lr * delta
        self.w = prox(self.z, hp.lam * hp.server_lr * ctx.lr * (r + 1) * ctx.local_steps, self.reg)

    @property
    def model(self):
        return self.w.float()

    def metrics(self):
        return {"reg": regularizer_value(self.w, self.reg, self.hp.lam)}
