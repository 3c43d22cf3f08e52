"""CPU per local step of the Figure-4 study's trainings (scenarios/energy-tau-sweep.toml: DRDM, the linear model),
this checkout's ``Executor._train_batched`` and DRDM step against another checkout's, in one process, interleaved.

    .venv/bin/python benchmarks/local_steps.py --base /tmp/base [--rounds 20] [--tau 30] [--seeds 5]

Two ops are replayed: the last Train op of a seed group trained together (edgefl.seed_axis: its clients stacked,
each seed's rows gathered from its own data) and a C = 100 op on one executor. ``--base``: a checkout of edgefl
before (``mkdir /tmp/base; git archive 4fca975 | tar -x -C /tmp/base``) whose ``edgefl/executor.py`` and
``algorithms/drdm.py`` are loaded beside this checkout's (the rest is this checkout's code). Prints min and
median ms per step, page faults per step, the median of the per-round ratios, and whether both give the same bits.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import resource
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import edgefl.executor as executor  # noqa: E402
from algorithms.drdm import drdm_step  # noqa: E402
from algorithms.ops import Train  # noqa: E402
from benchmarks.seed_axis import trainings  # noqa: E402
from edgefl.runner import Simulation  # noqa: E402
from edgefl.seed_axis import run_together  # noqa: E402


def load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[name] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def captured_op(seeds: int, rounds: int, tau: int):
    """(executor, op, args, kwargs) of the last stacked ``_train_batched`` call of a seed group's trainings."""
    calls = []
    own = executor.Executor._train_batched

    def capture(self, op, *args, **kwargs):
        calls.append((self, op, args, kwargs))
        return own(self, op, *args, **kwargs)

    executor.Executor._train_batched = capture  # type: ignore[method-assign]
    try:
        run_together(
            [Simulation(s) for s in trainings(seeds, rounds, tau, ROOT / "scenarios" / "energy-tau-sweep.toml")]
        )
    finally:
        executor.Executor._train_batched = own  # type: ignore[method-assign]
    return calls[-1]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="a checkout of edgefl before")
    parser.add_argument("--rounds", type=int, default=20, help="interleaved rounds (each replays both ops once)")
    parser.add_argument("--tau", type=int, default=30)
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    base_executor = load("base_executor", args.base / "edgefl" / "executor.py")
    base_drdm = load("base_drdm", args.base / "algorithms" / "drdm.py")
    lead, op, op_args, op_kwargs = captured_op(args.seeds, 2, args.tau)
    clients, dim, steps = 100, lead.linear.dim, args.tau
    gen = torch.Generator().manual_seed(0)
    start = 0.01 * torch.randn(clients, dim, generator=gen)
    shared = {"lr": 0.002, "mu": 0.01, "w_bar": 0.01 * torch.randn(clients, dim, generator=gen)}
    op100 = Train(
        np.arange(clients),
        start,
        steps,
        drdm_step,
        shared=shared,
        client_args={"g": 0.001 * torch.randn(clients, dim, generator=gen)},
        record_at=7,
    )
    idx = torch.from_numpy(np.random.default_rng(0).integers(0, int(lead._offsets[-1]), (clients, steps, 32)))
    per_row = frozenset({"w_bar"})
    this_train, base_train = executor.Executor._train_batched, base_executor.Executor._train_batched
    base_op, base_op100 = (dataclasses.replace(o, step=base_drdm.drdm_step) for o in (op, op100))
    cases = {
        ("stacked", "base"): lambda: base_train(lead, base_op, *op_args, **op_kwargs),
        ("stacked", "this"): lambda: this_train(lead, op, *op_args, **op_kwargs),
        ("C=100", "base"): lambda: base_train(lead, base_op100, start, idx, None, per_row=per_row),
        ("C=100", "this"): lambda: this_train(lead, op100, start, idx, None, per_row=per_row),
    }
    outputs = {key: fn() for key, fn in cases.items()}  # (also a warm-up)
    times: dict = {key: [] for key in cases}
    faults = dict.fromkeys(cases, 0)
    for _ in range(args.rounds):
        for key, fn in cases.items():
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            began = time.thread_time()
            fn()
            times[key].append((time.thread_time() - began) / steps * 1e3)
            faults[key] += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    print(
        f"local steps, 1 thread, tau {steps}: base {args.base} against {ROOT}; {args.rounds} interleaved rounds; "
        f"stacked = {args.seeds} seeds' op ({len(op.clients)} clients)"
    )
    for kind in ("stacked", "C=100"):
        base, this = outputs[(kind, "base")], outputs[(kind, "this")]
        same = torch.equal(base[0], this[0]) and all(torch.equal(base[1][k], this[1][k]) for k in base[1])
        same = same and (base[2] is None) == (this[2] is None) and (base[2] is None or torch.equal(base[2], this[2]))
        for side in ("base", "this"):
            t = times[(kind, side)]
            print(
                f"  {kind:8s} {side}: {min(t):6.3f} ms min, {statistics.median(t):6.3f} median per step; "
                f"{faults[(kind, side)] / args.rounds / steps:.1f} page faults per step"
            )
        ratios = [b / t for b, t in zip(times[(kind, "base")], times[(kind, "this")])]
        print(f"  {kind:8s} base / this: median {statistics.median(ratios):.2f} of the rounds; same bits: {same}")


if __name__ == "__main__":
    main()
