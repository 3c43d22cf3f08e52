"""A run is built in one straight line: the scenario is turned once into typed parts (edgefl.parts), and nothing
below the runner keeps the scenario: the engine's pricer and components, the controller and its observer, the
compressor and the algorithm read the parts."""

from __future__ import annotations

import gc
import types
from pathlib import Path

import numpy as np
import torch
from pydantic import BaseModel

from edgefl.compression import QSGD
from edgefl.control.min_energy import MinEnergy
from edgefl.parts import RunParts, build_parts
from edgefl.runner import Simulation
from edgefl.scenario import NetworkSection, RunSection, Scenario, read_toml, scenario_from_dict
from edgefl.sim.thermal import Thermal

QUICKSTART = Path(__file__).resolve().parents[1] / "scenarios" / "quickstart.toml"


def everything_on() -> Scenario:
    """Quickstart with a controller, compression, a component from [[process]], batteries and device classes."""
    raw = read_toml(QUICKSTART)
    raw["run"]["rounds"] = 2
    raw["network"].update(access="fdma", deadline_s=1.0)
    raw["control"] = {"name": "min_energy"}
    raw["compression"] = {"name": "qsgd", "bits": 4}
    raw["process"] = [{"name": "thermal"}]
    raw.setdefault("devices", {})["battery_j"] = 500.0
    return scenario_from_dict(raw)


def reachable(*roots) -> list:
    """Every object reachable from ``roots`` through attributes, containers and closures (not through modules,
    classes or a function's globals: those are code, not a run's state)."""
    seen: set[int] = set()
    found, stack = [], list(roots)
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, (types.ModuleType, type, str, bytes, int, float, np.ndarray)):
            continue
        if isinstance(obj, torch.Tensor):
            continue
        seen.add(id(obj))
        found.append(obj)
        if isinstance(obj, types.FunctionType):
            stack += [c.cell_contents for c in obj.__closure__ or ()] + list(obj.__defaults__ or ())
        elif isinstance(obj, types.MethodType):
            stack.append(obj.__self__)
        else:
            stack += gc.get_referents(obj)
    return found


def test_the_parts_are_typed_and_built_once():
    s = everything_on()
    parts = build_parts(s)
    assert isinstance(parts, RunParts)
    assert isinstance(parts.controller, MinEnergy) and parts.observer is not None
    assert isinstance(parts.compressor, QSGD) and parts.compressor.b == 4
    assert any(isinstance(c, Thermal) for c in parts.components)
    assert parts.pricer.components[-1] is parts.components[-1]  # the pricer runs the parts' components
    assert parts.network.bits_per_param == s.network.bits_per_param
    assert parts.algorithm.hp == s.algorithm.hyperparams() and parts.algorithm.cls.__name__
    assert np.isfinite(parts.population.battery_j).all()


def test_nothing_below_the_runner_keeps_the_scenario():
    """The scenario object is reachable from none of the parts a run is made of; of its sections only [network]
    is, held by the path-loss model (a path-loss model is called with the [network] section, docs/extending.md)."""
    s = everything_on()
    sim = Simulation(s)
    parts = sim.parts
    objects = reachable(
        parts.pricer,
        parts.components,
        parts.controller,
        parts.observer,
        parts.compressor,
        parts.network,
        parts.population,
        parts.algorithm,
        sim.engine,
        sim.algorithm,
        sim.context,
    )
    assert not any(o is s for o in objects)
    sections = {
        type(o).__name__ for o in objects if isinstance(o, BaseModel) and o.__module__.startswith("edgefl.scenario")
    }
    assert sections <= {NetworkSection.__name__}, sections


def test_the_recorder_reads_the_parts_not_the_scenario():
    """(issue 32 item 4) The Recorder, which writes a run's rows and summary.json, keeps no scenario: of its
    sections only [run] (its own: evaluation, stop_at) and [network] (held by the path-loss model)."""
    from edgefl.runner import Recorder

    s = everything_on()
    sim = Simulation(s)
    objects = reachable(Recorder(sim, None))
    assert not any(o is s for o in objects)
    sections = {
        type(o).__name__ for o in objects if isinstance(o, BaseModel) and o.__module__.startswith("edgefl.scenario")
    }
    assert sections <= {NetworkSection.__name__, RunSection.__name__}, sections


def test_the_static_controller_and_uniform_selection_are_null_objects_the_engine_never_asks(monkeypatch):
    """(issue 32 item 4) No [control], no [selection]: the parts are the base Controller and NoPolicy, not None; the
    engine's side of the controller is FixedKnobs, so in a whole run nothing is observed for it and the pricer is
    never allocated knobs; the algorithm samples with its own stream (no selector)."""
    from edgefl.control import Controller
    from edgefl.control.observe import Observer
    from edgefl.control.steering import FixedKnobs, Steering
    from edgefl.selection import NoPolicy

    raw = read_toml(QUICKSTART)
    raw["run"]["rounds"] = 2
    sim = Simulation(scenario_from_dict(raw))
    assert type(sim.parts.controller) is Controller and not sim.parts.controller.steers()
    assert type(sim.engine.steering) is FixedKnobs and not isinstance(sim.engine.steering, Steering)
    assert type(sim.engine.selection) is NoPolicy and sim.context.selector is None
    asked = []
    monkeypatch.setattr(Observer, "observe", lambda self, *a: asked.append("observe"))
    monkeypatch.setattr(type(sim.pricer), "allocate", lambda self, allocation: asked.append("allocate"))
    result = sim.run(progress=False)
    assert asked == [] and len(result.metrics) == 2 and "control_state" not in result.summary
    assert sim.parts.observer.history is sim.record.rows  # the rows so far are what the server observes


def test_a_controller_is_asked_only_where_it_overrides_plan_or_allocate():
    """Controller.steers: the static base class does not; a subclass overriding either hook does (Steering)."""
    from edgefl.control import Controller
    from edgefl.control.adaptive_tau import AdaptiveTau
    from edgefl.control.steering import FixedKnobs, Steering, steering

    class OnlyMetrics(Controller):
        def metrics(self) -> dict:
            return {"x": 1.0}

    class OnlyAllocates(Controller):
        def allocate(self, obs, work):
            return None

    assert not Controller.steers() and not OnlyMetrics.steers()
    assert OnlyAllocates.steers() and AdaptiveTau.steers() and MinEnergy.steers()
    parts = build_parts(everything_on())
    assert isinstance(steering(parts.controller, parts.observer, parts.pricer, 10), Steering)
    assert type(steering(Controller(parts.controller.ctx), parts.observer, parts.pricer, 10)) is FixedKnobs
