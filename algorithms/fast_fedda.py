"""Fast-FedDA (Bao, Crawshaw, Luo, Liu, ICML 2022, Algorithm 1): federated dual averaging that
uses strong convexity ("Fast Composite Optimization and Statistical Recovery in Federated Learning",
Sec. 2).

Prox_t(z) = argmin_{w in W} <w, z - gamma w0> + c_t ||w||^2 / 2 + A_t lam R(w),
c_t = mu A_t / 2 + gamma, A_t = sum_{i<=t} alpha_i; with z = g - mu w~/2 it is the base prox
P_{lam A_t / c_t} at the centre (gamma w0 + mu w~/2 - g) / c_t.

Server state: g_bar = 0, w~ = alpha_0 w0, w = w0 (float64). Round r, global steps t = rE..rE+E-1:
  send (w, g_bar, w~) to the sampled clients;
  client: g <- g_bar, w^ <- w~, u <- w; per step: g <- g + alpha_t G(u);
          if t < rE+E-1: u <- Prox_t(g - mu w^/2), w^ <- w^ + alpha_{t+1} u;
  upload g and w^ (2 vectors);
  server: g_bar = sum pi~ g_k, w~' = sum pi~ w^_k; w <- Prox_{t'}(g_bar - mu w~'/2) with
          t' = rE+E-1; w~ <- w~' + alpha_{t'+1} w.
Presets: 'constant' (the reference code: alpha = 1, gamma = 550) or 'theory' (Theorem 2.1:
alpha_t = (t + a)^2, a = 4 L / mu, gamma = 2 mu a^3).
Traffic per participant: 3 vectors down (w, g_bar, w~), 2 up (g, w^).
With mu = 0, alpha = 1 and gamma = 1/eta_c it is exactly FedDA (eta_s = 1).
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

from algorithms.base import Algorithm
from algorithms.composite import (
    CompositeParams,
    aggregation_weights,
    alpha,
    alpha_sum,
    initial_point,
    make_regularizer,
    regularizer_value,
    weighted_sum,
)
from algorithms.ops import Broadcast, Train, Upload
from algorithms.prox import prox


class FastFedDAParams(CompositeParams):
    mu: float = Field(0.1, ge=0, description="mu, strong-convexity constant.")
    gamma: Optional[float] = Field(None, gt=0, description="gamma (default: 550, or 2 mu a^3 with preset 'theory').")
    preset: Literal["constant", "theory"] = Field("constant", description="alpha_t = 1, or (t + a)^2 with a = 4L/mu.")
    smoothness: float = Field(550.0, gt=0, description="L, for the theory preset's a = 4L/mu.")
    downlink_vectors: Literal[2, 3] = Field(
        3, description="Vectors sent down per client: 3 (w, g_bar, w~) or 2 (clients recompute the server prox)."
    )


def dual_prox(g, wt, t, shared):
    """Prox_t(g - mu wt / 2) for the steps' and the server's use (float64)."""
    a_t = alpha_sum(t, shared["preset"], shared["a"])
    c_t = shared["mu"] * a_t / 2 + shared["gamma"]
    centre = (shared["gamma"] * shared["w0"] + shared["mu"] * wt / 2 - g) / c_t
    return prox(centre, shared["lam"] * a_t / c_t, shared["reg"])


def fast_fedda_step(w, grad, carry, client, shared, k):
    t = shared["t0"] + k
    g = carry["g"] + alpha(t, shared["preset"], shared["a"]) * shared["grad_scale"] * grad.double()
    if k == shared["E"] - 1:  # the round's last step: the server does this prox
        return w, {"g": g, "wt": carry["wt"]}
    u = dual_prox(g, carry["wt"], t, shared)
    wt = carry["wt"] + alpha(t + 1, shared["preset"], shared["a"]) * u
    return u.to(w.dtype), {"g": g, "wt": wt}


class FastFedDA(Algorithm):
    name = "fast_fedda"
    accepts_selection = True  # averages whoever takes part: any selection policy ([selection])
    Params = FastFedDAParams

    def __init__(self, ctx):
        super().__init__(ctx)
        hp = self.hp
        self.reg = make_regularizer(ctx, hp)
        self.w0 = initial_point(ctx, hp)
        if hp.preset == "theory" and hp.mu <= 0:
            raise ValueError("fast_fedda: the theory preset needs mu > 0")
        self.a = 4 * hp.smoothness / hp.mu if hp.preset == "theory" else 0.0
        gamma = hp.gamma if hp.gamma is not None else (2 * hp.mu * self.a**3 if hp.preset == "theory" else 550.0)
        self.shared = {
            "mu": hp.mu,
            "gamma": gamma,
            "preset": hp.preset,
            "a": self.a,
            "lam": hp.lam,
            "reg": self.reg,
            "w0": self.w0,
            "grad_scale": hp.grad_scale,
            "E": ctx.local_steps,
        }
        self.g = torch_zeros_like(self.w0)
        self.wt = alpha(0, hp.preset, self.a) * self.w0
        self.w = self.w0.clone()

    def round(self, r):
        ctx, hp = self.ctx, self.hp
        E = ctx.local_steps
        selected = ctx.sample(ctx.clients_per_round)
        yield Broadcast(selected, hp.downlink_vectors * ctx.model_bits)
        carry = {"g": self.g.expand(len(selected), -1).clone(), "wt": self.wt.expand(len(selected), -1).clone()}
        shared = {**self.shared, "t0": r * E}
        result = yield Train(
            selected, self.w.float(), E, fast_fedda_step, shared=shared, carry=carry, uploads=("g", "wt")
        )  # the server aggregates g_i and w~_i
        arrived = yield Upload(selected, 2 * ctx.model_bits)
        if not arrived.any():
            return
        weights = aggregation_weights(ctx, hp, selected[arrived])
        self.g = weighted_sum(result.carry["g"][arrived], weights)
        wt = weighted_sum(result.carry["wt"][arrived], weights)
        t_last = r * E + E - 1
        self.w = dual_prox(self.g, wt, t_last, self.shared)
        self.wt = wt + alpha(t_last + 1, hp.preset, self.a) * self.w

    @property
    def model(self):
        return self.w.float()

    def metrics(self):
        return {"reg": regularizer_value(self.w, self.reg, self.hp.lam)}


def torch_zeros_like(x):
    return x.new_zeros(x.shape)
