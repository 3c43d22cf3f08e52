"""``edgefl compare``: several algorithms on one scenario, K seeds each, with energy, time and rounds to a
target and their confidence intervals (no τ grid needed). It is a sweep over ``algorithm.name`` (resumable,
the same folder layout), summarised per algorithm.

Per algorithm and seed: rounds, cumulative energy (J) and simulated time (s) to the target (the one
definition, :mod:`edgefl.target`), and the final values of the run. Per algorithm: means with t-intervals
over the seeds that reached the target, and the energy relative to the first algorithm paired over the
seeds (the same seed gives every algorithm the same data partition, initial model and channel draws).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from edgefl.results import atomic_file
from edgefl.sweeps.analysis import DEFAULT_CONFIDENCE, mean_ci
from edgefl.target import DEFAULT_WINDOW, Target, definition, rounds_to_target

ALGORITHM_KEY = "algorithm.name"


@dataclass
class AlgorithmOutcome:
    algorithm: str
    seeds: int
    reached: int  # seeds that reached the target
    rounds: tuple[float, float]  # mean, CI half-width (over the seeds that reached it)
    energy_j: tuple[float, float]
    time_s: tuple[float, float]
    energy_ratio: tuple[float, float]  # to the first algorithm, paired over the seeds both reached
    final: dict[str, float]  # metric -> mean over seeds at the last round
    energy_total_j: float  # mean over seeds, whole run


def compare(rows: list[dict], target: Target | None, window: int = DEFAULT_WINDOW,
            confidence: float = DEFAULT_CONFIDENCE) -> list[AlgorithmOutcome]:
    """Summarise a sweep over ``algorithm.name`` (results.csv rows), in the order the algorithms appear."""
    runs: dict[str, dict[int, list[dict]]] = {}
    for row in rows:
        runs.setdefault(row[ALGORITHM_KEY], {}).setdefault(int(row["seed"]), []).append(row)
    per_seed: dict[str, dict[int, dict]] = {}
    for name, by_seed in runs.items():
        per_seed[name] = {}
        for seed, run in by_seed.items():
            run.sort(key=lambda r: r["round"])
            at = None
            if target is not None:
                reached = rounds_to_target([r["round"] for r in run], [r.get(target.metric) for r in run], target, window)
                at = next((r for r in run if r["round"] == reached), None)
            per_seed[name][seed] = {"at": at, "last": run[-1],
                                    "final": next((r for r in reversed(run) if r.get("acc_worst") is not None
                                                   or r.get("loss") is not None), run[-1])}
    first = next(iter(per_seed), None)
    out = []
    for name, seeds in per_seed.items():
        hit = {s: v["at"] for s, v in seeds.items() if v["at"] is not None}
        base = {s: v["at"] for s, v in per_seed[first].items() if v["at"] is not None}
        ratios = [hit[s]["energy_j"] / base[s]["energy_j"] for s in hit if s in base and base[s]["energy_j"] > 0]
        metrics = [k for k in ("acc_mean", "acc_worst", "loss") if any(v["final"].get(k) is not None for v in seeds.values())]
        out.append(AlgorithmOutcome(
            name, len(seeds), len(hit),
            mean_ci([r["round"] for r in hit.values()], confidence),
            mean_ci([r["energy_j"] for r in hit.values()], confidence),
            mean_ci([r["sim_time_s"] for r in hit.values()], confidence),
            mean_ci(ratios, confidence),
            {k: float(np.mean([v["final"][k] for v in seeds.values() if v["final"].get(k) is not None])) for k in metrics},
            float(np.mean([v["last"]["energy_j"] for v in seeds.values()]))))
    return out


def _fmt(pair: tuple[float, float], digits: int = 4) -> str:
    mean, half = pair
    if math.isnan(mean):
        return ""
    return f"{mean:.{digits}g}" + ("" if math.isnan(half) else f" ± {half:.2g}")


def table_rows(outcomes: list[AlgorithmOutcome]) -> tuple[list[str], list[list]]:
    """compare.csv: one row per algorithm."""
    finals = list(dict.fromkeys(k for o in outcomes for k in o.final))
    header = ["algorithm", "seeds", "seeds_reached", "rounds_mean", "rounds_ci95", "energy_j_mean", "energy_j_ci95",
              "time_s_mean", "time_s_ci95", "energy_ratio_to_first", "energy_ratio_ci95", "energy_total_j",
              *[f"final_{k}" for k in finals]]
    rows = [[o.algorithm, o.seeds, o.reached, *o.rounds, *o.energy_j, *o.time_s, *o.energy_ratio, o.energy_total_j,
             *[o.final.get(k) for k in finals]] for o in outcomes]
    return header, rows


def format_report(outcomes: list[AlgorithmOutcome], target: Target | None, window: int, confidence: float) -> str:
    lines = []
    if target is not None:
        lines += [f"target {target}; {definition(target, window)}; means over the seeds that reached it ± "
                  f"{confidence:.0%} t-interval; energy ratio to {outcomes[0].algorithm}: paired over seeds", ""]
    header = ["algorithm", "reached", "rounds", "energy J", "time s", "energy / first", "energy, whole run J",
              *[f"final {k}" for k in dict.fromkeys(k for o in outcomes for k in o.final)]]
    cells = [[o.algorithm, f"{o.reached}/{o.seeds}", _fmt(o.rounds, 3), _fmt(o.energy_j), _fmt(o.time_s),
              _fmt(o.energy_ratio, 3), f"{o.energy_total_j:.4g}", *[f"{v:.4f}" for v in o.final.values()]]
             for o in outcomes]
    if target is None:
        keep = [0, 6, *range(7, len(header))]
        header, cells = [header[i] for i in keep], [[c[i] for i in keep] for c in cells]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(header)]
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in cells]
    return "\n".join(lines) + "\n"


def plot(outcomes: list[AlgorithmOutcome], target: Target, path) -> None:
    """Energy, time and rounds to the target per algorithm, with the t-intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
    names = [o.algorithm for o in outcomes]
    for ax, (label, attr) in zip(axes, (("energy to target (J)", "energy_j"), ("simulated time to target (s)", "time_s"),
                                        ("rounds to target", "rounds"))):
        means = [getattr(o, attr)[0] for o in outcomes]
        errors = [0 if math.isnan(getattr(o, attr)[1]) else getattr(o, attr)[1] for o in outcomes]
        ax.bar(range(len(names)), [0 if math.isnan(m) else m for m in means], yerr=errors, capsize=4,
               color="tab:blue", alpha=0.8)
        ax.set_xticks(range(len(names)), [f"{n}\n({o.reached}/{o.seeds})" for n, o in zip(names, outcomes)],
                      fontsize=8)
        ax.set_ylabel(label)
    fig.suptitle(f"target {target}: mean ± 95 % CI over the seeds that reached it (reached/seeds under each name)",
                 fontsize=9)
    fig.tight_layout()
    try:
        with atomic_file(path) as tmp:  # then a rename: never a half PNG (kill -9)
            fig.savefig(tmp, dpi=110, format="png")
    finally:
        plt.close(fig)
