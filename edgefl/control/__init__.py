"""Controllers of per-device knobs (docs/control.md). ``[control] name`` picks one: a built-in below,
or a user's class as ``"package.module:Class"`` (a :class:`~edgefl.control.base.Controller` subclass)."""

from __future__ import annotations

import importlib

from edgefl.control.base import (
    Allocation,
    ControlContext,
    ControlParams,
    Controller,
    DeviceLimits,
    Observation,
    RoundPlan,
    Work,
)

REGISTRY: dict[str, str] = {
    "static": "edgefl.control.base:Controller",
    "deadline_fit": "edgefl.control.deadline_fit:DeadlineFit",
    "min_energy": "edgefl.control.min_energy:MinEnergy",
    "adaptive_tau": "edgefl.control.adaptive_tau:AdaptiveTau",
}


def names() -> list[str]:
    return sorted(REGISTRY)


def get(name: str) -> type[Controller]:
    """The controller class of ``name``: a built-in, or ``"package.module:Class"``. ValueError with a
    message for the scenario's error (unknown name, module not importable, not a Controller)."""
    target = REGISTRY.get(name, name)
    if ":" not in target:
        raise ValueError(f"unknown controller {name!r}; known: {', '.join(names())}, or \"package.module:Class\"")
    module_name, _, class_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"controller {name!r}: cannot import {module_name!r} ({exc})") from None
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, Controller)):
        raise ValueError(f"controller {name!r}: {module_name}.{class_name} is not an edgefl.control.Controller subclass")
    return cls


__all__ = ["Allocation", "ControlContext", "ControlParams", "Controller", "DeviceLimits", "Observation",
           "REGISTRY", "RoundPlan", "Work", "get", "names"]
