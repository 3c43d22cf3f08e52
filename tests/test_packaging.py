"""Packaging: every package of the tree is listed in pyproject.toml, the wheel carries the scenario
files (edgefl.scenarios), and a shipped scenario can be used by its name."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

from edgefl import shipped_scenarios as shipped
from edgefl.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_of_the_tree_is_listed():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for top in ("edgefl", "channel", "energy", "arraychecks", "plugin_registry", "algorithms")
        for p in (ROOT / top).rglob("__init__.py")
    }
    assert found | {"edgefl.scenarios"} == listed


def test_the_wheel_ships_the_scenarios(tmp_path):
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            str(ROOT),
            "-w",
            str(tmp_path),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("edgefl-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"edgefl/scenarios/{p.name}" for p in (ROOT / "scenarios").glob("*.toml")}
    assert expected and expected <= names


def test_a_shipped_scenario_by_name(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no scenarios/ folder here: the shipped files are found by name
    assert "quickstart" in shipped.names() and shipped.path("quickstart.toml").is_file()
    assert main(["scenarios"]) == 0 and "phones-in-a-cell" in capsys.readouterr().out
    assert main(["scenarios", "quickstart"]) == 0
    assert "[algorithm]" in capsys.readouterr().out
    assert main(["run", "quickstart", "--set", "run.rounds=1", "--no-plots", "-q"]) == 0
    assert (tmp_path / "results" / "quickstart" / "metrics.csv").exists()
    assert main(["scenarios", "quickstrt"]) == 2 and "no shipped scenario" in capsys.readouterr().err
    assert main(["run", "quickstrt"]) == 2  # neither a file nor a shipped name: the usual error
