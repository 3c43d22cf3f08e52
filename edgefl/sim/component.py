"""The component protocol: how a physical or control process joins the co-simulation.

The core (:class:`edgefl.sim.pricer.SimPyPricer`) runs client chains in phases on one SimPy
environment and nothing else. Everything else (availability, batteries and harvesting, mobility,
failures, over-selection, a controller's knobs, the radio's states) is a component: a small class
with its own state and its own SimPy processes on ``core.env``, which the core calls at a few
hooks, in the order the components were given (docs/architecture.md, "Adding a physical process").
Every hook has a no-op default here; a component overrides those it needs, and the core calls only
the overridden ones.

Hooks, in the order a run meets them:

- ``attach(core)``: run start; keep ``core``, start background processes.
- ``round_start()``: a round starts, before the server waits for devices (devices move).
- ``settle()``, ``restrict(online)``, ``wakeups()``: while the server waits for enough devices:
  bring the state to now; narrow the bool mask of devices that can take part; the SimPy events
  after which that may change (a component that overrides ``restrict`` gates the round).
- ``round_ready()``: the server has its devices (after the wait; time may have passed).
- ``phase_start(phase, clients, plans)``: a phase's chains are about to start; return the
  clients that do nothing in it (failed earlier, empty).
- ``chain_may_start(client)``: inside the client's process, when it starts: False: it does
  nothing (offline).
- ``before_step(client, step)``: a generator: the SimPy events the client waits for before each step
  of its chain (idle time; e.g. a foreground app holding the CPU).
- ``compute_start(client)``, ``compute_end(client)``: a computation starts / ends or is cut (the
  CPU's power changes).
- ``chains_started(clients, plans, procs)``: the chains' processes exist (a component may
  schedule interrupts: ``core.interrupt(client, cause)``).
- ``upload_arrived(client)``: an upload got through.
- ``allocate(allocation)``: a controller's knobs for the next phase (edgefl.control.Allocation, or
  None: the scenario's values).
- ``round_end(round_)`` and ``run_end()``: what runs on is charged so far / in full.

State: a component's state is rebuilt on ``--resume`` by replaying the pricer's journaled calls on a
fresh pricer (edgefl.sim.journal), so it must be a deterministic function of the pricer's seed and
the calls it received: draw random numbers only from a stream seeded from the pricer's seed.

Rates while an activity runs (for a component that declares ``changes_cpu_rate = True``):
``core.set_cpu_hz(client, hz)`` changes a device's CPU frequency at
once, also in the middle of a computation (the rest is re-timed; each segment is charged at its own
frequency), ``core.cpu_hz_of(client)`` reads it and ``core.knob_cpu_hz(client)`` the frequency the scenario
or the controller set. ``core.set_uplink_rate_factor(client, factor)`` scales a client's uplink rate from
now on, also in the middle of an upload (its airtime left is re-timed; FDMA: the band re-planned); a
component that does declares ``changes_uplink_rate = True``; ``core.set_downlink_rate_factor(client, factor)``
does the same for downloads (``changes_downlink_rate = True``).

What a component reports (typed, declared on its class; docs/extending.md, "A component that reports"):
``columns``, the metrics.csv columns it adds (name -> what it holds, with its unit), whose values its
``metrics()`` returns at the end of every round; and ``exposes``, the per-device values it keeps (name ->
what it is, with its unit; the usual names in :data:`DEVICE_VALUES`), read by other components and the runner
as ``core.device_value(name)`` (an array [N] now; None when no component keeps it), which calls its
``device_value(name)``. The core itself exposes each CPU's frequency now (``cpu_hz``) and each device's
transmit power (``tx_power_w``).

From the scenario file (``[[process]]``, edgefl.sim.processes): a component class named there has ``Params``,
a pydantic model of its own keys (units in the names, bounds, descriptions; None: no keys), and is built by
``from_scenario(params, network, population, seed)`` (default: ``cls(**params)``). It declares
``may_change_participation = False`` if it never decides who takes part in a round (it only changes
timing or energy): a sweep may then re-price a recorded trace for it rather than co-simulate; and
``acts_during_phases = False`` if nothing it does while a phase's chains run acts on them or depends on when
their steps end (it acts only at a phase's start or between phases): where every component declares so, the
core may run a phase's chains on their own clocks (edgefl.sim.pricer, ``_on_own_clocks``).
"""

from __future__ import annotations

import inspect
import math
from typing import ClassVar

import numpy as np
import simpy
from pydantic import BaseModel

from edgefl.plugins import owner_of, returned_fault

# The per-device values the built-ins expose (a component may expose others, described in its ``exposes``).
DEVICE_VALUES = {
    "cpu_hz": "the frequency each CPU runs at now (Hz; the core's)",
    "tx_power_w": "each device's transmit power for its next upload (W; the core's)",
    "battery_j": "each device's battery level now (J; devices.battery_j)",
    "harvested_j": "what each device's battery has harvested so far (J; devices.harvest_w)",
    "position_m": "each device's position (x, y) in m, the base station at the origin (moving devices)",
    "temperature_c": "each device's temperature now (°C; [[process]] thermal)",
}


