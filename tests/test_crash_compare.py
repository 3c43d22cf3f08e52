"""Crash safety of `edgefl compare` (issue 13): `kill -9` during its sweep (of the main process, which takes its
workers with it) and while it writes (a point's file, compare.txt after compare.csv, compare.png: each killed once
its temporary file is written, before the rename; results.csv and compare.csv are written the same way, as
store.LOCKED_FILES); every rerun of the same command resumes. In the end: nothing computed twice, no temporary file left, no process left, and results.csv,
compare.csv, compare.txt and compare.png byte-identical to those of an uninterrupted compare."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from test_crash import ROOT, tagged_processes
from test_sweep import SCENARIO

from edgefl.cli import main
from edgefl.sweeps.store import COMPUTED_LOG, POINTS_DIR

from conftest import HANG_S, hooked_edgefl

OUTPUTS = ("results.csv", "compare_loss=5/compare.csv", "compare_loss=5/compare.txt", "compare_loss=5/compare.png")
REPORT = "compare_loss=5"  # the folder of the target's tables and figure
POINTS = 6  # 3 algorithms x 2 seeds


def temps(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob(".*.tmp"))


def computed(folder) -> list[str]:
    log = folder / COMPUTED_LOG
    return [json.loads(line)["id"] for line in log.read_text().splitlines()] if log.exists() else []


@pytest.mark.e2e  # several whole edgefl processes: CI's second stage (make test-e2e)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and prctl: Linux")
def test_kill_9_of_compare_at_every_step_and_the_reruns_resume_identically(tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text(SCENARIO.format(rounds=8))  # what is tested is where it is killed, not how long it trains
    command = ["compare", scenario, "--algorithms", "fedavg,fedprox,drdm", "--seeds", "2", "--target", "loss=5"]
    reference, out = tmp_path / "reference", tmp_path / "killed"
    assert main([*map(str, command), "--out", str(reference), "--quiet"]) == 0
    tag = f"compare-{os.getpid()}"
    env = {"EDGEFL_TEST_TAG": tag}

    def killed_at(name: str, count: int = 1) -> None:
        """SIGKILLed when os.replace would put NAME in place (its temporary file complete), at the COUNT-th such
        rename; NAME "point" = a file of points/."""
        proc = hooked_edgefl(
            [*command, "--out", out, "--quiet"],
            name="points" if name == "point" else name,
            count=count,
            env=env,
            cwd=ROOT,
            stderr=subprocess.PIPE,
        )
        assert proc.wait(timeout=HANG_S) == -signal.SIGKILL, proc.stderr.read().decode()  # it got there
        stem = f".{name}." if name != "point" else "."
        assert any(t.split("/")[-1].startswith(stem) for t in temps(out)), temps(out)  # the temp was written

    killed_at("point", 2)  # the sweep: writing its second point
    assert len(computed(out)) == 1 and (out / POINTS_DIR).is_dir()

    # kill -9 of the main process just before it writes its 3rd point, with 2 workers under way: they die with it
    proc = hooked_edgefl(
        [*command, "--out", out, "--workers", "2", "--quiet"],
        name="points",
        count=2,
        env=env,
        cwd=ROOT,
        stderr=subprocess.PIPE,
    )
    assert proc.wait(timeout=HANG_S) == -signal.SIGKILL, proc.stderr.read().decode()
    assert 2 <= len(computed(out)) < POINTS  # killed in the middle of the sweep
    deadline = time.monotonic() + 60
    while tagged_processes(tag) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert tagged_processes(tag) == []

    killed_at("compare.txt")  # the rest of the sweep, results.csv and compare.csv are written, not compare.txt
    assert len(computed(out)) == POINTS and (out / REPORT / "compare.csv").exists()
    assert not (out / REPORT / "compare.txt").exists()
    killed_at("compare.png")
    assert not (
        out / REPORT / "compare.png"
    ).exists()  # never a half figure: the previous one (none here) or the new one

    assert main([*map(str, command), "--out", str(out), "--quiet"]) == 0
    for name in OUTPUTS:
        assert (out / name).read_bytes() == (reference / name).read_bytes(), name
    ids = computed(out)
    assert len(ids) == len(set(ids)) == POINTS  # nothing computed twice, nothing missing
    assert temps(out) == []  # the reruns removed what the killed writers left
    assert tagged_processes(tag) == []
