"""Reproduce the Fast-FedDA paper's experiments (CPU-sized); write docs/reproduce-fast-fedda.md.

    .venv/bin/python experiments/reproduce_fast_fedda.py     # 2 worker processes

Runs ("Fast Composite Optimization and Statistical Recovery in Federated Learning",
Sec. 4; learning only, the ideal engine):
1. Sparse linear regression at the paper's full size: 64 clients x 128 samples, p = 1024, s = 512,
   10 clients per round, E = 10, batch 10, lam = 0.5^5 (MC-FedDA 0.5^3, 0.5^4, 0.5^5 over
   125/125/750 rounds), 1000 rounds, Fast-FedDA / C-FedDA / MC-FedDA (mu = 0.1, gamma = 550 resp.
   600/E, eps = 5000 2^-m, exact constrained prox) against FedDA and FedMiD (eta_c = 1e-3), 3 seeds.
2. Low-rank matrix estimation: 32 x 32, rank 16, 64 clients x 128 samples, lam = 0.1 (MC-FedDA 0.3,
   0.15, 0.1 over 170/170/660 rounds), 1000 rounds (the paper: 1500), 3 seeds; C-/MC-FedDA use the
   reference constrained prox here (cheaper with SVDs; equal to the exact one while the constraint does
   not bind, which the page checks from the logged active-constraint steps).
3. Sparse multinomial logistic regression on MNIST-10k (the EMNIST-10 experiment's analogue:
   Fashion-/EMNIST are not available here): 80 clients, Dirichlet(0.5) class mixes, 36 clients per
   round, E = 10, batch 25, lam = 1e-4, w0 = 0, 300 rounds (the paper: 15,000), 3 seeds.
Options: --jobs N (worker processes, default 2), --cache DIR (reuse finished runs), --quick
(a smoke test: few rounds, 1 seed; writes under /tmp), --from-data (runs nothing: re-renders the page
from docs/data/fast-fedda-summary.json, the numbers the page shows, written by the last full run).
The page's words and tables are experiments/templates/reproduce-fast-fedda.md.j2.
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
from experiments import pages, provenance  # noqa: E402
from experiments.algorithm_keys import run_seeds_of, seedless  # noqa: E402

MNIST_DIR = str(REPO.parent / "shared" / "datasets" / "mnist")  # shared/ beside the checkout
METHODS = ["fast_fedda", "c_fedda", "mc_fedda", "fedda", "fedmid"]
LABELS = {
    "fast_fedda": "Fast-FedDA",
    "c_fedda": "C-FedDA",
    "mc_fedda": "MC-FedDA",
    "fedda": "FedDA",
    "fedmid": "FedMiD",
}
COLORS = {
    "fast_fedda": "tab:red",
    "c_fedda": "tab:orange",
    "mc_fedda": "tab:purple",
    "fedda": "tab:blue",
    "fedmid": "tab:green",
}
SEEDS = (0, 1, 2)
DOC = REPO / "docs" / "reproduce-fast-fedda.md"
SUMMARY = (
    REPO / "docs" / "data" / "fast-fedda-summary.json"
)  # what the page shows, from the runs: it is rendered from it

# The spec's indicative l2 errors (a numpy reimplementation), [lo, hi].
SPEC_L2 = {
    300: {
        "fast_fedda": (4.1, 4.3),
        "c_fedda": (4.6, 4.7),
        "mc_fedda": (3.5, 3.6),
        "fedda": (7.4, 7.8),
        "fedmid": (6.7, 7.0),
    },
    1000: {
        "fast_fedda": (0.49, 0.55),
        "c_fedda": (0.53, 0.59),
        "mc_fedda": (0.45, 0.50),
        "fedda": (0.77, 0.85),
        "fedmid": (0.88, 0.96),
    },
}


# -- the runs ---------------------------------------------------------------------------------
def lasso(method: str, seed: int, rounds: int) -> dict:
    extra = {
        "fast_fedda": {"mu": 0.1},
        "c_fedda": {"mu": 0.1, "epsilon": 5000.0},
        "mc_fedda": {
            "mu": 0.1,
            "epsilon": 5000.0,
            "stage_lambdas": [0.125, 0.0625, 0.03125],
            "stage_rounds": [rounds // 8, rounds // 8],
        },
        "fedda": {},
        "fedmid": {},
    }[method]
    return {
        "run": {"seed": seed, "rounds": rounds, "engine": "ideal", "threads": 1, "eval_every": 10},
        "data": {"name": "sparse_regression", "num_clients": 64, "samples_per_client": 128, "test_per_client": 32},
        "model": {"name": "regression"},
        "algorithm": {
            "name": method,
            "local_steps": 10,
            "clients_per_round": 10,
            "batch_size": 10,
            "lr": 1e-3,
            "lam": 0.03125,
            "grad_scale": 0.5,
            "init_std": 1.0,
            **extra,
        },
    }


def low_rank(method: str, seed: int, rounds: int) -> dict:
    stage = max(1, round(rounds * 0.17))
    extra = {
        "fast_fedda": {"mu": 0.1},
        "c_fedda": {"mu": 0.1, "epsilon": 5000.0, "cprox_mode": "reference"},
        "mc_fedda": {
            "mu": 0.1,
            "epsilon": 5000.0,
            "cprox_mode": "reference",
            "stage_lambdas": [0.3, 0.15, 0.1],
            "stage_rounds": [stage, stage],
        },
        "fedda": {},
        "fedmid": {},
    }[method]
    return {
        "run": {"seed": seed, "rounds": rounds, "engine": "ideal", "threads": 1, "eval_every": 10},
        "data": {
            "name": "low_rank_matrix",
            "num_clients": 64,
            "samples_per_client": 128,
            "test_per_client": 32,
            "matrix_side": 32,
            "matrix_rank": 16,
        },
        "model": {"name": "regression"},
        "algorithm": {
            "name": method,
            "local_steps": 10,
            "clients_per_round": 10,
            "batch_size": 10,
            "lr": 1e-3,
            "lam": 0.1,
            "grad_scale": 0.5,
            "init_std": 1.0,
            "regularizer": "nuclear",
            "matrix_shape": [32, 32],
            **extra,
        },
    }


def mnist(method: str, seed: int, rounds: int) -> dict:
    extra = {
        "fast_fedda": {"mu": 0.001, "gamma": 25.0},
        "c_fedda": {"mu": 0.001, "gamma": 2.5, "epsilon": 5000.0, "cprox_mode": "reference"},  # 25 / E
        "fedda": {},
        "fedmid": {},
    }[method]
    return {
        "run": {"seed": seed, "rounds": rounds, "engine": "ideal", "threads": 1, "eval_every": 10},
        "data": {"name": "mnist", "dir": MNIST_DIR, "num_clients": 80, "dirichlet_alpha": 0.5},
        "model": {"name": "linear"},
        "algorithm": {
            "name": method,
            "local_steps": 10,
            "clients_per_round": 36,
            "batch_size": 25,
            "lr": 0.01,
            "lam": 1e-4,
            "init_std": 0.0,
            **extra,
        },
    }


EXPERIMENTS = {
    "lasso": (
        lasso,
        METHODS,
        [
            "l2_error",
            "l1_error",
            "support_f1",
            "support_f1_001",
            "nonzeros",
            "loss",
            "constraint_used",
            "client_boundary_steps",
        ],
    ),
    "lowrank": (
        low_rank,
        METHODS,
        ["fro_error", "op_error", "rank", "loss", "constraint_used", "client_boundary_steps"],
    ),
    "mnist": (
        mnist,
        ["fast_fedda", "c_fedda", "fedda", "fedmid"],
        ["loss", "acc_mean", "nonzero_share", "constraint_used", "client_boundary_steps"],
    ),
}


def run_jobs(jobs: list[dict]) -> list[dict]:
    """The runs of ``jobs`` (a worker process), the seeds of one setting trained together."""
    return run_seeds_of(jobs, record)


def record(job: dict, sim, result, wall_s: float) -> dict:
    """What the page keeps of a run."""
    rows = []
    for row in result.metrics:
        if row.get("loss") is None:
            continue
        out = {"round": row["round"]}
        for k in job["keep"]:
            out[k] = row.get(k)
        if "nonzero_share" in job["keep"]:
            out["nonzero_share"] = (
                float((sim.algorithm.model != 0).float().mean()) if row is result.metrics[-1] else None
            )
        rows.append(out)
    return {"key": job["key"], "rows": rows, "wall_s": wall_s}


def job_key(scenario: dict) -> str:
    return hashlib.sha1(json.dumps(scenario, sort_keys=True).encode()).hexdigest()[:16]


# -- summaries --------------------------------------------------------------------------------
def series(results, jobs, exp, method, metric):
    """rounds [T], values [seeds, T] for one (experiment, method, metric)."""
    runs = [results[j["key"]]["rows"] for j in jobs if j["exp"] == exp and j["method"] == method]
    rounds = np.array([r["round"] for r in runs[0]])
    vals = np.array([[np.nan if r.get(metric) is None else r[metric] for r in run] for run in runs], dtype=float)
    return rounds, vals


def at(results, jobs, exp, method, metric, rnd):
    rounds, vals = series(results, jobs, exp, method, metric)
    return vals[:, int(np.flatnonzero(rounds == rnd)[0])]


def plot(results, jobs, exp, methods, metrics, titles, path, logy=()):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.4))
    for ax, metric, title in zip(np.atleast_1d(axes), metrics, titles):
        for m in methods:
            rounds, vals = series(results, jobs, exp, m, metric)
            mean, std = np.nanmean(vals, axis=0), np.nanstd(vals, axis=0)
            ax.plot(rounds, mean, color=COLORS[m], label=LABELS[m], lw=1.4)
            ax.fill_between(rounds, mean - std, mean + std, color=COLORS[m], alpha=0.2, lw=0)
        if metric in logy:
            ax.set_yscale("log")
        ax.set_xlabel("round")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


FIGURES = {  # experiment -> metrics, their titles, the file, the metrics on a log axis
    "lasso": (
        ["l2_error", "l1_error", "support_f1", "loss"],
        ["‖w − w*‖₂", "‖w − w*‖₁", "support F1 (exact nonzeros)", "training MSE"],
        "fedda-lasso.png",
        ("l2_error", "l1_error", "loss"),
    ),
    "lowrank": (
        ["fro_error", "op_error", "rank", "loss"],
        ["‖W − W*‖_F", "‖W − W*‖₂ (operator)", "numerical rank", "training MSE"],
        "fedda-lowrank.png",
        ("fro_error", "op_error", "loss"),
    ),
    "mnist": (
        ["loss", "acc_mean"],
        ["training cross-entropy", "test accuracy (mean over clients)"],
        "fedda-mnist.png",
        ("loss",),
    ),
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", nargs="*", default=None, help="experiments to run (lasso lowrank mnist)")
    parser.add_argument("--from-data", action="store_true", help=f"run nothing: re-render the page from {SUMMARY}")
    args = parser.parse_args(argv)
    rounds = {"lasso": 1000, "lowrank": 1000, "mnist": 300}
    seeds = SEEDS
    doc, summary_path, fig_dir = DOC, SUMMARY, REPO / "docs" / "figures"
    if args.quick:
        rounds = {"lasso": 80, "lowrank": 40, "mnist": 20}
        seeds = (0,)
        doc = Path("/tmp/edgefl-quick/reproduce-fast-fedda.md")
        summary_path, fig_dir = doc.parent / SUMMARY.name, doc.parent
    if args.from_data:
        atomic_write_text(doc, render(json.loads(summary_path.read_text())))
        print(f"wrote {doc} from {summary_path}")
        return 0
    fig_dir.mkdir(parents=True, exist_ok=True)
    exps = args.only or list(EXPERIMENTS)
    jobs = []
    for exp in exps:
        build, methods, keep = EXPERIMENTS[exp]
        for method in methods:
            for seed in seeds:
                sc = build(method, seed, rounds[exp])
                jobs.append(
                    {
                        "exp": exp,
                        "method": method,
                        "seed": seed,
                        "scenario": sc,
                        "keep": keep,
                        "key": f"{exp}-{method}-{seed}-{job_key(sc)}",
                        "label": f"{exp} {method} seed {seed}",
                    }
                )
    # the slow ones first, so the pool stays busy
    jobs.sort(key=lambda j: (j["method"] not in ("c_fedda", "mc_fedda"), j["exp"] != "lasso"))
    started = time.time()
    results = run_keyed(run_jobs, jobs, together=seedless, workers=args.jobs, cache=args.cache)
    total = time.time() - started
    for exp in exps:
        metrics, titles, name, logy = FIGURES[exp]
        plot(results, jobs, exp, EXPERIMENTS[exp][1], metrics, titles, fig_dir / name, logy)
    command = ".venv/bin/python experiments/reproduce_fast_fedda.py" + (" --quick" if args.quick else "")
    summary = {
        "produced": provenance.current(command, total),
        "total_s": total,  # this generation's wall time (s; runs found in a --cache are not re-run)
        "seeds": list(seeds),
        "runs": len(jobs),
        "run_s": sum(results[j["key"]]["wall_s"] for j in jobs),
        "figures": "." if args.quick else "figures",
    }
    for exp in exps:
        summary[exp] = SUMMARIES[exp](results, jobs, rounds[exp])
    pages.store_and_render(summary, summary_path, doc, render, total)
    return 0


def render(summary: dict) -> str:
    """The page from the stored summary (docs/data/fast-fedda-summary.json), through its template."""
    return pages.render("reproduce-fast-fedda.md.j2", s=summary, labels=LABELS, spec=SPEC_L2)


# -- what the page shows, from the runs ---------------------------------------------------------
def ahead_every_seed(results, jobs, exp, metric, rnd, fast, base) -> bool:
    """Every `fast` method below every `base` method in `metric` at round `rnd`, seed by seed."""
    return all(
        bool(np.all(at(results, jobs, exp, f, metric, rnd) < at(results, jobs, exp, b, metric, rnd)))
        for f in fast
        for b in base
    )


def boundary_steps(results, jobs, exp) -> int:
    """Client steps of C-/MC-FedDA with an active constraint (largest count over the seeds, summed)."""
    return int(
        sum(np.nanmax(series(results, jobs, exp, m, "client_boundary_steps")[1]) for m in ("c_fedda", "mc_fedda"))
    )


def summarise_lasso(results, jobs, R) -> dict:
    checks = [r for r in (100, 300, 1000) if r <= R]
    proposed, baselines = ("fast_fedda", "c_fedda"), ("fedda", "fedmid")

    def final(m, metric):
        return pages.over_seeds(at(results, jobs, "lasso", m, metric, R))

    return {
        "rounds": R,
        "checks": checks,
        "l2": {m: [pages.over_seeds(at(results, jobs, "lasso", m, "l2_error", r)) for r in checks] for m in METHODS},
        "final": {m: {k: final(m, k) for k in ("support_f1", "support_f1_001", "nonzeros", "loss")} for m in METHODS},
        "faster_every_seed": [
            ahead_every_seed(results, jobs, "lasso", "l2_error", r, proposed, baselines) for r in checks
        ],
        "f1_lowest": {
            m: float(np.min(at(results, jobs, "lasso", m, "support_f1", R)))
            for m in ("fedda", "fast_fedda", "c_fedda", "mc_fedda")
        },
        "fedmid_f1_at_most_0.8": bool(np.all(at(results, jobs, "lasso", "fedmid", "support_f1", R) <= 0.8)),
        "constraint_used": float(
            max(np.nanmax(series(results, jobs, "lasso", m, "constraint_used")[1]) for m in ("c_fedda", "mc_fedda"))
        ),
        "boundary_steps": boundary_steps(results, jobs, "lasso"),
        "above_spec": [
            {"method": m, "round": r, "l2": v}
            for r in (300, 1000)
            if r <= R
            for m in METHODS
            if (v := float(at(results, jobs, "lasso", m, "l2_error", r).mean())) > SPEC_L2[r][m][1]
        ],
    }


def summarise_lowrank(results, jobs, R) -> dict:
    mids = [r for r in (100, 300, R) if r <= R]
    return {
        "rounds": R,
        "mids": mids,
        "fro": {m: [pages.over_seeds(at(results, jobs, "lowrank", m, "fro_error", r)) for r in mids] for m in METHODS},
        "op": {m: pages.over_seeds(at(results, jobs, "lowrank", m, "op_error", R)) for m in METHODS},
        "rank": {m: pages.over_seeds(at(results, jobs, "lowrank", m, "rank", R)) for m in METHODS},
        "rank16": {m: bool(np.all(at(results, jobs, "lowrank", m, "rank", R) == 16)) for m in METHODS},
        "faster_every_seed": [
            ahead_every_seed(
                results, jobs, "lowrank", "fro_error", r, ("fast_fedda", "c_fedda", "mc_fedda"), ("fedda", "fedmid")
            )
            for r in mids[:-1]
        ],
        "boundary_steps": boundary_steps(results, jobs, "lowrank"),
    }


def summarise_mnist(results, jobs, R) -> dict:
    methods = EXPERIMENTS["mnist"][1]
    mids = [r for r in (50, 150, R) if r <= R]

    def mean(m, metric, r):
        return float(np.mean(at(results, jobs, "mnist", m, metric, r)))

    final_acc = {m: at(results, jobs, "mnist", m, "acc_mean", R) for m in methods}
    spread = max(np.std(v, ddof=1) if len(v) > 1 else 0.0 for v in final_acc.values())
    best_baseline = max(mean("fedda", "acc_mean", R), mean("fedmid", "acc_mean", R))
    return {
        "rounds": R,
        "mids": mids,
        "methods": methods,
        "loss": {m: [pages.over_seeds(at(results, jobs, "mnist", m, "loss", r)) for r in mids] for m in methods},
        "acc": {m: [pages.over_seeds(at(results, jobs, "mnist", m, "acc_mean", r)) for r in mids] for m in methods},
        "nonzero_share": {m: pages.over_seeds(at(results, jobs, "mnist", m, "nonzero_share", R)) for m in methods},
        "lower_loss": [
            all(mean(f, "loss", r) < mean(b, "loss", r) for f in ("fast_fedda", "c_fedda") for b in ("fedda", "fedmid"))
            for r in mids
        ],
        "accuracy_gain_beyond_spread": bool(
            all(mean(f, "acc_mean", R) - best_baseline > spread for f in ("fast_fedda", "c_fedda"))
        ),
    }


SUMMARIES = {"lasso": summarise_lasso, "lowrank": summarise_lowrank, "mnist": summarise_mnist}


if __name__ == "__main__":
    sys.exit(main())
