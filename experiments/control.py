"""The controllers' experiments of docs/control.md (issue 11).

    adaptive-tau: adaptive_tau against the offline sweep optimum of docs/energy-optimal-tau.md (DRDM,
                  MNIST-10k): at each channel point, its energy to target versus the energy at the
                  sweep's τ*, paired over the seeds, and what the sweep itself spent to find τ*.
    deadline-fit: deadline_fit versus static with the same deadline on scenarios/phones-in-a-cell.toml:
                  energy and simulated time to target, uploads cut.
    min-energy:   min_energy versus static on a deadline that does not bind static: same learning,
                  energy saved, every round within the deadline.
    compression:  update compression (QSGD b bits, top-k with error feedback) on MNIST-10k (DRDM, as in
                  docs/energy-optimal-tau.md) at two channel points: accuracy versus cumulative energy,
                  and the cheapest setting to reach the target.

Rounds-to-target everywhere: the project's one definition (edgefl.target: the first round at
which the metric and its centred 5-round moving average both reach the target). Means ± 95 % t-intervals
over the seeds. Each command prints a markdown table and writes one CSV line per run to docs/data/.

    .venv/bin/python experiments/control.py adaptive-tau --sweep results/energy-tau-sweep-10 --workers 2
    .venv/bin/python experiments/control.py deadline-fit --workers 2
    .venv/bin/python experiments/control.py min-energy --workers 2
    .venv/bin/python experiments/control.py compression --workers 2
    .venv/bin/python experiments/control.py adaptive-tau --from-data     # re-print from docs/data
"""

from __future__ import annotations

import argparse
import csv
import io
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
from edgefl.sweeps.jobs import run_keyed  # noqa: E402
from edgefl.target import (  # noqa: E402
    BOOKED_ENERGY,
    COMMITTED_ENERGY,
    Target,
    definition,
    energy_at,
    rounds_to_target,
)
from energy import CATEGORIES  # noqa: E402
from experiments.algorithm_keys import seedless  # noqa: E402  (a job's scenario but its seed: run together)

DATA = ROOT / "docs" / "data"
TAU_SCENARIO = ROOT / "scenarios" / "energy-tau-sweep.toml"
PHONES = ROOT / "scenarios" / "phones-in-a-cell.toml"
TAU_TARGET = Target("acc_worst", 0.70)
PHONES_TARGET = Target("acc_mean", 0.85)
# (SNR dB, bandwidth MHz): the corners, the edges and the middle of the Figure-4 grid
TAU_POINTS = ((0, 0.5), (5, 2), (10, 1), (15, 5), (20, 0.5), (20, 2), (25, 1), (30, 10))
ADAPTIVE = {"name": "adaptive_tau", "tau_min": 5, "tau_max": 30, "tau_step": 5, "tau_first": 10}


def load(path: Path, **sections) -> dict:
    with open(path, "rb") as handle:
        raw = tomllib.load(handle)
    raw["data"]["dir"] = str((path.parent / raw["data"]["dir"]).resolve())
    raw.pop("sweep", None)
    for section, values in sections.items():
        raw.setdefault(section, {}).update(values)
    return raw


def run_jobs(jobs: list[dict]) -> list[dict]:
    """The runs of ``jobs`` (a worker process), the seeds of one setting trained together
    (edgefl.seed_axis.run_seeds: each run's numbers are its solo run's): the per-round metrics the tables need."""
    import torch

    from edgefl.scenario import scenario_from_dict
    from edgefl.seed_axis import run_seeds

    torch.set_num_threads(1)
    started = time.perf_counter()
    results = run_seeds([scenario_from_dict(job["scenario"]) for job in jobs])
    wall_s = (time.perf_counter() - started) / len(jobs)  # each run's share
    keys = (
        "round",
        "sim_time_s",
        "energy_j",
        "committed_energy_j",
        *(f"{c}_energy_j" for c in CATEGORIES),
        "acc_mean",
        "acc_worst",
        "uploads_arrived",
        "uploads_missed",
        "tau",
    )
    return [
        {
            "rows": [{k: row.get(k) for k in keys} for row in result.metrics],
            "wall_s": wall_s,
            "control_state": result.summary.get("control_state"),
            "energy_by_category_j": result.summary[
                "energy_by_category_j"
            ],  # the whole run's ledger, every tail run out
        }
        for result in results
    ]


