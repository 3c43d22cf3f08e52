"""Targets of a single run: `edgefl run --target` (summary.json) and `run.stop_at` (end the run there)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import edgefl
from edgefl.runner import Simulation
from edgefl.scenario import ScenarioError
from edgefl.target import Target, parse_target, rounds_to_target

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "scenarios" / "quickstart.toml"


def test_targets_in_the_summary_are_the_one_definition():
    s = edgefl.load_scenario(QUICKSTART, {"run.rounds": 20})
    result = Simulation(s).run(progress=False, targets=[parse_target("acc_mean=0.6"), parse_target("acc_worst=0.99")])
    reached, never = result.summary["targets"]
    rounds = rounds_to_target([r["round"] for r in result.metrics], [r["acc_mean"] for r in result.metrics],
                              Target("acc_mean", 0.6))
    assert reached["reached"] and reached["rounds"] == rounds
    row = next(r for r in result.metrics if r["round"] == rounds)
    assert reached["energy_j"] == row["energy_j"] and reached["sim_time_s"] == row["sim_time_s"]
    assert "centred 5-round moving average" in reached["definition"]
    assert never == {**never, "reached": False, "rounds": None, "energy_j": None}


def test_stop_at_ends_the_run_once_the_target_is_confirmed():
    full = Simulation(edgefl.load_scenario(QUICKSTART, {"run.rounds": 30})).run(progress=False)
    s = edgefl.load_scenario(QUICKSTART, {"run.rounds": 30, "run.stop_at": "acc_mean=0.6"})
    stopped = Simulation(s).run(progress=False)
    reached = rounds_to_target([r["round"] for r in full.metrics], [r["acc_mean"] for r in full.metrics],
                               Target("acc_mean", 0.6))
    assert len(stopped.metrics) == reached + 2  # two more evaluations complete its centred window
    assert stopped.metrics == full.metrics[:reached + 2]  # the same run, cut
    assert stopped.summary["rounds_run"] == reached + 2
    assert stopped.summary["targets"][0]["rounds"] == reached
    assert f"reached at round {reached}" in stopped.summary["stopped"]


def test_bad_targets_are_user_errors(tmp_path):
    with pytest.raises(ScenarioError, match="run.stop_at"):
        edgefl.load_scenario(QUICKSTART, {"run.stop_at": "acc_worst>0.8"})
    out = subprocess.run([sys.executable, "-m", "edgefl", "run", str(QUICKSTART), "--target", "accc=0.5", "--out",
                          str(tmp_path / "r"), "--quiet"], capture_output=True, text=True)
    assert out.returncode == 2 and "no metric 'accc'" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "r").exists()
    ok = subprocess.run([sys.executable, "-m", "edgefl", "run", str(QUICKSTART), "--target", "acc_mean=0.5", "--out",
                         str(tmp_path / "ok"), "--quiet", "--no-plots"], capture_output=True, text=True, check=True)
    summary = json.loads((tmp_path / "ok" / "summary.json").read_text())
    assert summary["targets"][0]["target"] == "acc_mean=0.5" and "target acc_mean=0.5: round" in ok.stdout
