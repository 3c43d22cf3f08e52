"""Issue 20's cases, one named test each: a plug-in's fault named as such (exit 4), user input that ended in
"internal error" (exit 70) or hung, and the misleading answers, through the command line and the Python API.

Each CLI row: the command, the exit code, fragments of the one-line message; every CLI case also checks that
no traceback is printed, and the analysis cases that nothing was written. (The cases of output-folder
ownership and checkpoint loading are tested with that code, in test_outputs.py and test_checkpoint.py.)
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

import edgefl
from edgefl.cli import main
from edgefl.plugins import PluginError
from edgefl.scenario import ScenarioError
from edgefl.sweeps.plan import SweepError

from conftest import HANG_S

ROOT = Path(__file__).resolve().parents[1]

TINY = """
[run]
rounds = 1
[data]
num_clients = 4
samples_per_client = 20
[algorithm]
clients_per_round = 2
local_steps = 1
batch_size = 8
[network]
snr_db = 10.0
"""
# a link budget with moving devices: the path loss is called at the start and every round
CELL = (
    TINY.replace("[run]\n", '[run]\nengine = "simpy"\n').replace(
        "snr_db = 10.0\n", 'cell_radius_m = 250.0\nfading = "none"\n'
    )
    + "[devices]\nspeed_mps = 5.0\n"
)

PLUGINS = {
    "nc_import_raises.py": "x = 1 / 0\n",
    "nc_import_exits.py": "import sys\nsys.exit(0)\n",
    "nc_algorithms.py": """
from algorithms.base import Algorithm
from algorithms.fedavg import FedAvg


class InitRaises(FedAvg):
    def __init__(self, ctx):
        super().__init__(ctx)
        raise RuntimeError("no server state")


class RoundRaises(FedAvg):
    def round(self, r):
        yield from super().round(r)
        raise ValueError("bad round")


class NoRound(Algorithm):
    pass


class RoundReturns(FedAvg):
    def round(self, r):
        return 5


class YieldsText(FedAvg):
    def round(self, r):
        yield "an operation"


class Exits(FedAvg):
    def round(self, r):
        raise SystemExit(3)
""",
    "nc_controllers.py": """
from edgefl.control import Controller


class PlanRaises(Controller):
    def plan(self, obs):
        return 1 / 0


class InitRaises(Controller):
    def __init__(self, ctx, params=None):
        raise OSError("no controller")
""",
    "nc_data.py": """
from typing import Literal

from edgefl.data import DataParams


class BuildRaises(DataParams):
    name: Literal["nc_data:BuildRaises"] = "nc_data:BuildRaises"

    def build(self, seed):
        raise IndexError("no samples")
""",
    "nc_path_loss.py": """
import numpy as np


def walls(d, net):  # not the documented parameter names: edgefl calls it positionally
    return 100.0 + 20.0 * np.log10(np.asarray(d) / 100.0)


def scalar(d, net):
    return 100.0


def too_many(d, net):
    return np.full(len(d) + 5, 100.0)


def complex_db(d, net):
    return np.full(len(d), 100.0 + 1j)


def minus_1e300(d, net):
    return np.full(len(d), -1e300)


def strings(d, net):
    return ["100"] * len(d)


def none(d, net):
    return None


def raises(d, net):
    raise KeyError("no wall")


class AClass:
    def __init__(self, d, net):
        pass
""",
}


def at(module: str, code: str) -> str:
    """``module:line`` of the line of PLUGINS[module] that holds ``code`` (where the message must point)."""
    lines = PLUGINS[module].splitlines()
    return f"{module}:{next(i for i, line in enumerate(lines, start=1) if code in line)}"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A folder holding the scenarios, the plug-in modules and a finished tiny sweep; the tests run in it."""
    here = tmp_path_factory.mktemp("named")
    (here / "tiny.toml").write_text(TINY)
    (here / "cell.toml").write_text(CELL)
    (here / "plain.toml").write_text(TINY.replace("samples_per_client = 20\n", ""))  # the keys every data set has
    for name, text in PLUGINS.items():
        (here / name).write_text(text)
    old_cwd, old_path = os.getcwd(), list(sys.path)
    os.chdir(here)
    try:
        assert (
            main(["sweep", "tiny.toml", "--grid", "algorithm.local_steps=1,2", "--seeds", "2", "--out", "sweep", "-q"])
            == 0
        )
        yield here
    finally:
        os.chdir(old_cwd)
        sys.path[:] = old_path
        for name in PLUGINS:
            sys.modules.pop(name.removesuffix(".py"), None)


