"""`edgefl sweep`: grids, the [sweep] section, the tidy results table, resumption after a kill,
refusal to mix two sweeps in one folder, bad input, and process-pool = serial."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
from multiprocessing import resource_tracker
from pathlib import Path

import pytest
import torch

import edgefl
from edgefl.cli import main
from edgefl.errors import WorkerDied
from edgefl.plugins import PluginError
from edgefl.results import METRIC_COLUMNS
from edgefl.scenario import ScenarioError
from edgefl.sweeps import run as sweep_run
from edgefl.sweeps.plan import REPRICED, SweepError, parse_grid, plan_sweep
from edgefl.sweeps.store import COMPUTED_LOG, MANIFEST

from conftest import HANG_S, hooked_edgefl, live_children

torch.set_num_threads(1)

SCENARIO = """
[run]
seed = 3
rounds = {rounds}

[data]
name = "synthetic"
num_clients = 6
samples_per_client = 30

[algorithm]
name = "fedavg"
local_steps = 2
clients_per_round = 4
lr = 0.05

[network]
snr_db = 10.0
bandwidth_mhz = 1.0
fading = "rayleigh"
"""


@pytest.fixture
def scenario_file(tmp_path):
    path = tmp_path / "small.toml"
    path.write_text(SCENARIO.format(rounds=3))
    return path


def run_cli(capsys, *args):
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def read_csv(path):
    with open(path, newline="") as handle:
        return list(csv.reader(handle))


def computed_ids(directory):
    return [json.loads(line)["id"] for line in (directory / COMPUTED_LOG).read_text().splitlines()]


# -- the plan ---------------------------------------------------------------------------------
def test_parse_grid_values_are_toml_literals_or_strings():
    assert parse_grid("network.snr_db=0,5.5,-3") == ("network.snr_db", [0, 5.5, -3])
    assert parse_grid("network.fading=none,rayleigh") == ("network.fading", ["none", "rayleigh"])
    assert parse_grid("algorithm.local_steps = 5, 10") == ("algorithm.local_steps", [5, 10])
    for bad, message in (
        ("network.snr_db", "expected key=v1,v2"),
        ("network.snr_dbb=1", "did you mean"),
        ("run.seed=1,2", "--seeds"),
        ("network.snr_db=1,,2", "empty value"),
        ("network.snr_db=1,1", "repeated"),
    ):
        with pytest.raises(SweepError, match=message):
            parse_grid(bad)


def test_the_seeds_hashes_are_those_of_each_seeds_own_text():
    from edgefl.sweeps.plan import _hash, _seeded, _seeded_hashes

    config = {
        "run": {"seed": 0, "rounds": 3, "note": 'a "quoted" \\ näme \x00'},
        "data": {"name": "mnist", "dir": "/x/ü", "alpha": 0.1, "zero": -0.0, "big": 10**30},
        "grid": [1, 2.5, None, True, "z"],
        "a": {"seed": 7},  # another key named seed: only run.seed changes
    }
    seeds = [0, 1, 7, -3, 10**12]
    assert _seeded_hashes(lambda seed: {"format": 1, "scenario": _seeded(config, seed)}, seeds) == [
        _hash({"format": 1, "scenario": _seeded(config, seed)}) for seed in seeds
    ]
    assert len(set(_seeded_hashes(lambda seed: _seeded(config, seed), seeds))) == len(seeds)


def test_sweep_section_of_the_scenario_gives_grid_and_seeds(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(
        SCENARIO.format(rounds=2) + '\n[sweep]\nseeds = 2\n[sweep.grid]\n"network.snr_db" = [0, 20]\n'
        '"algorithm.local_steps" = [1, 2]\n'
    )
    plan = plan_sweep(path)
    assert plan.grid == {"network.snr_db": [0, 20], "algorithm.local_steps": [1, 2]}
    assert plan.seeds == [3, 4] and len(plan.points) == 8
    assert plan.num_trainings == 4  # (τ, seed): SNR points share a training
    assert {p.mode for p in plan.points} == {REPRICED}
    plan = plan_sweep(path, grids=["network.snr_db=5"], seeds=1)  # --grid replaces that key; --seeds wins
    assert plan.grid == {"network.snr_db": [5], "algorithm.local_steps": [1, 2]} and plan.seeds == [3]


def test_bad_sweep_section_names_the_field(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(SCENARIO.format(rounds=2) + '\n[sweep.grid]\n"network.bandwith_mhz" = [1, 2]\n')
    with pytest.raises(ScenarioError, match=r"sweep\.grid: 'network.bandwith_mhz': unknown key \(did you mean"):
        plan_sweep(path)
    path.write_text(SCENARIO.format(rounds=2) + '\n[sweep.grid]\n"network.bandwidth_mhz" = [1, -2]\n')
    with pytest.raises(ScenarioError, match=r"sweep point network.bandwidth_mhz=-2.*network.bandwidth_mhz"):
        plan_sweep(path)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--grid", "network.snr_db"], "--grid 'network.snr_db': expected key=v1,v2"),
        (["--grid", "network.snr=1,2"], "did you mean 'network.snr_db'"),
        (
            ["--grid", "network.bandwidth_mhz=1,0"],
            "network.bandwidth_mhz: Input should be greater than or equal to 0.001",
        ),
        (["--grid", "network.access=dedicated,cdma"], "network.access"),
        (["--seeds", "0"], "--seeds must be an integer from 1 to 1000"),
        (["--workers", "0"], "--workers must be >= 1"),
        (["--address", "auto"], "is for --backend ray"),
        (["--set", "algorithm.lr=-1"], "algorithm.lr"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(scenario_file, tmp_path, capsys, args, message):
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "sweep", scenario_file, "--out", out, "--quiet", *args)
    assert code == 2
    assert err.startswith("edgefl: error:") and message in err and "Traceback" not in err
    assert not out.exists()


def test_missing_data_leaves_no_folder_behind(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    path = tmp_path / "mnist.toml"
    path.write_text(f'[data]\nname = "mnist"\ndir = "{empty}"\nnum_clients = 4\n[algorithm]\nclients_per_round = 2\n')
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "sweep", path, "--out", out, "--quiet", "--grid", "network.snr_db=0,10")
    assert code == 2 and "Traceback" not in err
    assert not out.exists()


# -- running, resuming ------------------------------------------------------------------------
def test_results_table_is_tidy_and_rerun_computes_nothing(scenario_file, tmp_path, capsys):
    out = tmp_path / "sweep"
    grid = [
        "--grid",
        "network.snr_db=0,20",
        "--grid",
        "network.bandwidth_mhz=0.5,2",
        "--grid",
        "algorithm.local_steps=1,2",
        "--grid",
        "network.deadline_s=1000.0",
    ]
    code, stdout, err = run_cli(capsys, "sweep", scenario_file, "--seeds", 2, "--out", out, "--quiet", *grid)
    assert code == 0, err
    assert "16 computed now" in stdout
    rows = read_csv(out / "results.csv")
    header = rows[0]
    assert header == (
        ["network.snr_db", "network.bandwidth_mhz", "algorithm.local_steps", "network.deadline_s", "seed", "round"]
        + [c for c in METRIC_COLUMNS if c != "round"]
        + ["mode"]
    )
    assert len(rows) == 1 + 16 * 3  # points x seeds x rounds
    assert {r[-1] for r in rows[1:]} == {"cosimulated"}  # a deadline: the channel decides who arrives
    assert len(computed_ids(out)) == 16
    before = (out / "results.csv").read_bytes()
    code, stdout, _ = run_cli(capsys, "sweep", scenario_file, "--seeds", 2, "--out", out, "--quiet", *grid)
    assert code == 0 and "0 computed now, 16 already done" in stdout
    assert len(computed_ids(out)) == 16
    assert (out / "results.csv").read_bytes() == before


def test_a_different_sweep_in_the_same_folder_is_refused_unless_forced(scenario_file, tmp_path, capsys):
    out = tmp_path / "sweep"
    assert run_cli(capsys, "sweep", scenario_file, "--out", out, "--quiet", "--grid", "network.snr_db=0,10,20")[0] == 0
    manifest = (out / MANIFEST).read_bytes()
    results = (out / "results.csv").read_bytes()
    for args in (
        ["--grid", "network.snr_db=0,10"],
        ["--grid", "network.snr_db=0,10,20", "--set", "run.rounds=4"],
        ["--grid", "network.snr_db=0,10,30", "--seeds", "2"],
    ):  # a point less: not a grown grid
        code, _, err = run_cli(capsys, "sweep", scenario_file, "--out", out, "--quiet", *args)
        assert code == 2 and "holds a different sweep" in err and "--force" in err and "to grow it" in err
        assert (out / MANIFEST).read_bytes() == manifest and (out / "results.csv").read_bytes() == results
    code, printed, err = run_cli(
        capsys, "sweep", scenario_file, "--out", out, "--quiet", "--grid", "network.snr_db=0,10", "--force"
    )
    assert code == 0, err
    assert (
        "--force: replaced the sweep in the folder (3 points); its finished points that are also points of "
        "this sweep are reused, 1 others removed"
        in printed
        and "0 computed now, 2 already done" in printed
    )
    rows = read_csv(out / "results.csv")
    assert sorted({r[0] for r in rows[1:]}) == ["0", "10"]
    assert len(list((out / "points").glob("*.json"))) == 2  # the 20 dB point is gone
    assert len(computed_ids(out)) == 3  # 0 and 10 dB were reused, not recomputed


def test_a_sweeps_grid_can_grow_reusing_its_points_and_removing_stale_analyses(scenario_file, tmp_path, capsys):
    out = tmp_path / "sweep"
    grid = ["--grid", "algorithm.local_steps=1,2", "--grid", "network.snr_db=0,10"]
    assert run_cli(capsys, "sweep", scenario_file, "--out", out, "--quiet", *grid)[0] == 0
    first = {tuple(r) for r in read_csv(out / "results.csv")[1:]}
    assert run_cli(capsys, "optimal-tau", out, "--target", "loss=5")[0] == 0
    assert run_cli(capsys, "plot", out, "--target", "loss=5")[0] == 0
    analysis = out / "optimal-tau_loss=5"
    (out / "notes.txt").write_text("mine")  # the user's own files are left alone
    assert (analysis / "tau-pareto.png").exists() and (out / "tau-accuracy-energy.png").exists()
    # values added to the grid, and a seed: the 4 finished points are reused, the 8 new ones computed
    code, printed, err = run_cli(
        capsys,
        "sweep",
        scenario_file,
        "--out",
        out,
        "--quiet",
        "--seeds",
        2,
        "--grid",
        "algorithm.local_steps=1,2",
        "--grid",
        "network.snr_db=0,10,20",
    )
    assert code == 0, err
    assert "12 points" in printed and "8 computed now, 4 already done" in printed
    assert "the sweep's grid grew: 4 points before, 12 now" in printed
    assert "removed the analyses of the old results" in printed and str(analysis) in printed
    assert not analysis.exists() and not (out / "tau-accuracy-energy.png").exists()
    assert (out / "notes.txt").read_text() == "mine"
    assert len(computed_ids(out)) == 12  # each point computed once
    rows = read_csv(out / "results.csv")
    assert len(rows) - 1 == 12 * 3 and first <= {tuple(r) for r in rows[1:]}  # the old rows, unchanged
    # the same command again: a resume, nothing said about growing
    code, printed, _ = run_cli(
        capsys,
        "sweep",
        scenario_file,
        "--out",
        out,
        "--quiet",
        "--seeds",
        2,
        "--grid",
        "algorithm.local_steps=1,2",
        "--grid",
        "network.snr_db=0,10,20",
    )
    assert code == 0 and "0 computed now, 12 already done" in printed and "grew" not in printed


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc: Linux")
@pytest.mark.parametrize(
    "command, error, code",
    [
        ("sweep", KeyboardInterrupt(), 130),  # Ctrl-C
        ("sweep", SweepError("a user mistake"), 2),
        ("sweep", PluginError("a plug-in's fault"), 4),
        ("compare", WorkerDied("a worker died"), 75),
        ("compare", RuntimeError("a bug"), 70),
        ("edgefl.sweep", SweepError("a user mistake"), None),  # the Python API
    ],
)
def test_a_failed_run_with_workers_ends_their_fork_server(
    scenario_file, tmp_path, monkeypatch, capsys, command, error, code
):
    # the server that imports the workers' modules while the sweep is planned (edgefl.sweeps.jobs.
    # workers_started_early) is ended and reaped however the sweep ends, not left until this process ends
    resource_tracker.ensure_running()  # (multiprocessing's own helper process, started once and kept: not counted)
    before = live_children()
    servers: list[set[int]] = []

    def failing_run(*args, **kwargs):
        servers.append(live_children() - before)
        raise error

    monkeypatch.setattr(sweep_run, "run_sweep", failing_run)
    out = tmp_path / "out"
    if command == "edgefl.sweep":
        with pytest.raises(type(error)):
            edgefl.sweep(scenario_file, {"network.snr_db": [0, 20]}, out=out, workers=2, progress=False)
    else:
        extra = ["--algorithms", "fedavg,fedprox"] if command == "compare" else ["--grid", "network.snr_db=0,20"]
        assert run_cli(capsys, command, scenario_file, *extra, "--out", out, "--workers", 2, "--quiet")[0] == code
    assert len(servers) == 1 and len(servers[0]) == 1  # the run came, with the server started
    assert live_children() == before
    assert not Path(f"/proc/{servers[0].pop()}").exists()  # (ended and reaped: not even a zombie)


@pytest.mark.e2e  # several whole edgefl processes: CI's second stage (make test-e2e)
def test_process_pool_gives_the_same_results_as_serial(scenario_file, tmp_path, capsys):
    grid = [
        "--grid",
        "algorithm.local_steps=1,2",
        "--grid",
        "network.snr_db=0,20",
        "--grid",
        "network.access=dedicated,tdma",
        "--seeds",
        2,
        "--quiet",
    ]
    assert run_cli(capsys, "sweep", scenario_file, "--out", tmp_path / "serial", *grid)[0] == 0
    code, _, err = run_cli(capsys, "sweep", scenario_file, "--out", tmp_path / "pool", "--workers", 2, *grid)
    assert code == 0, err
    assert (tmp_path / "serial" / "results.csv").read_bytes() == (tmp_path / "pool" / "results.csv").read_bytes()
    # edgefl.sweep() from Python: its workers forked from the same fork server as the command's
    values = {"algorithm.local_steps": [1, 2], "network.snr_db": [0, 20], "network.access": ["dedicated", "tdma"]}
    edgefl.sweep(scenario_file, values, seeds=2, out=tmp_path / "api", workers=2, progress=False)
    assert (tmp_path / "serial" / "results.csv").read_bytes() == (tmp_path / "api" / "results.csv").read_bytes()


@pytest.mark.e2e  # several whole edgefl processes: CI's second stage (make test-e2e)
def test_killed_sweep_resumes_without_recomputing_and_matches_an_uninterrupted_run(tmp_path, capsys):
    scenario_file = tmp_path / "small.toml"
    scenario_file.write_text(SCENARIO.format(rounds=8))
    args = [
        "sweep",
        str(scenario_file),
        "--grid",
        "algorithm.local_steps=1,2,3,4,5,6",
        "--grid",
        "network.snr_db=0,10,20",
        "--grid",
        "network.bandwidth_mhz=1,4",
        "--seeds",
        "2",
        "--quiet",
    ]
    total = 6 * 3 * 2 * 2  # points x seeds; 12 trainings
    killed = tmp_path / "killed"
    # the whole process group SIGKILLed just before the 9th point is written (8 are done): mid-sweep
    process = hooked_edgefl(
        [*args, "--out", killed],
        name="points",
        count=9,
        target="group",
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    process.wait(timeout=HANG_S)
    assert process.returncode == -signal.SIGKILL, process.stderr.read().decode()
    done_before = len(computed_ids(killed))
    assert 0 < done_before < total, "the kill must land mid-sweep"
    assert not (killed / "results.csv").exists()

    code, stdout, err = run_cli(capsys, *args, "--out", killed)  # rerun the same command
    assert code == 0, err
    assert f"{total - done_before} computed now, {done_before} already done" in stdout
    ids = computed_ids(killed)
    assert len(ids) == total and len(set(ids)) == total  # every point computed exactly once

    assert run_cli(capsys, *args, "--out", tmp_path / "straight")[0] == 0
    resumed, straight = read_csv(killed / "results.csv"), read_csv(tmp_path / "straight" / "results.csv")
    assert len(resumed) == 1 + total * 8
    assert all(len(row) == len(resumed[0]) for row in resumed)  # no torn row
    assert resumed == straight


def _interrupted(command: list, tmp_path, **hook) -> subprocess.CompletedProcess:
    """Run ``edgefl COMMAND`` that sends itself SIGINT (Ctrl-C) at the call ``hook`` names (see
    conftest.hooked_edgefl); its exit code and output."""
    proc = hooked_edgefl(
        command,
        signal="SIGINT",
        cwd=tmp_path,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **hook,
    )
    out, err = proc.communicate(timeout=HANG_S)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.e2e  # several whole edgefl processes: CI's second stage (make test-e2e)
def test_ctrl_c_says_what_was_kept(tmp_path):
    path = tmp_path / "long.toml"
    path.write_text(SCENARIO.format(rounds=20))
    out = tmp_path / "sweep"
    grid = ["--grid", "algorithm.local_steps=1,2,3,4"]
    # Ctrl-C just before the 2nd point is written: the 1st is kept
    done = _interrupted(["sweep", path, "--out", out, "--quiet", *grid], tmp_path, name="points", count=2)
    assert done.returncode == 130 and "Traceback" not in done.stderr, done.stderr
    assert (
        f"edgefl: interrupted: the finished sweep points are kept in {out / 'points'}; rerun the same command "
        "to compute the rest"
    ) in done.stderr
    assert len(computed_ids(out)) == 1
    run = tmp_path / "run"
    checkpoint = tmp_path / ".run.checkpoint"
    done = _interrupted(
        ["run", path, "--out", run, "--quiet", "--set", "run.checkpoint_every=5"],
        tmp_path,
        name=checkpoint.name,
        when="after",
    )
    assert done.returncode == 130 and not run.exists() and checkpoint.exists()
    assert (
        f"edgefl: interrupted: nothing was written to {run} (a results folder is written only once its run "
        "completes); the checkpoint of the last multiple of 5 rounds is kept: rerun the same command with "
        "--resume"
    ) in done.stderr


def test_the_run_header_names_the_controller(tmp_path, capsys):
    path = tmp_path / "s.toml"
    path.write_text(SCENARIO.format(rounds=2))
    for controller in ("static", "adaptive_tau"):  # in this process: what is printed, not how a process starts
        args = ["run", path, "--out", tmp_path / controller, "--quiet", "--set", f"control.name={controller}"]
        code, out, err = run_cli(capsys, *args)
        assert code == 0, err
        assert out.splitlines()[0] == f"fedavg: 2 rounds, N=6, m=4, tau=2, controller {controller}"


# -- the plan's ids and the assembled table, made the quick way --------------------------------
def test_plan_ids_trainings_and_seed_groups_are_those_of_each_points_own_scenario(scenario_file):
    """plan_sweep dumps a point's scenario once for its seeds (edgefl.sweeps.plan._seeded): each id, training and
    seed group is still the hash of that seed's own scenario, re-priced and co-simulated points alike."""
    from dataclasses import replace

    from edgefl.sweeps.plan import FORMAT, _hash, learning_config, seed_group

    grid = ["network.snr_db=0,20", "algorithm.local_steps=1,2", "run.engine=simpy,ideal"]
    plan = plan_sweep(scenario_file, grids=grid, seeds=3)
    assert {p.mode for p in plan.points} == {REPRICED, "cosimulated"}
    for p in plan.points:
        assert p.scenario.run.seed == p.seed
        assert p.id == _hash({"format": FORMAT, "scenario": p.scenario.model_dump(mode="json", exclude={"sweep"})})
        assert p.training == (_hash(learning_config(p.scenario)) if p.mode == REPRICED else None)
        assert seed_group(p) == seed_group(replace(p, group=None))  # kept, and as computed from the scenario
    groups: dict[tuple, set] = {}
    for p in plan.points:
        groups.setdefault(tuple(p.values.values()), set()).add(seed_group(p))
    assert all(len(g) == 1 for g in groups.values())  # the seeds of a point share one
    assert len({seed_group(p) for p in plan.points}) == 2 + 4  # re-priced: one per τ; co-simulated: one per point


