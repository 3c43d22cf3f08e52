"""Whole-process time of `edgefl` commands, this checkout against another revision, interleaved (A B B A ...).

    python benchmarks/cli_ab.py REV [--repeats 5]      # e.g. REV = 44220fd (main before issue 30)

REV is checked out (git worktree, detached) into a temporary folder and run with this interpreter and
PYTHONPATH pointing at it; this checkout runs the same way. Each command is one fresh process: a scenario
mistake (`run` of a scenario whose run.rounds is text: exit 2), `edgefl --help` and the quickstart (`run
quickstart --no-plots`, and `run quickstart` as the README's `make run` runs it: with its figures before figures
were drawn only on request, without them since). Printed: the medians of wall time and of the process's CPU time
(user + sys; steadier than wall time on a loaded machine) and their ratios (this / REV).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

BAD = '[run]\nrounds = "x"\n'


def commands(folder: Path) -> dict[str, list[str]]:
    bad = folder / "bad.toml"
    bad.write_text(BAD)
    quickstart = ROOT / "scenarios" / "quickstart.toml"
    out = str(folder / "out")
    return {
        "scenario mistake": ["run", str(bad)],
        "--help": ["--help"],
        "quickstart --no-plots": ["run", str(quickstart), "--out", out, "--no-plots", "--quiet", "--force"],
        "quickstart": ["run", str(quickstart), "--out", out, "--quiet", "--force"],
    }


def timed(tree: Path, args: list[str], cwd: Path) -> tuple[float, float]:
    """(wall s, CPU s) of one `python -m edgefl ARGS` with ``tree`` first on the path."""
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "edgefl", *args], cwd=cwd, env=env, capture_output=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 2):
        raise SystemExit(f"{tree}: edgefl {' '.join(args)}: exit {done.returncode}\n{done.stderr.decode()[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rev", help="the revision to compare with, e.g. 44220fd")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder, base = Path(tmp), Path(tmp) / "base"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(base), args.rev], cwd=ROOT, check=True, capture_output=True
        )
        try:
            trees = {"this": ROOT, args.rev: base}
            print(
                f"{'command':<24} {'':>8} {'wall s':>8} {'CPU s':>8}   (medians of {args.repeats}; ratio = this / {args.rev})"
            )
            for name, command in commands(folder).items():
                times: dict[str, list[tuple[float, float]]] = {label: [] for label in trees}
                for k in range(args.repeats):  # A B B A ...
                    order = list(trees) if k % 2 == 0 else list(trees)[::-1]
                    for label in order:
                        times[label].append(timed(trees[label], command, folder))
                medians = {label: np.median(np.array(t), axis=0) for label, t in times.items()}
                for label, (wall, cpu) in medians.items():
                    print(f"{name:<24} {label:>8} {wall:8.2f} {cpu:8.2f}")
                ratio = medians["this"] / medians[args.rev]
                print(f"{name:<24} {'ratio':>8} {ratio[0]:8.2f} {ratio[1]:8.2f}")
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT, capture_output=True)


if __name__ == "__main__":
    main()