def cli(capsys, *args) -> tuple[int, str]:
    code = main([*args, "-q"])
    err = capsys.readouterr().err
    return code, err


# -- a plug-in's fault: exit 4, the key, its value, the exception, where ---------------------------------
@dataclass
class Case:
    id: str
    args: list[str]
    code: int
    fragments: list[str]


def run_with(scenario: str, key: str, value: str) -> list[str]:
    return ["run", scenario, "--set", f"{key}={value}", "--out", "out", "--no-plots"]


PLUGIN_CASES = [
    *[
        Case(
            f"import of a {key} plug-in raises",
            run_with("tiny.toml", key, "nc_import_raises:X"),
            4,
            [
                f"{key} = 'nc_import_raises:X'",
                "ZeroDivisionError: division by zero",
                at("nc_import_raises.py", "1 / 0"),
            ],
        )
        for key in ("algorithm.name", "data.name", "control.name", "network.path_loss")
    ],
    Case(
        "a plug-in calling sys.exit(0) at import is not exit 0",
        run_with("tiny.toml", "algorithm.name", "nc_import_exits:X"),
        4,
        ["SystemExit(0)", "sys.exit()", at("nc_import_exits.py", "sys.exit(0)")],
    ),
    Case(
        "algorithm raises in __init__",
        run_with("tiny.toml", "algorithm.name", "nc_algorithms:InitRaises"),
        4,
        [
            "algorithm.name = 'nc_algorithms:InitRaises'",
            "RuntimeError: no server state",
            at("nc_algorithms.py", "no server state"),
        ],
    ),
    Case(
        "algorithm raises in round",
        run_with("tiny.toml", "algorithm.name", "nc_algorithms:RoundRaises"),
        4,
        ["ValueError: bad round", at("nc_algorithms.py", "bad round")],
    ),
    Case(
        "algorithm exits in round",
        run_with("tiny.toml", "algorithm.name", "nc_algorithms:Exits"),
        4,
        ["SystemExit(3)", at("nc_algorithms.py", "SystemExit(3)")],
    ),
    Case(
        "algorithm lacks round and model",
        run_with("tiny.toml", "algorithm.name", "nc_algorithms:NoRound"),
        4,
        ["'nc_algorithms:NoRound'", "does not define round and model"],
    ),
    Case(
        "algorithm round returns instead of yielding",
        run_with("tiny.toml", "algorithm.name", "nc_algorithms:RoundReturns"),
        4,
        ["round(0) returned int, expected a generator of operations"],
    ),
    Case(
        "algorithm yields something else than operations",
        run_with("tiny.toml", "algorithm.name", "nc_algorithms:YieldsText"),
        4,
        ["yielded str", "not an operation"],
    ),
    Case(
        "controller raises in its call",
        [*run_with("tiny.toml", "control.name", "nc_controllers:PlanRaises"), "--set", "run.engine=simpy"],
        4,
        ["control.name = 'nc_controllers:PlanRaises'", "ZeroDivisionError", at("nc_controllers.py", "1 / 0")],
    ),
    Case(
        "controller raises in __init__",
        [*run_with("tiny.toml", "control.name", "nc_controllers:InitRaises"), "--set", "run.engine=simpy"],
        4,
        ["OSError: no controller", at("nc_controllers.py", "no controller")],
    ),
    Case(
        "data set raises in build",
        run_with("plain.toml", "data.name", "nc_data:BuildRaises"),
        4,
        ["data.name = 'nc_data:BuildRaises'", "IndexError: no samples", at("nc_data.py", "no samples")],
    ),
    Case(
        "path loss raises",
        run_with("cell.toml", "network.path_loss", "nc_path_loss:raises"),
        4,
        ["network.path_loss = 'nc_path_loss:raises'", "KeyError: 'no wall'", at("nc_path_loss.py", "no wall")],
    ),
    *[
        Case(
            f"path loss returns {what}",
            run_with("cell.toml", "network.path_loss", f"nc_path_loss:{name}"),
            4,
            [f"network.path_loss = 'nc_path_loss:{name}' returned {said}", "one real, finite loss in dB per distance"],
        )
        for what, name, said in [
            ("a scalar", "scalar", "an array of shape ()"),
            ("N+5 values", "too_many", "an array of shape (9,) for 4 distances"),
            ("complex values", "complex_db", "complex numbers"),
            ("-1e300 dB", "minus_1e300", "-1e+300 dB"),
            ("strings", "strings", "text"),
            ("None", "none", "None"),
        ]
    ],
    *[
        Case(
            f"path_loss = {value} is refused at load",
            run_with("cell.toml", "network.path_loss", value),
            2,
            ["network.path_loss", said],
        )
        for value, said in [
            ("os:system", "expected a function model(distance_m, network)"),
            ("builtins:print", "expected a function model(distance_m, network)"),
            ("os.path:join", "join(a, *p), expected a function model(distance_m, network)"),
            ("nc_path_loss:AClass", "is a class"),
        ]
    ],
]


