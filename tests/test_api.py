"""The Python API (edgefl/api.py): run, load_scenario, sweep, optimal_tau, Result."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import matplotlib
import pandas as pd
import pytest

import edgefl
from edgefl.cli import main
from edgefl.scenario import ScenarioError

matplotlib.use("Agg")
ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "scenarios" / "quickstart.toml"

from test_cli import TINY  # noqa: E402  (a 6-client, 3-round synthetic scenario)


def test_run_returns_dataframes_and_writes_nothing_without_out(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = edgefl.run(QUICKSTART, overrides={"run.rounds": 3, "network.snr_db": 5}, progress=False)
    assert isinstance(r.metrics, pd.DataFrame) and list(r.metrics["round"]) == [1, 2, 3]
    assert len(r.clients) == r.scenario.data.num_clients and {"energy_j", "distance_m"} <= set(r.clients.columns)
    assert len(r.events) > 0 and r.summary["rounds"] == 3
    assert r.scenario.network.snr_db == 5
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_run_with_out_writes_the_results_folder_and_matches_the_cli(tmp_path):
    (tmp_path / "tiny.toml").write_text(TINY)
    r = edgefl.run(tmp_path / "tiny.toml", out=tmp_path / "api", progress=False)
    assert main(["run", str(tmp_path / "tiny.toml"), "--out", str(tmp_path / "cli"), "--quiet"]) == 0
    assert (tmp_path / "api" / "metrics.csv").read_text() == (tmp_path / "cli" / "metrics.csv").read_text()
    assert pd.read_csv(tmp_path / "api" / "metrics.csv")["energy_j"].tolist() == pytest.approx(r.metrics["energy_j"])


@pytest.mark.parametrize("kind", ["accuracy", "energy", "accuracy-energy"])
def test_result_plots_are_figures(tmp_path, kind):
    (tmp_path / "tiny.toml").write_text(TINY)
    figure = edgefl.run(tmp_path / "tiny.toml", progress=False).plot(kind)
    assert figure.axes and figure.axes[0].get_title().startswith("fedavg")
    with pytest.raises(ValueError, match="unknown plot kind"):
        edgefl.run(tmp_path / "tiny.toml", progress=False).plot("pie")


def test_overrides_are_validated_like_the_cli(tmp_path):
    with pytest.raises(ScenarioError, match="network.snr_dbb"):
        edgefl.load_scenario(QUICKSTART, {"network.snr_dbb": 3})
    with pytest.raises(ScenarioError, match="run.rounds"):
        edgefl.load_scenario(QUICKSTART, {"run.rounds": 0})
    s = edgefl.load_scenario(QUICKSTART, {"algorithm.lr": 0.5, "control.name": "static"})
    assert s.algorithm.lr == 0.5


def test_sweep_and_optimal_tau_return_dataframes(tmp_path):
    (tmp_path / "tiny.toml").write_text(TINY)
    rows = edgefl.sweep(
        tmp_path / "tiny.toml",
        grid={"algorithm.local_steps": [1, 3], "network.snr_db": [0, 20]},
        seeds=2,
        out=tmp_path / "sweep",
        progress=False,
    )
    assert len(rows) == 2 * 2 * 2 * 3  # tau x snr x seeds x rounds
    table, per_tau = edgefl.optimal_tau(tmp_path / "sweep", target="loss=5.0")
    assert set(table["network.snr_db"]) == {0, 20} and "tau_set" in table.columns
    # the per-τ energy table too, as optimal-tau writes it (tau_energy.csv)
    assert len(per_tau) == 2 * 2 and set(per_tau["tau"]) == {1, 3}
    assert {"energy_j_mean", "energy_j_ci95", "eligible", "is_optimal"} <= set(per_tau.columns)
    for _, best in table.iterrows():
        at = per_tau[per_tau["network.snr_db"] == best["network.snr_db"]]
        assert at.loc[at["is_optimal"], "tau"].tolist() == [best["tau_star"]]
        assert at.loc[at["is_optimal"], "energy_j_mean"].item() == best["energy_j_mean"]
    assert main(["optimal-tau", str(tmp_path / "sweep"), "--target", "loss=5.0", "--no-plots"]) == 0
    assert pd.read_csv(tmp_path / "sweep" / "optimal-tau_loss=5" / "tau_energy.csv")[
        "energy_j_mean"
    ].tolist() == pytest.approx(per_tau["energy_j_mean"].tolist())


def test_version_and_python_m():
    out = subprocess.run([sys.executable, "-m", "edgefl", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"edgefl {edgefl.__version__}"
