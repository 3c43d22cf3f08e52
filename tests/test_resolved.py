"""The resolved scenario.toml of a run: portable (paths relative to it), only keys that apply, and
still reproducing the run (rerun from it -> byte-identical outputs)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import tomli_w

from edgefl.cli import main
from edgefl.resolved import NOT_APPLICABLE, resolved_dict
from edgefl.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = sorted((ROOT / "scenarios").glob("*.toml"))
OUTPUTS = ("metrics.csv", "clients.csv", "events.csv", "scenario.toml")


@pytest.mark.parametrize(
    "name, overrides",
    [
        ("quickstart", ["run.rounds=3"]),
        # geometry, MCS, battery, availability, mobility, slowdown, deadline: most rules of NOT_APPLICABLE at work
        ("phones-in-a-cell", ["run.rounds=2", "data.num_clients=12", "algorithm.clients_per_round=4"]),
    ],
)
def test_a_run_from_its_resolved_scenario_is_identical(tmp_path, capsys, name, overrides):
    sets = [x for o in overrides for x in ("--set", o)]
    assert (
        main(["run", str(ROOT / "scenarios" / f"{name}.toml"), *sets, "--out", str(tmp_path / "a"), "--no-plots", "-q"])
        == 0
    )
    moved = tmp_path / "elsewhere"  # a different depth: the relative data path must be rewritten
    assert main(["run", str(tmp_path / "a" / "scenario.toml"), "--out", str(moved / "b"), "--no-plots", "-q"]) == 0
    for file in OUTPUTS[:3]:
        assert (tmp_path / "a" / file).read_bytes() == (moved / "b" / file).read_bytes(), file
    first, second = (tomllib.loads((d / "scenario.toml").read_text()) for d in (tmp_path / "a", moved / "b"))
    if "dir" in first["data"]:
        assert not Path(first["data"]["dir"]).is_absolute()
        assert (tmp_path / "a" / first["data"]["dir"]).resolve() == (moved / "b" / second["data"]["dir"]).resolve()
        first["data"].pop("dir"), second["data"].pop("dir")
    assert first == second
    assert "sweep" not in first


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_every_scenario_resolves_to_a_fixed_point_without_inapplicable_keys(tmp_path, path):
    raw = tomllib.loads(path.read_text())
    data_dir = raw.get("data", {}).get("dir")
    # the full data sets are not on this machine: their scenarios read the MNIST test split instead
    missing = data_dir is not None and not (path.parent / data_dir).is_dir()
    scenario = load_scenario(path, [f"data.dir={ROOT.parent / 'shared' / 'datasets' / 'mnist'}"] if missing else None)
    folder = tmp_path / "deep" / "results"
    folder.mkdir(parents=True)
    written = resolved_dict(scenario, folder)
    (folder / "scenario.toml").write_text(tomli_w.dumps(written))
    again = load_scenario(folder / "scenario.toml")
    assert resolved_dict(again, folder) == written
    if data_dir is not None:
        assert not Path(written["data"]["dir"]).is_absolute()
        assert Path(again.data.dir).resolve() == Path(scenario.data.dir).resolve()
    for dotted, does_not_apply in NOT_APPLICABLE.items():
        *parents, key = dotted.split(".")
        table = written
        for part in parents:
            table = table.get(part, {})
        assert not (does_not_apply(scenario) and key in table), dotted
