"""SCAFFOLD, option II (Karimireddy et al. 2020): control variates against client drift.

Paper: "SCAFFOLD: Stochastic Controlled Averaging for Federated Learning" (ICML 2020),
Algorithm 1 with option II; a baseline of the DRDM paper (Sec. IV-A.1).
Server state x, c; client state c_i; all start at 0.
Per round:
  S <- m clients uniformly without replacement; send (x, c)             (2 vectors down)
  each i in S: y <- x; tau steps of y <- y - eta_l (grad l_i(y) - c_i + c)
               c_i^+ <- c_i - c + (x - y) / (tau eta_l)
               upload dy_i = y - x and dc_i = c_i^+ - c_i; store c_i <- c_i^+   (2 vectors up)
  x <- x + (eta_g / |S|) sum_i dy_i;   c <- c + (1/N) sum_i dc_i
Clients whose upload did not arrive are left out (c_i not stored; |S| counts the arrivals).
c_i live in a ClientStore (rows only for clients that trained), so c = mean_i c_i is kept.
"""

from __future__ import annotations

from pydantic import Field

from algorithms.base import Algorithm, HyperParams
from algorithms.ops import Broadcast, Train, Upload
from algorithms.state import ClientStore


class ScaffoldParams(HyperParams):
    eta_g: float = Field(
        2.0, gt=0, description="eta_g, global step size (tuned: docs/reproduce-drdm.md; the paper's usual value is 1)."
    )


def scaffold_step(w, grad, carry, client, shared, k):
    """y <- y - eta_l (grad l_i(y) - c_i + c)."""
    return w - shared["lr"] * (grad - client["c_i"] + shared["c"]), carry


class Scaffold(Algorithm):
    name = "scaffold"
    accepts_selection = True  # averages whoever takes part: any selection policy ([selection])
    Params = ScaffoldParams

    def __init__(self, ctx):
        import torch

        super().__init__(ctx)
        self.x = ctx.init_params.clone()
        self.c = torch.zeros(ctx.dim)
        self.c_i = ClientStore(ctx.num_clients, ctx.dim)

    def round(self, r):
        import torch

        ctx = self.ctx
        tau, lr = ctx.local_steps, ctx.lr
        S = ctx.sample(ctx.clients_per_round)
        yield Broadcast(S, 2 * ctx.model_bits)  # x and c
        c_i = self.c_i.get(S)
        result = yield Train(S, self.x, tau, scaffold_step, shared={"lr": lr, "c": self.c}, client_args={"c_i": c_i})
        arrived = yield Upload(S, 2 * ctx.model_bits)  # dy_i and dc_i
        if not arrived.any():
            return
        keep = torch.as_tensor(arrived)
        dy = result.params[keep] - self.x
        c_plus = c_i[keep] - self.c - dy / (tau * lr)  # option II: c_i - c + (x - y)/(tau eta_l)
        dc = c_plus - c_i[keep]
        self.c_i.set(S[arrived], c_plus)
        self.x = self.x + (self.hp.eta_g / int(arrived.sum())) * dy.sum(dim=0)
        self.c = self.c + dc.sum(dim=0) / ctx.num_clients

    @property
    def model(self):
        return self.x
