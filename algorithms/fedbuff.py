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

from typing import TYPE_CHECKING

from pydantic import Field

from algorithms.asynchronous import AsynchronousParams, AsynchronousServer, staleness_metrics, staleness_weight

if TYPE_CHECKING:  # torch is imported where it is used: validating a scenario must not load it (docs/architecture.md)
    import torch


class FedBuffParams(AsynchronousParams):
    buffer_size: int = Field(10, ge=1, le=10_000_000, description="K, updates buffered per server update.")
    server_lr: float = Field(1.0, gt=0, le=1e4, description="η_g, the server's step on the buffer's mean.")
    max_staleness: int | None = Field(
        None, ge=0, le=1_000_000, description="Updates staler than this are dropped; unset: none is."
    )


class FedBuff(AsynchronousServer):
    name = "fedbuff"
    Params = FedBuffParams

    def __init__(self, ctx):

        super().__init__(ctx)
        self.buffer: list[torch.Tensor] = []  # w(s_i) Δ_i of the updates received since the last server update
        self.buffered: list[int] = []  # ... and their staleness
        self.dropped = 0  # updates dropped as too stale, in the last round

    def round(self, r):
        import torch

        hp = self.hp
        self.applied, self.dropped, self.failed = [], 0, set()
        while len(self.buffer) < hp.buffer_size:
            arrival = yield from self.next_update(r)
            if arrival is None:  # nobody trains and nobody can start: no update this round
                return
            if hp.max_staleness is not None and arrival.staleness > hp.max_staleness:
                self.dropped += 1
                continue
            weight = staleness_weight(hp.staleness, arrival.staleness, hp.a, hp.b)
            self.buffer.append(weight * (arrival.params - arrival.start))
            self.buffered.append(arrival.staleness)
        self.x = self.x + hp.server_lr * torch.stack(self.buffer).mean(dim=0)
        self.applied, self.buffer, self.buffered = self.buffered, [], []

    def metrics(self) -> dict[str, float]:
        return {**staleness_metrics(self.applied), "updates_dropped": float(self.dropped)}
