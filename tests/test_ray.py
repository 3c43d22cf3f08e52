"""Sweeps on Ray (`edgefl sweep --backend ray`): one Ray task per learning run, on a local
``ray.init(num_cpus=2)``; results.csv byte-identical to the local backend's for the same grid and
seeds, and resumable like it (a removed point is recomputed, nothing else)."""

from __future__ import annotations

import json

import pytest
import ray  # the ray extra: `make test` installs it
from test_sweep import SCENARIO as SWEEP_SCENARIO

from edgefl.cli import main
from edgefl.sweeps.jobs import start_local_ray
from edgefl.sweeps.store import COMPUTED_LOG, POINTS_DIR

SCENARIO = SWEEP_SCENARIO.format(rounds=3)
# 2 SNR x 2 τ x 2 seeds: the SNR points are re-priced from 4 shared trainings
GRID = ["--grid", "network.snr_db=0,20", "--grid", "algorithm.local_steps=1,3", "--seeds", "2"]
# A local Ray cluster is whole processes (its head, raylet and workers: about 25 s of CPU for the module on 2 cores):
# CI's second stage, `make test-e2e` (pyproject.toml's marker e2e)
pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def local_ray():
    start_local_ray(2)
    yield
    ray.shutdown()


def sweep(tmp_path, name, *extra):
    scenario = tmp_path / "small.toml"
    scenario.write_text(SCENARIO)
    out = tmp_path / name
    assert main(["sweep", str(scenario), *GRID, "--out", str(out), "--quiet", *extra]) == 0
    return out


def test_ray_results_equal_the_local_backend_and_resume(tmp_path, local_ray, capsys):
    local = sweep(tmp_path, "local", "--workers", "2")
    on_ray = sweep(tmp_path, "ray", "--backend", "ray")
    assert (on_ray / "results.csv").read_bytes() == (local / "results.csv").read_bytes()
    assert len((on_ray / "results.csv").read_text().splitlines()) > 1 + 8  # 8 points x rounds

    # resume on Ray: one point removed -> only it is computed again, results unchanged
    points = sorted((on_ray / POINTS_DIR).iterdir())
    assert len(points) == 8
    points[3].unlink()
    before = len((on_ray / COMPUTED_LOG).read_text().splitlines())
    sweep(tmp_path, "ray", "--backend", "ray")
    log = [json.loads(line) for line in (on_ray / COMPUTED_LOG).read_text().splitlines()]
    assert len(log) == before + 1 and log[-1]["id"] == points[3].stem
    assert (on_ray / "results.csv").read_bytes() == (local / "results.csv").read_bytes()


def test_an_address_needs_the_ray_backend(tmp_path, capsys):
    scenario = tmp_path / "small.toml"
    scenario.write_text(SCENARIO)
    assert main(["sweep", str(scenario), "--address", "auto", "--out", str(tmp_path / "x"), "--quiet"]) == 2
    assert "--backend ray" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_an_asynchronous_sweep_on_ray_equals_the_local_backend(tmp_path, local_ray):
    """FedBuff's points are co-simulated (its learning follows the order uploads arrive in), each a Ray task:
    results.csv byte-identical to the local backend's."""
    scenario = tmp_path / "async.toml"
    scenario.write_text(SCENARIO.replace('name = "fedavg"', 'name = "fedbuff"'))
    grid = ["--grid", "network.snr_db=0,20", "--grid", "algorithm.fedbuff.buffer_size=1,2", "--seeds", "2"]
    outs = {}
    for backend in ("local", "ray"):
        outs[backend] = tmp_path / backend
        extra = ["--workers", "2"] if backend == "local" else ["--backend", "ray"]
        assert main(["sweep", str(scenario), *grid, "--out", str(outs[backend]), "--quiet", *extra]) == 0
    local = (outs["local"] / "results.csv").read_text()
    assert (outs["ray"] / "results.csv").read_text() == local
    assert "staleness_mean" in local.splitlines()[0] and len(local.splitlines()) == 1 + 8 * 3  # 8 points x rounds


def test_a_ray_start_that_times_out_on_a_busy_machine_is_tried_again(monkeypatch):
    """Ray's fixed 30 s wait for its raylet fails on a loaded machine (load ~150 on 2 cores): tried again, up to
    RAY_START_TRIES times; any other error, or the last timeout, is raised."""
    calls = []

    def init(**kwargs):
        calls.append(kwargs)
        if len(calls) < 5:  # the first two starts (and the shutdown after the first)
            raise Exception("The current node timed out during startup. This could happen because ...")

    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "shutdown", lambda: calls.append("shutdown"))
    start_local_ray(2)
    assert calls == [calls[0], "shutdown", calls[0], "shutdown", calls[0]]
    assert calls[0]["num_cpus"] == 2

    calls.clear()
    with pytest.raises(Exception, match="timed out during startup"):
        start_local_ray(2, tries=2)
    assert calls.count("shutdown") == 1

    monkeypatch.setattr(ray, "init", lambda **kwargs: (_ for _ in ()).throw(ValueError("bad address")))
    with pytest.raises(ValueError, match="bad address"):
        start_local_ray(2)
