"""Run checkpoints (``run.checkpoint_every = k``): a killed run continues from its last checkpoint with
``edgefl run --resume``, and its outputs are byte-identical to an uninterrupted run's (summary.json's
wall_time_s aside).

A checkpoint is the state of a run between two rounds, in one file beside the results folder
(``.NAME.checkpoint``, written atomically, removed once the results are written):

- the learning state, pickled: the algorithm (its model, control variates, duals, ... and its
  context's RNG), the engine (participation counts, recorded trace, compressor residuals and RNG,
  controller and observer), the executor's minibatch RNG streams, the process-wide RNGs, and what the
  run has produced so far (metrics rows, battery and position rows);
- the co-simulation as the journal of the calls its pricer received (:mod:`edgefl.sim.journal`),
  replayed on a fresh pricer: SimPy processes cannot be saved, but the model is deterministic.

What a fresh :class:`~edgefl.runner.Simulation` of the same scenario rebuilds identically from the seed (the
data, the model's structure, the devices, the network, the executor's buffers) is not stored: the pickle
refers to those objects by name (pickle's persistent IDs) and gets the fresh ones back.

A checkpoint runs no code when it is loaded: the file must begin with edgefl's header line (one of another
:data:`FORMAT`, on the line after it, is refused as another version's before any of its pickle is read), and it is read
with a restricted unpickler (:class:`_Unpickler`) that gives a pickle only the project's own classes (and the
scenario's plug-ins'), numpy's arrays and random generators, torch's tensors, and a few plain containers; a
pickle naming anything else (``os.system``, ``builtins.eval``, a function of edgefl) is "not an edgefl
checkpoint" (exit 2) before anything of it runs. It restores data only: a class of the project is made and
filled with its attributes, never called with arguments from the file (docs/architecture.md, "Checkpoints").
The journal's calls are read the same way.
"""

from __future__ import annotations

import inspect
import io
import pickle
import random
import sys
import types
import zlib
from pathlib import Path

import numpy as np
import torch

from edgefl import __version__
from edgefl.errors import UserError
from edgefl.plugins import plugin_values, target_of
from edgefl.results import CHECKPOINT_MAGIC, atomic_file, checkpoint_header
from edgefl.scenario import describe_differences
from edgefl.sim.journal import replay
from plugin_registry import kind_of

# 2: the scenario's values nested, as model_dump gives them; 3: a header line before the pickle; 4: the format on
# a line of its own after the header, read before any of the pickle (a checkpoint of another format is refused as
# one written by another version of edgefl, not as a file that is no checkpoint); algorithms report typed columns;
# 5: battery.csv's and positions.csv's rows kept as each round's columns (edgefl.runner.RoundRows); 6: RoundRows keeps
# its rounds' row counts (a format-5 record has none: refused as another version's, not failing after the resume)
FORMAT = 6
# The Simulation's attributes rebuilt from the scenario (referred to by name), and those saved.
REBUILT = ("scenario", "data", "model", "network", "population", "pricer", "executor")
SAVED = ("algorithm", "context", "engine", "controller", "record")


class CheckpointError(UserError):
    """A checkpoint that cannot be used for this run (exit 2)."""


def fingerprint(scenario) -> dict:
    """The scenario's values that decide the run: everything but run.checkpoint_every. (Computed once per run,
    Simulation.keep_checkpoints: a Ctrl-C that lands inside pydantic's serialisation is turned into a warning,
    and the run would go on.)"""
    values = scenario.model_dump(mode="json")
    values["run"].pop("checkpoint_every", None)
    return values


class _Missing(pickle.UnpicklingError):
    """A checkpoint names a class of the project's (or a plug-in's) that is not there: another version's."""


class _Pickler(pickle.Pickler):
    def __init__(self, handle, rebuilt: dict[int, str]):
        super().__init__(handle, protocol=pickle.HIGHEST_PROTOCOL)
        self._rebuilt = rebuilt

    def persistent_id(self, obj):
        return self._rebuilt.get(id(obj))


