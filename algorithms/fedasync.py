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

from pydantic import Field

from algorithms.asynchronous import AsynchronousParams, AsynchronousServer, staleness_metrics, staleness_weight


class FedAsyncParams(AsynchronousParams):
    alpha: float = Field(0.6, gt=0, le=1, description="α, the mixing weight of a fresh update (0 < α ≤ 1).")


class FedAsync(AsynchronousServer):
    name = "fedasync"
    Params = FedAsyncParams

    def round(self, r):
        hp = self.hp
        self.applied, self.failed = [], set()
        arrival = yield from self.next_update(r)
        if arrival is None:  # nobody trains and nobody can start: the model stays as it is
            return
        alpha_t = hp.alpha * staleness_weight(hp.staleness, arrival.staleness, hp.a, hp.b)
        self.x = (1 - alpha_t) * self.x + alpha_t * arrival.params
        self.applied = [arrival.staleness]

    def metrics(self) -> dict[str, float]:
        return staleness_metrics(self.applied)
