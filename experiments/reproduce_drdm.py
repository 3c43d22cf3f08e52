"""Reproduce the DRDM paper's Table 3 shape and Figure 3 on MNIST-10k; write docs/reproduce-drdm.md.

One command regenerates everything (tuning grid, table runs, tau sweep, CSVs, figures, page)::

    .venv/bin/python experiments/reproduce_drdm.py

It runs on 2 worker processes with one torch thread each (``--jobs``), prints one line per
finished run, and takes about half an hour on 2 cores shared with other jobs (28.6 min measured for
the committed page; less on idle cores). Options: ``--reuse-tuning`` keeps the
selection in docs/data/drdm-tuning.csv instead of re-running the grid; ``--cache DIR`` stores each
finished run as JSON and skips it next time (handy when only the page changes); ``--quick`` is a
smoke test (few rounds, seeds and grid points; writes under /tmp, never over docs/);
``--from-data`` runs nothing and re-renders the page and figures from docs/data/drdm-runs.json.gz.

What it does (details and definitions are written into the page itself):
1. Tuning: every algorithm gets the same budget of 12 grid points on 3 tuning seeds (100-102) at
   alpha = 0.1, sigma = 0, tau = 10; the score is the worst-case per-client accuracy averaged over
   the last 10 of 100 rounds and the seeds. The report seeds (0-4) are never used for selection.
2. Table 3 shape: alpha in {0.1, 0.5} x sigma in {0, 0.5}, all seven algorithms with their selected
   hyperparameters, report seeds 0-4 (0-9 at alpha = 0.1, sigma = 0), final-round average /
   worst-case / std of per-client test accuracy.
3. Figure 3 analogue: DRDM (and FedAvg as a reference) at tau in {5, 10, 20, 30}; rounds until the
   worst-case accuracy and its centred 5-round moving average both reach the target
   (edgefl.target.rounds_to_target, the definition `edgefl optimal-tau` uses).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from edgefl.sweeps.jobs import run_jobs  # noqa: E402
from edgefl.target import DEFAULT_WINDOW, Target, centred_moving_average, rounds_to_target  # noqa: E402
from experiments import provenance  # noqa: E402

SCENARIO = REPO / "scenarios" / "drdm-mnist10k.toml"
DOC = REPO / "docs" / "reproduce-drdm.md"
DATA_DIR = REPO / "docs" / "data"
FIG_DIR = REPO / "docs" / "figures"
BUNDLE = "drdm-runs.json.gz"  # every run with its per-round curves: the page is rendered from it
PRODUCED = "drdm-produced.json"  # the commit and command of those runs (experiments/provenance.py)
COMMAND = ".venv/bin/python experiments/reproduce_drdm.py"

ALGORITHMS = ["drdm", "drfa", "scaffold", "scaff_pd", "feddyn", "fedprox", "fedavg"]
LABELS = {
    "drdm": "DRDM",
    "drfa": "DRFA",
    "scaffold": "SCAFFOLD",
    "scaff_pd": "SCAFF-PD",
    "feddyn": "FedDyn",
    "fedprox": "FedProx",
    "fedavg": "FedAvg",
}
BASELINES = [a for a in ALGORITHMS if a != "drdm"]

# -- tuning grid: 12 points for every method ------------------------------------------------
# The ranges come from a coarse first pass on the same tuning seeds (eta in {0.05, 0.1, 0.3},
# mu/alpha up to 1, eta_g up to 2, gamma up to 1e-2), where the best point of almost every
# method sat on an edge (eta = 0.05, FedDyn alpha = 1, SCAFFOLD eta_g = 2, FedAvg eta = 0.02,
# DRDM mu = 0.1) and gamma = 1e-2 was the worst dual step for DRDM and DRFA. This second pass
# moves every method's grid the same way; the budget stays 12 points each.
ETAS = (0.02, 0.05, 0.1)
GRID: dict[str, list[dict]] = {
    # FedAvg has only eta: its 12 points are a finer eta grid.
    "fedavg": [{"lr": e} for e in (0.005, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.07, 0.1, 0.14, 0.2, 0.3)],
    "fedprox": [{"lr": e, "mu_p": v} for e in ETAS for v in (0.01, 0.1, 1.0, 3.0)],
    "feddyn": [{"lr": e, "alpha": v} for e in ETAS for v in (0.03, 0.1, 0.3, 1.0)],
    "scaffold": [{"lr": e, "eta_g": v} for e in ETAS for v in (0.5, 1.0, 2.0, 3.0)],
    "drfa": [{"lr": e, "gamma": v} for e in ETAS for v in (1e-4, 3e-4, 1e-3, 3e-3)],
    "scaff_pd": [{"lr": e, "gamma": v} for e in ETAS for v in (1e-4, 3e-4, 1e-3, 3e-3)],
    "drdm": [{"lr": e, "mu": mu, "gamma": g} for e in ETAS for mu in (0.1, 1.0) for g in (3e-4, 1e-3)],
}
TUNE_SEEDS = (100, 101, 102)
TUNE_SETTING = (0.1, 0.0)  # (alpha, sigma)
TUNE_LAST = 10  # score: mean acc_worst over the last 10 rounds

SETTINGS = [(0.1, 0.0), (0.1, 0.5), (0.5, 0.0), (0.5, 0.5)]
REPORT_SEEDS = tuple(range(5))
HEADLINE_SEEDS = tuple(range(10))  # alpha = 0.1, sigma = 0: 10 Monte Carlo runs, as the paper
ROUNDS = 100
TAU = 10
TAUS = (5, 10, 20, 30)
FIG3_ALGORITHMS = ("drdm", "fedavg")
TARGETS = (0.70, 0.75, 0.80)
PRIMARY_TARGET = 0.70
WINDOW = DEFAULT_WINDOW

# The paper's numbers (avg / worst / std, %), its Sec. IV-B. Table 3: MNIST linear, sigma = 0;
# Table 4: alpha = 0.1. No FedDyn/FedProx columns, no (alpha 0.5, sigma 0.5) cell.
PAPER = {
    (0.1, 0.0): {
        "drdm": (90.31, 84.81, 2.96),
        "drfa": (88.67, 82.60, 3.02),
        "scaffold": (89.32, 83.92, 3.39),
        "scaff_pd": (87.49, 82.23, 2.45),
        "fedavg": (88.46, 80.70, 3.93),
    },
    (0.5, 0.0): {
        "drdm": (90.20, 86.36, 2.37),
        "drfa": (89.18, 83.86, 2.80),
        "scaffold": (89.15, 84.77, 2.55),
        "scaff_pd": (87.94, 83.22, 2.58),
        "fedavg": (88.86, 82.99, 2.97),
    },
    (0.1, 0.5): {
        "drdm": (90.05, 82.68, 3.66),
        "drfa": (88.74, 81.37, 3.70),
        "scaffold": (89.34, 80.18, 3.70),
        "scaff_pd": (86.59, 80.89, 3.02),
        "fedavg": (88.47, 80.35, 4.29),
    },
}
PAPER_FIG3 = {5: 48, 10: 41, 20: 32, 30: 25}  # rounds to 85% worst-case (KMNIST CNN, assumed)

# Diagnostics when DRDM does not win: DRDM's parts switched on and off around the selected point,
# on validation seeds (the tuning seeds plus two more), never on the report seeds.
VALIDATION_SEEDS = (100, 101, 102, 103, 104)
ABLATION_BASELINES = ("scaffold", "feddyn", "drfa", "fedavg")


def ablations(base: dict) -> list[tuple[str, dict]]:
    """(label, DRDM hyperparameters) variants of the selected DRDM point."""
    return [
        ("DRDM, selected", dict(base)),
        ("γ = 0: no dual ascent, λ stays uniform (λ-sampling with replacement kept)", {**base, "gamma": 0.0}),
        (
            "γ = 0 and uniform sampling without replacement (= FedDyn with α = μ)",
            {**base, "gamma": 0.0, "sampling": "uniform"},
        ),
        ("λ-sampling without replacement (floor 1e-3)", {**base, "sampling": "without_replacement"}),
        ("dual loss L_i on the full local training set", {**base, "dual_loss": "full"}),
        (
            "reference-code options: γ decay 0.9 per round, λ floor 1e-3",
            {**base, "gamma_decay": 0.9, "lambda_floor": 1e-3},
        ),
        ("γ × 3", {**base, "gamma": 3 * base["gamma"]}),
        ("μ × 3", {**base, "mu": 3 * base["mu"]}),
        ("μ / 10", {**base, "mu": base["mu"] / 10}),
    ]


# -- one run ----------------------------------------------------------------------------------
def base_raw() -> dict:
    """The MNIST-10k scenario file as a dict, data.dir resolved, algorithm keys reduced to the common ones."""
    from edgefl.scenario import read_toml

    raw = read_toml(SCENARIO)
    raw["data"]["dir"] = str((SCENARIO.parent / raw["data"]["dir"]).resolve())
    common = {k: raw["algorithm"][k] for k in ("local_steps", "clients_per_round", "batch_size")}
    raw["algorithm"] = common
    raw["run"]["engine"] = "ideal"  # learning only: same numbers as simpy without a deadline, faster
    return raw


def make_job(phase, algorithm, hp, alpha, sigma, seed, tau=TAU) -> dict:
    return {
        "phase": phase,
        "algorithm": algorithm,
        "hp": dict(hp),
        "alpha": alpha,
        "sigma": sigma,
        "seed": seed,
        "tau": tau,
        "rounds": ROUNDS,
    }


def job_key(job: dict) -> str:
    spec = {k: job[k] for k in ("algorithm", "hp", "alpha", "sigma", "seed", "tau", "rounds")}
    if job.get("phase") == "ablation":
        spec["v"] = 3  # these runs also record the per-client training losses and gradient norms
    return hashlib.sha1(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def run_job(job: dict) -> dict:
    import torch

    torch.set_num_threads(1)
    from edgefl.runner import Simulation
    from edgefl.scenario import AlgorithmSection, scenario_from_dict

    raw = base_raw()
    raw["run"].update(seed=job["seed"], rounds=job["rounds"])
    raw["data"].update(dirichlet_alpha=job["alpha"], zipf_sigma=job["sigma"])
    common = {k: v for k, v in job["hp"].items() if k in AlgorithmSection.model_fields}
    own = {k: v for k, v in job["hp"].items() if k not in common}  # [algorithm.<name>]
    raw["algorithm"].update(
        name=job["algorithm"], local_steps=job["tau"], **common, **({job["algorithm"]: own} if own else {})
    )
    started = time.perf_counter()
    sim = Simulation(scenario_from_dict(raw))
    out = dict(job)
    if job["phase"] == "tune":
        # Selection only needs the last TUNE_LAST rounds: evaluate just those (evaluation draws no random
        # numbers, so the trajectory and these numbers are those of a fully evaluated run).
        from edgefl.metrics import evaluate_global

        rows = []
        for r in range(job["rounds"]):
            sim.engine.run_round(sim.algorithm, r)
            if r >= job["rounds"] - TUNE_LAST:
                rows.append(evaluate_global(sim.model, sim.data, sim.algorithm.model))
        out["acc_worst"] = [float(m["acc_worst"]) for m in rows]
        out["acc_mean"] = [float(rows[-1]["acc_mean"])]
        out["acc_std"] = [float(rows[-1]["acc_std"])]
        out["wall_s"] = time.perf_counter() - started
        return out
    rows = sim.run(progress=False).metrics
    # The DRO objective at the final model: each client's mean training loss f_i(w); max_i f_i = F(w, lambda*).
    with torch.no_grad():
        from edgefl.metrics import per_sample

        losses, _ = per_sample(sim.model, sim.algorithm.model, sim.data.train_x, sim.data.train_y)
    client_loss = np.add.reduceat(losses.numpy(), sim.data.train_offsets[:-1]) / np.diff(sim.data.train_offsets)
    out["train_loss_worst"] = float(client_loss.max())
    out["train_loss_mean"] = float(client_loss.mean())
    # Which objective the final model is stationary for: full local gradients grad f_i(w), then the norm of
    # the uniform average (ERM, eq. 1) and of the lambda-weighted sum (the DRO objective at the final lambda).
    w = sim.algorithm.model
    grad_f = torch.func.grad(sim.model.loss)
    grads = torch.stack([grad_f(w, *sim.data.client_train(i)) for i in range(sim.data.num_clients)]).double()
    out["grad_uniform_norm"] = float(torch.linalg.vector_norm(grads.mean(dim=0)))
    lam = getattr(sim.algorithm, "lam", None)
    if lam is not None:
        out["grad_lambda_norm"] = float(torch.linalg.vector_norm(torch.as_tensor(lam) @ grads))
        out["lambda_final"] = [float(x) for x in lam]
    for key in ("acc_mean", "acc_worst", "acc_std"):
        out[key] = [float(r[key]) for r in rows]
    if "lambda_max" in rows[-1]:
        out["lambda_max"] = [float(r["lambda_max"]) for r in rows]
        out["lambda_entropy"] = [float(r["lambda_entropy"]) for r in rows]
    out["wall_s"] = time.perf_counter() - started
    return out


class Runner:
    """Runs jobs with the shared job runner (edgefl.sweeps.jobs), cached by job_key, printing progress."""

    def __init__(self, jobs: int, cache: Path | None):
        self.jobs = jobs
        self.cache = cache
        self.started = time.perf_counter()

    def describe(self, title: str, res: dict) -> str:
        hp = ",".join(f"{k}={v:g}" if isinstance(v, (int, float)) else f"{k}={v}" for k, v in res["hp"].items())
        return (
            f"[{time.perf_counter() - self.started:6.0f}s] {title}: {res['algorithm']:8s} {hp:28s} "
            f"a={res['alpha']} s={res['sigma']} tau={res['tau']} seed={res['seed']:3d}  "
            f"worst={res['acc_worst'][-1]:.3f} mean={res['acc_mean'][-1]:.3f} ({res['wall_s']:.1f}s)"
        )

    def run(self, todo: list[dict], title: str) -> list[dict]:
        results = run_jobs(
            run_job,
            todo,
            workers=self.jobs,
            cache=self.cache,
            key=job_key,
            desc=f"== {title}",
            unit="run",
            describe=lambda job, res: self.describe(title, res),
        )
        # a cached run may have been computed for another phase (job_key leaves the phase out)
        return [{**res, "phase": job["phase"]} for job, res in zip(todo, results)]


# -- statistics -------------------------------------------------------------------------------
def first_round(curve, target) -> int | None:
    """Rounds-to-target of a worst-case accuracy curve (round 1 first), by the one definition
    (edgefl.target.rounds_to_target): the first round at which it and its centred WINDOW-round
    moving average are both >= target; None if never."""
    return rounds_to_target(range(1, len(curve) + 1), curve, Target("acc_worst", target), WINDOW)


def mean_std(values):
    v = np.asarray(values, dtype=float)
    return float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else 0.0


def paired_ci(diff, level=0.95):
    import scipy.stats

    d = np.asarray(diff, dtype=float)
    mean = float(d.mean())
    if len(d) < 2:
        return mean, float("nan")
    half = float(scipy.stats.t.ppf(0.5 + level / 2, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d)))
    return mean, half


def tuning_score(res) -> float:
    return float(np.mean(res["acc_worst"][-TUNE_LAST:]))


def select(tuning: list[dict]) -> tuple[dict[str, dict], list[dict]]:
    """Best grid point per algorithm (mean tuning score over seeds; ties: first in grid order)."""
    table = []
    for alg in ALGORITHMS:
        for point in GRID[alg]:
            runs = [r for r in tuning if r["algorithm"] == alg and r["hp"] == point]
            if not runs:
                continue
            table.append(
                {
                    "algorithm": alg,
                    "hp": point,
                    "score": float(np.mean([tuning_score(r) for r in runs])),
                    "final_worst": float(np.mean([r["acc_worst"][-1] for r in runs])),
                    "final_mean": float(np.mean([r["acc_mean"][-1] for r in runs])),
                    "seeds": len(runs),
                }
            )
    chosen = {}
    for alg in ALGORITHMS:
        rows = [t for t in table if t["algorithm"] == alg]
        if rows:
            chosen[alg] = max(rows, key=lambda t: t["score"])["hp"]  # max keeps the first of equals
    return chosen, table


def read_tuning_csv(path: Path) -> list[dict]:
    """Tuning runs back from docs/data/drdm-tuning.csv (for --reuse-tuning)."""
    runs = []
    with open(path) as handle:
        for row in csv.DictReader(handle):
            runs.append(
                {
                    "phase": "tune",
                    "algorithm": row["algorithm"],
                    "hp": json.loads(row["hp"]),
                    "alpha": float(row["alpha"]),
                    "sigma": float(row["sigma"]),
                    "seed": int(row["seed"]),
                    "tau": int(row["tau"]),
                    "rounds": int(row["rounds"]),
                    "acc_worst": json.loads(row["acc_worst_last"]),  # the last 10 rounds
                    "acc_mean": [float(row["acc_mean_final"])],
                    "acc_std": [float(row["acc_std_final"])],
                    "wall_s": float(row["wall_s"]),
                }
            )
    return runs


# -- outputs ----------------------------------------------------------------------------------
def write_csv(path: Path, header: list[str], rows: list[list]):
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    os.replace(tmp, path)


def fmt_hp(hp: dict) -> str:
    names = {"lr": "η", "mu": "μ", "gamma": "γ", "mu_p": "μ_p", "alpha": "α", "eta_g": "η_g"}
    return ", ".join(
        f"{names.get(k, k)} = {v:g}" if isinstance(v, (int, float)) else f"{names.get(k, k)} = {v}"
        for k, v in hp.items()
    )


def pct(m, s=None, digits=2):
    return f"{100 * m:.{digits}f}" if s is None else f"{100 * m:.{digits}f} ± {100 * s:.{digits}f}"


def figures(main, fig3, fig_dir: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig_dir.mkdir(parents=True, exist_ok=True)
    written = []
    colors = dict(zip(ALGORITHMS, plt.cm.tab10.colors))
    for alpha, sigma in SETTINGS:
        fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
        for alg in ALGORITHMS:
            runs = [r for r in main if r["algorithm"] == alg and r["alpha"] == alpha and r["sigma"] == sigma]
            if not runs:
                continue
            x = np.arange(1, len(runs[0]["acc_mean"]) + 1)
            for ax, key in zip(axes, ("acc_mean", "acc_worst", "acc_std")):
                y = 100 * np.mean([r[key] for r in runs], axis=0)
                ax.plot(x, y, label=LABELS[alg], color=colors[alg], lw=2.2 if alg == "drdm" else 1.2)
        for ax, title in zip(axes, ("average accuracy (%)", "worst-case accuracy (%)", "std across clients (pp)")):
            ax.set_title(title)
            ax.set_xlabel("round")
            ax.grid(alpha=0.3)
        axes[0].set_ylim(60, 95)
        axes[1].set_ylim(30, 90)
        axes[2].set_ylim(0, 15)
        axes[0].legend(fontsize=8)
        fig.suptitle(f"MNIST-10k, linear, α = {alpha}, σ = {sigma}: mean over {len(runs)} seeds")
        fig.tight_layout()
        path = fig_dir / f"drdm-curves-alpha{alpha}-sigma{sigma}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    # Final worst-case per seed at the headline setting.
    fig, ax = plt.subplots(figsize=(8, 4))
    data = [
        [100 * r["acc_worst"][-1] for r in main if r["algorithm"] == alg and (r["alpha"], r["sigma"]) == (0.1, 0.0)]
        for alg in ALGORITHMS
    ]
    ax.boxplot(data, tick_labels=[LABELS[a] for a in ALGORITHMS], showmeans=True)
    for k, d in enumerate(data, 1):
        ax.scatter(np.full(len(d), k) + np.linspace(-0.12, 0.12, len(d)), d, s=10, color="k", alpha=0.6)
    ax.set_ylabel("final worst-case accuracy (%)")
    ax.set_title("MNIST-10k, α = 0.1, σ = 0: final-round worst-case accuracy per seed")
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    path = fig_dir / "drdm-worst-case-seeds.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    # Figure 3 analogue.
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    for alg, style in zip(FIG3_ALGORITHMS, ("-o", "--s")):
        for t, color in zip(TARGETS, plt.cm.viridis(np.linspace(0, 0.8, len(TARGETS)))):
            ys = []
            for tau in TAUS:
                runs = [r for r in fig3 if r["algorithm"] == alg and r["tau"] == tau]
                ys.append(first_round(np.mean([r["acc_worst"] for r in runs], axis=0), t))
            axes[0].plot(
                TAUS,
                [np.nan if y is None else y for y in ys],
                style,
                color=color,
                label=f"{LABELS[alg]}, {100 * t:.0f}%",
            )
    axes[0].plot(list(PAPER_FIG3), list(PAPER_FIG3.values()), ":^", color="gray", label="paper (DRDM, 85%, KMNIST)")
    axes[0].set_xlabel("local steps τ")
    axes[0].set_ylabel("rounds to target")
    axes[0].set_title(
        f"rounds until the centred {WINDOW}-round MA of the seed-mean worst-case acc. ≥ target", fontsize=9
    )
    axes[0].grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    for tau in TAUS:
        runs = [r for r in fig3 if r["algorithm"] == "drdm" and r["tau"] == tau]
        y = 100 * np.mean([r["acc_worst"] for r in runs], axis=0)
        axes[1].plot(np.arange(1, len(y) + 1), centred_moving_average(y, WINDOW), label=f"DRDM τ = {tau}")
    axes[1].axhline(100 * PRIMARY_TARGET, color="k", lw=0.8, ls=":")
    axes[1].set_xlabel("round")
    axes[1].set_ylabel(f"worst-case accuracy (%), centred {WINDOW}-round MA, seed mean")
    axes[1].set_ylim(30, 90)
    axes[1].grid(alpha=0.3)
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    path = fig_dir / "drdm-rounds-to-target.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    return written


def write_data(tuning, main, fig3, data_dir: Path):
    if tuning is not None:
        write_csv(
            data_dir / "drdm-tuning.csv",
            [
                "algorithm",
                "hp",
                "alpha",
                "sigma",
                "tau",
                "seed",
                "rounds",
                "score_last10_worst",
                "acc_mean_final",
                "acc_worst_final",
                "acc_std_final",
                "acc_worst_last",
                "wall_s",
            ],
            [
                [
                    r["algorithm"],
                    json.dumps(r["hp"], sort_keys=True),
                    r["alpha"],
                    r["sigma"],
                    r["tau"],
                    r["seed"],
                    r["rounds"],
                    f"{tuning_score(r):.6f}",
                    f"{r['acc_mean'][-1]:.6f}",
                    f"{r['acc_worst'][-1]:.6f}",
                    f"{r['acc_std'][-1]:.6f}",
                    json.dumps([round(x, 6) for x in r["acc_worst"][-TUNE_LAST:]]),
                    f"{r['wall_s']:.2f}",
                ]
                for r in tuning
            ],
        )
    rows = []
    for r in main + fig3:
        rows.append(
            [
                r["phase"],
                r["algorithm"],
                json.dumps(r["hp"], sort_keys=True),
                r["alpha"],
                r["sigma"],
                r["tau"],
                r["seed"],
                r["rounds"],
                f"{r['acc_mean'][-1]:.6f}",
                f"{r['acc_worst'][-1]:.6f}",
                f"{r['acc_std'][-1]:.6f}",
                f"{np.mean(r['acc_worst'][-10:]):.6f}",
                *[first_round(r["acc_worst"], t) or "" for t in TARGETS],
                f"{r['lambda_max'][-1]:.6f}" if "lambda_max" in r else "",
                f"{r['train_loss_worst']:.6f}" if "train_loss_worst" in r else "",
                f"{r['train_loss_mean']:.6f}" if "train_loss_mean" in r else "",
                f"{r['wall_s']:.2f}",
            ]
        )
    write_csv(
        data_dir / "drdm-results.csv",
        [
            "experiment",
            "algorithm",
            "hp",
            "alpha",
            "sigma",
            "tau",
            "seed",
            "rounds",
            "acc_mean_final",
            "acc_worst_final",
            "acc_std_final",
            "acc_worst_last10",
            *[f"rounds_to_{int(100 * t)}" for t in TARGETS],
            "lambda_max_final",
            "train_loss_worst_client",
            "train_loss_mean_client",
            "wall_s",
        ],
        rows,
    )
    # Seed-mean curves per (experiment, algorithm, alpha, sigma, tau, round).
    curves = []
    groups = {}
    for r in main + fig3:
        groups.setdefault((r["phase"], r["algorithm"], r["alpha"], r["sigma"], r["tau"]), []).append(r)
    for (phase, alg, alpha, sigma, tau), runs in groups.items():
        for k in range(len(runs[0]["acc_mean"])):
            curves.append(
                [
                    phase,
                    alg,
                    alpha,
                    sigma,
                    tau,
                    k + 1,
                    len(runs),
                    *[f"{np.mean([r[key][k] for r in runs]):.5f}" for key in ("acc_mean", "acc_worst", "acc_std")],
                ]
            )
    write_csv(
        data_dir / "drdm-curves.csv",
        ["experiment", "algorithm", "alpha", "sigma", "tau", "round", "seeds", "acc_mean", "acc_worst", "acc_std"],
        curves,
    )


def grid_description(points: list[dict]) -> str:
    names = {"lr": "η", "mu": "μ", "gamma": "γ", "mu_p": "μ_p", "alpha": "α", "eta_g": "η_g"}
    values: dict[str, list] = {}
    for point in points:
        for k, v in point.items():
            if v not in values.setdefault(k, []):
                values[k].append(v)
    return " × ".join(f"{names.get(k, k)} ∈ {{{', '.join(f'{v:g}' for v in vs)}}}" for k, vs in values.items())


def code_defaults() -> dict[str, dict]:
    import algorithms

    out = {}
    for alg in ALGORITHMS:
        fields = algorithms.get(alg).Params.model_fields
        out[alg] = {k: fields[k].default for k in ("mu", "gamma", "mu_p", "alpha", "eta_g") if k in fields}
    return out


def page(chosen, tune_table, main, fig3, timings, args, ablation=(), produced=None) -> str:
    L = []
    w = L.append
    per_run = float(np.mean([r["wall_s"] for r in main]))
    w("# Reproducing DRDM on MNIST-10k (Table 3 shape, Figure 3 analogue)")
    w("")
    if produced is not None:
        w(provenance.line(produced))
        w("")
    w(
        "*Generated by `.venv/bin/python experiments/reproduce_drdm.py` — do not edit by hand.* "
        f"Compute (sum of the runs' own wall times): tuning {timings['tune'] / 60:.0f} min, tables "
        f"{timings['main'] / 60:.0f} min, τ sweep {timings['fig3'] / 60:.0f} min, diagnostics "
        f"{timings['ablation'] / 60:.0f} min, in all {sum(timings.values()) / 60:.0f} worker-minutes, i.e. about "
        f"{sum(timings.values()) / 60 / args.jobs:.0f} min of wall clock on {args.jobs} worker processes with 1 torch "
        f"thread each (measured on a 2-core machine shared with other jobs; mean {per_run:.1f} s per 100-round "
        f"τ = {TAU} table run). "
        "Raw results: "
        "[`data/drdm-results.csv`](data/drdm-results.csv) (one row per run), "
        "[`data/drdm-tuning.csv`](data/drdm-tuning.csv) (every tuning run), "
        "[`data/drdm-curves.csv`](data/drdm-curves.csv) (seed-mean curves)."
    )
    w("")
    w("## Setup")
    w("")
    w(
        "- **Data: MNIST-10k**, not the paper's MNIST-60k: only the MNIST test split ships with edgefl "
        "(`/work/shared/datasets/mnist`). It is cut 80/20 (stratified) into an 8,000-image training pool and a "
        "2,000-image test pool; N = 30 clients get Zipf(σ) sizes (σ = 0: 266-267 images each) and Dirichlet(α) "
        "class mixes; each client's test set is drawn from the test pool with its training class mix, about "
        "67 images at σ = 0 (size ∝ d_i; the paper's spec suggests 500). One test image is 1.5 points of a "
        "client's accuracy, so worst-case accuracy is noisy — hence the seeds and the CIs below."
    )
    w(
        f"- Model: linear 784 → 10 (7,850 parameters). N = 30, m = 20, τ = {TAU} local steps, batch 32, "
        f"{ROUNDS} rounds, plain SGD. Scenario: [`scenarios/drdm-mnist10k.toml`](../scenarios/drdm-mnist10k.toml), "
        'run with `run.engine = "ideal"` (learning only; no deadline, so the numbers equal a SimPy run\'s).'
    )
    w(
        "- Seeds: `run.seed` sets the 80/20 split, the partition, the initial model (the same for every method "
        "within a seed), minibatches and client sampling. Report seeds 0-4 (0-9 at α = 0.1, σ = 0); tuning "
        "seeds 100-102. Metrics over **all 30 clients**, final round: average, minimum (worst case), population "
        "std of per-client test accuracy."
    )
    w(
        '- Algorithms as specified in "Distributionally Robust Federated Learning with Client Drift Minimization" '
        "(Sec. II, Algorithms 1-3; baselines Sec. IV-A.1): DRDM samples D by m "
        "i.i.d. draws from λ (duplicates train once, weight k_i/m), uses λ⁽⁰⁾ uniform, g_i = c = 0, the "
        "randomised snapshot and the dual step on a uniform U with v_i = (N/m)L_i on one batch of 32; DRFA is DRDM "
        "without the FedDyn terms; SCAFF-PD, which the paper only names, is our reconstruction "
        "(`algorithms/scaff_pd.py`); FedAvg/FedProx weight by d_i."
    )
    w("")
    # -- tuning
    w("## Hyperparameter selection (same budget for every method)")
    w("")
    n_points = len(GRID["drdm"])
    w(
        f"Every method gets **{n_points} grid points**, each run on the {len(TUNE_SEEDS)} tuning seeds "
        f"{list(TUNE_SEEDS)} at α = 0.1, σ = 0, τ = {TAU}, {ROUNDS} rounds ({n_points * len(TUNE_SEEDS) * len(ALGORITHMS)} "
        f"runs). The score is the worst-case accuracy averaged over the last {TUNE_LAST} rounds and the tuning seeds "
        "(a less noisy statistic than the final round); the best score wins. The ranges are a second pass: a coarse "
        "first pass on the same tuning seeds (η ∈ {0.05, 0.1, 0.3}, μ and α ≤ 1, η_g ≤ 2, γ ≤ 1e-2) put the best point "
        "of almost every method on an edge (η = 0.05; FedDyn α = 1; SCAFFOLD η_g = 2; FedAvg η = 0.02; DRDM μ = 0.1) and "
        "showed γ = 1e-2 to be the worst dual step for DRDM and DRFA, so every grid was moved the same way. "
        "The report seeds are never looked at for selection. The selected values are used unchanged for every "
        "(α, σ, τ) below and are the code defaults of each algorithm's `HyperParams` (η is the common "
        "`algorithm.lr`)."
    )
    w("")
    w(f"| method | grid ({n_points} points) | selected | tuning score (worst, %) | runner-up |")
    w("|---|---|---|---|---|")
    grid_text = {alg: grid_description(GRID[alg]) for alg in ALGORITHMS}
    grid_text["scaff_pd"] += " (dual step σ = τγ, θ = 1, ρ = 0)"
    defaults = code_defaults()
    mismatched = []
    for alg in ALGORITHMS:
        rows = sorted([t for t in tune_table if t["algorithm"] == alg], key=lambda t: -t["score"])
        if not rows:
            continue
        best, second = rows[0], rows[1] if len(rows) > 1 else None
        w(
            f"| {LABELS[alg]} | {grid_text[alg]} | {fmt_hp(chosen[alg])} | {pct(best['score'])} | "
            + (f"{fmt_hp(second['hp'])}: {pct(second['score'])}" if second else "")
            + " |"
        )
        own = {k: v for k, v in chosen[alg].items() if k != "lr"}
        if any(abs(defaults[alg].get(k, v) - v) > 1e-12 for k, v in own.items()):
            mismatched.append(f"{LABELS[alg]} (code {defaults[alg]}, selected {own})")
    w("")
    if mismatched:
        w("**Note:** the selection differs from the code defaults for " + "; ".join(mismatched) + ".")
        w("")
    spread = {alg: [t["score"] for t in tune_table if t["algorithm"] == alg] for alg in ALGORITHMS}
    w(
        "Spread of the tuning score within each grid (worst-case %, min / median / max over the grid points): "
        + "; ".join(
            f"{LABELS[a]} {pct(min(s), digits=1)} / {pct(float(np.median(s)), digits=1)} / {pct(max(s), digits=1)}"
            for a, s in spread.items()
            if s
        )
        + "."
    )
    w("")
    # -- Table 3 shape
    w("## Table 3 shape: final-round per-client test accuracy (%)")
    w("")
    w(
        "Cells: average / worst-case / std, each mean ± std over seeds. *Paper* is the DRDM paper's "
        "MNIST-60k number (Table 3 for σ = 0, Table 4 for α = 0.1, σ = 0.5; no paper cell for α = 0.5, σ = 0.5 "
        "and none for FedDyn/FedProx). The paper's runs use 60k training images and 500 test images per client, "
        "so absolute numbers are not expected to match; the ordering is what is compared."
    )
    w("")
    for alpha, sigma in SETTINGS:
        runs_here = [r for r in main if (r["alpha"], r["sigma"]) == (alpha, sigma)]
        n_seeds = len({r["seed"] for r in runs_here})
        w(f"### α = {alpha}, σ = {sigma} ({n_seeds} seeds)")
        w("")
        w("| method | average | worst-case | std | paper (avg / worst / std) |")
        w("|---|---|---|---|---|")
        best_worst = max(
            ALGORITHMS, key=lambda a: np.mean([r["acc_worst"][-1] for r in runs_here if r["algorithm"] == a])
        )
        for alg in ALGORITHMS:
            runs = [r for r in runs_here if r["algorithm"] == alg]
            cells = [pct(*mean_std([r[k][-1] for r in runs])) for k in ("acc_mean", "acc_worst", "acc_std")]
            if alg == best_worst:
                cells[1] = f"**{cells[1]}**"
            paper = PAPER.get((alpha, sigma), {}).get(alg)
            w(
                f"| {LABELS[alg]} | {cells[0]} | {cells[1]} | {cells[2]} | "
                + ("{:.2f} / {:.2f} / {:.2f}".format(*paper) if paper else "—")
                + " |"
            )
        w("")
    # -- margins
    w("## Does DRDM beat the baselines on worst-case accuracy?")
    w("")
    w(verdict_line(main))
    w("")
    w(
        "Paired by seed (same split, partition and initial model): difference DRDM − baseline in final-round "
        "worst-case accuracy, in points, mean ± 95% t-interval half-width, and the number of seeds where DRDM is "
        "strictly higher. The last column repeats the comparison on the worst-case accuracy averaged over the "
        "last 10 rounds (less evaluation noise)."
    )
    w("")
    verdicts = {}
    for alpha, sigma in SETTINGS:
        w(f"**α = {alpha}, σ = {sigma}**")
        w("")
        w("| DRDM − … | final worst-case (pp) | DRDM higher | last-10-round worst-case (pp) |")
        w("|---|---|---|---|")
        drdm = {r["seed"]: r for r in main if r["algorithm"] == "drdm" and (r["alpha"], r["sigma"]) == (alpha, sigma)}
        rows = []
        for alg in BASELINES:
            other = {r["seed"]: r for r in main if r["algorithm"] == alg and (r["alpha"], r["sigma"]) == (alpha, sigma)}
            seeds = sorted(set(drdm) & set(other))
            d_final = [drdm[s]["acc_worst"][-1] - other[s]["acc_worst"][-1] for s in seeds]
            d_last = [np.mean(drdm[s]["acc_worst"][-10:]) - np.mean(other[s]["acc_worst"][-10:]) for s in seeds]
            m1, h1 = paired_ci(d_final)
            m2, h2 = paired_ci(d_last)
            wins = sum(d > 1e-12 for d in d_final)
            rows.append((alg, m1, h1, m2, h2))
            w(
                f"| {LABELS[alg]} | {100 * m1:+.2f} ± {100 * h1:.2f} | {wins}/{len(seeds)} | {100 * m2:+.2f} ± {100 * h2:.2f} |"
            )
        w("")
        verdicts[(alpha, sigma)] = rows
    # -- Figure 3
    w("## Figure 3 analogue: rounds to a worst-case accuracy target versus τ")
    w("")
    best_final = max(
        np.mean([r["acc_worst"][-1] for r in main if r["algorithm"] == a and (r["alpha"], r["sigma"]) == (al, si)])
        for a in ALGORITHMS
        for al, si in SETTINGS
    )
    reached_all = all(
        first_round(
            np.mean([r["acc_worst"] for r in fig3 if r["algorithm"] == "drdm" and r["tau"] == t], axis=0),
            PRIMARY_TARGET,
        )
        is not None
        for t in TAUS
    )
    w(
        f"Definition: the first round r at which the worst-case accuracy and its centred {WINDOW}-round moving average "
        f"(rounds r−{(WINDOW - 1) // 2} … r+{WINDOW // 2}, fewer at the ends of the run) are both at least the target, "
        "the definition `edgefl optimal-tau` uses (`edgefl.target.rounds_to_target`; never before a measured "
        "evaluation reached it). "
        '"Seed-mean curve" applies it to the worst-case curve '
        'averaged over seeds (the spec\'s §7 procedure); "per seed" applies it to each seed and gives mean ± std over '
        f"the seeds that reached the target within {ROUNDS} rounds (with how many did). Primary target "
        f"**{100 * PRIMARY_TARGET:.0f}%**, fixed before the report runs because the paper's 85% is not reachable here (the "
        f"highest seed-mean final worst-case accuracy of any method in any setting above is {pct(best_final)}%); "
        f"DRDM's seed-mean curve {'reaches' if reached_all else 'does NOT reach'} {100 * PRIMARY_TARGET:.0f}% at every τ. "
        "Because 70% turned out to be reached within about ten rounds whatever τ, the stricter 75% and 80% targets were "
        f"added after the runs (same runs, no re-selection). α = 0.1, σ = 0, η as selected, seeds {list(REPORT_SEEDS)}; "
        "FedAvg with its selected η is shown as a reference. The paper's numbers (85%, KMNIST/CNN assumed) are shown "
        "for the trend only."
    )
    w("")
    w(
        "| method | τ | "
        + " | ".join(f"{100 * t:.0f}%: seed-mean curve | {100 * t:.0f}%: per seed" for t in TARGETS)
        + " | paper (85%) |"
    )
    w("|---|---|" + "---|---|" * len(TARGETS) + "---|")
    fig3_summary = {}
    for alg in FIG3_ALGORITHMS:
        for tau in TAUS:
            runs = [r for r in fig3 if r["algorithm"] == alg and r["tau"] == tau]
            if not runs:
                continue
            cells = []
            for t in TARGETS:
                curve = first_round(np.mean([r["acc_worst"] for r in runs], axis=0), t)
                per = [first_round(r["acc_worst"], t) for r in runs]
                hit = [p for p in per if p is not None]
                cells.append("—" if curve is None else str(curve))
                cells.append(
                    f"{np.mean(hit):.1f} ± {np.std(hit, ddof=1) if len(hit) > 1 else 0:.1f} ({len(hit)}/{len(runs)})"
                    if hit
                    else f"— (0/{len(runs)})"
                )
                fig3_summary[(alg, tau, t)] = curve
            w(f"| {LABELS[alg]} | {tau} | " + " | ".join(cells) + f" | {PAPER_FIG3[tau] if alg == 'drdm' else '—'} |")
    w("")
    w("![rounds to target](figures/drdm-rounds-to-target.png)")
    w("")
    # -- discussion written from the numbers
    w("## What agrees with the paper and what does not")
    w("")
    for line in discussion(main, verdicts, fig3_summary):
        w(line)
    w("")
    if ablation:
        for line in investigation(chosen, ablation):
            w(line)
    w("## Curves")
    w("")
    for alpha, sigma in SETTINGS:
        w(f"![α = {alpha}, σ = {sigma}](figures/drdm-curves-alpha{alpha}-sigma{sigma}.png)")
        w("")
    w("![final worst-case per seed](figures/drdm-worst-case-seeds.png)")
    w("")
    w("## Reproduce")
    w("")
    w("```")
    w(".venv/bin/python experiments/reproduce_drdm.py               # everything (compute: see the top of this page)")
    w(".venv/bin/python experiments/reproduce_drdm.py --reuse-tuning  # keep docs/data/drdm-tuning.csv's selection")
    w("```")
    w("")
    w(
        "Every run is deterministic given its seed; re-running the command rewrites this page, the CSVs and the "
        "figures with identical numbers (timings aside). `--from-data` re-renders this page and the figures from "
        f"`docs/data/{BUNDLE}` (every run with its curves) without running anything; the tests check that the page "
        "is exactly that rendering and that a stored run reproduces."
    )
    return "\n".join(L) + "\n"


def verdict_line(main, alpha=0.1, sigma=0.0) -> str:
    """The headline: does DRDM have the best worst-case accuracy at alpha = 0.1, sigma = 0?"""
    runs = {
        a: {
            r["seed"]: r["acc_worst"][-1]
            for r in main
            if r["algorithm"] == a and (r["alpha"], r["sigma"]) == (alpha, sigma)
        }
        for a in ALGORITHMS
    }
    mean = {a: float(np.mean(list(v.values()))) for a, v in runs.items()}
    best = max(BASELINES, key=lambda a: mean[a])
    seeds = sorted(set(runs["drdm"]) & set(runs[best]))
    m, h = paired_ci([runs["drdm"][s] - runs[best][s] for s in seeds])
    if m - h > 0:
        verdict = (
            "**Yes**: DRDM has the best mean worst-case accuracy and the margin over the best baseline is significant"
        )
    elif m > 0:
        verdict = "**Not significantly**: DRDM has the best mean worst-case accuracy, but the margin's 95% interval includes 0"
    elif m + h < 0:
        verdict = f"**No**: {LABELS[best]} is significantly better than DRDM"
    else:
        verdict = f"**No**: {LABELS[best]} has the higher mean; the difference is not significant"
    return (
        f"**Headline (α = {alpha}, σ = {sigma}, {len(seeds)} seeds, final round):** {verdict}. DRDM "
        f"{pct(mean['drdm'])}% vs {LABELS[best]} {pct(mean[best])}%; paired difference DRDM − {LABELS[best]} = "
        f"{100 * m:+.2f} ± {100 * h:.2f} pp (95% CI)."
    )


def agreement(main, verdicts) -> list[str]:
    """Per paper cell and baseline: the sign of DRDM - baseline in worst-case accuracy, paper vs here."""
    out = ["| setting | DRDM − … | paper (pp) | here, final round (pp, 95% CI) | agreement |", "|---|---|---|---|---|"]
    for (alpha, sigma), paper in PAPER.items():
        for alg, m, h, _, _ in verdicts[(alpha, sigma)]:
            if alg not in paper:
                continue
            p = paper["drdm"][1] - paper[alg][1]
            if m - h > 0 or m + h < 0:
                agree = "yes" if (m > 0) == (p > 0) else "**no** (opposite, significant)"
            else:
                agree = "same sign, not significant" if (m > 0) == (p > 0) else "opposite sign, not significant"
            out.append(
                f"| α = {alpha}, σ = {sigma} | {LABELS[alg]} | {p:+.2f} | {100 * m:+.2f} ± {100 * h:.2f} | {agree} |"
            )
    return out


def discussion(main, verdicts, fig3_summary) -> list[str]:
    """Plain statements derived from the numbers (no hard-coded conclusions)."""
    out = ["Worst-case margins, DRDM minus each of the paper's baselines: the paper's sign against ours.", ""]
    out += agreement(main, verdicts)
    out.append("")

    def mean_of(alg, alpha, sigma, key):
        return float(
            np.mean([r[key][-1] for r in main if r["algorithm"] == alg and (r["alpha"], r["sigma"]) == (alpha, sigma)])
        )

    for alpha, sigma in SETTINGS:
        worst = {a: mean_of(a, alpha, sigma, "acc_worst") for a in ALGORITHMS}
        avg = {a: mean_of(a, alpha, sigma, "acc_mean") for a in ALGORITHMS}
        std = {a: mean_of(a, alpha, sigma, "acc_std") for a in ALGORITHMS}
        rank = sorted(ALGORITHMS, key=lambda a: -worst[a]).index("drdm") + 1
        rows = verdicts[(alpha, sigma)]
        sig_better = [LABELS[a] for a, m, h, _, _ in rows if m - h > 0]
        sig_worse = [LABELS[a] for a, m, h, _, _ in rows if m + h < 0]
        best_base = max(BASELINES, key=lambda a: worst[a])
        m, h = next((m, h) for a, m, h, _, _ in rows if a == best_base)
        paper = PAPER.get((alpha, sigma))
        s = (
            f"- **α = {alpha}, σ = {sigma}:** DRDM ranks {rank} of 7 on mean final worst-case accuracy "
            f"({pct(worst['drdm'])}% vs the best baseline {LABELS[best_base]} {pct(worst[best_base])}%; paired "
            f"difference {100 * m:+.2f} ± {100 * h:.2f} pp). "
        )
        s += (
            f"Significantly (95%) above: {', '.join(sig_better) or 'none'}; significantly below: "
            f"{', '.join(sig_worse) or 'none'}. "
        )
        s += (
            f"Average accuracy: DRDM {pct(avg['drdm'])}% (rank {sorted(ALGORITHMS, key=lambda a: -avg[a]).index('drdm') + 1}); "
            f"std: {pct(std['drdm'])} pp (rank {sorted(ALGORITHMS, key=lambda a: std[a]).index('drdm') + 1}, 1 = lowest). "
        )
        if paper:
            ranks = [
                sorted(paper, key=lambda a, k=k: sign * {"avg": avg, "worst": worst, "std": std}[k][a]).index("drdm")
                + 1
                for k, sign in (("avg", -1), ("worst", -1), ("std", 1))
            ]
            paper_ranks = [
                sorted(paper, key=lambda a, j=j, sign=sign: sign * paper[a][j]).index("drdm") + 1
                for j, sign in ((0, -1), (1, -1), (2, 1))
            ]
            s += (
                f"Among the paper's five methods (no FedDyn/FedProx), DRDM's rank in average / worst-case / std is "
                f"{ranks[0]} / {ranks[1]} / {ranks[2]} here and {paper_ranks[0]} / {paper_ranks[1]} / {paper_ranks[2]} "
                "in the paper."
            )
        out.append(s)
    fa = mean_of("fedavg", 0.1, 0.0, "acc_worst")
    weakest = min(ALGORITHMS, key=lambda a: mean_of(a, 0.1, 0.0, "acc_worst"))
    out.append(
        "- **FedAvg weakest in worst-case (paper claim 4)?** At α = 0.1, σ = 0: "
        + (
            f"yes, FedAvg has the lowest mean worst-case accuracy ({pct(fa)}%)."
            if weakest == "fedavg"
            else f"no, {LABELS[weakest]} is lower ({pct(mean_of(weakest, 0.1, 0.0, 'acc_worst'))}%) than FedAvg "
            f"({pct(fa)}%)."
        )
    )
    parts = []
    for alg in FIG3_ALGORITHMS:
        for t in TARGETS:
            vals = [fig3_summary.get((alg, tau, t)) for tau in TAUS]
            shown = " / ".join("—" if v is None else str(v) for v in vals)
            if any(v is None for v in vals):
                verdict = "not reached at every τ"
            elif all(a > b for a, b in zip(vals, vals[1:])):
                verdict = "strictly decreasing in τ, the paper's direction"
            elif all(a >= b for a, b in zip(vals, vals[1:])):
                verdict = "non-increasing in τ"
            else:
                verdict = "not monotone in τ"
            parts.append(f"{LABELS[alg]} to {100 * t:.0f}%: {shown} ({verdict})")
    out.append(
        "- **Figure 3 (more local steps, fewer rounds; paper 48 / 41 / 32 / 25 at τ = 5 / 10 / 20 / 30):** "
        "seed-mean-curve rounds at τ = " + " / ".join(str(t) for t in TAUS) + ": " + "; ".join(parts) + "."
    )
    return out


def investigation(chosen, ablation) -> list[str]:
    """The diagnostics section: DRDM's parts switched on/off, on validation seeds."""
    out = ["## Investigation: DRDM's parts, on validation seeds", ""]
    out.append(
        f"Post-hoc diagnostics at α = 0.1, σ = 0, τ = {TAU}, on the validation seeds {list(VALIDATION_SEEDS)} "
        "(the tuning seeds plus two; never the report seeds, and nothing here changed the reported configuration). "
        "Each row changes one thing in the selected DRDM point; Δ is the paired difference to the selected DRDM in "
        "the last-10-round worst-case accuracy (mean ± 95% CI). The last two columns are DRDM's own objective at the "
        "final model: the largest client training loss max_i f_i(w) (what the min-max problem minimises) and the "
        "mean client training loss."
    )
    out.append("")
    out.append(
        "| variant | final worst-case (%) | last-10 worst-case (%) | Δ vs selected (pp) | average (%) | "
        "max_i f_i | mean_i f_i | ‖∇ (1/N)Σ f_i‖ | ‖∇ Σ λ_i f_i‖ |"
    )
    out.append("|---|---|---|---|---|---|---|---|---|")
    ref = {r["seed"]: r for r in ablation if r["algorithm"] == "drdm" and r["hp"] == chosen["drdm"]}
    rows = [(label, "drdm", hp) for label, hp in ablations(chosen["drdm"])]
    rows += [(f"{LABELS[a]}, selected", a, chosen[a]) for a in ABLATION_BASELINES]
    stats = {}
    for label, alg, hp in rows:
        runs = [r for r in ablation if r["algorithm"] == alg and r["hp"] == hp]
        if not runs:
            continue
        last = {r["seed"]: float(np.mean(r["acc_worst"][-10:])) for r in runs}
        if alg == "drdm" and hp == chosen["drdm"]:
            delta = "—"
        else:
            m, h = paired_ci([last[s] - float(np.mean(ref[s]["acc_worst"][-10:])) for s in sorted(last) if s in ref])
            delta = f"{100 * m:+.2f} ± {100 * h:.2f}"
        cells = [
            pct(*mean_std([r["acc_worst"][-1] for r in runs])),
            pct(*mean_std(list(last.values()))),
            delta,
            pct(*mean_std([r["acc_mean"][-1] for r in runs])),
        ]
        for key, digits in (
            ("train_loss_worst", 3),
            ("train_loss_mean", 3),
            ("grad_uniform_norm", 4),
            ("grad_lambda_norm", 4),
        ):
            if all(key in r for r in runs):
                m, sd = mean_std([r[key] for r in runs])
                cells.append(f"{m:.{digits}f} ± {sd:.{digits}f}")
                stats[(label, key)] = m
            else:
                cells.append("—")
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    out.append("")
    sel, dyn = "DRDM, selected", "γ = 0 and uniform sampling without replacement (= FedDyn with α = μ)"
    if (
        (sel, "grad_lambda_norm") in stats
        and ("DRFA, selected", "grad_lambda_norm") in stats
        and (dyn, "train_loss_worst") in stats
    ):
        n = len(ablation[0].get("lambda_final", [])) or 30
        lam_max = float(
            np.mean([r["lambda_max"][-1] for r in ablation if r["algorithm"] == "drdm" and r["hp"] == chosen["drdm"]])
        )
        g_u, g_l = stats[(sel, "grad_uniform_norm")], stats[(sel, "grad_lambda_norm")]
        d_u, d_l = stats[("DRFA, selected", "grad_uniform_norm")], stats[("DRFA, selected", "grad_lambda_norm")]
        worse_or_equal = stats[(sel, "train_loss_worst")] >= 0.95 * stats[(dyn, "train_loss_worst")]
        out.append(
            f"**Reading.** DRDM's λ does move (final λ_max {lam_max:.3f} on average, against 1/N = {1 / n:.3f}), yet the "
            f"worst client's training loss of the selected DRDM ({stats[(sel, 'train_loss_worst')]:.3f}) is "
            + ("not lower than" if worse_or_equal else "lower than")
            + f" that of DRDM with no dual step and uniform sampling ({stats[(dyn, 'train_loss_worst')]:.3f}). "
            f"At its final λ, DRDM's model has ‖∇(1/N)Σf_i‖ = {g_u:.4f} and ‖∇Σλ_i f_i‖ = {g_l:.4f}: it is "
            + (
                "closer to stationary for the uniform average (ERM) than for the λ-weighted objective"
                if g_u < g_l
                else "closer to stationary for the λ-weighted objective than for the uniform average"
            )
            + f"; for DRFA, which has no drift correction, the two norms are {d_u:.4f} and {d_l:.4f} ("
            + ("the λ-weighted one is smaller" if d_l < d_u else "the uniform one is smaller")
            + "). "
            "Algorithm 1 explains a λ-independent destination: at a fixed point every participant returns w_i = w̄, so "
            "Alg. 2 l.4 gives g_i = ∇f_i(w̄) and Alg. 1 l.20 requires c = 0, while l.18 keeps c = (1/N)Σ_i g_i, the "
            "**equally weighted** mean of every client's latest g_i. The fixed point therefore solves "
            "(1/N)Σ_i ∇f_i(w̄) = 0, the ERM problem of eq. 1, whatever λ is: λ decides which clients are sampled (the "
            "path), not the stationary point. Weighting the g_i in c by Nλ_i would move the fixed point to "
            "Σ_i λ_i ∇f_i = 0, but that is not the paper's algorithm and is not run here."
        )
        out.append("")
    return out


