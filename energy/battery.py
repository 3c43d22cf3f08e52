"""Device batteries with energy harvesting, for all devices at once. Units: J, W, s.

Level L_i in [0, C_i] (capacity C_i; ``inf`` for mains power). Over a time dt a device harvests
h_i·dt (solar, RF, wireless charging: a constant power h_i in W), capped at C_i; what it spends
is drawn from L_i. A device whose level is below its reserve R_i is unavailable until harvesting
brings it back: at t + (R_i − L_i) / h_i (never if h_i = 0).

What was harvested (after the cap) and what could not be drawn (a level at 0) are kept, so that
C_i − L_i + harvested_i = drawn_i holds exactly, and drawn_i = charged_i where nothing went unpaid.
"""

from __future__ import annotations

from contextlib import nullcontext
from math import inf

import numpy as np

FEW_DRAWN = 8  # BatteryBank.draw: at most this many devices drawn one by one in floats (benchmarks [8]: 1-28 a draw)


def _drawn(level, joules, maximum):
    """``joules`` drawn from ``level`` (arrays with ``maximum`` = np.maximum, or one device's floats with ``max``): the
    level after it (never below 0), what it lacked (unpaid), and the level before that floor (inf - finite: inf)."""
    left = level - joules
    return maximum(0.0, left), maximum(0.0, -left), left


class BatteryBank:
    __slots__ = ("capacity_j", "reserve_j", "harvest_w", "level_j", "harvested_j", "unpaid_j", "_finite", "_rounding")

    def __init__(self, capacity_j, reserve_j=0.0, harvest_w=0.0):
        self.capacity_j = np.asarray(capacity_j, dtype=np.float64).copy()
        n = self.capacity_j.shape
        self.reserve_j = np.broadcast_to(np.asarray(reserve_j, dtype=np.float64), n).copy()
        self.harvest_w = np.broadcast_to(np.asarray(harvest_w, dtype=np.float64), n).copy()
        if np.any(~(self.capacity_j > 0)) or np.any(self.reserve_j < 0) or np.any(self.harvest_w < 0):
            raise ValueError("battery capacities must be > 0, reserves and harvest powers >= 0")
        if np.any(self.reserve_j >= self.capacity_j):
            raise ValueError("a battery reserve must be below its capacity")
        # Every capacity finite (no mains power): every level stays finite, so the masks for inf levels are not needed
        # (the same numbers without them: an asynchronous run harvests and draws about 3 times per update, benchmarks [8])
        self._finite = bool(np.isfinite(self.capacity_j).all())
        self._rounding = 1e-12 * np.minimum(self.capacity_j, 1e12)  # (:meth:`_rounding_j`: read at every phase's start)
        self._rounding.setflags(write=False)
        self.level_j = self.capacity_j.copy()  # full at the start
        self.harvested_j = np.zeros(n)  # what harvesting added (after the cap), since the start
        self.unpaid_j = np.zeros(n)  # what was to be drawn from an empty battery (J): 0 where the ledger is paid

    def harvest(self, seconds: float) -> None:
        """Add h_i · seconds to every battery, capped at its capacity."""
        if seconds > 0:
            with nullcontext() if self._finite else np.errstate(invalid="ignore"):  # inf capacity + 0 W
                level = np.minimum(self.capacity_j, self.level_j + self.harvest_w * seconds)
                gained = level - self.level_j
                self.harvested_j += gained if self._finite else np.where(np.isfinite(level), gained, 0.0)
            self.level_j = level

    def draw(self, joules) -> None:
        """Take ``joules`` [N] (>= 0) from the batteries; a level never goes below 0 (the rest: ``unpaid_j``)."""
        joules = np.asarray(joules, dtype=np.float64)
        if self._finite and joules.shape == self.level_j.shape and self._draw_few(joules):
            return
        if (joules < 0).any():  # (method calls: np.any/np.all cost more on 50 values)
            raise ValueError("joules must be >= 0")
        finite = self._finite and bool(np.isfinite(joules).all())
        with nullcontext() if finite else np.errstate(invalid="ignore"):  # inf - finite stays inf
            level, short, left = _drawn(self.level_j, joules, np.maximum)
            self.unpaid_j += short if finite else np.where(np.isfinite(left), short, 0.0)
            self.level_j = level

    def _draw_few(self, joules: np.ndarray) -> bool:
        """:meth:`draw` where only a few devices draw anything (an asynchronous server's chain or radio tail charged
        now: benchmarks [8]), each one's level in plain floats, the same operations (:func:`_drawn`): a device that
        draws 0 J keeps its level and owes nothing, as the arrays' ``level - 0`` leaves it. False (nothing drawn)
        for more devices, or for joules not finite and >= 0 (the arrays then say why)."""
        drawn = joules.nonzero()[0]
        if len(drawn) > FEW_DRAWN:
            return False
        amounts = joules[drawn].tolist()
        if not all(0.0 <= j < inf for j in amounts):  # (NaN fails too)
            return False
        level, unpaid = self.level_j.copy(), self.unpaid_j  # (a new array of levels, as the arrays' path makes)
        for c, j in zip(drawn.tolist(), amounts):
            level[c], short, _ = _drawn(float(level[c]), j, max)
            unpaid[c] += short
        self.level_j = level
        return True

    def _rounding_j(self) -> np.ndarray:
        """What counts as rounding in a level: 1e-12 of the capacity (J; made once, the capacities do not change)."""
        return self._rounding

    def available(self) -> np.ndarray:
        """Which devices are above their reserve, by more than rounding (bool [N]); an empty battery is
        never available, even with no reserve."""
        with np.errstate(invalid="ignore"):
            return self.level_j - self.reserve_j > self._rounding_j()

    def empty(self) -> np.ndarray:
        """Which batteries are empty (within rounding) (bool [N])."""
        return self.level_j <= self._rounding_j()

    def seconds_to_reserve(self) -> np.ndarray:
        """For each unavailable device, the harvesting time until it is available again: until its level is
        above the reserve by twice the rounding, so that it is :meth:`available` then (inf if it does not
        harvest); 0 for the available ones."""
        missing = np.where(self.available(), 0.0, self.reserve_j + 2 * self._rounding_j() - self.level_j)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(missing > 0, missing / self.harvest_w, 0.0)
        return np.where(np.isnan(t), np.inf, t)