@pytest.mark.parametrize("case", PLUGIN_CASES, ids=lambda c: c.id)
def test_a_plugins_fault_is_named(folder, capsys, case):
    code, err = cli(capsys, *case.args)
    assert code == case.code, err
    for fragment in case.fragments:
        assert fragment in err, err
    assert "Traceback" not in err and "internal error" not in err and err.count("edgefl: error:") == 1, err
    if case.code == 4:
        assert "error in the plug-in's code" in err or "the plug-in" in err, err
    assert not (folder / "out").exists()


def test_a_plugins_traceback_with_verbose(folder, capsys):
    code = main(run_with("tiny.toml", "algorithm.name", "nc_algorithms:RoundRaises") + ["-v"])
    err = capsys.readouterr().err
    assert (
        code == 4
        and "Traceback" in err
        and f'nc_algorithms.py", line {at("nc_algorithms.py", "bad round").split(":")[1]}, in round' in err
    ), err


def test_a_path_loss_with_its_own_parameter_names_works_with_moving_devices(folder, capsys):
    # edgefl called it with the keyword network= once devices moved: `def walls(d, net)` broke (exit 70)
    code, err = cli(
        capsys,
        "run",
        "cell.toml",
        "--set",
        "network.path_loss=nc_path_loss:walls",
        "--set",
        "run.rounds=2",
        "--out",
        "walls",
        "--no-plots",
    )
    assert code == 0, err
    assert (folder / "walls" / "positions.csv").exists()  # the devices moved: the loss was called again


def test_a_plugin_module_in_the_current_folder_is_found(folder):
    # the `edgefl` command (not `python -m`, which puts the current folder on the path itself): python -P
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "edgefl",
            "run",
            "tiny.toml",
            "--set",
            "algorithm.name=nc_algorithms:RoundRaises",
            "--out",
            "cwd",
            "-q",
            "--no-plots",
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 4 and "ValueError: bad round" in out.stderr, out.stderr  # found, imported, run
    elsewhere = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "edgefl",
            "run",
            str(folder / "tiny.toml"),
            "--set",
            "algorithm.name=nc_algorithms:RoundRaises",
            "--out",
            str(folder / "cwd"),
            "-q",
        ],
        cwd=ROOT / "docs",
        env=env,
        capture_output=True,
        text=True,
    )
    assert elsewhere.returncode == 2, elsewhere.stderr
    assert "cannot import 'nc_algorithms'" in elsewhere.stderr and "in the current folder" in elsewhere.stderr
    assert "add that folder to PYTHONPATH" in elsewhere.stderr


# -- user input that was exit 70 or hung: exit 2, what to do, nothing written ------------------------------
def damaged(folder: Path, name: str, change) -> str:
    """A copy of the finished sweep, changed by ``change(copy)``."""
    copy = folder / name
    if not copy.exists():
        shutil.copytree(folder / "sweep", copy)
        change(copy)
    return name


def truncate(copy):
    text = (copy / "results.csv").read_text()
    (copy / "results.csv").write_text(text[:-30])


def drop_column(column):
    def change(copy):
        rows = list(csv.reader((copy / "results.csv").open()))
        i = rows[0].index(column)
        with open(copy / "results.csv", "w", newline="") as handle:
            csv.writer(handle).writerows(r[:i] + r[i + 1 :] for r in rows)

    return change


def header_only(copy):
    (copy / "results.csv").write_text((copy / "results.csv").read_text().splitlines()[0] + "\n")


