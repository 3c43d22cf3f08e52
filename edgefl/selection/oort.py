"""``oort``: Oort's participant selection (Lai et al., "Oort: efficient federated learning via guided
participant selection", OSDI 2021, Sec. 4 and Algorithm 1; the formula of its code, FedScale's
``oort`` sampler). Each client that has taken part has a statistical utility

    U_i = |B_i| · √((1/|B_i|) Σ_{k∈B_i} loss(k)²)

over the samples B_i it trained on in the last round it took part in. Here |B_i| = τ·B and the root mean
square of the per-sample losses is replaced by the client's mean loss at the model it started from over
its training set (what its forward passes compute; the client reports it with its update, uncharged): a
lower bound of the root mean square. Its score in round R is

    score_i = (u_i + √(0.1 · ln R / L_i)) · (T / t_i)^(α · 1(T < t_i)),

u_i = U_i min-max normalised over the explored clients, L_i the round it last took part in (counted from
1), t_i its duration then (s, observed: first activity to the end of its last one), T the preferred round
duration (``preferred_duration_s``; unset: the k-th shortest of the clients' durations, observed or
estimated from the mean channel). A share ε of the k slots (``exploration``, decaying by
``exploration_decay`` each round down to ``exploration_min``) goes to clients not yet explored, drawn with
probability ∝ 1 / their estimated duration (fast ones first, as Oort's exploration); the rest to the highest
scores. Oort's pacer (which relaxes T when the utility stalls) and its blacklist are not modelled."""

from __future__ import annotations

import math
from typing import Annotated, Optional

import numpy as np
from pydantic import Field

from edgefl.selection.base import Policy, SelectionParams, SelectionView, estimated_times_s


class Oort(Policy):
    name = "oort"

    class Params(SelectionParams):
        preferred_duration_s: Optional[Annotated[float, Field(gt=0, le=1e6, allow_inf_nan=False)]] = Field(
            None,
            description="T, the preferred round duration (s); unset: the k-th shortest of the clients' "
            "durations (observed or estimated) each round.",
        )
        alpha: float = Field(2.0, ge=0, le=100, description="α, the exponent of the penalty of slow clients.")
        exploration: float = Field(0.9, ge=0, le=1, description="ε of the first round: the share of slots to explore.")
        exploration_decay: float = Field(0.98, ge=0, le=1, description="ε is multiplied by this each round.")
        exploration_min: float = Field(0.3, ge=0, le=1, description="ε never decays below this.")

    def scores(self, view: SelectionView, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(score [N], NaN for the clients not yet explored; each client's duration t_i, observed or estimated)."""
        p = self.params
        down_s, compute_s, up_s = estimated_times_s(self.ctx, view.obs, k)
        t = np.where(np.isnan(view.duration_s), down_s + compute_s + up_s, view.duration_s)
        explored = view.last_round >= 0
        utility = view.samples * view.loss
        score = np.full(len(t), np.nan)
        if not explored.any():
            return score, t
        if p.preferred_duration_s is not None:
            T = p.preferred_duration_s
        else:
            T = float(np.sort(t[view.online])[min(k, int(view.online.sum())) - 1])
        u = utility[explored]
        span = u.max() - u.min()
        u = (u - u.min()) / span if span > 0 else np.ones_like(u)
        R = view.round + 1
        bonus = np.sqrt(0.1 * math.log(R) / (view.last_round[explored] + 1))
        penalty = np.where(T < t[explored], (T / t[explored]) ** p.alpha, 1.0)
        score[explored] = (u + bonus) * penalty
        return score, t

    def select(self, view: SelectionView, k: int) -> np.ndarray:
        p = self.params
        score, t = self.scores(view, k)
        online = view.online
        epsilon = max(p.exploration_min, p.exploration * p.exploration_decay**view.round)
        fresh = np.flatnonzero(online & np.isnan(score))
        known = np.flatnonzero(online & ~np.isnan(score))
        slots = min(k, int(online.sum()))
        explore = min(len(fresh), int(round(epsilon * slots)))
        exploit = min(len(known), slots - explore)
        explore = min(len(fresh), slots - exploit)  # slots exploitation cannot fill go to exploration
        best = known[np.argsort(-score[known], kind="stable")][:exploit]
        weights = 1.0 / np.maximum(t[fresh], 1e-12)
        drawn = self.rng.choice(fresh, size=explore, replace=False, p=weights / weights.sum()) if explore else fresh[:0]
        return np.sort(np.concatenate([best, drawn]).astype(np.int64))
