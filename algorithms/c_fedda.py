"""C-FedDA, constrained federated dual averaging (Bao et al., ICML 2022, Algorithm 2), with the
stage machinery that MC-FedDA (Algorithm 3, algorithms/mc_fedda.py) reuses.

CProx_r(z; w0, eps, lam) = argmin over {w in W : R(w - w0) <= eps} of
    <w, z - gamma E w0> + c_r E ||w||^2 / 2 + A_r E lam R(w),   c_r = mu A_r / 2 + gamma;
with z = g - mu E w~/2 it is the constrained prox (algorithms/prox.py ``cprox``) at the centre
(gamma w0 + mu w~/2 - g/E) / c_r with threshold lam A_r / c_r. alpha and A are indexed by round.

Server state: g_bar = 0, w~ = alpha_0 w0, w_bar = w0 (float64). Round r:
  send (w_bar, g_bar, w~) to the sampled clients (and the stage's anchor w0, eps, lam to a client
  the first time it takes part in a stage);
  client: g <- g_bar, u <- w_bar; E steps: g <- g + alpha_r G(u); if not the last step:
          u <- CProx_r(g - mu E w~/2);  upload g (1 vector);
  server: g_bar = sum pi~ g_k; w_bar <- CProx_r(g_bar - mu E w~/2); w~ <- w~ + alpha_{r+1} w_bar.
Output: the last w_bar (what the paper's figures show), or ``output = 'average'``:
w^ = sum_r alpha_r w_bar_{r+1} / sum_r alpha_r.
Defaults follow the reference code: alpha = 1, gamma = 600 / E (its 600 is the paper's gamma E),
eps = 5000 (its first-stage radius), mu = 0.1.
Traffic per participant per round: 3 vectors down, 1 up; plus 1 vector + 2 scalars once per stage.
"""

from __future__ import annotations

from typing import ClassVar, Literal, Optional

from pydantic import Field

from algorithms.base import Algorithm
from algorithms.composite import (
    CompositeParams,
    aggregation_weights,
    alpha,
    alpha_sum,
    initial_point,
    make_regularizer,
    regularizer_value,
    weighted_sum,
)
from algorithms.ops import Broadcast, Train, Upload
from algorithms.prox import cprox, reg_value

SERVER_TOL = 1e-10
SERVER_MAX_ITERS = 20000


class CFedDAParams(CompositeParams):
    mu: float = Field(0.1, ge=0, description="mu, (restricted) strong-convexity constant.")
    gamma: Optional[float] = Field(None, gt=0, description="gamma (paper convention; default 600 / E).")
    preset: Literal["constant", "theory"] = Field("constant", description="alpha_r = 1, or (r + a)^2 with a = 4L/mu.")
    smoothness: float = Field(600.0, gt=0, description="L, for the theory preset's a = 4L/mu.")
    epsilon: float = Field(
        5000.0, gt=0, allow_inf_nan=True, description="eps, radius of R(w - w0) <= eps (inf: unconstrained)."
    )
    cprox_mode: Literal["exact", "reference"] = Field(
        "exact", description="exact constrained prox, or the reference code's threshold-then-project."
    )
    cprox_iters: int = Field(100, ge=1, description="Dykstra iterations inside a client step (nuclear norm / ball).")
    output: Literal["last", "average"] = Field(
        "last", description="Model: last server iterate or alpha-weighted average."
    )


class Stage:
    """One C-FedDA run: its anchor, lam, eps and server state."""

    def __init__(self, index: int, anchor, lam: float, eps: float, preset: str, a: float):
        self.index, self.anchor, self.lam, self.eps = index, anchor, lam, eps
        self.rounds = 0  # rounds done in this stage (the paper's r)
        self.g = anchor.new_zeros(anchor.shape)
        self.wt = alpha(0, preset, a) * anchor
        self.w = anchor.clone()
        self.avg_num = anchor.new_zeros(anchor.shape)
        self.avg_den = 0.0
        self.has_anchor: set[int] = set()


def _centre_and_threshold(g, shared):
    a_r = shared["A_r"]
    c_r = shared["mu"] * a_r / 2 + shared["gamma"]
    centre = (shared["gamma"] * shared["anchor"] + shared["mu"] * shared["wt"] / 2 - g / shared["E"]) / c_r
    return centre, shared["lam"] * a_r / c_r


