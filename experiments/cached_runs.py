"""Run an experiment's jobs in worker processes, skipping those already in a cache folder.

Each job is a dict with a unique ``key`` and a ``label``; ``run_job(job)`` returns a
JSON-able dict with the same ``key`` and its ``wall_s``. Finished results are written to
``cache/KEY.json`` atomically, so an interrupted experiment resumes where it stopped.
"""

from __future__ import annotations

import json
from multiprocessing import get_context
from pathlib import Path
from typing import Callable

from edgefl.results import atomic_write_text


def run_cached(run_job: Callable[[dict], dict], jobs: list[dict], workers: int,
               cache: Path | None) -> dict[str, dict]:
    """Results of all ``jobs`` by key: cached ones read back, the others computed."""
    done: dict[str, dict] = {}
    todo = []
    for job in jobs:
        path = cache / f"{job['key']}.json" if cache else None
        if path and path.exists():
            done[job["key"]] = json.loads(path.read_text())
        else:
            todo.append(job)
    print(f"{len(jobs)} runs, {len(done)} cached, {len(todo)} to do on {workers} worker(s)", flush=True)
    if not todo:
        return done
    labels = {job["key"]: job["label"] for job in todo}
    with get_context("spawn").Pool(workers) as pool:
        for res in pool.imap_unordered(run_job, todo):
            done[res["key"]] = res
            print(f"  {labels[res['key']]}: {res['wall_s']:.0f} s", flush=True)
            if cache:
                atomic_write_text(cache / f"{res['key']}.json", json.dumps(res))
    return done
