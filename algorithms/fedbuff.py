"""FedBuff (Nguyen et al., "Federated Learning with Buffered Asynchronous Aggregation", AISTATS 2022).

``concurrency`` C clients train at once: whenever one finishes, a client sampled uniformly among the
online, idle ones takes its slot, downloads the current model x_τ and runs τ local SGD steps; it returns
Δ_i = y_Q − y_0 (its parameters minus the model it started from). The server keeps a buffer; an update
s = t − τ server updates old enters it weighted by w(s), and after K = ``buffer_size`` of them:

    x_{t+1} = x_t + η_g · (1/K) · Σ_i w(s_i) · Δ_i        (η_g = ``server_lr``)

w: polynomial (1 + s)^−a (a = 1/2: the paper's and FedScale's 1/√(1 + s)), constant 1, or hinge
(1 for s ≤ b, else 1 / (a (s − b) + 1)). Updates older than ``max_staleness`` are dropped (their
energy was spent all the same). One round is one server update. Free slots are filled when the server
is about to wait, once every upload that has arrived by then is handled: with K = C = m, η_g = 1, constant weights and
every client finishing at the same instant, a version is one synchronous FedAvg round with uniform weights.
Traffic per update: 1 model down, 1 model up per client.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field

from algorithms.base import Algorithm, HyperParams, check_asynchronous, staleness_metrics, staleness_weight
from algorithms.ops import Dispatch, NextArrival, Train, sgd_step


class FedBuffParams(HyperParams):
    buffer_size: int = Field(10, ge=1, le=10_000_000, description="K, updates buffered per server update.")
    concurrency: int | None = Field(
        None, ge=1, le=10_000_000, description="C, clients training at once; unset: algorithm.clients_per_round."
    )
    server_lr: float = Field(1.0, gt=0, le=1e4, description="η_g, the server's step on the buffer's mean.")
    staleness: Literal["constant", "polynomial", "hinge"] = Field(
        "polynomial",
        description="w(staleness): polynomial (1 + s)^-a, constant 1, hinge (1 if s <= b else 1/(a(s-b)+1)).",
    )
    a: float = Field(
        0.5, ge=0, le=100, description="Exponent of the polynomial (1/2: 1/sqrt(1 + s)), slope of the hinge."
    )
    b: int = Field(4, ge=0, le=1_000_000, description="Staleness up to which the hinge weighs 1.")
    max_staleness: int | None = Field(
        None, ge=0, le=1_000_000, description="Updates staler than this are dropped; unset: none is."
    )


class FedBuff(Algorithm):
    name = "fedbuff"
    Params = FedBuffParams
    asynchronous = True

    def __init__(self, ctx):
        super().__init__(ctx)
        self.x = ctx.init_params.clone()
        self.in_flight: set[int] = set()  # clients training now
        self.failed: set[int] = set()  # clients whose chain did not get through in this round: not sampled again in it
        self.waiting = True  # the last arrival was the last of its instant: the server waits next
        self.buffer: list[torch.Tensor] = []  # w(s_i) Δ_i of the updates received since the last server update
        self.buffered: list[int] = []  # ... and their staleness
        self.applied: list[int] = []  # staleness of the updates the last round applied
        self.dropped = 0  # updates dropped as too stale, in the last round

    @classmethod
    def check_scenario(cls, scenario) -> None:
        hp = scenario.algorithm.hyperparams()
        check_asynchronous(cls.name, scenario, hp.concurrency or scenario.algorithm.clients_per_round)

    def round(self, r):
        ctx, hp = self.ctx, self.hp
        concurrency = hp.concurrency or ctx.clients_per_round
        self.applied, self.dropped, self.failed = [], 0, set()
        while len(self.buffer) < hp.buffer_size:
            if self.waiting and len(self.in_flight) < concurrency:  # fill the free slots with idle clients, from x_r
                new = ctx.sample_idle(concurrency - len(self.in_flight), self.in_flight | self.failed)
                if len(new):
                    train = Train(new, self.x, ctx.local_steps, sgd_step, shared={"lr": ctx.lr})
                    yield Dispatch(train, r, ctx.model_bits, ctx.model_bits, concurrency)
                    self.in_flight.update(new.tolist())
            arrival = yield NextArrival()
            if arrival is None:  # nobody trains and nobody can start: no update this round
                return
            self.in_flight.discard(arrival.client)
            self.waiting = not arrival.more_now
            if not arrival.arrived:  # (offline, cut, lost, empty battery: it may fail again at once)
                self.failed.add(arrival.client)
                continue
            if hp.max_staleness is not None and arrival.staleness > hp.max_staleness:
                self.dropped += 1
                continue
            weight = staleness_weight(hp.staleness, arrival.staleness, hp.a, hp.b)
            self.buffer.append(weight * (arrival.params - arrival.start))
            self.buffered.append(arrival.staleness)
        self.x = self.x + hp.server_lr * torch.stack(self.buffer).mean(dim=0)
        self.applied, self.buffer, self.buffered = self.buffered, [], []

    @property
    def model(self):
        return self.x

    def metrics(self) -> dict[str, float]:
        return {**staleness_metrics(self.applied), "updates_dropped": float(self.dropped)}
