"""``fedcs``: FedCS (Nishio & Yonetani, "Client selection for federated learning with heterogeneous resources
in mobile edge", ICC 2019, Algorithm 2): as many clients as the round's estimated duration lets finish by the
deadline T. The server asks ``candidate_fraction`` of the online clients, picked at random, for their
resources (here: the mean channel and nominal CPU it already knows), estimates each one's download
t_d,i, update (compute) t_ud,i and upload t_ul,i times (edgefl.selection.base.estimated_times_s), and
adds clients greedily. With uploads scheduled one after another, as in the paper, the selected clients
[k_1 … k_j] finish their uploads at

    Θ_j = Θ_{j−1} + max(0, t_ud,k_j − Θ_{j−1}) + t_ul,k_j,    Θ_0 = 0,

and the round takes T_d + Θ_j with T_d = max_i t_d,i over the selected (the model's distribution). Each
step adds the client that makes T_d + Θ the smallest, while it stays ≤ T, up to ``max_clients``. Each
upload time is over the whole band (``network.access = "fdma"`` shares the band among the uploads at
once instead: at a configured SNR that takes as long in total, with a link budget less, as each share
has less noise). When no candidate fits, the fastest one is selected (a round needs a client)."""

from __future__ import annotations

import math
from typing import Annotated, Optional

import numpy as np
from pydantic import Field

from edgefl.selection.base import Policy, SelectionParams, SelectionView, estimated_times_s


class FedCS(Policy):
    name = "fedcs"

    class Params(SelectionParams):
        deadline_s: Optional[Annotated[float, Field(gt=0, le=1e6, allow_inf_nan=False)]] = Field(
            None, description="T, the round's deadline the selection plans for (s); unset: network.deadline_s."
        )
        candidate_fraction: float = Field(
            1.0, gt=0, le=1, description="C: the share of the online clients asked for their resources (random)."
        )
        max_clients: Optional[Annotated[int, Field(ge=1, le=1_000_000)]] = Field(
            None, description="At most this many clients a round; unset: the algorithm's clients_per_round."
        )

    @classmethod
    def check_scenario(cls, scenario) -> None:
        params = scenario.selection.params()
        if params.deadline_s is None and scenario.network.deadline_s is None:
            raise ValueError(
                'selection.name = "fedcs" selects the clients that fit a deadline: set '
                "selection.deadline_s or network.deadline_s"
            )
        a = scenario.algorithm
        selected = min(scenario.data.num_clients, math.ceil(a.clients_per_round * (1 + a.over_selection)))
        if params.max_clients is not None and params.max_clients > selected:
            raise ValueError(
                f"selection.max_clients = {params.max_clients} is more than the {selected} clients the algorithm "
                f"selects a round (algorithm.clients_per_round = {a.clients_per_round}"
                + (f", algorithm.over_selection = {a.over_selection:g}" if a.over_selection else "")
                + f", data.num_clients = {scenario.data.num_clients}): a policy picks at most that many. Expected "
                f"selection.max_clients <= {selected}: lower it, or raise algorithm.clients_per_round"
            )

    def select(self, view: SelectionView, k: int) -> np.ndarray:
        p, ctx = self.params, self.ctx
        deadline_s = p.deadline_s if p.deadline_s is not None else ctx.network.deadline_s
        limit = k if p.max_clients is None else min(k, p.max_clients)  # (an algorithm may ask for fewer than m)
        online = np.flatnonzero(view.online)
        asked = max(1, int(np.ceil(p.candidate_fraction * len(online))))
        candidates = np.sort(self.rng.choice(online, size=asked, replace=False))
        down_s, update_s, up_s = estimated_times_s(ctx, view.obs, k, band_share=1.0)  # uploads one at a time
        return np.asarray(fedcs_greedy(candidates, down_s, update_s, up_s, deadline_s, limit), dtype=np.int64)


def fedcs_greedy(
    candidates: np.ndarray, down_s: np.ndarray, update_s: np.ndarray, up_s: np.ndarray, deadline_s: float, limit: int
) -> list[int]:
    """FedCS's greedy selection (Algorithm 2 of Nishio & Yonetani): the clients, in the order added."""
    chosen: list[int] = []
    theta_s, t_d = 0.0, 0.0
    left = [int(c) for c in candidates]
    while left and len(chosen) < limit:
        best, best_total, best_theta = None, np.inf, 0.0
        for c in left:  # the client whose addition keeps the round the shortest (ties: the lower id)
            theta = theta_s + max(0.0, update_s[c] - theta_s) + up_s[c]
            total = max(t_d, down_s[c]) + theta
            if total < best_total:
                best, best_total, best_theta = c, total, theta
        if best is None or best_total > deadline_s:
            break
        chosen.append(best)
        left.remove(best)
        theta_s, t_d = best_theta, max(t_d, down_s[best])
    if not chosen and len(candidates):
        totals = [down_s[c] + update_s[c] + up_s[c] for c in candidates]
        chosen = [int(candidates[int(np.argmin(totals))])]
    return chosen
