"""The kinds of plug-ins, listed once (:data:`KINDS`), and one plug-in registry for every kind of code a
scenario names by name: algorithms, data sets, path-loss models, controllers, selection policies, processes
(docs/extending.md).

:data:`KINDS` is the one table of plug-in kinds: the scenario key that names one, its entry-point group, what
a found object must be, and whether a checkpoint may load classes of its module (its objects are part of a
run's saved state). The scenario (``edgefl.plugins.plugin_values``), the registries
(:meth:`Registry.of`), the checkpoint's allow-list (``edgefl.checkpoint.plugin_modules``) and the docs
(docs/extending.md's table, tests/test_plugins.py) read it: a new kind is one row here, plus its registry.

A :class:`Registry` holds a kind's built-ins (name -> the object, or ``"package.module:attribute"``
imported when first used), the entry-point group where installed packages register more, and what a
found object must be; :meth:`Registry.get` resolves a built-in, an entry point's name or any
``"package.module:attribute"`` on the Python path, and raises :class:`UnknownPlugin` (one type for
every kind) saying what is wrong. Standard library only, so ``algorithms/`` and ``channel/``, which
may not import edgefl, use it as edgefl does (tests/test_layers.py).
"""

from __future__ import annotations

import difflib
import functools
import importlib
import sys
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Callable, Mapping


def installed(group: str) -> list[tuple[str, str]]:
    """The entry points of ``group`` on the Python path: (name, "module:attribute"), in importlib.metadata's
    order. Read once per Python path: each read scans every installed package's metadata, and planning a sweep
    checks every point's plug-in keys (the Figure-4 sweep's plan at 2 seeds, 420 points: 1.35 s of CPU, 0.11 s
    with one read)."""
    return list(_entry_points(group, tuple(sys.path)))


