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
Options: --jobs N (default 2), --cache DIR, --quick (smoke test, writes under /tmp).
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

from edgefl.sweeps.jobs import run_keyed  # noqa: E402
from experiments import provenance  # noqa: E402
from experiments.algorithm_keys import with_own_table  # noqa: E402

MNIST_DIR = str(REPO.parent / "shared" / "datasets" / "mnist")  # shared/ beside the checkout
METHODS = {"fedalign": "FedALIGN", "fedavg_p": "FedAvg-P", "fedavg_all": "FedAvg-All"}
COLORS = {"fedalign": "tab:red", "fedavg_p": "tab:blue", "fedavg_all": "tab:gray"}
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


def run_job(job: dict) -> dict:
    import torch

    torch.set_num_threads(1)
    from edgefl.runner import Simulation
    from edgefl.scenario import scenario_from_dict

    started = time.time()
    sim = Simulation(scenario_from_dict(with_own_table(job["scenario"])))
    result = sim.run(progress=False)
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
        "wall_s": time.time() - started,
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
    args = parser.parse_args(argv)
    r_syn, r_noise, r_img = 200, 100, 100
    seeds_main, seeds_other = (0, 1, 2, 3, 4), (0, 1, 2)
    doc, fig_dir = REPO / "docs" / "reproduce-fedalign.md", REPO / "docs" / "figures"
    if args.quick:
        r_syn, r_noise, r_img, seeds_main, seeds_other = 30, 20, 12, (0, 1), (0,)
        doc = Path("/tmp/edgefl-quick/reproduce-fedalign.md")
        fig_dir = doc.parent
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
    results = run_keyed(run_job, jobs, workers=args.jobs, cache=args.cache)
    total = time.time() - started
    page = render(results, jobs, exps, r_syn, r_noise, r_img, fig_dir, total, args)
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(page)
    print(f"wrote {doc} ({total / 60:.1f} min)")
    return 0


def window_mean(v, lo, hi):
    """Mean over rounds lo..hi (1-based, inclusive) per seed."""
    return v[:, lo - 1 : hi].mean(axis=1)