# What a checkpoint's pickle may name besides the project's own classes: numpy's and torch's arrays, tensors
# and random generators, and plain containers; nothing that runs code given to it.
PROJECT_PACKAGES = ("edgefl", "algorithms", "channel", "energy")
ALLOWED = frozenset(
    {
        ("builtins", "set"),
        ("builtins", "frozenset"),
        ("builtins", "complex"),
        ("builtins", "bytearray"),
        ("builtins", "slice"),
        ("builtins", "range"),
        ("collections", "OrderedDict"),
        ("collections", "defaultdict"),
        ("collections", "deque"),
        ("numpy", "dtype"),
        ("numpy", "ndarray"),
        *((f"numpy.{core}.multiarray", name) for core in ("_core", "core") for name in ("_reconstruct", "scalar")),
        *((f"numpy.{core}.numeric", "_frombuffer") for core in ("_core", "core")),
        ("numpy.random._pickle", "__bit_generator_ctor"),
        ("numpy.random._pickle", "__generator_ctor"),
        ("numpy.random._pickle", "__randomstate_ctor"),
        ("numpy.random.bit_generator", "SeedSequence"),
        ("numpy.random.bit_generator", "__pyx_unpickle_SeedSequence"),
        ("numpy.random._pcg64", "PCG64"),
        ("numpy.random._pcg64", "PCG64DXSM"),
        ("numpy.random._mt19937", "MT19937"),
        ("numpy.random._philox", "Philox"),
        ("numpy.random._sfc64", "SFC64"),
        ("torch._utils", "_rebuild_tensor_v2"),
        ("torch", "device"),
        ("torch", "Size"),
        ("torch._C", "Generator"),
    }
)


def _storage_from_bytes(data: bytes):
    """A tensor's storage, as pickled (torch.storage._load_from_bytes, whose torch.load(weights_only=False) would run
    any code): read with torch's own restricted loader instead."""
    return torch.load(io.BytesIO(data), weights_only=True)


def plugin_modules(simulation) -> tuple[str, ...]:
    """The top modules of the scenario's plug-ins (named "module:Class" or by an entry point; a package: all of
    it, as edgefl.plugins counts a package's files as the plug-in's) of every kind whose objects a checkpoint
    saves (``checkpoint`` in the table of kinds, plugin_registry.KINDS): their classes may be in a checkpoint."""
    return tuple(
        str(target_of(key, value)).partition(":")[0].partition(".")[0]  # plugin_values: a target exists
        for key, value in plugin_values(simulation.scenario).items()
        if kind_of(key).checkpoint
    )


# Where a __setstate__ written in Python may come from: library code that only stores the state it is given (a
# slotted dataclass's fields; a pydantic model's __dict__, fields set, extra and private attributes).
STATE_SETTERS = frozenset({"dataclasses", "pydantic.main"})


def _project_class(cls, modules: tuple[str, ...]) -> bool:
    module = getattr(cls, "__module__", "") or ""
    return any(module == m or module.startswith(m + ".") for m in modules)


def _python_function(attr) -> bool:
    """Whether ``attr`` (as found on a class) is code written in Python (not a builtin's C method)."""
    return isinstance(attr, (types.FunctionType, staticmethod, classmethod, property))


_STATIC: dict[tuple[type, str], object] = {}  # (class, name) -> inspect.getattr_static's answer (classes do not change)
_CONTAINERS = frozenset({list, dict, set})  # their append, extend, __setitem__ and add are builtins


def _static(cls: type, name: str):
    key = (cls, name)
    if key not in _STATIC:
        _STATIC[key] = inspect.getattr_static(cls, name, None)
    return _STATIC[key]


