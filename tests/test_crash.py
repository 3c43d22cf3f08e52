"""Crash safety (issue 13): `kill -9` of `edgefl run` at any moment leaves the complete results folder or the
previous one, and the next start recovers and cleans up; `kill -9` of a sweep's main process takes its workers
with it, and the rerun resumes without recomputing or duplicating a point; two sweeps on one folder: the second
refuses; a folder edgefl did not write is never replaced without --force."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_sweep import SCENARIO as SWEEP_SCENARIO

from edgefl.cli import main
from edgefl.results import CHECKPOINT_MAGIC, MARKER, WRITER, check_target, open_folder, recover
from edgefl.sweeps.store import lock_folder

from conftest import HANG_S, hooked_edgefl

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "scenarios" / "quickstart.toml"
RUN_FILES = ("metrics.csv", "clients.csv", "events.csv", "summary.json", "scenario.toml", MARKER)


def complete(folder: Path, rounds: int) -> bool:
    if not all((folder / name).exists() for name in RUN_FILES):
        return False
    return json.loads((folder / "summary.json").read_text())["rounds_run"] == rounds


def tagged_processes(tag: str) -> list[int]:
    """The pids of live processes started with EDGEFL_TEST_TAG=tag (the sweep and its workers)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if f"EDGEFL_TEST_TAG={tag}".encode() in (proc / "environ").read_bytes().split(b"\0"):
                if (proc / "stat").read_text().split(") ", 1)[1][0] != "Z":  # zombies are dead
                    found.append(int(proc.name))
        except (FileNotFoundError, PermissionError, ProcessLookupError):
            continue
    return found


# Where `edgefl run` is killed (the call it is in: see conftest.hooked_edgefl) and what the next start must find:
# "old" (the 2-round results) or "new" (the 3-round ones), from start-up to after the new folder is in place.
KILL_POINTS = [
    ("edgefl.runner.write_results", "*", "before", "old"),  # simulated, nothing written
    ("edgefl.plots.plot_run", "*", "before", "old"),  # the temporary folder half written
    ("os.replace", ".res.*.old", "before", "old"),  # written, the old results still in place
    ("os.replace", "res", "before", "old"),  # the old results moved aside, the new ones not yet in place
    ("os.replace", "res", "after", "new"),  # the new ones in place, the old ones not yet removed
]


@pytest.mark.e2e  # several whole edgefl processes: CI's second stage (make test-e2e)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and prctl: Linux")
@pytest.mark.parametrize("call, name, when, expected", KILL_POINTS)
def test_kill_9_of_a_run_leaves_the_old_or_the_new_results(tmp_path, capsys, call, name, when, expected):
    out = tmp_path / "res"
    assert main(["run", str(QUICKSTART), "--out", str(out), "--no-plots", "--quiet", "--set", "run.rounds=2"]) == 0
    capsys.readouterr()
    args = ["run", QUICKSTART, "--out", out, "--quiet", "--set", "run.rounds=3"]
    if call == "edgefl.plots.plot_run":
        args.append("--plots")
    proc = hooked_edgefl(args, call=call, name=name, when=when, cwd=ROOT, stderr=subprocess.PIPE)
    err = proc.communicate(timeout=HANG_S)[1].decode()
    assert proc.returncode == -signal.SIGKILL, err  # it got there
    check_target(out)  # what the next start does: recover, clean up
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "res"]
    assert leftovers == [], leftovers
    assert complete(out, {"old": 2, "new": 3}[expected]), sorted(p.name for p in out.iterdir())


def test_recover_puts_the_previous_results_back_and_cleans_dead_writers(tmp_path):
    out = tmp_path / "res"
    dead_pid = 999999999  # no such process

    def writers(path: Path, pid: int) -> Path:  # what edgefl's writer puts in its hidden folders
        path.mkdir()
        (path / WRITER).write_text(f"edgefl writer\npid {pid}\ntarget res\n")
        return path

    old = writers(tmp_path / f".res.{dead_pid}.old", dead_pid)  # a kill between the two renames: moved aside
    (old / MARKER).write_text("x")
    dead = writers(tmp_path / f".res.{dead_pid}.abc.tmp", dead_pid)  # a temporary folder of a writer that is gone
    alive = writers(tmp_path / f".res.{os.getpid()}.abc.tmp", os.getpid())  # ours: still being written
    dead_checkpoint = tmp_path / f"..res.checkpoint.{dead_pid}.abc.tmp"  # a checkpoint its writer did not finish
    dead_checkpoint.write_bytes(CHECKPOINT_MAGIC + f"; pid {dead_pid}\nhalf".encode())
    assert recover(out)
    assert (out / MARKER).exists() and not (out / WRITER).exists() and not old.exists() and not dead.exists()
    assert alive.exists() and not dead_checkpoint.exists()