def computed(jobs: list[dict], args, name: str, desc: str | None = None) -> dict:
    """The jobs' results by key (cached in ``--cache``/``name``), the seeds of one setting trained together."""
    return run_keyed(
        run_jobs, jobs, together=seedless, workers=args.workers, cache=args.cache / name, desc=desc or name
    )


def outcome(rows: list[dict], target: Target) -> dict:
    """Energy (J; committed, and booked beside it: docs/model.md §8), simulated time (s) and rounds to target (None
    if never), uploads missed until then."""
    r = rounds_to_target([row["round"] for row in rows], [row[target.metric] for row in rows], target)
    if r is None:
        return {"rounds": None, "energy_j": None, "booked_energy_j": None, "time_s": None, "missed": None}
    at = next(row for row in rows if row["round"] == r)
    missed = sum(row["uploads_missed"] for row in rows if row["round"] <= r)
    return {
        "rounds": r,
        "energy_j": energy_at(at),  # committed: what reaching the target and stopping there costs
        "booked_energy_j": at["energy_j"],
        "time_s": at["sim_time_s"],
        "missed": missed,
    }


def mean_ci(values) -> tuple[float, float]:
    x = np.asarray([v for v in values if v is not None], dtype=float)
    if len(x) == 0:
        return math.nan, math.nan
    if len(x) < 2:
        return float(x.mean()), math.nan
    if np.ptp(x) == 0:
        return float(x[0]), 0.0
    return float(x.mean()), float(stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))


def fmt(mean: float, ci: float, digits: int = 3) -> str:
    return "n/a" if math.isnan(mean) else f"{mean:.{digits}g} ± {ci:.2g}"


def write_rows(path: Path, rows: list[dict]) -> None:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(path, buffer.getvalue())


def read_rows(path: Path) -> list[dict]:
    with open(path, newline="") as handle:
        return [{k: (None if v == "" else _number(v)) for k, v in row.items()} for row in csv.DictReader(handle)]


def _number(text: str):
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


