"""The benchmarks still run (issue 19, item 5): each script of benchmarks/ on tiny sizes, as a user would
start it. The numbers of a smoke run measure nothing; what is checked is that every benchmark runs to the
end and prints its line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import HANG_S

ROOT = Path(__file__).resolve().parents[1]
MNIST_DIR = Path(os.environ.get("EDGEFL_MNIST_DIR", ROOT.parent / "shared" / "datasets" / "mnist"))
# the benchmarks train on the real MNIST test split (its MD5 is checked: a fake copy is refused)
needs_mnist = pytest.mark.skipif(
    not (MNIST_DIR / "t10k-images-idx3-ubyte.gz").is_file(),
    reason=f"MNIST t10k not found in {MNIST_DIR} (set EDGEFL_MNIST_DIR)",
)


# Each case runs a benchmark script as a whole process (about 65 s of CPU together on 2 cores): CI's second stage,
# `make test-e2e` (pyproject.toml's marker e2e)
pytestmark = pytest.mark.e2e


def run_script(*args: str, timeout: float = HANG_S) -> str:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "EDGEFL_MNIST_DIR": str(MNIST_DIR),
    }
    done = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@needs_mnist
def test_run_smoke_runs_every_benchmark():
    out = run_script("benchmarks/run.py", "--smoke")
    for tag in (
        "[1] linear",
        "[2] cnn",
        "[3] engine",
        "[4] scale",
        "[5] reprice",
        "[8] async",
        "[6] fig4",
        "[7] quick",
    ):
        assert tag in out, f"{tag} missing from:\n{out}"
    assert "| paired (each repeat's co-simulation minus its ideal run): median" in out  # [8]'s second estimate
    # the machine's speed, which the timings scale with: in the header, and [8]'s cost in a bare SimPy loop's events
    assert "host speed: bare SimPy timeout loop " in out and " of its events" in out
    assert out.count("[3] engine") == 3 and "done in" in out
    assert "5 runs stacked (C=" in out and "(the same bits)" in out  # [1]'s seed group in cache blocks


def test_plots_smoke_runs():
    out = run_script("benchmarks/plots.py", "--smoke")
    assert "share    plotting" in out and "accuracy.png" in out


@needs_mnist
def test_sweep_cost_tiny_runs():
    out = run_script("benchmarks/sweep_cost.py", "--rounds", "2", "--taus", "2", "--seeds", "1")
    assert "35 points; 35 re-priced, 0 co-simulated" in out and "ratio grid / one" in out


@needs_mnist
def test_local_steps_tiny_runs_against_a_base_checkout():
    """This checkout as its own base: both sides run, and give the same bits."""
    out = run_script("benchmarks/local_steps.py", "--base", str(ROOT), "--rounds", "1", "--tau", "2", "--seeds", "2")
    assert out.count("same bits: True") == 2 and "stacked = 2 seeds' op" in out, out


@needs_mnist
def test_flower_compare_edgefl_side_runs_without_flower():
    """The Flower comparison's edgefl side (both engines, same scenario) on 2 rounds; Flower is not installed."""
    out = run_script(
        "benchmarks/flower_compare.py", "--no-flower", "--workloads", "a", "--rounds-a", "2", "--repeats", "1"
    )
    assert "(a) N=30 m=20 rounds=2" in out and "edgefl ideal" in out and "edgefl simpy" in out
    assert "Flower" not in out


def test_flower_compare_refuses_zero_repeats():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "benchmarks/flower_compare.py", "--no-flower", "--repeats", "0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert done.returncode == 2 and "--repeats and --threads must be >= 1" in done.stderr