def test_a_folder_edgefl_did_not_write_is_never_replaced(tmp_path, capsys):
    thesis = tmp_path / "thesis"
    thesis.mkdir()
    (thesis / "thesis.tex").write_text("\\documentclass{article}")
    args = ["run", str(QUICKSTART), "--no-plots", "--quiet", "--set", "run.rounds=2", "--out"]
    assert main([*args, str(thesis)]) == 2
    assert "not an edgefl results folder" in capsys.readouterr().err
    assert (thesis / "thesis.tex").read_text() == "\\documentclass{article}"
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    assert main([*args, str(a_file)]) == 2
    assert "is a file" in capsys.readouterr().err and a_file.read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "thesis"]  # nothing moved aside
    assert main([*args, str(thesis), "--force"]) == 0  # the user asked for it
    assert complete(thesis, 2) and not (thesis / "thesis.tex").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_a_read_only_out_is_an_error_before_the_run(tmp_path, capsys):
    locked = tmp_path / "ro"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        code = main(["run", str(QUICKSTART), "--no-plots", "--quiet", "--out", str(locked / "res")])
    finally:
        locked.chmod(0o700)
    assert code == 2 and "cannot write" in capsys.readouterr().err


SWEEP_GRID = ["--grid", "network.snr_db=0,20", "--grid", "algorithm.local_steps=1,2,3,4,5,6", "--seeds", "2"]


def sweep_killed(scenario: Path, reference: Path, out: Path, tag: str, target: str) -> subprocess.Popen:
    """Write the scenario, run the sweep uninterrupted into ``reference``, then start it with 2 workers into
    ``out``: its main process SIGKILLs ``target`` ("self": itself, "worker": one of its workers) just before it
    writes its 5th of 24 points (4 are done)."""
    scenario.write_text(SWEEP_SCENARIO.format(rounds=8))
    assert main(["sweep", str(scenario), *SWEEP_GRID, "--out", str(reference), "--quiet"]) == 0
    args = ["sweep", scenario, *SWEEP_GRID, "--out", out, "--workers", "2", "--quiet"]
    return hooked_edgefl(
        args, name="points", count=5, target=target, env={"EDGEFL_TEST_TAG": tag}, cwd=ROOT, stderr=subprocess.PIPE
    )


@pytest.mark.e2e  # several whole edgefl processes: CI's second stage (make test-e2e)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and prctl: Linux")
def test_kill_9_of_a_sweep_takes_its_workers_and_the_rerun_resumes_identically(tmp_path):
    scenario, grid, reference, killed = tmp_path / "s.toml", SWEEP_GRID, tmp_path / "reference", tmp_path / "killed"
    tag = f"crash-{os.getpid()}"
    proc = sweep_killed(scenario, reference, killed, tag, "self")
    err = proc.communicate(timeout=HANG_S)[1].decode()
    assert proc.returncode == -signal.SIGKILL, err
    done_before = len((killed / "computed.log").read_text().splitlines())
    assert 4 <= done_before < 24  # killed in the middle
    deadline = time.monotonic() + 60  # the workers die with it (the kernel signals them at once)
    while tagged_processes(tag) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert tagged_processes(tag) == []
    assert main(["sweep", str(scenario), *grid, "--out", str(killed), "--quiet"]) == 0
    assert (killed / "results.csv").read_bytes() == (reference / "results.csv").read_bytes()
    ids = [json.loads(line)["id"] for line in (killed / "computed.log").read_text().splitlines()]
    assert len(ids) == len(set(ids)) == 24  # nothing computed twice, nothing missing


