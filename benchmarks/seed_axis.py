"""Seeds trained together (edgefl.seed_axis) against the same seeds one after the other: the trainings of one seed
group of the Figure-4 study (scenarios/energy-tau-sweep.toml on the ideal engine, as a sweep trains them),
interleaved in one process, CPU and wall time, and whether each seed's metrics are identical.

    .venv/bin/python benchmarks/seed_axis.py --seeds 10 --rounds 20 --tau 10 --repeats 2
    python benchmarks/seed_axis.py --seeds 5 --set run.device=cuda     # on a GPU: together and solo both there
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgefl.runner import Simulation  # noqa: E402
from edgefl.seed_axis import run_together  # noqa: E402
from edgefl.sweeps.plan import plan_sweep  # noqa: E402
from edgefl.sweeps.run import trainer  # noqa: E402


def trainings(seeds: int, rounds: int, tau: int, scenario: Path, overrides: Sequence[str] = ()):
    grid = ["network.snr_db=10", "network.bandwidth_mhz=1", f"algorithm.local_steps={tau}"]
    plan = plan_sweep(scenario, [f"run.rounds={rounds}", *overrides], grid, seeds)
    return [trainer(p.scenario) for p in plan.points]


def largest_difference(solo, together) -> tuple[float, str]:
    """The largest |difference| of any numeric metric of any round between each seed's two runs (0.0: identical),
    and that metric's name with its round."""
    worst, where = 0.0, ""
    for a, b in zip(solo, together):
        for row_a, row_b in zip(a.metrics, b.metrics, strict=True):
            for key, value in row_a.items():
                if isinstance(value, float) and isinstance(row_b[key], float) and abs(value - row_b[key]) > worst:
                    worst, where = abs(value - row_b[key]), f"{key}, round {row_a.get('round')}"
    return worst, where


def timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--tau", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--scenario", type=Path, default=ROOT / "scenarios" / "energy-tau-sweep.toml")
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="a scenario key (repeatable)"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    scenarios = trainings(args.seeds, args.rounds, args.tau, args.scenario, args.overrides)
    print(
        f"{args.seeds} seeds, {args.rounds} rounds, tau {args.tau}: trainings of one seed group, 1 thread"
        + "".join(f", {key}" for key in args.overrides)
    )
    ratios = []
    for repeat in range(args.repeats):  # interleaved: the machine's load varies
        solo, solo_wall, solo_cpu = timed(
            lambda: [Simulation(s, record_trace=True).run(progress=False) for s in scenarios]
        )
        together, wall, cpu = timed(lambda: run_together([Simulation(s, record_trace=True) for s in scenarios]))
        identical = all(a.metrics == b.metrics for a, b in zip(solo, together))
        ratios.append(solo_cpu / cpu)
        print(
            f"  repeat {repeat + 1}: one after the other {solo_cpu:.1f} s CPU ({solo_wall:.1f} s wall); together "
            f"{cpu:.1f} s CPU ({wall:.1f} s wall); CPU ratio {solo_cpu / cpu:.2f}; metrics identical: {identical}"
            + ("" if identical else " (largest |difference| {:.1e}: {})".format(*largest_difference(solo, together)))
        )
    print(f"CPU ratio one-after-the-other / together: {min(ratios):.2f} to {max(ratios):.2f}")


if __name__ == "__main__":
    main()