def compact(run: dict, tuning: bool = False) -> dict:
    """A run as stored in the bundle: curves rounded to 6 decimals; tuning runs keep what selection uses."""
    out = {}
    for k, v in run.items():
        if isinstance(v, list):
            v = [round(x, 6) for x in v]
            if tuning and k == "acc_worst":
                v = v[-TUNE_LAST:]
            elif tuning and k in ("acc_mean", "acc_std"):
                v = v[-1:]
            elif tuning:
                continue
        out[k] = round(v, 6) if isinstance(v, float) else v
    return out


def save_bundle(path: Path, tuning, main, fig3, ablation, jobs):
    bundle = {
        "jobs": jobs,
        "tuning": [compact(r, tuning=True) for r in tuning],
        "main": [compact(r) for r in main],
        "fig3": [compact(r) for r in fig3],
        "ablation": [compact(r) for r in ablation],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with gzip.open(tmp, "wt") as handle:
        json.dump(bundle, handle)
    os.replace(tmp, path)


def load_bundle(path: Path) -> dict:
    """The runs, with their provenance (``produced``) when it is stored beside them."""
    with gzip.open(path, "rt") as handle:
        bundle = json.load(handle)
    if (path.parent / PRODUCED).is_file():
        bundle["produced"] = provenance.read(path.parent / PRODUCED)
    return bundle


def render(bundle: dict, fig_dir: Path | None = None) -> str:
    """The page (and, with ``fig_dir``, the figures) from a bundle of finished runs."""
    chosen, tune_table = select(bundle["tuning"])
    if fig_dir is not None:
        figures(bundle["main"], bundle["fig3"], fig_dir)
    args = argparse.Namespace(jobs=bundle["jobs"])
    timings = {
        phase: sum(r["wall_s"] for r in bundle[key])
        for phase, key in (("tune", "tuning"), ("main", "main"), ("fig3", "fig3"), ("ablation", "ablation"))
    }
    timings["fig3"] -= sum(r["wall_s"] for r in bundle["fig3"] if r["tau"] == TAU)  # tau = 10 reuses table runs
    return page(
        chosen, tune_table, bundle["main"], bundle["fig3"], timings, args, bundle["ablation"], bundle.get("produced")
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument(
        "--reuse-tuning", action="store_true", help="select from docs/data/drdm-tuning.csv, do not re-run the grid"
    )
    parser.add_argument("--cache", type=Path, default=None, help="folder for per-run JSON results (skip finished runs)")
    parser.add_argument("--quick", action="store_true", help="smoke test: tiny budget, outputs under /tmp/drdm-quick")
    parser.add_argument(
        "--from-data", action="store_true", help=f"run nothing: re-render the page and figures from docs/data/{BUNDLE}"
    )
    args = parser.parse_args(argv)

    global ROUNDS, REPORT_SEEDS, HEADLINE_SEEDS, TUNE_SEEDS, GRID, TAUS, VALIDATION_SEEDS
    doc, data_dir, fig_dir = DOC, DATA_DIR, FIG_DIR
    if args.quick:
        ROUNDS, REPORT_SEEDS, HEADLINE_SEEDS, TUNE_SEEDS, TAUS = 12, (0, 1), (0, 1), (100,), (5, 10)
        VALIDATION_SEEDS = (100, 101)
        GRID = {a: g[:2] for a, g in GRID.items()}
        out = Path("/tmp/drdm-quick")
        doc, data_dir, fig_dir = out / "reproduce-drdm.md", out / "data", out / "figures"

    if args.from_data:
        doc.write_text(render(load_bundle(data_dir / BUNDLE), fig_dir))
        print(f"== wrote {doc} from {data_dir / BUNDLE}", flush=True)
        return
    runner = Runner(args.jobs, args.cache)
    t0 = time.perf_counter()
    alpha, sigma = TUNE_SETTING
    if args.reuse_tuning:
        tuning = read_tuning_csv(data_dir / "drdm-tuning.csv")
        print(f"== tuning: reusing {len(tuning)} runs from {data_dir / 'drdm-tuning.csv'}", flush=True)
    else:
        jobs = [
            make_job("tune", alg, hp, alpha, sigma, seed)
            for alg in ALGORITHMS
            for hp in GRID[alg]
            for seed in TUNE_SEEDS
        ]
        tuning = runner.run(jobs, "tuning")
    chosen, tune_table = select(tuning)
    for alg in ALGORITHMS:
        print(f"   selected {alg:9s} {fmt_hp(chosen[alg])}", flush=True)

    jobs = []
    for a, s in SETTINGS:
        seeds = HEADLINE_SEEDS if (a, s) == (0.1, 0.0) else REPORT_SEEDS
        jobs += [make_job("table", alg, chosen[alg], a, s, seed) for alg in ALGORITHMS for seed in seeds]
    main_runs = runner.run(jobs, "table")

    jobs = [
        make_job("tau", alg, chosen[alg], 0.1, 0.0, seed, tau=tau)
        for alg in FIG3_ALGORITHMS
        for tau in TAUS
        for seed in REPORT_SEEDS
        if tau != TAU
    ]
    fig3 = runner.run(jobs, "tau sweep")
    # tau = 10 is the table's alpha = 0.1, sigma = 0 run on the report seeds: reuse it.
    fig3 += [
        dict(r, phase="tau")
        for r in main_runs
        if r["algorithm"] in FIG3_ALGORITHMS
        and r["tau"] == TAU
        and (r["alpha"], r["sigma"]) == (0.1, 0.0)
        and r["seed"] in REPORT_SEEDS
    ]

    variants = ablations(chosen["drdm"])
    jobs = [make_job("ablation", "drdm", hp, 0.1, 0.0, seed) for _, hp in variants for seed in VALIDATION_SEEDS]
    jobs += [
        make_job("ablation", alg, chosen[alg], 0.1, 0.0, seed)
        for alg in ABLATION_BASELINES
        for seed in VALIDATION_SEEDS
    ]
    ablation = runner.run(jobs, "ablations")

    write_data(None if args.reuse_tuning else tuning, main_runs, fig3 + ablation, data_dir)
    save_bundle(data_dir / BUNDLE, tuning, main_runs, fig3, ablation, args.jobs)
    provenance.write(data_dir / PRODUCED, provenance.current(COMMAND, time.perf_counter() - t0))
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(render(load_bundle(data_dir / BUNDLE), fig_dir))
    print(f"== wrote {doc} ({(time.perf_counter() - t0) / 60:.1f} min)", flush=True)


if __name__ == "__main__":
    main()