@pytest.mark.e2e  # several whole edgefl processes: CI's second stage (make test-e2e)
def test_two_sweeps_on_one_folder_the_second_refuses(tmp_path):
    """The first sweep is this test process holding the folder's lock (as a running sweep does: deterministic,
    where a real first sweep may finish before the second starts)."""
    scenario = tmp_path / "s.toml"
    scenario.write_text(SWEEP_SCENARIO.format(rounds=3))
    out = tmp_path / "out"
    command = [
        sys.executable,
        "-m",
        "edgefl",
        "sweep",
        str(scenario),
        "--grid",
        "algorithm.local_steps=1,2",
        "--out",
        str(out),
        "--quiet",
    ]
    open_folder(out, "sweep")  # what a sweep does before taking the lock
    lock = lock_folder(out)
    try:
        second = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    finally:
        os.close(lock)
    assert second.returncode == 2 and "another edgefl sweep" in second.stderr, second.stderr
    assert f"pid {os.getpid()}" in second.stderr
    assert subprocess.run(command, capture_output=True, cwd=ROOT).returncode == 0  # free once the holder is gone


@pytest.mark.e2e  # several whole edgefl processes: CI's second stage (make test-e2e)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc: Linux")
def test_kill_9_of_a_sweep_worker_is_exit_75_and_the_rerun_resumes(tmp_path):
    scenario, grid, out, reference = tmp_path / "s.toml", SWEEP_GRID, tmp_path / "out", tmp_path / "reference"
    proc = sweep_killed(scenario, reference, out, f"worker-{os.getpid()}", "worker")
    err = proc.communicate(timeout=HANG_S)[1].decode()
    assert proc.returncode == 75 and "a sweep worker process died" in err and "Traceback" not in err, err
    assert main(["sweep", str(scenario), *grid, "--out", str(out), "--quiet"]) == 0
    assert (out / "results.csv").read_bytes() == (reference / "results.csv").read_bytes()
    ids = [json.loads(line)["id"] for line in (out / "computed.log").read_text().splitlines()]
    assert len(ids) == len(set(ids)) == 24


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_FSIZE, SIGXFSZ")
def test_a_disk_that_fills_up_while_writing_is_exit_2_and_leaves_nothing(tmp_path):
    """Writes that fail midway, as on a full disk: RLIMIT_FSIZE stops every file at 4 kB (EFBIG, where a full
    disk gives ENOSPC; unlike a read-only folder it also holds for root). One message, exit 2, no results
    folder, no temporary folder left."""
    import resource

    def small_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # else the kernel kills the process at the limit
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    out = tmp_path / "res"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "edgefl",
            "run",
            str(QUICKSTART),
            "--out",
            str(out),
            "--no-plots",
            "--set",
            "run.rounds=3",
        ],
        cwd=ROOT,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        preexec_fn=small_files,
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert done.returncode == 2, done.stderr
    assert "cannot write the results" in done.stderr and "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_an_out_under_a_file_is_exit_2_naming_the_file(tmp_path, capsys):
    (tmp_path / "notes").write_text("mine")
    out = tmp_path / "notes" / "sub" / "res"
    assert main(["run", str(QUICKSTART), "--out", str(out), "--no-plots", "--quiet", "--set", "run.rounds=1"]) == 2
    assert f"{tmp_path / 'notes'} is a file, not a folder" in capsys.readouterr().err
    assert (tmp_path / "notes").read_text() == "mine"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc: Linux")
def test_a_refused_sweep_with_workers_leaves_no_process_behind(tmp_path):
    # `edgefl sweep --workers 2` starts its workers' fork server before the plan (edgefl.sweeps.jobs.
    # workers_started_early); a scenario mistake ends it at once, still importing torch or not
    scenario = tmp_path / "s.toml"
    scenario.write_text('[run]\nrounds = "x"\n')
    tag = f"refused-{os.getpid()}"
    with open(tmp_path / "err", "w") as err:  # (a file, not a pipe: run returns when the command ends, not its heirs)
        done = subprocess.run(
            [sys.executable, "-m", "edgefl", "sweep", str(scenario), "--workers", "2", "--out", str(tmp_path / "out")],
            stdout=subprocess.DEVNULL,
            stderr=err,
            cwd=ROOT,
            env={**os.environ, "EDGEFL_TEST_TAG": tag},
        )
    assert done.returncode == 2 and "run.rounds" in (tmp_path / "err").read_text()
    servers = [pid for pid in tagged_processes(tag) if b"forkserver" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert servers == []  # (at once: without the stop, the server imports on for a second or more; multiprocessing's
    # resource tracker, a small process that ends with its parent, may still be ending)
    assert not (tmp_path / "out").exists()
