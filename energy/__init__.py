"""edgefl energy model: compute, radio and idle energy, the per-client ledger, batteries.

Pure numpy; SI units (J, W, s, Hz, cycles). See docs/model.md for every equation.
"""

from .battery import BatteryBank
from .compute import DEFAULT_KAPPA, compute_energy_j, compute_energy_unchecked_j, compute_time_s, cycles_per_step
from .drdm import drdm_total_energy_j
from .ledger import CATEGORIES, EnergyLedger
from .radio import (
    downlink_energy_j,
    downlink_energy_unchecked_j,
    idle_energy_j,
    idle_energy_unchecked_j,
    promotion_energy_j,
    promotion_energy_unchecked_j,
    tail_energy_j,
    tail_energy_unchecked_j,
    uplink_energy_j,
    uplink_energy_unchecked_j,
)

__all__ = [
    "CATEGORIES",
    "DEFAULT_KAPPA",
    "BatteryBank",
    "EnergyLedger",
    "compute_energy_j",
    "compute_energy_unchecked_j",
    "compute_time_s",
    "cycles_per_step",
    "downlink_energy_j",
    "downlink_energy_unchecked_j",
    "drdm_total_energy_j",
    "idle_energy_j",
    "idle_energy_unchecked_j",
    "promotion_energy_j",
    "promotion_energy_unchecked_j",
    "tail_energy_j",
    "tail_energy_unchecked_j",
    "uplink_energy_j",
    "uplink_energy_unchecked_j",
]
