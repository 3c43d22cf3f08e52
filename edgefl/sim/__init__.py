"""The simulator: an op interpreter (:class:`Engine`) and the pricers that charge time and energy.

- :class:`SimPyPricer`: the discrete-event co-simulation of devices and channel, on SimPy.
- :class:`IdealPricer`: zero time, zero energy, everyone finishes (pure learning runs).
- :func:`can_change_participation`: whether a network's channel can decide who takes part
  (then re-pricing a recorded trace is not exact).

The names below are imported from their modules on first use (PEP 562), so that what the scenario's
validation needs of this package (:mod:`edgefl.sim.processes`) does not load the engine and torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# name -> the module of this package that defines it
_DEFINED_IN = {
    "Activity": "activities",
    "Event": "activities",
    "PhaseRecord": "activities",
    "Engine": "engine",
    "Pricer": "engine",
    "RoundCost": "engine",
    "RoundRecord": "engine",
    "reprice": "engine",
    "reprice_rounds": "engine",
    "IdealPricer": "ideal",
    "can_change_participation": "participation",
    "NoDeviceAvailable": "pricer",
    "SimPyPricer": "pricer",
}
__all__ = list(_DEFINED_IN)


def __getattr__(name: str) -> Any:
    if name not in _DEFINED_IN:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_DEFINED_IN[name]}"), name)
    globals()[name] = value  # the next lookup is a plain one
    return value


if TYPE_CHECKING:  # the same names for the type checker (tests/test_layers.py checks they match _DEFINED_IN)
    from edgefl.sim.activities import Activity as Activity
    from edgefl.sim.activities import Event as Event
    from edgefl.sim.activities import PhaseRecord as PhaseRecord
    from edgefl.sim.engine import Engine as Engine
    from edgefl.sim.engine import Pricer as Pricer
    from edgefl.sim.engine import RoundCost as RoundCost
    from edgefl.sim.engine import RoundRecord as RoundRecord
    from edgefl.sim.engine import reprice as reprice
    from edgefl.sim.engine import reprice_rounds as reprice_rounds
    from edgefl.sim.ideal import IdealPricer as IdealPricer
    from edgefl.sim.participation import can_change_participation as can_change_participation
    from edgefl.sim.pricer import NoDeviceAvailable as NoDeviceAvailable
    from edgefl.sim.pricer import SimPyPricer as SimPyPricer
