"""Components from the scenario file (issue 21, item 3): ``[[process]]`` tables with ``name`` (a built-in such as
``thermal``, or a plug-in ``"package.module:Class"``) and the component's own keys, validated like an algorithm's;
they run in ``edgefl run``, ``--resume`` and sweeps, and the resolved scenario.toml reruns them identically."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import pytest
import torch

from edgefl.cli import main
from edgefl.results import checkpoint_file
from edgefl.runner import Simulation, write_results
from edgefl.scenario import load_scenario
from edgefl.sweeps.plan import COSIMULATED, REPRICED, SweepError, plan_sweep
from edgefl.sweeps.run import run_sweep
from edgefl.sweeps.store import read_point

torch.set_num_threads(1)

CPU_HZ = 1e9
# 1 W at 1 GHz (κ = 1e-27), R_th·C_th = 0.1 s, steady state 125 °C: the device reaches 26 °C after
# −R·C·ln(1 − 1/(P·R)) = 1.005 ms, in the middle of its first computation (3.2 ms at 1 GHz), and stays throttled.
SCENARIO = """
[run]
seed = 0
rounds = 4
[data]
name = "synthetic"
num_clients = 4
samples_per_client = 100
[algorithm]
clients_per_round = 4
local_steps = 5
[network]
snr_db = 10.0
[devices]
cpu_ghz = 1.0
kappa = 1e-27
cycles_per_sample = 20000
"""
THERMAL = """
[[process]]
name = "thermal"
thermal_resistance_k_per_w = 100.0
thermal_capacitance_j_per_k = 0.001
throttle_c = 26.0
resume_c = 25.5
throttle_factor = 0.5
"""
PLUGIN = '''
from pydantic import BaseModel, ConfigDict, Field

from edgefl.sim.component import Component


class SlowParams(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    factor: float = Field(0.5, gt=0, le=1)


class Slow(Component):
    """Every CPU runs at ``factor`` of its frequency from the start."""

    changes_cpu_rate = True
    may_change_participation = False
    Params = SlowParams

    def __init__(self, factor):
        self.factor = factor

    def attach(self, core):
        super().attach(core)
        for client in range(len(core.pop.cpu_hz)):
            core.set_cpu_hz(client, core.knob_cpu_hz(client) * self.factor)


class Boom(Component):
    def __init__(self):
        raise RuntimeError("boom")


class Quiet(Component):
    """Does nothing, and does not say whether it may change who takes part."""
'''


def run_cli(capsys, *args):
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def compute_rows(folder: Path) -> list[dict]:
    rows = csv.DictReader(io.StringIO((folder / "events.csv").read_text()))
    return [r for r in rows if r["kind"] == "compute"]


def segment_hz(row: dict) -> float:
    return float(row["cycles"]) / (float(row["end_s"]) - float(row["start_s"]))


@pytest.fixture
def thermal_file(tmp_path):
    path = tmp_path / "thermal.toml"
    path.write_text(SCENARIO + THERMAL)
    return path


def test_a_thermal_process_from_the_scenario_file_throttles_and_its_resolved_scenario_reruns_identically(
    thermal_file, tmp_path, capsys
):
    code, _, err = run_cli(capsys, "run", thermal_file, "--out", tmp_path / "out", "--no-plots", "-q")
    assert code == 0, err
    rows = [r for r in compute_rows(tmp_path / "out") if r["round"] == "1" and r["client"] == "0"]
    assert len(rows) == 2  # the first computation, split where the device reached throttle_c
    assert [segment_hz(r) for r in rows] == pytest.approx([CPU_HZ, 0.5 * CPU_HZ], rel=1e-9)
    tau_s = 100.0 * 0.001
    time_to_throttle_s = -tau_s * math.log(1 - (26.0 - 25.0) / (1.0 * 100.0))
    assert float(rows[0]["end_s"]) - float(rows[0]["start_s"]) == pytest.approx(time_to_throttle_s, rel=1e-9)
    resolved = (tmp_path / "out" / "scenario.toml").read_text()
    assert "[[process]]" in resolved and "ambient_c = 25.0" in resolved  # its defaults written out too
    code, _, err = run_cli(
        capsys, "run", tmp_path / "out" / "scenario.toml", "--out", tmp_path / "again", "--no-plots", "-q"
    )
    assert code == 0, err
    for name in ("metrics.csv", "clients.csv", "events.csv", "scenario.toml"):
        assert (tmp_path / "again" / name).read_bytes() == (tmp_path / "out" / name).read_bytes(), name


def test_without_the_process_nothing_is_throttled(tmp_path, capsys):
    path = tmp_path / "plain.toml"
    path.write_text(SCENARIO)
    code, _, err = run_cli(capsys, "run", path, "--out", tmp_path / "out", "--no-plots", "-q")
    assert code == 0, err
    assert {round(segment_hz(r)) for r in compute_rows(tmp_path / "out")} == {CPU_HZ}
    assert "process" not in (tmp_path / "out" / "scenario.toml").read_text()


@pytest.mark.parametrize(
    "override, message",
    [
        ("process.0.throtle_c=30", "process[0].throtle_c: unknown key (did you mean 'throttle_c'?)"),
        ("process.0.throttle_c=nan", "process[0].throttle_c: Input should be a finite number"),
        ("process.0.throttle_c=inf", "process[0].throttle_c: Input should be a finite number"),
        ("process.0.throttle_c=1e300", "process[0].throttle_c: Input should be less than or equal to 150"),
        (
            "process.0.thermal_resistance_k_per_w=-1",
            "process[0].thermal_resistance_k_per_w: Input should be greater than 0",
        ),
        ("process.0.throttle_factor=0", "process[0].throttle_factor: Input should be greater than 0"),
        ("process.0.throttle_c=true", "process[0].throttle_c"),
        ("process.0.resume_c=26", "process[0]: resume_c = 26 must be below throttle_c = 26"),
        ("process.0.resume_c=30", "process[0]: resume_c = 30 must be below throttle_c = 26"),
        ("process.0.ambient_c=26", "process[0]: resume_c = 25.5 must be at least ambient_c = 26"),
        ('process.0.name="thermall"', "process[0].name: unknown process 'thermall' (did you mean 'thermal'?)"),
        ('process.0.name="no_such_module:X"', "cannot import 'no_such_module'"),
        ("process.1.throttle_c=30", "expected process.<i>.<key>"),
        ("run.engine=ideal", 'needs run.engine = "simpy"'),
    ],
)
def test_bad_process_keys_exit_2_naming_the_key_and_writing_nothing(thermal_file, tmp_path, capsys, override, message):
    code, _, err = run_cli(
        capsys, "run", thermal_file, "--out", tmp_path / "out", "--no-plots", "-q", "--set", override
    )
    assert code == 2
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_a_single_bracket_process_table_is_explained(tmp_path, capsys):
    path = tmp_path / "single.toml"
    path.write_text(SCENARIO + '[process]\nname = "thermal"\n')
    code, _, err = run_cli(capsys, "run", path, "--out", tmp_path / "out", "--no-plots", "-q")
    assert code == 2 and "process: expected an array of tables, one [[process]] (double brackets)" in err


def test_a_plugin_component_from_the_current_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # as edgefl adds the current folder (edgefl.plugins)
    (tmp_path / "my_slow_process.py").write_text(PLUGIN)
    (tmp_path / "slow.toml").write_text(SCENARIO + '[[process]]\nname = "my_slow_process:Slow"\nfactor = 0.25\n')
    code, _, err = run_cli(capsys, "run", "slow.toml", "--out", "out", "--no-plots", "-q")
    assert code == 0, err
    assert {round(segment_hz(r)) for r in compute_rows(tmp_path / "out")} == {0.25 * CPU_HZ}
    code, _, err = run_cli(capsys, "run", "slow.toml", "--out", "bad", "--no-plots", "-q", "--set", "process.0.factr=1")
    assert code == 2 and "process[0].factr: unknown key (did you mean 'factor'?)" in err
    (tmp_path / "boom.toml").write_text(SCENARIO + '[[process]]\nname = "my_slow_process:Boom"\n')
    code, _, err = run_cli(capsys, "run", "boom.toml", "--out", "boom", "--no-plots", "-q")
    assert code == 4 and "process[0].name = 'my_slow_process:Boom' raised RuntimeError: boom" in err


class Killed(Exception):
    pass


def test_a_resumed_run_with_a_thermal_process_is_identical(thermal_file, tmp_path):
    scenario = load_scenario(thermal_file, ["run.checkpoint_every=2", "run.rounds=5"])
    names = ("metrics.csv", "clients.csv", "events.csv", "scenario.toml")

    def outputs(result, folder):
        write_results(result, folder, plots=False)
        return {name: (folder / name).read_bytes() for name in names}

    straight = outputs(Simulation(scenario).run(progress=False), tmp_path / "straight")
    checkpoint = checkpoint_file(tmp_path / "resumed")

    def abort(row):
        if row["round"] == 3:
            raise Killed

    with pytest.raises(Killed):
        Simulation(scenario).run(progress=False, on_round=abort, checkpoint=checkpoint)
    resumed = Simulation.resume(scenario, checkpoint)
    assert resumed.record.rounds_done == 2
    assert outputs(resumed.run(progress=False, checkpoint=checkpoint), tmp_path / "resumed") == straight
    throttled = [
        r
        for r in csv.DictReader(io.StringIO(straight["events.csv"].decode()))
        if r["kind"] == "compute" and r["round"] in ("3", "4", "5")
    ]
    assert {round(segment_hz(r)) for r in throttled} == {0.5 * CPU_HZ}  # the thermal state went on after the resume


def test_a_sweep_over_a_process_key_re_prices_exactly(thermal_file, tmp_path):
    plan = plan_sweep(thermal_file, grids=["process.0.throttle_c=26,100", "network.snr_db=0,20"], seeds=1)
    assert {p.mode for p in plan.points} == {REPRICED}  # thermal changes timing, never who takes part
    summary = run_sweep(plan, tmp_path / "sweep", progress=False)
    assert summary.trainings == 1 and summary.computed == 4
    times = {}
    for point in plan.points:
        rows = read_point(tmp_path / "sweep", point.id)["rows"]
        full = Simulation(point.scenario).run(progress=False).metrics  # a co-simulation of the point
        for a, b in zip(rows, full, strict=True):
            assert a["sim_time_s"] == pytest.approx(b["sim_time_s"], rel=1e-9)
            assert a["energy_j"] == pytest.approx(b["energy_j"], rel=1e-9)
        times[tuple(point.values.values())] = rows[-1]["sim_time_s"]
    assert times[(26.0, 20.0)] > times[(100.0, 20.0)]  # throttled: slower


def test_sweep_points_of_a_process_that_may_change_participation_are_cosimulated(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "my_quiet_process.py").write_text(PLUGIN)
    (tmp_path / "quiet.toml").write_text(SCENARIO + '[[process]]\nname = "my_quiet_process:Quiet"\n')
    plan = plan_sweep(tmp_path / "quiet.toml", grids=["network.snr_db=0,20"])
    assert {p.mode for p in plan.points} == {COSIMULATED}


@pytest.mark.parametrize(
    "grid, message",
    [
        (
            "process.0.throtle_c=30,40",
            "'process.0.throtle_c': not a key of process 0 (did you mean 'process.0.throttle_c'?)",
        ),
        ("process.1.throttle_c=30,40", "the scenario has 1 [[process]] table(s)"),
        ("process.0.name=thermal", "a process's name cannot be swept"),
        ("process.throttle_c=30", "expected process.<i>.<key>"),
    ],
)
def test_bad_process_sweep_keys_are_refused(thermal_file, grid, message):
    with pytest.raises(SweepError, match=None) as info:
        plan_sweep(thermal_file, grids=[grid])
    assert message in str(info.value)


def test_a_process_sweep_point_out_of_bounds_names_the_key(thermal_file):
    from edgefl.scenario import ScenarioError

    with pytest.raises(ScenarioError) as info:
        plan_sweep(thermal_file, grids=["process.0.resume_c=20,27"])
    assert "process[0]: resume_c = 20 must be at least ambient_c" in str(info.value)
