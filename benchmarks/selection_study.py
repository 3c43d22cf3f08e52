"""The client selection policies on ``phones-in-a-cell`` (docs/selection.md, "On phones-in-a-cell").

    python benchmarks/selection_study.py [--seeds 5] [--rounds 60] [--target acc_worst=0.75]

For FedAvg under every built-in policy (and DRDM, which samples by λ itself, as a reference), each seed
0..K-1: simulated time and energy to the target (the centred moving average of edgefl's targets), the final
worst-client accuracy, the energy and time of the whole run, and Jain's fairness index of participation,
J = (Σ x_i)² / (N Σ x_i²) over x_i = the rounds client i trained in (1: everyone equally; 1/N: one
client). Differences to uniform are paired by seed (the same data, devices and channel draws), with a 95 %
Student-t interval. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgefl.runner import Simulation  # noqa: E402
from edgefl.scenario import load_scenario  # noqa: E402
from edgefl.target import parse_target  # noqa: E402

POLICIES = [
    "uniform",
    "fedcs",
    "fedcs selection.candidate_fraction=0.5",
    "best_channel",
    "energy_aware",
    "oort",
    "power_of_choice",
]
MNIST = ROOT.parent / "shared" / "datasets" / "mnist"


def jain(x: np.ndarray) -> float:
    """Jain's fairness index (Jain, Chiu & Hawe, DEC-TR-301, 1984)."""
    return float(x.sum() ** 2 / (len(x) * (x**2).sum())) if x.any() else math.nan


def one_run(algorithm: str, policy: str, seed: int, rounds: int, target: str) -> dict:
    name, *keys = policy.split(" ")  # "fedcs selection.candidate_fraction=0.5": a policy and its keys
    overrides = [f"run.seed={seed}", f"run.rounds={rounds}", f"algorithm.name={algorithm}", f"selection.name={name}"]
    overrides += keys
    if MNIST.exists():
        overrides.append(f"data.dir={MNIST}")
    s = load_scenario(ROOT / "scenarios" / "phones-in-a-cell.toml", overrides)
    result = Simulation(s).run(progress=False, targets=[parse_target(target)])
    reached = result.summary["targets"][0]
    trained = np.array([row["times_trained"] for row in result.clients], dtype=float)
    return {
        "time_to_target_s": reached["sim_time_s"] if reached["reached"] else math.nan,
        "energy_to_target_j": reached["energy_j"] if reached["reached"] else math.nan,
        "acc_worst": result.summary["final"]["acc_worst"],
        "acc_mean": result.summary["final"]["acc_mean"],
        "energy_j": result.summary["energy_j"],
        "time_s": result.summary["sim_time_s"],
        "jain": jain(trained),
        "never": int((trained == 0).sum()),
    }


def paired(diff: list[float]) -> str:
    d = np.asarray(diff, dtype=float)
    d = d[np.isfinite(d)]
    if len(d) < 2:
        return "n/a"
    half = stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
    return f"{d.mean():+.3g} ± {half:.2g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--target", default="acc_worst=0.75")
    args = parser.parse_args()
    cases = [("fedavg", p) for p in POLICIES] + [("drdm", "uniform")]
    runs = {case: [one_run(*case, seed, args.rounds, args.target) for seed in range(args.seeds)] for case in cases}
    base = runs[("fedavg", "uniform")]
    print(
        f"phones-in-a-cell, {args.rounds} rounds, seeds 0..{args.seeds - 1}; target {args.target}; means over "
        "seeds (reached: seeds that reached the target), paired differences to fedavg + uniform ± 95 % CI\n"
    )
    print(
        "| algorithm | policy | reached | time to target (s) | Δ time (s) | energy to target (J) | Δ energy (J) | "
        "final acc_worst | Δ acc_worst | run energy (J) | run time (s) | Jain's index | clients never selected |"
    )
    print("|" + "---|" * 13)
    for (algorithm, policy), rs in runs.items():

        def mean(key: str, rs=rs) -> float:
            values = [r[key] for r in rs if r[key] is not None and math.isfinite(r[key])]
            return float(np.mean(values)) if values else math.nan

        def delta(key: str, rs=rs) -> str:
            return paired([r[key] - b[key] for r, b in zip(rs, base)])

        reached = sum(math.isfinite(r["time_to_target_s"]) for r in rs)
        print(
            f"| {algorithm} | {policy} | {reached}/{len(rs)} | {mean('time_to_target_s'):.3g} | "
            f"{delta('time_to_target_s')} | {mean('energy_to_target_j'):.4g} | {delta('energy_to_target_j')} | "
            f"{mean('acc_worst'):.3f} | {delta('acc_worst')} | {mean('energy_j'):.4g} | {mean('time_s'):.3g} | "
            f"{mean('jain'):.3f} | {mean('never'):.1f} |"
        )


if __name__ == "__main__":
    main()
