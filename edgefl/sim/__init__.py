"""The simulator: an op interpreter (:class:`Engine`) and the pricers that charge time and energy.

- :class:`SimPyPricer`: discrete-event co-simulation (SimPy) of devices and channel.
- :class:`IdealPricer`: zero time, zero energy, everyone finishes (pure learning runs).
"""

from edgefl.sim.activities import Activity, Event, PhaseRecord
from edgefl.sim.engine import Engine, RoundRecord, reprice
from edgefl.sim.ideal import IdealPricer
from edgefl.sim.pricer import SimPyPricer

__all__ = ["Activity", "Event", "PhaseRecord", "Engine", "RoundRecord", "reprice", "IdealPricer", "SimPyPricer"]
