"""Where a sweep's time goes, and where it went between two commits: the Figure-4 sweep
(scenarios/energy-tau-sweep.toml, by default on a reduced channel grid) under cProfile counting CPU time (this
process's, so that the load of a shared machine weighs less than on wall time), and the difference of two such
profiles function by function.

    # profile a tree (a git worktree of any commit; its own scenario file), one seed, 36 points:
    PYTHONPATH=/tmp/old nice -n 10 .venv/bin/python benchmarks/sweep_profile.py run old1 /tmp/old
    PYTHONPATH=.        nice -n 10 .venv/bin/python benchmarks/sweep_profile.py run new1 .
    # (interleave: old1 new1 old2 new2 ..., the load varies) then compare two profiles:
    .venv/bin/python benchmarks/sweep_profile.py diff /tmp/sweep-profile/old1.prof /tmp/sweep-profile/new1.prof
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import re
import shutil
import time
from collections import defaultdict
from pathlib import Path

OUT = Path("/tmp/sweep-profile")
GRID = ["network.snr_db=0,15,30", "network.bandwidth_mhz=1,10"]  # 6 channel points x 6 tau
# cumulative CPU time of these (where a sweep's time goes)
PARTS = {
    "plan (scenario per grid point)": "edgefl/sweeps/plan.py:plan_sweep",
    "trainings (ideal engine)": "edgefl/runner.py:run",
    "  of which evaluation": "edgefl/metrics.py:evaluate_global",
    "  of which Train ops": "edgefl/executor.py:train",
    "re-pricing (SimPy)": "edgefl/sim/engine.py:reprice_rounds",
    "plug-in imports per task": "edgefl/plugins.py:import_plugins",
}


def run(tag: str, tree: Path, seeds: int) -> None:
    from edgefl.cli import main  # the tree on PYTHONPATH

    out = OUT / f"out-{tag}"
    shutil.rmtree(out, ignore_errors=True)
    args = ["sweep", str(tree / "scenarios" / "energy-tau-sweep.toml"), "--seeds", str(seeds), "--out", str(out), "-q"]
    for grid in GRID:
        args += ["--grid", grid]
    wall, cpu = time.perf_counter(), time.process_time()
    profile = cProfile.Profile(time.process_time)
    code = profile.runcall(main, args)
    profile.dump_stats(OUT / f"{tag}.prof")
    print(f"{tag}: exit {code}, {time.process_time() - cpu:.1f} s CPU, {time.perf_counter() - wall:.1f} s wall")


def by_function(path: Path):
    """CPU seconds (own, cumulative) and calls by 'package/module.py:function', whatever the tree's location."""
    own: dict[str, float] = defaultdict(float)
    cum: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)
    for (file, _, name), (_, count, tottime, cumtime, _) in pstats.Stats(str(path)).stats.items():  # type: ignore[attr-defined]
        key = re.sub(r".*/(edgefl|algorithms|energy|channel|arraychecks|site-packages)/", r"\1/", file) + f":{name}"
        own[key] += tottime
        cum[key] = max(cum[key], cumtime)
        calls[key] += count
    return own, cum, calls


def diff(before: Path, after: Path, rows: int) -> None:
    own_a, cum_a, calls_a = by_function(before)
    own_b, cum_b, calls_b = by_function(after)
    print(f"CPU s        {'before':>8} {'after':>8}")
    print(f"total        {sum(own_a.values()):8.2f} {sum(own_b.values()):8.2f}")
    print(f"calls        {sum(calls_a.values()):8d} {sum(calls_b.values()):8d}")
    for label, key in PARTS.items():
        print(f"{label:32s} {cum_a.get(key, 0):8.2f} {cum_b.get(key, 0):8.2f}")
    changes = sorted(((own_b.get(k, 0) - own_a.get(k, 0), k) for k in set(own_a) | set(own_b)), reverse=True)
    print("own CPU time, largest increases (before -> after, calls):")
    for delta, key in changes[:rows]:
        print(
            f"  {delta:+7.2f}  {own_a.get(key, 0):6.2f} -> {own_b.get(key, 0):6.2f}  ({calls_a.get(key, 0)} -> {calls_b.get(key, 0)})  {key}"
        )
    print("largest decreases:")
    for delta, key in changes[-rows // 2 :]:
        print(
            f"  {delta:+7.2f}  {own_a.get(key, 0):6.2f} -> {own_b.get(key, 0):6.2f}  ({calls_a.get(key, 0)} -> {calls_b.get(key, 0)})  {key}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("run")
    one.add_argument("tag")
    one.add_argument("tree", type=Path)
    one.add_argument("--seeds", type=int, default=1)
    two = sub.add_parser("diff")
    two.add_argument("before", type=Path)
    two.add_argument("after", type=Path)
    two.add_argument("--rows", type=int, default=20)
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    if args.command == "run":
        run(args.tag, args.tree.resolve(), args.seeds)
    else:
        diff(args.before, args.after, args.rows)


if __name__ == "__main__":
    main()
