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
The page's words and tables are experiments/templates/reproduce-drdm.md.j2; ``page`` computes its numbers.

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
import functools
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

from edgefl.sweeps.jobs import run_keyed  # noqa: E402
from edgefl.target import DEFAULT_WINDOW, Target, centred_moving_average, rounds_to_target  # noqa: E402
from experiments import pages, provenance  # noqa: E402

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
    """One run (tests/test_drdm.py reruns a reported one)."""
    return run_jobs([job])[0]


def run_jobs(jobs: list[dict]) -> list[dict]:
    """The runs of ``jobs`` (a worker process), which differ only in their seed (Runner.run groups them), trained
    together (edgefl.seed_axis.run_seeds: each run's numbers are its solo run's)."""
    import torch

    torch.set_num_threads(1)
    from edgefl.scenario import AlgorithmSection, scenario_from_dict
    from edgefl.seed_axis import run_seeds

    scenarios = []
    for job in jobs:
        raw = base_raw()
        raw["run"].update(seed=job["seed"], rounds=job["rounds"])
        raw["data"].update(dirichlet_alpha=job["alpha"], zipf_sigma=job["sigma"])
        common = {k: v for k, v in job["hp"].items() if k in AlgorithmSection.model_fields}
        own = {k: v for k, v in job["hp"].items() if k not in common}  # [algorithm.<name>]
        raw["algorithm"].update(
            name=job["algorithm"], local_steps=job["tau"], **common, **({job["algorithm"]: own} if own else {})
        )
        scenarios.append(scenario_from_dict(raw))
    started = time.perf_counter()
    outs = run_seeds(scenarios, run=functools.partial(measure, jobs[0]["phase"], jobs[0]["rounds"]))
    wall_s = (time.perf_counter() - started) / len(jobs)  # each run's share
    return [{**job, **out, "wall_s": wall_s} for job, out in zip(jobs, outs)]


def measure(phase: str, rounds: int, sim) -> dict:
    """What a run of ``phase`` records (its Simulation ``sim``, not yet run)."""
    import torch

    out: dict = {}
    if phase == "tune":
        # Selection only needs the last TUNE_LAST rounds: evaluate just those (evaluation draws no random
        # numbers, so the trajectory and these numbers are those of a fully evaluated run).
        from edgefl.metrics import evaluate_global

        rows = []
        for r in range(rounds):
            sim.engine.run_round(sim.algorithm, r)
            if r >= rounds - TUNE_LAST:
                rows.append(evaluate_global(sim.model, sim.data, sim.algorithm.model))
        out["acc_worst"] = [float(m["acc_worst"]) for m in rows]
        out["acc_mean"] = [float(rows[-1]["acc_mean"])]
        out["acc_std"] = [float(rows[-1]["acc_std"])]
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
        keyed = [{**job, "key": job_key(job)} for job in todo]  # (run_keyed's cache file: job_key)
        results = run_keyed(
            run_jobs,
            keyed,
            together=lambda job: json.dumps({k: v for k, v in job.items() if k not in ("key", "seed")}, sort_keys=True),
            workers=self.jobs,
            cache=self.cache,
            desc=f"== {title}",
            unit="run",
            describe=lambda job, res: self.describe(title, res),
        )
        # a cached run may have been computed for another phase (job_key leaves the phase out)
        return [
            {**{k: v for k, v in results[job["key"]].items() if k != "key"}, "phase": job["phase"]} for job in keyed
        ]


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


# -- the page: numbers from the runs here, words and tables in experiments/templates/reproduce-drdm.md.j2 --
def runs_at(runs, alg=None, alpha=0.1, sigma=0.0) -> list[dict]:
    return [r for r in runs if (alg is None or r["algorithm"] == alg) and (r["alpha"], r["sigma"]) == (alpha, sigma)]


def final_mean(runs, alg, alpha, sigma, key) -> float:
    """Seed mean of the final-round `key` of one algorithm at one setting."""
    return float(np.mean([r[key][-1] for r in runs_at(runs, alg, alpha, sigma)]))


