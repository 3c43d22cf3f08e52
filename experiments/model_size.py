"""How the model's size moves the energy-optimal τ (issue 29 item 5; docs/model-size.md).

    .venv/bin/python experiments/model_size.py [--seeds 0 1 2 3 4] [--rounds 100] [--workers 1]
    .venv/bin/python experiments/model_size.py --from-data      # re-render the page from the stored runs
    .venv/bin/python experiments/model_size.py --pilot          # one seed, two models, two τ: the cost

What sets τ* is the cost of a round's messages against the cost of a local step: the bits of a message
(radio energy) and the FLOPs of a trained sample (compute energy). Both are taken from the real models
(edgefl/zoo.py, edgefl/models.py: d parameters and the training FLOPs per sample measured by edgefl's
counter at the input shape of their data set) and declared to the network and energy model with two
scenario keys: ``network.header_bits`` pads every message (both directions; FedAvg sends one model per
message) up to d x 32 bits, and ``devices.cycles_per_sample`` replaces the learner's measured FLOPs. The
learner is the linear model on the real MNIST test split (stand-in for the learning curve: the rounds to
target as a function of τ are the linear model's, not the CNN's or ResNet's).

The network is phones-in-a-cell (scenarios/phones-in-a-cell.toml: 50 phones, FedAvg, m = 10, MCS over
Rayleigh fading, ARQ, access latency, LTE tails, stragglers, walking users) in one cell and on 7 cells,
with three changes for every model (the linear one included): batteries and Markov availability off (their
time scales are tuned to the linear model's 0.5 s rounds: a ResNet round lasts hours) and the deadline
scaled to what the model can meet (:func:`deadline_s`). Each run stops once the target is confirmed.
τ* and its set: edgefl.sweeps.analysis (the functions behind ``edgefl optimal-tau``).
Writes docs/data/model-size.json and renders docs/model-size.md from it (experiments/templates/model-size.md.j2).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

from edgefl.models import build_model  # noqa: E402
from edgefl.runner import Simulation  # noqa: E402
from edgefl.scenario import Scenario, scenario_from_dict  # noqa: E402
from edgefl.scenario.loading import absolute_path, apply_overrides, read_toml  # noqa: E402
from edgefl.sweeps.analysis import SeedOutcome, best_tau, mean_ci, tau_set, tau_set_label, tau_stats  # noqa: E402
from edgefl.target import Target, energy_at, rounds_to_target  # noqa: E402
from experiments import pages, provenance  # noqa: E402

SCENARIO = REPO / "scenarios" / "phones-in-a-cell.toml"
SUMMARY = REPO / "docs" / "data" / "model-size.json"
DOC = REPO / "docs" / "model-size.md"
TAUS = (1, 2, 5, 10, 20, 40)
TARGET = Target("acc_mean", 0.85)
CONFIDENCE = 0.95
# name -> (model.name, input shape, classes, the data set whose shape it is measured at)
MODELS = {
    "linear": ("linear", (1, 28, 28), 10, "MNIST (trained)"),
    "cnn": ("cnn", (1, 28, 28), 10, "MNIST"),
    "cifar_cnn": ("cifar_cnn", (3, 24, 24), 10, "CIFAR-10, 24x24 crops"),
    "femnist_cnn": ("femnist_cnn", (1, 28, 28), 62, "FEMNIST"),
    "resnet18_gn": ("resnet18_gn", (3, 32, 32), 10, "CIFAR-10"),
    "shakespeare_lstm": ("shakespeare_lstm", (80,), 80, "Shakespeare (80 characters)"),
}
NETWORKS = {"one cell": {}, "7 cells": {"network.cells": 7}}
# The deadline rule (every model, the linear one included): phones-in-a-cell's 0.4 s per phase for the linear
# model's 251 kbit messages, scaled with the message, plus twice the nominal compute of τ steps on the slowest
# device class (1 GHz), room for the mean straggler slowdown (1 + Exp(0.5)).
BASE_DEADLINE_S = 0.4
SLOWEST_HZ = 1e9
COMPUTE_ALLOWANCE = 2.0


def sizes() -> dict[str, dict]:
    """Each model's d (parameters and float buffers), message bits (d x 32) and training FLOPs per sample,
    measured on the real module (edgefl.models.build_model) at its data set's input shape."""
    out = {}
    for name, (model, shape, classes, data) in MODELS.items():
        m = build_model(model, shape, classes, 0)
        out[name] = {
            "model": model,
            "input_shape": list(shape),
            "classes": classes,
            "data": data,
            "parameters": m.dim,
            "train_flops_per_sample": m.train_flops_per_sample,
        }
    return out