# -- adaptive_tau versus the sweep ------------------------------------------------------------
def adaptive_tau(args) -> None:
    data = DATA / "control-adaptive-tau.csv"
    if not args.from_data:
        from edgefl.sweeps.analysis import optimal_tau, read_results, seed_outcomes
        from edgefl.sweeps.store import grid_keys

        keys = grid_keys(args.sweep)
        _, rows = read_results(args.sweep / "results.csv")
        sweep = optimal_tau(rows, keys, TAU_TARGET)
        seeds = sorted({int(r["seed"]) for r in rows})
        final = {}  # (snr, bw) -> energy the sweep spent: every (τ, seed) run to its last round
        last_round = max(int(r["round"]) for r in rows)
        for r in rows:
            if int(r["round"]) == last_round:
                key = (float(r["network.snr_db"]), float(r["network.bandwidth_mhz"]))
                final[key] = final.get(key, 0.0) + r["energy_j"]
        per_seed_star: dict[tuple, dict[int, float]] = {}
        stars = {}
        for c in sweep.per_channel:
            channel = {k: v for k, v in zip(sweep.channel_keys, c.channel)}
            point = (float(channel["network.snr_db"]), float(channel["network.bandwidth_mhz"]))
            stars[point] = c.tau_star
        for o in seed_outcomes(rows, keys, TAU_TARGET, 5):
            channel = dict(zip([k for k in keys if k != "algorithm.local_steps"], o.channel))
            point = (float(channel["network.snr_db"]), float(channel["network.bandwidth_mhz"]))
            if o.tau == stars.get(point):
                per_seed_star.setdefault(point, {})[o.seed] = o.energy_j
        jobs = []
        for snr, bw in TAU_POINTS:
            for seed in seeds:
                scenario = load(
                    TAU_SCENARIO,
                    run={"seed": seed},
                    network={"snr_db": snr, "bandwidth_mhz": bw},
                    control=dict(ADAPTIVE),
                )
                jobs.append(
                    {
                        "key": f"adaptive-{snr}-{bw}-s{seed}",
                        "label": f"adaptive_tau {snr} dB {bw} MHz seed={seed}",
                        "scenario": scenario,
                        "point": (snr, bw),
                        "seed": seed,
                    }
                )
        results = computed(jobs, args, "adaptive-tau", "adaptive_tau")
        out = []
        for job in jobs:
            res = results[job["key"]]
            point = (float(job["point"][0]), float(job["point"][1]))
            got = outcome(res["rows"], TAU_TARGET)
            state = res["control_state"] or {}
            out.append(
                {
                    "snr_db": point[0],
                    "bandwidth_mhz": point[1],
                    "seed": job["seed"],
                    "rounds": got["rounds"],
                    "energy_j": got["energy_j"],
                    "beta": state.get("beta"),
                    "tau_chosen": state.get("tau_star"),
                    "sweep_tau_star": stars.get(point),
                    "sweep_energy_at_tau_star_j": per_seed_star.get(point, {}).get(job["seed"]),
                    "sweep_spent_j": final.get(point),
                    "wall_s": round(res["wall_s"], 2),
                }
            )
        write_rows(data, out)
    rows = read_rows(data)
    print(f"adaptive_tau versus the offline sweep; target {TAU_TARGET}; {definition(TAU_TARGET, 5)}\n")
    print(
        "| SNR | bandwidth | sweep τ* | τ chosen (per seed) | E to target, adaptive (J) | E at sweep τ* (J) | "
        "ratio adaptive / τ* (paired) | the sweep spent (J) |"
    )
    print("|---:|---:|---:|---|---|---|---|---:|")
    within = 0
    points = sorted({(r["snr_db"], r["bandwidth_mhz"]) for r in rows})
    for point in points:
        group = [r for r in rows if (r["snr_db"], r["bandwidth_mhz"]) == point]
        ratios = [
            r["energy_j"] / r["sweep_energy_at_tau_star_j"]
            for r in group
            if r["energy_j"] is not None and r["sweep_energy_at_tau_star_j"]
        ]
        ratio, ratio_ci = mean_ci(ratios)
        within += ratio <= 1.15
        chosen = sorted({r["tau_chosen"] for r in group if r["tau_chosen"] is not None})
        missed = sum(r["energy_j"] is None for r in group)
        print(
            f"| {point[0]:g} dB | {point[1]:g} MHz | {group[0]['sweep_tau_star']} | {', '.join(map(str, chosen))} | "
            f"{fmt(*mean_ci([r['energy_j'] for r in group]))}{f' ({missed} never)' if missed else ''} | "
            f"{fmt(*mean_ci([r['sweep_energy_at_tau_star_j'] for r in group]))} | {fmt(ratio, ratio_ci)} | "
            f"{group[0]['sweep_spent_j']:.4g} |"
        )
    print(
        f"\nwithin 15 % of the sweep's τ* (mean paired ratio <= 1.15): {within} of {len(points)} points; "
        f"{len({r['seed'] for r in rows})} seeds; wall {sum(r['wall_s'] for r in rows):.0f} s of runs"
    )


