"""FedAsync (Xie, Koyejo, Gupta, "Asynchronous Federated Optimization", 2019): the server mixes in each
update as it arrives.

The server holds x_t (version t = updates so far) and keeps ``concurrency`` clients training: a free slot
goes to a client sampled uniformly among the online, idle ones, which downloads x_τ, runs τ local SGD steps
and uploads x_new. On each arrival at version t, with staleness s = t − τ:

    α_t = α · s(t − τ),    x_{t+1} = (1 − α_t) · x_t + α_t · x_new

s(·): constant 1, polynomial (1 + s)^−a, or hinge (1 for s ≤ b, else 1 / (a (s − b) + 1)). One round is
one server update. Free slots are filled when the server is about to wait, once every upload that has
arrived by then is handled. With one client and α = 1 it is sequential SGD on that client. (The paper's optional
proximal term ρ/2‖x − x_τ‖² in the local objective is not included.)
Traffic per update: 1 model down, 1 model up.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from algorithms.base import Algorithm, HyperParams, check_asynchronous, staleness_metrics, staleness_weight
from algorithms.ops import Dispatch, NextArrival, Train, sgd_step


class FedAsyncParams(HyperParams):
    alpha: float = Field(0.6, gt=0, le=1, description="α, the mixing weight of a fresh update (0 < α ≤ 1).")
    staleness: Literal["constant", "polynomial", "hinge"] = Field(
        "polynomial",
        description="s(staleness): constant 1, polynomial (1 + s)^-a, hinge (1 if s <= b else 1/(a(s-b)+1)).",
    )
    a: float = Field(0.5, ge=0, le=100, description="Exponent of the polynomial, slope of the hinge.")
    b: int = Field(4, ge=0, le=1_000_000, description="Staleness up to which the hinge weighs 1.")
    concurrency: int | None = Field(
        None, ge=1, le=10_000_000, description="Clients training at once; unset: algorithm.clients_per_round."
    )


class FedAsync(Algorithm):
    name = "fedasync"
    Params = FedAsyncParams
    asynchronous = True

    def __init__(self, ctx):
        super().__init__(ctx)
        self.x = ctx.init_params.clone()
        self.in_flight: set[int] = set()  # clients training now
        self.failed: set[int] = set()  # clients whose chain did not get through in this round: not sampled again in it
        self.waiting = True  # the last arrival was the last of its instant: the server waits next
        self.applied: list[int] = []  # staleness of the update applied in the last round

    @classmethod
    def check_scenario(cls, scenario) -> None:
        hp = scenario.algorithm.hyperparams()
        check_asynchronous(cls.name, scenario, hp.concurrency or scenario.algorithm.clients_per_round)

    def round(self, r):
        ctx, hp = self.ctx, self.hp
        concurrency = hp.concurrency or ctx.clients_per_round
        self.applied, self.failed = [], set()
        while True:
            if self.waiting and len(self.in_flight) < concurrency:  # fill the free slots with idle clients, from x_r
                new = ctx.sample_idle(concurrency - len(self.in_flight), self.in_flight | self.failed)
                if len(new):
                    train = Train(new, self.x, ctx.local_steps, sgd_step, shared={"lr": ctx.lr})
                    yield Dispatch(train, r, ctx.model_bits, ctx.model_bits, concurrency)
                    self.in_flight.update(new.tolist())
            arrival = yield NextArrival()
            if arrival is None:  # nobody trains and nobody can start: the model stays as it is
                return
            self.in_flight.discard(arrival.client)
            self.waiting = not arrival.more_now
            if not arrival.arrived:  # (offline, cut, lost, empty battery: it may fail again at once)
                self.failed.add(arrival.client)
            else:
                alpha_t = hp.alpha * staleness_weight(hp.staleness, arrival.staleness, hp.a, hp.b)
                self.x = (1 - alpha_t) * self.x + alpha_t * arrival.params
                self.applied = [arrival.staleness]
                return

    @property
    def model(self):
        return self.x

    def metrics(self) -> dict[str, float]:
        return staleness_metrics(self.applied)
