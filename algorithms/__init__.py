"""Federated algorithms. Each module defines one :class:`~algorithms.base.Algorithm`.

The registry maps ``algorithm.name`` in a scenario to ``module:Class``; modules are
imported only when used.
"""

from __future__ import annotations

import importlib

from algorithms.base import Algorithm, Context, HyperParams

REGISTRY: dict[str, str] = {
    "fedavg": "algorithms.fedavg:FedAvg",
    "drdm": "algorithms.drdm:DRDM",
    "drfa": "algorithms.drfa:DRFA",
    "scaffold": "algorithms.scaffold:Scaffold",
    "scaff_pd": "algorithms.scaff_pd:ScaffPD",
    "feddyn": "algorithms.feddyn:FedDyn",
    "fedprox": "algorithms.fedprox:FedProx",
    # other papers' algorithms: partial model averaging, FedALIGN, composite-objective dual averaging
    "partial_avg": "algorithms.partial_avg:PartialAvg",
    "periodic_avg": "algorithms.partial_avg:PeriodicAvg",
    "fedalign": "algorithms.fedalign:FedAlign",
    "fedda": "algorithms.fedda:FedDA",
    "fedmid": "algorithms.fedmid:FedMiD",
    "fast_fedda": "algorithms.fast_fedda:FastFedDA",
    "c_fedda": "algorithms.c_fedda:CFedDA",
    "mc_fedda": "algorithms.mc_fedda:MCFedDA",
}


ENTRY_POINT_GROUP = "edgefl.algorithms"  # installed plug-ins: name = "package.module:Class"


def _plugins() -> dict[str, str]:
    """Algorithms installed by other packages under the entry-point group ``edgefl.algorithms``."""
    from importlib.metadata import entry_points

    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def names() -> list[str]:
    """The built-in algorithms and the installed plug-ins."""
    return sorted({**_plugins(), **REGISTRY})


def get(name: str) -> type[Algorithm]:
    """The Algorithm class of ``name``: a built-in, an installed plug-in (entry point ``edgefl.algorithms``)
    or ``"package.module:Class"`` (any module on the Python path). KeyError with a message otherwise."""
    target = REGISTRY.get(name) or _plugins().get(name) or (name if ":" in name else None)
    if target is None:
        raise KeyError(f"unknown algorithm {name!r}; known: {', '.join(names())}, or \"package.module:Class\"")
    module, _, cls = target.partition(":")
    try:
        found = getattr(importlib.import_module(module), cls, None)
    except ImportError as exc:
        raise KeyError(f"algorithm {name!r}: cannot import {module!r} ({exc})") from None
    if not (isinstance(found, type) and issubclass(found, Algorithm)):
        raise KeyError(f"algorithm {name!r}: {module}.{cls} is not an algorithms.Algorithm subclass")
    return found


def is_algorithm(name: str) -> bool:
    """Whether ``name`` names an algorithm :func:`get` can load."""
    try:
        get(name)
    except KeyError:
        return False
    return True


__all__ = ["Algorithm", "Context", "HyperParams", "REGISTRY", "get", "is_algorithm", "names"]
