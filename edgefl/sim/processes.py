"""Components named in the scenario file: ``[[process]]`` tables (docs/architecture.md, "Adding a physical
process"). ``name`` is a built-in below, an installed package's entry point (group ``edgefl.processes``) or
``"package.module:Class"`` (an :class:`~edgefl.sim.component.Component` subclass); the table's other keys
are the class's own (its ``Params``)."""

from __future__ import annotations

from edgefl.plugins import returned_fault
from edgefl.sim.component import Component
from plugin_registry import Registry, subclass_of

PROCESSES = Registry.of("process[].name", {"thermal": "edgefl.sim.thermal:Thermal"}, subclass_of(Component))
ENTRY_POINT_GROUP = PROCESSES.group


def names() -> list[str]:
    return PROCESSES.names()


def get(name: str) -> type[Component]:
    """The component class of ``name``; UnknownPlugin (a ValueError) saying why there is none."""
    return PROCESSES.get(name)


def build_processes(sections, network, population, seed: int) -> list[Component]:
    """The components of a scenario's ``[[process]]`` tables (``sections``: its ProcessSections), in their order."""
    built = []
    for p in sections:
        cls = get(p.name)
        component = cls.from_scenario(p.params(), network, population, seed)
        if not isinstance(component, Component):
            raise returned_fault(
                cls,
                cls.from_scenario,
                component,
                "expected the component, an instance of an edgefl.sim.component.Component subclass",
                f"the process {p.name!r}",
            )
        built.append(component)
    return built
