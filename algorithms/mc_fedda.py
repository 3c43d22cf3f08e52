"""MC-FedDA, multi-stage constrained federated dual averaging (Bao et al., ICML 2022, Algorithm 3).

Stages m = 0..M-1, each a fresh C-FedDA (algorithms/c_fedda.py) warm-started at the previous
stage's output w^_m, which is also the new anchor (for the gamma term and the constraint
R(w - w^_m) <= eps_m): g_bar = 0, w~ = alpha_0 w^_m, round counter 0.
Schedules (reference code, rounds counted continuously): ``stage_lambdas`` lam_m,
``stage_rounds`` R_m for all stages but the last (which runs to the end of the run),
eps_m = ``stage_epsilons`` or epsilon * 2^-m (the reference code: 5000 * 2^-m; the theory's
108 Psi^2 lam_m / mu is also a halving schedule). Warm start: the last server iterate
(reference code, default) or the stage's weighted average (``output = 'average'``).
Traffic: as C-FedDA, plus the new anchor (1 vector + 2 scalars) to each client the first time
it takes part in a stage. (The inherited ``lam`` key is unused: ``stage_lambdas`` sets lam_m;
``epsilon`` is eps_0 of the halving schedule.)
"""

from __future__ import annotations

from typing import Optional

from pydantic import Field, model_validator

from algorithms.c_fedda import CFedDA, CFedDAParams


class MCFedDAParams(CFedDAParams):
    stage_lambdas: tuple[float, ...] = Field(
        (0.125, 0.0625, 0.03125),
        description="lam_m per stage (default: the reference code's Lasso 0.5^3, 0.5^4, 0.5^5).",
    )
    stage_rounds: tuple[int, ...] = Field(
        (250, 250), description="Rounds of every stage but the last (the last runs to the end)."
    )
    stage_epsilons: Optional[tuple[float, ...]] = Field(None, description="eps_m per stage (default epsilon * 2^-m).")

    @model_validator(mode="after")
    def _lengths(self):
        m = len(self.stage_lambdas)
        if m < 1:
            raise ValueError("stage_lambdas needs at least one stage")
        if len(self.stage_rounds) != m - 1:
            raise ValueError(
                f"stage_rounds needs {m - 1} entries (all stages but the last), got {len(self.stage_rounds)}"
            )
        if any(r < 1 for r in self.stage_rounds):
            raise ValueError("stage_rounds must be positive")
        if self.stage_epsilons is not None and len(self.stage_epsilons) != m:
            raise ValueError(f"stage_epsilons needs {m} entries, got {len(self.stage_epsilons)}")
        return self


class MCFedDA(CFedDA):
    name = "mc_fedda"
    Params = MCFedDAParams

    def __init__(self, ctx):
        bounds, total = [], 0
        for rounds in ctx.hp.stage_rounds:
            total += rounds
            bounds.append(total)
        self.boundaries = bounds  # first round of stages 1..M-1
        super().__init__(ctx)

    def stage_params(self, m):
        hp = self.hp
        eps = hp.stage_epsilons[m] if hp.stage_epsilons is not None else hp.epsilon * 2.0**-m
        return hp.stage_lambdas[m], eps

    def stage_ends_before(self, r):
        return r in self.boundaries
