"""FedAvg (McMahan et al. 2017): local SGD on m of N clients, weighted model average.

Per round: sample m clients uniformly without replacement, send them the model,
each runs tau steps of w <- w - eta * grad l_i(w; batch), uploads w_i, and the server
sets x <- sum_i (d_i / sum_j d_j) w_i over the uploads that arrived (uniform: 1/|arrived|).
Traffic per participant: 1 model down, 1 model up.
"""

from __future__ import annotations

from typing import Literal

from algorithms.base import Algorithm, HyperParams, weighted_mean
from algorithms.ops import Broadcast, Train, Upload, sgd_step


class FedAvgParams(HyperParams):
    weighting: Literal["data_size", "uniform"] = "data_size"


class FedAvg(Algorithm):
    name = "fedavg"
    accepts_selection = True  # averages whoever takes part: any selection policy ([selection])
    Params = FedAvgParams

    @classmethod
    def sums_uploads(cls, hp) -> bool:
        return hp.weighting == "uniform"  # the plain mean of the uploads: an over-the-air sum serves it

    def __init__(self, ctx):
        super().__init__(ctx)
        self.w = ctx.init_params.clone()

    def round(self, r):
        ctx = self.ctx
        selected = ctx.sample(ctx.clients_per_round)
        yield Broadcast(selected, ctx.model_bits)
        result = yield Train(selected, self.w, ctx.local_steps, sgd_step, shared={"lr": ctx.lr})
        arrived = yield Upload(selected, ctx.model_bits)
        if arrived.any():  # nobody arrived: the model stays as it was
            weights = ctx.train_sizes[selected[arrived]] if self.hp.weighting == "data_size" else None
            self.w = weighted_mean(result.params[arrived], weights)

    @property
    def model(self):
        return self.w