def other_sweep(copy):
    rows = list(csv.reader((copy / "results.csv").open()))
    with open(copy / "results.csv", "w", newline="") as handle:  # the same columns, other τ values
        csv.writer(handle).writerows([rows[0]] + [["7", *r[1:]] for r in rows[1:]])


def non_finite(copy):
    rows = list(csv.reader((copy / "results.csv").open()))
    rows[2][rows[0].index("energy_j")] = "inf"
    with open(copy / "results.csv", "w", newline="") as handle:
        csv.writer(handle).writerows(rows)


ANALYSIS_CASES = [
    ("results.csv truncated mid-line", truncate, "truncated (its last line is incomplete)"),
    ("results.csv without a needed column", drop_column("energy_j"), "no column energy_j"),
    ("results.csv header-only", header_only, "holds no rows (only its header)"),
    ("results.csv of another sweep", other_sweep, "does not match"),
    ("results.csv with a non-finite cell", non_finite, "column energy_j: inf is not a finite number"),
    ("sweep.json = []", lambda c: (c / "sweep.json").write_text("[]\n"), "not an edgefl sweep manifest"),
]


@pytest.mark.parametrize("command", ["optimal-tau", "plot"])
@pytest.mark.parametrize("name, change, fragment", ANALYSIS_CASES, ids=[c[0] for c in ANALYSIS_CASES])
def test_a_damaged_sweep_folder_is_exit_2_and_nothing_is_written(folder, capsys, command, name, change, fragment):
    source = damaged(folder, name.replace(" ", "_").replace("=", "").replace("[]", "list"), change)
    out = folder / f"analysis-{command}-{source}"
    code, err = cli(capsys, command, source, "--target", "acc_worst=0.5", "--out", str(out))
    assert code == 2 and fragment in err and "Traceback" not in err, err
    assert "rerun the `edgefl sweep` command" in err
    assert not out.exists()  # checked before anything is written (header-only wrote half its tables)


@pytest.mark.parametrize("command", ["optimal-tau", "plot"])
def test_a_file_instead_of_a_sweep_folder_is_exit_2(folder, capsys, command):
    (folder / "a-file").write_text("not a sweep\n")
    code, err = cli(capsys, command, "a-file", "--target", "acc_worst=0.5")
    assert code == 2 and "a-file: is a file, not a folder" in err, err


def test_an_availability_trace_never_m_online_together_is_exit_2(folder, capsys):
    (folder / "apart.csv").write_text("client,start_s,end_s\n0,0,1\n1,2,3\n2,4,5\n3,6,7\n")
    code, err = cli(
        capsys,
        "run",
        "tiny.toml",
        "--set",
        "devices.availability=trace",
        "--set",
        "devices.availability_trace=apart.csv",
        "--set",
        "run.engine=simpy",
        "--out",
        "out",
    )
    assert code == 2 and "never has algorithm.clients_per_round = 2 devices online at the same time (at most 1)" in err
    assert "Lower algorithm.clients_per_round to 1" in err and not (folder / "out").exists()


def test_a_run_waiting_past_the_end_of_a_trace_stops_as_documented(folder, capsys):
    # SimPy's "No scheduled events left" (exit 70) when a round waited for devices after the trace ended
    (folder / "ends.csv").write_text("client,start_s,end_s\n0,0,0.01\n1,0,0.01\n")
    code, err = cli(
        capsys,
        "run",
        "tiny.toml",
        "--set",
        "devices.availability=trace",
        "--set",
        "devices.availability_trace=ends.csv",
        "--set",
        "run.engine=simpy",
        "--set",
        "run.rounds=20",
        "--out",
        "ends",
        "--no-plots",
    )
    assert code == 0, err
    summary = (folder / "ends" / "summary.json").read_text()
    assert '"status": "stopped"' in summary and "no device will be online again" in summary