@functools.lru_cache(maxsize=64)
def _entry_points(group: str, path: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    return tuple((ep.name, ep.value) for ep in entry_points(group=group))


@dataclass(frozen=True)
class Kind:
    """One kind of plug-in. ``key``: the scenario key that names one (``"section.field"``, or
    ``"section[].field"`` for a list of tables such as ``[[process]]``); ``group``: the entry-point group of
    installed plug-ins; ``expected``: what a found object must be; ``checkpoint``: whether a checkpoint may
    load classes defined in the plug-in's module (its objects are part of the state a checkpoint saves);
    ``form``: how a plug-in is written."""

    name: str
    key: str
    group: str
    expected: str
    checkpoint: bool
    form: str = "package.module:Class"

    @property
    def section(self) -> str:
        return self.key.partition(".")[0].removesuffix("[]")

    @property
    def field(self) -> str:
        return self.key.partition(".")[2]

    @property
    def in_tables(self) -> bool:
        """Whether the key is a field of a list of tables (``[[process]]``): one plug-in per table."""
        return self.key.partition(".")[0].endswith("[]")


# The one table of plug-in kinds. A new kind: a row here (and a Registry.of(its key, ...) for its built-ins).
KINDS: tuple[Kind, ...] = (
    Kind("algorithm", "algorithm.name", "edgefl.algorithms", "an algorithms.Algorithm subclass", True),
    Kind("data set", "data.name", "edgefl.datasets", "an edgefl.data.DataParams subclass", True),
    Kind("controller", "control.name", "edgefl.controllers", "an edgefl.control.Controller subclass", True),
    Kind("selection policy", "selection.name", "edgefl.selection", "an edgefl.selection.Policy subclass", True),
    Kind(
        "path-loss model",
        "network.path_loss",
        "edgefl.path_loss",
        "a function model(distance_m, network) -> loss_db",
        False,  # a function: a checkpoint never loads functions (the network refers to it, and is rebuilt)
        form="package.module:function",
    ),
    Kind("process", "process[].name", "edgefl.processes", "an edgefl.sim.component.Component subclass", True),
    Kind(
        "model",
        "model.name",
        "edgefl.models",
        "a function factory(input_shape, num_classes, **keys) returning a torch.nn.Module",
        False,  # the model is rebuilt from the scenario on resume; its values are in the algorithm's state
        form="package.module:factory",
    ),
)


def kind_of(key: str) -> Kind:
    """The row of :data:`KINDS` whose scenario key is ``key`` (``"process[0].name"`` is ``"process[].name"``)."""
    section, _, field = key.partition(".")
    if section.endswith("]"):
        section = section[: section.index("[")] + "[]"
    for kind in KINDS:
        if kind.key == f"{section}.{field}":
            return kind
    raise KeyError(f"no plug-in kind is named by the key {key!r}")


def kinds_table() -> str:
    """:data:`KINDS` as the Markdown table of docs/extending.md."""
    rows = [
        "| scenario key | kind | entry-point group | must be | a checkpoint may load its classes |",
        "|---|---|---|---|---|",
    ]
    for kind in KINDS:
        key = f"`[[{kind.section}]] {kind.field}`" if kind.in_tables else f"`{kind.key}`"
        saved = "yes" if kind.checkpoint else "no (never saved)"
        rows.append(f"| {key} | {kind.name} | `{kind.group}` | {kind.expected} | {saved} |")
    return "\n".join(rows) + "\n"


class UnknownPlugin(ValueError):
    """A name a registry cannot resolve: unknown, its module not importable, or not what the kind expects."""


class Registry:
    """The names of one kind of plug-in. ``builtins``: name -> object or ``"module:attribute"``;
    ``group``: the entry-point group of installed plug-ins; ``accepts(found)``: whether an object is of the
    kind, described by ``expected`` (e.g. "an algorithms.Algorithm subclass"); ``form``: how a plug-in is
    written (``"package.module:Class"``)."""

    def __init__(
        self,
        kind: str,
        builtins: Mapping[str, Any],
        group: str,
        accepts: Callable[[Any], bool],
        expected: str,
        form: str = "package.module:Class",
    ):
        self.kind, self.builtins, self.group = kind, builtins, group
        self.accepts, self.expected, self.form = accepts, expected, form

    @classmethod
    def of(cls, key: str, builtins: Mapping[str, Any], accepts: Callable[[Any], bool]) -> Registry:
        """The registry of the kind :data:`KINDS` lists under the scenario key ``key``."""
        kind = kind_of(key)
        return cls(kind.name, builtins, kind.group, accepts, kind.expected, kind.form)

    def plugins(self) -> dict[str, str]:
        """The installed plug-ins: entry-point name -> ``"module:attribute"``."""
        return dict(installed(self.group))

    def names(self) -> list[str]:
        """The built-ins (in their order), then the installed plug-ins (sorted)."""
        return list(dict.fromkeys([*self.builtins, *sorted(self.plugins())]))

    def is_plugin(self, name: object) -> bool:
        """Whether ``name`` is not a built-in but names a plug-in (an entry point, or "module:attribute")."""
        return isinstance(name, str) and name not in self.builtins and (":" in name or name in self.plugins())

    def unknown_message(self, name: object) -> str:
        known = self.names()
        hint = difflib.get_close_matches(str(name), known, n=1)
        return (
            f"unknown {self.kind} {name!r}"
            + (f" (did you mean {hint[0]!r}?)" if hint else "")
            + f'; known: {", ".join(known)}, or "{self.form}"'
        )

    def get(self, name: str):
        """The object ``name`` names (UnknownPlugin saying why there is none)."""
        target = self.builtins.get(name) if isinstance(name, str) else None
        if target is None and isinstance(name, str):
            target = self.plugins().get(name) or (name if ":" in name else None)
        if target is None:
            raise UnknownPlugin(self.unknown_message(name))
        if not isinstance(target, str):
            return target  # a built-in object
        module, _, attribute = target.partition(":")
        try:
            found = getattr(importlib.import_module(module), attribute, None)
        except ImportError as exc:
            raise UnknownPlugin(f"{self.kind} {name!r}: cannot import {module!r} ({exc})") from None
        if not self.accepts(found):
            raise UnknownPlugin(f"{self.kind} {name!r}: {module}.{attribute} is not {self.expected}")
        return found

    def __contains__(self, name: object) -> bool:
        """Whether :meth:`get` finds ``name``."""
        try:
            self.get(name)  # type: ignore[arg-type]
        except UnknownPlugin:
            return False
        return True


def subclass_of(base: type) -> Callable[[Any], bool]:
    """``accepts`` of a registry of classes: a subclass of ``base``."""
    return lambda found: isinstance(found, type) and issubclass(found, base)