# -- deadline_fit and min_energy versus static ------------------------------------------------------
def versus_static(
    args, name: str, scenario_path: Path, target: Target, controller: dict, overrides: dict, seeds: list[int]
) -> None:
    data = DATA / f"control-{name}.csv"
    if not args.from_data:
        jobs = []
        for control in ("static", controller["name"]):
            for seed in seeds:
                sections = {k: dict(v) for k, v in overrides.items()}
                sections.setdefault("run", {})["seed"] = seed
                sections["control"] = {"name": "static"} if control == "static" else dict(controller)
                jobs.append(
                    {
                        "key": f"{name}-{control}-s{seed}",
                        "label": f"{control} seed={seed}",
                        "scenario": load(scenario_path, **sections),
                        "control": control,
                        "seed": seed,
                    }
                )
        results = computed(jobs, args, name)
        out = []
        for job in jobs:
            rows = results[job["key"]]["rows"]
            got = outcome(rows, target)
            last = rows[-1]
            out.append(
                {
                    "control": job["control"],
                    "seed": job["seed"],
                    "rounds": got["rounds"],
                    "energy_to_target_j": got["energy_j"],  # committed
                    "booked_energy_to_target_j": got["booked_energy_j"],
                    "time_to_target_s": got["time_s"],
                    "missed_to_target": got["missed"],
                    "energy_j": energy_at(last),  # the whole run's: the last round's committed, every tail run out
                    "time_s": last["sim_time_s"],
                    **{f"{c}_j": results[job["key"]]["energy_by_category_j"][c] for c in CATEGORIES},
                    "uploads_arrived": sum(r["uploads_arrived"] for r in rows),
                    "uploads_missed": sum(r["uploads_missed"] for r in rows),
                    "final_acc_mean": next((r["acc_mean"] for r in reversed(rows) if r["acc_mean"] is not None), None),
                    "final_acc_worst": next(
                        (r["acc_worst"] for r in reversed(rows) if r["acc_worst"] is not None), None
                    ),
                    "wall_s": round(results[job["key"]]["wall_s"], 2),
                }
            )
        write_rows(data, out)
    rows = read_rows(data)
    print(f"{name}; target {target}; {definition(target, 5)}; {len({r['seed'] for r in rows})} seeds\n")
    booked = "booked_energy_to_target_j" in rows[0]  # runs since issue 28's committed energy (docs/model.md §8)
    print(
        "| controller | rounds to target | energy to target (J"
        + ("; committed) | booked energy to target (J)" if booked else ")")
        + " | time to target (s) | uploads cut or lost (whole run) | uploads arrived | energy, whole run (J) | of which "
        + (
            "compute / uplink / downlink / idle / promotion / tail (J)"
            if booked
            else "compute / uplink / downlink / idle (J; tails with their message)"
        )
        + " | final acc_mean | final acc_worst |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|" + ("---|" if booked else ""))
    for control in dict.fromkeys(r["control"] for r in rows):
        group = [r for r in rows if r["control"] == control]
        never = sum(r["rounds"] is None for r in group)
        print(
            f"| {control} | {fmt(*mean_ci([r['rounds'] for r in group]))}{f' ({never} never)' if never else ''} | "
            f"{fmt(*mean_ci([r['energy_to_target_j'] for r in group]))} | "
            + (f"{fmt(*mean_ci([r['booked_energy_to_target_j'] for r in group]))} | " if booked else "")
            + f"{fmt(*mean_ci([r['time_to_target_s'] for r in group]))} | "
            f"{fmt(*mean_ci([r['uploads_missed'] for r in group]))} | {fmt(*mean_ci([r['uploads_arrived'] for r in group]))} | "
            f"{fmt(*mean_ci([r['energy_j'] for r in group]))} | "
            f"{split(group)} | "
            f"{fmt(*mean_ci([r['final_acc_mean'] for r in group]))} | "
            f"{fmt(*mean_ci([r['final_acc_worst'] for r in group]))} |"
        )
    for control in dict.fromkeys(r["control"] for r in rows if r["control"] != "static"):
        print(
            f"\n{control} / static, paired over seeds: energy to target {paired(rows, control, 'energy_to_target_j')}"
            + (f" (booked: {paired(rows, control, 'booked_energy_to_target_j')})" if booked else "")
            + f", time to target {paired(rows, control, 'time_to_target_s')}, energy of the whole run "
            f"{paired(rows, control, 'energy_j')}"
        )


def split(group: list[dict]) -> str:
    """Mean energy by category over a group of runs: compute / uplink / downlink / idle (J), and promotion / tail
    where the runs have them (since issue 28; before, tails were charged with their message)."""
    return " / ".join(f"{np.mean([r[f'{c}_j'] for r in group]):.4g}" for c in CATEGORIES if f"{c}_j" in group[0])


def paired(rows: list[dict], control: str, column: str) -> str:
    """Mean ± CI over seeds of (controller / static) for ``column``, pairing each seed's runs."""
    base = {r["seed"]: r[column] for r in rows if r["control"] == "static"}
    ratios = [
        r[column] / base[r["seed"]]
        for r in rows
        if r["control"] == control and r[column] is not None and base.get(r["seed"])
    ]
    return fmt(*mean_ci(ratios))


# -- update compression -------------------------------------------------------------------------------
COMPRESSION_SETTINGS = {  # label -> [compression]
    "32 bit (none)": {"name": "none"},
    "qsgd 8 bit": {"name": "qsgd", "bits": 8},
    "qsgd 4 bit": {"name": "qsgd", "bits": 4},
    "qsgd 2 bit": {"name": "qsgd", "bits": 2},
    "top-10 %": {"name": "topk", "fraction": 0.1},
    "top-1 %": {"name": "topk", "fraction": 0.01},
}
COMPRESSION_POINTS = ((5, 0.5), (25, 5))  # transmission-dominated, compute-dominated (dB, MHz)
MNIST_LINEAR_DIM = 28 * 28 * 10 + 10  # d of the linear model on MNIST (784 -> 10)


