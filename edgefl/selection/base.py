"""Client selection policies: who trains each round (docs/selection.md).

An algorithm that accepts a policy (``Algorithm.accepts_selection``) samples its clients through
``Context.sample(m)``; with a policy, that call returns the clients the policy picks instead of a uniform
draw. A policy sees only what a base station knows at the start of the round (:class:`SelectionView`):
the controllers' :class:`~edgefl.control.Observation` (mean channel, battery levels, energy so far, each
device's last work), who is online, each client's duration and training loss in the rounds it took part
in, and, for a policy that asks for them (:meth:`Policy.candidates`), the losses of this round's
candidates at the current global model, queried and charged as a :class:`~algorithms.ops.Query`. Nothing
of the future draws (fading, stragglers, availability) is known.

Write one by subclassing :class:`Policy` (its own keys in a nested ``Params`` model) and name it in the
scenario: ``[selection] name = "package.module:Class"``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np
from pydantic import ConfigDict

from algorithms.ops import Evaluate, Query
from edgefl.control.base import ControlContext, Observation
from edgefl.control.estimate import download_s, equal_share, promotion_s, uplink_rate_bps
from edgefl.numeric_keys import NumbersOnly
from edgefl.plugins import checked_clients

if TYPE_CHECKING:  # the engine imports the runner's objects, not this module; torch: not while validating
    import torch

    from edgefl.control.observe import Observer


class SelectionParams(NumbersOnly):
    """A policy's own ``[selection]`` keys (besides ``name``): subclass it with typed fields and defaults;
    unknown keys are rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


@dataclass
class SelectionView:
    """What the server knows when it selects (arrays [N])."""

    round: int  # 0-based
    obs: Observation  # the mean channel, battery levels, energy so far, each device's last work
    online: np.ndarray  # bool: who can be selected (online, and allowed by the controller's plan)
    duration_s: np.ndarray  # each client's duration in the last round it took part in (NaN: never took part)
    loss: np.ndarray  # each client's training loss in the last round it took part in (NaN: never)
    samples: np.ndarray  # the samples it trained on in that round (|B_i|; 0: never)
    last_round: np.ndarray  # the round it last took part in (0-based; -1: never)
    queried_loss: np.ndarray  # this round's loss at the global model of the candidates queried (NaN: not)
    train_sizes: np.ndarray  # each client's training samples (what it reported when it joined)


class Policy:
    """Base class. Subclasses set ``name`` and ``Params`` and implement :meth:`select`."""

    name: ClassVar[str] = ""
    Params: ClassVar[type[SelectionParams]] = SelectionParams

    def __init__(self, ctx: ControlContext, params: SelectionParams | None = None):
        self.ctx = ctx  # the controllers' context: N, m, τ, model size, network, device limits, and
        self.rng = ctx.rng  # the policy's own stream (seeded from run.seed)
        self.params = params if params is not None else self.Params()

    @classmethod
    def check_scenario(cls, scenario) -> None:
        """Raise ValueError (shown as the scenario's error) when the scenario cannot run this policy."""

    def candidates(self, view: SelectionView, k: int) -> np.ndarray | None:
        """Clients whose loss at the current global model the server queries before selecting ``k`` (each
        query is charged: the model down, a forward pass over the client's training set, a scalar up); None:
        no query."""
        return None

    def select(self, view: SelectionView, k: int) -> np.ndarray:  # pragma: no cover - interface
        """``k`` distinct clients among ``view.online`` (fewer if fewer are online)."""
        raise NotImplementedError

    def metrics(self) -> dict[str, float]:
        """Extra metrics.csv columns of the round just run (the same keys every round)."""
        return {}