class _Unpickler(pickle._Unpickler):  # the Python unpickler: each opcode that calls something is checked here
    """Reads data only (issue 33): ``find_class`` gives only what :data:`ALLOWED` names, torch dtypes, and classes
    defined in the project's packages or in ``modules`` (never a function of theirs, never a ``__main__``), and
    nothing is called with arguments from the file but :data:`ALLOWED`'s constructors of arrays, tensors, random
    generators and containers. A class of the project is only *made* (``cls.__new__(cls)``, a builtin that runs
    none of its code; a named tuple from its items) and filled with its attributes (its ``__dict__``, or its slots),
    never called: no ``__init__``, no ``__setstate__`` or property written in Python, no ``append`` or
    ``__setitem__`` of its own. Anything else is an UnpicklingError before it is imported or called.
    ``rebuilt``: the objects a checkpoint refers to by name (pickle's persistent IDs)."""

    dispatch = dict(pickle._Unpickler.dispatch)

    def __init__(self, handle, rebuilt: dict[str, object] | None = None, modules: tuple[str, ...] = ()):
        super().__init__(handle)
        self._rebuilt = rebuilt or {}
        self._modules = PROJECT_PACKAGES + tuple(modules)
        self._constructors: set[int] = {id(_storage_from_bytes)}  # what REDUCE may call (ALLOWED's, as found)

    def persistent_load(self, name):
        if not isinstance(name, str) or name not in self._rebuilt:
            raise pickle.UnpicklingError(f"it refers to {name!r}, which is not part of a run")
        return self._rebuilt[name]

    def find_class(self, module, name):
        if (module, name) == ("torch.storage", "_load_from_bytes"):
            return _storage_from_bytes
        if (module, name) in ALLOWED:
            found = super().find_class(module, name)
            self._constructors.add(id(found))
            return found
        if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
            return getattr(torch, name)
        own = any(module == m or module.startswith(m + ".") for m in self._modules)
        if own and (module in sys.modules or "__main__" not in module.split(".")):  # importing __main__ runs it
            try:
                found = super().find_class(module, name)
            except (ImportError, AttributeError):
                raise _Missing(f"it names {module}.{name}, which this edgefl and its plug-ins do not have") from None
            if isinstance(found, type) and found.__module__ == module:  # a class of its own, not one it imports
                return found
        raise pickle.UnpicklingError(
            f"it names {module}.{name}, which a checkpoint may not (only edgefl's own "
            "classes, the scenario's plug-ins', numpy arrays and torch tensors)"
        )

    # -- the opcodes that call something -------------------------------------------------------------
    def _refuse(self, what: str):
        raise pickle.UnpicklingError(f"it {what}, which a checkpoint may not (it holds data only)")

    def load_reduce(self):
        args = self.stack.pop()
        func = self.stack[-1]
        if id(func) not in self._constructors:
            self._refuse(f"calls {getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', func)!s:.80}")
        self.stack[-1] = func(*args)

    def _new(self, cls, args, kwargs):
        if not isinstance(cls, type):
            self._refuse(f"makes an object of {cls!r:.80}, not of a class")
        if not _project_class(cls, self._modules):
            if id(cls) not in self._constructors:
                self._refuse(f"makes an object of {cls.__module__}.{cls.__qualname__}")
            return cls.__new__(cls, *args, **kwargs)
        if issubclass(cls, tuple) and hasattr(cls, "_fields") and not kwargs:  # a named tuple: its items
            return tuple.__new__(cls, args)
        if args or kwargs or _python_function(_static(cls, "__new__")):
            self._refuse(f"makes an object of {cls.__module__}.{cls.__qualname__} with arguments")
        return cls.__new__(cls)

    def load_newobj(self):
        args = self.stack.pop()
        cls = self.stack.pop()
        self.append(self._new(cls, args, {}))

    def load_newobj_ex(self):
        kwargs = self.stack.pop()
        args = self.stack.pop()
        cls = self.stack.pop()
        self.append(self._new(cls, args, kwargs))

    def load_build(self):
        state, inst = self.stack[-1], self.stack[-2]
        cls = type(inst)
        setstate = _static(cls, "__setstate__")
        if (
            _project_class(cls, self._modules)
            and _python_function(setstate)
            and getattr(setstate, "__module__", None) not in STATE_SETTERS
        ):
            self._refuse(f"sets the state of {cls.__module__}.{cls.__qualname__} through its own __setstate__")
        if setstate is None and isinstance(state, tuple) and len(state) == 2 and isinstance(state[1], dict):
            for key in state[1]:  # slots: setattr, so no property (code) may be among them
                attr = _static(cls, key) if isinstance(key, str) else None
                if attr is not None and not isinstance(attr, types.MemberDescriptorType):
                    self._refuse(f"sets {cls.__qualname__}.{key!s:.40}, which is not a plain attribute")
        super().load_build()

    def _builtin_method(self, obj, method: str) -> None:
        if type(obj) not in _CONTAINERS and _python_function(_static(type(obj), method)):
            self._refuse(f"calls {type(obj).__qualname__}.{method}, code of its own")

    def load_appends(self):
        self._builtin_method(self.metastack[-1][-1], "extend")  # the list: below the mark
        self._builtin_method(self.metastack[-1][-1], "append")
        super().load_appends()

    def load_append(self):
        self._builtin_method(self.stack[-2], "append")
        super().load_append()

    def load_setitem(self):
        self._builtin_method(self.stack[-3], "__setitem__")
        super().load_setitem()

    def load_setitems(self):
        self._builtin_method(self.metastack[-1][-1], "__setitem__")
        super().load_setitems()

    def load_additems(self):
        self._builtin_method(self.metastack[-1][-1], "add")
        super().load_additems()

    def load_inst(self):
        self._refuse("calls a class (protocol 0 INST)")

    def load_obj(self):
        self._refuse("calls a class (protocol 1 OBJ)")

    for _op, _method in (
        (pickle.REDUCE, load_reduce),
        (pickle.NEWOBJ, load_newobj),
        (pickle.NEWOBJ_EX, load_newobj_ex),
        (pickle.BUILD, load_build),
        (pickle.APPENDS, load_appends),
        (pickle.APPEND, load_append),
        (pickle.SETITEM, load_setitem),
        (pickle.SETITEMS, load_setitems),
        (pickle.ADDITEMS, load_additems),
        (pickle.INST, load_inst),
        (pickle.OBJ, load_obj),
    ):
        dispatch[_op[0]] = _method
    del _op, _method


