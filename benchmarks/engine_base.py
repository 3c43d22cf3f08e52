"""The engine's benchmarks of benchmarks/run.py on this checkout and on another revision, in runs interleaved.

    python benchmarks/engine_base.py REV [--runs 3] [--only engine,async,reprice] [--quick] [--threads 1]

REV (e.g. 516fd55, main before issue 30) is exported (git archive) into a temporary folder; benchmarks/run.py,
this checkout's, then runs alternately on REV's code (``--tree``) and on this checkout's (REV, this, this, REV,
...), each run a fresh process, so that the load of other processes hits both alike. Each run prints its lines
(the base's marked ``code of <folder>``); compare a line with the same line of the runs beside it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rev")
    parser.add_argument("--runs", type=int, default=3, help="runs of each side (default 3)")
    parser.add_argument("--only", default="engine,async,reprice")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "archive", args.rev], cwd=ROOT, check=True, capture_output=True).stdout
        with tarfile.open(fileobj=BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        common = [
            sys.executable,
            str(ROOT / "benchmarks" / "run.py"),
            "--only",
            args.only,
            "--threads",
            str(args.threads),
        ]
        common += ["--quick"] if args.quick else []
        for r in range(args.runs):
            for side in ("base", "this") if r % 2 == 0 else ("this", "base"):
                print(f"--- {side} ({args.rev if side == 'base' else 'this checkout'}), run {r + 1}", flush=True)
                subprocess.run(common + (["--tree", tmp] if side == "base" else []), check=True)


if __name__ == "__main__":
    main()
