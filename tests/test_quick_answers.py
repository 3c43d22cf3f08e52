"""A scenario mistake is told before anything heavy is imported (issue 30, item 5).

Validating a scenario needs pydantic, numpy and edgefl's own tables, never torch, scipy or matplotlib: they
load only once the scenario is valid (docs/architecture.md, "What validating a scenario imports"). Each case
below is a command with a mistake, run in one fresh interpreter; after all of them none of the three may have
been imported. No timing is measured here (benchmarks/cli_ab.py measures the whole process).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import algorithms
from edgefl import control, model_catalogue, selection
from edgefl.data import registry as data_registry

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "scipy", "matplotlib")

CHECK = """
import io, sys, contextlib
from edgefl.cli import main
heavy = {heavy!r}
for case in {cases!r}:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(case)
    assert code == 2, (case, code, err.getvalue())
    assert "error" in err.getvalue(), (case, err.getvalue())
    loaded = [m for m in heavy if m in sys.modules]
    assert not loaded, f"{{case}} imported {{loaded}}"
print("checked", len({cases!r}))
"""


def _cases(tmp_path: Path) -> list[list[str]]:
    typo = tmp_path / "typo.toml"
    typo.write_text('[run]\nrounds = "x"\n')
    sweep = tmp_path / "sweep.toml"
    sweep.write_text('[run]\nroundz = 3\n\n[sweep]\nseeds = 2\n"network.snr_db" = [0, 10]\n')
    cases = [["run", str(typo)], ["run", str(typo), "--set", "algorithm.local_stepz=3"]]
    # every built-in kind the validation resolves by name: its module is imported, and must not import torch
    cases += [["run", str(typo), "--set", f"algorithm.name={name}"] for name in algorithms.names()]
    cases += [["run", str(typo), "--set", f"data.name={name}"] for name in data_registry.names()]
    cases += [["run", str(typo), "--set", f"model.name={name}"] for name in model_catalogue.MODEL_NAMES]
    cases += [["run", str(typo), "--set", f"control.name={name}"] for name in control.CONTROLLERS.names()]
    cases += [["run", str(typo), "--set", f"selection.name={name}"] for name in selection.POLICIES.names()]
    cases += [
        ["sweep", str(sweep), "--out", str(tmp_path / "s")],
        ["compare", str(typo), "--algorithms", "fedavg,drdm", "--out", str(tmp_path / "c")],
        ["plot", str(tmp_path / "no-such-sweep")],
    ]
    return cases


def test_a_scenario_mistake_imports_neither_torch_nor_scipy_nor_matplotlib(tmp_path):
    cases = _cases(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", CHECK.format(heavy=HEAVY, cases=cases)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"checked {len(cases)}" in done.stdout


def test_a_valid_scenario_still_loads_its_model():
    """The check above is not vacuous: validating a correct scenario builds the model (torch), as it must to
    check that the model fits the data."""
    code = (
        "import sys\n"
        "from edgefl.scenario import load_scenario\n"
        "load_scenario('scenarios/quickstart.toml')\n"
        "print('torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "True"


def test_no_built_in_model_needs_a_table_of_keys():
    """The scenario's validation skips a built-in model's key check when its table is absent (so that torch
    is not loaded for it): sound only while every built-in's keys have defaults."""
    for name in model_catalogue.MODEL_NAMES:
        assert model_catalogue.check_keys(name, {}) is not None


def test_the_lazy_names_of_the_simulator_package_are_its_modules_own():
    """edgefl.sim exports its names lazily (PEP 562): each resolves to its module's object, and the names the
    type checker sees (the TYPE_CHECKING imports) are the same as those exported."""
    import importlib

    import edgefl.sim as sim

    for name, module in sim._DEFINED_IN.items():
        assert getattr(sim, name) is getattr(importlib.import_module(f"edgefl.sim.{module}"), name)
    tree = ast.parse((REPO / "edgefl" / "sim" / "__init__.py").read_text())
    typed = {
        (alias.name, node.module.rsplit(".", 1)[1])
        for block in tree.body
        if isinstance(block, ast.If)
        for node in block.body
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }
    assert typed == set(sim._DEFINED_IN.items())