def test_a_trace_cell_over_the_csv_limit_is_exit_2(folder, capsys):
    (folder / "huge.csv").write_text("client,start_s,end_s\n0,0," + "1" * 140_000 + "\n")
    code, err = cli(
        capsys,
        "run",
        "tiny.toml",
        "--set",
        "devices.availability=trace",
        "--set",
        "devices.availability_trace=huge.csv",
        "--set",
        "run.engine=simpy",
        "--out",
        "out",
    )
    assert code == 2 and "huge.csv is not a CSV file of client,start_s,end_s" in err, err


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
def test_a_special_file_as_availability_trace_is_refused_not_read(folder, capsys, special):
    if special == "fifo":
        special = str(folder / "trace.fifo")
        if not os.path.exists(special):
            os.mkfifo(special)  # open() would block until a writer came: the run hung forever
    started = time.process_time()  # CPU time: what reading an endless file costs, steady under load
    code, err = cli(
        capsys,
        "run",
        "tiny.toml",
        "--set",
        "devices.availability=trace",
        "--set",
        f"devices.availability_trace={special}",
        "--set",
        "run.engine=simpy",
        "--out",
        "out",
    )
    assert code == 2 and ("a named pipe (FIFO), not a CSV file" in err or "a character device" in err), err
    assert time.process_time() - started < 30


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_named_pipe_as_scenario_file_is_refused_not_read(folder, capsys):
    fifo = folder / "scenario.fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    code, err = cli(capsys, "run", str(fifo), "--out", "out")
    assert code == 2 and "is a named pipe (FIFO), expected a .toml scenario file" in err, err


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--seeds", "1000000000"], "--seeds must be an integer from 1 to 1000"),
        (
            [
                "--grid",
                "network.snr_db=" + ",".join(map(str, range(1000))),
                "--grid",
                "network.bandwidth_mhz=" + ",".join(str(1 + k / 1000) for k in range(1000)),
            ],
            "the sweep has 1,000,000 points",
        ),
    ],
    ids=["seeds = 1e9", "10^6 grid points"],
)
def test_a_sweep_too_large_to_end_is_exit_2_at_once(folder, capsys, args, fragment):
    # seeds = 1e9 grew memory for 92 s until the kernel killed it; 10^6 points gave nothing in 120 s
    started = time.process_time()  # CPU time (what a growing plan costs), steady under load
    code, err = cli(capsys, "sweep", "tiny.toml", *args, "--out", "huge")
    assert code == 2 and fragment in err, err
    assert time.process_time() - started < 20 and not (folder / "huge").exists()


def test_sweep_seeds_in_the_file_are_bounded(folder, capsys):
    (folder / "seeds.toml").write_text("[sweep]\nseeds = 1000000000\n" + TINY)
    code, err = cli(capsys, "sweep", "seeds.toml", "--out", "huge")
    assert code == 2 and "sweep.seeds: Input should be less than or equal to 1000" in err, err


# -- the Python API: a changed Scenario is validated again; only documented exceptions -------------------
def changed(section: str | None, key: str, value):
    s = edgefl.load_scenario("tiny.toml")
    setattr(getattr(s, section) if section else s, key, value)
    return s


API_CASES = [
    (
        "Scenario with algorithm.name = 'nosuch'",
        lambda: edgefl.run(changed("algorithm", "name", "nosuch")),
        ScenarioError,
        "algorithm: unknown algorithm 'nosuch'",
    ),
    (
        "Scenario with clients_per_round = 1000",
        lambda: edgefl.run(changed("algorithm", "clients_per_round", 1000)),
        ScenarioError,
        "algorithm.clients_per_round = 1000 exceeds data.num_clients = 4",
    ),
    ("Scenario with network = None", lambda: edgefl.run(changed(None, "network", None)), ScenarioError, "network:"),
    (
        "Scenario with run.rounds = -5",
        lambda: edgefl.run(changed("run", "rounds", -5)),
        ScenarioError,
        "run.rounds: Input should be greater than 0",
    ),
    ("run(None)", lambda: edgefl.run(None), ScenarioError, "scenario: expected a path"),
    (
        "run(targets='...')",
        lambda: edgefl.run("tiny.toml", targets="acc_worst=0.5"),
        ScenarioError,
        "targets: expected a list of texts",
    ),
    (
        "run with a bad target",
        lambda: edgefl.run("tiny.toml", targets=["acc_worst"], progress=False),
        ScenarioError,
        "expected metric=value",
    ),
    (
        "run too large for the machine",
        lambda: edgefl.run("tiny.toml", overrides={"data.num_clients": 10**7}, progress=False),
        ScenarioError,
        "memory",
    ),
    (
        "sweep(grid=[...])",
        lambda: edgefl.sweep("tiny.toml", grid=["algorithm.local_steps=1,2"]),
        SweepError,
        "grid: expected a dict",
    ),
    (
        "sweep(grid={key: 3})",
        lambda: edgefl.sweep("tiny.toml", grid={"algorithm.local_steps": 3}),
        SweepError,
        "expected a non-empty list of values",
    ),
    ("sweep(seeds='3')", lambda: edgefl.sweep("tiny.toml", seeds="3"), SweepError, "seeds: expected an integer"),
    (
        "optimal_tau(target=None)",
        lambda: edgefl.optimal_tau("sweep", target=None),
        SweepError,
        "target: expected a text",
    ),
    (
        "optimal_tau(window=0)",
        lambda: edgefl.optimal_tau("sweep", target="acc_worst=0.5", window=0),
        SweepError,
        "--window must be >= 1",
    ),
    (
        "optimal_tau on a file",
        lambda: edgefl.optimal_tau("tiny.toml", target="acc_worst=0.5"),
        SweepError,
        "not a folder",
    ),
    (
        "a plug-in's fault",
        lambda: edgefl.run("tiny.toml", overrides={"algorithm.name": "nc_algorithms:RoundRaises"}, progress=False),
        PluginError,
        "ValueError: bad round",
    ),
    (
        "a plug-in's sys.exit at import",
        lambda: edgefl.run("tiny.toml", overrides={"data.name": "nc_import_exits:X"}),
        PluginError,
        "SystemExit(0)",
    ),
]