def render(results, jobs, exps, r_syn, r_noise, r_img, fig_dir, total_s, args):
    rel = "figures" if not args.quick else "."
    W = max(1, round(0.1 * r_syn))
    run_min = sum(results[j["key"]]["wall_s"] for j in jobs) / 60
    out = [
        "# Reproduction: FedALIGN (Ravi & Shomorony, prioritized FL with free clients)",
        "",
        provenance.line(
            provenance.current(
                ".venv/bin/python experiments/reproduce_fedalign.py" + (" --quick" if args.quick else ""), total_s
            )
        ),
        "",
        "Regenerate this page (`--cache DIR` reuses finished runs, `--jobs N` sets the worker processes):",
        "",
        "    .venv/bin/python experiments/reproduce_fedalign.py",
        "",
        f"Values are mean ± standard deviation over seeds (the seeds are listed per table); learning only "
        f"(ideal engine). The {len(jobs)} runs took {run_min:.0f} min in total (sum of their wall times on a 2-core "
        f"machine shared with other jobs); this page's last generation took {total_s / 60:.1f} min (runs found in a --cache are not re-run). "
        "FedAvg-P is FedALIGN with ε = 0 "
        "(identical to FedAvg on the priority clients, bit for bit: `tests/test_fedalign.py`), FedAvg-All is "
        "ε = ∞ (everyone trains after the shared warm-up).",
        "",
        'Paper: "Utilizing Free Clients in Federated Learning for Focused Model Enhancement" (Ravi, Shomorony), '
        "Sec. 3.1 (FedALIGN), Sec. 4 and App. B (experiments); "
        "implementation: `algorithms/fedalign.py`, data `edgefl/data/priority.py`, "
        "metrics `edgefl/estimation.py` (priority loss F(w) = Σ_P p_k F_k(w), pooled priority test accuracy).",
        "",
    ]
    # -- 1. acceptance configuration ------------------------------------------------------------
    plot(
        results,
        jobs,
        "medium",
        fig_dir / "fedalign-synthetic-medium.png",
        "Synth(1,1), medium noise, N = 20, |P| = 10",
        W,
    )
    loss = {m: values(results, jobs, "medium", m, "priority_loss") for m in METHODS}
    acc = {m: values(results, jobs, "medium", m, "priority_acc") for m in METHODS}
    seeds = len(exps["medium"][1])
    post = {m: window_mean(loss[m], W + 1, r_syn) for m in METHODS}
    post_acc = {m: window_mean(acc[m], W + 1, r_syn) for m in METHODS}
    last = {m: window_mean(acc[m], r_syn - 19, r_syn) for m in METHODS}
    r50 = min(50, r_syn)
    out += [
        "## 1. Acceptance configuration (fedalign.md §7): Synth(1,1), medium noise",
        "",
        f"![synthetic medium]({rel}/fedalign-synthetic-medium.png)",
        "",
        f"Seeds {', '.join(map(str, exps['medium'][1]))}; rounds 1–{W} are the warm-up.",
        "",
        f"| method | mean priority loss, rounds {W + 1}–{r_syn} | priority loss at round {r50} | "
        f"mean priority acc., rounds {W + 1}–{r_syn} | priority acc., last 20 rounds | reference run (spec §7): loss / last-20 acc. |",
        "|---|---|---|---|---|---|",
    ]
    ref = {"fedalign": "0.33 / 0.88", "fedavg_p": "0.44 / 0.87", "fedavg_all": "0.48 / 0.84"}
    for m, name in METHODS.items():
        out.append(
            f"| {name} | {fmt(post[m])} | {fmt(loss[m][:, r50 - 1])} | {fmt(post_acc[m])} | {fmt(last[m])} | {ref[m]} |"
        )
    rel_gain = 1 - post["fedalign"].mean() / post["fedavg_p"].mean()
    wins50 = int(np.sum(loss["fedalign"][:, r50 - 1] < loss["fedavg_p"][:, r50 - 1]))
    res = [results[j["key"]] for j in jobs if j["exp"] == "medium" and j["method"] == "fedalign"]
    post_rounds = r_syn - W
    q_ids = [i for i, role in enumerate(res[0]["roles"]) if role != "priority"]
    acc_rate = np.array([[r["accepted"][q] / post_rounds for q in q_ids] for r in res])  # [seeds, |Q|]
    trained_rejected = all(
        r["trained"][q] == r["accepted"][q] for r in res for q in q_ids
    )  # Train ops only when accepted
    uploads = np.concatenate([values(results, jobs, "medium", "fedalign", "accepted")[:, W:]])
    checks = [
        (
            f"Speed: mean priority loss over rounds {W + 1}–{r_syn} ≥ 10 % lower for FedALIGN than FedAvg-P",
            f"{100 * rel_gain:.1f} % lower",
            rel_gain >= 0.10,
        ),
        (
            f"Speed: FedALIGN's loss lower at round {r50} in ≥ 4 of 5 seeds",
            f"{wins50} of {seeds}",
            wins50 >= math.ceil(0.8 * seeds),
        ),
        (
            f"Accuracy: FedALIGN higher than FedAvg-P over rounds {W + 1}–{r_syn} and over the last 20",
            f"{post_acc['fedalign'].mean():.3f} vs {post_acc['fedavg_p'].mean():.3f}; {last['fedalign'].mean():.3f} vs "
            f"{last['fedavg_p'].mean():.3f}",
            post_acc["fedalign"].mean() > post_acc["fedavg_p"].mean()
            and last["fedalign"].mean() > last["fedavg_p"].mean(),
        ),
        (
            "No degradation: FedAvg-All's post-warm-up loss above FedALIGN's",
            f"{post['fedavg_all'].mean():.3f} vs {post['fedalign'].mean():.3f}",
            post["fedavg_all"].mean() > post["fedalign"].mean(),
        ),
        (
            "No degradation: FedAvg-All's last-20 accuracy below FedALIGN's and FedAvg-P's",
            f"{last['fedavg_all'].mean():.3f} vs {last['fedalign'].mean():.3f} / {last['fedavg_p'].mean():.3f}",
            last["fedavg_all"].mean() < min(last["fedalign"].mean(), last["fedavg_p"].mean()),
        ),
        (
            "Selection: the clean non-priority client (j = 0) accepted in ≥ 90 % of post-warm-up rounds",
            "per seed " + ", ".join(f"{100 * a:.0f} %" for a in acc_rate[:, 0]),
            bool(np.all(acc_rate[:, 0] >= 0.9)),
        ),
        (
            "Selection: the noisiest client (j = 9) never accepted",
            "per seed " + ", ".join(f"{int(round(a * post_rounds))}" for a in acc_rate[:, -1]) + " rounds",
            bool(np.all(acc_rate[:, -1] == 0)),
        ),
        (
            "Cost: rejected / declined clients run 0 SGD steps (Train ops only for accepted clients)",
            "yes" if trained_rejected else "no",
            trained_rejected,
        ),
    ]
    out += ["", "| check | ours | verdict |", "|---|---|---|"]
    out += [f"| {c} | {v} | **{'pass' if ok else 'FAIL'}** |" for c, v, ok in checks]
    no_accept = []
    for run, j in zip(res, [j for j in jobs if j["exp"] == "medium" and j["method"] == "fedalign"]):
        counts = np.array([r["accepted"] for r in run["rows"]])[W:]
        rounds_none = np.flatnonzero(counts == 0) + W + 1
        first_loss = run["rows"][W]["priority_loss"]
        no_accept.append(
            f"seed {j['seed']}: {len(rounds_none)} rounds"
            + (f" ({rounds_none[0]}–{rounds_none[-1]})" if len(rounds_none) else "")
            + f", F(w) at round {W + 1} = {first_loss:.2f}"
        )
    out += [
        "",
        "Post-warm-up rounds with no accepted client (the clean client j = 0 rejected, since the others "
        "are never accepted here): " + "; ".join(no_accept) + ". Rejections of the clean client happen while "
        "the priority loss is high or oscillating: its loss on its own (mixture) data then differs from F(w_r) "
        "by more than ε.",
    ]
    out += [
        "",
        "Acceptance rate of each non-priority client after the warm-up (mean over seeds; j = 0 clean … "
        "j = 9 noisiest): " + ", ".join(f"j={j}: {100 * a:.0f} %" for j, a in enumerate(acc_rate.mean(0))) + ".",
        f"Model uploads per post-warm-up round: |P| + |A_r| = 10 + {uploads.mean():.2f} on average "
        "(every non-priority client pays one evaluation per round; only accepted ones train and upload).",
        "",
    ]
    # -- 2. noise levels -------------------------------------------------------------------------
    Wn = max(1, round(0.1 * r_noise))
    out += [
        "## 2. Noise levels (the paper's Figure 2)",
        "",
        f"Low and high noise: seeds {', '.join(map(str, exps['low'][1]))}, R = {r_noise} rounds, W = {Wn} "
        f"(medium: the runs of section 1). FedAvg-P does not depend on the noise (it never contacts a "
        "non-priority client and the priority data are the same), so its medium-noise runs serve all three.",
        "",
        "| noise (skew, ε) | method | mean priority loss, post warm-up | priority acc., last 20 rounds |",
        "|---|---|---|---|",
    ]
    spans = {"low": (Wn, r_noise), "medium": (W, r_syn), "high": (Wn, r_noise)}
    for exp, label in (("low", "low (0.5, 0.2)"), ("medium", "medium (1.5, 0.2)"), ("high", "high (5, 0.4)")):
        w0, rr = spans[exp]
        for m, name in METHODS.items():
            lo = values(results, jobs, exp, m, "priority_loss")
            ac = values(results, jobs, exp, m, "priority_acc")
            out.append(
                f"| {label} | {name} | {fmt(window_mean(lo, w0 + 1, rr))} | {fmt(window_mean(ac, rr - 19, rr))} |"
            )
    verdict2 = []
    for exp in ("low", "medium", "high"):
        w0, rr = spans[exp]
        lo = {m: window_mean(values(results, jobs, exp, m, "priority_loss"), w0 + 1, rr).mean() for m in METHODS}
        verdict2.append(f"{exp}: **{'yes' if lo['fedalign'] < min(lo['fedavg_p'], lo['fedavg_all']) else 'no'}**")
    for exp in ("low", "high"):
        plot(results, jobs, exp, fig_dir / f"fedalign-synthetic-{exp}.png", f"Synth(1,1), {exp} noise", Wn)
    out += [
        "",
        "FedALIGN has the lowest mean post-warm-up priority loss (the paper: it beats both baselines after "
        "warm-up at every noise level): " + ", ".join(verdict2) + ".",
        "",
        f"![low]({rel}/fedalign-synthetic-low.png)",
        "",
        f"![high]({rel}/fedalign-synthetic-high.png)",
        "",
    ]
    # -- 3. MNIST --------------------------------------------------------------------------------
    Wi = max(1, round(0.1 * r_img))
    plot(results, jobs, "mnist", fig_dir / "fedalign-mnist.png", "MNIST-10k shards, N = 60, |P| = 2 (4 classes)", Wi)
    out += [
        "## 3. Figure 1 set-up on MNIST-10k (Fashion-MNIST is not available here)",
        "",
        f"![mnist]({rel}/fedalign-mnist.png)",
        "",
        f"Seeds {', '.join(map(str, exps['mnist'][1]))}; rounds 1–{Wi} are the warm-up.",
        "",
        f"| method | mean priority loss, rounds {Wi + 1}–{r_img} | priority acc. at round {2 * Wi} | "
        f"priority acc., last 10 rounds | accepted non-priority clients per round |",
        "|---|---|---|---|---|",
    ]
    for m, name in METHODS.items():
        lo = values(results, jobs, "mnist", m, "priority_loss")
        ac = values(results, jobs, "mnist", m, "priority_acc")
        na = values(results, jobs, "mnist", m, "accepted")[:, Wi:]
        out.append(
            f"| {name} | {fmt(window_mean(lo, Wi + 1, r_img))} | {fmt(ac[:, 2 * Wi - 1])} | "
            f"{fmt(window_mean(ac, r_img - 9, r_img))} | {fmt(na.mean(1), 1)} |"
        )
    lo = {m: window_mean(values(results, jobs, "mnist", m, "priority_loss"), Wi + 1, r_img).mean() for m in METHODS}
    ac = {m: window_mean(values(results, jobs, "mnist", m, "priority_acc"), r_img - 9, r_img).mean() for m in METHODS}
    out += [
        "",
        f"Paper (Fig. 1): after the warm-up FedALIGN converges faster and ends more accurate than the baselines, "
        f"while FedAvg-All deteriorates. Ours: lower post-warm-up loss than FedAvg-P "
        f"**{'yes' if lo['fedalign'] < lo['fedavg_p'] else 'no'}**, than FedAvg-All "
        f"**{'yes' if lo['fedalign'] < lo['fedavg_all'] else 'no'}**; higher final accuracy than FedAvg-P "
        f"**{'yes' if ac['fedalign'] > ac['fedavg_p'] else 'no'}**, than FedAvg-All "
        f"**{'yes' if ac['fedalign'] > ac['fedavg_all'] else 'no'}**.",
        "",
        "What we checked where it does not reproduce — the threshold ε (same seeds; ε = 0 is FedAvg-P, "
        "ε = ∞ FedAvg-All):",
        "",
        f"| ε | mean priority loss, rounds {Wi + 1}–{r_img} | priority acc., last 10 rounds | accepted per round |",
        "|---|---|---|---|",
    ]
    sweep = (
        [(0.0, "fedavg_p", "mnist")]
        + [(e, "fedalign", f"mnist_eps{e}") for e in EPS_SWEEP if e < 0.2]
        + [(0.2, "fedalign", "mnist")]
        + [(e, "fedalign", f"mnist_eps{e}") for e in EPS_SWEEP if e > 0.2]
        + [(math.inf, "fedavg_all", "mnist")]
    )
    for e, m, exp in sweep:
        lo_e = values(results, jobs, exp, m, "priority_loss")
        ac_e = values(results, jobs, exp, m, "priority_acc")
        na_e = values(results, jobs, exp, m, "accepted")[:, Wi:]
        out.append(
            f"| {e:g} | {fmt(window_mean(lo_e, Wi + 1, r_img))} | {fmt(window_mean(ac_e, r_img - 9, r_img))} | "
            f"{fmt(na_e.mean(1), 1)} |"
        )
    out += [""]
    n_pass = sum(ok for _, _, ok in checks)
    sd_mn = {
        m: window_mean(values(results, jobs, "mnist", m, "priority_acc"), r_img - 9, r_img).std(ddof=1)
        if len(exps["mnist"][1]) > 1
        else 0.0
        for m in METHODS
    }
    sweep_acc = {
        e: window_mean(values(results, jobs, exp, m, "priority_acc"), r_img - 9, r_img).mean() for e, m, exp in sweep
    }
    out += [
        "## Verdict",
        "",
        f"- Acceptance configuration (the spec's checks 3–6): {n_pass} of {len(checks)} pass. "
        + ("" if n_pass == len(checks) else "Failed: " + "; ".join(c for c, _, ok in checks if not ok) + ". ")
        + "FedALIGN is faster and more accurate than FedAvg-P on the priority objective, and FedAvg-All does "
        "not beat it on average; the paper's qualitative claim (Fig. 2, medium noise) reproduces in the means over "
        "5 seeds (the seed-to-seed spread is large: every seed draws new devices).",
        "- Other noise levels (Fig. 2): FedALIGN beats FedAvg-P at every level, but FedAvg-All's post-warm-up "
        "loss is "
        + ", ".join(
            f"{exp} {window_mean(values(results, jobs, exp, 'fedavg_all', 'priority_loss'), spans[exp][0] + 1, spans[exp][1]).mean():.3f}"
            f" vs FedALIGN {window_mean(values(results, jobs, exp, 'fedalign', 'priority_loss'), spans[exp][0] + 1, spans[exp][1]).mean():.3f}"
            for exp in ("low", "high")
        )
        + ": where FedAvg-All is as good or better, the non-priority data (whose clean part comes from the priority "
        "devices) help more than their noise hurts, so the claim 'beats both baselines at every noise level' "
        "depends on the corruption law, which the paper does not give (we use the spec's proposal).",
        (
            "- MNIST-10k Figure 1 set-up: reproduced (FedALIGN has the lowest loss and the highest final accuracy)."
            if lo["fedalign"] < lo["fedavg_p"] and ac["fedalign"] > max(ac["fedavg_p"], ac["fedavg_all"])
            else f"- MNIST-10k Figure 1 set-up: not reproduced at ε = 0.2 — final priority accuracy FedALIGN "
            f"{ac['fedalign']:.3f}, FedAvg-P {ac['fedavg_p']:.3f}, FedAvg-All {ac['fedavg_all']:.3f}, with seed spreads "
            f"of {min(sd_mn.values()):.2f}–{max(sd_mn.values()):.2f} over 3 seeds, so none of these differences is "
            "significant. With 2 priority clients of 133 images (4 classes) FedAvg-P already fits the priority data "
            f"almost perfectly (loss {lo['fedavg_p']:.3f}), so F(w_r) is tiny and the rule |F(w_r) − L_j| ≤ ε admits "
            "the clients the current model already fits, whatever their classes. Across the ε sweep the final "
            f"accuracy ranges {min(sweep_acc.values()):.3f}–{max(sweep_acc.values()):.3f} without a trend "
            f"(best: ε = {max(sweep_acc, key=sweep_acc.get):g}). The paper's FMNIST clients hold ~1,000 images each "
            "of a harder task, where extra aligned data matter more; FMNIST is not available here."
        ),
        "",
    ]
    out += NOTES
    return "\n".join(out) + "\n"