def restricted_loads(data: bytes, modules: tuple[str, ...] = ()):
    """``pickle.loads`` with :class:`_Unpickler`'s restrictions (the journal's calls)."""
    return _Unpickler(io.BytesIO(data), modules=modules).load()


def save(simulation, path: Path) -> None:
    """Write ``simulation``'s state between two rounds to ``path`` (via a temporary file and a rename: a kill
    leaves the previous checkpoint or the new one)."""
    if simulation.pricer.journal is None:
        raise RuntimeError("the pricer keeps no journal: call Simulation.keep_checkpoints() before the first round")
    rebuilt = {id(getattr(simulation, name)): name for name in REBUILT}
    with atomic_file(path, durable=True) as tmp, open(tmp, "wb") as handle:
        handle.write(checkpoint_header() + format_line())  # what proves the file a checkpoint (results.recover) ...
        handle.flush()  # ... on disk at once, not when pickling fills the buffer: a kill -9 then leaves a provable file
        _Pickler(handle, rebuilt).dump(
            {
                "format": FORMAT,
                "version": __version__,
                "scenario": simulation.fingerprint,
                "state": {name: getattr(simulation, name) for name in SAVED},
                "executor_rngs": [
                    rng.bit_generator.state for rng in (simulation.executor.rng, simulation.executor.eval_rng)
                ],
                "journal": simulation.pricer.journal,  # the calls to replay (IdealPricer: none)
                "process_rngs": (torch.get_rng_state(), np.random.get_state(), random.getstate()),
            }
        )


def restore(simulation, path: Path) -> int:
    """Bring a fresh ``simulation`` (built from the same scenario, no round run) to the state saved in
    ``path``; returns the number of rounds the checkpoint had run."""
    path = Path(path)
    scenario = simulation.scenario
    modules = plugin_modules(simulation)  # before the saved state replaces the fresh one
    saved = _load(path, {name: getattr(simulation, name) for name in REBUILT}, modules)
    if saved["version"] != __version__:
        raise CheckpointError(
            f"{path}: written by edgefl {saved['version']}, this is {__version__} (the run could "
            "not continue identically); run without --resume to start again"
        )
    now = fingerprint(scenario)
    if saved["scenario"] != now:
        raise CheckpointError(
            f"{path}: the checkpoint is of another scenario "
            f"({describe_differences(saved['scenario'], now)}); resume with the same scenario and "
            "--set values, or run without --resume"
        )
    state = saved["state"]
    if (
        not isinstance(state, dict)
        or set(state) != set(SAVED)
        or any(type(state[name]) is not type(getattr(simulation, name)) for name in SAVED)
    ):
        raise _of_another_version(path, "its saved state is not what this version's run saves")
    for name in SAVED:
        setattr(simulation, name, state[name])
    try:
        for rng, rng_state in zip(
            (simulation.executor.rng, simulation.executor.eval_rng), saved["executor_rngs"], strict=True
        ):
            rng.bit_generator.state = rng_state
    except (TypeError, ValueError, OverflowError) as exc:
        raise _not_a_checkpoint(path, f"its random states do not load: {type(exc).__name__}: {exc}") from None
    journal = saved["journal"]
    if journal is not None:  # the co-simulation: its calls replayed on the fresh pricer
        if not isinstance(journal, list) or not all(
            isinstance(call, tuple) and len(call) == 2 and isinstance(call[0], str) and isinstance(call[1], bytes)
            for call in journal
        ):
            raise _not_a_checkpoint(path, "its journal is not a list of calls")
        simulation.keep_checkpoints()
        try:
            replay(simulation.pricer, journal, loads=lambda packed: restricted_loads(zlib.decompress(packed), modules))
        except (pickle.UnpicklingError, zlib.error, EOFError, ValueError, TypeError) as exc:
            raise _not_a_checkpoint(path, f"its journal does not replay: {type(exc).__name__}: {exc}") from None
    try:
        torch_state, numpy_state, python_state = saved["process_rngs"]
        torch.set_rng_state(torch_state)
        np.random.set_state(numpy_state)
        random.setstate(python_state)
    except (TypeError, ValueError, OverflowError, RuntimeError) as exc:
        raise _not_a_checkpoint(path, f"its random states do not load: {type(exc).__name__}: {exc}") from None
    return simulation.record.rounds_done