def tuning_rows(chosen, tune_table) -> list[dict]:
    """Per algorithm: its grid, the selected point, its score and the runner-up."""
    rows = []
    for alg in ALGORITHMS:
        ranked = sorted([t for t in tune_table if t["algorithm"] == alg], key=lambda t: -t["score"])
        if ranked:
            grid = grid_description(GRID[alg]) + (" (dual step σ = τγ, θ = 1, ρ = 0)" if alg == "scaff_pd" else "")
            second = ranked[1] if len(ranked) > 1 else None
            rows.append({"label": LABELS[alg], "grid": grid, "chosen": chosen[alg], "score": ranked[0]["score"]})
            rows[-1]["second"] = second
    return rows


def tuning_spread(tune_table) -> list[dict]:
    """Per algorithm: min, median and max of the tuning score over its grid points."""
    out = []
    for alg in ALGORITHMS:
        scores = [t["score"] for t in tune_table if t["algorithm"] == alg]
        if scores:
            out.append(
                {"label": LABELS[alg], "min": min(scores), "median": float(np.median(scores)), "max": max(scores)}
            )
    return out


def default_mismatches(chosen) -> list[str]:
    """Algorithms whose selected own hyperparameters differ from the code defaults."""
    defaults = code_defaults()
    out = []
    for alg in ALGORITHMS:
        if alg not in chosen:
            continue
        own = {k: v for k, v in chosen[alg].items() if k != "lr"}
        if any(abs(defaults[alg].get(k, v) - v) > 1e-12 for k, v in own.items()):
            out.append(f"{LABELS[alg]} (code {defaults[alg]}, selected {own})")
    return out


def accuracy_tables(main) -> list[dict]:
    """Table 3 shape: per setting and algorithm, (mean, std) over seeds of the final average, worst and std."""
    tables = []
    for alpha, sigma in SETTINGS:
        here = runs_at(main, None, alpha, sigma)
        best = max(ALGORITHMS, key=lambda a: np.mean([r["acc_worst"][-1] for r in here if r["algorithm"] == a]))
        rows = []
        for alg in ALGORITHMS:
            runs = [r for r in here if r["algorithm"] == alg]
            cells = {k: mean_std([r[k][-1] for r in runs]) for k in ("acc_mean", "acc_worst", "acc_std")}
            rows.append({"label": LABELS[alg], "best": alg == best, "paper": PAPER.get((alpha, sigma), {}).get(alg)})
            rows[-1].update(cells)
        tables.append({"alpha": alpha, "sigma": sigma, "seeds": len({r["seed"] for r in here}), "rows": rows})
    return tables


def headline(main, alpha=0.1, sigma=0.0) -> dict:
    """Does DRDM have the best worst-case accuracy at alpha = 0.1, sigma = 0? The paired margin over the
    best baseline and what it says: "yes", "not significant" (DRDM ahead, CI includes 0), "no" (the baseline
    significantly better) or "no, not significant"."""
    runs = {a: {r["seed"]: r["acc_worst"][-1] for r in runs_at(main, a, alpha, sigma)} for a in ALGORITHMS}
    mean = {a: float(np.mean(list(v.values()))) for a, v in runs.items()}
    best = max(BASELINES, key=lambda a: mean[a])
    seeds = sorted(set(runs["drdm"]) & set(runs[best]))
    m, h = paired_ci([runs["drdm"][s] - runs[best][s] for s in seeds])
    verdict = "yes" if m - h > 0 else "not significant" if m > 0 else "no" if m + h < 0 else "no, not significant"
    return {
        "alpha": alpha,
        "sigma": sigma,
        "seeds": len(seeds),
        "verdict": verdict,
        "best": LABELS[best],
        "drdm_mean": mean["drdm"],
        "best_mean": mean[best],
        "margin": (m, h),
    }


