"""Run a list of jobs on N workers, with a progress bar and an optional cache: the one job
runner of sweeps (:mod:`edgefl.sweeps.run`) and of the scripts in ``experiments/``.

A job is any picklable object; ``fn(job)`` computes its result and must be a module-level
function (it is sent to worker processes by reference). Every random number of a job must
come from the job itself (its seed): the runner adds none, so the same jobs give the same
results with any number of workers and either backend; results are returned in job order,
whatever order they finish in.

- ``backend = "local"``, ``workers = 1``: in this process, one job after the other.
- ``backend = "local"``, ``workers > 1``: a pool of that many fresh interpreters (``spawn``: no
  forked torch thread pools), or, inside :func:`workers_started_early`, of processes forked from a
  server that imported the jobs' modules and computed nothing; a job that fails stops the run (the
  jobs not yet started are cancelled).
- ``backend = "ray"``: one Ray task per job (``pip install 'edgefl[ray]'``). ``address``: a
  running cluster (``ray.init(address=...)``, e.g. ``"auto"`` or ``"ray://head:10001"``); without
  it, the Ray already initialised in this process, else a local one with ``workers`` CPUs. Results
  come back to this process (``on_result`` writes them), so the workers need no shared storage.

With ``cache`` (a folder), each result is written to ``cache/KEY.json`` (``key(job)``) as soon
as it arrives, atomically (:func:`edgefl.results.atomic_write_text`: never a half file), and a
job whose file is there is read back instead of computed: an interrupted run resumes where it
stopped. Cached results must be JSON-able.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import select
import signal
import sys
import threading
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from contextlib import contextmanager
from multiprocessing import forkserver, get_all_start_methods, get_context
from pathlib import Path
from typing import Any, Callable, Hashable, Iterator, Sequence

from tqdm import tqdm

from edgefl.collector import freeze_at_exit
from edgefl.results import atomic_write_text

BACKENDS = ("local", "ray")


def ray_module():
    """Ray, imported only when asked for: an optional extra, not installed by default."""
    try:
        import ray  # lazy: optional dependency
    except ImportError:
        raise ImportError(
            "--backend ray needs Ray, an optional extra that is not installed "
            "(pip install 'edgefl[ray]'); or use the default --backend local"
        ) from None
    return ray


RAY_START_TRIES = 3


def start_local_ray(num_cpus: int, tries: int = RAY_START_TRIES) -> None:
    """A local Ray with ``num_cpus`` CPUs. Ray waits a fixed 30 s for its raylet to register (hard-coded in
    ray/_private/node.py, Ray 2.60) and gives up with "timed out during startup" when the machine is busy (seen
    at a load average of ~150 on 2 cores): such a start is tried again, up to ``tries`` times in all."""
    ray = ray_module()
    for attempt in range(1, tries + 1):
        try:
            ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
            return
        except Exception as error:
            if "timed out during startup" not in str(error) or attempt == tries:
                raise
            ray.shutdown()


def check_options(workers: int, backend: str, address: str | None = None) -> None:
    """Raise ValueError for an unknown backend, a worker count below 1 or an address without
    Ray; ImportError when Ray is asked for and missing."""
    if backend not in BACKENDS:
        raise ValueError(f"--backend {backend!r}: expected {' or '.join(BACKENDS)}")
    if workers < 1:
        raise ValueError(f"--workers must be >= 1, got {workers}")
    if address is not None and backend != "ray":
        raise ValueError(f"--address {address!r} is for --backend ray (the local backend needs no address)")
    if backend == "ray":
        ray_module()


def cache_path(cache: Path, key: str) -> Path:
    return Path(cache) / f"{key}.json"


def read_cached(cache: Path, key: str):
    """A cached result, or None if it is not there (or not readable)."""
    try:
        return json.loads(cache_path(cache, key).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def run_jobs(
    fn: Callable[[Any], Any],
    jobs: Sequence,
    *,
    workers: int = 1,
    backend: str = "local",
    address: str | None = None,
    cache: Path | None = None,
    key: Callable[[Any], str] = lambda job: job["key"],
    size: Callable[[Any], int] = lambda job: 1,
    describe: Callable[[Any, Any], str] | None = None,
    on_result: Callable[[Any, Any], None] | None = None,
    progress: bool = True,
    desc: str = "jobs",
    unit: str = "job",
) -> list:
    """``[fn(job) for job in jobs]``, computed on ``workers`` workers, cached jobs read back.

    ``size(job)``: how many units of the progress bar a job counts for (e.g. a sweep's
    points). ``describe(job, result)``: a line printed as each job finishes (cached ones
    included in a first summary line); without it the runner prints nothing but the bar,
    which is shown on a terminal only (and never with ``progress=False``).
    ``on_result(job, result)``: called in this process as each job finishes (e.g. to store it).
    """
    check_options(workers, backend, address)
    jobs = list(jobs)
    results: list = [None] * len(jobs)
    todo = []
    for i, job in enumerate(jobs):
        cached = read_cached(cache, key(job)) if cache is not None else None
        if cached is None:
            todo.append(i)
        else:
            results[i] = cached
    if describe is not None:
        print(
            f"{desc}: {len(jobs)} jobs, {len(jobs) - len(todo)} cached, {len(todo)} to do on {workers} "
            f"worker(s){' (ray)' if backend == 'ray' else ''}",
            flush=True,
        )
    total = sum(size(job) for job in jobs)
    bar = tqdm(
        total=total,
        initial=total - sum(size(jobs[i]) for i in todo),
        unit=unit,
        desc=desc,
        disable=not progress or None,
        dynamic_ncols=True,
    )

    def finished(i: int, result) -> None:
        results[i] = result
        if on_result is not None:
            on_result(jobs[i], result)
        if cache is not None:
            atomic_write_text(cache_path(cache, key(jobs[i])), json.dumps(result))
        if describe is not None:
            bar.write(describe(jobs[i], result))
        bar.update(size(jobs[i]))

    try:
        if backend == "ray":
            _on_ray(fn, jobs, todo, finished, workers, address)
        elif workers == 1 or len(todo) <= 1:
            for i in todo:
                finished(i, fn(jobs[i]))
        else:
            _in_pool(fn, jobs, todo, workers, finished)
    finally:
        bar.close()
    return results


def run_keyed(
    fn: Callable,
    jobs: Sequence[dict],
    *,
    workers: int = 1,
    cache: Path | None = None,
    together: Callable[[dict], Hashable] | None = None,
    **options,
) -> dict[str, Any]:
    """:func:`run_jobs` for jobs that are dicts with a unique ``key`` (their cache file) and a
    ``label``, whose results hold their ``wall_s``: the results by key, and a line per job as it
    finishes (the experiments' way).

    ``together(job)``: the jobs with one value (e.g. the seeds of one scenario) are computed in one call
    ``fn([job, ...]) -> [result, ...]`` (e.g. with :func:`edgefl.seed_axis.run_seeds`, their seeds trained
    together), each result cached under its own job's key; a group is cut in parts where there are fewer groups
    than workers (every worker gets work). Without it, ``fn(job) -> result``."""
    describe = options.pop("describe", lambda job, res: f"  {job['label']}: {res['wall_s']:.0f} s")
    if together is None:
        results = run_jobs(fn, jobs, workers=workers, cache=cache, describe=describe, **options)
        return {job["key"]: res for job, res in zip(jobs, results)}
    done = {job["key"]: read_cached(cache, job["key"]) if cache is not None else None for job in jobs}
    groups: dict[Hashable, list[dict]] = {}
    for job in jobs:
        if done[job["key"]] is None:
            groups.setdefault(together(job), []).append(job)
    parts = -(-workers // max(len(groups), 1))  # each group in this many parts, at most
    batches = []
    for members in groups.values():
        size = -(-len(members) // min(parts, len(members)))
        batches += [{"jobs": members[lo : lo + size]} for lo in range(0, len(members), size)]

    def store(batch: dict, results: list) -> None:
        for job, result in zip(batch["jobs"], results):
            done[job["key"]] = result
            if cache is not None:
                atomic_write_text(cache_path(cache, job["key"]), json.dumps(result))

    cached = sum(result is not None for result in done.values())
    if describe is not None and cached:
        print(f"{options.get('desc', 'jobs')}: {cached} of {len(jobs)} cached", flush=True)
    run_jobs(
        functools.partial(_each_batch, fn),
        batches,
        workers=workers,
        on_result=store,
        size=lambda batch: len(batch["jobs"]),
        describe=None if describe is None else lambda b, rs: "\n".join(map(describe, b["jobs"], rs)),
        **options,
    )
    return done


def _each_batch(fn: Callable, batch: dict) -> list:
    """``fn`` of a batch's jobs (run_keyed's ``together``), checked to give one result per job."""
    results = list(fn(batch["jobs"]))
    if len(results) != len(batch["jobs"]):
        raise ValueError(f"{fn.__name__} returned {len(results)} results for {len(batch['jobs'])} jobs")
    return results


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def start_worker(parent_pid: int) -> None:
    """Pool-worker initializer: :func:`die_with_parent`, and a quick end once the pool is shut down
    (edgefl.collector.freeze_at_exit: the parent waits for its workers to end before it goes on)."""
    freeze_at_exit()
    die_with_parent(parent_pid)


def die_with_parent(parent_pid: int) -> None:
    """This worker ends when the sweep's main process does (even killed by SIGKILL), so no worker is left computing
    for nobody: the kernel kills it when its parent dies (Linux prctl), and a worker whose parent is not the main
    process watches the main process itself (:func:`_exit_with`): forked from a fork server
    (:func:`workers_started_early`), which ends only once all its clients have, its workers among them."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):  # pragma: no cover - no prctl: the pool's own shutdown
            return
    if os.getppid() != parent_pid:  # (or the parent died before prctl took effect)
        _exit_with(parent_pid)


