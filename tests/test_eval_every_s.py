"""run.eval_every_s: the global model is evaluated at the first round (server update) that ends at or after each
multiple of t seconds of simulated time, and at the last round; it replaces run.eval_every."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from edgefl.runner import Simulation
from edgefl.scenario import scenario_from_dict

from conftest import make_scenario

QUICKSTART = Path(__file__).resolve().parents[1] / "scenarios" / "quickstart.toml"
NETWORK = {"snr_db": 15.0, "bandwidth_mhz": 1.0, "access": "fdma", "fading": "rayleigh"}


def _scenario(algorithm: str, engine: str = "simpy", run: dict | None = None, **hp):
    base = make_scenario(algorithm, engine=engine, rounds=12, clients_per_round=4, network=NETWORK, **hp).model_dump(
        mode="json", exclude_none=True
    )
    return scenario_from_dict({**base, "run": {**base["run"], **(run or {})}, "devices": {"slowdown": "exponential"}})


def _expected_rounds(times: list[float], every_s: float) -> list[int]:
    """By the definition, not the runner's formula: for each multiple k·t up to the last round's end, the first
    round whose end is at or after it; and the last round."""
    chosen = set()
    k = 1
    while k * every_s <= times[-1]:
        chosen.add(next(i + 1 for i, t in enumerate(times) if t >= k * every_s))
        k += 1
    return sorted(chosen | {len(times)})


@pytest.mark.parametrize(
    "algorithm, hp", [("fedavg", {}), ("fedbuff", {"buffer_size": 2, "concurrency": 4}), ("fedasync", {})]
)
def test_the_rounds_evaluated_are_the_first_after_each_multiple_of_eval_every_s(algorithm, hp):
    every_round = Simulation(_scenario(algorithm, **hp)).run(progress=False).metrics
    times = [r["sim_time_s"] for r in every_round]
    every_s = times[-1] / 4.5  # four multiples within the run, rounds of uneven length (fading, stragglers)
    by_time = Simulation(_scenario(algorithm, run={"eval_every_s": every_s}, **hp)).run(progress=False).metrics
    assert [r["sim_time_s"] for r in by_time] == times  # evaluating does not change the run
    evaluated = [r["round"] for r in by_time if r["acc_mean"] is not None]
    assert evaluated == _expected_rounds(times, every_s)
    assert 4 <= len(evaluated) < len(times)  # the test could fail: fewer evaluations than rounds, but some
    for row, full in zip(by_time, every_round):
        if row["acc_mean"] is not None:
            assert (row["acc_mean"], row["loss"]) == (full["acc_mean"], full["loss"])


def test_it_replaces_eval_every_and_the_ideal_engine_evaluates_only_the_last_round():
    scenario = _scenario("fedavg", engine="ideal", run={"eval_every": 1, "eval_every_s": 0.5})
    rows = Simulation(scenario).run(progress=False).metrics
    assert [r["round"] for r in rows if r["acc_mean"] is not None] == [12]  # simulated time stays 0


@pytest.mark.parametrize(
    "value, expected",
    [("nan", "finite number"), ("inf", "finite number"), ("-1", "greater than 0"), ("0", "greater than 0")],
)
def test_a_bad_eval_every_s_exits_2_naming_it(tmp_path, value, expected):
    out = subprocess.run(
        [sys.executable, "-m", "edgefl", "run", str(QUICKSTART), "--set", f"run.eval_every_s={value}"]
        + ["--out", str(tmp_path / "r"), "--quiet"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "run.eval_every_s" in out.stderr and expected in out.stderr
    assert not (tmp_path / "r").exists()  # nothing half-written


def test_a_sweep_co_simulates_its_points_when_evaluation_follows_the_simulated_time():
    from edgefl.sweeps.plan import COSIMULATED, REPRICED, pricing_mode

    assert pricing_mode(_scenario("fedavg")) == REPRICED  # else re-priced from one training ...
    assert pricing_mode(_scenario("fedavg", run={"eval_every_s": 1.0})) == COSIMULATED  # ... evaluated elsewhere


def test_adaptive_tau_which_reads_the_loss_every_round_refuses_it():
    from edgefl.scenario import ScenarioError

    raw = _scenario("fedavg").model_dump(mode="json", exclude_none=True)
    raw["control"] = {"name": "adaptive_tau"}
    scenario_from_dict(raw)  # evaluated every round: accepted
    raw["run"]["eval_every_s"] = 1.0
    with pytest.raises(ScenarioError, match="leave run.eval_every_s unset"):
        scenario_from_dict(raw)