class Component:
    """A process of the co-simulation; see the module's docstring for the hooks."""

    columns: ClassVar[dict[str, str]] = {}  # metrics.csv columns it adds: name -> what it holds (unit)
    exposes: ClassVar[dict[str, str]] = {}  # per-device values it keeps: name -> what it is (unit)

    changes_cpu_rate = False  # True: it calls core.set_cpu_hz (computations are then watched for it)
    changes_uplink_rate = False  # True: it calls core.set_uplink_rate_factor (uploads are then watched for it)
    changes_downlink_rate = False  # True: it calls core.set_downlink_rate_factor (downloads are then watched)
    # from the scenario file: a pydantic model of the component's own keys (None: it has none)
    Params: ClassVar[type[BaseModel] | None] = None
    may_change_participation = True  # False: it never decides who takes part (a sweep may re-price for it)
    # False: nothing it does while a phase's chains run can act on them or depends on when their steps end (no
    # process of its own, no interrupt, no hook inside a chain that does more than count): the core may then run a
    # phase's chains one after another, each on its own clock (edgefl.sim.chain.OwnClock), when nothing else acts.
    acts_during_phases = True

    @classmethod
    def from_scenario(cls, params, network, population, seed: int) -> "Component":
        """The component a scenario's ``[[process]]`` table asks for (``params``: its validated Params, or None)."""
        return cls(**(params.model_dump() if params is not None else {}))

    def attach(self, core) -> None:
        self.core = core

    def round_start(self) -> None: ...

    def settle(self) -> None: ...

    def restrict(self, online: np.ndarray) -> np.ndarray:
        return online

    def wakeups(self) -> list:
        return []

    def round_ready(self) -> None: ...

    def phase_start(self, phase, clients: list[int], plans: dict) -> set[int]:
        return set()

    def chain_may_start(self, client: int) -> bool:
        return True

    def before_step(self, client: int, step):
        return
        yield

    def compute_start(self, client: int) -> None: ...

    def compute_end(self, client: int) -> None: ...

    def chains_started(self, clients: list[int], plans: dict, procs: list) -> None: ...

    def upload_arrived(self, client: int) -> None: ...

    def allocate(self, allocation) -> None: ...

    def round_end(self, round_: int) -> None: ...

    def run_end(self) -> None: ...

    def metrics(self) -> dict[str, float]:
        """The values of its ``columns`` at the end of a round (every column, every round)."""
        return {}

    def device_value(self, name: str) -> np.ndarray:
        """The per-device value ``name`` (a key of ``exposes``) now: an array [N] (or [N, 2] for positions)."""
        raise KeyError(f"{type(self).__name__} exposes no per-device value {name!r}")


HOOKS = (
    "round_start",
    "settle",
    "restrict",
    "wakeups",
    "round_ready",
    "phase_start",
    "chain_may_start",
    "before_step",
    "compute_start",
    "compute_end",
    "chains_started",
    "upload_arrived",
    "allocate",
    "round_end",
    "run_end",
)


def overriding(components: list[Component], hook: str) -> list:
    """The bound ``hook`` of every component that overrides it (the core calls only these); a plug-in's
    (a component a scenario names, edgefl.plugins) with its results checked (:func:`checked_hook`)."""
    return [
        checked_hook(getattr(c, hook), hook) if owner_of(c) is not None else getattr(c, hook)
        for c in components
        if getattr(type(c), hook) is not getattr(Component, hook)
    ]


# -- what a plug-in component's hooks must return (checked where it enters the core) -----------------------
def _fault(method, value, rule: str, verb: str = "returned"):
    owner = method.__self__
    return returned_fault(owner, method, value, rule, f"the component {type(owner).__name__}", verb)


def _is_event(value) -> bool:
    return isinstance(value, simpy.events.Event)


def checked_hook(method, hook: str):
    """``method`` (a plug-in component's bound ``hook``) as the core calls it: what it returns checked
    against the hook's contract (a PluginError naming the plug-in, the value and the method's file:line)."""
    if hook == "before_step":
        return _checked_waits(method)
    if hook == "restrict":

        def restrict(online):
            got = method(online)
            if not (isinstance(got, np.ndarray) and got.dtype == bool and got.shape == np.shape(online)):
                raise _fault(
                    method, got, f"expected a numpy bool array of shape {np.shape(online)} (who can take part)"
                )
            return got

        return restrict
    if hook == "wakeups":

        def wakeups():
            got = method()
            if not (isinstance(got, (list, tuple)) and all(_is_event(e) for e in got)):
                raise _fault(method, got, "expected a list of SimPy events (after which who can take part may change)")
            return got

        return wakeups
    if hook == "phase_start":

        def phase_start(phase, clients, plans):
            got = method(phase, clients, plans)
            if not (isinstance(got, (set, frozenset)) and got <= set(clients)):
                raise _fault(
                    method, got, "expected a set of the phase's clients (those that do nothing in it; set(): none)"
                )
            return got

        return phase_start
    if hook == "chain_may_start":

        def chain_may_start(client):
            got = method(client)
            if not isinstance(got, (bool, np.bool_)):
                raise _fault(method, got, "expected True or False (whether the client's chain may start)")
            return got

        return chain_may_start
    return method  # the other hooks return nothing the core uses


def _checked_waits(method):
    """A plug-in's ``before_step``: a generator of SimPy events, each a wait of finite, non-negative length."""

    def before_step(client, step):
        waits = method(client, step)
        if not inspect.isgenerator(waits):
            raise _fault(method, waits, "expected a generator (a method with yield) of SimPy events to wait for")
        send, value = waits.send, None
        while True:
            try:
                event = send(value)
            except StopIteration:
                return
            delay = getattr(event, "_delay", 0.0) if isinstance(event, simpy.Timeout) else 0.0
            if not _is_event(event) or not (isinstance(delay, (int, float)) and 0.0 <= delay < math.inf):
                what = "a SimPy event" if not _is_event(event) else "a finite wait (seconds >= 0)"
                raise _fault(method, event, f"expected {what}: e.g. yield core.env.timeout(seconds)", "yielded")
            try:
                value, send = (yield event), waits.send
            except GeneratorExit:
                waits.close()
                raise
            except BaseException as exc:  # an interrupt while it waits: the plug-in's generator handles it
                value, send = exc, waits.throw

    return before_step
