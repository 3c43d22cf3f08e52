"""Pricing time of this checkout's SimPyPricer against another revision's, side by side in one process.

    python benchmarks/engine_ab.py REV [--repeats 31] [--cases default,fdma-rayleigh,everything,reprice,async]
                                       [--clock wall|cpu]

REV's ``edgefl/``, ``channel/``, ``energy/`` and ``arraychecks/`` are exported (git archive) into a temporary
folder as the packages ``edgefl_base``, ``channel_base``, ... (their imports renamed), so that both engines run
in the same process, interleaved (A B B A ...), on the same recorded work (medians):

- default, fdma-rayleigh, everything: the learning runs of three networks of the quickstart scenario (dedicated
  band; FDMA + Rayleigh; everything on, as benchmarks/engine_identity.py), 30 rounds, traced once with this
  checkout; only the pricer's calls are timed (start_round, price_phase, end_round, finish, booking), which is
  what benchmarks/run.py [3] measures against the rest of a run;
- reprice: benchmarks/run.py [5]: the 60-round trace of scenarios/energy-tau-sweep.toml re-priced on its 35
  channel points (``reprice_rounds``, no event log): ms per channel point;
- async: benchmarks/run.py [8]: the calls the pricer received in a FedAsync run on phones-in-a-cell
  (concurrency 10, 600 server updates; its journal, edgefl.sim.journal) received again by a fresh pricer:
  the pricer's part of the engine's cost, ms per dispatched chain.
"""

from __future__ import annotations

import argparse
import importlib
import pickle
import re
import subprocess
import sys
import tarfile
import tempfile
import time
import zlib
from io import BytesIO
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import engine_identity  # noqa: E402

from edgefl.runner import Simulation  # noqa: E402

MNIST = engine_identity.MNIST
SWEEP_SCENARIO = ROOT / "scenarios" / "energy-tau-sweep.toml"
PHONES_SCENARIO = ROOT / "scenarios" / "phones-in-a-cell.toml"

CASES = {
    "default": engine_identity.BASE,
    "fdma-rayleigh": ["network.access=fdma", "network.fading=rayleigh", "network.rate=shannon"],
    "everything": engine_identity.EVERYTHING,
}


CLOCK = time.perf_counter  # --clock cpu: time.process_time (steadier than wall time on a loaded machine)
PACKAGES = ("edgefl", "channel", "energy", "arraychecks")  # what is taken from REV (algorithms/: this checkout's)