def study_raw() -> dict:
    """phones-in-a-cell as a dict, with batteries and Markov availability taken out (see the module doc)."""
    raw = read_toml(SCENARIO)
    raw["data"]["dir"] = absolute_path(SCENARIO.parent, raw["data"]["dir"], "data.dir", SCENARIO)
    devices = raw["devices"]
    for key in ("battery_j", "battery_reserve_j", "harvest_w", "harvest", "mean_on_s", "mean_off_s"):
        devices.pop(key, None)
    devices["availability"] = "always"
    for cls in devices.get("classes", []):
        cls.pop("battery_j", None)
    return raw


def deadline_s(size: dict, linear: dict, tau: int, batch: int, cycles_per_flop: float) -> float:
    """The deadline (s) a model can meet: see BASE_DEADLINE_S."""
    bits_ratio = size["parameters"] / linear["parameters"]
    compute_s = tau * batch * size["train_flops_per_sample"] * cycles_per_flop / SLOWEST_HZ
    return BASE_DEADLINE_S * bits_ratio + COMPUTE_ALLOWANCE * compute_s


def overrides(size: dict, linear: dict, raw: dict, tau: int) -> dict:
    """The keys that make the network and energy model see ``size``'s model while the linear one trains."""
    net, dev, alg = raw["network"], raw["devices"], raw["algorithm"]
    bits_per_param = net.get("bits_per_param", 32)
    return {
        "algorithm.local_steps": tau,
        "network.header_bits": int(
            net.get("header_bits", 0) + bits_per_param * (size["parameters"] - linear["parameters"])
        ),
        "devices.cycles_per_sample": size["train_flops_per_sample"] * dev["cycles_per_flop"],
        "network.deadline_s": deadline_s(size, linear, tau, alg["batch_size"], dev["cycles_per_flop"]),
    }


def study_scenario(network: str, keys: dict, seed: int, rounds: int) -> Scenario:
    """The study's scenario for one run: ``keys`` (:func:`overrides`) on ``network``, stopping at the target."""
    run = {"run.seed": seed, "run.rounds": rounds, "run.eval_every": 1, "run.threads": 1}
    run["run.stop_at"] = f"{TARGET.metric}={TARGET.value}"
    raw = apply_overrides(study_raw(), {**keys, **run, **NETWORKS[network]})
    return scenario_from_dict(raw, source=str(SCENARIO))


SPLIT = {  # the page's energy split: category -> metrics.csv columns (booked), committed - booked goes to tails
    "compute": ("compute_energy_j",),
    "transmission": ("uplink_energy_j", "downlink_energy_j"),
    "tails": ("promotion_energy_j", "tail_energy_j"),
    "idle": ("idle_energy_j",),
}


def one_run(job: tuple) -> dict:
    """One training to the target (stopped once confirmed): what the page needs at the reached round."""
    network, name, tau, seed, rounds, keys = job
    start = time.process_time()
    rows = Simulation(study_scenario(network, keys, seed, rounds)).run(progress=False).metrics
    out = {"network": network, "model": name, "tau": tau, "seed": seed, "cpu_s": time.process_time() - start}
    reached = rounds_to_target([r["round"] for r in rows], [r[TARGET.metric] for r in rows], TARGET)
    out["round"] = reached
    out["rounds_run"] = len(rows)
    arrived = sum(r["uploads_arrived"] for r in rows[: reached or len(rows)])
    missed = sum(r["uploads_missed"] for r in rows[: reached or len(rows)])
    out["arrived_fraction"] = arrived / max(arrived + missed, 1)
    if reached is None:
        return out
    row = rows[reached - 1]
    out["time_s"] = row["sim_time_s"]
    out["energy_j"] = energy_at(row)  # committed (docs/model.md §8): the default energy to target
    out["booked_j"] = row["energy_j"]
    for part, columns in SPLIT.items():
        out[part + "_j"] = sum(row[c] for c in columns)
    out["tails_j"] += out["energy_j"] - out["booked_j"]  # the radio tails still to run when stopping there
    return out