def margins(main) -> dict[tuple, list[dict]]:
    """Per setting and baseline, paired by seed: DRDM - baseline in final and last-10-round worst-case
    accuracy (mean, 95 % half-width) and the seeds where DRDM is strictly higher."""
    out = {}
    for alpha, sigma in SETTINGS:
        drdm = {r["seed"]: r for r in runs_at(main, "drdm", alpha, sigma)}
        rows = []
        for alg in BASELINES:
            other = {r["seed"]: r for r in runs_at(main, alg, alpha, sigma)}
            seeds = sorted(set(drdm) & set(other))
            d_final = [drdm[s]["acc_worst"][-1] - other[s]["acc_worst"][-1] for s in seeds]
            d_last = [np.mean(drdm[s]["acc_worst"][-10:]) - np.mean(other[s]["acc_worst"][-10:]) for s in seeds]
            rows.append(
                {
                    "algorithm": alg,
                    "label": LABELS[alg],
                    "final": paired_ci(d_final),
                    "last": paired_ci(d_last),
                    "wins": sum(d > 1e-12 for d in d_final),
                    "seeds": len(seeds),
                }
            )
        out[(alpha, sigma)] = rows
    return out


def fig3_rows(fig3) -> list[dict]:
    """Per algorithm and tau, per target: rounds to it of the seed-mean curve (None: never) and per seed."""
    rows = []
    for alg in FIG3_ALGORITHMS:
        for tau in TAUS:
            runs = [r for r in fig3 if r["algorithm"] == alg and r["tau"] == tau]
            if not runs:
                continue
            cells = []
            for t in TARGETS:
                hit = [p for p in (first_round(r["acc_worst"], t) for r in runs) if p is not None]
                cells.append(
                    {
                        "curve": first_round(np.mean([r["acc_worst"] for r in runs], axis=0), t),
                        "hit": (float(np.mean(hit)), float(np.std(hit, ddof=1)) if len(hit) > 1 else 0.0)
                        if hit
                        else None,
                        "hits": len(hit),
                        "seeds": len(runs),
                    }
                )
            rows.append({"algorithm": alg, "label": LABELS[alg], "tau": tau, "cells": cells})
            rows[-1]["paper"] = PAPER_FIG3[tau] if alg == "drdm" else None
    return rows


def agreement_rows(verdicts) -> list[dict]:
    """Per paper cell and baseline: the sign of DRDM - baseline in worst-case accuracy, paper vs here."""
    rows = []
    for (alpha, sigma), paper in PAPER.items():
        for row in verdicts[(alpha, sigma)]:
            if row["algorithm"] not in paper:
                continue
            p = paper["drdm"][1] - paper[row["algorithm"]][1]
            m, h = row["final"]
            significant, same = m - h > 0 or m + h < 0, (m > 0) == (p > 0)
            agree = (
                ("yes" if same else "**no** (opposite, significant)")
                if significant
                else ("same sign, not significant" if same else "opposite sign, not significant")
            )
            rows.append({"alpha": alpha, "sigma": sigma, "label": row["label"], "paper": p, "here": (m, h)})
            rows[-1]["agree"] = agree
    return rows


def setting_findings(main, verdicts) -> list[dict]:
    """Per setting: DRDM's ranks in worst-case, average and std accuracy, the baselines it is significantly
    above or below, and (where the paper has the cell) its ranks among the paper's five methods, here and there."""
    out = []
    for alpha, sigma in SETTINGS:
        worst = {a: final_mean(main, a, alpha, sigma, "acc_worst") for a in ALGORITHMS}
        avg = {a: final_mean(main, a, alpha, sigma, "acc_mean") for a in ALGORITHMS}
        std = {a: final_mean(main, a, alpha, sigma, "acc_std") for a in ALGORITHMS}
        rows = verdicts[(alpha, sigma)]
        best_base = max(BASELINES, key=lambda a: worst[a])
        finding = {
            "alpha": alpha,
            "sigma": sigma,
            "rank": sorted(ALGORITHMS, key=lambda a: -worst[a]).index("drdm") + 1,
            "worst": worst["drdm"],
            "best": LABELS[best_base],
            "best_worst": worst[best_base],
            "margin": next(r["final"] for r in rows if r["algorithm"] == best_base),
            "above": [r["label"] for r in rows if r["final"][0] - r["final"][1] > 0],
            "below": [r["label"] for r in rows if r["final"][0] + r["final"][1] < 0],
            "avg": avg["drdm"],
            "avg_rank": sorted(ALGORITHMS, key=lambda a: -avg[a]).index("drdm") + 1,
            "std": std["drdm"],
            "std_rank": sorted(ALGORITHMS, key=lambda a: std[a]).index("drdm") + 1,
            "ranks": None,
            "paper_ranks": None,
        }
        paper = PAPER.get((alpha, sigma))
        if paper:
            here = {"avg": avg, "worst": worst, "std": std}
            finding["ranks"] = [
                sorted(paper, key=lambda a, k=k: sign * here[k][a]).index("drdm") + 1
                for k, sign in (("avg", -1), ("worst", -1), ("std", 1))
            ]
            finding["paper_ranks"] = [
                sorted(paper, key=lambda a, j=j, sign=sign: sign * paper[a][j]).index("drdm") + 1
                for j, sign in ((0, -1), (1, -1), (2, 1))
            ]
        out.append(finding)
    return out


