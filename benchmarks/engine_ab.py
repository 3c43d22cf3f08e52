"""Pricing time of this checkout's SimPyPricer against another revision's, side by side in one process.

    python benchmarks/engine_ab.py REV [--repeats 31]      # e.g. REV = 98b3ff0 (main before issue 21)

REV's ``edgefl/`` is exported (git archive) into a temporary folder as the package ``edgefl_base``
(its imports renamed), so that both engines run in the same process, interleaved (A B B A ...), on the
same recorded phases: the learning runs of three networks of the quickstart scenario (dedicated band;
FDMA + Rayleigh; everything on, as benchmarks/engine_identity.py), 30 rounds, traced once with this
checkout. Only the pricer's calls are timed (start_round, price_phase, end_round, finish, booking),
which is what benchmarks/run.py [3] measures against the rest of a run; medians. (``channel/`` and
``energy/`` are this checkout's for both.)
"""

from __future__ import annotations

import argparse
import importlib
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import engine_identity  # noqa: E402

from edgefl.runner import Simulation  # noqa: E402

CASES = {
    "default": engine_identity.BASE,
    "fdma-rayleigh": ["network.access=fdma", "network.fading=rayleigh", "network.rate=shannon"],
    "everything": engine_identity.EVERYTHING,
}


def export_as_base(rev: str, folder: Path) -> None:
    """REV's edgefl/ as the package folder/edgefl_base."""
    archive = subprocess.run(["git", "archive", rev, "edgefl"], cwd=ROOT, check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    (folder / "edgefl").rename(folder / "edgefl_base")
    for path in (folder / "edgefl_base").rglob("*.py"):
        text = re.sub(r"\bedgefl\.", "edgefl_base.", path.read_text())
        text = re.sub(r"from edgefl import", "from edgefl_base import", text)
        path.write_text(text)


def price(modules, scenario_path: Path, sets: list[str], trace, flops) -> float:
    deployment, pricer_module, scenario_module = modules
    s = scenario_module.load_scenario(scenario_path, ["run.rounds=30"] + sets)
    population = deployment.build_population(s.network, s.devices, s.data.num_clients, *flops, s.run.seed)
    pricer = pricer_module.SimPyPricer(deployment.network_params(s.network), population, s.run.seed)
    t = time.perf_counter()
    last = None
    for phase in trace:
        if phase.round != last:
            if last is not None:
                pricer.end_round(last)
            pricer.start_round(1)
            last = phase.round
        pricer.price_phase(phase)
    pricer.end_round(last)
    pricer.finish()
    pricer.events  # booked
    return time.perf_counter() - t


def deployment_module(package: str):
    """``package``'s module of the network and the devices as built: edgefl.deployment (edgefl.physical before
    issue 32 named it so)."""
    try:
        return importlib.import_module(f"{package}.deployment")
    except ModuleNotFoundError:
        return importlib.import_module(f"{package}.physical")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rev")
    parser.add_argument("--repeats", type=int, default=31)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        export_as_base(args.rev, tmp)
        sys.path.insert(0, str(tmp))
        sides = {
            name: (
                deployment_module(package),
                *(importlib.import_module(f"{package}.{module}") for module in ("sim.pricer", "scenario")),
            )
            for name, package in (("base", "edgefl_base"), ("new", "edgefl"))
        }
        scenario_path = tmp / "engine-base.toml"
        engine_identity.cases(1, False, scenario_path)  # writes the engine cases' scenario
        for case, sets in CASES.items():
            sim = Simulation(sides["new"][2].load_scenario(scenario_path, ["run.rounds=30"] + sets), record_trace=True)
            sim.run(progress=False)
            trace, flops = sim.engine.trace, (sim.model.train_flops_per_sample, sim.model.eval_flops_per_sample)
            times = {"base": [], "new": []}
            for r in range(args.repeats + 1):
                for side in ("base", "new") if r % 2 else ("new", "base"):
                    seconds = price(sides[side], scenario_path, sets, trace, flops)
                    if r:  # the first round of each: warm-up
                        times[side].append(seconds)
            base, new = float(np.median(times["base"])), float(np.median(times["new"]))
            print(
                f"{case:14s} {args.rev} {base * 1e3:7.2f} ms | this checkout {new * 1e3:7.2f} ms | "
                f"{100 * (new / base - 1):+.1f} %  ({len(trace)} phases; medians of {args.repeats}, interleaved)",
                flush=True,
            )


if __name__ == "__main__":
    main()
