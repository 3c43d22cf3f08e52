"""One round of every algorithm on every committed scenario, shared by the test files that run them by algorithm
group (tests/test_algorithms_on_scenarios_*.py): `edgefl run SCENARIO --set algorithm.name=X` for every algorithm
whose data and model fit. The groups are separate files so that the suite's workers (pytest-xdist, --dist
loadfile: a file runs whole on one worker) share the runs out; tests/test_algorithm_tables.py checks that the
groups hold every algorithm once."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from edgefl.runner import Simulation
from edgefl.scenario import ScenarioError, load_scenario

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = sorted((ROOT / "scenarios").glob("*.toml"))
MNIST_DIR = ROOT.parent / "shared" / "datasets" / "mnist"

# the algorithms by family; each group is one test file (its name after test_algorithms_on_scenarios_)
GROUPS = {
    "averaging": ("fedavg", "fedprox", "scaffold", "feddyn", "partial_avg", "periodic_avg", "fedalign"),
    "asynchronous_and_hierarchical": ("fedasync", "fedbuff", "hierfavg", "drdm", "drfa", "scaff_pd"),
    "dual_averaging": ("fedda", "fedmid", "fast_fedda"),
    "constrained_dual_averaging": ("c_fedda", "mc_fedda"),  # the server's constrained prox: up to 20,000 iterations
}


def data_keys(path: Path) -> dict:
    """The --set keys that point ``path``'s data at the full MNIST beside the checkout, where its own folder is
    absent ({} where it has its data); skips the test where neither is there."""
    from test_data_registry import load_raw_dir_exists

    if load_raw_dir_exists(path):
        return {}
    if load_scenario(path, [f"data.dir={MNIST_DIR}"]).data.name != "mnist" or not MNIST_DIR.is_dir():
        pytest.skip("the full data set of this scenario is not beside the checkout")
    return {"data.dir": str(MNIST_DIR)}


def fits(path: Path, name: str, data: dict) -> bool:
    """Whether algorithm ``name`` fits the data and model of scenario ``path`` (else loading says why)."""
    try:
        load_scenario(path, {**data, "algorithm.name": name})
    except ScenarioError as exc:
        assert "fedalign needs priority clients" in str(exc)  # the one documented misfit
        return False
    return True


def assert_one_round_runs(path: Path, name: str) -> None:
    """`edgefl run SCENARIO --set algorithm.name=NAME` for one round, τ at most 2 (what is tested is that the
    switch runs, not what it learns): one finite metrics row; or, where NAME does not fit the scenario's data
    and model, the documented refusal."""
    data = data_keys(path)
    if not fits(path, name, data):
        return
    base = load_scenario(path, data)
    s = load_scenario(
        path,
        {**data, "algorithm.name": name, "run.rounds": 1, "algorithm.local_steps": min(2, base.algorithm.local_steps)},
    )
    result = Simulation(s).run(progress=False)
    assert len(result.metrics) == 1 and result.summary["algorithm"] == name
    assert math.isfinite(result.metrics[0]["loss"]), (path.stem, name)


def runs_of_group(group: str):
    """The test of one group's file (``test_... = runs_of_group(GROUP)``): each of its algorithms on each committed
    scenario, one test per pair."""

    @pytest.mark.parametrize("name", GROUPS[group])
    @pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
    def test_every_committed_scenario_runs_the_algorithm_where_it_fits(path, name):
        assert_one_round_runs(path, name)

    return test_every_committed_scenario_runs_the_algorithm_where_it_fits
