"""HierFAVG (Liu, Zhang, Song & Letaief, "Client-Edge-Cloud Hierarchical Federated Learning", ICC 2020).

Client–edge–cloud FL: each cell's base station hosts an edge server. Per cloud round: sample m clients; then
``edge_rounds`` times (their κ2): each client starts from its edge's model, runs τ = ``local_steps`` local SGD
steps (their κ1), uploads, and each edge server averages the uploads of its own cell's clients that arrived
(weighted by data size, or uniformly); then the cloud averages the edge models, each weighted by the data of
its clients that took part (so that with ``edge_rounds = 1`` it is FedAvg's average over every upload). The
edges start a cloud round from the cloud model. A client's edge is its serving cell at the round's start
(``Context.client_cells``, which follows handovers; one cell: a single edge). The backhaul between edges and the
cloud is priced by the engine (``[backhaul]``, docs/multi-cell.md). With one cell and ``edge_rounds = 1`` it is
FedAvg, round for round.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from algorithms.base import Algorithm, HyperParams, weighted_mean
from algorithms.ops import Broadcast, Train, Upload, sgd_step


class HierFAVGParams(HyperParams):
    edge_rounds: int = Field(
        1,
        ge=1,
        le=1000,
        description="kappa2: edge aggregations per cloud aggregation (Liu et al. 2020; at most 1000, and "
        "run.rounds x edge_rounds at most 10^6 training phases, run.rounds' own bound).",
    )
    weighting: Literal["data_size", "uniform"] = Field(
        "data_size", description="An edge's average of its clients' uploads: by data size, or uniform."
    )


class HierFAVG(Algorithm):
    name = "hierfavg"
    Params = HierFAVGParams

    MAX_PHASES = 1_000_000  # run.rounds' own bound: the training phases a run may have

    @classmethod
    def check_scenario(cls, scenario) -> None:
        edge_rounds = scenario.algorithm.hyperparams().edge_rounds
        phases = scenario.run.rounds * edge_rounds
        if phases > cls.MAX_PHASES:
            raise ValueError(
                f"run.rounds = {scenario.run.rounds} x algorithm.hierfavg.edge_rounds = {edge_rounds} is {phases:,} "
                f"training phases, more than {cls.MAX_PHASES:,} (run.rounds' own bound): lower either"
            )

    def __init__(self, ctx):
        super().__init__(ctx)
        self.w = ctx.init_params.clone()
        self.edge_rounds_done = 0  # edge aggregations so far: edge_rounds per round
        if ctx.edge_servers:  # one server (one cell, no backhaul): FedAvg's outputs, nothing of its own to report
            self.columns = {"edge_rounds": "edge aggregations so far (algorithm.hierfavg.edge_rounds per round)"}
            self.event_columns = {"aggregation": "what closes the activity's phase: edge, or cloud (the round's last)"}

    def round(self, r):
        import torch

        ctx, hp = self.ctx, self.hp
        selected = ctx.sample(ctx.clients_per_round)
        cells = np.zeros(len(selected), dtype=np.int64) if ctx.client_cells is None else ctx.client_cells[selected]
        edges = sorted(set(cells.tolist()))
        edge_model = {edge: self.w for edge in edges}
        edge_data = {edge: 0.0 for edge in edges}  # data of the clients whose uploads reached the edge
        for _ in range(hp.edge_rounds):
            start = self.w if len(edges) <= 1 else torch.stack([edge_model[int(c)] for c in cells])  # (none: nobody)
            yield Broadcast(selected, ctx.model_bits)
            result = yield Train(selected, start, ctx.local_steps, sgd_step, shared={"lr": ctx.lr})
            arrived = yield Upload(selected, ctx.model_bits)
            for edge in edges:
                mine = arrived & (cells == edge)
                if mine.any():  # no upload reached this edge: its model stays as it was
                    sizes = ctx.train_sizes[selected[mine]]
                    edge_model[edge] = weighted_mean(
                        result.params[mine], sizes if hp.weighting == "data_size" else None
                    )
                    edge_data[edge] = float(np.sum(sizes)) if hp.weighting == "data_size" else float(mine.sum())
            self.edge_rounds_done += 1
            if len(edges) == 1:
                self.w = edge_model[edges[0]]
        if len(edges) > 1:  # the cloud: the edges that received something, weighted by their clients' data
            reached = [edge for edge in edges if edge_data[edge] > 0]
            if reached:
                models = torch.stack([edge_model[edge] for edge in reached])
                self.w = weighted_mean(models, np.array([edge_data[edge] for edge in reached]))

    def report(self) -> dict[str, float]:
        return {"edge_rounds": self.edge_rounds_done}

    def event_values(self, event) -> tuple:
        return (aggregation(event.phase, self.hp.edge_rounds),)

    @property
    def model(self):
        return self.w


def aggregation(phase: int, edge_rounds: int) -> str:
    """events.csv's mark of a phase (0-based in its round): 'edge' when its uploads are aggregated at the edges
    only, 'cloud' for the round's last phase, after which the edges send to the cloud."""
    return "cloud" if phase >= edge_rounds - 1 else "edge"
