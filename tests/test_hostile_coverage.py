"""The hostile campaign grows with the features (issue 33 item 6): every scenario key and every plug-in kind
is tried by some family of benchmarks/hostile_campaign.py. A key or kind added without a family (or a family
that stops reaching one) fails here. The keys are read from the scenario's models, walked here independently
of the campaign's generator: every field of every section of the Scenario (sections that are models, lists of
models), every built-in algorithm's, controller's, selection policy's, process's and data set's own keys."""

from __future__ import annotations

import importlib.util
import re
import sys
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

import algorithms
import plugin_registry
from edgefl import control, selection
from edgefl.data.registry import FAMILIES
from edgefl.scenario import Scenario
from edgefl.sim import processes

ROOT = Path(__file__).resolve().parents[1]


def campaign():
    spec = importlib.util.spec_from_file_location("hostile_campaign", ROOT / "benchmarks" / "hostile_campaign.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("hostile_campaign", module)  # (its dataclasses look their module up there)
    spec.loader.exec_module(module)
    return module


def models_in(annotation) -> list[type[BaseModel]]:
    """The pydantic models an annotation holds (a model, Optional[model], list[model], a union of them)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in models_in(arg)]


def every_scenario_key() -> set[str]:
    keys = set()
    for section, info in Scenario.model_fields.items():
        found = models_in(info.annotation)
        if not found:
            keys.add(section)  # a section that is no model: the campaign must still try it
        for model in found:
            prefix = "process.0" if section == "process" else section  # [[process]] tables: process.<i>.<key>
            keys |= {f"{prefix}.{name}" for name in model.model_fields}
    for name in algorithms.names():
        keys |= {f"algorithm.{name}.{key}" for key in algorithms.get(name).Params.model_fields}
    for registry, section in ((control, "control"), (selection, "selection")):
        for name in registry.names():
            keys |= {f"{section}.{key}" for key in registry.get(name).Params.model_fields}
    for name in processes.names():
        keys |= {f"process.0.{key}" for key in getattr(processes.get(name).Params, "model_fields", {})}
    for family in FAMILIES:
        keys |= {f"data.{key}" for key in family.model_fields}
    return keys


def test_every_scenario_key_has_a_hostile_family():
    missing = sorted(every_scenario_key() - campaign().covered())
    assert not missing, f"scenario keys no family of benchmarks/hostile_campaign.py tries: {missing}"


def test_every_plugin_kind_has_a_hostile_family():
    hostile = campaign()
    missing = [kind.key for kind in plugin_registry.KINDS if kind.key not in hostile.PLUGIN_FAMILIES]
    assert not missing, f"plug-in kinds with no family in benchmarks/hostile_campaign.py PLUGIN_FAMILIES: {missing}"
    covered = hostile.covered()
    assert not [kind.key for kind in plugin_registry.KINDS if kind.key not in covered]


def test_the_coverage_check_can_fail(monkeypatch):
    """A kind added to the table, or a key the campaign's cases do not reach, is reported."""
    hostile = campaign()
    fake = plugin_registry.Kind("optimizer", "optimizer.name", "edgefl.optimizers", "an optimizer", True)
    monkeypatch.setattr(plugin_registry, "KINDS", (*plugin_registry.KINDS, fake))
    assert "optimizer.name" not in hostile.PLUGIN_FAMILIES
    assert "network.no_such_key" not in hostile.covered()


@pytest.mark.parametrize(
    "key, value",
    [
        ("algorithm.drdm.gamma", 4611686018427387904),
        ("algorithm.scaff_pd.theta", 1e300),
        ("algorithm.drfa.gamma", 1e300),
    ],
)
def test_found_by_the_keys_family_a_dual_step_that_overflows_is_refused(key, value):
    """The keys family, seed 1: drdm's gamma = 2^62 and scaff_pd's theta = 1e300 overflowed the dual update and
    ended in exit 70 (IndexError in the projection onto the simplex); now exit 2 naming the key."""
    from edgefl.scenario import ScenarioError, load_scenario

    name = key.split(".")[1]
    with pytest.raises(ScenarioError, match=re.escape(key) + ".*less than or equal to 1000000"):
        load_scenario(ROOT / "scenarios" / "quickstart.toml", {"algorithm.name": name, key: value})
