"""The one job runner (edgefl.sweeps.jobs.run_jobs) of sweeps and experiments: a process pool
gives the same results as one worker, in job order; a cache is written atomically and reused."""

from __future__ import annotations

import json
import sys
from multiprocessing import resource_tracker
from pathlib import Path

import numpy as np
import pytest

from edgefl.sweeps import jobs
from edgefl.sweeps.jobs import run_jobs, run_keyed

from conftest import live_children


def seeded_job(job: dict) -> dict:
    """A job whose numbers come only from its own seed (as every experiment's and sweep's)."""
    rng = np.random.default_rng(job["seed"])
    return {"key": job["key"], "values": rng.normal(size=5).tolist(), "sum": float(rng.random(1000).sum())}


def refuse(job: dict) -> dict:
    raise AssertionError(f"{job['key']} was computed, not read from the cache")


def fail_on_three(job: dict) -> dict:
    if job["seed"] == 3:
        raise RuntimeError("job 3 failed")
    return seeded_job(job)


JOBS = [{"key": f"job-{seed}", "seed": seed} for seed in (5, 3, 11, 0, 8)]


def seeded_jobs(jobs: list[dict]) -> list[dict]:
    """Jobs computed in one call (run_keyed's ``together``), each result saying which call it came from."""
    return [{**seeded_job(job), "wall_s": 0.0, "call": [j["key"] for j in jobs]} for job in jobs]


def test_process_pool_gives_the_same_results_as_one_worker_in_job_order():
    serial = run_jobs(seeded_job, JOBS, workers=1, progress=False)
    pooled = run_jobs(seeded_job, JOBS, workers=3, progress=False)
    assert pooled == serial
    assert [r["key"] for r in pooled] == [j["key"] for j in JOBS]


def test_the_cache_is_written_atomically_and_reused(tmp_path, capsys):
    cache = tmp_path / "cache"
    first = run_jobs(
        seeded_job, JOBS[:3], workers=2, cache=cache, progress=False, describe=lambda job, res: f"done {job['key']}"
    )
    assert sorted(p.name for p in cache.iterdir()) == sorted(f"{j['key']}.json" for j in JOBS[:3])  # no temp files
    assert [json.loads((cache / f"{j['key']}.json").read_text()) for j in JOBS[:3]] == first
    out = capsys.readouterr().out
    assert "3 jobs, 0 cached, 3 to do" in out and all(f"done {j['key']}" in out for j in JOBS[:3])

    assert run_jobs(refuse, JOBS[:3], cache=cache, progress=False) == first  # nothing recomputed
    more = run_jobs(seeded_job, JOBS, cache=cache, progress=False, describe=lambda job, res: job["key"])
    assert more[:3] == first and more == run_jobs(seeded_job, JOBS, progress=False)
    assert "5 jobs, 3 cached, 2 to do" in capsys.readouterr().out


def test_a_torn_cache_file_is_recomputed(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "job-5.json").write_text('{"key": "job-5", "val')  # e.g. written by something else, cut short
    assert run_jobs(seeded_job, JOBS[:1], cache=cache, progress=False) == [seeded_job(JOBS[0])]


def test_a_failing_job_stops_the_run_and_caches_the_others_done(tmp_path):
    cache = tmp_path / "cache"
    with pytest.raises(RuntimeError, match="job 3 failed"):
        run_jobs(fail_on_three, JOBS, workers=1, cache=cache, progress=False)
    assert [p.name for p in cache.iterdir()] == ["job-5.json"]  # finished before the failure: kept
    with pytest.raises(RuntimeError, match="job 3 failed"):
        run_jobs(fail_on_three, JOBS, workers=2, progress=False)


def test_bad_options():
    with pytest.raises(ValueError, match="--workers must be >= 1"):
        run_jobs(seeded_job, JOBS, workers=0)
    with pytest.raises(ValueError, match="expected local or ray"):
        run_jobs(seeded_job, JOBS, backend="dask")
    with pytest.raises(ValueError, match="is for --backend ray"):
        run_jobs(seeded_job, JOBS, address="auto")