def upload_bits(config: dict, d: int = MNIST_LINEAR_DIM, vectors: int = 2) -> float:
    """Bits of one DRDM upload (w_i^+ and the snapshot, no header) under a [compression] table."""
    from edgefl.compression import build_compressor
    from edgefl.scenario import CompressionSection

    compressor = build_compressor(CompressionSection(**config), 1, 0, 32)
    return vectors * (compressor.bits(d) if compressor is not None else 32.0 * d)


def compression(args) -> None:
    data, curves = DATA / "compression-runs.csv", DATA / "compression-curves.csv"
    if not args.from_data:
        jobs = [
            {
                "key": f"compression-{label}-{snr}-{bw}-s{seed}".replace(" ", "_").replace("%", "pct"),
                "label": f"{label} {snr} dB {bw} MHz seed={seed}",
                "setting": label,
                "point": (snr, bw),
                "seed": seed,
                "scenario": load(
                    TAU_SCENARIO,
                    run={"seed": seed},
                    network={"snr_db": snr, "bandwidth_mhz": bw},
                    compression=dict(config),
                ),
            }
            for label, config in COMPRESSION_SETTINGS.items()
            for snr, bw in COMPRESSION_POINTS
            for seed in range(args.seeds)
        ]
        results = computed(jobs, args, "compression")
        out, curve = [], []
        for job in jobs:
            rows = results[job["key"]]["rows"]
            got = outcome(rows, TAU_TARGET)
            at = next((r for r in rows if r["round"] == got["rounds"]), None)
            base = {
                "setting": job["setting"],
                "snr_db": job["point"][0],
                "bandwidth_mhz": job["point"][1],
                "seed": job["seed"],
            }
            out.append(
                {
                    **base,
                    "rounds": got["rounds"],
                    "energy_j": None if at is None else energy_at(at),  # committed (docs/model.md §8)
                    "booked_energy_j": None if at is None else at["energy_j"],
                    "final_acc_worst": next(
                        (r["acc_worst"] for r in reversed(rows) if r["acc_worst"] is not None), None
                    ),
                    "wall_s": round(results[job["key"]]["wall_s"], 2),
                }
            )
            curve += [
                {
                    **base,
                    "round": r["round"],
                    "energy_j": r["energy_j"],
                    "committed_energy_j": r["committed_energy_j"],
                    "acc_worst": r["acc_worst"],
                }
                for r in rows
            ]
        write_rows(data, out)
        write_rows(curves, curve)
    rows = read_rows(data)
    booked = "booked_energy_j" in rows[0]  # docs/data written before issue 28 have the booked energy only
    print(
        f"update compression, DRDM on MNIST-10k (tau = 10), target {TAU_TARGET}; {definition(TAU_TARGET, 5)}; "
        f"{len({r['seed'] for r in rows})} seeds; energy to target: the "
        f"{COMMITTED_ENERGY if booked else BOOKED_ENERGY}{f'; beside it the {BOOKED_ENERGY}' if booked else ''}\n"
    )
    columns = ("energy_j", "booked_energy_j") if booked else ("energy_j",)
    names = {"energy_j": "committed" if booked else "booked", "booked_energy_j": "booked"}
    for point in COMPRESSION_POINTS:
        group = [r for r in rows if (r["snr_db"], r["bandwidth_mhz"]) == point]
        print(f"{point[0]} dB, {point[1]} MHz per device:\n")
        print(
            "| setting | bits per upload | rounds to target | "
            + "".join(f"energy to target (J), {names[c]} | " for c in columns)
            + "".join(f"ratio to 32 bit (paired), {names[c]} | " for c in columns)
            + "final acc_worst |"
        )
        print("|---|---|---|" + "---|" * (2 * len(columns)) + "---|")
        best = {c: None for c in columns}
        for label in COMPRESSION_SETTINGS:
            runs = [r for r in group if r["setting"] == label]
            never = sum(r["rounds"] is None for r in runs)
            energy, ratio = {}, {}
            for c in columns:
                base = {r["seed"]: r[c] for r in group if r["setting"] == "32 bit (none)"}
                energy[c] = mean_ci([r[c] for r in runs])
                ratio[c] = mean_ci([r[c] / base[r["seed"]] for r in runs if r[c] and base.get(r["seed"])])
                if not never and (best[c] is None or energy[c][0] < best[c][1]):
                    best[c] = (label, energy[c][0])
            print(
                f"| {label} | {upload_bits(COMPRESSION_SETTINGS[label]):,.0f} | "
                f"{fmt(*mean_ci([r['rounds'] for r in runs]))}{f' ({never} never)' if never else ''} | "
                + "".join(f"{fmt(*energy[c])} | " for c in columns)
                + "".join(f"{fmt(*ratio[c])} | " for c in columns)
                + f"{fmt(*mean_ci([r['final_acc_worst'] for r in runs]))} |"
            )
        cheapest = "; ".join(f"{names[c]}: {best[c][0] if best[c] else 'none'}" for c in columns)
        print(f"\ncheapest to reach the target with every seed: {cheapest}\n")
    plot_compression(read_rows(curves), ROOT / "docs" / "figures" / "compression-accuracy-energy.png")


