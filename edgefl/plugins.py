"""Plug-ins: the user's own code named in a scenario (docs/extending.md), and telling its faults from edgefl's.

The keys that name code are :data:`PLUGIN_KEYS` (``"package.module:attribute"`` or an installed entry
point's name). Their modules are imported here first (:func:`import_plugins`), before the scenario is
validated, with the current folder on the Python path (as ``python script.py`` puts the script's folder
there), so ``my_fl.py`` beside the scenario the user runs from is found. An exception (or ``SystemExit``)
raised by a plug-in's import, construction or call is a :class:`PluginError`: one message naming the key,
its value, the exception and the file:line of the innermost plug-in frame; exit code 4 (the traceback
with ``-v``). A plug-in module is told apart from edgefl by its file (:func:`plugin_fault` reads the
traceback). What a plug-in returns is checked where edgefl receives it (e.g. :func:`checked_path_loss`).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

from algorithms import Algorithm
from edgefl.errors import UserError
from plugin_registry import KINDS, installed, kind_of

# scenario key -> the entry-point group of installed plug-ins (the table of kinds: plugin_registry.KINDS)
PLUGIN_KEYS: dict[str, str] = {kind.key: kind.group for kind in KINDS}
# edgefl's own packages: code in them is never a plug-in's, even when named as "package.module:attribute"
OWN_PACKAGES = ("edgefl", "algorithms", "channel", "energy")
# A path loss (dB) outside these bounds is no radio link: below 0 dB the channel would amplify the signal
# (a passive channel cannot); 500 dB is far below the noise of any band at any power (thermal noise is
# -174 dBm/Hz, base stations transmit at most ~70 dBm).
PATH_LOSS_MIN_DB, PATH_LOSS_MAX_DB = 0.0, 500.0


class PluginError(UserError):
    """A plug-in (the user's own code named in a scenario) raised an exception or returned what edgefl
    cannot use. Exit code 4; ``traceback_text``: the plug-in's traceback (printed with ``-v``)."""

    exit_code = 4

    def __init__(self, message: str, traceback_text: str = ""):
        super().__init__(message)
        self.traceback_text = traceback_text

    def __reduce__(self):  # picklable with its traceback text (raised in sweep worker processes)
        return type(self), (str(self), self.traceback_text)


# plug-in code: a module's file, or a package's folder -> (scenario key, value)
_ROOTS: dict[str, tuple[str, str]] = {}


def plugin_values(raw) -> dict[str, str]:
    """The plug-in keys a scenario (a raw dict, or a Scenario) sets to a plug-in, -> their values. The
    own tables of plug-in algorithms (``[algorithm."pkg.mod:Class"]``) count as ``algorithm.name``."""
    if not isinstance(raw, dict):  # a Scenario: its plug-in keys as a file would give them
        scenario, raw = raw, {}
        for kind in KINDS:
            section = getattr(scenario, kind.section, None)
            if kind.in_tables:
                raw[kind.section] = [{kind.field: getattr(table, kind.field)} for table in section or ()]
            elif section is not None:
                raw.setdefault(kind.section, {})[kind.field] = getattr(section, kind.field)
        raw["algorithm"].update(scenario.algorithm.model_extra or {})
    found = {}
    for kind in KINDS:
        section = raw.get(kind.section)
        tables = (
            [(f"{kind.section}[{i}].{kind.field}", t) for i, t in enumerate(section)]
            if kind.in_tables and isinstance(section, list)
            else [(kind.key, section)]
            if not kind.in_tables
            else []
        )
        for key, table in tables:
            value = table.get(kind.field) if isinstance(table, dict) else None
            if isinstance(value, str) and target_of(key, value) is not None:
                found[key] = value
    algorithm = raw.get("algorithm")
    if isinstance(algorithm, dict):
        for table, value in algorithm.items():
            if isinstance(value, dict) and ":" in table and "algorithm.name" not in found:
                found["algorithm.name"] = table
    return found


def target_of(key: str, value: str) -> str | None:
    """``"package.module:attribute"`` that ``value`` of ``key`` names, or None (a built-in, or no plug-in)."""
    if ":" in value:
        return value
    match = [target for name, target in installed(kind_of(key).group) if name == value]
    return match[0] if match else None


def import_plugins(raw) -> None:
    """Import the modules of the scenario's plug-ins (``raw``: a scenario dict or a Scenario) with the current
    folder on the Python path, and remember their files. A module that is not found is left to the scenario's
    check (a ScenarioError that says where edgefl looks); any exception raised by the module's own code,
    SystemExit included, is a :class:`PluginError`."""
    _ROOTS.clear()  # the plug-ins of this scenario are the ones that run next
    for key, value in plugin_values(raw).items():
        module = target_of(key, value).partition(":")[0]
        add_current_folder()
        top = module.partition(".")[0]
        if top in OWN_PACKAGES:
            continue
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            continue  # not found: the scenario's check says so, with not_found_hint()
        remember_root(key, value, spec)
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name is None or not module_missing(module, exc.name):
                raise import_fault(key, value, exc) from None
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - the plug-in's own code: SystemExit, any error
            raise import_fault(key, value, exc) from None


def import_fault(key: str, value: str, exc: BaseException) -> PluginError:
    """The PluginError of an exception raised while importing the plug-in of ``key``: where in its code."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if _owner(f.filename) is not None]
    where = f"while importing it, at {frames[-1].filename}:{frames[-1].lineno}" if frames else "while importing it"
    return as_plugin_error(key, value, exc, where)


def module_missing(module: str, missing: str) -> bool:
    """Whether ``missing`` (a ModuleNotFoundError's name) is ``module`` or one of its parents: the plug-in
    itself is not found (as opposed to a module it imports)."""
    return module == missing or module.startswith(missing + ".")


def add_current_folder() -> None:
    """The current folder on the Python path (last: it never hides an installed module), as Python does for
    a script's folder: plug-in modules beside the user's scenario are found."""
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.append(here)


def not_found_hint() -> str:
    """Where edgefl looks for a plug-in's module, for a "cannot import" message."""
    return (
        f"edgefl looks for plug-in modules in the current folder ({os.getcwd()}) and on the Python path: run "
        "edgefl from the folder that holds the module's .py file, or add that folder to PYTHONPATH"
    )


def remember_root(key: str, value: str, spec) -> None:
    """Record the code of a plug-in (its module's file, or its top package's folder) as the plug-in's."""
    folders = list(spec.submodule_search_locations or [])
    roots = folders or ([spec.origin] if spec.origin and os.path.isfile(spec.origin) else [])
    for root in roots:
        _ROOTS[str(Path(root).resolve())] = (key, value)


def _owner(filename: str) -> tuple[str, str] | None:
    try:
        path = Path(filename).resolve()
    except (OSError, RuntimeError):
        return None
    for root, owner in _ROOTS.items():
        if str(path) == root or str(path).startswith(root + os.sep):
            return owner
    return None


def plugin_fault(exc: BaseException) -> PluginError | None:
    """``exc`` as a PluginError if it was raised inside a plug-in's code (or by code a plug-in called), else
    None. Exceptions edgefl documents as the user's to fix (UserError and its subclasses, ScenarioError and
    DataError among them) are not plug-in faults: a data plug-in may raise DataError for a missing file."""
    if isinstance(exc, (UserError, KeyboardInterrupt)):
        return None
    cause: BaseException | None = exc
    while cause is not None:  # and what it was raised from: SimPy re-raises a process's exception as the cause
        for frame in reversed(traceback.extract_tb(cause.__traceback__)):  # innermost first
            owner = _owner(frame.filename)
            if owner is not None:
                return as_plugin_error(*owner, cause, f"at {frame.filename}:{frame.lineno}")
        cause = cause.__cause__
    return None


def as_plugin_error(key: str, value: str, exc: BaseException, where: str) -> PluginError:
    """The one message of a plug-in's fault: key, value, the exception, where it was raised."""
    what = (
        f"SystemExit({exc.code!r}): it called sys.exit()"
        if isinstance(exc, SystemExit)
        else f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        if str(exc).strip()
        else type(exc).__name__
    )
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return PluginError(
        f"the plug-in {key} = {value!r} raised {what} ({where}); this is an error in the plug-in's "
        "code, not in edgefl (its traceback: edgefl -v, or the error's traceback_text in Python)",
        text,
    )


@contextmanager
def faults_named():
    """Turn an exception raised in a plug-in's code into a :class:`PluginError` (others pass unchanged)."""
    try:
        yield
    except (Exception, SystemExit) as exc:
        named = plugin_fault(exc)
        if named is None:
            raise
        raise named from exc


# -- what plug-ins must be and return ---------------------------------------------------------------
# Every value a plug-in hands to edgefl is checked where it enters the core, once: what a selection policy
# returns (checked_clients), what a component's hooks return (edgefl.sim.component.checked_hook), what it
# sets through the core's setters (core_value), what a path loss returns (checked_path_loss). A value that
# breaks the rule is a PluginError naming the plug-in (its scenario key and value), the value and the
# file:line of the code that returned or set it.
def owner_of(obj) -> tuple[str, str] | None:
    """(scenario key, value) of the plug-in whose code defines ``obj``'s class (or ``obj``, a class or a
    function), or None: edgefl's own, or code no scenario named."""
    if not _ROOTS:  # no plug-in imported (the common case; the core asks for every component and hook)
        return None
    target = obj if isinstance(obj, type) or inspect.isroutine(obj) else type(obj)
    try:
        filename = inspect.getsourcefile(target) or inspect.getfile(target)
    except (TypeError, OSError):
        return None
    return _owner(filename)


def where(function) -> str:
    """``file:line`` of ``function`` (a bound method, a function), or its name where Python cannot tell."""
    function = getattr(function, "__func__", function)
    try:
        return f"{inspect.getsourcefile(function)}:{inspect.getsourcelines(function)[1]}"
    except (TypeError, OSError):
        return getattr(function, "__qualname__", repr(function))


def shown(value) -> str:
    """``value`` for a message: its repr, cut to 120 characters, and its type where the repr does not say it."""
    text = repr(value)
    text = text if len(text) <= 120 else text[:117] + "..."
    obvious = value is None or isinstance(value, (bool, int, float, str, list, tuple, dict, set, np.ndarray))
    return text if obvious else f"{text} (a {type(value).__name__})"


def returned_fault(plugin, function, value, rule: str, fallback: str, verb: str = "returned") -> PluginError:
    """The PluginError of ``function`` (a plug-in's method, e.g. a policy's ``select``) having returned ``value``,
    which breaks ``rule``. ``plugin``: the plug-in object; ``fallback``: how to name it when no scenario key
    names its code (a built-in, or one built in Python)."""
    owner = owner_of(plugin)
    name = f"the plug-in {owner[0]} = {owner[1]!r}" if owner else fallback
    qualname = getattr(function, "__qualname__", str(function))
    return PluginError(f"{name}: {qualname}() {verb} {shown(value)} (at {where(function)}); {rule}")


def core_fault(call: str, rule: str, error: type[Exception] = ValueError) -> Exception:
    """The fault of a call a component made to the core's setters (``call``, e.g. ``"set_cpu_hz(3, nan)"``) that
    breaks ``rule``: a PluginError naming the plug-in whose code made the call (the innermost plug-in frame of
    the stack, its file:line), or ``error`` (a component of edgefl's own: a bug of edgefl)."""
    message = f"core.{call}: {rule}"
    frame: Any = sys._getframe(1)
    while frame is not None:
        owner = _owner(frame.f_code.co_filename)
        if owner is not None:
            return PluginError(
                f"the plug-in {owner[0]} = {owner[1]!r} called {message} (at {frame.f_code.co_filename}:"
                f"{frame.f_lineno}); this is an error in the plug-in's code, not in edgefl"
            )
        frame = frame.f_back
    return error(message)


def positive_finite(value) -> bool:
    """Whether ``value`` is a real number in (0, inf) (not a bool, not NaN)."""
    try:
        return not isinstance(value, (bool, np.bool_)) and 0.0 < float(value) < float("inf")
    except (TypeError, ValueError, OverflowError):
        return False


def checked_clients(
    plugin, function, value, num_clients: int, at_most: int, allowed=None, at_least: int = 0
) -> np.ndarray:
    """``value`` (returned by ``function`` of the plug-in object ``plugin``) as distinct client indices: a
    sequence or numpy array of integers (integral floats too) in [0, num_clients), ``at_least`` to ``at_most``
    of them, each allowed by the bool mask ``allowed`` (e.g. online). PluginError naming the rule otherwise."""
    rule = (
        f"expected a list or numpy array of {at_least} to {at_most} distinct client indices (integers in 0 to "
        f"{num_clients - 1})" + (f", among the {int(np.sum(allowed))} online" if allowed is not None else "")
    )

    def fault(why: str) -> PluginError:
        return returned_fault(plugin, function, value, f"{why}; {rule}", f"selection policy {type(plugin).__name__}")

    if not isinstance(value, (list, tuple, np.ndarray)):
        raise fault("not a sequence of client indices")
    try:
        array = np.asarray(value)
    except (ValueError, TypeError, OverflowError):
        raise fault("not a flat sequence of numbers") from None
    if array.dtype == object and all(
        isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in array.reshape(-1)
    ):
        raise fault("an index out of range")  # integers too large for numpy
    if array.dtype.kind not in "iuf" or array.ndim > 1:
        raise fault("not a flat sequence of numbers")
    array = array.reshape(-1)
    if array.dtype.kind == "f":
        if not np.isfinite(array).all() or (array != np.round(array)).any():
            raise fault("not whole numbers")
    if ((array < 0) | (array >= num_clients)).any():
        raise fault("an index out of range")
    chosen = array.astype(np.int64)
    if len(np.unique(chosen)) != len(chosen):
        raise fault("an index more than once")
    if not at_least <= len(chosen) <= at_most:
        raise fault(f"{len(chosen)} clients")
    if allowed is not None and not np.asarray(allowed)[chosen].all():
        raise fault("a client that is not online")
    return chosen


def check_path_loss_function(name: str, found) -> None:
    """A path-loss model must be a Python function taking (distance_m, network) positionally (ValueError
    saying what it is otherwise: a class, a built-in such as print, os.system or os.path.join)."""
    shape = "a function model(distance_m, network) -> loss_db"
    if isinstance(found, type) or not inspect.isfunction(found):
        kind = "a class" if isinstance(found, type) else f"a {type(found).__name__}"
        raise ValueError(f"path-loss model {name!r} is {kind}, expected {shape} (a Python function)")
    params = list(inspect.signature(found).parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in params if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if len(positional) < 2 or len(required) > 2 or any(p not in positional[:2] for p in required):
        signature = f"{found.__name__}{inspect.signature(found)}"
        raise ValueError(
            f"path-loss model {name!r} is {signature}, expected {shape}: two positional parameters, "
            "any others with defaults"
        )


def check_defines(key: str, name: str, cls, base: type, methods: tuple[str, ...], what: str) -> None:
    """A plug-in class (``key`` = ``name``) defines the ``methods`` its ``base`` leaves to subclasses
    (PluginError saying ``what`` they are otherwise: e.g. the abstract base itself named as the plug-in)."""
    missing = [m for m in methods if getattr(cls, m, None) is getattr(base, m)]
    if missing:
        raise PluginError(
            f"the plug-in {key} = {name!r}: {cls.__module__}.{cls.__qualname__} (at {where(cls)}) does not define "
            f"{' and '.join(missing)} ({what})"
        )


def check_algorithm_class(name: str, cls) -> None:
    """An algorithm plug-in defines what the engine calls: round(r) and the property model (PluginError)."""
    check_defines(
        "algorithm.name",
        name,
        cls,
        Algorithm,
        ("round", "model"),
        "an algorithm defines round(r), a generator of operations, and the property model, the global model: "
        "docs/extending.md",
    )


def check_params_model(key: str, name: str, cls) -> None:
    """A plug-in class's ``Params`` (its own keys) is None or a pydantic model (PluginError otherwise)."""
    params = getattr(cls, "Params", None)
    if params is not None and not (isinstance(params, type) and issubclass(params, BaseModel)):
        raise PluginError(
            f"the plug-in {key} = {name!r}: {cls.__module__}.{cls.__qualname__}.Params (at {where(cls)}) is "
            f"{shown(params)}, expected None or a pydantic model of its own keys (a subclass of pydantic.BaseModel)"
        )


def checked_path_loss(name: str, model, network):
    """``model`` (a path-loss function) as edgefl calls it: ``loss_db(distance_m)``, positionally, its result
    checked: real finite floats in [0, 500] dB, one per distance. PluginError naming the rule otherwise."""

    def loss_db(distance_m):
        distance_m = np.asarray(distance_m, dtype=np.float64)
        with faults_named():
            got = model(distance_m, network)
        return check_path_loss_values(name, got, distance_m)

    return loss_db


def check_path_loss_values(name: str, got, distance_m: np.ndarray) -> np.ndarray:
    rule = (
        f"a path-loss model returns one real, finite loss in dB per distance ({PATH_LOSS_MIN_DB:g} to "
        f"{PATH_LOSS_MAX_DB:g} dB: a passive channel does not amplify, and beyond {PATH_LOSS_MAX_DB:g} dB no "
        "signal is left), as a numpy array of the distances' shape"
    )
    intro = f"the plug-in network.path_loss = {name!r} returned"
    try:
        values = np.asarray(got)
    except Exception:  # noqa: BLE001 - a result numpy cannot read is the plug-in's mistake
        values = np.asarray(None, dtype=object)
    if values.dtype.kind not in "iuf":
        what = (
            "complex numbers"
            if values.dtype.kind == "c"
            else "None"
            if got is None
            else "text"
            if values.dtype.kind in "US"
            else "booleans"
            if values.dtype.kind == "b"
            else f"a {type(got).__name__}" + (f" of {values.dtype}" if values.dtype != object else "")
        )
        raise PluginError(f"{intro} {what}; {rule}")
    if values.shape != distance_m.shape:
        raise PluginError(
            f"{intro} an array of shape {values.shape} for {distance_m.size} distances (shape "
            f"{distance_m.shape}); {rule}"
        )
    values = values.astype(np.float64)
    bad = ~np.isfinite(values) | (values < PATH_LOSS_MIN_DB) | (values > PATH_LOSS_MAX_DB)
    if bad.any():
        i = np.flatnonzero(bad.ravel())[0]
        raise PluginError(
            f"{intro} {float(values.ravel()[i])!r} dB at {distance_m.ravel()[i]:g} m ({bad.sum()} of "
            f"{bad.size} values out of bounds); {rule}"
        )
    return values
