"""One plug-in registry for every kind of code a scenario names by name: algorithms, data sets,
path-loss models, controllers (docs/extending.md).

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
from importlib.metadata import entry_points
from typing import Any, Callable, Mapping


def installed(group: str) -> list[tuple[str, str]]:
    """The entry points of ``group`` on the Python path: (name, "module:attribute"), in importlib.metadata's
    order. Read once per Python path: each read scans every installed package's metadata (about 25 ms), and
    planning a sweep checked every point's plug-in keys (454 reads, 11 s of a 157 s Figure-4 sweep)."""
    return list(_entry_points(group, tuple(sys.path)))


@functools.lru_cache(maxsize=64)
def _entry_points(group: str, path: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    return tuple((ep.name, ep.value) for ep in entry_points(group=group))


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
