"""Synchronous FedAvg against FedAsync and FedBuff on phones-in-a-cell, with and without stragglers (issue 22,
docs/asynchronous.md): time and energy to a target accuracy, with paired t-intervals over seeds.

    python experiments/asynchronous.py [--seeds 3] [--target acc_mean=0.85] [--out docs/data/asynchronous.csv]

Every run is the committed scenario with `run.stop_at` = the target (it ends once the target is reached and
confirmed); FedAvg gets its 60 rounds, an asynchronous server as many server updates as give it the same
number of client uploads (600 / buffer size; FedAsync: 600). Prints the markdown table of the page and writes
one row per run to --out.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgefl.runner import Simulation  # noqa: E402  (after the path: run from a checkout)
from edgefl.scenario import load_scenario  # noqa: E402
from edgefl.sweeps.analysis import mean_ci  # noqa: E402
from edgefl.target import parse_target  # noqa: E402

PHONES = ROOT / "scenarios" / "phones-in-a-cell.toml"
TRIPS = 600  # client uploads FedAvg's 60 rounds of m = 10 ask for
# name -> (overrides, client uploads per server update)
CONFIGS = {
    "FedAvg (sync, m = 10)": (["algorithm.name=fedavg"], 10),
    "FedAsync (C = 10, α = 0.6, poly a = 1/2)": (["algorithm.name=fedasync", "algorithm.fedasync.concurrency=10"], 1),
    "FedBuff K = 1, C = 10": (["algorithm.name=fedbuff", "algorithm.fedbuff.buffer_size=1"], 1),
    "FedBuff K = 5, C = 10": (["algorithm.name=fedbuff", "algorithm.fedbuff.buffer_size=5"], 5),
    "FedBuff K = 10, C = 10": (["algorithm.name=fedbuff", "algorithm.fedbuff.buffer_size=10"], 10),
    "FedBuff K = 10, C = 20": (
        ["algorithm.name=fedbuff", "algorithm.fedbuff.buffer_size=10", "algorithm.fedbuff.concurrency=20"],
        10,
    ),
    "FedBuff K = 10, C = 50": (
        ["algorithm.name=fedbuff", "algorithm.fedbuff.buffer_size=10", "algorithm.fedbuff.concurrency=50"],
        10,
    ),
}
STRAGGLERS = {"stragglers (Exp(0.5) slowdown)": [], "no stragglers": ["devices.slowdown=none"]}


def run(config: str, stragglers: str, seed: int, target: str) -> dict:
    overrides, per_update = CONFIGS[config]
    scenario = load_scenario(
        PHONES,
        [
            *overrides,
            *STRAGGLERS[stragglers],
            f"run.seed={seed}",
            f"run.rounds={TRIPS // per_update}",
            f'run.stop_at="{target}"',
        ],
    )
    result = Simulation(scenario).run(progress=False, targets=[parse_target(target)])
    outcome = result.summary["targets"][0]
    rows = result.metrics
    staleness = [r["staleness_mean"] for r in rows if "staleness_mean" in r and not math.isnan(r["staleness_mean"])]
    return {
        "config": config,
        "stragglers": stragglers,
        "seed": seed,
        "reached": outcome["reached"],
        "updates": outcome["rounds"],
        "time_s": outcome["sim_time_s"],
        "energy_j": outcome["energy_j"],
        "uploads_arrived": sum(r["uploads_arrived"] for r in rows),
        "uploads_missed": sum(r["uploads_missed"] for r in rows),
        "dropped": sum(r.get("updates_dropped", 0.0) for r in rows),
        "staleness_mean": float(np.mean(staleness)) if staleness else 0.0,
    }


def fmt(mean: float, half: float, digits: int = 3) -> str:
    if math.isnan(mean):
        return "–"
    return f"{mean:.{digits}g}" + ("" if math.isnan(half) else f" ± {half:.2g}")


def table(rows: list[dict]) -> str:
    lines = [
        "| stragglers | server | reached | updates | time to target (s) | energy to target (J) | Δ time vs FedAvg (s) "
        "| Δ energy vs FedAvg (J) | uploads missed / arrived | mean staleness |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for stragglers in STRAGGLERS:
        base = {r["seed"]: r for r in rows if r["stragglers"] == stragglers and r["config"] == next(iter(CONFIGS))}
        for config in CONFIGS:
            runs = [r for r in rows if r["stragglers"] == stragglers and r["config"] == config]
            ok = [r for r in runs if r["reached"]]
            paired = [(r, base[r["seed"]]) for r in ok if base.get(r["seed"], {}).get("reached")]
            dt = mean_ci([r["time_s"] - b["time_s"] for r, b in paired])
            de = mean_ci([r["energy_j"] - b["energy_j"] for r, b in paired])
            lines.append(
                f"| {stragglers} | {config} | {len(ok)}/{len(runs)} | {fmt(*mean_ci([r['updates'] for r in ok]))} "
                f"| {fmt(*mean_ci([r['time_s'] for r in ok]))} | {fmt(*mean_ci([r['energy_j'] for r in ok]))} "
                f"| {'–' if config == next(iter(CONFIGS)) else fmt(*dt, digits=2)} "
                f"| {'–' if config == next(iter(CONFIGS)) else fmt(*de, digits=2)} "
                f"| {sum(r['uploads_missed'] for r in runs)} / {sum(r['uploads_arrived'] for r in runs)} "
                f"| {np.mean([r['staleness_mean'] for r in runs]):.2f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--target", default="acc_mean=0.85")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "data" / "asynchronous.csv")
    args = parser.parse_args()
    rows = []
    for stragglers in STRAGGLERS:
        for config in CONFIGS:
            for seed in range(args.seeds):
                rows.append(run(config, stragglers, seed, args.target))
                print(rows[-1], file=sys.stderr, flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"target {args.target}, {args.seeds} seeds (95 % t-intervals; Δ: paired by seed)\n")
    print(table(rows))


if __name__ == "__main__":
    main()
