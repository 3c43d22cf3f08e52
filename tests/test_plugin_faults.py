"""A plug-in's fault is the plug-in's, for every kind (issue 33 item 1): a selection policy or a process
(component) that raises, returns or yields what edgefl cannot use, or hands the core's setters a value out of
their domain ends the run with exit 4 and one message naming the plug-in (its scenario key and value), the
value and the file:line of its code; never an internal error (exit 70). Each case failed before the checks
(exit 70, or a run that went on with the bad value) except where marked."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from edgefl.cli import main

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "scenarios" / "quickstart.toml"
SMALL = ["run.rounds=1", "data.num_clients=10", "algorithm.clients_per_round=3", "algorithm.local_steps=2"]

# what a policy's select(view, k) returns -> the words the message must hold besides the value
SELECT = {
    "None": ("return None", "None"),
    "text": ("return 'abc'", "'abc'"),
    "dict": ("return {'a': 1}", "{'a': 1}"),
    "generator": ("return (i for i in range(k))", "a generator"),
    "huge int": ("return [2**70]", "out of range"),
    "out of range": ("return [0, 10**6]", "out of range"),
    "NaN": ("return [float('nan'), 1.0]", "not whole numbers"),
    "duplicates": ("return [1, 1]", "more than once"),
    "nothing": ("return []", "0 clients"),
    "a bool mask": ("return view.online", "not a flat sequence of numbers"),
}
# a process's methods -> the words the message must hold
PROCESS = {
    "from_scenario returns None": (
        "    @classmethod\n    def from_scenario(cls, params, network, population, seed):\n        return None\n",
        "from_scenario() returned None",
    ),
    "before_step yields junk": ("    def before_step(self, client, step):\n        yield 5\n", "yielded 5"),
    "before_step is not a generator": ("    def before_step(self, client, step):\n        return 3\n", "returned 3"),
    "before_step raises": (
        "    def before_step(self, client, step):\n        raise RuntimeError('boom')\n        yield\n",
        "raised RuntimeError: boom",
    ),
    "before_step waits a negative time": (
        "    def before_step(self, client, step):\n        yield self.core.env.timeout(-1)\n",
        "Negative delay",
    ),
    "before_step waits NaN": (
        "    def before_step(self, client, step):\n        yield self.core.env.timeout(float('nan'))\n",
        "Timeout(nan)",
    ),
    "before_step waits forever": (
        "    def before_step(self, client, step):\n        yield self.core.env.timeout(float('inf'))\n",
        "Timeout(inf)",
    ),
    "phase_start returns None": (
        "    def phase_start(self, phase, clients, plans):\n        return None\n",
        "phase_start() returned None",
    ),
    "phase_start returns a client not in the phase": (
        "    def phase_start(self, phase, clients, plans):\n        return {10**6}\n",
        "returned {1000000}",
    ),
    "restrict returns None": ("    def restrict(self, online):\n        return None\n", "restrict() returned None"),
    "chain_may_start returns text": (
        "    def chain_may_start(self, client):\n        return 'yes'\n",
        "returned 'yes'",
    ),
    "Params is a dict": ("    Params = {'a': 1}\n", "is {'a': 1}, expected None"),
    "Params is not a pydantic model": ("    class Params:\n        pass\n", "expected None or a pydantic model"),
    "CPU frequency undeclared": (
        "    def compute_start(self, client):\n        self.core.set_cpu_hz(client, 1e9)\n",
        "no component declared changes_cpu_rate",
    ),
    "uplink rate factor undeclared": (
        "    def compute_start(self, client):\n        self.core.set_uplink_rate_factor(client, 2.0)\n",
        "no component declared changes_uplink_rate",
    ),
    **{  # each setter of the core with a value out of its domain, its class declaring what it changes
        f"{what} {name}": (
            f"{declared}    def compute_start(self, client):\n        self.core.{setter}(client, {v})\n",
            (f"{setter}(", f", {shown}): "),
        )
        for what, setter, declared in [
            ("CPU frequency", "set_cpu_hz", "    changes_cpu_rate = True\n"),
            ("uplink rate factor", "set_uplink_rate_factor", "    changes_uplink_rate = True\n"),
            ("transmit power", "set_tx_power_w", ""),
        ]
        for name, v, shown in [
            ("0", "0", "0"),
            ("NaN", "float('nan')", "nan"),
            ("< 0", "-1", "-1"),
            ("inf", "1e400", "inf"),
        ]
    },
}


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if name.startswith("faulty_"):
            del sys.modules[name]


def run(folder: Path, capsys, overrides: list[str], extra_toml: str = "") -> tuple[int, str]:
    (folder / "s.toml").write_text(QUICKSTART.read_text() + extra_toml)
    sets = [a for o in SMALL + overrides for a in ("--set", o)]
    code = main(["run", "s.toml", "--out", "out", "--no-plots", "-q", *sets])
    return code, capsys.readouterr().err


def assert_plugin_fault(code: int, err: str, key: str, value: str, module: str, words: str | tuple) -> None:
    assert code == 4, err
    assert f"the plug-in {key} = {value!r}" in err, err
    for word in (words,) if isinstance(words, str) else words:
        assert word in err, err
    assert f"{module}.py:" in err, err  # where: the file and line of the plug-in's code
    assert "internal error" not in err and "Traceback" not in err
    assert not (Path("out")).exists()  # nothing half-written


@pytest.mark.parametrize("case", list(SELECT))
def test_a_selection_policy_that_returns_what_edgefl_cannot_use(folder, capsys, case):
    body, words = SELECT[case]
    module = "faulty_select_" + str(list(SELECT).index(case))
    (folder / f"{module}.py").write_text(
        f"from edgefl.selection import Policy\n\n\nclass P(Policy):\n    def select(self, view, k):\n        {body}\n"
    )
    code, err = run(folder, capsys, [f"selection.name={module}:P"])
    assert_plugin_fault(code, err, "selection.name", f"{module}:P", module, words)
    assert "P.select() returned" in err


def test_a_selection_policy_whose_candidates_are_junk(folder, capsys):
    (folder / "faulty_candidates.py").write_text(
        "from edgefl.selection import Policy\n\n\nclass P(Policy):\n    def candidates(self, view, k):\n"
        "        return 'all'\n\n    def select(self, view, k):\n        return [0]\n"
    )
    code, err = run(folder, capsys, ["selection.name=faulty_candidates:P"])
    assert_plugin_fault(code, err, "selection.name", "faulty_candidates:P", "faulty_candidates", "candidates()")


def test_a_selection_policy_that_raises_is_named(folder, capsys):
    """(exit 4 before too: the exception's traceback runs through the plug-in's file)"""
    (folder / "faulty_raise.py").write_text(
        "from edgefl.selection import Policy\n\n\nclass P(Policy):\n    def select(self, view, k):\n"
        "        raise ValueError('my select failed')\n"
    )
    code, err = run(folder, capsys, ["selection.name=faulty_raise:P"])
    assert_plugin_fault(code, err, "selection.name", "faulty_raise:P", "faulty_raise", "ValueError: my select failed")


def test_the_abstract_policy_named_as_the_policy(folder, capsys):
    code, err = run(folder, capsys, ["selection.name=edgefl.selection.base:Policy"])
    assert code == 4, err
    assert "selection.name = 'edgefl.selection.base:Policy'" in err and "does not define select" in err


@pytest.mark.parametrize("case", list(PROCESS))
def test_a_process_whose_hooks_or_setters_break_the_rules(folder, capsys, case):
    body, words = PROCESS[case]
    module = "faulty_process_" + str(list(PROCESS).index(case))
    (folder / f"{module}.py").write_text(f"from edgefl.sim.component import Component\n\n\nclass C(Component):\n{body}")
    code, err = run(folder, capsys, [], f'\n[[process]]\nname = "{module}:C"\n')
    key = "[[process]] name" if case.startswith("Params") else "process[0].name"
    assert_plugin_fault(code, err, key, f"{module}:C", module, words)


def test_a_built_in_component_setting_a_bad_value_is_edgefls_bug():
    """The same check, when no plug-in's code made the call: an internal error (ValueError), not a PluginError."""
    from edgefl.plugins import PluginError, core_fault

    fault = core_fault("set_cpu_hz(0, nan)", "a CPU frequency is a finite number of Hz > 0")
    assert type(fault) is ValueError and not isinstance(fault, PluginError)


def test_selection_set_to_none_on_a_loaded_scenario_is_the_callers_mistake(tmp_path):
    import edgefl
    from edgefl.scenario import ScenarioError

    s = edgefl.load_scenario(QUICKSTART, {"run.rounds": 1})
    s.selection = None
    with pytest.raises(ScenarioError, match="selection: Input should be a valid dictionary"):
        edgefl.run(s, out=tmp_path / "out", progress=False)