def tau_trends(fig3_table) -> list[dict]:
    """Per algorithm and target: the seed-mean-curve rounds at each tau and how they move with tau."""
    out = []
    for alg in FIG3_ALGORITHMS:
        for k, t in enumerate(TARGETS):
            by_tau = {row["tau"]: row["cells"][k]["curve"] for row in fig3_table if row["algorithm"] == alg}
            vals = [by_tau.get(tau) for tau in TAUS]
            if any(v is None for v in vals):
                trend = "not reached at every τ"
            elif all(a > b for a, b in zip(vals, vals[1:])):
                trend = "strictly decreasing in τ, the paper's direction"
            elif all(a >= b for a, b in zip(vals, vals[1:])):
                trend = "non-increasing in τ"
            else:
                trend = "not monotone in τ"
            out.append({"label": LABELS[alg], "target": t, "rounds": vals, "trend": trend})
    return out


def ablation_rows(chosen, ablation) -> list[dict]:
    """The diagnostics table: DRDM's parts switched on/off (and the selected baselines), on validation
    seeds; each statistic a (mean, std) over seeds, the delta a paired (mean, 95 % half-width) or None."""
    ref = {r["seed"]: r for r in ablation if r["algorithm"] == "drdm" and r["hp"] == chosen["drdm"]}
    variants = [(label, "drdm", hp) for label, hp in ablations(chosen["drdm"])]
    variants += [(f"{LABELS[a]}, selected", a, chosen[a]) for a in ABLATION_BASELINES]
    rows = []
    for label, alg, hp in variants:
        runs = [r for r in ablation if r["algorithm"] == alg and r["hp"] == hp]
        if not runs:
            continue
        last = {r["seed"]: float(np.mean(r["acc_worst"][-10:])) for r in runs}
        delta = None
        if not (alg == "drdm" and hp == chosen["drdm"]):
            delta = paired_ci([last[s] - float(np.mean(ref[s]["acc_worst"][-10:])) for s in sorted(last) if s in ref])
        row = {
            "label": label,
            "final": mean_std([r["acc_worst"][-1] for r in runs]),
            "last": mean_std(list(last.values())),
            "delta": delta,
            "avg": mean_std([r["acc_mean"][-1] for r in runs]),
        }
        for key in ("train_loss_worst", "train_loss_mean", "grad_uniform_norm", "grad_lambda_norm"):
            row[key] = mean_std([r[key] for r in runs]) if all(key in r for r in runs) else None
        rows.append(row)
    return rows


