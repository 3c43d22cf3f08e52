"""Dependency direction between the layers, read from the source with ``ast`` (nothing is imported).

- ``channel/`` and ``energy/``: numpy, scipy, the standard library, their own package and
  ``arraychecks`` (their shared argument checks) only, and ``channel/`` ``plugin_registry`` (the one
  plug-in lookup); ``arraychecks``: numpy and the standard library; ``plugin_registry``: the standard library;
- ``algorithms/``: torch, numpy, pydantic (the hyperparameter models), the standard library,
  ``plugin_registry`` and its own package; nothing of ``edgefl``, ``channel`` or ``energy`` (the numerics of an
  algorithm do not know the simulator, and its costs are charged by the engine, not computed
  by it);
- ``edgefl/sim/`` (the engine): never the layers above it (the runner, the CLI, the sweeps).

Every import counts: module level, inside functions, under ``if TYPE_CHECKING``, relative
imports (resolved against the file's package) and ``importlib.import_module`` /
``__import__`` calls with a literal module name.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import algorithms

REPO = Path(__file__).resolve().parents[1]
STDLIB = set(sys.stdlib_module_names) | {"__future__"}

ALLOWED_ROOTS = {
    "channel": {"numpy", "scipy", "channel", "arraychecks", "plugin_registry"} | STDLIB,
    "energy": {"numpy", "scipy", "energy", "arraychecks"} | STDLIB,
    "arraychecks": {"numpy", "arraychecks"} | STDLIB,
    "algorithms": {"torch", "numpy", "pydantic", "algorithms", "plugin_registry"} | STDLIB,
    "plugin_registry": {"plugin_registry"} | STDLIB,
}
# Layers the engine must not reach; a name forbids the module and everything under it.
ENGINE_FORBIDDEN = ("edgefl.sweeps", "edgefl.cli", "edgefl.runner", "experiments", "benchmarks")
# Imports the sweep package may defer into a function: optional or heavy plotting/cluster dependencies.
# heavy or optional: Ray, and the figures (matplotlib); the run title lives with the runner (torch); the sweep's
# runs (torch) and scipy's t quantiles load only once a scenario is known valid (tests/test_quick_answers.py)
SWEEP_LAZY_ALLOWED = (
    "ray",
    "matplotlib",
    "scipy",
    "edgefl.sweeps.plots",
    "edgefl.sweeps.run",
    "edgefl.figures",
    "edgefl.run_plots",
    "edgefl.runner",
    "edgefl.plots",
    # planning a sweep (the scenario's schema, the data sets): `optimal-tau` and `plot` read a finished one without it
    "edgefl.sweeps.plan",
    "edgefl.scenario",
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts)


def imported_modules(source: str, module: str, is_package: bool = False) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``source``, the source of ``module``."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                found.append((node.lineno, node.module))
                continue
            base = package[: len(package) - (node.level - 1)]
            if node.module:
                found.append((node.lineno, ".".join(base + [node.module])))
            else:  # from . import a, b: each name may be a submodule
                found += [(node.lineno, ".".join(base + [alias.name])) for alias in node.names]
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if (
                name in ("import_module", "__import__")
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                found.append((node.lineno, node.args[0].value))
    return found


def imports_of(package: str) -> list[tuple[str, int, str]]:
    """(file, line, module) of every import in every source file of ``package`` (a folder)."""
    files = sorted((REPO / package).rglob("*.py"))
    assert files, f"no source files under {package}/"
    out = []
    for path in files:
        mod = module_name(path)
        is_package = path.name == "__init__.py"
        if is_package:
            mod = mod.rsplit(".", 1)[0]
        for line, name in imported_modules(path.read_text(), mod, is_package):
            out.append((str(path.relative_to(REPO)), line, name))
    return out


def under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


@pytest.mark.parametrize("package", sorted(ALLOWED_ROOTS))
def test_lower_layers_import_only_what_they_may(package):
    allowed = ALLOWED_ROOTS[package]
    bad = [f"{f}:{line} imports {name}" for f, line, name in imports_of(package) if name.split(".")[0] not in allowed]
    assert not bad, "\n".join(bad)


def test_the_engine_does_not_import_the_layers_above_it():
    bad = [
        f"{f}:{line} imports {name}"
        for f, line, name in imports_of("edgefl/sim")
        if any(under(name, p) for p in ENGINE_FORBIDDEN)
    ]
    assert not bad, "\n".join(bad)


def test_the_sweep_package_imports_at_module_level():
    """No import inside a function in edgefl/sweeps/ (where one could hide an import cycle), except
    the optional or heavy ones (Ray, the figures) and the package's lazy exports; and no module of the package
    imports the CLI."""
    lazy, bad = [], []
    for path in sorted((REPO / "edgefl" / "sweeps").glob("*.py")):
        tree = ast.parse(path.read_text())
        for func in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            if path.name == "__init__.py" and func.name == "__getattr__":
                continue  # the package's lazy exports (PEP 562), as edgefl/__init__.py's
            for node in ast.walk(func):
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module]
                    if isinstance(node, ast.ImportFrom)
                    else []
                )
                lazy += [
                    f"{path.name}:{node.lineno} imports {n}"
                    for n in names
                    if not any(under(n, ok) for ok in SWEEP_LAZY_ALLOWED)
                ]
        bad += [
            f"{path.name}:{node.lineno} imports {node.module}"
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module and under(node.module, "edgefl.cli")
        ]
    assert not lazy and not bad, "\n".join(lazy + bad)


def test_the_algorithm_registry_points_inside_the_package():
    """The registry's lazy imports (``module:Class`` strings) are imports of ``algorithms`` too."""
    for name, target in algorithms.REGISTRY.items():
        assert under(target.split(":")[0], "algorithms"), (name, target)


