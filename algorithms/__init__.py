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


def names() -> list[str]:
    return sorted(REGISTRY)


def get(name: str) -> type[Algorithm]:
    """The Algorithm class registered as ``name`` (KeyError with the known names)."""
    try:
        target = REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown algorithm {name!r}; known: {', '.join(names())}") from None
    module, cls = target.split(":")
    return getattr(importlib.import_module(module), cls)


__all__ = ["Algorithm", "Context", "HyperParams", "REGISTRY", "get", "names"]
