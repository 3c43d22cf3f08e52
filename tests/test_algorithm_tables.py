"""Each algorithm's own keys in its own table ([algorithm.<name>]): one scenario holds several algorithms'
settings and `--set algorithm.name=X` switches between them on every committed scenario."""

from __future__ import annotations

import pytest
from algorithm_runs import GROUPS, MNIST_DIR, ROOT, SCENARIOS, fits

import algorithms
from edgefl.runner import Simulation
from edgefl.scenario import ScenarioError, load_scenario


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_every_committed_scenario_takes_every_algorithm(path):
    from test_data_registry import load_raw_dir_exists

    data = (
        [] if load_raw_dir_exists(path) else [f"data.dir={MNIST_DIR}"]
    )  # the full MNIST or KMNIST beside the checkout
    if data and not MNIST_DIR.is_dir():
        pytest.skip("no MNIST folder beside the checkout")
    for name in algorithms.names():
        if not fits(path, name, dict(d.split("=", 1) for d in data)):
            continue
        s = load_scenario(path, [*data, f"algorithm.name={name}"])
        assert s.algorithm.name == name
        assert s.algorithm.hyperparams() == algorithms.get(name).Params(**s.algorithm.tables().get(name, {}))


def test_the_groups_of_the_runs_on_every_scenario_hold_every_algorithm_once():
    """tests/test_algorithms_on_scenarios_*.py run every algorithm on every committed scenario, one group each: a
    new algorithm must join a group (and every group has its file)."""
    names = [name for group in GROUPS.values() for name in group]
    assert sorted(names) == algorithms.names()
    files = sorted(p.name for p in (ROOT / "tests").glob("test_algorithms_on_scenarios_*.py"))
    assert files == sorted(f"test_algorithms_on_scenarios_{group}.py" for group in GROUPS)


@pytest.mark.parametrize("name", [n for n in algorithms.names() if n != "fedalign"])  # fedalign needs priority clients
def test_every_algorithm_runs_on_the_quickstart_by_its_name_alone(name):
    s = load_scenario(ROOT / "scenarios" / "quickstart.toml", {"algorithm.name": name, "run.rounds": 2})
    result = Simulation(s).run(progress=False)
    assert len(result.metrics) == 2 and result.summary["algorithm"] == name


def test_the_table_of_the_selected_algorithm_is_used_and_the_others_are_only_validated():
    path = ROOT / "scenarios" / "drdm-mnist10k.toml"
    drdm = load_scenario(path)
    assert drdm.algorithm.hyperparams().mu == 1.0  # [algorithm.drdm] mu = 1.0
    both = load_scenario(path, {"algorithm.fedprox.mu_p": 0.5, "algorithm.name": "fedprox"})
    assert both.algorithm.hyperparams().mu_p == 0.5 and both.algorithm.tables()["drdm"]["mu"] == 1.0
    with pytest.raises(ScenarioError, match="algorithm.fedprox.mu_p"):
        load_scenario(path, {"algorithm.fedprox.mu_p": -1.0})  # not selected, still validated


def test_a_sweep_grid_can_name_an_algorithms_own_key(tmp_path):
    from edgefl.sweeps.plan import plan_sweep

    plan = plan_sweep(
        ROOT / "scenarios" / "quickstart.toml",
        ["run.rounds=1"],
        ["algorithm.name=fedavg,fedprox", "algorithm.fedprox.mu_p=0.01,0.1"],
        1,
    )
    assert len(plan.points) == 4
    assert {p.scenario.algorithm.tables().get("fedprox", {}).get("mu_p") for p in plan.points} == {0.01, 0.1}
    with pytest.raises(Exception, match="not a key of fedprox"):
        plan_sweep(ROOT / "scenarios" / "quickstart.toml", [], ["algorithm.fedprox.muu=0.1"], 1)


PLUGIN = '''
from pydantic import Field
from algorithms.fedavg import FedAvg


class DampedFedAvg(FedAvg):
    """FedAvg whose server moves only part of the way to the average."""
    name = "damped_fedavg"

    class Params(FedAvg.Params):
        damping: float = Field(0.5, gt=0, le=1)

    def round(self, r):
        before = self.w.clone()
        yield from super().round(r)
        self.w = before + self.ctx.hp.damping * (self.w - before)
'''


def test_an_algorithm_of_ones_own_by_its_module_path(tmp_path, monkeypatch):
    import sys

    (tmp_path / "my_algorithms.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        name = "my_algorithms:DampedFedAvg"
        base = {"run.rounds": 3, "algorithm.name": name}
        half = Simulation(
            load_scenario(ROOT / "scenarios" / "quickstart.toml", {**base, f"algorithm.{name}.damping": 0.5})
        ).run(progress=False)
        full = Simulation(
            load_scenario(ROOT / "scenarios" / "quickstart.toml", {**base, f"algorithm.{name}.damping": 1.0})
        ).run(progress=False)
        fedavg = Simulation(load_scenario(ROOT / "scenarios" / "quickstart.toml", {"run.rounds": 3})).run(
            progress=False
        )
        # damping 1 is FedAvg (up to rounding of before + 1·(w − before)); 0.5 is not
        assert [r["loss"] for r in full.metrics] == pytest.approx([r["loss"] for r in fedavg.metrics], rel=1e-6)
        assert [r["loss"] for r in half.metrics] != pytest.approx([r["loss"] for r in fedavg.metrics], rel=1e-3)
        quoted = load_scenario(
            ROOT / "scenarios" / "quickstart.toml", [f"algorithm.name={name}", f'algorithm."{name}".damping=0.25']
        )  # --set spelling
        assert quoted.algorithm.hyperparams().damping == 0.25
        with pytest.raises(ScenarioError, match="damping"):
            load_scenario(ROOT / "scenarios" / "quickstart.toml", {**base, f"algorithm.{name}.damping": 2.0})
        with pytest.raises(ScenarioError, match="cannot import 'no_such_module'"):
            load_scenario(ROOT / "scenarios" / "quickstart.toml", {"algorithm.name": "no_such_module:X"})
    finally:
        sys.modules.pop("my_algorithms", None)