def test_results_from_the_workers_outputs_equal_results_read_back_from_the_point_files(scenario_file, tmp_path):
    """results.csv assembled from the lines each point's worker made (store.point_output) is the table assembled
    from the point files, byte for byte, also when the points' rows have different columns (then the lines of the
    points without all of them are made again) and hold numpy numbers; the files are the same text either way."""
    import numpy as np

    from edgefl.sweeps.store import POINTS_DIR, _plain, assemble_results, point_output, point_path, write_point

    plan = plan_sweep(scenario_file, grids=["network.snr_db=0,20"], seeds=2)
    rng = np.random.default_rng(0)
    rows = {}
    for k, p in enumerate(plan.points):
        rows[p.id] = [
            {"round": r, "energy_j": float(rng.random()), "acc_mean": None if r == 1 else rng.random() / 3}
            | ({"lambda_max": np.float32(0.25), "clients_distinct": 4} if k % 2 else {"flag": True, "note": "a,b"})
            for r in range(1, 4)
        ]
    (tmp_path / "a" / POINTS_DIR).mkdir(parents=True)
    for p in plan.points:
        write_point(tmp_path / "a", p, rows[p.id])  # as before: the rows, made into the file here
    from_files = assemble_results(tmp_path / "a", plan).read_bytes()
    outputs = {p.id: point_output(p, rows[p.id]) for p in plan.points}
    for p in plan.points:
        record = {"format": 1, "id": p.id, "values": p.values, "seed": p.seed, "mode": p.mode}
        plain = [{k: _plain(v) for k, v in row.items()} for row in rows[p.id]]
        assert outputs[p.id].text == json.dumps({**record, "rows": plain}) + "\n"
        assert point_path(tmp_path / "a", p.id).read_text() == outputs[p.id].text
    assert assemble_results(tmp_path / "a", plan, outputs).read_bytes() == from_files
    some = dict(list(outputs.items())[:1])  # the others read from their files (a resumed sweep)
    assert assemble_results(tmp_path / "a", plan, some).read_bytes() == from_files
    assert b'"a,b"' in from_files and b",True," in from_files  # csv's quoting and cells, as write_csv's
