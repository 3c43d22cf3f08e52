"""Client selection policies (docs/selection.md). ``[selection] name`` picks one: a built-in below, a user's
class as ``"package.module:Class"`` (a :class:`~edgefl.selection.base.Policy` subclass), or a name an installed
package registers under the entry-point group ``edgefl.selection``."""

from __future__ import annotations

from edgefl.selection.base import NoPolicy, Policy, Selection, SelectionParams, SelectionView
from plugin_registry import Registry, subclass_of

REGISTRY: dict[str, str] = {
    "uniform": "edgefl.selection.uniform:Uniform",
    "fedcs": "edgefl.selection.fedcs:FedCS",
    "best_channel": "edgefl.selection.best_channel:BestChannel",
    "energy_aware": "edgefl.selection.energy_aware:EnergyAware",
    "oort": "edgefl.selection.oort:Oort",
    "power_of_choice": "edgefl.selection.power_of_choice:PowerOfChoice",
}
POLICIES = Registry.of("selection.name", REGISTRY, subclass_of(Policy))
ENTRY_POINT_GROUP = POLICIES.group  # installed plug-ins: name = "package.module:Class"


def names() -> list[str]:
    return POLICIES.names()


def get(name: str) -> type[Policy]:
    """The policy class of ``name``: a built-in, an installed plug-in (entry point ``edgefl.selection``) or
    ``"package.module:Class"``. UnknownPlugin (a ValueError) saying why there is none."""
    return POLICIES.get(name)


__all__ = [
    "POLICIES",
    "NoPolicy",
    "Policy",
    "REGISTRY",
    "Selection",
    "SelectionParams",
    "SelectionView",
    "get",
    "names",
]