@pytest.mark.parametrize("call, error, fragment", [c[1:] for c in API_CASES], ids=[c[0] for c in API_CASES])
def test_the_api_raises_the_documented_error(folder, call, error, fragment):
    with pytest.raises(error) as info:
        call()
    assert type(info.value) is error and fragment in str(info.value)
    assert not (folder / "results").exists()  # sweep(out=None) would write results/<name>-sweep: refused before


def test_a_valid_scenario_object_runs_as_its_file(folder):
    s = edgefl.load_scenario("tiny.toml")
    s.run.rounds = 2  # changed in Python, still valid
    by_object = edgefl.run(s, progress=False)
    by_file = edgefl.run("tiny.toml", overrides={"run.rounds": 2}, progress=False)
    assert by_object.metrics.equals(by_file.metrics)


def test_the_api_documents_its_errors():
    page = (ROOT / "docs" / "python-api.md").read_text()
    for name in ("ScenarioError", "SweepError", "PluginError", "OutputError", "CheckpointError", "WorkerDied"):
        assert "`edgefl." in page and name in page, name
    assert 'if __name__ == "__main__":' in page and "sweep(out=None)" in page


# -- a sweep with workers from a script without the __main__ guard ---------------------------------------
@pytest.mark.e2e  # several whole edgefl processes: CI's second stage (make test-e2e)
def test_a_sweep_with_workers_from_an_unguarded_script_says_to_add_the_guard(folder):
    script = folder / "unguarded.py"
    script.write_text(
        'import edgefl\nrows = edgefl.sweep("tiny.toml", grid={"algorithm.local_steps": [1, 2]}, '
        'out="unguarded", workers=2, progress=False)\n'
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, str(script)], cwd=folder, env=env, capture_output=True, text=True, timeout=HANG_S
    )
    assert out.returncode != 0
    assert out.stderr.count('put the call under `if __name__ == "__main__":`') == 1, out.stderr
    assert "unguarded.py, line 2" in out.stderr
    assert "another edgefl sweep" not in out.stderr and "worker process died" not in out.stderr
    assert not (folder / "unguarded").exists()  # refused before any worker started or anything was written


@pytest.mark.parametrize("value", ["{ value = 1, nested = { x = 2 } }", "{ d = { d = { leaf = 1 } } }"])
def test_a_table_as_data_name_is_exit_2(folder, capsys, value):
    """Found by benchmarks/hostile_campaign.py: a table where data.name's text belongs was an internal error
    (TypeError: unhashable type: 'dict') in the plug-in lookup."""
    (folder / "t.toml").write_text(TINY.replace("[data]\n", f"[data]\nname = {value}\n"))
    assert main(["run", str(folder / "t.toml"), "--out", str(folder / "out"), "--no-plots", "-q"]) == 2
    err = capsys.readouterr().err
    assert "data.name: expected a text" in err and "Traceback" not in err
    assert not (folder / "out").exists()
