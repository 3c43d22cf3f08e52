"""What each effect of the realistic radio and device model does: docs/realistic-network.md.

The baseline is scenarios/phones-in-a-cell.toml (FedAvg) with every effect on; each other
configuration switches ONE effect off, the rest as in the baseline. For every configuration,
local steps tau in TAUS and SEEDS seeds: energy, simulated time and rounds to a target on the mean
per-client accuracy (the project's one rounds-to-target definition, edgefl.sweep.target), mean ±
95 % t-interval over the seeds, and the energy-optimal tau* among the tau every seed reaches.

    .venv/bin/python experiments/realistic_network.py --workers 2          # ~5 minutes on 2 cores
    .venv/bin/python experiments/realistic_network.py --workers 2 --cache results/realistic-network
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import tomllib
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from edgefl.results import atomic_write_text  # noqa: E402
from edgefl.sweep.jobs import run_keyed  # noqa: E402
from edgefl.sweep.target import Target, definition, rounds_to_target  # noqa: E402

SCENARIO = ROOT / "scenarios" / "phones-in-a-cell.toml"
PAGE = ROOT / "docs" / "realistic-network.md"
FIGURE = ROOT / "docs" / "figures" / "realistic-network-energy.png"
TAUS = (2, 5, 10, 20)
SEEDS = (0, 1, 2, 3, 4)
TARGET = Target("acc_mean", 0.85)


def _no_batteries(raw: dict) -> None:
    for table in [raw["devices"], *raw["devices"].get("classes", [])]:
        for key in ("battery_j", "battery_reserve_j", "harvest_w", "harvest"):
            table.pop(key, None)


# (name, what is switched off, how); the baseline first.
CONFIGURATIONS = [
    ("baseline", "nothing: every effect of phones-in-a-cell on", lambda raw: None),
    ("shannon", "MCS rate adaptation (Shannon rates, one Rayleigh draw per attempt)",
     lambda raw: raw["network"].update(rate="shannon")),
    ("no-arq", "retransmissions (max_retransmissions = 0)", lambda raw: raw["network"].update(max_retransmissions=0)),
    ("no-access-latency", "access latency (0 s)", lambda raw: raw["network"].update(access_latency_s=0.0)),
    ("no-tail", "radio tails (tail_power_w = 0)", lambda raw: raw["devices"].update(tail_power_w=0.0)),
    ("no-battery", "batteries and harvesting (mains power)", _no_batteries),
    ("always-available", "Markov availability (always online)", lambda raw: raw["devices"].update(availability="always")),
    ("no-stragglers", "stragglers (slowdown = none)", lambda raw: raw["devices"].update(slowdown="none")),
    ("static", "mobility (speed 0 m/s)", lambda raw: raw["devices"].update(speed_mps=0.0)),
    ("no-deadline", "the deadline", lambda raw: raw["network"].pop("deadline_s", None)),
]


def scenario_dict(name: str, tau: int, seed: int) -> dict:
    with open(SCENARIO, "rb") as handle:
        raw = tomllib.load(handle)
    raw["data"]["dir"] = str((SCENARIO.parent / raw["data"]["dir"]).resolve())
    {config: switch_off for config, _, switch_off in CONFIGURATIONS}[name](raw)
    raw["algorithm"]["local_steps"] = tau
    raw["run"]["seed"] = seed
    return raw


def run_job(job: dict) -> dict:
    """One run (a worker process): the per-round metrics it needs."""
    import torch

    from edgefl.runner import Simulation
    from edgefl.scenario import scenario_from_dict

    torch.set_num_threads(1)
    started = time.perf_counter()
    result = Simulation(scenario_from_dict(scenario_dict(job["config"], job["tau"], job["seed"]))).run(progress=False)
    rows = [{k: row.get(k) for k in ("round", "sim_time_s", "energy_j", "acc_mean")} for row in result.metrics]
    return {"rows": rows, "wall_s": time.perf_counter() - started, "stopped": result.summary.get("stopped")}


def outcome(rows: list[dict]) -> tuple[float, float, int] | None:
    """(energy J, simulated s, rounds) at the round the target is reached, or None."""
    r = rounds_to_target([row["round"] for row in rows], [row["acc_mean"] for row in rows], TARGET)
    if r is None:
        return None
    row = next(row for row in rows if row["round"] == r)
    return row["energy_j"], row["sim_time_s"], r


def mean_ci(values: list[float]) -> tuple[float, float]:
    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        return float(values.mean()), math.nan
    half = stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / math.sqrt(len(values))
    return float(values.mean()), float(half)


def summarise(results: dict) -> dict:
    """Per (configuration, tau): mean ± CI of energy, time, rounds over the seeds that reached the
    target, how many did, and tau* per configuration."""
    table = {}
    for name, _, _ in CONFIGURATIONS:
        for tau in TAUS:
            reached = [o for seed in SEEDS if (o := outcome(results[f"{name}-t{tau}-s{seed}"]["rows"])) is not None]
            cell = {"reached": len(reached)}
            if reached:
                for k, label in enumerate(("energy", "time", "rounds")):
                    cell[label] = mean_ci([o[k] for o in reached])
            table[(name, tau)] = cell
    optimum = {}
    for name, _, _ in CONFIGURATIONS:
        eligible = [(table[(name, tau)]["energy"][0], tau) for tau in TAUS if table[(name, tau)]["reached"] == len(SEEDS)]
        optimum[name] = min(eligible)[1] if eligible else None
    return {"table": table, "optimum": optimum}


def fmt(cell: dict, key: str, digits: int) -> str:
    if key not in cell:
        return "never"
    mean, half = cell[key]
    text = f"{mean:.{digits}f} ± {half:.{digits}f}" if math.isfinite(half) else f"{mean:.{digits}f}"
    return text if cell["reached"] == len(SEEDS) else f"{text} ({cell['reached']}/{len(SEEDS)})"


def plot(summary: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, _, _ in CONFIGURATIONS:
        points = [(tau, summary["table"][(name, tau)]["energy"][0]) for tau in TAUS
                  if "energy" in summary["table"][(name, tau)]]
        if points:
            ax.plot(*zip(*points), marker="o", lw=2.5 if name == "baseline" else 1.2, label=name)
    ax.set_xlabel("local steps τ")
    ax.set_ylabel(f"energy to {TARGET} (J, all clients)")
    ax.set_xscale("log")
    ax.set_yscale("log")  # without radio tails the energy is ~40x lower
    ax.set_xticks(TAUS, [str(t) for t in TAUS])
    ax.minorticks_off()
    ax.legend(fontsize=7, ncol=2)
    ax.set_title("phones-in-a-cell: each effect switched off in turn")
    fig.tight_layout()
    FIGURE.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(FIGURE, dpi=110)
    plt.close(fig)


def render(summary: dict, results: dict, wall_s: float, workers: int) -> str:
    table, optimum = summary["table"], summary["optimum"]
    stopped = sorted({res["stopped"].split(":")[0] for res in results.values() if res.get("stopped")})
    lines = [
        "# The realistic radio and device model: what each effect does",
        "",
        "Baseline: `scenarios/phones-in-a-cell.toml` (FedAvg; 50 phones in a 500 m cell, two device",
        "classes with batteries, Markov availability, walking users, MCS + Rayleigh + ARQ, access",
        "latency, radio tails, stragglers, a 0.4 s deadline per phase). Each other row switches ONE",
        "effect off, the rest as in the baseline (docs/model.md has every equation).",
        "",
        "```",
        f".venv/bin/python experiments/realistic_network.py --workers {workers}",
        "```",
        "",
        f"τ ∈ {{{', '.join(map(str, TAUS))}}}, seeds {SEEDS[0]}..{SEEDS[-1]}, 60 rounds, evaluation every 2 rounds. "
        f"{len(results)} runs, {wall_s / 60:.1f} min of wall time on {workers} workers (2-core machine).",
        "",
        "**Definitions.**",
        f"- {definition(TARGET, 5)} (`edgefl.sweep.target.rounds_to_target`; only evaluated rounds count).",
        "- Energy and time to target: the cumulative energy of all clients and the simulated time at that round.",
        "- Cells: mean ± 95 % t-interval over the seeds that reached the target; `(k/5)` when only k did;",
        "  `never` when none did. τ* is the τ with the least mean energy among those every seed reaches.",
        "",
        f"![energy to target versus τ](figures/{FIGURE.name})",
        "",
        "| configuration (switched off) | τ | energy to target (J) | time to target (s) | rounds | τ* |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, what, _ in CONFIGURATIONS:
        for tau in TAUS:
            cell = table[(name, tau)]
            star = (str(optimum[name]) if optimum[name] is not None else "none") if tau == TAUS[0] else ""
            label = f"**{name}** ({what})" if tau == TAUS[0] else ""
            lines.append(f"| {label} | {tau} | {fmt(cell, 'energy', 1)} | {fmt(cell, 'time', 2)} | "
                         f"{fmt(cell, 'rounds', 1)} | {star} |")
    if stopped:
        lines += ["", "Runs that stopped early because no device could take part any more: " + ", ".join(stopped) + "."]
    lines += ["", "## What each effect does", "", "WHY", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cache", type=Path, default=ROOT / "results" / "realistic-network",
                        help="one JSON per run; a rerun reads them back")
    parser.add_argument("--why", type=Path, default=Path(__file__).with_name("realistic_network_why.md"),
                        help="a file with the page's explanation section (replaces the WHY placeholder)")
    args = parser.parse_args()
    jobs = [{"key": f"{name}-t{tau}-s{seed}", "label": f"{name} tau={tau} seed={seed}", "config": name, "tau": tau,
             "seed": seed} for name, _, _ in CONFIGURATIONS for tau in TAUS for seed in SEEDS]
    started = time.perf_counter()
    results = run_keyed(run_job, jobs, workers=args.workers, cache=args.cache, desc="realistic network")
    wall_s = sum(res["wall_s"] for res in results.values()) / max(1, args.workers)
    summary = summarise(results)
    plot(summary)
    page = render(summary, results, wall_s, args.workers)
    if args.why is not None:
        page = page.replace("WHY", args.why.read_text().strip())
    atomic_write_text(PAGE, page + "\n")
    print(f"wrote {PAGE} and {FIGURE} in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
