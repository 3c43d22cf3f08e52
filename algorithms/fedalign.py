"""FedALIGN (Ravi & Shomorony): prioritized FL that lets aligned non-priority clients help.

Paper: "Utilizing Free Clients in Federated Learning for Focused Model Enhancement",
Sec. 3.1. Priority set P (``ctx.client_roles == "priority"``, or the
``priority_clients`` key); the objective is F = sum_{k in P} p_k F_k, p_k = D_k / sum_P D.
Round r (W = ``warmup_rounds``, eps_r the threshold):
  r < W or eps_r = 0 (priority only, = FedAvg on P):
     P_r <- model; each trains locally; uploads its model; w <- sum_{P_r} D_k w^k / sum D_k.
  otherwise:
   1. P_r <- model; each evaluates L_k = F_k(w_r) on its full training set and uploads the scalar;
      then trains locally (while the non-priority clients evaluate) .
   2. F_r = sum D_k L_k / sum D_k over the received L_k.
   3. Q_r are evaluated at w_r with a Query: model + (F_r, eps_r) down, L_j = F_j(w_r) on the full
      training set, the scalar L_j up (``report = 'query'``, default). With ``report = 'opt_in'``
      (the protocol of the paper, Sec. 3.1) only clients with L_j <= F_r + eps_r upload L_j;
      the others stop.
   4. Server accepts j iff |F_r - L_j| <= eps_r and sends a verdict (``verdict_bits``): to the
      accepted clients (query) or to every opted-in client (opt_in). Accepted clients A_r train
      locally; rejected ones stop, having paid only the evaluation (and its small messages).
   5. P_r and A_r upload their models; w <- sum_{S} D_k w^k / sum_S D_k, S = arrived of P_r u A_r.
  eps = inf is FedAvg-All after the warm-up (everyone trains, no evaluations).
LocalTrain: ``local_epochs`` E epochs = ceil(E D_k / B) minibatch steps per client (per-client
step masks), or ``algorithm.local_steps`` steps for everyone when unset; plain SGD, or FedProx
(``prox_mu`` > 0: gradient + mu (w - w_r)).
Partial participation (``participation`` = c): max(1, round(c |P|)) priority and round(c |Q|)
non-priority clients per round, uniformly without replacement.

Randomness: priority sampling uses the algorithm's stream exactly as FedAvg's ``uniform_sample``
does on the priority clients alone; non-priority sampling uses a child stream (spawned, so it
does not advance the main one). With eps = 0 the ops and numbers are FedAvg's on P, bit for bit.
Both reports accept the same clients (|F_r - L_j| <= eps_r implies L_j <= F_r + eps_r); they differ
only in the small messages. Traffic: priority: model down, (scalar up), model up; non-priority:
model + 2 scalars down, one evaluation, scalar up (query: always; opt_in: if opted in), verdict
down (accepted / opted in), and only if accepted: local training and a model up.
"""

from __future__ import annotations

import math
from typing import Literal, Optional

import numpy as np
from pydantic import Field

from algorithms.base import Algorithm, HyperParams, uniform_sample, weighted_mean
from algorithms.ops import Broadcast, Evaluate, Query, Train, Upload, sgd_step

PRIORITY = "priority"


class FedAlignParams(HyperParams):
    epsilon: float = Field(
        0.2,
        ge=0,
        allow_inf_nan=True,
        description="eps: accept j iff |F(w_r) - F_j(w_r)| <= eps "
        "(0: priority only = FedAvg-P; inf: FedAvg-All after warm-up).",
    )
    epsilon_schedule: Literal["constant", "linear_decay"] = Field(
        "constant", description="linear_decay: eps for r < R/2, then eps (R - r)/(R/2), R = decay_rounds."
    )
    decay_rounds: Optional[int] = Field(None, ge=2, description="R of the linear_decay schedule.")
    warmup_rounds: int = Field(20, ge=0, description="W rounds of priority-only training first.")
    local_epochs: Optional[float] = Field(
        None, gt=0, description="E epochs of local SGD (ceil(E D_k / B) steps); unset: algorithm.local_steps."
    )
    participation: Optional[float] = Field(
        None, gt=0, le=1, description="c: sample round(c|P|) priority and round(c|Q|) other clients (unset: all)."
    )
    prox_mu: float = Field(0.0, ge=0, description="FedProx variant: mu of (mu/2)||w - w_r||^2 (0: plain SGD).")
    priority_clients: Optional[list[int]] = Field(
        None, description="Priority client ids (default: the data set's client roles)."
    )
    verdict_bits: int = Field(8, ge=0, description="Size of the accept/reject verdict message.")
    report: Literal["query", "opt_in"] = Field(
        "query", description="query: every evaluated client reports its loss; opt_in: only if L_j <= F_r + eps."
    )


