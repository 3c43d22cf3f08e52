"""Federated algorithms. Each module defines one :class:`~algorithms.base.Algorithm`.

The registry maps ``algorithm.name`` in a scenario to ``module:Class``; modules are
imported only when used.
"""

from __future__ import annotations

from algorithms.base import Algorithm, Context, HyperParams
from plugin_registry import Registry, UnknownPlugin, subclass_of

REGISTRY: dict[str, str] = {
    "fedavg": "algorithms.fedavg:FedAvg",
    "drdm": "algorithms.drdm:DRDM",
    "drfa": "algorithms.drfa:DRFA",
    "scaffold": "algorithms.scaffold:Scaffold",
    "scaff_pd": "algorithms.scaff_pd:ScaffPD",
    "feddyn": "algorithms.feddyn:FedDyn",
    "fedprox": "algorithms.fedprox:FedProx",
    "hierfavg": "algorithms.hierfavg:HierFAVG",
    # other papers' algorithms: partial model averaging, FedALIGN, composite-objective dual averaging
    "partial_avg": "algorithms.partial_avg:PartialAvg",
    "periodic_avg": "algorithms.partial_avg:PeriodicAvg",
    "fedalign": "algorithms.fedalign:FedAlign",
    "fedda": "algorithms.fedda:FedDA",
    "fedmid": "algorithms.fedmid:FedMiD",
    "fast_fedda": "algorithms.fast_fedda:FastFedDA",
    "c_fedda": "algorithms.c_fedda:CFedDA",
    "mc_fedda": "algorithms.mc_fedda:MCFedDA",
    # asynchronous servers: one round is one server update
    "fedasync": "algorithms.fedasync:FedAsync",
    "fedbuff": "algorithms.fedbuff:FedBuff",
}


ALGORITHMS = Registry.of("algorithm.name", dict(sorted(REGISTRY.items())), subclass_of(Algorithm))
ENTRY_POINT_GROUP = ALGORITHMS.group  # installed plug-ins: name = "package.module:Class"


def names() -> list[str]:
    """The built-in algorithms and the installed plug-ins."""
    return sorted(ALGORITHMS.names())


def get(name: str) -> type[Algorithm]:
    """The Algorithm class of ``name``: a built-in, an installed plug-in (entry point ``edgefl.algorithms``)
    or ``"package.module:Class"`` (any module on the Python path). UnknownPlugin with a message otherwise."""
    return ALGORITHMS.get(name)


def is_algorithm(name: str) -> bool:
    """Whether ``name`` names an algorithm :func:`get` can load."""
    return name in ALGORITHMS


__all__ = [
    "ALGORITHMS",
    "Algorithm",
    "Context",
    "HyperParams",
    "REGISTRY",
    "UnknownPlugin",
    "get",
    "is_algorithm",
    "names",
]
