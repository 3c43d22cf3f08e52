"""An algorithm reports through the typed hook a component has (issue 32 item 3): it declares its metrics.csv
``columns`` (values: ``report()``) and its events.csv ``event_columns`` (values: ``event_values(event)``); the
runner knows no algorithm by name (HierFAVG's edge_rounds and aggregation come this way, with edge servers only)."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from edgefl.plugins import PluginError
from edgefl.runner import Simulation, write_results
from edgefl.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "scenarios" / "quickstart.toml"
SMALL = ["run.rounds=2", "data.num_clients=10", "algorithm.clients_per_round=4", "algorithm.local_steps=2"]

FAULTY = """

class MissesAColumn(Counting):
    def report(self):
        return {}


class ShortEvents(Counting):
    def event_values(self, event):
        return ()
"""


@pytest.fixture
def counting(tmp_path, monkeypatch):
    """docs/extending.md's Counting algorithm, as written there, in my_counting.py (and two faulty ones)."""
    text = (ROOT / "docs" / "extending.md").read_text()
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", text, flags=re.S) if "class Counting(FedAvg)" in b]
    (tmp_path / "my_counting.py").write_text(block + FAULTY)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield


def run_files(tmp_path: Path, name: str, sets: list[str]) -> Path:
    result = Simulation(load_scenario(QUICKSTART, [*SMALL, *sets])).run(progress=False)
    return write_results(result, tmp_path / name, plots=False)


def test_an_algorithm_adds_its_columns_before_the_components_and_its_event_columns(counting, tmp_path):
    out = run_files(tmp_path, "counting", ["algorithm.name=my_counting:Counting", "backhaul.rate_mbps=100"])
    rows = list(csv.DictReader(open(out / "metrics.csv")))
    header = list(rows[0])
    assert [int(r["server_updates"]) for r in rows] == [1, 2]
    assert header.index("server_updates") < header.index("cloud_rounds")  # the algorithm's, then the backhaul's
    events = list(csv.DictReader(open(out / "events.csv")))
    assert events and all(e["parity"] == ("odd" if (int(e["round"]) - 1) % 2 else "even") for e in events)
    assert {e["parity"] for e in events} == {"odd", "even"}


@pytest.mark.parametrize(
    ("name", "what"),
    [
        ("MissesAColumn", r"report\(\) returned \{\}.*expected a dict of its columns, \['server_updates'\]"),
        ("ShortEvents", r"event_values\(\) returned \(\).*expected a tuple of 1 values"),
    ],
)
def test_an_algorithm_that_reports_other_columns_than_it_declares_is_named(counting, tmp_path, name, what):
    with pytest.raises(PluginError, match=rf"algorithm.name = 'my_counting:{name}'.*{what}"):
        run_files(tmp_path, name, [f"algorithm.name=my_counting:{name}"])


def test_hierfavg_reports_edge_rounds_with_edge_servers_only(tmp_path):
    """With one cell and no backhaul HierFAVG has one server (its outputs are FedAvg's): no edge columns; a
    backhaul to a cloud makes the base station an edge server (decided by the run's parts, edgefl.parts)."""
    hier = ["algorithm.name=hierfavg", "algorithm.hierfavg.edge_rounds=2"]
    alone = run_files(tmp_path, "alone", hier)
    assert "edge_rounds" not in next(csv.DictReader(open(alone / "metrics.csv")))
    assert "aggregation" not in next(csv.DictReader(open(alone / "events.csv")))
    edge = run_files(tmp_path, "edge", [*hier, "backhaul.rate_mbps=100"])
    rows = list(csv.DictReader(open(edge / "metrics.csv")))
    assert [int(r["edge_rounds"]) for r in rows] == [2, 4]
    assert [int(r["cloud_rounds"]) for r in rows] == [1, 2]
    marks = {(int(e["phase"]), e["aggregation"]) for e in csv.DictReader(open(edge / "events.csv"))}
    assert marks == {(0, "edge"), (1, "cloud")}
