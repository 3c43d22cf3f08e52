"""Controllers of per-device knobs (docs/control.md). ``[control] name`` picks one: a built-in below,
a user's class as ``"package.module:Class"`` (a :class:`~edgefl.control.base.Controller` subclass), or
a name an installed package registers under the entry-point group ``edgefl.controllers``."""

from __future__ import annotations

from edgefl.control.base import (
    Allocation,
    ControlContext,
    Controller,
    ControlParams,
    DeviceLimits,
    Observation,
    RoundPlan,
    Work,
)
from plugin_registry import Registry, subclass_of

REGISTRY: dict[str, str] = {
    "static": "edgefl.control.base:Controller",
    "deadline_fit": "edgefl.control.deadline_fit:DeadlineFit",
    "min_energy": "edgefl.control.min_energy:MinEnergy",
    "adaptive_tau": "edgefl.control.adaptive_tau:AdaptiveTau",
}


CONTROLLERS = Registry.of("control.name", dict(sorted(REGISTRY.items())), subclass_of(Controller))
ENTRY_POINT_GROUP = CONTROLLERS.group  # installed plug-ins: name = "package.module:Class"


def names() -> list[str]:
    return CONTROLLERS.names()


def get(name: str) -> type[Controller]:
    """The controller class of ``name``: a built-in, an installed plug-in (entry point ``edgefl.controllers``)
    or ``"package.module:Class"``. UnknownPlugin (a ValueError) with a message for the scenario's error
    (unknown name, module not importable, not a Controller)."""
    return CONTROLLERS.get(name)


__all__ = [
    "CONTROLLERS",
    "Allocation",
    "ControlContext",
    "ControlParams",
    "Controller",
    "DeviceLimits",
    "Observation",
    "REGISTRY",
    "RoundPlan",
    "Work",
    "get",
    "names",
]
