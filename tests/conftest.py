"""Shared helpers of the algorithm tests: one tiny scenario builder and a round-by-round runner.

Test modules import them directly (``from conftest import make_scenario, run_rounds``; pytest
puts this folder on ``sys.path``), usually wrapping ``make_scenario`` with the defaults of
their own set-up, e.g. ``functools.partial(make_scenario, seed=3)``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, Optional

import pytest
import torch
from hypothesis import HealthCheck, settings

from edgefl.scenario import Scenario, scenario_from_dict

# How long a test waits for a subprocess before calling it hung. A guard against hangs, not a timing window: a
# machine whose two cores are shared by many jobs (load average 40 measured) runs a 20 s command for minutes.
HANG_S = 1800

# Hypothesis's own wall-clock limits are windows on a loaded machine: a 200 ms deadline per example (a process
# descheduled that long fails the test, or "Flaky" when the re-run is quick) and the too_slow health check on the time
# spent drawing examples. Every property test here runs without them; its examples and checks are unchanged.
settings.register_profile("edgefl", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("edgefl")

# Ten clients of Synthetic(1, 1) with 40 samples each (synthetic_alpha = synthetic_beta = 1 by default).
SYNTHETIC_DATA = {"name": "synthetic", "num_clients": 10, "samples_per_client": 40}


@pytest.fixture(autouse=True)
def torch_threads_as_before():
    """Each test leaves torch's thread count as it found it. A run's ``run.threads`` sets it for the whole process
    (edgefl.parts.build_run): the fuzz test's run.threads = 777 left a worker of the suite (pytest-xdist) running
    every later test's tensor operations on 777 threads on 2 cores, 3-4 times the CPU time of the same tests
    run alone (measured 55 s against 15 s for tests/test_control.py)."""
    threads = torch.get_num_threads()
    yield
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


def make_scenario(
    algorithm: str = "fedavg",
    *,
    seed: int = 5,
    rounds: int = 6,
    engine: str = "ideal",
    executor: str = "batched",
    threads: Optional[int] = None,
    data: Optional[dict] = None,
    model: str | dict = "linear",
    network: Optional[dict] = None,
    local_steps: int = 3,
    clients_per_round: int = 5,
    lr: float = 0.05,
    batch_size: int = 8,
    **hyperparams: Any,
) -> Scenario:
    """A validated scenario, small enough for a unit test.

    ``data`` replaces :data:`SYNTHETIC_DATA` as a whole (give its ``name``); ``model`` is a model
    name or a whole ``[model]`` table; ``network`` is the ``[network]`` table (defaults when
    omitted); every other keyword is an algorithm hyperparameter (``[algorithm.<name>]``).
    """
    run = {"seed": seed, "rounds": rounds, "engine": engine, "executor": executor}
    if threads is not None:
        run["threads"] = threads
    sections = {
        "run": run,
        "data": dict(SYNTHETIC_DATA if data is None else data),
        "model": {"name": model} if isinstance(model, str) else dict(model),
        "algorithm": {
            "name": algorithm,
            "local_steps": local_steps,
            "clients_per_round": clients_per_round,
            "lr": lr,
            "batch_size": batch_size,
            **({algorithm: hyperparams} if hyperparams else {}),
        },
    }
    if network is not None:
        sections["network"] = dict(network)
    return scenario_from_dict(sections)


def run_rounds(sim, rounds: Optional[int] = None) -> list[torch.Tensor]:
    """Run ``rounds`` rounds (default: the scenario's) one by one through ``sim.engine``;
    returns a copy of the global model after each."""
    models = []
    for r in range(sim.scenario.run.rounds if rounds is None else rounds):
        sim.engine.run_round(sim.algorithm, r)
        models.append(sim.algorithm.model.clone())
    return models


def load_experiment(name: str) -> ModuleType:
    """The script ``experiments/<name>.py`` as a module (experiments/ is not a package)."""
    path = Path(__file__).resolve().parents[1] / "experiments" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# `python -m edgefl ARGS` that sends itself (or its process group, or a pool worker) a signal at a known point of
# its work instead of at a moment guessed by the test: when the wrapped function (os.replace, or MODULE.FUNCTION)
# is called for the COUNT-th time with a last path argument whose name (or parent's name) is NAME ("*" for any),
# before or after the call. A test that waited and then signalled raced the child: under load it signalled too
# early or the child had already finished. See :func:`hooked_edgefl`.
HOOKED = """
import fnmatch, importlib, json, multiprocessing, os, signal, sys
from pathlib import Path
hook = json.loads(os.environ["EDGEFL_TEST_HOOK"])
module_name, _, attr = hook["call"].rpartition(".")
module = importlib.import_module(module_name)
original, seen, sig = getattr(module, attr), [0], getattr(signal, hook["signal"])
# Ctrl-C as in a terminal: a test runner's worker (pytest-xdist) ignores SIGINT, and a child inherits that
signal.signal(signal.SIGINT, signal.default_int_handler)
def fire():
    if hook["target"] == "group":
        os.killpg(os.getpgrp(), sig)
    elif hook["target"] == "worker":
        workers = [p.pid for p in multiprocessing.active_children()]
        assert workers, "no worker to signal"
        os.kill(max(workers), sig)
    else:
        os.kill(os.getpid(), sig)
def hooked(*args, **kwargs):
    path = Path(args[-1]) if args and isinstance(args[-1], (str, os.PathLike)) else None
    matches = hook["name"] == "*" or (
        path is not None and any(fnmatch.fnmatch(n, hook["name"]) for n in (path.name, path.parent.name))
    )
    seen[0] += matches
    now = matches and seen[0] == hook["count"]
    if now and hook["when"] == "before":
        fire()
    result = original(*args, **kwargs)
    if now and hook["when"] == "after":
        fire()
    return result
setattr(module, attr, hooked)
from edgefl.cli import main
sys.exit(main(sys.argv[1:]))
"""


def hooked_edgefl(
    args: list,
    *,
    call: str = "os.replace",
    name: str = "*",
    count: int = 1,
    when: Literal["before", "after"] = "before",
    signal: str = "SIGKILL",
    target: Literal["self", "group", "worker"] = "self",
    env: Optional[dict] = None,
    **popen: Any,
) -> subprocess.Popen:
    """Start ``edgefl ARGS`` that sends ``signal`` to ``target`` at the ``count``-th call of ``call`` on a path
    named ``name`` (see :data:`HOOKED`), ``when`` before or after that call. ``popen``: more Popen arguments."""
    hook = {"call": call, "name": name, "count": count, "when": when, "signal": signal, "target": target}
    environment = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {}), "EDGEFL_TEST_HOOK": json.dumps(hook)}
    return subprocess.Popen([sys.executable, "-c", HOOKED, *map(str, args)], env=environment, **popen)


def live_children() -> set[int]:
    """The pids of this process's live child processes (zombies are dead; Linux /proc): e.g. a sweep's fork server
    (edgefl.sweeps.jobs.workers_started_early), started and ended by the process under test."""
    me, found = os.getpid(), set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            state, parent = (proc / "stat").read_text().rsplit(") ", 1)[1].split()[:2]
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if int(parent) == me and state != "Z":
            found.add(int(proc.name))
    return found