def prox_sgd_step(w, grad, carry, client, shared, k):
    """w <- w - lr (grad + mu (w - w_r)) (mu = 0: plain SGD)."""
    return w - shared["lr"] * (grad + shared["mu"] * (w - shared["anchor"])), carry


class FedAlign(Algorithm):
    name = "fedalign"
    Params = FedAlignParams

    @classmethod
    def check_scenario(cls, scenario) -> None:
        hp = scenario.algorithm.hyperparams(cls.name)
        n = scenario.data.num_clients
        if hp.priority_clients is not None:
            if not hp.priority_clients or min(hp.priority_clients) < 0 or max(hp.priority_clients) >= n:
                raise ValueError(f"algorithm.fedalign.priority_clients must be client ids in 0..{n - 1}")
        elif not type(scenario.data).has_client_roles:
            raise ValueError(
                f"fedalign needs priority clients: data.name = {scenario.data.name!r} has no client "
                'roles; use a prioritized data set (e.g. data.name = "synthetic_priority") or set '
                "algorithm.fedalign.priority_clients = [0, 1, ...]"
            )
        if hp.epsilon_schedule == "linear_decay" and hp.decay_rounds is None:
            raise ValueError(
                'algorithm.fedalign.epsilon_schedule = "linear_decay" needs algorithm.fedalign.decay_rounds'
            )

    def __init__(self, ctx):
        super().__init__(ctx)
        hp = self.hp
        if hp.priority_clients is not None:
            priority = np.unique(np.asarray(hp.priority_clients, dtype=np.int64))
            if priority.size == 0 or priority.min() < 0 or priority.max() >= ctx.num_clients:
                raise ValueError(f"fedalign: priority_clients must be ids in 0..{ctx.num_clients - 1}")
        elif ctx.client_roles is not None:
            priority = np.flatnonzero(np.asarray(ctx.client_roles) == PRIORITY)
        else:
            raise ValueError(
                "fedalign needs priority clients: a data set with client roles "
                "(e.g. data.name = 'synthetic_priority') or algorithm.fedalign.priority_clients"
            )
        if priority.size == 0:
            raise ValueError("fedalign: no priority client")
        if hp.epsilon_schedule == "linear_decay" and hp.decay_rounds is None:
            raise ValueError("fedalign: epsilon_schedule = 'linear_decay' needs decay_rounds")
        self.priority = priority
        self.others = np.setdiff1d(np.arange(ctx.num_clients), priority)
        self.q_rng = ctx.rng.spawn(1)[0]  # non-priority sampling; does not advance ctx.rng
        self.w = ctx.init_params.clone()
        self.last = {"accepted": 0, "opted_in": 0, "evaluated": 0, "F_r": float("nan"), "epsilon": 0.0}
        self.accept_log: list[np.ndarray] = []  # accepted client ids per round
        self.eval_log: list[np.ndarray] = []  # non-priority clients that evaluated, per round

    # -- pieces -----------------------------------------------------------------------------
    def epsilon_at(self, r: int) -> float:
        hp = self.hp
        if hp.epsilon_schedule == "constant" or math.isinf(hp.epsilon):
            return hp.epsilon
        half = hp.decay_rounds / 2
        return hp.epsilon if r < half else max(0.0, hp.epsilon * (hp.decay_rounds - r) / half)

    def _sample(self, ids, rng, minimum):
        if self.ctx.online is not None:  # only the clients online at the start of the round
            ids = ids[self.ctx.online[ids]]
        c = self.hp.participation
        if c is None:
            return ids
        k = max(minimum, int(round(c * len(ids))))
        k = min(k, len(ids))
        return ids[uniform_sample(rng, len(ids), k)] if k else ids[:0]

    def _train(self, clients):
        import torch

        ctx, hp = self.ctx, self.hp
        if hp.prox_mu > 0:
            step, shared = prox_sgd_step, {"lr": ctx.lr, "mu": hp.prox_mu, "anchor": self.w}
        else:  # exactly FedAvg's step
            step, shared = sgd_step, {"lr": ctx.lr}
        if hp.local_epochs is None:
            return (yield Train(clients, self.w, ctx.local_steps, step, shared=shared))
        steps = np.ceil(hp.local_epochs * ctx.train_sizes[clients] / ctx.batch_size).astype(np.int64)
        mask = torch.from_numpy(np.arange(steps.max())[None, :] < steps[:, None])
        return (yield Train(clients, self.w, int(steps.max()), step, shared=shared, step_mask=mask))

    def _aggregate(self, params, clients, arrived):
        if arrived.any():
            self.w = weighted_mean(params[arrived], self.ctx.train_sizes[clients[arrived]])

    # -- one round --------------------------------------------------------------------------
    def round(self, r):
        import torch

        ctx, hp = self.ctx, self.hp
        p_r = self._sample(self.priority, ctx.rng, 1)
        eps = self.epsilon_at(r)
        self.last = {"accepted": 0, "opted_in": 0, "evaluated": 0, "F_r": float("nan"), "epsilon": eps}
        accepted = self.others[:0]
        evaluated = self.others[:0]
        if r < hp.warmup_rounds or eps == 0 or len(self.others) == 0:
            yield Broadcast(p_r, ctx.model_bits)
            result = yield from self._train(p_r)
            arrived = yield Upload(p_r, ctx.model_bits)
            self._aggregate(result.params, p_r, arrived)
        elif math.isinf(eps):  # FedAvg-All after the warm-up
            q_r = self._sample(self.others, self.q_rng, 0)
            everyone = np.sort(np.concatenate([p_r, q_r]))
            yield Broadcast(everyone, ctx.model_bits)
            result = yield from self._train(everyone)
            arrived = yield Upload(everyone, ctx.model_bits)
            self._aggregate(result.params, everyone, arrived)
            accepted = q_r
        else:
            # 1. priority losses at w_r (full local training sets), then priority training
            yield Broadcast(p_r, ctx.model_bits)
            losses_p = yield Evaluate(p_r, self.w, "loss", full=True)
            got = yield Upload(p_r, ctx.scalar_bits)
            weights = torch.as_tensor(ctx.train_sizes[p_r[got]], dtype=torch.float64)
            f_r = float((weights * losses_p[got].to(torch.float64)).sum() / weights.sum()) if got.any() else math.nan
            result_p = yield from self._train(p_r)
            # 3. non-priority clients evaluate at w_r and opt in
            q_r = self._sample(self.others, self.q_rng, 0)
            if len(q_r) and not math.isnan(f_r):
                evaluated = q_r
                down = ctx.model_bits + 2 * ctx.scalar_bits
                if hp.report == "query":
                    losses_t, reached = yield Query(q_r, self.w, down, ctx.scalar_bits, "loss", full=True)
                    losses_q = losses_t.to(torch.float64).numpy()
                    opted = losses_q <= f_r + eps
                    heard, heard_losses = q_r[reached], losses_q[reached]
                    accepted = heard[np.abs(f_r - heard_losses) <= eps]
                    if len(accepted):  # 4. the verdict to the accepted clients
                        yield Broadcast(accepted, hp.verdict_bits)
                else:
                    yield Broadcast(q_r, down)
                    losses_q = (yield Evaluate(q_r, self.w, "loss", full=True)).to(torch.float64).numpy()
                    opted = losses_q <= f_r + eps
                    if opted.any():
                        reached = yield Upload(q_r[opted], ctx.scalar_bits)
                        heard = q_r[opted][reached]
                        heard_losses = losses_q[opted][reached]
                        yield Broadcast(heard, hp.verdict_bits)  # 4. verdicts to the opted-in clients
                        accepted = heard[np.abs(f_r - heard_losses) <= eps]
                self.last.update(opted_in=int(opted.sum()), evaluated=len(q_r), F_r=f_r)
            # 5. model uploads of P_r and A_r
            if len(accepted):
                result_a = yield from self._train(accepted)
                clients = np.concatenate([p_r, accepted])
                params = torch.cat([result_p.params, result_a.params])
            else:
                clients, params = p_r, result_p.params
            arrived = yield Upload(clients, ctx.model_bits)
            self._aggregate(params, clients, arrived)
        self.last["accepted"] = len(accepted)
        self.accept_log.append(np.asarray(accepted))
        self.eval_log.append(np.asarray(evaluated))

    @property
    def model(self):
        return self.w

    def metrics(self):
        return {k: float(v) for k, v in self.last.items()}
