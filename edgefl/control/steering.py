"""The engine's side of a controller (docs/control.md): ask it for each round's plan and each phase's allocation,
check what it returns against the devices' bounds, and have the pricer apply the knobs.

A controller that overrides :meth:`Controller.plan` or :meth:`Controller.allocate` is served by
:class:`Steering`. The static controller (the scenario's knobs) overrides neither: it gets :class:`FixedKnobs`,
whose hooks do nothing, so nothing is asked or observed for it (as the core calls only the hooks a component
overrides). :func:`steering` picks one.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np
import torch

from algorithms.ops import Train
from edgefl.control.base import Controller, RoundPlan
from edgefl.control.observe import Observer, phase_work
from edgefl.plugins import PluginError

if TYPE_CHECKING:  # the engine imports this module: no runtime import of edgefl.sim here
    from edgefl.sim.activities import PhaseRecord


class FixedKnobs:
    """The static controller's side: the scenario's knobs, nothing asked, nothing observed, nothing charged."""

    def start_round(self, ctx, r: int) -> None:
        """Round ``r``'s plan (τ, step budgets τ_i, who may be sampled): the scenario's."""

    def train_op(self, op: Train) -> Train:
        """``op`` as the round's plan runs it: unchanged."""
        return op

    def allocate(self, phase: PhaseRecord, online: np.ndarray | None) -> None:
        """The resources of ``phase``'s clients: the scenario's."""


class Steering(FixedKnobs):
    """A controller that sets something: its plan at each round's start, its allocation before each phase."""

    def __init__(self, controller: Controller, observer: Observer, pricer, batch_size: int):
        self.controller, self.observer, self.pricer, self.batch_size = controller, observer, pricer, batch_size
        self.plan = RoundPlan()  # the round in progress's

    def start_round(self, ctx, r: int) -> None:
        """The controller's plan for round r: τ for everyone, step budgets τ_i, who may be sampled (set on the
        algorithm's context ``ctx``)."""
        plan = self.plan = self.controller.plan(self.observer.observe(r, ctx.online))
        n = ctx.num_clients
        if plan.local_steps is not None:
            if int(plan.local_steps) < 1:
                raise PluginError(f"controller {type(self.controller).__name__}: local_steps = {plan.local_steps} < 1")
            ctx.local_steps = int(plan.local_steps)
        if plan.steps is not None:
            plan.steps = _check_array(self.controller, "steps", plan.steps, n, 0, np.inf)
        if plan.participants is not None:
            allowed = np.asarray(plan.participants, dtype=bool).reshape(-1)
            if allowed.shape != (n,):
                raise ValueError(
                    f"controller {type(self.controller).__name__}: participants must be a bool array [{n}]"
                )
            ctx.online = allowed if ctx.online is None else ctx.online & allowed

    def train_op(self, op: Train) -> Train:
        """The Train op with each client's steps past its budget τ_i masked (no compute, no update)."""
        if self.plan.steps is None:
            return op
        budget = torch.as_tensor(np.asarray(self.plan.steps)[op.clients], dtype=torch.float64)
        mask = torch.arange(op.steps, dtype=torch.float64)[None, :] < budget[:, None]
        if op.step_mask is not None:
            mask = mask & op.step_mask.to(torch.bool)
        return dataclasses.replace(op, step_mask=mask)

    def allocate(self, phase: PhaseRecord, online: np.ndarray | None) -> None:
        """The controller's resources for this phase's clients, checked against the devices' bounds, applied
        by the pricer."""
        controller, limits = self.controller, self.controller.ctx.devices
        work = phase_work(controller.ctx, phase, self.batch_size)
        self.observer.remember(work)
        allocation = controller.allocate(self.observer.observe(phase.round, online), work)
        if allocation is not None:
            n = controller.ctx.num_clients
            if allocation.cpu_hz is not None:
                allocation.cpu_hz = _check_array(
                    controller, "cpu_hz", allocation.cpu_hz, n, limits.cpu_hz_min, limits.cpu_hz_max
                )
            if allocation.tx_power_w is not None:
                allocation.tx_power_w = _check_array(
                    controller, "tx_power_w", allocation.tx_power_w, n, limits.tx_power_w_min, limits.tx_power_w_max
                )
            if allocation.band_share is not None:
                share = allocation.band_share = _check_array(controller, "band_share", allocation.band_share, n, 0, 1)
                uploading = work.clients[work.upload_bits[work.clients] > 0]
                if share.sum() > 1 + 1e-9 or (share[uploading] <= 0).any():
                    raise ValueError(
                        f"controller {type(controller).__name__}: band shares must sum to <= 1 and be "
                        f"> 0 for every client uploading in the phase (sum {share.sum():.6g})"
                    )
        self.pricer.allocate(allocation)


def steering(controller: Controller, observer: Observer, pricer, batch_size: int) -> FixedKnobs:
    """The engine's side of ``controller``: :class:`Steering` where it sets something, else :class:`FixedKnobs`."""
    return Steering(controller, observer, pricer, batch_size) if controller.steers() else FixedKnobs()


def _check_array(controller, name: str, values, n: int, low, high) -> np.ndarray:
    """A controller's knob as a float array [n] within [low, high] (a relative tolerance of 1e-9)."""
    arr = np.asarray(values, dtype=np.float64).reshape(-1)
    who = type(controller).__name__
    if arr.shape != (n,) or not np.isfinite(arr).all():
        raise PluginError(f"controller {who}: {name} must be {n} finite numbers")
    low, high = np.broadcast_to(low, (n,)), np.broadcast_to(high, (n,))
    if (arr < low * (1 - 1e-9)).any() or (arr > high * (1 + 1e-9)).any():
        bad = int(np.flatnonzero((arr < low * (1 - 1e-9)) | (arr > high * (1 + 1e-9)))[0])
        raise PluginError(
            f"controller {who}: {name}[{bad}] = {arr[bad]:.6g} is outside [{low[bad]:.6g}, {high[bad]:.6g}]"
        )
    return np.clip(arr, low, high)
