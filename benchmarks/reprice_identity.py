"""Byte-identity of re-pricing between another revision's engine and this checkout's, in one process.

    python benchmarks/reprice_identity.py REV [--set KEY=VALUE ...]

benchmarks/run.py [5]'s work: the 60-round trace of scenarios/energy-tau-sweep.toml (traced once with this
checkout) re-priced on its 35 channel points by REV's SimPyPricer and by this checkout's (no event log, as a sweep
re-prices: ``edgefl.sim.points.reprice_points`` where a revision has it, the points priced together, else
``reprice_rounds`` point by point); per point the round costs (end time, energy by category, committed energy) and
the ledger's bytes per client and category are compared. ``--set`` overrides the scenario (e.g.
``devices.slowdown=exponential devices.slowdown_mean=0.5``). Exit 1 if any point differs.

``--seeds N``: a 1-tau slice of the Figure-4 study instead: the seeds run.seed + 0 .. N-1 trained together on the ideal
engine (as a sweep trains them, edgefl.sweeps.run), each seed's trace re-priced on the 35 channel points of that seed
(population and pricer seeded as the sweep's point); the seeds taken in turn by REV and this checkout, interleaved
(A B, B A, ...), and each side's CPU time printed (``--seeds 10``: 350 points, about 20 s of training).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import pickle
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import engine_ab  # noqa: E402

from edgefl.runner import Simulation  # noqa: E402
from edgefl.scenario import load_scenario  # noqa: E402
from edgefl.seed_axis import run_together  # noqa: E402
from edgefl.sweeps.run import trainer  # noqa: E402


def outcomes(modules, sets: list[str], model, trace, seed: int = 0) -> list[bytes]:
    deployment, pricer_module, scenario_module, engine_module = modules
    s0 = scenario_module.load_scenario(engine_ab.SWEEP_SCENARIO, [f"data.dir={engine_ab.MNIST}", *sets])
    flops = (model.train_flops_per_sample, model.eval_flops_per_sample)
    pricers = []
    for snr in s0.sweep.grid["network.snr_db"]:
        for bw in s0.sweep.grid["network.bandwidth_mhz"]:
            s = s0.model_copy(deep=True)
            s.network.snr_db, s.network.bandwidth_mhz = float(snr), float(bw)
            population = deployment.build_population(s.network, s.devices, s.data.num_clients, *flops, seed)
            pricers.append(
                pricer_module.SimPyPricer(deployment.network_params(s.network), population, seed, record_events=False)
            )
    # the points priced together where the revision can (edgefl.sim.points, as a sweep prices them), else one by one
    points_module = importlib.util.find_spec(f"{engine_module.__package__}.points")
    if points_module is not None:
        priced = importlib.import_module(points_module.name).reprice_points(trace, pricers)
    else:
        priced = [engine_module.reprice_rounds(trace, pricer) for pricer in pricers]
    # the costs and ledgers (a pricer's clock does not move where the points are priced together)
    return [
        pickle.dumps(([tuple(vars(cost).items()) for cost in costs], pricer.ledger.per_client().tobytes()))
        for costs, pricer in zip(priced, pricers)
    ]


def traced_seeds(sets: list[str], seeds: int) -> list[tuple[int, object, list]]:
    """(seed, model, trace) of the seeds run.seed + 0 .. seeds-1, trained together on the ideal engine (a sweep's
    trainings of one seed group)."""
    s0 = load_scenario(engine_ab.SWEEP_SCENARIO, [f"data.dir={engine_ab.MNIST}", *sets])
    scenarios = [
        trainer(s0.model_copy(update={"run": s0.run.model_copy(update={"seed": s0.run.seed + k})}))
        for k in range(seeds)
    ]
    sims = [Simulation(s, record_trace=True) for s in scenarios]
    results = run_together(sims)
    return [(s.run.seed, sim.model, result.trace) for s, sim, result in zip(scenarios, sims, results)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rev")
    parser.add_argument("--set", nargs="*", default=[], dest="sets")
    parser.add_argument("--seeds", type=int, default=0, help="a 1-tau slice: this many seeds trained together")
    args = parser.parse_args()
    if args.seeds:
        runs = traced_seeds(args.sets, args.seeds)
    else:
        sim = Simulation(
            load_scenario(engine_ab.SWEEP_SCENARIO, [f"data.dir={engine_ab.MNIST}", *args.sets]), record_trace=True
        )
        sim.run(progress=False)
        runs = [(0, sim.model, sim.engine.trace)]
    got: dict[str, list[bytes]] = {"edgefl_base": [], "edgefl": []}
    cpu = dict.fromkeys(got, 0.0)
    with tempfile.TemporaryDirectory() as tmp:
        engine_ab.export_as_base(args.rev, Path(tmp))
        sys.path.insert(0, tmp)
        modules = {
            package: (
                engine_ab.deployment_module(package),
                *(importlib.import_module(f"{package}.{m}") for m in ("sim.pricer", "scenario", "sim.engine")),
            )
            for package in got
        }
        for k, (seed, model, trace) in enumerate(runs):
            for package in ("edgefl_base", "edgefl") if k % 2 == 0 else ("edgefl", "edgefl_base"):  # interleaved
                started = time.process_time()
                got[package] += outcomes(modules[package], args.sets, model, trace, seed)
                cpu[package] += time.process_time() - started
    same = sum(a == b for a, b in zip(got["edgefl_base"], got["edgefl"]))
    points = len(got["edgefl"])
    print(
        f"re-pricing {args.rev} vs this checkout {' '.join(args.sets)}: {same} of {points} channel points "
        f"identical (round costs, ledger bytes); {len(runs)} seed(s); CPU time {args.rev} "
        f"{cpu['edgefl_base'] / points * 1e3:.2f} ms/point, this checkout {cpu['edgefl'] / points * 1e3:.2f} ms/point "
        f"({100 * (cpu['edgefl'] / cpu['edgefl_base'] - 1):+.1f} %, interleaved)"
    )
    sys.exit(0 if same == points else 1)


if __name__ == "__main__":
    main()