def plot_compression(curve: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(COMPRESSION_POINTS), figsize=(11, 4))
    for ax, point in zip(axes, COMPRESSION_POINTS):
        for label in COMPRESSION_SETTINGS:
            runs = [r for r in curve if r["setting"] == label and (r["snr_db"], r["bandwidth_mhz"]) == point]
            rounds = sorted({r["round"] for r in runs})
            energy = [np.mean([energy_at(r) for r in runs if r["round"] == k]) for k in rounds]
            acc = [np.mean([r["acc_worst"] for r in runs if r["round"] == k]) for k in rounds]
            ax.plot(energy, acc, label=label)
        ax.axhline(TAU_TARGET.value, color="grey", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.set_xlabel("committed energy, all clients (J): booked + what runs on")
        ax.set_ylabel("worst-client accuracy (mean over seeds)")
        ax.set_title(f"{point[0]} dB, {point[1]} MHz per device", fontsize=10)
    axes[0].legend(fontsize=8)
    fig.suptitle("DRDM on MNIST-10k, tau = 10: accuracy against energy per upload compression", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("experiment", choices=["adaptive-tau", "deadline-fit", "min-energy", "compression"])
    parser.add_argument(
        "--sweep",
        type=Path,
        default=ROOT / "results" / "energy-tau-sweep-10",
        help="adaptive-tau: the folder of `edgefl sweep scenarios/energy-tau-sweep.toml`",
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--cache", type=Path, default=ROOT / "results" / "control")
    parser.add_argument("--from-data", action="store_true", help="re-print from docs/data, no runs")
    args = parser.parse_args()
    if args.experiment == "adaptive-tau":
        adaptive_tau(args)
    elif args.experiment == "compression":
        compression(args)
    elif args.experiment == "deadline-fit":
        versus_static(
            args, "deadline-fit", PHONES, PHONES_TARGET, {"name": "deadline_fit"}, {}, list(range(args.seeds))
        )
        print()
        # With phones-in-a-cell's 0.26 s promotions, the first round (every radio idle) fits no device into the
        # 0.4 s deadline, so no radio ever connects (docs/control.md). The same comparison without promotions
        # shows what its plan does when it is not infeasible.
        versus_static(
            args,
            "deadline-fit-no-promotion",
            PHONES,
            PHONES_TARGET,
            {"name": "deadline_fit"},
            {"network": {"access_latency_s": 0.0}},
            list(range(args.seeds)),
        )
    else:  # FDMA, a link budget, no fading: the deadline (2 s) does not bind static (its phases take < 1 s)
        versus_static(
            args,
            "min-energy",
            PHONES,
            PHONES_TARGET,
            {"name": "min_energy"},
            MIN_ENERGY_NETWORK,
            list(range(args.seeds)),
        )
        print()
        no_tails = {**MIN_ENERGY_NETWORK, "devices": {**MIN_ENERGY_NETWORK["devices"], "tail_power_w": 0.0}}
        versus_static(
            args,
            "min-energy-no-tails",
            PHONES,
            PHONES_TARGET,
            {"name": "min_energy"},
            no_tails,
            list(range(args.seeds)),
        )


# phones-in-a-cell without what a mean-channel plan cannot foresee (fading, stragglers, availability,
# mobility, batteries) and with a deadline that static meets: min_energy then changes only f, p, b.
MIN_ENERGY_NETWORK = {
    "network": {"fading": "none", "rate": "shannon", "max_retransmissions": 0, "deadline_s": 2.0},
    "devices": {"slowdown": "none", "availability": "always", "speed_mps": 0.0},
}


if __name__ == "__main__":
    main()
