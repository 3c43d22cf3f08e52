"""Reproduce FedALIGN's experiments (CPU-sized); write docs/reproduce-fedalign.md.

    .venv/bin/python experiments/reproduce_fedalign.py       # 2 worker processes

Runs ("Utilizing Free Clients in Federated Learning for Focused Model Enhancement",
Sec. 4 and App. B; learning only, the ideal engine). Methods share w_0,
data and seeds: FedALIGN (eps = 0.2), FedAvg-P (= FedALIGN with eps = 0: priority clients only)
and FedAvg-All (= eps = inf: everyone after the shared warm-up).
1. The acceptance configuration: Synth(1,1), N = 20 (10 priority, 10 non-priority with label
   noise and irrelevant data), medium noise (skew 1.5), logistic regression, eta = 0.1, E = 5 epochs,
   B = 10, R = 200, W = 20; seeds 0-4. Also low (skew 0.5) and high (skew 5, eps = 0.4) noise,
   seeds 0-2 (the paper's Figure 2).
2. Figure 1's set-up on MNIST-10k (Fashion-MNIST is not available here): 60 clients with 2
   label-sorted shards each, |P| = 2 priority clients holding 4 classes, logistic regression,
   eta = 0.1, E = 5 epochs, B = 50, R = 100 (the paper: 200), W = 10, eps = 0.2; seeds 0-2.
Options: --jobs N (default 2), --cache DIR, --quick (smoke test, writes under /tmp), --from-data (runs
nothing: re-renders the page from docs/data/fedalign-summary.json, the numbers the page shows, written by
the last full run). The page's words and tables are experiments/templates/reproduce-fedalign.md.j2.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
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
METHODS = {"fedalign": "FedALIGN", "fedavg_p": "FedAvg-P", "fedavg_all": "FedAvg-All"}
COLORS = {"fedalign": "tab:red", "fedavg_p": "tab:blue", "fedavg_all": "tab:gray"}
DOC = REPO / "docs" / "reproduce-fedalign.md"
SUMMARY = REPO / "docs" / "data" / "fedalign-summary.json"  # what the page shows, from the runs: it is rendered from it
KEEP = ["priority_loss", "priority_acc", "non_priority_acc", "accepted", "opted_in", "evaluated"]


def epsilon(method: str, eps: float) -> float:
    return {"fedalign": eps, "fedavg_p": 0.0, "fedavg_all": math.inf}[method]


def synthetic(method: str, seed: int, rounds: int, skew: float = 1.5, eps: float = 0.2) -> dict:
    return {
        "run": {"seed": seed, "rounds": rounds, "engine": "ideal", "threads": 1},
        "data": {
            "name": "synthetic_priority",
            "num_clients": 20,
            "priority_clients": 10,
            "synthetic_alpha": 1.0,
            "synthetic_beta": 1.0,
            "noise_skew": skew,
        },
        "model": {"name": "linear"},
        "algorithm": {
            "name": "fedalign",
            "lr": 0.1,
            "batch_size": 10,
            "local_epochs": 5.0,
            "epsilon": epsilon(method, eps),
            "warmup_rounds": max(1, round(0.1 * rounds)),
        },
    }


EPS_SWEEP = (0.02, 0.05, 0.1, 0.5)


def mnist(method: str, seed: int, rounds: int, eps: float = 0.2) -> dict:
    return {
        "run": {"seed": seed, "rounds": rounds, "engine": "ideal", "threads": 1},
        "data": {
            "name": "image_priority",
            "dir": MNIST_DIR,
            "num_clients": 60,
            "priority_clients": 2,
            "priority_classes": 4,
            "shards_per_client": 2,
        },
        "model": {"name": "linear"},
        "algorithm": {
            "name": "fedalign",
            "lr": 0.1,
            "batch_size": 50,
            "local_epochs": 5.0,
            "clients_per_round": 60,
            "epsilon": epsilon(method, eps),
            "warmup_rounds": max(1, round(0.1 * rounds)),
        },
    }


def run_jobs(jobs: list[dict]) -> list[dict]:
    """The runs of ``jobs`` (a worker process), the seeds of one setting trained together."""
    return run_seeds_of(jobs, record)


def record(job: dict, sim, result, wall_s: float) -> dict:
    """What the page keeps of a run."""
    rows = [{"round": r["round"], **{k: r.get(k) for k in KEEP}} for r in result.metrics]
    alg = sim.algorithm
    n = sim.data.num_clients
    accepted = np.zeros(n)
    evaluated = np.zeros(n)
    for acc, ev in zip(alg.accept_log, alg.eval_log):
        accepted[acc] += 1
        evaluated[ev] += 1
    return {
        "key": job["key"],
        "rows": rows,
        "wall_s": wall_s,
        "accepted": accepted.tolist(),
        "evaluated": evaluated.tolist(),
        "trained": sim.engine.selected_count.tolist(),
        "roles": [str(x) for x in sim.data.client_roles],
        "warmup": alg.hp.warmup_rounds,
    }


def job_key(scenario: dict) -> str:
    return hashlib.sha1(json.dumps(scenario, sort_keys=True).encode()).hexdigest()[:16]


SHARED_P = {}  # exp -> (seeds, rounds) of experiments that reuse the medium-noise FedAvg-P runs


def values(results, jobs, exp, method, metric):
    """[seeds, rounds] of one metric. FedAvg-P never contacts a non-priority client and the priority
    data do not depend on the noise level, so the low/high-noise tables reuse the medium-noise
    FedAvg-P runs (their first R rounds, same seeds): the same numbers a separate run would give."""
    if method == "fedavg_p" and exp in SHARED_P:
        seeds, rounds = SHARED_P[exp]
        runs = [
            results[j["key"]] for j in jobs if j["exp"] == "medium" and j["method"] == method and j["seed"] in seeds
        ]
        return np.array(
            [[np.nan if r.get(metric) is None else r[metric] for r in run["rows"][:rounds]] for run in runs], float
        )
    runs = [results[j["key"]] for j in jobs if j["exp"] == exp and j["method"] == method]
    return np.array([[np.nan if r.get(metric) is None else r[metric] for r in run["rows"]] for run in runs], float)


def fmt(v, d=3):
    v = np.asarray(v, float)
    return f"{v.mean():.{d}f}" if v.size == 1 else f"{v.mean():.{d}f} ± {v.std(ddof=1):.{d}f}"


def plot(results, jobs, exp, path, title, warmup):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for ax, metric, label in zip(
        axes, ("priority_loss", "priority_acc"), ("priority training loss F(w_r)", "priority test accuracy")
    ):
        for m, name in METHODS.items():
            v = values(results, jobs, exp, m, metric)
            x = np.arange(1, v.shape[1] + 1)
            mean, std = v.mean(0), v.std(0)
            ax.plot(x, mean, color=COLORS[m], label=name, lw=1.3)
            ax.fill_between(x, mean - std, mean + std, color=COLORS[m], alpha=0.2, lw=0)
        ax.axvline(warmup + 0.5, color="k", ls=":", lw=0.8)
        ax.set_xlabel("round")
        ax.set_title(label, fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].set_yscale("log")
    axes[0].legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--from-data", action="store_true", help=f"run nothing: re-render the page from {SUMMARY}")
    args = parser.parse_args(argv)
    r_syn, r_noise, r_img = 200, 100, 100
    seeds_main, seeds_other = (0, 1, 2, 3, 4), (0, 1, 2)
    doc, summary_path, fig_dir = DOC, SUMMARY, REPO / "docs" / "figures"
    if args.quick:
        r_syn, r_noise, r_img, seeds_main, seeds_other = 30, 20, 12, (0, 1), (0,)
        doc = Path("/tmp/edgefl-quick/reproduce-fedalign.md")
        summary_path, fig_dir = doc.parent / SUMMARY.name, doc.parent
    if args.from_data:
        atomic_write_text(doc, render(json.loads(summary_path.read_text())))
        print(f"wrote {doc} from {summary_path}")
        return 0
    fig_dir.mkdir(parents=True, exist_ok=True)
    exps = {
        "medium": (lambda m, s: synthetic(m, s, r_syn, 1.5, 0.2), seeds_main),
        "low": (lambda m, s: synthetic(m, s, r_noise, 0.5, 0.2), seeds_other),
        "high": (lambda m, s: synthetic(m, s, r_noise, 5.0, 0.4), seeds_other),
        "mnist": (lambda m, s: mnist(m, s, r_img), seeds_other),
    }
    jobs = []
    SHARED_P.update({"low": (seeds_other, r_noise), "high": (seeds_other, r_noise)})
    for exp, (build, seeds) in exps.items():
        for method in METHODS:
            if method == "fedavg_p" and exp in SHARED_P:
                continue
            for seed in seeds:
                sc = build(method, seed)
                jobs.append(
                    {
                        "exp": exp,
                        "method": method,
                        "seed": seed,
                        "scenario": sc,
                        "key": f"{exp}-{method}-{seed}-{job_key(sc)}",
                        "label": f"{exp} {method} seed {seed}",
                    }
                )
    for eps in EPS_SWEEP:  # FedALIGN's threshold on the MNIST set-up
        for seed in seeds_other:
            sc = mnist("fedalign", seed, r_img, eps)
            jobs.append(
                {
                    "exp": f"mnist_eps{eps}",
                    "method": "fedalign",
                    "seed": seed,
                    "scenario": sc,
                    "key": f"mnist_eps{eps}-{seed}-{job_key(sc)}",
                    "label": f"mnist eps={eps} seed {seed}",
                }
            )
    jobs.sort(key=lambda j: j["method"] == "fedavg_p")  # the slow ones first
    started = time.time()
    results = run_keyed(run_jobs, jobs, together=seedless, workers=args.jobs, cache=args.cache)
    total = time.time() - started
    W, Wn, Wi = (max(1, round(0.1 * r)) for r in (r_syn, r_noise, r_img))
    plot(
        results,
        jobs,
        "medium",
        fig_dir / "fedalign-synthetic-medium.png",
        "Synth(1,1), medium noise, N = 20, |P| = 10",
        W,
    )
    for exp in ("low", "high"):
        plot(results, jobs, exp, fig_dir / f"fedalign-synthetic-{exp}.png", f"Synth(1,1), {exp} noise", Wn)
    plot(results, jobs, "mnist", fig_dir / "fedalign-mnist.png", "MNIST-10k shards, N = 60, |P| = 2 (4 classes)", Wi)
    command = ".venv/bin/python experiments/reproduce_fedalign.py" + (" --quick" if args.quick else "")
    summary = {
        "produced": provenance.current(command, total),
        "total_s": total,  # this generation's wall time (s; runs found in a --cache are not re-run)
        "figures": "." if args.quick else "figures",
        **summarise(results, jobs, exps, r_syn, r_noise, r_img),
    }
    pages.store_and_render(summary, summary_path, doc, render, total)
    return 0


def window_mean(v, lo, hi):
    """Mean over rounds lo..hi (1-based, inclusive) per seed."""
    return v[:, lo - 1 : hi].mean(axis=1)


def render(summary: dict) -> str:
    """The page from the stored summary (docs/data/fedalign-summary.json), through its template."""
    return pages.render("reproduce-fedalign.md.j2", s=summary, methods=METHODS)


# -- what the page shows, from the runs ---------------------------------------------------------
def summarise(results, jobs, exps, r_syn, r_noise, r_img) -> dict:
    return {
        "runs": len(jobs),
        "run_s": sum(results[j["key"]]["wall_s"] for j in jobs),
        "medium": summarise_medium(results, jobs, exps["medium"][1], r_syn),
        "noise": summarise_noise(results, jobs, exps["low"][1], r_syn, r_noise),
        "mnist": summarise_mnist(results, jobs, exps["mnist"][1], r_img),
    }


def summarise_medium(results, jobs, seeds, r_syn) -> dict:
    """Section 1, the acceptance configuration: the table, the spec's checks and the selection per client."""
    W = max(1, round(0.1 * r_syn))
    loss = {m: values(results, jobs, "medium", m, "priority_loss") for m in METHODS}
    acc = {m: values(results, jobs, "medium", m, "priority_acc") for m in METHODS}
    post = {m: window_mean(loss[m], W + 1, r_syn) for m in METHODS}
    post_acc = {m: window_mean(acc[m], W + 1, r_syn) for m in METHODS}
    last = {m: window_mean(acc[m], r_syn - 19, r_syn) for m in METHODS}
    r50 = min(50, r_syn)
    rel_gain = float(1 - post["fedalign"].mean() / post["fedavg_p"].mean())
    wins50 = int(np.sum(loss["fedalign"][:, r50 - 1] < loss["fedavg_p"][:, r50 - 1]))
    medium_jobs = [j for j in jobs if j["exp"] == "medium" and j["method"] == "fedalign"]
    res = [results[j["key"]] for j in medium_jobs]
    post_rounds = r_syn - W
    q_ids = [i for i, role in enumerate(res[0]["roles"]) if role != "priority"]
    acc_rate = np.array([[r["accepted"][q] / post_rounds for q in q_ids] for r in res])  # [seeds, |Q|]
    trained_rejected = all(
        r["trained"][q] == r["accepted"][q] for r in res for q in q_ids
    )  # Train ops only when accepted
    uploads = values(results, jobs, "medium", "fedalign", "accepted")[:, W:]
    no_accept = []
    for run, j in zip(res, medium_jobs):
        counts = np.array([r["accepted"] for r in run["rows"]])[W:]
        rounds_none = np.flatnonzero(counts == 0) + W + 1
        no_accept.append(
            {
                "seed": j["seed"],
                "rounds": len(rounds_none),
                "first": int(rounds_none[0]) if len(rounds_none) else None,
                "last": int(rounds_none[-1]) if len(rounds_none) else None,
                "loss_after_warmup": float(run["rows"][W]["priority_loss"]),
            }
        )
    mean = {
        k: {m: float(v[m].mean()) for m in METHODS} for k, v in (("post", post), ("post_acc", post_acc), ("last", last))
    }
    return {
        "seeds": list(seeds),
        "rounds": r_syn,
        "warmup": W,
        "r50": r50,
        "rows": {
            m: {
                "post_loss": pages.over_seeds(post[m]),
                "loss_r50": pages.over_seeds(loss[m][:, r50 - 1]),
                "post_acc": pages.over_seeds(post_acc[m]),
                "last_acc": pages.over_seeds(last[m]),
            }
            for m in METHODS
        },
        "loss_gain": rel_gain,
        "wins_r50": wins50,
        "clean_rate": [float(a) for a in acc_rate[:, 0]],
        "noisiest_rounds": [int(round(a * post_rounds)) for a in acc_rate[:, -1]],
        "checks": {
            "loss_gain": rel_gain >= 0.10,
            "wins_r50": wins50 >= math.ceil(0.8 * len(seeds)),
            "accuracy": mean["post_acc"]["fedalign"] > mean["post_acc"]["fedavg_p"]
            and mean["last"]["fedalign"] > mean["last"]["fedavg_p"],
            "all_loss_above": mean["post"]["fedavg_all"] > mean["post"]["fedalign"],
            "all_acc_below": mean["last"]["fedavg_all"] < min(mean["last"]["fedalign"], mean["last"]["fedavg_p"]),
            "clean_accepted": bool(np.all(acc_rate[:, 0] >= 0.9)),
            "noisiest_never": bool(np.all(acc_rate[:, -1] == 0)),
            "train_only_accepted": trained_rejected,
        },
        "no_accept": no_accept,
        "accept_rate": [float(a) for a in acc_rate.mean(0)],
        "uploads": float(uploads.mean()),
    }


