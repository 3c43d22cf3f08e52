"""Every registered FL algorithm on one wireless network; write docs/algorithms-on-one-network.md.

    .venv/bin/python experiments/algorithms_on_one_network.py --seeds 0 1 2   # 45 runs, 1-2 min on 2 cores

Scenario: scenarios/algorithms-on-one-network.toml (MNIST-10k, 30 clients in a 400 m cell,
Dirichlet(0.5), softmax regression, 10 clients per round, tau = 10, shared 1 MHz FDMA uplink,
Rayleigh fading, MCS rates, 800-bit headers), co-simulated with the SimPy engine: every message of every
algorithm is charged (time and energy per client). Each algorithm runs with its defaults plus the
few keys below (not tuned per algorithm); every algorithm in algorithms.REGISTRY is included, and
the page lists the ones this script knows about but that were not registered at run time.
Options: --jobs N (default 2), --seeds 0 1 ..., --rounds R, --cache DIR, --quick, --from-data (runs
nothing: re-renders the page from docs/data/algorithms-on-one-network.json, the numbers the page shows,
written by the last full run). The page's words and tables are
experiments/templates/algorithms-on-one-network.md.j2.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from edgefl.results import atomic_write_text  # noqa: E402
from edgefl.sweeps.jobs import run_keyed  # noqa: E402
from edgefl.target import BOOKED_ENERGY, COMMITTED_ENERGY, Target, rounds_to_target  # noqa: E402
from experiments import pages, provenance  # noqa: E402

SCENARIO = REPO / "scenarios" / "algorithms-on-one-network.toml"
DOC = REPO / "docs" / "algorithms-on-one-network.md"
SUMMARY = REPO / "docs" / "data" / "algorithms-on-one-network.json"  # what the page shows: it is rendered from it
EXPECTED = [
    "fedavg",
    "fedprox",
    "scaffold",
    "feddyn",
    "drdm",
    "drfa",
    "scaff_pd",
    "partial_avg",
    "periodic_avg",
    "fedalign",
    "fedda",
    "fedmid",
    "fast_fedda",
    "c_fedda",
    "mc_fedda",
]
# Algorithm-specific keys for this scenario (everything else: the algorithm's defaults).
EXTRA = {
    "partial_avg": {"momentum": 0.0},
    "periodic_avg": {"momentum": 0.0},
    # c = 1/3: 3 of the 10 priority and 7 of the 20 other clients per round, as the others' m = 10
    "fedalign": {"priority_clients": list(range(10)), "epsilon": 0.2, "warmup_rounds": 6, "participation": 1 / 3},
    "fedda": {"lam": 1e-4},
    "fedmid": {"lam": 1e-4},
    "fast_fedda": {"lam": 1e-4, "mu": 0.001, "gamma": 25.0},
    "c_fedda": {"lam": 1e-4, "mu": 0.001, "gamma": 2.5, "cprox_mode": "reference"},
    "mc_fedda": {
        "stage_lambdas": [4e-4, 2e-4, 1e-4],
        "stage_rounds": [15, 15],
        "mu": 0.001,
        "gamma": 2.5,
        "cprox_mode": "reference",
    },
}
FAMILY = {
    "partial_avg": ":",
    "periodic_avg": ":",
    "fedalign": "-.",
    "fedda": "--",
    "fedmid": "--",
    "fast_fedda": "--",
    "c_fedda": "--",
    "mc_fedda": "--",
}


def run_jobs(jobs: list[dict]) -> list[dict]:
    """The runs of ``jobs`` (a worker process), the seeds of one algorithm trained together
    (edgefl.seed_axis.run_seeds: each run's numbers are its solo run's)."""
    import torch

    torch.set_num_threads(1)
    from edgefl.scenario import load_scenario
    from edgefl.seed_axis import run_seeds

    started = time.time()
    results = run_seeds([load_scenario(SCENARIO, job["overrides"]) for job in jobs])
    wall_s = (time.time() - started) / len(jobs)  # each run's share
    return [record(job, result, wall_s) for job, result in zip(jobs, results)]


def record(job: dict, result, wall_s: float) -> dict:
    """What the page keeps of a run."""
    rows = [
        {
            k: r.get(k)
            for k in (
                "round",
                "sim_time_s",
                "energy_j",
                "committed_energy_j",
                "compute_energy_j",
                "uplink_energy_j",
                "downlink_energy_j",
                "idle_energy_j",
                "acc_mean",
                "acc_worst",
                "loss",
            )
        }
        for r in result.metrics
    ]
    events = result.events
    return {
        "key": job["key"],
        "rows": rows,
        "wall_s": wall_s,
        "uploads": sum(1 for e in events if e.kind == "upload"),
        "downloads": sum(1 for e in events if e.kind == "download"),
        "upload_bits": float(sum(e.bits for e in events if e.kind == "upload")),
        "download_bits": float(sum(e.bits for e in events if e.kind == "download")),
    }


def overrides(name, seed, rounds):
    out = [f"algorithm.name={name}", f"run.seed={seed}", f"run.rounds={rounds}"]
    for k, v in EXTRA.get(name, {}).items():
        out.append(f"algorithm.{name}.{k}={json.dumps(v)}")  # an algorithm's own keys sit in its own table
    return out


def main(argv=None):
    import algorithms

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seeds", type=int, nargs="*", default=[0])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--from-data", action="store_true", help=f"run nothing: re-render the page from {SUMMARY}")
    args = parser.parse_args(argv)
    doc, summary_path, fig_dir = DOC, SUMMARY, REPO / "docs" / "figures"
    if args.quick:
        args.rounds, args.seeds = 4, [0]
        doc = Path("/tmp/edgefl-quick/algorithms-on-one-network.md")
        summary_path, fig_dir = doc.parent / SUMMARY.name, doc.parent
    if args.from_data:
        atomic_write_text(doc, render(json.loads(summary_path.read_text())))
        print(f"wrote {doc} from {summary_path}")
        return 0
    fig_dir.mkdir(parents=True, exist_ok=True)
    names = algorithms.names()
    missing = [n for n in EXPECTED if n not in names]
    jobs = []
    for name in names:
        for seed in args.seeds:
            ov = overrides(name, seed, args.rounds)
            key = f"{name}-{seed}-" + hashlib.sha1(json.dumps(ov).encode() + SCENARIO.read_bytes()).hexdigest()[:12]
            jobs.append({"name": name, "seed": seed, "overrides": ov, "key": key})
    started = time.time()
    results = run_keyed(
        run_jobs,
        jobs,
        together=lambda job: job["name"],  # the seeds of an algorithm, trained together
        workers=args.jobs,
        cache=args.cache,
        describe=lambda job, res: f"  {res['key']}: {res['wall_s']:.0f} s",
    )
    total = time.time() - started
    plot(results, jobs, names, fig_dir / "network-accuracy-energy.png")
    summary = {
        "produced": provenance.current(command(args), total),
        "figures": "." if args.quick else "figures",
        **summarise(results, jobs, names, missing, args),
    }
    pages.store_and_render(summary, summary_path, doc, render, total)
    return 0


def curve(results, jobs, name, key):
    runs = [results[j["key"]]["rows"] for j in jobs if j["name"] == name]
    return np.array([[np.nan if r[key] is None else r[key] for r in run] for run in runs], float)


def energy_to_target(acc, energy, target):
    """Cumulative energy at the rounds-to-target of the accuracy curve (round 1 first; NaN where
    not evaluated), by the one definition (edgefl.target.rounds_to_target: the first evaluation
    at which the accuracy and its centred 5-evaluation moving average are both >= target); NaN if never."""
    reached = rounds_to_target(range(1, len(acc) + 1), acc, Target("acc_mean", target))
    return float("nan") if reached is None else float(energy[reached - 1])


def plot(results, jobs, names, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
    cmap = plt.get_cmap("tab20")
    for i, name in enumerate(names):
        acc = np.nanmean(curve(results, jobs, name, "acc_mean"), axis=0)
        energy = np.nanmean(curve(results, jobs, name, "committed_energy_j"), axis=0)
        t = np.nanmean(curve(results, jobs, name, "sim_time_s"), axis=0)
        ok = ~np.isnan(acc)
        style = dict(color=cmap(i % 20), ls=FAMILY.get(name, "-"), lw=1.4, label=name)
        axes[0].plot(energy[ok], acc[ok], **style)
        axes[1].plot(t[ok], acc[ok], **style)
    axes[0].set_xlabel("committed energy of all clients (J): booked + what runs on")
    axes[1].set_xlabel("simulated time (s)")
    for ax in axes:
        ax.set_ylabel("test accuracy (mean over 30 clients)")
        ax.grid(alpha=0.3)
        ax.set_xscale("log")
    axes[1].legend(fontsize=7, ncol=2, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def command(args) -> str:
    text = ".venv/bin/python experiments/algorithms_on_one_network.py"
    if args.seeds != [0]:
        text += " --seeds " + " ".join(map(str, args.seeds))
    if args.rounds != 60:
        text += f" --rounds {args.rounds}"
    return text


TARGET = 0.80  # accuracy (mean over clients) of the energy-to-target column


def summarise(results, jobs, names, missing, args) -> dict:
    """What the page shows, from the runs: per algorithm (best final mean accuracy first) the seed-mean
    final accuracies, energy, time, uploads and energy to target, and the keys each algorithm ran with."""
    rows = []
    for name in names:
        acc = np.nanmean(curve(results, jobs, name, "acc_mean"), axis=0)
        worst = np.nanmean(curve(results, jobs, name, "acc_worst"), axis=0)
        energy = np.nanmean(curve(results, jobs, name, "energy_j"), axis=0)
        committed = np.nanmean(curve(results, jobs, name, "committed_energy_j"), axis=0)
        up = np.nanmean(curve(results, jobs, name, "uplink_energy_j"), axis=0)
        t = np.nanmean(curve(results, jobs, name, "sim_time_s"), axis=0)
        runs = [results[j["key"]] for j in jobs if j["name"] == name]
        ok = ~np.isnan(acc)
        reach, booked = energy_to_target(acc, committed, TARGET), energy_to_target(acc, energy, TARGET)
        rows.append(
            {
                "name": name,
                "acc": float(acc[ok][-1]),
                "worst": float(worst[ok][-1]),
                "energy_j": float(energy[-1]),
                "uplink_j": float(up[-1]),
                "time_s": float(t[-1]),
                "uploads": float(np.mean([r["uploads"] for r in runs])),
                "upload_mbit": float(np.mean([r["upload_bits"] for r in runs]) / 1e6),
                "energy_to_target_j": None if np.isnan(reach) else reach,  # committed (docs/model.md §8)
                "booked_energy_to_target_j": None if np.isnan(booked) else booked,
            }
        )
    return {
        "rounds": args.rounds,
        "seeds": list(args.seeds),
        "target": TARGET,
        "committed_definition": COMMITTED_ENERGY,
        "booked_definition": BOOKED_ENERGY,
        "names": list(names),
        "committed_differs": [  # where stopping at the target costs more than was booked by then
            r["name"]
            for r in rows
            if r["energy_to_target_j"] is not None
            and abs(r["energy_to_target_j"] - r["booked_energy_to_target_j"]) > 1e-9
        ],
        "missing": missing,
        "rows": sorted(rows, key=lambda r: -r["acc"]),
        "keys": {name: EXTRA[name] for name in names if name in EXTRA},
    }


def render(summary: dict) -> str:
    """The page from the stored summary (docs/data/algorithms-on-one-network.json), through its template."""
    return pages.render(
        "algorithms-on-one-network.md.j2",
        filters={"json": json.dumps},
        s=summary,
        row={r["name"]: r for r in summary["rows"]},
    )


if __name__ == "__main__":
    sys.exit(main())
