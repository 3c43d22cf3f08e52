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
from edgefl.scenario import NetworkSection, Scenario, read_toml, scenario_from_dict
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