def _exit_with(pid: int) -> None:
    """End this process (os._exit) once process ``pid`` has ended: now if it has, else from a thread that waits
    on its pidfd (Linux 5.3; elsewhere only the check now)."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        os._exit(1)
    except (AttributeError, OSError):  # pragma: no cover - (no pidfd here)
        if not _alive(pid):
            os._exit(1)
        return
    threading.Thread(target=_exit_once_readable, args=(pidfd,), name="edgefl-exit-with-parent", daemon=True).start()


def _exit_once_readable(pidfd: int) -> None:
    select.select([pidfd], [], [])  # (a pidfd turns readable when its process ends)
    os._exit(1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - (a pid taken by another user's process since)
        return False
    return True


_WORKERS_FROM: Any = None  # the pool's start method inside workers_started_early: its fork server


@contextmanager
def workers_started_early(workers: int, backend: str, preload: Sequence[str]) -> Iterator[None]:
    """Within the ``with`` block, a local pool of 2 ``workers`` or more (:func:`run_jobs`) forks its workers from a
    fork server started here, which imports ``preload`` (the jobs' modules, torch among them) beside this process's
    own work in the block (a sweep's plan), once for all workers: they start with their modules imported, where
    fresh interpreters ("spawn") each import them after the plan (about 1.5 s each; the Figure-4 study's first jobs
    started about 2.5 s after its plan). The server imports but computes nothing, and is started by fork and exec:
    no thread of this process (torch's, the caller's) is forked. However the block ends (a refused plan, a failed or
    interrupted run), the server is ended, still importing or not, and waited for (its CPU time and its workers'
    then count in this process's children's: resource.getrusage, benchmarks/run.py [6]); the next block starts a
    new one. Where the system has no fork server, or this process already runs one of its own, the pool spawns
    its workers as without the block. For the `edgefl` sweep commands (edgefl.sweeps.cli) and edgefl.sweep()."""
    global _WORKERS_FROM
    server = getattr(forkserver, "_forkserver", None)
    if (
        workers < 2
        or backend != "local"
        or "forkserver" not in get_all_start_methods()
        or getattr(server, "_forkserver_pid", 0) is not None  # (one of this process's own, or no such attribute)
    ):
        yield
        return
    context = get_context("forkserver")
    kept = getattr(server, "_preload_modules", ["__main__"])  # (multiprocessing's default, given back after)
    context.set_forkserver_preload(list(preload))
    try:
        forkserver.ensure_running()  # (returns at once: the server imports on its own)
        _WORKERS_FROM = context
        yield
    finally:
        _WORKERS_FROM = None
        _end_server(server)
        context.set_forkserver_preload(kept)


def _end_server(server: Any) -> None:
    """End multiprocessing's fork server now and reap it. multiprocessing has no public way: its server ends when
    this process does, and only once done importing; its pid and ForkServer._stop (close the server's pipe, reap
    it, forget it so that ensure_running starts a new one) are private, hence looked up with care. (A public way, a
    spawned pool of our own started early with an importing initializer, imports torch once per worker, not once,
    and has no public way to end a worker mid-import either: ProcessPoolExecutor.terminate_workers is Python 3.14's.)"""
    pid, stop = getattr(server, "_forkserver_pid", None), getattr(server, "_stop", None)
    if not isinstance(pid, int) or pid <= 0 or not callable(stop):  # pragma: no cover - (another Python)
        return
    try:
        os.kill(pid, signal.SIGKILL)  # (still importing: it would import on before it read its closed pipe)
        stop()
    except OSError:  # pragma: no cover - (reaped by someone else)
        pass


def _in_pool(fn, jobs, todo: list[int], workers: int, finished) -> None:
    # spawn: fresh interpreters (no forked torch thread pools), unless forked from a server that imported the
    # modules and never computed (workers_started_early); each job sets its own threads.
    with ProcessPoolExecutor(
        max_workers=min(workers, len(todo)),
        mp_context=_WORKERS_FROM or get_context("spawn"),
        initializer=start_worker,
        initargs=(os.getpid(),),
    ) as pool:
        pending = {pool.submit(fn, jobs[i]): i for i in todo}
        try:
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    finished(pending.pop(future), future.result())
        except BaseException:
            for future in pending:
                future.cancel()
            raise


def _on_ray(fn, jobs, todo: list[int], finished, workers: int, address: str | None) -> None:
    ray = ray_module()
    if address is not None:
        ray.init(address=address, ignore_reinit_error=True)
    elif not ray.is_initialized():  # a local Ray with as many CPUs as workers
        start_local_ray(workers)
    remote = ray.remote(num_cpus=1)(fn)  # an exception in a job stops the run, as in the pool
    pending = {remote.remote(jobs[i]): i for i in todo}
    try:
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            finished(pending.pop(done[0]), ray.get(done[0]))
    except BaseException:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise
