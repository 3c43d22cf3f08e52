"""Seven cells at reuse 1 against reuse 3 against isolated cells, on phones-in-a-cell (issue 23; docs/multi-cell.md).

    .venv/bin/python experiments/multi_cell.py [--seeds 0 1 2] [--rounds 20]

Each configuration runs the phones-in-a-cell scenario (50 phones, FedAvg, 10 per round, FDMA, MCS over Rayleigh
fading, deadline 0.4 s) for ``--rounds`` rounds per seed; printed: energy and simulated time per round, uploads
cut or lost per round, the devices' mean uplink SINR, and the wall time of the run (the engine's cost; the same
7-cell run on the ideal engine, which prices nothing, gives the overhead). Writes docs/data/multi-cell.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

from edgefl.runner import Simulation  # noqa: E402
from edgefl.scenario import load_scenario  # noqa: E402

SCENARIO = REPO / "scenarios" / "phones-in-a-cell.toml"
SUMMARY = REPO / "docs" / "data" / "multi-cell.json"
BACKHAUL = {"backhaul.rate_mbps": 100.0, "backhaul.latency_ms": 20.0, "backhaul.energy_j_per_bit": 1e-8}
CONFIGS = {  # name -> overrides
    "1 cell": {},
    "7 cells, isolated": {"network.cells": 7, "network.interference_load": 0.0},
    "7 cells, reuse 3": {"network.cells": 7, "network.reuse": 3},
    "7 cells, reuse 1": {"network.cells": 7, "network.reuse": 1},
    "7 cells, reuse 1, power control": {
        "network.cells": 7,
        "network.power_control_p0_dbm": -70.0,
        "network.power_control_alpha": 0.8,
    },
    "7 cells, reuse 1, ideal engine": {"network.cells": 7, "run.engine": "ideal"},
    "7 cells, reuse 1, FedAvg through the cloud": {"network.cells": 7, **BACKHAUL},
    "7 cells, reuse 1, HierFAVG, 2 edge rounds": {
        "network.cells": 7,
        "algorithm.name": "hierfavg",
        "algorithm.hierfavg.edge_rounds": 2,
        **BACKHAUL,
    },
}


def run(overrides: dict, seed: int, rounds: int) -> dict:
    scenario = load_scenario(SCENARIO, {**overrides, "run.seed": seed, "run.rounds": rounds, "run.eval_every": rounds})
    start = time.perf_counter()
    result = Simulation(scenario).run(progress=False)
    wall_s = time.perf_counter() - start
    missed = sum(row.get("uploads_missed") or 0 for row in result.metrics)
    sinr = [c["sinr_db"] for c in result.clients if "sinr_db" in c]
    snr = [c["uplink_snr_db"] for c in result.clients]
    return {
        "energy_j_per_round": result.summary["energy_j"] / rounds,
        "time_s_per_round": result.summary["sim_time_s"] / rounds,
        "missed_per_round": missed / rounds,
        "mean_sinr_db": float(np.mean(sinr if sinr else snr)),
        "wall_s": wall_s,
        "handovers": int(sum(c.get("handovers", 0) for c in result.clients)),
        "final_acc_mean": result.metrics[-1]["acc_mean"],
        "backhaul_j_per_round": (result.metrics[-1].get("backhaul_energy_j") or 0.0) / rounds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    table = {}
    for name, overrides in CONFIGS.items():
        runs = [run(overrides, seed, args.rounds) for seed in args.seeds]
        table[name] = {key: [r[key] for r in runs] for key in runs[0]}
        print(name, {k: round(float(np.mean(v)), 3) for k, v in table[name].items()}, flush=True)
    SUMMARY.parent.mkdir(exist_ok=True)
    SUMMARY.write_text(json.dumps({"seeds": args.seeds, "rounds": args.rounds, "runs": table}, indent=1) + "\n")
    print(
        "\n| configuration | energy / round (J) | time / round (s) | uploads missed / round | mean SINR (dB) "
        "| handovers | backhaul J / round | final mean accuracy | wall (s) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, cols in table.items():
        print(
            f"| {name} | {np.mean(cols['energy_j_per_round']):.2f} | {np.mean(cols['time_s_per_round']):.3f} | "
            f"{np.mean(cols['missed_per_round']):.2f} | {np.mean(cols['mean_sinr_db']):.1f} | "
            f"{np.mean(cols['handovers']):.1f} | {np.mean(cols['backhaul_j_per_round']):.4f} | "
            f"{np.mean(cols['final_acc_mean']):.3f} | {np.mean(cols['wall_s']):.2f} |"
        )


if __name__ == "__main__":
    main()
