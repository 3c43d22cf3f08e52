"""The `edgefl run` command: outputs, reproducibility, and clear errors for bad input."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from edgefl.cli import main

REPO = Path(__file__).resolve().parents[1]
TINY = """
[run]
seed = 1
rounds = 3
[data]
name = "synthetic"
num_clients = 6
samples_per_client = 30
[algorithm]
name = "fedavg"
local_steps = 2
clients_per_round = 3
batch_size = 8
[network]
snr_db = 10.0
fading = "rayleigh"
access = "fdma"
"""

MNIST_TINY = TINY.replace('name = "synthetic"', 'name = "mnist"').replace("samples_per_client = 30\n", "")


def write(tmp_path: Path, text: str, name="scenario.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_run_writes_every_output(tmp_path):
    out = tmp_path / "out"
    assert main(["run", str(write(tmp_path, TINY)), "--out", str(out), "--quiet", "--plots"]) == 0
    for name in (
        "metrics.csv",
        "clients.csv",
        "events.csv",
        "summary.json",
        "scenario.toml",
        "accuracy.png",
        "accuracy_energy.png",
        "energy_clients.png",
    ):
        assert (out / name).is_file(), name
    header = (out / "metrics.csv").read_text().splitlines()[0].split(",")
    for column in (
        "round",
        "sim_time_s",
        "energy_j",
        "compute_energy_j",
        "uplink_energy_j",
        "downlink_energy_j",
        "acc_mean",
        "acc_worst",
        "acc_std",
        "loss",
    ):
        assert column in header
    assert len((out / "metrics.csv").read_text().splitlines()) == 1 + 3
    summary = json.loads((out / "summary.json").read_text())
    assert summary["energy_j"] > 0 and summary["rounds"] == 3
    # The resolved scenario re-runs to the same numbers.
    again = tmp_path / "again"
    assert main(["run", str(out / "scenario.toml"), "--out", str(again), "--quiet", "--no-plots"]) == 0
    assert (again / "metrics.csv").read_bytes() == (out / "metrics.csv").read_bytes()


def test_same_seed_twice_gives_byte_identical_metrics(tmp_path):
    scenario = write(tmp_path, TINY)
    outputs = []
    for k in range(2):
        out = tmp_path / f"run{k}"
        assert main(["run", str(scenario), "--out", str(out), "--quiet", "--no-plots"]) == 0
        outputs.append(out)
    for name in ("metrics.csv", "events.csv", "clients.csv"):
        assert (outputs[0] / name).read_bytes() == (outputs[1] / name).read_bytes(), name
    # ...and another seed gives other numbers.
    other = tmp_path / "other"
    main(["run", str(scenario), "--out", str(other), "--quiet", "--no-plots", "--set", "run.seed=2"])
    assert (other / "metrics.csv").read_bytes() != (outputs[0] / "metrics.csv").read_bytes()


def test_set_overrides_are_applied_and_validated(tmp_path):
    out = tmp_path / "o"
    assert (
        main(
            [
                "run",
                str(write(tmp_path, TINY)),
                "--out",
                str(out),
                "--quiet",
                "--no-plots",
                "--set",
                "network.snr_db=3",
                "--set",
                "run.rounds=2",
            ]
        )
        == 0
    )
    resolved = (out / "scenario.toml").read_text()
    assert "snr_db = 3.0" in resolved and "rounds = 2" in resolved


BAD = {
    "not_toml": ("[run\nseed = 1", [], "not valid TOML"),
    "unknown_section": (TINY + "\n[netwrk]\nsnr_db = 1\n", [], "netwrk: unknown section (did you mean 'network'?)"),
    "unknown_key": (
        TINY.replace("snr_db = 10.0", "snr = 10.0"),
        [],
        "network.snr: unknown key (did you mean 'snr_db'?)",
    ),
    "wrong_type": (TINY.replace("rounds = 3", 'rounds = "ten"'), [], "run.rounds"),
    "negative_bandwidth": (TINY + "", ["network.bandwidth_mhz=-1"], "network.bandwidth_mhz"),
    "m_greater_than_n": (
        TINY.replace("clients_per_round = 3", "clients_per_round = 7"),
        [],
        "algorithm.clients_per_round = 7 exceeds data.num_clients = 6",
    ),
    "missing_data_dir": (
        MNIST_TINY.replace('name = "mnist"', 'name = "mnist"\ndir = "/no/such/folder"'),
        [],
        "data.dir '/no/such/folder' does not exist or is not a directory: expected a directory holding the "
        "MNIST IDX files",
    ),
    "mnist_without_dir": (MNIST_TINY, [], "data.dir is required for data.name = 'mnist'"),
    "unknown_data_set": (
        TINY.replace('name = "synthetic"', 'name = "mnits"'),
        [],
        "data.name: unknown data set 'mnits' (did you mean 'mnist'?)",
    ),
    "unknown_data_key": (
        TINY.replace("samples_per_client = 30", "samples_per_clint = 30"),
        [],
        "data.samples_per_clint: unknown key (did you mean 'samples_per_client'?)",
    ),
    "other_data_sets_key": (
        TINY,
        ["data.zipf_sigma=0.5"],
        "data.zipf_sigma: not a key of data.name = 'synthetic' (it belongs to mnist",
    ),
    "data_set_constraint": (TINY, ["data.samples_per_client=1"], "data.samples_per_client"),
    "set_unknown_data_set": (TINY, ["data.name=cifar"], "data.name: unknown data set 'cifar'"),
    "unknown_algorithm": (TINY.replace('name = "fedavg"', 'name = "fedavgg"'), [], "did you mean 'fedavg'"),
    "unknown_algorithm_key": (
        TINY + "\n[algorithm.fedavg]\nweightin = 'uniform'\n",
        [],
        "algorithm.fedavg.weightin: unknown key (did you mean 'weighting'?)",
    ),
    "unknown_flat_key": (
        TINY.replace("batch_size = 8", "batch_size = 8\nweightin = 'uniform'"),
        [],
        "algorithm: unknown key 'weightin' (did you mean [algorithm.fedavg] weighting?)",
    ),
    "flat_algorithm_key": (
        TINY.replace("batch_size = 8", "batch_size = 8\nweighting = 'uniform'"),
        [],
        "'weighting' is fedavg's own key: write it in its own table, [algorithm.fedavg] weighting",
    ),
    "bad_algorithm_value": (TINY + "\n[algorithm.fedavg]\nweighting = 'sizes'\n", [], "algorithm.fedavg.weighting"),
    "bad_unused_algorithm_table": (TINY + "\n[algorithm.drdm]\nmu = -1\n", [], "algorithm.drdm.mu"),
    "set_flat_algorithm_key": (
        TINY,
        ["algorithm.mu=0.1"],
        "'mu' is not a key of fedavg; it is an own key of c_fedda, drdm",
    ),
    "bad_enum": (TINY.replace('access = "fdma"', 'access = "cdma"'), [], "network.access"),
    "two_link_modes": (
        TINY.replace("snr_db = 10.0", "snr_db = 10.0\ndistance_m = 100.0"),
        [],
        "either network.snr_db or a link budget",
    ),
    "shares_over_one": (
        TINY + '\n[[devices.classes]]\nname = "a"\nshare = 0.7\n[[devices.classes]]\nname = "b"\nshare = 0.6\n',
        [],
        "shares sum to 1.3 > 1",
    ),
    "negative_alpha": (
        MNIST_TINY.replace("num_clients = 6", "num_clients = 6\ndirichlet_alpha = -0.5"),
        [f"data.dir={REPO}"],  # any existing folder: validation fails before loading
        "data.dirichlet_alpha: Input should be greater",
    ),
    "set_without_equals": (TINY, ["network.snr_db"], "expected key=value"),
    "set_unknown_key": (TINY, ["network.bandwith_mhz=2"], "did you mean 'bandwidth_mhz'"),
    "zero_rounds": (TINY.replace("rounds = 3", "rounds = 0"), [], "run.rounds"),
    "empty_data_dir": (None, [], "has no"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_exits_2_with_a_message_naming_the_field(case, tmp_path, capsys):
    text, overrides, expected = BAD[case]
    if case == "empty_data_dir":
        (tmp_path / "empty").mkdir()
        text = MNIST_TINY.replace('name = "mnist"', f'name = "mnist"\ndir = "{tmp_path / "empty"}"')
    scenario = write(tmp_path, text)
    out = tmp_path / "out"
    args = ["run", str(scenario), "--out", str(out), "--quiet"]
    for override in overrides:
        args += ["--set", override]
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2
    assert expected in err, err
    assert "Traceback" not in err
    assert str(scenario) in err or case.startswith("set_without")
    assert not out.exists(), "nothing may be written for a bad scenario"
    assert not any(p.name.startswith(".out") for p in tmp_path.iterdir()), "no temporary leftovers"


def test_missing_scenario_file_is_a_clean_error(tmp_path, capsys):
    assert main(["run", str(tmp_path / "nope.toml"), "--quiet"]) == 2
    assert "no such scenario file" in capsys.readouterr().err


def test_console_script_exit_code_and_no_traceback(tmp_path):
    bad = write(tmp_path, TINY.replace("rounds = 3", "rounds = -3"))
    proc = subprocess.run(
        [sys.executable, "-m", "edgefl.cli", "run", str(bad), "--quiet"], capture_output=True, text=True, cwd=tmp_path
    )
    assert proc.returncode == 2
    assert "run.rounds" in proc.stderr and "Traceback" not in proc.stderr


def test_quickstart_scenario_is_valid():
    from edgefl.scenario import load_scenario

    scenario = load_scenario(REPO / "scenarios" / "quickstart.toml")
    assert scenario.data.name == "synthetic"
