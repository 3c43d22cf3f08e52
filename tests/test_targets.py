"""Targets of a single run: `edgefl run --target` (summary.json) and `run.stop_at` (end the run there)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import edgefl
from edgefl.cli import main
from edgefl.runner import Simulation
from edgefl.scenario import ScenarioError
from edgefl.target import Target, parse_target, rounds_to_target

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "scenarios" / "quickstart.toml"


def test_targets_in_the_summary_are_the_one_definition():
    s = edgefl.load_scenario(QUICKSTART, {"run.rounds": 20})
    result = Simulation(s).run(progress=False, targets=[parse_target("acc_mean=0.6"), parse_target("acc_worst=0.99")])
    reached, never = result.summary["targets"]
    rounds = rounds_to_target(
        [r["round"] for r in result.metrics], [r["acc_mean"] for r in result.metrics], Target("acc_mean", 0.6)
    )
    assert reached["reached"] and reached["rounds"] == rounds
    row = next(r for r in result.metrics if r["round"] == rounds)
    assert reached["energy_j"] == row["committed_energy_j"] and reached["sim_time_s"] == row["sim_time_s"]
    assert reached["booked_energy_j"] == row["energy_j"]
    assert "centred moving average over 5 evaluations are both >= 0.6" in reached["definition"]
    assert never == {**never, "reached": False, "rounds": None, "energy_j": None}


def test_stop_at_ends_the_run_once_the_target_is_confirmed():
    full = Simulation(edgefl.load_scenario(QUICKSTART, {"run.rounds": 30})).run(progress=False)
    s = edgefl.load_scenario(QUICKSTART, {"run.rounds": 30, "run.stop_at": "acc_mean=0.6"})
    stopped = Simulation(s).run(progress=False)
    reached = rounds_to_target(
        [r["round"] for r in full.metrics], [r["acc_mean"] for r in full.metrics], Target("acc_mean", 0.6)
    )
    assert len(stopped.metrics) == reached + 2  # two more evaluations complete its centred window
    assert stopped.metrics == full.metrics[: reached + 2]  # the same run, cut
    assert stopped.summary["rounds_run"] == reached + 2
    assert stopped.summary["targets"][0]["rounds"] == reached
    assert f"reached at round {reached}" in stopped.summary["stopped"]


def test_bad_targets_are_user_errors(tmp_path, capsys):
    with pytest.raises(ScenarioError, match="run.stop_at"):
        edgefl.load_scenario(QUICKSTART, {"run.stop_at": "acc_worst>0.8"})
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "edgefl",
            "run",
            str(QUICKSTART),
            "--target",
            "accc=0.5",
            "--out",
            str(tmp_path / "r"),
            "--quiet",
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2 and "no metric 'accc'" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "r").exists()
    capsys.readouterr()
    assert main(["run", str(QUICKSTART), "--target", "acc_mean=0.5", "--out", str(tmp_path / "ok"), "--quiet"]) == 0
    summary = json.loads((tmp_path / "ok" / "summary.json").read_text())
    assert summary["targets"][0]["target"] == "acc_mean=0.5" and "target acc_mean=0.5: round" in capsys.readouterr().out


@pytest.mark.parametrize(
    "text, hint",
    [
        ("acc_mean=85", "85 looks like a percentage: write 0.85"),
        ("acc_worst=-0.2", "write a fraction, e.g. 0.8"),
        ("acc_mean=250", "write a fraction, e.g. 0.8"),
    ],
)
def test_an_accuracy_target_outside_0_1_is_refused_with_a_hint(tmp_path, text, hint):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "edgefl",
            "run",
            str(QUICKSTART),
            "--target",
            text,
            "--out",
            str(tmp_path / "r"),
            "--quiet",
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2 and hint in out.stderr and "a fraction in [0, 1]" in out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "r").exists()
    with pytest.raises(ScenarioError, match=re.escape(hint)):  # the Python API (its documented error): before any work
        edgefl.run(QUICKSTART, overrides={"run.rounds": 2}, targets=[text], progress=False)
    with pytest.raises(ScenarioError, match=f"run.stop_at.*{re.escape(hint)}"):
        edgefl.load_scenario(QUICKSTART, {"run.stop_at": text})
    assert parse_target("loss=85").value == 85  # a loss has no such bound
