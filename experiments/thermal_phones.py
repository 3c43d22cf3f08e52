"""What CPU throttling costs a phones-in-a-cell run: the same run with and without the ``thermal``
component (edgefl.sim.thermal), attached from Python (the [[process]] scenario table is not there yet).

    python experiments/thermal_phones.py [--set KEY=VALUE ...] [--ambient-c 35 --throttle-c 45 ...]

Prints, per run: simulated time, energy (all, and compute), final accuracy, compute segments cut by a
throttle or a resume, uploads missed (cut by the deadline, lost), time spent throttled (device-seconds).

On the committed scenario (10 local steps of a linear model: ~30 ms of computing per round) no
device heats enough to throttle; with 100 local steps and a die-sized heat capacity, e.g.
``--set algorithm.local_steps=100 --thermal-capacitance-j-per-k 0.05 --throttle-c 38 --resume-c 36``,
throttling slows computations, which the 0.4 s deadline then cuts.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from edgefl.runner import Simulation
from edgefl.scenario import load_scenario
from edgefl.sim.thermal import Thermal

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "phones-in-a-cell.toml"


def run(overrides: list[str], thermal: dict | None):
    sim = Simulation(load_scenario(SCENARIO, overrides))
    component = None
    if thermal is not None:
        component = Thermal(sim.population, **thermal)
        sim.pricer.add_component(component)
    result = sim.run(progress=False)
    compute = [e for e in result.events if e.kind == "compute"]
    segments = len(compute) - len({(e.round, e.phase, e.client, e.label) for e in compute})
    last = result.metrics[-1]
    return {
        "time_s": last["sim_time_s"],
        "energy_j": sum(e.energy_j for e in result.events),
        "compute_j": sum(e.energy_j for e in compute),
        "compute_s": sum(e.end_s - e.start_s for e in compute),
        "acc_mean": last.get("acc_mean") or float("nan"),
        "extra_segments": segments,
        "uploads_missed": sum(row["uploads_missed"] for row in result.metrics),
        "throttled_device_s": 0.0 if component is None else float(component.throttled_s.sum()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--ambient-c", type=float, default=35.0)
    parser.add_argument("--thermal-resistance-k-per-w", type=float, default=10.0)
    parser.add_argument("--thermal-capacitance-j-per-k", type=float, default=0.5)
    parser.add_argument("--throttle-c", type=float, default=40.0)
    parser.add_argument("--resume-c", type=float, default=38.0)
    parser.add_argument("--throttle-factor", type=float, default=0.5)
    args = parser.parse_args()
    thermal = dict(
        ambient_c=args.ambient_c,
        thermal_resistance_k_per_w=args.thermal_resistance_k_per_w,
        thermal_capacitance_j_per_k=args.thermal_capacitance_j_per_k,
        throttle_c=args.throttle_c,
        resume_c=args.resume_c,
        throttle_factor=args.throttle_factor,
    )
    print(f"phones-in-a-cell {' '.join(args.set)}; thermal: {thermal}")
    rows = {"no thermal": run(args.set, None), "thermal": run(args.set, thermal)}
    keys = list(rows["thermal"])
    print(f"{'':12s}" + "".join(f"{k:>20s}" for k in keys))
    for name, row in rows.items():
        print(f"{name:12s}" + "".join(f"{row[k]:20.6g}" for k in keys))
    a, b = rows["no thermal"], rows["thermal"]
    print(
        f"throttling costs {b['time_s'] - a['time_s']:+.4g} s of simulated time ({100 * (b['time_s'] / a['time_s'] - 1):+.2f} %), "
        f"{b['energy_j'] - a['energy_j']:+.4g} J ({100 * (b['energy_j'] / a['energy_j'] - 1):+.2f} %), of which compute "
        f"{b['compute_j'] - a['compute_j']:+.4g} J"
    )


if __name__ == "__main__":
    main()