KEYS = frozenset({"format", "version", "scenario", "state", "executor_rngs", "journal", "process_rngs"})


def format_line(version: int = FORMAT) -> bytes:
    """A checkpoint's second line: the format of what follows."""
    return f"format {version}\n".encode()


def _of_another_version(path: Path, what: str) -> CheckpointError:
    return CheckpointError(
        f"{path}: an edgefl checkpoint written by another version of edgefl ({what}), which this version cannot "
        "resume: run without --resume to start the run again (its checkpoint is then replaced), or finish it with "
        "the edgefl that wrote it"
    )


def _check_format(path: Path, line: bytes) -> None:
    """CheckpointError unless ``line`` (a checkpoint's second line) is this :data:`FORMAT`'s: a checkpoint of an
    older format has a pickle there (formats up to 3 had no such line)."""
    if line == format_line():
        return
    words = line.split()
    found = int(words[1]) if len(words) == 2 and words[0] == b"format" and words[1].isdigit() else None
    if found is None:
        what = f"an older one: its format is 3 or earlier, this edgefl reads format {FORMAT}"
    else:
        age = "an older" if found < FORMAT else "a newer"
        what = f"{age} one: its format is {found}, this edgefl reads format {FORMAT}"
    raise _of_another_version(path, what)


def _not_a_checkpoint(path: Path, why: str) -> CheckpointError:
    return CheckpointError(
        f"{path}: not an edgefl checkpoint ({why}); delete it, or run without --resume to start again"
    )


def _load(path: Path, rebuilt: dict[str, object], modules: tuple[str, ...]) -> dict:
    """The checkpoint in ``path``, read without running any of its code (:class:`_Unpickler`), as a dict of
    :data:`KEYS` of this :data:`FORMAT`; CheckpointError (exit 2) for anything else."""
    if not path.is_file():  # a folder, a pipe (open() would block), a device
        raise _not_a_checkpoint(path, "not a regular file")
    try:
        with open(path, "rb") as handle:
            first = handle.readline(200)
            if not first.startswith(CHECKPOINT_MAGIC):
                raise _not_a_checkpoint(path, "it does not begin with edgefl's checkpoint header")
            _check_format(path, handle.readline(len(format_line()) + 8))
            saved = _Unpickler(handle, rebuilt, modules).load()
    except CheckpointError:
        raise
    except _Missing as exc:  # edgefl's header and format, and a class that this edgefl (or plug-in) does not have
        raise _of_another_version(path, str(exc)) from None
    except Exception as exc:  # noqa: BLE001  whatever a damaged or crafted file makes the unpickler raise
        raise _not_a_checkpoint(path, f"{type(exc).__name__}: {exc}") from None
    if not isinstance(saved, dict) or set(saved) != KEYS or saved["format"] != FORMAT:
        raise _not_a_checkpoint(path, f"not a checkpoint of format {FORMAT}")
    if not isinstance(saved["version"], str) or not isinstance(saved["scenario"], dict):
        raise _not_a_checkpoint(path, "its version or scenario is not one edgefl writes")
    return saved
