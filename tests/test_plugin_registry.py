"""The one plug-in registry (plugin_registry): algorithms, data sets, path-loss models and controllers
resolved alike, from a built-in name, an installed entry point or "package.module:attribute", with one
exception type for a name that cannot be resolved."""

from __future__ import annotations

import sys

import pytest

import algorithms
from channel import path_loss
from edgefl import control
from edgefl.data import DataError
from edgefl.data import registry as data_registry
from edgefl.scenario import ScenarioError, scenario_from_dict
from plugin_registry import Registry, UnknownPlugin, subclass_of

PLUGIN = """
import numpy as np
from algorithms.fedavg import FedAvg
from edgefl.control import Controller
from edgefl.data.synthetic import SyntheticData


class MyAlgorithm(FedAvg):
    pass


class MyController(Controller):
    pass


class MyData(SyntheticData):
    pass


def walls(distance_m, network):
    return 100.0 + 0.0 * np.asarray(distance_m)


NOT_A_CLASS = 3
"""

ENTRY_POINTS = """[edgefl.algorithms]
my_algorithm = my_installed:MyAlgorithm

[edgefl.controllers]
my_controller = my_installed:MyController

[edgefl.datasets]
my_data = my_installed:MyData

[edgefl.path_loss]
walls = my_installed:walls
"""


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """A package installed with an entry point in each group (a dist-info folder on the Python path)."""
    (tmp_path / "my_installed.py").write_text(PLUGIN)
    info = tmp_path / "my_installed-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my_installed\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield sys.modules
    sys.modules.pop("my_installed", None)


def test_every_kind_resolves_an_installed_entry_point(installed):
    assert algorithms.get("my_algorithm").__name__ == "MyAlgorithm" and "my_algorithm" in algorithms.names()
    assert control.get("my_controller").__name__ == "MyController" and "my_controller" in control.names()
    assert data_registry.get("my_data").__name__ == "MyData" and "my_data" in data_registry.names()
    assert path_loss.get("walls").__name__ == "walls" and "walls" in path_loss.names()
    assert data_registry.is_plugin("my_data") and not data_registry.is_plugin("synthetic")


def test_an_installed_controller_runs_by_its_name(installed):
    # controllers had no entry-point group before the one registry
    s = scenario_from_dict(
        {
            "run": {"rounds": 1},
            "data": {"num_clients": 4},
            "algorithm": {"clients_per_round": 2},
            "control": {"name": "my_controller"},
        }
    )
    assert s.control.plugin_class().__name__ == "MyController"


def test_every_kind_resolves_module_attribute_and_says_what_is_wrong_alike(installed):
    lookups = [(algorithms.get, "algorithm"), (control.get, "controller"), (path_loss.get, "path-loss model")]
    for get, kind in lookups:
        with pytest.raises(UnknownPlugin, match=f"unknown {kind} 'nope'; known: "):
            get("nope")
        with pytest.raises(UnknownPlugin, match=f"{kind} 'no_such_module:X': cannot import 'no_such_module'"):
            get("no_such_module:X")
    for get, kind in lookups[:2]:
        with pytest.raises(UnknownPlugin, match=f"{kind} 'my_installed:NOT_A_CLASS': my_installed.NOT_A_CLASS is not "):
            get("my_installed:NOT_A_CLASS")
    with pytest.raises(UnknownPlugin, match="is not a function model"):
        path_loss.get("my_installed:NOT_A_CLASS")
    with pytest.raises(
        DataError,
        match="data.name: data set 'my_installed:walls': my_installed.walls is not an edgefl.data.DataParams subclass",
    ):
        data_registry.get("my_installed:walls")
    assert algorithms.get("my_installed:MyAlgorithm").__name__ == "MyAlgorithm"
    assert not algorithms.is_algorithm("nope") and algorithms.is_algorithm("fedavg")


def test_an_unknown_name_gets_the_nearest_known_one():
    registry = Registry(
        "widget", {"spanner": int, "hammer": str}, "edgefl.no_such_group", subclass_of(object), "a class"
    )
    assert registry.names() == ["spanner", "hammer"]
    with pytest.raises(
        UnknownPlugin,
        match=r"unknown widget 'spaner' \(did you mean 'spanner'\?\); known: spanner, "
        r"hammer, or \"package.module:Class\"",
    ):
        registry.get("spaner")
    assert registry.get("hammer") is str and "hammer" in registry and "saw" not in registry


@pytest.mark.parametrize(
    "section, value, message",
    [
        ("algorithm", {"name": "fedavgg"}, "unknown algorithm 'fedavgg' (did you mean 'fedavg'?)"),
        ("control", {"name": "min_enrgy"}, "unknown controller 'min_enrgy' (did you mean 'min_energy'?)"),
        ("network", {"path_loss": "free_spac"}, "unknown path-loss model 'free_spac' (did you mean 'free_space'?)"),
        ("data", {"name": "mnits"}, "unknown data set 'mnits' (did you mean 'mnist'?)"),
    ],
)
def test_a_scenario_names_an_unknown_plug_in_the_same_way_for_every_kind(section, value, message):
    with pytest.raises(ScenarioError) as caught:
        scenario_from_dict({section: value})
    assert f"<scenario>: {section}" in str(caught.value) and message in str(caught.value)
