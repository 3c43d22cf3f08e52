"""Time and device energy to a target on 7 cells (issue 23; docs/multi-cell.md), paired over seeds.

    .venv/bin/python experiments/multi_cell_target.py [--seeds 0 1 2 3 4] [--rounds 40]

phones-in-a-cell with ``network.cells = 7``, evaluated every round; the target: mean client accuracy 0.85
(edgefl/target.py's definition: the measured and the 5-evaluation centred mean both reach it). Two studies:
(a) FedAvg on isolated cells, reuse 3 and reuse 1; (b) FedAvg aggregating at the cloud through the edges against
HierFAVG with 2 and 4 edge rounds per cloud round, at a cheap and a dear backhaul. Paired differences (the same
seed: the same drop, data and draws) with 95 % t-intervals. Writes docs/data/multi-cell-target.json.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

from edgefl.runner import Simulation  # noqa: E402
from edgefl.scenario import load_scenario  # noqa: E402
from edgefl.sweeps.analysis import mean_ci  # noqa: E402
from edgefl.target import Target, rounds_to_target  # noqa: E402

SCENARIO = REPO / "scenarios" / "phones-in-a-cell.toml"
SUMMARY = REPO / "docs" / "data" / "multi-cell-target.json"
TARGET = Target("acc_mean", 0.85)
SEVEN = {"network.cells": 7}
REUSE = {
    "isolated": {**SEVEN, "network.interference_load": 0.0},
    "reuse 3": {**SEVEN, "network.reuse": 3},
    "reuse 1": {**SEVEN, "network.reuse": 1},
}
BACKHAULS = {
    "cheap backhaul (100 Mbit/s, 20 ms, 10 nJ/bit)": {
        "backhaul.rate_mbps": 100.0,
        "backhaul.latency_ms": 20.0,
        "backhaul.energy_j_per_bit": 1e-8,
    },
    "dear backhaul (5 Mbit/s, 200 ms, 1 µJ/bit)": {
        "backhaul.rate_mbps": 5.0,
        "backhaul.latency_ms": 200.0,
        "backhaul.energy_j_per_bit": 1e-6,
    },
}
ALGORITHMS = {
    "FedAvg through the cloud": {},
    "HierFAVG, 2 edge rounds": {"algorithm.name": "hierfavg", "algorithm.hierfavg.edge_rounds": 2},
    "HierFAVG, 4 edge rounds": {"algorithm.name": "hierfavg", "algorithm.hierfavg.edge_rounds": 4},
}


def to_target(overrides: dict, seed: int, rounds: int) -> dict:
    """Time (s), device energy (J) and backhaul energy (J) when the target is reached (None: not reached)."""
    scenario = load_scenario(SCENARIO, {**overrides, "run.seed": seed, "run.rounds": rounds, "run.eval_every": 1})
    rows = Simulation(scenario).run(progress=False).metrics
    reached = rounds_to_target([r["round"] for r in rows], [r["acc_mean"] for r in rows], TARGET)
    if reached is None:
        return {"round": None, "time_s": None, "energy_j": None, "backhaul_j": None}
    row = rows[reached - 1]
    return {
        "round": reached,
        "time_s": row["sim_time_s"],
        "energy_j": row["energy_j"],
        "backhaul_j": row.get("backhaul_energy_j") or 0.0,
    }


def paired(a: list[dict], b: list[dict], key: str) -> list[float] | None:
    """Mean and half-width of a − b over the seeds where both reached the target."""
    pairs = [(x[key], y[key]) for x, y in zip(a, b) if x[key] is not None and y[key] is not None]
    return list(mean_ci([x - y for x, y in pairs])) if len(pairs) >= 2 else None


def fmt(ci) -> str:
    if ci is None or math.isnan(ci[0]):
        return "–"
    return f"{ci[0]:.3g} ± {ci[1]:.2g}" if not math.isnan(ci[1]) else f"{ci[0]:.3g}"


def table(runs: dict[str, list[dict]], baseline: str, keys: list[str]) -> str:
    head = "| configuration | reached | " + " | ".join(f"{k} (mean ± 95 % CI)" for k in keys)
    head += " | " + " | ".join(f"Δ{k} vs {baseline}" for k in keys) + " |"
    lines = [head, "|" + "---|" * (2 + 2 * len(keys))]
    for name, rs in runs.items():
        ok = [r for r in rs if r["round"] is not None]
        cells = [fmt(mean_ci([r[k] for r in ok]) if ok else None) for k in keys]
        deltas = ["" if name == baseline else fmt(paired(rs, runs[baseline], k)) for k in keys]
        lines.append(f"| {name} | {len(ok)}/{len(rs)} | " + " | ".join(cells + deltas) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    reuse = {name: [to_target(o, s, args.rounds) for s in args.seeds] for name, o in REUSE.items()}
    print(table(reuse, "isolated", ["round", "time_s", "energy_j"]), "\n", flush=True)
    hier = {}
    for backhaul, b in BACKHAULS.items():
        hier[backhaul] = {
            name: [to_target({**SEVEN, **b, **o}, s, args.rounds) for s in args.seeds] for name, o in ALGORITHMS.items()
        }
        print(f"**{backhaul}**\n")
        print(table(hier[backhaul], "FedAvg through the cloud", ["round", "time_s", "energy_j", "backhaul_j"]), "\n")
    SUMMARY.parent.mkdir(exist_ok=True)
    SUMMARY.write_text(
        json.dumps(
            {
                "seeds": args.seeds,
                "rounds": args.rounds,
                "target": "acc_mean >= 0.85",
                "reuse": reuse,
                "hierarchical": hier,
            },
            indent=1,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