def analyse(data: dict) -> dict:
    """Per (network, model): τ*, its set, the energy split at τ*, the measured cost ratio, β and the
    expected τ* (Wang et al.'s structure, docs/control.md): τ* = β / (1 - β) · b / a."""
    out = {}
    for network in data["networks"]:
        out[network] = {}
        for name in data["models"]:
            runs = [r for r in data["runs"] if r["network"] == network and r["model"] == name]
            outcomes = [
                SeedOutcome(
                    (network, name),
                    r["tau"],
                    r["seed"],
                    r["round"],
                    r.get("energy_j"),
                    r.get("compute_j"),
                    None if r["round"] is None else r["energy_j"] - r["compute_j"] - r["idle_j"],
                )
                for r in runs
            ]
            stats = sorted(tau_stats(outcomes, CONFIDENCE), key=lambda s: s.tau)
            best = best_tau(stats)
            members, paired = tau_set(best, stats, CONFIDENCE) if best else ([], {})
            ok = [r for r in runs if r["round"] is not None]
            # a: compute energy per local step; b: the rest of a round (radio: transmission + tails + idle)
            a = mean_ci([r["compute_j"] / (r["round"] * r["tau"]) for r in ok])[0]
            b = mean_ci([(r["energy_j"] - r["compute_j"]) / r["round"] for r in ok])[0]
            beta = fitted_beta(stats)
            expected = beta / (1 - beta) * b / a if beta is not None and beta < 1 else None
            at_best = [r for r in runs if best and r["tau"] == best.tau]
            out[network][name] = {
                "tau_star": best.tau if best else None,
                "tau_set": tau_set_label(members, [s.tau for s in stats]),
                "tau_members": members,
                "per_tau": {
                    str(s.tau): {
                        "reached": len(s.seeds) - len(s.never_reached),
                        "of": len(s.seeds),
                        "rounds": [s.rounds_mean, s.rounds_ci],
                        "energy": [s.energy_mean, s.energy_ci],
                        "paired": list(paired.get(s.tau, (math.nan, math.nan, math.nan))),
                        "arrived": float(np.mean([r["arrived_fraction"] for r in runs if r["tau"] == s.tau])),
                        "time": list(mean_ci([r["time_s"] for r in ok if r["tau"] == s.tau])),
                    }
                    for s in stats
                },
                "split": {
                    part: float(np.mean([r[part + "_j"] for r in at_best])) if at_best and best else None
                    for part in SPLIT
                },
                "a_j": a,
                "b_j": b,
                "ratio": b / a,
                "beta": beta,
                "expected_tau": expected,
            }
        pooled = {  # the learner's rounds to target at each τ, over every model's runs that reached it
            str(t): list(
                mean_ci([r["round"] for r in data["runs"] if r["network"] == network and r["tau"] == t and r["round"]])
            )
            for t in data["taus"]
        }
        out[network] = {"models": out[network], "expectation": against_expectation(out[network]), "rounds": pooled}
    return out


def against_expectation(by_model: dict[str, dict]) -> dict:
    """Wang et al.'s expectation on one network: τ* never falls as the cost ratio b/a grows. The models in
    order of b/a; each pair where it falls, and whether their τ sets still overlap (the fall within the noise)."""
    order = sorted((n for n in by_model if by_model[n]["tau_star"] is not None), key=lambda n: by_model[n]["ratio"])
    falls = []
    for i, low in enumerate(order):
        for high in order[i + 1 :]:
            if by_model[high]["tau_star"] < by_model[low]["tau_star"]:
                overlap = set(by_model[low]["tau_members"]) & set(by_model[high]["tau_members"])
                falls.append({"lower_ratio": low, "higher_ratio": high, "sets_overlap": sorted(overlap)})
    ratios = [by_model[n]["ratio"] for n in order]
    taus = [by_model[n]["tau_star"] for n in order]
    rho = float(spearmanr(ratios, taus).statistic) if len(set(taus)) > 1 else math.nan
    return {"order": order, "falls": falls, "spearman": rho}


def fitted_beta(stats) -> float | None:
    """β of R(τ) ∝ τ^-β: least squares of ln(mean rounds) on ln τ over the τ every seed reached."""
    pts = [(math.log(s.tau), math.log(s.rounds_mean)) for s in stats if s.eligible]
    if len(pts) < 2:
        return None
    x, y = np.array(pts).T
    return float(-np.polyfit(x, y, 1)[0])


def num(value: float | None, digits: int = 3) -> str:
    """``digits`` significant digits without an exponent: 86047.4 -> "86,000", 0.010704 -> "0.0107"; None -> "–"."""
    if value is None or math.isnan(value):
        return "–"
    if value == 0:
        return "0"
    rounded = float(f"{value:.{digits}g}")
    return f"{rounded:,.{max(0, digits - 1 - math.floor(math.log10(abs(rounded))))}f}"


def ci(pair: list | None, digits: int = 3) -> str:
    """A (mean, 95 % half-width) pair: "86,000 ± 4,100"; a lone mean: "86,000"."""
    if pair is None or pair[0] is None or math.isnan(pair[0]):
        return "–"
    return num(pair[0], digits) + ("" if pair[1] is None or math.isnan(pair[1]) else f" ± {num(pair[1], 2)}")


def on_grid(value: float | None, grid: list[int]) -> int | None:
    """The grid's τ nearest to ``value`` on a log scale (clipped to the grid's ends)."""
    if value is None or math.isnan(value):
        return None
    return min(grid, key=lambda t: abs(math.log(t) - math.log(max(value, 1e-9))))