NOTES = [
    "## Set-up and deviations",
    "",
    "- Non-priority corruption follows the spec's proposal (the paper names the knobs, not the formula): client "
    "j = 0..9 has level ℓ_j = (j/9)^(1/skew), flips each clean label with probability 0.5·ℓ_j and adds "
    "round(ℓ_j·n_j) points of an unrelated Synth(1,1) device; its clean points come from the priority devices.",
    "- Local training: E epochs = ⌈E·D_k/B⌉ minibatch steps per client (per-client step masks), minibatches drawn "
    "with replacement (the paper reshuffles per epoch); the model starts from PyTorch's default initialisation "
    "(small uniform weights) rather than zeros, the same w₀ for all methods.",
    "- The verdict comes before training (spec §8.5): every sampled non-priority client is evaluated with a Query "
    "(model + (F_r, ε) down, one evaluation of its full training set, its loss up) and a rejected client pays only "
    "that; accepted clients get an 8-bit verdict, train and upload a model (`report = 'opt_in'`, the spec's "
    "variant where only clients with L_j ≤ F_r + ε report, accepts the same clients). The cost of every message "
    "is charged by the engine (see docs/algorithms-on-one-network.md).",
    "- MNIST-10k: 8,000 training images in 120 label-sorted shards of 66, two per client; the priority pair is "
    "redrawn until it holds exactly 4 classes; 100 rounds (the paper: 200) with a 10-round warm-up.",
    "",
]


if __name__ == "__main__":
    sys.exit(main())
