"""Reproduce partial model averaging vs periodic averaging (CPU-sized); write
docs/reproduce-partial-averaging.md.

    .venv/bin/python experiments/reproduce_partial_averaging.py   # 2 worker processes

A CPU-sized version of the experiments of "Partial Model Averaging in Federated Learning:
Performance Guarantees and Benefits" (section "Experiments"), on MNIST-10k
(Fashion-MNIST is not available here) and with a 784-64-10 MLP (~51K values) instead of the
~100K-value CNN (the model zoo's CNN has 794K values, too slow for this CPU budget):
- 32 workers, IID (250 training images each), full participation, batch 32, momentum 0.9,
  weight decay 1e-4, K = 960 iterations, channel-wise partition;
- tau in {2, 8}; the learning rate per (method, tau) from {0.02, 0.05, 0.1} by the final accuracy
  of seed 0 (the mean of the last 5 evaluations); then seeds 1 and 2 with the chosen rate;
- tau = 16 (the spec: "add 16 if the gap is small"), tau = 8 again with 16 workers, and with
  Dirichlet(0.5) class mixes (non-IID), 3 seeds each, with the learning rates chosen for tau = 8.
Metric: accuracy of the virtual average u_k = mean_i x_k^i on every worker's test split (mean over
workers), every 16 iterations; the discrepancy (1/m) sum_i ||u_k - x_k^i||^2 at the same points.
Options: --jobs N (default 2), --cache DIR, --quick (smoke test, writes under /tmp).
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

from edgefl.sweeps.jobs import run_keyed  # noqa: E402
from experiments import provenance  # noqa: E402
from experiments.algorithm_keys import with_own_table  # noqa: E402

MNIST_DIR = str(REPO.parent / "shared" / "datasets" / "mnist")  # shared/ beside the checkout
METHODS = {"partial_avg": "partial", "periodic_avg": "periodic"}
COLORS = {"partial_avg": "tab:red", "periodic_avg": "tab:blue"}
LRS = (0.02, 0.05, 0.1)
EVAL_ITERS = 16
LAST = 5  # evaluations averaged for the "final" accuracy

# Table 1 of the paper (IID, periodic -> partial), for the page.
PAPER_T1 = [
    ("CIFAR-10 ResNet-20", "τ=2: 91.19→91.89 (+0.70)", "τ=4: 89.80→90.58 (+0.78)", "τ=8: 85.70→88.17 (+2.47)"),
    ("F-MNIST VGG-11", "τ=2: 92.33→94.01 (+1.68)", "τ=4: 91.80→93.03 (+1.23)", "τ=8: 90.48→92.21 (+1.73)"),
    ("IMDB LSTM", "τ=2: 88.14→89.22 (+1.08)", "τ=4: 88.78→89.27 (+0.49)", "τ=8: 88.53→88.74 (+0.21)"),
]


def scenario(method, tau, lr, seed, iters, workers=32, alpha=None):
    data = {"name": "mnist", "dir": MNIST_DIR, "num_clients": workers}
    if alpha is not None:
        data["dirichlet_alpha"] = alpha
    return {
        "run": {
            "seed": seed,
            "rounds": iters // tau,
            "engine": "ideal",
            "threads": 1,
            "eval_every": max(1, EVAL_ITERS // tau),
        },
        "data": data,
        "model": {"name": "mlp", "hidden": 64},
        "algorithm": {
            "name": method,
            "local_steps": tau,
            "clients_per_round": workers,
            "lr": lr,
            "batch_size": 32,
            "momentum": 0.9,
            "weight_decay": 1e-4,
            "partition": "channel",
        },
    }


def run_job(job):
    import torch

    torch.set_num_threads(1)
    from edgefl.runner import Simulation
    from edgefl.scenario import scenario_from_dict

    started = time.time()
    s = scenario_from_dict(with_own_table(job["scenario"]))
    sim = Simulation(s)
    result = sim.run(progress=False)
    tau = s.algorithm.local_steps
    rows = [
        {
            "iteration": r["round"] * tau,
            "acc": r["acc_mean"],
            "loss": r["loss"],
            "discrepancy": r["discrepancy"],
            "discrepancy_peak": r.get("discrepancy_peak"),
        }
        for r in result.metrics
        if r.get("acc_mean") is not None
    ]
    return {
        "key": job["key"],
        "rows": rows,
        "wall_s": time.time() - started,
        "imbalance": sim.algorithm.metrics()["partition_imbalance"],
    }


def key_of(sc):
    return hashlib.sha1(json.dumps(sc, sort_keys=True).encode()).hexdigest()[:16]


def make_job(exp, method, tau, lr, seed, iters, **kw):
    sc = scenario(method, tau, lr, seed, iters, **kw)
    return {
        "exp": exp,
        "method": method,
        "tau": tau,
        "lr": lr,
        "seed": seed,
        "scenario": sc,
        "key": f"{exp}-{method}-{tau}-{lr}-{seed}-{key_of(sc)}",
        "label": f"{exp} {method} tau={tau} lr={lr} seed {seed}",
    }


def final_acc(res):
    return float(np.mean([r["acc"] for r in res["rows"][-LAST:]]))


def fmt(v, d=2):
    v = np.asarray(v, float)
    return f"{v.mean():.{d}f}" if v.size == 1 else f"{v.mean():.{d}f} ± {v.std(ddof=1):.{d}f}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    iters, taus, seeds = 960, (2, 8), (0, 1, 2)
    doc, fig_dir = REPO / "docs" / "reproduce-partial-averaging.md", REPO / "docs" / "figures"
    if args.quick:
        iters, seeds = 64, (0, 1)
        doc = Path("/tmp/edgefl-quick/reproduce-partial-averaging.md")
        fig_dir = doc.parent
    fig_dir.mkdir(parents=True, exist_ok=True)
    started = time.time()
    # phase 1: learning-rate selection on seed 0
    grid = [make_job("iid", m, t, lr, seeds[0], iters) for m in METHODS for t in taus for lr in LRS]
    results = run_keyed(run_job, grid, workers=args.jobs, cache=args.cache)
    chosen = {}
    for m in METHODS:
        for t in taus:
            scores = {j["lr"]: final_acc(results[j["key"]]) for j in grid if j["method"] == m and j["tau"] == t}
            chosen[(m, t)] = max(scores, key=scores.get)
    print("chosen learning rates:", {f"{m} tau={t}": lr for (m, t), lr in chosen.items()}, flush=True)
    # phase 2: the other seeds, and the tau = 8 variants
    rest = []
    for m in METHODS:
        for t in taus:
            rest += [make_job("iid", m, t, chosen[(m, t)], s, iters) for s in seeds[1:]]
        rest += [
            make_job("iid", m, 16, chosen[(m, 8)], s, iters) for s in seeds
        ]  # the spec: add 16 if the gap is small
        rest += [make_job("m16", m, 8, chosen[(m, 8)], s, iters, workers=16) for s in seeds]
        rest += [make_job("dirichlet", m, 8, chosen[(m, 8)], s, iters, alpha=0.5) for s in seeds]
    results.update(run_keyed(run_job, rest, workers=args.jobs, cache=args.cache))
    total = time.time() - started
    jobs = [j for j in grid if j["lr"] == chosen[(j["method"], j["tau"])]] + rest
    page = render(results, grid, jobs, chosen, iters, taus, seeds, fig_dir, total, args)
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(page)
    print(f"wrote {doc} ({total / 60:.1f} min)")
    return 0


def curves(results, jobs, exp, method, tau, metric):
    runs = [results[j["key"]]["rows"] for j in jobs if j["exp"] == exp and j["method"] == method and j["tau"] == tau]
    x = np.array([r["iteration"] for r in runs[0]])
    return x, np.array([[r[metric] for r in run] for run in runs], float)


def finals(results, jobs, exp, method, tau):
    return np.array(
        [final_acc(results[j["key"]]) for j in jobs if j["exp"] == exp and j["method"] == method and j["tau"] == tau]
    )


def plot(results, jobs, panels, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(4.3 * len(panels), 3.4))
    for ax, (exp, tau, metric, title) in zip(np.atleast_1d(axes), panels):
        for m, name in METHODS.items():
            x, v = curves(results, jobs, exp, m, tau, metric)
            mean, std = v.mean(0), v.std(0)
            ax.plot(x, mean, color=COLORS[m], label=name, lw=1.3)
            ax.fill_between(x, mean - std, mean + std, color=COLORS[m], alpha=0.2, lw=0)
        if metric == "acc":
            lo = min(np.percentile(curves(results, jobs, exp, m, tau, metric)[1], 10) for m in METHODS)
            ax.set_ylim(max(lo, 0.5), None)
        if metric.startswith("discrepancy"):
            ax.set_yscale("log")
        ax.set_xlabel("iteration k")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def render(results, grid, jobs, chosen, iters, taus, seeds, fig_dir, total_s, args):
    rel = "figures" if not args.quick else "."
    plot(
        results,
        jobs,
        [
            ("iid", 2, "acc", "IID, τ = 2: accuracy of u_k"),
            ("iid", 8, "acc", "IID, τ = 8: accuracy of u_k"),
            ("iid", 16, "acc", "IID, τ = 16: accuracy of u_k"),
            ("iid", 8, "discrepancy_peak", "IID, τ = 8: peak discrepancy per round"),
        ],
        fig_dir / "pavg-iid.png",
    )
    plot(
        results,
        jobs,
        [("m16", 8, "acc", "16 workers, τ = 8"), ("dirichlet", 8, "acc", "Dirichlet(0.5), τ = 8")],
        fig_dir / "pavg-variants.png",
    )
    imbalance = {
        t: next(results[j["key"]]["imbalance"] for j in jobs if j["tau"] == t and j["method"] == "partial_avg")
        for t in taus
    }
    used = {j["key"] for j in grid} | {j["key"] for j in jobs}
    run_min = sum(results[k]["wall_s"] for k in used) / 60
    out = [
        "# Reproduction: partial model averaging (Lee, Sahu, He, Avestimehr)",
        "",
        provenance.line(
            provenance.current(
                ".venv/bin/python experiments/reproduce_partial_averaging.py" + (" --quick" if args.quick else ""),
                total_s,
            )
        ),
        "",
        "Regenerate this page (`--cache DIR` reuses finished runs, `--jobs N` sets the worker processes):",
        "",
        "    .venv/bin/python experiments/reproduce_partial_averaging.py",
        "",
        f"Seeds {', '.join(map(str, seeds))}; values are mean ± standard deviation over the seeds, accuracies in %. "
        f"Learning only (ideal engine). The {len(used)} runs took {run_min:.0f} min in total (sum of their wall "
        f"times on a 2-core machine shared with other jobs); this page's last generation took {total_s / 60:.1f} min (runs found in a --cache are not re-run).",
        "",
        'Paper: "Partial Model Averaging in Federated Learning: Performance Guarantees and Benefits" (Lee, Sahu, '
        'He, Avestimehr), Algorithm 1 and section "Experiments"; '
        "implementation: `algorithms/partial_avg.py` (`partial_avg`, "
        "`periodic_avg`); tests `tests/test_partial_avg.py` (τ = 1 equivalence, every value averaged once per τ "
        "iterations, same bytes / τ× messages on the event log, cross-edge accounting).",
        "",
        "## Set-up (CPU-sized version of the spec's suggested experiment)",
        "",
        f"MNIST-10k (8,000 training / 2,000 test images), 32 workers with 250 images each (IID), a 784-64-10 MLP "
        f"(50,890 values), batch 32, momentum 0.9 (local, never sent), weight decay 1e-4, K = {iters} iterations, "
        f"channel-wise partition (largest subset / (d/τ): "
        + ", ".join(f"τ={t}: {imbalance[t]:.3f}" for t in taus)
        + "). "
        "One round = τ iterations; partial averaging exchanges one subset (≈ d/τ values) per iteration, periodic "
        "averaging all d values every τ iterations: the same computation and the same volume. The learning rate of "
        "each (method, τ) is chosen from {0.02, 0.05, 0.1} by the final accuracy of seed 0:",
        "",
        "| method | " + " | ".join(f"τ = {t}" for t in taus) + " |",
        "|---|" + "---|" * len(taus),
    ]
    for m, name in METHODS.items():
        row = []
        for t in taus:
            scores = {j["lr"]: final_acc(results[j["key"]]) for j in grid if j["method"] == m and j["tau"] == t}
            row.append(
                ", ".join(
                    f"{'**' if lr == chosen[(m, t)] else ''}{lr}: {100 * a:.2f}{'**' if lr == chosen[(m, t)] else ''}"
                    for lr, a in scores.items()
                )
            )
        out.append(f"| {name} | " + " | ".join(row) + " |")
    out += [
        "",
        "## Results",
        "",
        "![iid](" + rel + "/pavg-iid.png)",
        "",
        "![variants](" + rel + "/pavg-variants.png)",
        "",
        f"Final accuracy (mean of the last {LAST} evaluations, i.e. the last {LAST * EVAL_ITERS} iterations):",
        "",
        "| setting | periodic | partial | gap (partial − periodic) | gap / seed spread | final training loss, periodic → partial |",
        "|---|---|---|---|---|---|",
    ]
    verdicts = {}
    settings = [("iid", t, f"IID, 32 workers, τ = {t}") for t in taus] + [
        ("iid", 16, "IID, 32 workers, τ = 16 (τ = 8's rates)"),
        ("m16", 8, "IID, 16 workers, τ = 8"),
        ("dirichlet", 8, "Dirichlet(0.5), 32 workers, τ = 8"),
    ]
    for exp, t, label in settings:
        p = 100 * finals(results, jobs, exp, "partial_avg", t)
        q = 100 * finals(results, jobs, exp, "periodic_avg", t)
        gap = p.mean() - q.mean()
        spread = max(p.std(ddof=1), q.std(ddof=1)) if len(p) > 1 else float("nan")
        verdicts[(exp, t)] = (gap, spread)
        loss_p = curves(results, jobs, exp, "partial_avg", t, "loss")[1][:, -1]
        loss_q = curves(results, jobs, exp, "periodic_avg", t, "loss")[1][:, -1]
        out.append(
            f"| {label} | {fmt(q)} | {fmt(p)} | {gap:+.2f} | {gap / spread:+.1f} | "
            f"{fmt(loss_q, 4)} → {fmt(loss_p, 4)} |"
        )
    # accuracy over iterations at tau = 8 (IID): how often is partial ahead?
    x, pa = curves(results, jobs, "iid", "partial_avg", 8, "acc")
    _, pe = curves(results, jobs, "iid", "periodic_avg", 8, "acc")
    ahead = float(np.mean(pa.mean(0) > pe.mean(0)))
    _, dp = curves(results, jobs, "iid", "partial_avg", 8, "discrepancy_peak")
    _, dq = curves(results, jobs, "iid", "periodic_avg", 8, "discrepancy_peak")
    gap8, spread8 = verdicts[("iid", 8)]
    lower = float(np.mean(dp.mean(0) < dq.mean(0)))
    out += [
        "",
        "Discrepancy (1/m) Σ_i ‖u_k − x_k^i‖², IID, τ = 8: periodic averaging's is 0 right after each "
        "averaging and peaks just before it (the sawtooth); the plotted peak per round is measured after the local "
        "steps and before averaging, for partial averaging the largest over the round's τ iterations. Mean peak: "
        f"partial {dp.mean():.3g}, periodic {dq.mean():.3g}; partial's peak is lower at {100 * lower:.0f} % of the "
        "evaluation points (the paper: low and flat under partial averaging, high-peaked under periodic).",
        "",
        "## Verdict",
        "",
        f"- Paper's main claim (equal or higher accuracy at equal τ, iterations and volume; the spec's pass rule: "
        f"partial ahead at τ = 8 by more than the seed spread): the τ = 8 gap is {gap8:+.2f} points "
        f"(partial − periodic; seed spread {spread8:.2f}): "
        f"**{'reproduced' if gap8 > spread8 else 'not reproduced at this scale'}**. The mean accuracy of u_k is "
        f"ahead at {100 * ahead:.0f} % of the evaluation points of the τ = 8 run.",
        f"- τ = 16: gap {verdicts[('iid', 16)][0]:+.2f} (spread {verdicts[('iid', 16)][1]:.2f}); "
        f"τ = 2: gap {verdicts[('iid', 2)][0]:+.2f} (spread {verdicts[('iid', 2)][1]:.2f}); "
        f"16 workers, τ = 8: {verdicts[('m16', 8)][0]:+.2f} ({verdicts[('m16', 8)][1]:.2f}); Dirichlet(0.5), "
        f"τ = 8: {verdicts[('dirichlet', 8)][0]:+.2f} ({verdicts[('dirichlet', 8)][1]:.2f}). The spec expects, "
        "without requiring it, a smaller gap at τ = 2 and with 16 workers.",
        *(
            []
            if gap8 > spread8
            else [
                "- What we checked: the mechanism itself is tested (τ = 1 gives periodic averaging's trajectory bit "
                "for bit, every value is averaged exactly once per τ iterations, the partition is an exact balanced "
                "cover); both methods got their own learning rate from the same grid; τ = 2, 8 and 16, 16 workers and "
                "non-IID data all give gaps within the seed spread, of either sign; the final training losses are tiny "
                "for both (the MLP interpolates the 8,000 images) and slightly higher for partial averaging. Our "
                "reading: with a small model on an easy task the local models hardly "
                f"drift apart within τ iterations (mean peak discrepancy {dq.mean():.2g} for periodic averaging at "
                "τ = 8), so averaging all of "
                "them at once loses little; the paper's gains come from deep networks (ResNet, VGG, LSTM) over "
                "10,000+ iterations with warm-up and step decay, which this CPU budget cannot test."
            ]
        ),
        f"- The discrepancy claim (low and flat under partial averaging, high-peaked under periodic) "
        f"**{'reproduces' if lower > 0.9 else 'does not reproduce'}**: the mean per-round peak is {dp.mean():.3g} "
        f"against {dq.mean():.3g}.",
        "- The cost side (same bytes, τ× more messages, a synchronisation barrier every iteration) is checked on "
        "the simulator's event log in `tests/test_partial_avg.py`, and priced on a wireless network in "
        "`docs/algorithms-on-one-network.md`: the τ× headers cost partial averaging extra radio energy.",
        "",
        "Paper's numbers (Table 1, IID, periodic → partial, %), for comparison; its runs use 128 workers, "
        "ResNet/VGG/LSTM models and 90–300 epochs:",
        "",
        "| task | | | |",
        "|---|---|---|---|",
    ]
    out += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in PAPER_T1]
    out += [
        "",
        "## Deviations",
        "",
        "- MNIST-10k instead of Fashion-MNIST, 32 workers instead of 128, an MLP instead of the CNN, and 960 "
        "iterations without warm-up or learning-rate decay (the spec's CPU suggestion: 1000–1500 iterations).",
        "- Evaluation of u_k uses every worker's own test split (IID: the pooled 2,000-image test set, split).",
        "- The final full average is not charged (one model upload per worker at the very end).",
        "",
    ]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main())