def render(data: dict) -> str:
    cpu_s = sum(r["cpu_s"] for r in data["runs"])
    filters = {"num": num, "ci": ci, "kj": lambda v: num(None if v is None else v / 1e3)}
    filters["kj_ci"] = lambda p: ci(None if p is None or p[0] is None else [p[0] / 1e3, p[1] / 1e3])
    filters["on_grid"] = lambda v: on_grid(v, data["taus"])
    result = analyse(data)
    one, seven = (result[n]["models"] for n in (data["networks"][0], data["networks"][-1]))
    falls = [name for name in data["models"] if falls_between(name, one, seven)]
    return pages.render("model-size.md.j2", filters=filters, data=data, result=result, cpu_s=cpu_s, falls=falls)


def falls_between(name: str, before: dict, after: dict) -> bool:
    """Whether τ* falls from ``before`` to ``after`` (two networks' results) while b/a rises."""
    a, b = before[name], after[name]
    return (
        b["ratio"] > a["ratio"]
        and b["tau_star"] is not None
        and a["tau_star"] is not None
        and b["tau_star"] < a["tau_star"]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--rounds", type=int, default=100, help="rounds at most (each run stops at the target)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--pilot", action="store_true", help="one seed, linear and resnet18_gn, τ = 1 and 40")
    parser.add_argument("--from-data", action="store_true", help="re-render docs/model-size.md, running nothing")
    parser.add_argument("--from-log", type=Path, help="store the complete seeds of a stopped run's printed runs")
    parser.add_argument("--wall-s", type=float, default=0.0, help="with --from-log: the stopped run's wall time")
    args = parser.parse_args()
    if args.from_log:
        from_log(args.from_log, args.rounds, args.wall_s)
        return
    if args.from_data:
        DOC.write_text(render(json.loads(SUMMARY.read_text())))
        return
    start = time.time()
    command = f"python experiments/model_size.py --seeds {' '.join(map(str, args.seeds))} --rounds {args.rounds}"
    produced = provenance.current(command, 0.0)
    measured = sizes()
    raw, linear = study_raw(), measured["linear"]
    models = ["linear", "resnet18_gn"] if args.pilot else list(MODELS)
    taus, seeds = ((1, 40), args.seeds[:1]) if args.pilot else (TAUS, args.seeds)
    jobs = [
        (network, name, tau, seed, args.rounds, overrides(measured[name], linear, raw, tau))
        for seed in seeds  # seeds outermost: the runs of the first seeds are complete first
        for network in NETWORKS
        for name in models
        for tau in taus
    ]
    runs = []
    # spawned workers: a forked child of a process that ran torch can deadlock in its thread pool
    pool = (
        ProcessPoolExecutor(args.workers, mp_context=multiprocessing.get_context("spawn")) if args.workers > 1 else None
    )
    for r in pool.map(one_run, jobs) if pool else map(one_run, jobs):
        print(json.dumps(r), flush=True)
        runs.append(r)
    if args.pilot:
        print(f"pilot: {len(runs)} runs, {time.time() - start:.0f} s wall")
        return
    produced["wall_s"] = round(time.time() - start)
    store(runs, args.seeds, args.rounds, produced, measured, raw)


def store(runs: list[dict], seeds: list[int], rounds: int, produced: dict, measured: dict, raw: dict) -> None:
    """docs/data/model-size.json from the runs, then docs/model-size.md rendered from it."""
    linear = measured["linear"]
    data = {
        "produced": produced,
        "seeds": seeds,
        "rounds": rounds,
        "target": f"{TARGET.metric} >= {TARGET.value}",
        "taus": list(TAUS),
        "networks": list(NETWORKS),
        "models": list(MODELS),
        "sizes": measured,
        "deadlines": {
            name: {str(t): overrides(measured[name], linear, raw, t)["network.deadline_s"] for t in TAUS}
            for name in MODELS
        },
        "runs": runs,
    }
    pages.store_and_render(data, SUMMARY, DOC, render, produced["wall_s"])


def from_log(log: Path, rounds: int, wall_s: float) -> None:
    """Store the runs a run of this script printed (one JSON object a line), keeping the seeds whose runs are all
    there: for a run stopped early (the seeds are run one after another)."""
    runs = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    per_seed = len(NETWORKS) * len(MODELS) * len(TAUS)
    seeds = sorted(s for s in {r["seed"] for r in runs} if sum(r["seed"] == s for r in runs) == per_seed)
    produced = provenance.current(
        f"python experiments/model_size.py --seeds {' '.join(map(str, seeds))} --rounds {rounds}", wall_s
    )
    produced["note"] = f"Seeds {seeds[0]}-{seeds[-1]} of a longer run stopped early, stored with --from-log."
    store([r for r in runs if r["seed"] in seeds], seeds, rounds, produced, sizes(), study_raw())


if __name__ == "__main__":
    main()
