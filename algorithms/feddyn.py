"""FedDyn (Acar et al. 2021): federated learning with dynamic regularisation.

Paper: "Federated Learning Based on Dynamic Regularization" (ICLR 2021).
Client state g_i = 0, server state h = 0, uniform sampling.
Per round t:
  P <- m clients uniformly without replacement; send theta^{t-1}   (1 model down)
  each i in P: tau steps of theta <- theta - eta (grad l_i(theta) - g_i + alpha (theta - theta^{t-1}))
  g_i <- g_i - alpha (theta_i - theta^{t-1})
  upload theta_i                                                     (1 model up)
  h       <- h - (alpha/N) sum_{i in P} (theta_i - theta^{t-1})
  theta^t <- (1/|P|) sum_{i in P} theta_i - h / alpha
Clients whose upload did not arrive are left out (g_i unchanged; |P| counts the arrivals).
DRDM with gamma = 0 and uniform sampling is this algorithm with alpha = mu (compare
Algorithms 1-2 of "Distributionally Robust Federated Learning with Client Drift Minimization",
Sec. II).
"""

from __future__ import annotations

from pydantic import Field

from algorithms.base import Algorithm, HyperParams, weighted_mean
from algorithms.ops import Broadcast, Train, Upload
from algorithms.state import ClientStore


class FedDynParams(HyperParams):
    alpha: float = Field(0.3, gt=0, description="alpha, dynamic-regularisation weight (tuned: docs/reproduce-drdm.md).")


def feddyn_step(w, grad, carry, client, shared, k):
    """One local step: theta <- theta - eta (grad - g_i + alpha (theta - theta^{t-1}))."""
    d = grad - client["g"] - shared["alpha"] * (shared["theta"] - w)
    return w - shared["lr"] * d, carry


class FedDyn(Algorithm):
    name = "feddyn"
    accepts_selection = True  # averages whoever takes part: any selection policy ([selection])
    Params = FedDynParams

    def __init__(self, ctx):
        import torch

        super().__init__(ctx)
        self.theta = ctx.init_params.clone()
        self.h = torch.zeros(ctx.dim)  # server state h
        self.g = ClientStore(ctx.num_clients, ctx.dim)  # client states g_i

    def round(self, r):
        import torch

        ctx, alpha = self.ctx, self.hp.alpha
        P = ctx.sample(ctx.clients_per_round)
        yield Broadcast(P, ctx.model_bits)
        g = self.g.get(P)
        result = yield Train(
            P,
            self.theta,
            ctx.local_steps,
            feddyn_step,
            shared={"lr": ctx.lr, "alpha": alpha, "theta": self.theta},
            client_args={"g": g},
        )
        arrived = yield Upload(P, ctx.model_bits)
        if not arrived.any():
            return
        keep = torch.as_tensor(arrived)
        theta_i = result.params[keep]
        self.g.set(P[arrived], g[keep] - alpha * (theta_i - self.theta))
        self.h = self.h - (alpha / ctx.num_clients) * (theta_i - self.theta).sum(dim=0)
        self.theta = weighted_mean(theta_i) - self.h / alpha

    @property
    def model(self):
        return self.theta
