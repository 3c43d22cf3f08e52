"""A device battery: a capacity in J that draws deplete."""

from __future__ import annotations

import math


class Battery:
    """Battery of ``capacity_j`` joules (``math.inf`` for mains power).

    ``draw(j)`` takes ``j`` joules and returns True while the battery can supply them.
    A draw larger than what is left empties it and returns False; from then on every
    draw returns False (the device is dead).
    """

    __slots__ = ("capacity_j", "remaining_j", "depleted")

    def __init__(self, capacity_j: float):
        capacity_j = float(capacity_j)
        if not capacity_j >= 0:
            raise ValueError(f"capacity_j must be >= 0, got {capacity_j}")
        self.capacity_j = capacity_j
        self.remaining_j = capacity_j
        self.depleted = False

    @property
    def drawn_j(self) -> float:
        """Energy taken so far in J (inf capacity: always 0)."""
        return 0.0 if math.isinf(self.capacity_j) else self.capacity_j - self.remaining_j

    def can_supply(self, joules: float) -> bool:
        """Whether ``joules`` could be drawn without depleting the battery."""
        return not self.depleted and joules <= self.remaining_j

    def draw(self, joules: float) -> bool:
        """Take ``joules`` (>= 0). True if supplied; False if the battery is (now) depleted."""
        joules = float(joules)
        if not joules >= 0:
            raise ValueError(f"joules must be >= 0, got {joules}")
        if self.depleted:
            return False
        if joules <= self.remaining_j:
            self.remaining_j -= joules
            return True
        self.remaining_j = 0.0
        self.depleted = True
        return False

    def __repr__(self) -> str:
        return f"Battery(capacity_j={self.capacity_j:g}, remaining_j={self.remaining_j:g}, depleted={self.depleted})"
