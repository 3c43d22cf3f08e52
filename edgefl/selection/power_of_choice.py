"""``power_of_choice``: Power-of-choice (Cho, Wang & Joshi, "Towards understanding biased client selection
in federated learning", AISTATS 2022; pow-d). Each round the server samples d candidates among the online
clients without replacement, with probability ∝ their data size p_i (``by_data_size``; else uniformly),
sends them the current global model, and each computes its local loss F_i(w) over its training set and
sends it back; the server selects the k with the highest loss. The queries are charged: they are a
``Query`` op the engine prices before the algorithm's round (a model download, a forward pass over the
client's training set, a scalar upload, each with the scenario's headers and access latency; and their
uploads count in uploads_arrived/missed). The selected clients download the model again in the
algorithm's own broadcast: edgefl's algorithms do not know that a client already holds it, so the round
charges k model downloads more than the protocol needs. A candidate whose loss report is lost is not
selected; when fewer than k reports arrive, the other online clients fill the round at random."""

from __future__ import annotations

from typing import Annotated, Optional

import numpy as np
from pydantic import Field

from edgefl.selection.base import Policy, SelectionParams, SelectionView


class PowerOfChoice(Policy):
    name = "power_of_choice"

    class Params(SelectionParams):
        candidates: Optional[Annotated[int, Field(ge=1, le=1_000_000)]] = Field(
            None, description="d, the candidates queried for their loss each round (≥ k); unset: 2k."
        )
        by_data_size: bool = Field(True, description="Sample the candidates ∝ data size (else uniformly).")

    def candidates(self, view: SelectionView, k: int) -> np.ndarray:
        d = 2 * k if self.params.candidates is None else max(self.params.candidates, k)
        ids = np.flatnonzero(view.online)
        d = min(d, len(ids))
        sizes = view.train_sizes[ids].astype(np.float64) if self.params.by_data_size else np.ones(len(ids))
        return np.sort(self.rng.choice(ids, size=d, replace=False, p=sizes / sizes.sum()))

    def select(self, view: SelectionView, k: int) -> np.ndarray:
        asked = np.flatnonzero(view.online & np.isfinite(view.queried_loss))
        order = asked[np.argsort(-view.queried_loss[asked], kind="stable")]
        if len(order) < k:  # too few reports arrived: fill with the other online clients, at random
            others = np.setdiff1d(np.flatnonzero(view.online), order)
            order = np.concatenate([order, self.rng.permutation(others)])
        return np.sort(order[:k])
