"""``adaptive_tau``: the number of local steps τ chosen online to minimise the energy to a target,
in the spirit of Wang et al., "Adaptive federated learning in resource constrained edge computing
systems", IEEE JSAC 2019 (they adapt τ from estimated convergence constants; we fit a simpler model).

Energy to target decomposes as (docs/energy-optimal-tau.md)

    E(τ) = R(τ) · (a·τ + b)          (J)

a: the round's compute energy per local step (all participants), b: the rest of a round's energy
(transmissions, evaluations, idle), both measured from the ledger as the run goes. R(τ), the rounds to
target, is modelled as a power law R(τ) ∝ τ^(−β), β in [0, 1): β = 0 when local steps do not help,
β → 1 when τ steps are worth τ rounds of one step. Then dE/dτ = 0 gives

    τ* = β / (1 − β) · b / a

clipped to [tau_min, tau_max] and rounded to a multiple of tau_step. Round 0 runs τ_0 = tau_first (default
algorithm.local_steps) and measures a and b; rounds 1..explore_rounds explore a pair τ_lo, τ_hi = 2 τ_lo
around the guess τ_g = β_0/(1 − β_0) · b/a of a prior β_0 (τ_lo = τ_g/√2 within the bounds), in the order
lo, hi, hi, lo, ... (a linear trend of the loss decrease cancels), and estimate

    β = log(mean drop in τ_hi rounds / mean drop in τ_lo rounds) / log(τ_hi / τ_lo)

(drop: the decrease of the training loss over the round). Then every round runs τ* of the measured a, b
and the estimated β. The β model and its estimator are ours.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import Field

from edgefl.control.base import Controller, ControlParams, Observation, RoundPlan


class AdaptiveTau(Controller):
    name = "adaptive_tau"
    changes_learning = True

    class Params(ControlParams):
        tau_min: int = Field(1, ge=1, le=100_000, description="Smallest τ it may choose.")
        tau_max: int = Field(50, ge=1, le=100_000, description="Largest τ it may choose.")
        tau_step: int = Field(1, ge=1, le=1000, description="τ is a multiple of this (within the bounds).")
        tau_first: int | None = Field(
            None,
            ge=1,
            le=100_000,
            description="τ of round 0, which measures the energies (unset: algorithm.local_steps).",
        )
        prior_beta: float = Field(0.5, ge=0, le=0.95, description="β_0 of the guess the exploration starts from.")
        explore_rounds: int = Field(
            8, ge=4, le=1000, description="Rounds exploring τ_lo and τ_hi = 2 τ_lo after round 0 (a multiple of 4)."
        )

    @classmethod
    def check_scenario(cls, scenario) -> None:
        p = scenario.control.params()
        if p.tau_min > p.tau_max:
            raise ValueError(f"control.tau_min = {p.tau_min} must be <= control.tau_max = {p.tau_max}")
        if scenario.run.eval_every != 1 or scenario.run.eval_every_s is not None:
            raise ValueError(
                'control.name = "adaptive_tau" reads the loss every round: set run.eval_every = 1 and leave run.eval_every_s unset'
            )

    def __init__(self, ctx, params=None):
        super().__init__(ctx, params)
        p = self.params
        self.tau_first = p.tau_first or ctx.local_steps
        self.pair: tuple[int, int] | None = None  # (τ_lo, τ_hi) explored
        self.taus: list[int] = []  # τ of every round so far
        self.beta: float | None = None
        self.tau_star: int | None = None

    def plan(self, obs: Observation) -> RoundPlan:
        r, p = obs.round, self.params
        if r == 0:
            tau = self.tau_first
        elif r <= p.explore_rounds:
            if self.pair is None:
                self.pair = self._pair(self._guess(obs.history))
            tau = self.pair[0] if (r - 1) % 4 in (0, 3) else self.pair[1]
        else:
            if self.beta is None:
                self.beta = self._estimate_beta(obs.history)
            tau = self.tau_star = self._best_tau(obs.history, self.beta)
        self.taus.append(tau)
        return RoundPlan(local_steps=tau)

    def metrics(self) -> dict:
        return {"tau": self.taus[-1] if self.taus else None}

    def summary(self) -> dict:
        return {"beta": self.beta, "tau_star": self.tau_star, "taus": self.taus}

    def _estimate_beta(self, history: list[dict]) -> float:
        loss = [row.get("loss") for row in history]
        drops: dict[int, list[float]] = {}
        for r in range(1, len(loss)):
            if (
                loss[r] is not None
                and loss[r - 1] is not None
                and math.isfinite(loss[r])
                and math.isfinite(loss[r - 1])
            ):
                drops.setdefault(self.taus[r], []).append(loss[r - 1] - loss[r])
        lo, hi = self.pair
        if not drops.get(lo) or not drops.get(hi):
            return 0.5
        mean_lo, mean_hi = float(np.mean(drops[lo])), float(np.mean(drops[hi]))
        if mean_lo <= 0 or mean_hi <= 0:
            return 0.0 if mean_hi <= 0 < mean_lo else 0.5
        return float(np.clip(math.log(mean_hi / mean_lo) / math.log(hi / lo), 0.0, 0.95))

    def _guess(self, history: list[dict]) -> float:
        """τ_g of the prior β_0, from the energies measured so far."""
        a, b = self._energy_split(history)
        beta = self.params.prior_beta
        return self.params.tau_max if a <= 0 else beta / (1.0 - beta) * b / a

    def _pair(self, guess: float) -> tuple[int, int]:
        """τ_lo ≈ guess/√2 and τ_hi = 2 τ_lo on the grid of tau_step within the bounds (τ_lo < τ_hi)."""
        low, high = self._bounds()
        step = self.params.tau_step
        lo = min(max(step * round(guess / math.sqrt(2) / step), low), max(low, step * ((high // 2) // step)))
        hi = min(max(2 * lo, lo + step), high)
        return int(lo), int(max(hi, lo))

    def _bounds(self) -> tuple[int, int]:
        p = self.params
        low = p.tau_step * math.ceil(p.tau_min / p.tau_step)
        return low, max(low, p.tau_step * (p.tau_max // p.tau_step))

    def _energy_split(self, history: list[dict]) -> tuple[float, float]:
        """(a, b): compute J per local step of a round, other J per round, over the rounds so far."""
        compute = np.diff([0.0] + [row["compute_energy_j"] for row in history])
        total = np.diff([0.0] + [row["energy_j"] for row in history])
        steps = float(np.sum(self.taus[: len(history)]))
        a = float(np.sum(compute) / steps) if steps > 0 else 0.0
        b = float(np.mean(total - compute)) if len(total) else 0.0
        return a, b

    def _best_tau(self, history: list[dict], beta: float) -> int:
        """τ* = β/(1−β) · b/a on the grid of tau_step within the bounds."""
        a, b = self._energy_split(history)
        tau = self.params.tau_max if a <= 0 else beta / (1.0 - beta) * b / a
        low, high = self._bounds()
        return int(min(max(self.params.tau_step * round(tau / self.params.tau_step), low), high))