def c_fedda_step(w, grad, carry, client, shared, k):
    g = carry["g"] + shared["alpha_r"] * shared["grad_scale"] * grad.double()
    if k == shared["E"] - 1:  # the server does the round's last prox
        return w, {"g": g, "boundary": carry["boundary"]}
    centre, tau = _centre_and_threshold(g, shared)
    u, active = cprox(
        centre, tau, shared["anchor"], shared["eps"], shared["reg"], shared["mode"], shared["iters"], return_active=True
    )
    # steps where the constraint was active (the iterate sits on its boundary)
    return u.to(w.dtype), {"g": g, "boundary": carry["boundary"] + active.double()}


class CFedDA(Algorithm):
    name = "c_fedda"
    accepts_selection = True  # averages whoever takes part: any selection policy ([selection])
    Params: ClassVar[type[CFedDAParams]] = CFedDAParams

    def __init__(self, ctx):
        super().__init__(ctx)
        hp = self.hp
        self.reg = make_regularizer(ctx, hp)
        if hp.preset == "theory" and hp.mu <= 0:
            raise ValueError(f"{self.name}: the theory preset needs mu > 0")
        self.a = 4 * hp.smoothness / hp.mu if hp.preset == "theory" else 0.0
        if hp.gamma is not None:
            self.gamma = hp.gamma
        elif hp.preset == "theory":
            self.gamma = 2 * hp.mu * self.a**3
        else:
            self.gamma = 600.0 / ctx.local_steps
        self.stage = Stage(0, initial_point(ctx, hp), *self.stage_params(0), hp.preset, self.a)
        self.client_boundary_steps = 0  # client steps so far whose iterate sat on the constraint's boundary

    # -- stages (one for C-FedDA; MC-FedDA overrides these two) ---------------------------
    def stage_params(self, m: int) -> tuple[float, float]:
        return self.hp.lam, self.hp.epsilon

    def stage_ends_before(self, r: int) -> bool:
        return False

    def _new_stage(self) -> None:
        old = self.stage
        start = self.output_point(old)  # warm start: last iterate or the stage's average
        self.stage = Stage(old.index + 1, start, *self.stage_params(old.index + 1), self.hp.preset, self.a)

    def output_point(self, stage: Stage):
        if self.hp.output == "average" and stage.avg_den > 0:
            return stage.avg_num / stage.avg_den
        return stage.w

    # -- one round --------------------------------------------------------------------------
    def round(self, r):
        ctx, hp = self.ctx, self.hp
        if self.stage_ends_before(r):
            self._new_stage()
        st = self.stage
        E = ctx.local_steps
        selected = ctx.sample(ctx.clients_per_round)
        first_time = [int(c) not in st.has_anchor for c in selected]
        bits = [3 * ctx.model_bits + (ctx.model_bits + 2 * ctx.scalar_bits) * f for f in first_time]
        yield Broadcast(selected, bits)
        st.has_anchor.update(int(c) for c in selected)
        rr = st.rounds
        shared = {
            "alpha_r": alpha(rr, hp.preset, self.a),
            "A_r": alpha_sum(rr, hp.preset, self.a),
            "mu": hp.mu,
            "gamma": self.gamma,
            "E": E,
            "anchor": st.anchor,
            "wt": st.wt,
            "lam": st.lam,
            "eps": st.eps,
            "reg": self.reg,
            "mode": hp.cprox_mode,
            "iters": hp.cprox_iters,
            "grad_scale": hp.grad_scale,
        }
        carry = {"g": st.g.expand(len(selected), -1).clone(), "boundary": st.g.new_zeros(len(selected))}
        result = yield Train(
            selected, st.w.float(), E, c_fedda_step, shared=shared, carry=carry, uploads=("g",)
        )  # the server aggregates the dual sums g_i
        arrived = yield Upload(selected, ctx.model_bits)
        st.rounds += 1
        self.client_boundary_steps += int(result.carry["boundary"].sum())
        if not arrived.any():
            return
        st.g = weighted_sum(result.carry["g"][arrived], aggregation_weights(ctx, hp, selected[arrived]))
        centre, tau = _centre_and_threshold(st.g, shared)
        st.w = cprox(centre, tau, st.anchor, st.eps, self.reg, hp.cprox_mode, SERVER_MAX_ITERS, SERVER_TOL)
        st.wt = st.wt + alpha(rr + 1, hp.preset, self.a) * st.w
        st.avg_num = st.avg_num + shared["alpha_r"] * st.w
        st.avg_den += shared["alpha_r"]

    @property
    def model(self):
        return self.output_point(self.stage).float()

    def metrics(self):
        st = self.stage
        used = float(reg_value(st.w - st.anchor, self.reg)) / st.eps
        return {
            "reg": regularizer_value(st.w, self.reg, st.lam),
            "stage": st.index,
            "constraint_used": used,
            "client_boundary_steps": self.client_boundary_steps,
        }
