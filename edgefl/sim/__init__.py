"""The simulator: an op interpreter (:class:`Engine`) and the pricers that charge time and energy.

- :class:`SimPyPricer`: the discrete-event co-simulation of devices and channel, on SimPy.
- :class:`IdealPricer`: zero time, zero energy, everyone finishes (pure learning runs).
- :func:`can_change_participation`: whether a network's channel can decide who takes part
  (then re-pricing a recorded trace is not exact).
"""

from edgefl.sim.activities import Activity, Event, PhaseRecord
from edgefl.sim.engine import Engine, Pricer, RoundCost, RoundRecord, reprice, reprice_rounds
from edgefl.sim.ideal import IdealPricer
from edgefl.sim.participation import can_change_participation
from edgefl.sim.pricer import NoDeviceAvailable, SimPyPricer

__all__ = [
    "Activity",
    "Event",
    "PhaseRecord",
    "Engine",
    "Pricer",
    "RoundCost",
    "RoundRecord",
    "reprice",
    "reprice_rounds",
    "IdealPricer",
    "SimPyPricer",
    "can_change_participation",
    "NoDeviceAvailable",
]