def export_as_base(rev: str, folder: Path) -> None:
    """REV's packages as folder/<package>_base."""
    archive = subprocess.run(["git", "archive", rev, *PACKAGES], cwd=ROOT, check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    names, others = "|".join(PACKAGES), "|".join(p for p in PACKAGES if p != "edgefl")
    for package in PACKAGES:
        (folder / package).rename(folder / f"{package}_base")
    for package in PACKAGES:
        for path in (folder / f"{package}_base").rglob("*.py"):
            text = re.sub(r"\bedgefl\.", "edgefl_base.", path.read_text())  # imports and registries' "edgefl.x:Y"
            # (a bare "import energy" keeps its name: the module's code says energy.x; edgefl.x was renamed above)
            text = re.sub(rf"^(\s*)import ({others})$", r"\1import \2_base as \2", text, flags=re.M)
            text = re.sub(rf"\b(from|import) ({names})\b(?!_base)", r"\1 \2_base", text)
            path.write_text(text)


def price(modules, scenario_path: Path, sets: list[str], trace, flops) -> float:
    deployment, pricer_module, scenario_module = modules[:3]
    s = scenario_module.load_scenario(scenario_path, ["run.rounds=30"] + sets)
    population = deployment.build_population(s.network, s.devices, s.data.num_clients, *flops, s.run.seed)
    pricer = pricer_module.SimPyPricer(deployment.network_params(s.network), population, s.run.seed)
    t = CLOCK()
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
    return CLOCK() - t


def deployment_module(package: str):
    """``package``'s module of the network and the devices as built: edgefl.deployment (edgefl.physical before
    issue 32 named it so)."""
    try:
        return importlib.import_module(f"{package}.deployment")
    except ModuleNotFoundError:
        return importlib.import_module(f"{package}.physical")


def reprice_points(modules, model) -> list:
    """benchmarks/run.py [5]'s channel points: (network, population) of each, built by ``modules``."""
    deployment, _, scenario_module = modules[:3]
    s0 = scenario_module.load_scenario(SWEEP_SCENARIO, [f"data.dir={MNIST}"])
    points = []
    for snr in s0.sweep.grid["network.snr_db"]:
        for bw in s0.sweep.grid["network.bandwidth_mhz"]:
            s = s0.model_copy(deep=True)
            s.network.snr_db, s.network.bandwidth_mhz = float(snr), float(bw)
            population = deployment.build_population(
                s.network, s.devices, s.data.num_clients, model.train_flops_per_sample, model.eval_flops_per_sample, 0
            )
            points.append((deployment.network_params(s.network), population))
    return points


def reprice(modules, points, trace) -> float:
    _, pricer_module, _, engine_module, _ = modules
    t = CLOCK()
    for network, population in points:
        engine_module.reprice_rounds(trace, pricer_module.SimPyPricer(network, population, 0, record_events=False))
    return (CLOCK() - t) / len(points)


ASYNC = ["algorithm.name=fedasync", "algorithm.fedasync.concurrency=10", "run.rounds=600", "run.eval_every=600"]


def replay_journal(modules, scenario, model, journal) -> float:
    parts = modules[4]
    *_, pricer = parts.pricer_of(scenario, model)
    calls = [(name, *pickle.loads(zlib.decompress(packed))) for name, packed in journal]
    t = CLOCK()
    for name, args, kwargs in calls:
        getattr(pricer, name)(*args, **kwargs)
    return CLOCK() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rev")
    parser.add_argument("--repeats", type=int, default=31)
    parser.add_argument("--cases", default=",".join([*CASES, "reprice", "async"]))
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall", help="wall time, or the process's CPU time")
    args = parser.parse_args()
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    wanted = args.cases.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        export_as_base(args.rev, tmp)
        sys.path.insert(0, str(tmp))
        sides = {
            name: (
                deployment_module(package),
                *(
                    importlib.import_module(f"{package}.{module}")
                    for module in ("sim.pricer", "scenario", "sim.engine", "parts")
                ),
            )
            for name, package in (("base", "edgefl_base"), ("new", "edgefl"))
        }
        scenario_path = tmp / "engine-base.toml"
        engine_identity.cases(1, False, scenario_path)  # writes the engine cases' scenario

        def compare(case: str, measure, unit: str, scale: float, note: str) -> None:
            times: dict[str, list[float]] = {"base": [], "new": []}
            for r in range(args.repeats + 1):
                for side in ("base", "new") if r % 2 else ("new", "base"):
                    seconds = measure(side)
                    if r:  # the first round of each: warm-up
                        times[side].append(seconds)
            base, new = float(np.median(times["base"])), float(np.median(times["new"]))
            print(
                f"{case:14s} {args.rev} {base * scale:7.2f} {unit} | this checkout {new * scale:7.2f} {unit} | "
                f"{100 * (new / base - 1):+.1f} %  ({note}; {args.clock} time, medians of {args.repeats}, interleaved)",
                flush=True,
            )

        for case, sets in CASES.items():
            if case not in wanted:
                continue
            sim = Simulation(sides["new"][2].load_scenario(scenario_path, ["run.rounds=30"] + sets), record_trace=True)
            sim.run(progress=False)
            trace, flops = sim.engine.trace, (sim.model.train_flops_per_sample, sim.model.eval_flops_per_sample)
            compare(
                case,
                lambda side: price(sides[side], scenario_path, sets, trace, flops),
                "ms",
                1e3,
                f"{len(trace)} phases",
            )
        if "reprice" in wanted:
            scenario = sides["new"][2].load_scenario(SWEEP_SCENARIO, [f"data.dir={MNIST}"])
            sim = Simulation(scenario, record_trace=True)
            sim.run(progress=False)
            points = {side: reprice_points(sides[side], sim.model) for side in sides}
            compare(
                "reprice",
                lambda side: reprice(sides[side], points[side], sim.engine.trace),
                "ms/point",
                1e3,
                f"{len(sim.engine.trace)} phases on {len(points['new'])} channel points",
            )
        if "async" in wanted:
            scenario = sides["new"][2].load_scenario(PHONES_SCENARIO, [f"data.dir={MNIST}", *ASYNC])
            sim = Simulation(scenario)
            sim.keep_checkpoints()  # the pricer keeps the journal of its calls
            sim.run(progress=False)
            chains = int(sim.engine.selected_count.sum())
            journal = list(sim.pricer.journal)
            scenarios = {
                side: sides[side][2].load_scenario(PHONES_SCENARIO, [f"data.dir={MNIST}", *ASYNC]) for side in sides
            }
            compare(
                "async",
                lambda side: replay_journal(sides[side], scenarios[side], sim.model, journal) / chains,
                "ms/chain",
                1e3,
                f"{len(journal)} calls, {chains} chains",
            )


if __name__ == "__main__":
    main()