def test_jobs_run_together_by_group_each_cached_under_its_own_key(tmp_path, capsys):
    jobs = [{**job, "label": job["key"], "group": job["seed"] % 2} for job in JOBS]  # 5, 3, 11 | 0, 8
    cache = tmp_path / "cache"
    got = run_keyed(seeded_jobs, jobs, cache=cache, together=lambda job: job["group"], progress=False)
    assert list(got) == [j["key"] for j in jobs]
    odd, even = ["job-5", "job-3", "job-11"], ["job-0", "job-8"]
    assert {key: r["call"] for key, r in got.items()} == {**dict.fromkeys(odd, odd), **dict.fromkeys(even, even)}
    for job in jobs:
        assert {k: got[job["key"]][k] for k in ("key", "values", "sum")} == seeded_job(job)  # each job's own numbers
        assert json.loads((cache / f"{job['key']}.json").read_text()) == got[job["key"]]
    out = capsys.readouterr().out
    assert all(f"  {j['key']}: 0 s" in out for j in jobs)  # a line per job
    # cached jobs are read back, the rest computed together; fewer groups than workers: each group cut in parts
    (cache / "job-3.json").unlink()
    (cache / "job-8.json").unlink()
    again = run_keyed(seeded_jobs, jobs, cache=cache, together=lambda job: 0, workers=1, progress=False)
    assert again["job-3"]["call"] == again["job-8"]["call"] == ["job-3", "job-8"] and again["job-5"] == got["job-5"]
    parts = run_keyed(seeded_jobs, jobs, together=lambda job: 0, workers=2, progress=False)
    assert [parts[j["key"]]["call"] for j in jobs] == [["job-5", "job-3", "job-11"]] * 3 + [["job-0", "job-8"]] * 2


WORKER_SCRIPT = """
import os, sys
from edgefl.sweeps import jobs

def facts(job):
    return "torch" in sys.modules, os.getpid()  # torch imported before the job came (this script imports none)

if __name__ == "__main__":
    for _ in range(2):  # (a second block starts a new server: the first one was ended and forgotten)
        with jobs.workers_started_early(2 if sys.argv[1] == "early" else 1, "local", ["edgefl.sweeps.run"]):
            done = jobs.run_jobs(facts, [0, 1], workers=2, progress=False)
        print([imported for imported, _ in done], os.getpid() not in [pid for _, pid in done])
"""


@pytest.mark.parametrize(
    "start, expected", [("early", "[True, True] True\n" * 2), ("spawn", "[False, False] True\n" * 2)]
)
def test_workers_started_early_have_the_jobs_modules_imported(tmp_path, start, expected):
    # workers_started_early (the sweep commands and edgefl.sweep(), during the plan): the workers come from a fork
    # server that imported the jobs' modules (torch among them) once; without it (here: 1 worker asked for while the
    # server starts), each worker is a fresh interpreter
    import subprocess

    script = tmp_path / "workers.py"
    script.write_text(WORKER_SCRIPT)
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, str(script), start], capture_output=True, text=True, cwd=root)
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected  # (and the jobs ran in the workers, not in the script's process)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc: Linux")
def test_the_fork_server_ends_with_its_block_however_the_block_ends():
    # a refused plan, a failed or interrupted run: the server is ended at once (still importing torch here) and
    # reaped, and the next block starts a new one
    resource_tracker.ensure_running()  # (multiprocessing's own helper process, started once and kept: not counted)
    before = live_children()
    for _ in range(2):
        with pytest.raises(KeyboardInterrupt):
            with jobs.workers_started_early(2, "local", ["edgefl.sweeps.run"]):
                servers = live_children() - before
                assert len(servers) == 1
                raise KeyboardInterrupt
        assert live_children() == before
        assert not any(Path(f"/proc/{pid}").exists() for pid in servers)  # (ended and reaped: not even a zombie)
    for workers, backend in [(1, "local"), (2, "ray")]:  # no pool to fork workers for: no server
        with jobs.workers_started_early(workers, backend, ["edgefl.sweeps.run"]):
            assert live_children() == before