def reading(chosen, ablation, rows) -> dict | None:
    """The numbers of the diagnostics' reading paragraph, or None when a row it compares is missing."""
    stats = {row["label"]: row for row in rows}
    sel, dyn, drfa = (
        "DRDM, selected",
        "γ = 0 and uniform sampling without replacement (= FedDyn with α = μ)",
        "DRFA, selected",
    )
    if not (
        stats.get(sel, {}).get("grad_lambda_norm")
        and stats.get(drfa, {}).get("grad_lambda_norm")
        and stats.get(dyn, {}).get("train_loss_worst")
    ):
        return None
    selected = [r for r in ablation if r["algorithm"] == "drdm" and r["hp"] == chosen["drdm"]]
    return {
        "lambda_max": float(np.mean([r["lambda_max"][-1] for r in selected])),
        "clients": len(ablation[0].get("lambda_final", [])) or 30,
        "loss_worst": stats[sel]["train_loss_worst"][0],
        "loss_worst_no_dual": stats[dyn]["train_loss_worst"][0],
        "grad_uniform": stats[sel]["grad_uniform_norm"][0],
        "grad_lambda": stats[sel]["grad_lambda_norm"][0],
        "drfa_grad_uniform": stats[drfa]["grad_uniform_norm"][0],
        "drfa_grad_lambda": stats[drfa]["grad_lambda_norm"][0],
    }


def page(chosen, tune_table, main, fig3, timings, jobs, ablation=(), produced=None) -> str:
    """The page: every number it shows computed here from the runs, written out by the template."""
    verdicts = margins(main)
    fig3_table = fig3_rows(fig3)
    drdm_curve = {
        tau: np.mean([r["acc_worst"] for r in fig3 if r["algorithm"] == "drdm" and r["tau"] == tau], axis=0)
        for tau in TAUS
    }
    ablation_table = ablation_rows(chosen, ablation) if ablation else []
    weakest = min(ALGORITHMS, key=lambda a: final_mean(main, a, 0.1, 0.0, "acc_worst"))
    return pages.render(
        "reproduce-drdm.md.j2",
        filters={"hp": fmt_hp},
        produced=produced,
        command=COMMAND,
        bundle=BUNDLE,
        timings=timings,
        total_s=sum(timings.values()),
        jobs=jobs,
        per_run=float(np.mean([r["wall_s"] for r in main])),
        tau=TAU,
        rounds=ROUNDS,
        taus=TAUS,
        targets=TARGETS,
        primary_target=PRIMARY_TARGET,
        window=WINDOW,
        grid_points=len(GRID["drdm"]),
        tune_seeds=list(TUNE_SEEDS),
        tune_runs=len(GRID["drdm"]) * len(TUNE_SEEDS) * len(ALGORITHMS),
        tune_last=TUNE_LAST,
        report_seeds=list(REPORT_SEEDS),
        validation_seeds=list(VALIDATION_SEEDS),
        settings=SETTINGS,
        tuning=tuning_rows(chosen, tune_table),
        mismatched=default_mismatches(chosen),
        spread=tuning_spread(tune_table),
        accuracy=accuracy_tables(main),
        headline=headline(main),
        margins=[{"alpha": a, "sigma": s, "rows": verdicts[(a, s)]} for a, s in SETTINGS],
        best_final=max(final_mean(main, a, al, si, "acc_worst") for a in ALGORITHMS for al, si in SETTINGS),
        reached_all=all(first_round(drdm_curve[t], PRIMARY_TARGET) is not None for t in TAUS),
        fig3=fig3_table,
        agreement=agreement_rows(verdicts),
        findings=setting_findings(main, verdicts),
        fedavg_worst=final_mean(main, "fedavg", 0.1, 0.0, "acc_worst"),
        weakest={
            "algorithm": weakest,
            "label": LABELS[weakest],
            "worst": final_mean(main, weakest, 0.1, 0.0, "acc_worst"),
        },
        trends=tau_trends(fig3_table),
        ablation=ablation_table,
        reading=reading(chosen, ablation, ablation_table) if ablation else None,
    )


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
    timings = {
        phase: sum(r["wall_s"] for r in bundle[key])
        for phase, key in (("tune", "tuning"), ("main", "main"), ("fig3", "fig3"), ("ablation", "ablation"))
    }
    timings["fig3"] -= sum(r["wall_s"] for r in bundle["fig3"] if r["tau"] == TAU)  # tau = 10 reuses table runs
    return page(
        chosen,
        tune_table,
        bundle["main"],
        bundle["fig3"],
        timings,
        bundle["jobs"],
        bundle["ablation"],
        bundle.get("produced"),
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
