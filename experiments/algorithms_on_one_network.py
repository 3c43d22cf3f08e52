"""Every registered FL algorithm on one wireless network; write docs/algorithms-on-one-network.md.

    .venv/bin/python experiments/algorithms_on_one_network.py --seeds 0 1 2   # 45 runs, 1-2 min on 2 cores

Scenario: scenarios/algorithms-on-one-network.toml (MNIST-10k, 30 clients in a 400 m cell,
Dirichlet(0.5), softmax regression, 10 clients per round, tau = 10, shared 1 MHz FDMA uplink,
Rayleigh fading, MCS rates, 800-bit headers), co-simulated with the SimPy engine: every message of every
algorithm is charged (time and energy per client). Each algorithm runs with its defaults plus the
few keys below (not tuned per algorithm); every algorithm in algorithms.REGISTRY is included, and
the page lists the ones this script knows about but that were not registered at run time.
Options: --jobs N (default 2), --seeds 0 1 ..., --rounds R, --cache DIR, --quick.
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
from edgefl.target import Target, rounds_to_target  # noqa: E402
from experiments import provenance  # noqa: E402

SCENARIO = REPO / "scenarios" / "algorithms-on-one-network.toml"
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


def run_job(job):
    import torch

    torch.set_num_threads(1)
    from edgefl.runner import Simulation
    from edgefl.scenario import load_scenario

    started = time.time()
    s = load_scenario(SCENARIO, job["overrides"])
    sim = Simulation(s)
    result = sim.run(progress=False)
    rows = [
        {
            k: r.get(k)
            for k in (
                "round",
                "sim_time_s",
                "energy_j",
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
        "wall_s": time.time() - started,
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
    args = parser.parse_args(argv)
    doc, fig_dir = REPO / "docs" / "algorithms-on-one-network.md", REPO / "docs" / "figures"
    if args.quick:
        args.rounds, args.seeds = 4, [0]
        doc = Path("/tmp/edgefl-quick/algorithms-on-one-network.md")
        fig_dir = doc.parent
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
        run_job,
        jobs,
        workers=args.jobs,
        cache=args.cache,
        describe=lambda job, res: f"  {res['key']}: {res['wall_s']:.0f} s",
    )
    total = time.time() - started
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(render(results, jobs, names, missing, args, fig_dir, provenance.current(command(args), total)))
    print(f"wrote {doc} ({total / 60:.1f} min)")
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
        energy = np.nanmean(curve(results, jobs, name, "energy_j"), axis=0)
        t = np.nanmean(curve(results, jobs, name, "sim_time_s"), axis=0)
        ok = ~np.isnan(acc)
        style = dict(color=cmap(i % 20), ls=FAMILY.get(name, "-"), lw=1.4, label=name)
        axes[0].plot(energy[ok], acc[ok], **style)
        axes[1].plot(t[ok], acc[ok], **style)
    axes[0].set_xlabel("cumulative energy of all clients (J)")
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


def render(results, jobs, names, missing, args, fig_dir, produced):
    rel = "figures" if not args.quick else "."
    plot(results, jobs, names, fig_dir / "network-accuracy-energy.png")
    target = 0.80
    out = [
        "# All algorithms on one wireless network",
        "",
        provenance.line(produced),
        "",
        "Regenerate this page:",
        "",
        f"    {command(args)}",
        "",
        f"Scenario `scenarios/algorithms-on-one-network.toml`, {args.rounds} rounds, seed(s) "
        f"{', '.join(map(str, args.seeds))}, SimPy co-simulation (every message of every algorithm is charged: "
        "time and energy per client).",
        "",
        "MNIST-10k (8,000 training images) over 30 clients with Dirichlet(0.5) class mixes, softmax regression "
        "(7,850 parameters, 251 kbit per model), 10 clients per round, τ = 10 local steps of batch 32, lr 0.05; "
        "clients uniform in a 400 m cell (path loss 128.1 + 37.6 log10 d[km], 8 dB shadowing, Rayleigh fading, "
        "7 dB noise figure; rates from the 3GPP CQI table, an upload whose draw is below it is lost), one 1 MHz uplink band shared by the simultaneous uploaders (FDMA), 20 dBm "
        "transmitters, an 800-bit header on every message, 1 GHz CPUs at 2·10⁴ cycles per sample.",
        "",
        f"Algorithms run: {', '.join(names)}."
        + (f" **Not registered at run time (missing): {', '.join(missing)}.**" if missing else " None missing."),
        "",
        f"![accuracy vs energy]({rel}/network-accuracy-energy.png)",
        "",
        f"| algorithm | final acc. (mean) | final acc. (worst client) | energy (J) | of which uplink | simulated time (s) "
        f"| uploads | upload Mbit | energy to {int(100 * target)} % acc. (J) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    rows = []
    last = {
        n: (
            np.nanmean(curve(results, jobs, n, "energy_j"), axis=0)[-1],
            np.nanmean(curve(results, jobs, n, "sim_time_s"), axis=0)[-1],
        )
        for n in names
    }
    e_part, t_part = last.get("partial_avg", (np.nan, np.nan))
    e_per, t_per = last.get("periodic_avg", (np.nan, np.nan))
    for name in names:
        acc = np.nanmean(curve(results, jobs, name, "acc_mean"), axis=0)
        worst = np.nanmean(curve(results, jobs, name, "acc_worst"), axis=0)
        energy = np.nanmean(curve(results, jobs, name, "energy_j"), axis=0)
        up = np.nanmean(curve(results, jobs, name, "uplink_energy_j"), axis=0)
        t = np.nanmean(curve(results, jobs, name, "sim_time_s"), axis=0)
        runs = [results[j["key"]] for j in jobs if j["name"] == name]
        ok = ~np.isnan(acc)
        reach = energy_to_target(acc, energy, target)
        rows.append(
            (
                name,
                acc[ok][-1],
                worst[ok][-1],
                energy[-1],
                up[-1],
                t[-1],
                np.mean([r["uploads"] for r in runs]),
                np.mean([r["upload_bits"] for r in runs]) / 1e6,
                reach,
            )
        )
    for r in sorted(rows, key=lambda r: -r[1]):
        reach = "not reached" if np.isnan(r[8]) else f"{r[8]:.1f}"
        out.append(
            f"| {r[0]} | {r[1]:.3f} | {r[2]:.3f} | {r[3]:.1f} | {r[4]:.1f} | {r[5]:.0f} | {r[6]:.0f} | "
            f"{r[7]:.1f} | {reach} |"
        )
    out += [
        "",
        f"Energy to {int(100 * target)} % accuracy: the cumulative energy at the first evaluated round at "
        f"which the seed-mean accuracy and its centred 5-evaluation moving average both reach "
        f"{int(100 * target)} % (the definition `edgefl optimal-tau` uses, `edgefl.target.rounds_to_target`).",
        "",
        "Changes since the previous version of this page (issue 19, 2026-11-25): energy to 80 % was 1.7 J "
        "(round 2, the first evaluation) for most algorithms under the old definition, the centred average "
        "alone, which claimed the target there although the seed-mean accuracy at round 2 was below 80 % "
        "(≈ 0.79 for FedAvg: figure above); now it is the energy of round 4 (3.5 J) or later. A lost download "
        "now ends the client's chain (no compute or upload after it): a few uploads fewer (partial_avg 6060 "
        "→ 6057 on average) and at most 0.3 % less energy and time; the accuracies are unchanged.",
        "",
        "## Reading the comparison",
        "",
        "- All algorithms see the same data, devices, channel draws' law, τ and number of clients per round; "
        "each runs with its defaults plus the keys listed below — none was tuned for this scenario, so the "
        "ranking is a starting point, not a verdict on any method.",
        "- Message accounting per participant and round (charged by the engine): FedAvg/FedProx/FedDyn 1 model "
        "each way; SCAFFOLD 2 vectors each way; DRDM/DRFA and SCAFF-PD their models plus the loss queries; "
        "FedDA 1 vector + 1 scalar down, 1 up; FedMiD 1 each way; Fast-FedDA 3 down, 2 up; C-/MC-FedDA 3 down, "
        "1 up (+ the stage anchor once per client and stage); partial averaging τ slices of ≈ d/τ each way "
        "per round (τ× the messages, hence τ× the headers and barriers) plus full-model replica hand-overs "
        "every τ − 1 rounds; periodic averaging 1 model each way; FedALIGN: priority clients 1 model down, a "
        "loss scalar and a model up; every other sampled client 1 model + 2 scalars down and one evaluation, "
        "and only accepted ones train and upload a model.",
        "- FedALIGN optimises the priority clients' objective (here clients 0–9, set with "
        "`algorithm.priority_clients`), so its accuracy over all 30 clients is not the quantity it targets; with "
        "`participation = 1/3` it contacts 3 priority and 7 other clients per round, like the others' m = 10, but "
        "every contacted non-priority client also pays an evaluation of its whole training set.",
        "- Several rows coincide in energy and time: FedAvg, FedProx, FedDyn, FedDA, FedMiD and periodic averaging "
        "send one model-sized vector each way to the same sampled clients (the same sampling stream and channel "
        "draws), so the network charges them identically; only their learning differs.",
        f"- Partial averaging uploads τ× more messages (more bits too: a header per message and the replica "
        f"hand-overs) and spends more energy than periodic averaging ({e_part:.1f} vs {e_per:.1f} J); its simulated "
        f"time is about the same ({t_part:.0f} vs {t_per:.0f} s): the same payload crosses the same shared band, the "
        "headers add a few per cent, and here a barrier per iteration costs little because the clients' phases "
        "are short and alike. This scenario has no per-message access latency; with one "
        "(`network.access_latency_s`, before every message) the τ× messages would cost time as well.",
        "- The composite-objective methods (FedDA, FedMiD, Fast-/C-/MC-FedDA) minimise loss + λ‖w‖₁ "
        "(λ = 10⁻⁴; MC-FedDA 4·10⁻⁴ → 10⁻⁴), i.e. a sparse model.",
        "",
        "Per-algorithm keys used here (everything else: defaults, see docs/scenarios.md):",
        "",
    ]
    for name in names:
        if name in EXTRA:
            out.append(f"- `{name}`: " + ", ".join(f"`{k} = {json.dumps(v)}`" for k, v in EXTRA[name].items()))
    out += [
        "",
        "Run a single one with the CLI, e.g.",
        "",
        "    .venv/bin/edgefl run scenarios/algorithms-on-one-network.toml --set algorithm.name=fast_fedda "
        "--set algorithm.fast_fedda.mu=0.001 --set algorithm.fast_fedda.gamma=25",
        "",
    ]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main())