# -- what the server can estimate of a client's round (the mean channel, the device's nominal knobs) ---------
def estimated_times_s(
    ctx: ControlContext, obs: Observation, k: int, band_share: float | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each device's estimated (download + access latency, compute, upload) times (s) for its last work
    (``obs.work``) with ``k`` devices selected: the download at its mean rate (edgefl.control.estimate), the
    compute at its nominal CPU frequency (t = C / f; stragglers not foreseen), the upload at its nominal power
    over ``band_share`` of the uplink band (None: the share a device gets when the m selected share it
    equally)."""
    work, limits = obs.work, ctx.devices
    share = equal_share(ctx) if band_share is None else band_share
    with np.errstate(divide="ignore"):
        down_s = download_s(ctx, obs, work.download_bits, k) + promotion_s(ctx, obs, work.messages)
        compute_s = work.cycles / limits.cpu_hz_max
        up_s = work.upload_bits / uplink_rate_bps(ctx, obs, limits.tx_power_w_max, share)
    return down_s, compute_s, up_s


def estimated_energy_j(ctx: ControlContext, obs: Observation, k: int) -> np.ndarray:
    """Each device's estimated energy (J) for one update (its last work, ``k`` devices selected):
    E = κ·C·f² + P_static·C/f + (p/η + P_circuit)·t_up + P_rx·t_down (docs/model.md; radio tails and
    idle power left out)."""
    down_s, compute_s, up_s = estimated_times_s(ctx, obs, k)
    limits = ctx.devices
    eta = 1.0 if limits.pa_efficiency is None else np.asarray(limits.pa_efficiency)
    cycles, f = obs.work.cycles, limits.cpu_hz_max
    return (
        limits.kappa * cycles * f**2
        + limits.static_power_w * compute_s
        + (limits.tx_power_w_max / eta + limits.circuit_power_w) * up_s
        + limits.rx_power_w * down_s
    )


def first_k(order: np.ndarray, online: np.ndarray, k: int) -> np.ndarray:
    """The first ``k`` clients of ``order`` (client ids, best first) that are online, sorted by id."""
    chosen = [int(c) for c in order if online[c]][:k]
    return np.sort(np.asarray(chosen, dtype=np.int64))


class NoPolicy:
    """``[selection] name = "uniform"`` (the default): no policy. The algorithm samples uniformly with its own
    stream (``Context.sample``, ``ctx.selector`` None), as without a [selection] section: the same draws, in the
    same order."""

    selector = None  # Context.selector: the algorithm's own uniform draw

    def start_round(self, engine, algorithm, r: int) -> None:
        """Nothing to learn or query."""

    def metrics(self) -> dict[str, float]:
        return {}


class Selection(NoPolicy):
    """Runs a policy behind ``Context.sample``: built by edgefl.parts, called by the engine at the start of
    each round (:meth:`start_round`) and by the algorithm when it samples (``ctx.selector``: this object)."""

    def __init__(self, policy: Policy, observer: "Observer"):
        self.policy, self.observer = policy, observer
        n = policy.ctx.num_clients
        self.duration_s = np.full(n, np.nan)
        self.loss = np.full(n, np.nan)
        self.samples = np.zeros(n)
        self.last_round = np.full(n, -1, dtype=np.int64)
        self.view: SelectionView | None = None
        # the clients selected in the round in progress, the model they start from, the arrivals before it
        self._pending: tuple[int, np.ndarray, torch.Tensor, np.ndarray] | None = None
        self._events_read = 0

    @property
    def selector(self):  # type: ignore[override]  # Context.selector: this object picks the clients
        return self

    def metrics(self) -> dict[str, float]:
        """The policy's metrics.csv columns of the round just run."""
        return self.policy.metrics()

    def start_round(self, engine, algorithm, r: int) -> None:
        """What the server knows at the start of round ``r``: the last round's durations and losses, the
        observation, and the candidates' losses if the policy queries them (a Query the engine charges)."""
        self._learn_last_round(engine)
        ctx = algorithm.ctx
        n = ctx.num_clients
        online = np.ones(n, dtype=bool) if ctx.online is None else np.asarray(ctx.online, dtype=bool)
        obs = self.observer.observe(r, ctx.online)
        self.view = view = SelectionView(
            round=r,
            obs=obs,
            online=online,
            duration_s=self.duration_s.copy(),
            loss=self.loss.copy(),
            samples=self.samples.copy(),
            last_round=self.last_round.copy(),
            queried_loss=np.full(n, np.nan),
            train_sizes=np.asarray(ctx.train_sizes),
        )
        candidates = self.policy.candidates
        asked = candidates(view, ctx.selection_size(ctx.clients_per_round))
        if asked is not None:  # the clients asked: any distinct clients (a query reaches only those online)
            asked = np.sort(checked_clients(self.policy, candidates, asked, n, n))
        if asked is not None and len(asked):
            values, arrived = engine._handle(
                Query(asked, algorithm.model, down_bits=ctx.model_bits, up_bits=ctx.scalar_bits, full=True)
            )
            values = values.double().numpy()
            view.queried_loss[asked[arrived]] = values[arrived]  # a report lost on the way is not known
        self._pending = (r, np.zeros(0, dtype=np.int64), algorithm.model.detach().clone(), engine.arrived_count.copy())

    def __call__(self, k: int) -> np.ndarray:
        """The ``k`` clients the policy picks this round (``Context.sample``), sorted."""
        if self.view is None:
            raise RuntimeError("a selection policy samples only inside a round (Engine.run_round)")
        online = self.view.online
        select = self.policy.select
        chosen = checked_clients(self.policy, select, select(self.view, k), len(online), k, online, at_least=1)
        if self._pending is not None:
            r, before, model, arrived = self._pending
            self._pending = (r, np.union1d(before, chosen), model, arrived)
        return np.sort(chosen)

    def _learn_last_round(self, engine) -> None:
        """The reports of the clients selected last round whose upload arrived: the duration of their round
        (from their first activity to the end of their last one, radio tails aside) and their training loss."""
        if self._pending is None:
            return
        r, chosen, model, arrived_before = self._pending
        self._pending = None
        reported = chosen[engine.arrived_count[chosen] > arrived_before[chosen]]
        start = np.full(len(self.duration_s), np.inf)
        end = np.full(len(self.duration_s), -np.inf)
        events = engine.pricer.events or []
        for event in events[self._events_read :]:
            if event.round == r and event.kind not in ("tail", "idle"):
                start[event.client] = min(start[event.client], float(event.start_s))
                end[event.client] = max(end[event.client], float(event.end_s))
        self._events_read = len(events)
        timed = reported[np.isfinite(start[reported])]
        self.duration_s[timed] = end[timed] - start[timed]
        if len(reported):
            # the client's loss at the model it started from, over its training set: what its forward passes
            # compute anyway (not charged)
            losses = engine.executor.evaluate(Evaluate(reported, model, "loss", full=True))
            self.loss[reported] = losses.double().numpy()
            self.samples[reported] = self.policy.ctx.local_steps * self.policy.ctx.batch_size
            self.last_round[reported] = r