def summarise_noise(results, jobs, seeds, r_syn, r_noise) -> dict:
    """Section 2: per noise level and method, the post-warm-up loss and the last-20-round accuracy."""
    Wn = max(1, round(0.1 * r_noise))
    spans = {"low": (Wn, r_noise), "medium": (max(1, round(0.1 * r_syn)), r_syn), "high": (Wn, r_noise)}
    rows = {}
    for exp, (w0, rr) in spans.items():
        rows[exp] = {}
        for m in METHODS:
            lo = window_mean(values(results, jobs, exp, m, "priority_loss"), w0 + 1, rr)
            ac = window_mean(values(results, jobs, exp, m, "priority_acc"), rr - 19, rr)
            rows[exp][m] = {"post_loss": pages.over_seeds(lo), "last_acc": pages.over_seeds(ac)}
    return {
        "seeds": list(seeds),
        "rounds": r_noise,
        "warmup": Wn,
        "rows": rows,
        "fedalign_lowest": {
            exp: rows[exp]["fedalign"]["post_loss"][0]
            < min(rows[exp]["fedavg_p"]["post_loss"][0], rows[exp]["fedavg_all"]["post_loss"][0])
            for exp in spans
        },
    }


def summarise_mnist(results, jobs, seeds, r_img) -> dict:
    """Section 3: the MNIST-10k table, FedALIGN against the baselines, and the epsilon sweep."""
    Wi = max(1, round(0.1 * r_img))

    def row(exp, m):
        lo = values(results, jobs, exp, m, "priority_loss")
        ac = values(results, jobs, exp, m, "priority_acc")
        na = values(results, jobs, exp, m, "accepted")[:, Wi:]
        return {
            "post_loss": pages.over_seeds(window_mean(lo, Wi + 1, r_img)),
            "acc_2w": pages.over_seeds(ac[:, 2 * Wi - 1]),
            "last_acc": pages.over_seeds(window_mean(ac, r_img - 9, r_img)),
            "accepted": pages.over_seeds(na.mean(1)),
        }

    rows = {m: row("mnist", m) for m in METHODS}
    sweep = (
        [(0.0, "fedavg_p", "mnist")]
        + [(e, "fedalign", f"mnist_eps{e}") for e in EPS_SWEEP if e < 0.2]
        + [(0.2, "fedalign", "mnist")]
        + [(e, "fedalign", f"mnist_eps{e}") for e in EPS_SWEEP if e > 0.2]
        + [(math.inf, "fedavg_all", "mnist")]
    )
    lo = {m: rows[m]["post_loss"][0] for m in METHODS}
    ac = {m: rows[m]["last_acc"][0] for m in METHODS}
    sweep_rows = [{"eps": f"{e:g}", **row(exp, m)} for e, m, exp in sweep]
    spreads = [rows[m]["last_acc"][1] if len(seeds) > 1 else 0.0 for m in METHODS]
    best = max(sweep_rows, key=lambda r: r["last_acc"][0])  # the first of equals, as the page always showed
    return {
        "seeds": list(seeds),
        "rounds": r_img,
        "warmup": Wi,
        "rows": rows,
        "lower_loss_than": {m: lo["fedalign"] < lo[m] for m in ("fedavg_p", "fedavg_all")},
        "higher_acc_than": {m: ac["fedalign"] > ac[m] for m in ("fedavg_p", "fedavg_all")},
        "acc_spread": [min(spreads), max(spreads)],
        "sweep": sweep_rows,
        "sweep_acc_range": [min(r["last_acc"][0] for r in sweep_rows), max(r["last_acc"][0] for r in sweep_rows)],
        "best_eps": best["eps"],
    }


if __name__ == "__main__":
    sys.exit(main())