RUN_DEFAULT = """
import sys
from edgefl.cli import main
code = main(sys.argv[1:])
print("matplotlib" in sys.modules, code)
"""


def test_a_run_draws_its_figures_only_when_asked_and_edgefl_plot_draws_the_same_later(tmp_path, capsys):
    """`edgefl run` writes its tables and says how to draw the figures, without importing matplotlib (a fresh
    interpreter); `edgefl plot RUN` draws them from the folder, byte for byte the figures of `run --plots`."""
    from test_cli import TINY

    from edgefl.cli import main

    scenario = tmp_path / "tiny.toml"
    scenario.write_text(TINY)
    later, now = tmp_path / "later", tmp_path / "now"
    done = subprocess.run(
        [sys.executable, "-c", RUN_DEFAULT, "run", str(scenario), "--out", str(later), "-q"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-1] == "False 0"  # no matplotlib for a run without figures
    assert f"figures: edgefl plot {later}" in done.stdout and not list(later.glob("*.png"))
    assert main(["run", str(scenario), "--out", str(now), "-q", "--plots"]) == 0
    drawn = sorted(p.name for p in now.glob("*.png"))
    assert {"accuracy.png", "gantt.png", "energy_clients.png"} <= set(drawn)
    assert main(["plot", str(later)]) == 0
    assert "wrote 7 figures" in capsys.readouterr().out
    assert sorted(p.name for p in later.glob("*.png")) == drawn
    for name in drawn:
        assert (later / name).read_bytes() == (now / name).read_bytes(), name
    assert main(["plot", str(later), "--format", "svg", "--out", str(tmp_path / "svg")]) == 0
    assert (tmp_path / "svg" / "gantt.svg").read_bytes().startswith(b"<?xml")


def test_plot_of_a_run_refuses_a_sweeps_options_and_a_damaged_folder(tmp_path, capsys):
    from test_cli import TINY

    from edgefl.cli import main

    scenario = tmp_path / "tiny.toml"
    scenario.write_text(TINY)
    out = tmp_path / "out"
    assert main(["run", str(scenario), "--out", str(out), "-q"]) == 0
    assert main(["plot", str(out), "--target", "acc_worst=0.5"]) == 2
    assert "--target: for a sweep folder" in capsys.readouterr().err
    (out / "events.csv").unlink()
    assert main(["plot", str(out)]) == 2
    assert "no events.csv; expected the --out folder of a finished `edgefl run`" in capsys.readouterr().err
    assert not list(out.glob("*.png"))
    with pytest.raises(SystemExit) as stop:  # one or the other
        main(["run", str(scenario), "--out", str(out), "--plots", "--no-plots"])
    assert stop.value.code == 2


GC_DURING_RUN = """
import gc, sys
import edgefl.runner as runner
original = runner.simulate
def simulate(*args, **kwargs):
    print("during the run:", gc.isenabled(), gc.get_freeze_count() > 100000, flush=True)
    return original(*args, **kwargs)
runner.simulate = simulate
from edgefl.cli import main
sys.argv = ["edgefl", *sys.argv[1:]]
sys.exit(main())
"""


def test_the_command_collects_no_garbage_during_its_imports_and_freezes_them_before_the_run(tmp_path):
    """`edgefl run` (main() without arguments: a process of its own) turns the garbage collector off until its
    modules are imported, then freezes them (edgefl.cli.settle_imports): full collections scanning torch's objects
    cost about a quarter of the quickstart's CPU. main([...]) called from Python leaves the collector alone."""
    import gc

    from test_cli import TINY

    from edgefl.cli import main

    scenario = tmp_path / "tiny.toml"
    scenario.write_text(TINY)
    done = subprocess.run(
        [sys.executable, "-c", GC_DURING_RUN, "run", str(scenario), "--out", str(tmp_path / "a"), "-q"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "during the run: True True" in done.stdout  # collecting again, torch's objects frozen
    frozen = gc.get_freeze_count()
    assert main(["run", str(scenario), "--out", str(tmp_path / "b"), "-q"]) == 0
    assert gc.isenabled() and gc.get_freeze_count() == frozen
    assert (tmp_path / "a" / "metrics.csv").read_bytes() == (tmp_path / "b" / "metrics.csv").read_bytes()