def test_the_scanner_sees_nested_relative_and_dynamic_imports():
    """The checks above can fail: every kind of import they must catch is found and resolved."""
    source = (
        "import numpy as np\n"
        "from . import units\n"
        "from ..deployment import Population\n"
        "def f():\n"
        "    import edgefl.runner\n"
        "    if True:\n"
        "        from edgefl.sweeps import grid\n"
        "class C:\n"
        "    def g(self):\n"
        "        return importlib.import_module('edgefl.cli')\n"
        "h = lambda: __import__('torch')\n"
    )
    found = [name for _, name in imported_modules(source, "edgefl.sim.engine")]
    assert found.count("numpy") == 1
    for name in ("edgefl.sim.units", "edgefl.deployment", "edgefl.runner", "edgefl.sweeps", "edgefl.cli", "torch"):
        assert name in found, (name, found)
    # a package's __init__ resolves "." to itself
    assert [n for _, n in imported_modules("from ._util import out\n", "channel", is_package=True)] == ["channel._util"]
    assert not under("edgefl.simulator", "edgefl.sim") and under("edgefl.sweeps.grid", "edgefl.sweeps")


# -- no import cycle -------------------------------------------------------------------------------
CYCLE_PACKAGES = ("edgefl", "channel", "energy", "algorithms")
# Deferred imports that may close a loop: ``edgefl.__getattr__`` loads the API when ``edgefl.run`` is first
# used (PEP 562), so that ``import edgefl`` stays cheap; it runs after every module has loaded.
DEFERRED_ALLOWED = {("edgefl", "edgefl.api")}


def _modules() -> dict[str, tuple[Path, bool]]:
    """Module name -> (file, is a package) of every source file of :data:`CYCLE_PACKAGES`."""
    found = {}
    for package in CYCLE_PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            name, is_package = module_name(path), path.name == "__init__.py"
            found[name.rsplit(".", 1)[0] if is_package else name] = (path, is_package)
    return found


def _module_level(tree: ast.Module):
    """The statements that run when the module is imported: its body, and the bodies of its top-level
    ``if``/``try`` blocks (not ``if TYPE_CHECKING:``, not functions or classes' methods)."""
    todo = list(tree.body)
    while todo:
        node = todo.pop(0)
        yield node
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if isinstance(node, (ast.If, ast.Try)):
            todo += [*node.body, *node.orelse, *getattr(node, "finalbody", [])]
            todo += [s for handler in getattr(node, "handlers", []) for s in handler.body]


def _every_import_that_runs(tree: ast.AST):
    """Every node, except under ``if TYPE_CHECKING:`` (imports for the type checker never run)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for child in node.orelse for n in [child, *_every_import_that_runs(child)])
            continue
        yield node
        yield from _every_import_that_runs(node)


def import_graph(deferred: bool = False) -> tuple[dict[str, set[str]], dict[tuple[str, str], int]]:
    """module -> the project's modules it imports, and (module, imported) -> line. Module-level imports only,
    or every import (``deferred``). ``from a.b import c`` imports ``a.b`` and, where ``c`` is a module,
    ``a.b.c``; importing ``a.b`` imports its parent package ``a`` (unless the importer is inside ``a``)."""
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    lines: dict[tuple[str, str], int] = {}
    for name, (path, is_package) in modules.items():
        tree = ast.parse(path.read_text())
        package = name.split(".") if is_package else name.split(".")[:-1]
        nodes = _every_import_that_runs(tree) if deferred else _module_level(tree)
        for node in nodes:
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(package[: len(package) - (node.level - 1)] + [node.module or ""]).strip(".")
                base = base if node.level else node.module
                targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            else:
                continue
            for target in targets:
                parts = target.split(".")
                for i in range(1, len(parts) + 1):
                    imported = ".".join(parts[:i])
                    if imported in modules and imported != name and not under(name, imported):
                        graph[name].add(imported)
                        lines.setdefault((name, imported), node.lineno)
    return graph, lines


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of ``graph`` (its modules in import order, the first repeated at the end), or []."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return []

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return []


def reaches(graph: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = {start}, [start]
    while todo:
        node = todo.pop()
        if node == goal:
            return True
        todo += [n for n in graph[node] if n not in seen and not seen.add(n)]  # type: ignore[func-returns-value]
    return False


def test_the_module_level_import_graph_has_no_cycle():
    graph, lines = import_graph()
    cycle = find_cycle(graph)
    steps = [f"{a} (line {lines[(a, b)]}) -> {b}" for a, b in zip(cycle, cycle[1:])]
    assert not cycle, "import cycle:\n" + "\n".join(steps)


def test_no_deferred_import_hides_a_cycle():
    """An import inside a function whose module imports the importer (at module level, through any
    chain) is a cycle closed by a lazy import: the modules depend on each other all the same."""
    graph, _ = import_graph()
    every, lines = import_graph(deferred=True)
    hidden = [
        f"{a} (line {lines[(a, b)]}) -> {b}, which imports {a}"
        for a in sorted(every)
        for b in sorted(every[a] - graph[a])
        if (a, b) not in DEFERRED_ALLOWED and reaches(graph, b, a)
    ]
    assert not hidden, "\n".join(hidden)


def test_the_cycle_finder_finds_cycles():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) == []
    assert reaches({"a": {"b"}, "b": {"c"}, "c": set()}, "a", "c")
    assert not reaches({"a": {"b"}, "b": set(), "c": {"a"}}, "a", "c")
