"""Byte-identity of re-pricing between another revision's engine and this checkout's, in one process.

    python benchmarks/reprice_identity.py REV [--set KEY=VALUE ...]

benchmarks/run.py [5]'s work: the 60-round trace of scenarios/energy-tau-sweep.toml (traced once with this
checkout) re-priced on its 35 channel points by REV's SimPyPricer and by this checkout's (``reprice_rounds``, no
event log, as a sweep re-prices); per point the round costs (end time, energy by category, committed energy), the
ledger's bytes per client and category, and the clock are compared. ``--set`` overrides the scenario (e.g.
``devices.slowdown=exponential devices.slowdown_mean=0.5``). Exit 1 if any point differs.
"""

from __future__ import annotations

import argparse
import importlib
import pickle
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import engine_ab  # noqa: E402

from edgefl.runner import Simulation  # noqa: E402
from edgefl.scenario import load_scenario  # noqa: E402


def outcomes(modules, sets: list[str], model, trace) -> list[bytes]:
    deployment, pricer_module, scenario_module, engine_module = modules
    s0 = scenario_module.load_scenario(engine_ab.SWEEP_SCENARIO, [f"data.dir={engine_ab.MNIST}", *sets])
    flops = (model.train_flops_per_sample, model.eval_flops_per_sample)
    out = []
    for snr in s0.sweep.grid["network.snr_db"]:
        for bw in s0.sweep.grid["network.bandwidth_mhz"]:
            s = s0.model_copy(deep=True)
            s.network.snr_db, s.network.bandwidth_mhz = float(snr), float(bw)
            population = deployment.build_population(s.network, s.devices, s.data.num_clients, *flops, 0)
            pricer = pricer_module.SimPyPricer(deployment.network_params(s.network), population, 0, record_events=False)
            costs = [tuple(vars(cost).items()) for cost in engine_module.reprice_rounds(trace, pricer)]
            out.append(pickle.dumps((costs, pricer.ledger.per_client().tobytes(), pricer.now)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rev")
    parser.add_argument("--set", nargs="*", default=[], dest="sets")
    args = parser.parse_args()
    sim = Simulation(
        load_scenario(engine_ab.SWEEP_SCENARIO, [f"data.dir={engine_ab.MNIST}", *args.sets]), record_trace=True
    )
    sim.run(progress=False)
    with tempfile.TemporaryDirectory() as tmp:
        engine_ab.export_as_base(args.rev, Path(tmp))
        sys.path.insert(0, tmp)
        got = {
            package: outcomes(
                (
                    engine_ab.deployment_module(package),
                    *(importlib.import_module(f"{package}.{m}") for m in ("sim.pricer", "scenario", "sim.engine")),
                ),
                args.sets,
                sim.model,
                sim.engine.trace,
            )
            for package in ("edgefl_base", "edgefl")
        }
    same = sum(a == b for a, b in zip(got["edgefl_base"], got["edgefl"]))
    print(
        f"re-pricing {args.rev} vs this checkout {' '.join(args.sets)}: {same} of {len(got['edgefl'])} channel points "
        "identical (round costs, ledger bytes, clock)"
    )
    sys.exit(0 if same == len(got["edgefl"]) else 1)


if __name__ == "__main__":
    main()
