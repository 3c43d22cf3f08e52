"""What a sweep over SNR x bandwidth x τ x seeds costs, in units of one training run.

    .venv/bin/python benchmarks/sweep_cost.py [--rounds 30] [--taus 5,10,20] [--seeds 2]

The grid is scenarios/energy-tau-sweep.toml's SNR x bandwidth (7 x 5 channel points) with a
few τ and seeds. "One training run" is one full co-simulation of one grid point (what
`edgefl run` does: build data and model, train, price every round in SimPy), averaged over
the grid's τ values (a larger τ trains longer). The whole grid runs serially in this
process. Because channel points share a training and re-pricing a trace is cheap next to a
training, the ratio should be close to the number of (τ, seed) trainings, far below the
number of grid points.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgefl.runner import Simulation  # noqa: E402
from edgefl.sweeps.plan import TAU_KEY, plan_sweep  # noqa: E402
from edgefl.sweeps.run import price_points, run_sweep  # noqa: E402


def timed(fn):
    started = time.perf_counter()
    value = fn()
    return time.perf_counter() - started, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", type=Path, default=ROOT / "scenarios" / "energy-tau-sweep.toml")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--taus", default="5,10,20")
    parser.add_argument("--seeds", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(1)

    plan = plan_sweep(
        args.scenario, overrides=[f"run.rounds={args.rounds}"], grids=[f"{TAU_KEY}={args.taus}"], seeds=args.seeds
    )
    taus = plan.grid[TAU_KEY]
    channel_points = len(plan.points) // (len(taus) * len(plan.seeds))
    first_of_tau = {}
    for p in plan.points:
        first_of_tau.setdefault(p.values[TAU_KEY], p)

    Simulation(plan.points[0].scenario).run(progress=False)  # warm-up: imports, first torch calls, file cache
    one_runs = {tau: timed(lambda: Simulation(p.scenario).run(progress=False))[0] for tau, p in first_of_tau.items()}
    t_one = statistics.mean(one_runs.values())

    out = Path(tempfile.mkdtemp(prefix="sweep-cost-"))
    try:
        t_grid, summary = timed(lambda: run_sweep(plan, out / "sweep", workers=1, progress=False))
    finally:
        shutil.rmtree(out, ignore_errors=True)

    # Re-pricing alone: one training's trace, priced for every channel point.
    group = [p for p in plan.points if p.training == plan.points[0].training]
    sim = Simulation(plan.points[0].scenario, record_trace=True)
    trace = sim.run(progress=False).trace
    t_reprice, _ = timed(lambda: price_points(group, trace, sim.model))  # (as the sweep prices them: together)

    print(
        f"scenario            {args.scenario.relative_to(ROOT)} (rounds = {args.rounds}, "
        f"{plan.base.algorithm.name}, {plan.base.model.name}, N = {plan.base.data.num_clients})"
    )
    print(
        f"grid                {channel_points} channel points x {len(taus)} τ x {len(plan.seeds)} seeds "
        f"= {len(plan.points)} points; {summary.repriced} re-priced, {summary.cosimulated} co-simulated"
    )
    print(f"(τ, seed) trainings {plan.num_trainings}")
    print(
        "one training run    "
        + ", ".join(f"τ={tau}: {t:.2f} s" for tau, t in one_runs.items())
        + f"; mean {t_one:.2f} s (full SimPy co-simulation of one point)"
    )
    print(f"whole grid          {t_grid:.2f} s (serial, 1 thread)")
    print(
        f"ratio grid / one    {t_grid / t_one:.2f}   (trainings: {plan.num_trainings}, grid points: {len(plan.points)})"
    )
    print(
        f"re-pricing          {t_reprice / len(group) * 1e3:.1f} ms per channel point (the co-simulation's pricer, "
        f"{len(group)} channel points of one training)"
    )
    print(
        f"co-simulating every point instead would cost about {len(plan.points)} x {t_one:.2f} s = "
        f"{len(plan.points) * t_one:.0f} s"
    )


if __name__ == "__main__":
    main()
