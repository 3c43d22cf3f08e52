"""Time and device energy to a target on 7 cells (issue 23; docs/multi-cell.md), paired over seeds.

    .venv/bin/python experiments/multi_cell_target.py [--seeds 0 1 2 3 4] [--rounds 40]
    .venv/bin/python experiments/multi_cell_target.py --grids [--seeds 0 1 2 3 4] [--rounds 80]

phones-in-a-cell with ``network.cells = 7``, evaluated every round; the target: mean client accuracy 0.85
(edgefl/target.py's definition: the measured and the 5-evaluation centred mean both reach it). Two studies:
(a) FedAvg on isolated cells, reuse 3 and reuse 1; (b) FedAvg aggregating at the cloud through the edges against
HierFAVG with 2 and 4 edge rounds per cloud round, at a cheap and a dear backhaul. Paired differences (the same
seed: the same drop, data and draws) with 95 % t-intervals; device energy to the target is the committed energy
(docs/model.md §8; ``booked_j``: the booked one beside it). Writes docs/data/multi-cell-target.json (with its provenance).

``--grids``: (c) τ* (``algorithm.local_steps`` ∈ TAUS) for isolated cells, reuse 3 and reuse 1; (d) HierFAVG's
(τ, edge_rounds) grid at both backhauls; each run stops once the target is confirmed (``run.stop_at``: the same
round as the full run's). Writes docs/data/multi-cell-grids.json and renders docs/multi-cell-grids.md from it
(experiments/templates/multi-cell-grids.md.j2; ``--from-data``: re-render from the stored runs, running nothing).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

from edgefl.scenario import load_scenario  # noqa: E402
from edgefl.seed_axis import run_seeds  # noqa: E402
from edgefl.sweeps.analysis import mean_ci  # noqa: E402
from edgefl.target import Target, energy_at, rounds_to_target  # noqa: E402
from experiments import pages, provenance  # noqa: E402

SCENARIO = REPO / "scenarios" / "phones-in-a-cell.toml"
SUMMARY = REPO / "docs" / "data" / "multi-cell-target.json"
GRIDS = REPO / "docs" / "data" / "multi-cell-grids.json"
GRIDS_DOC = REPO / "docs" / "multi-cell-grids.md"
TAUS = (2, 5, 10, 20, 40)
EDGE_ROUNDS = (1, 2, 4)
TARGET = Target("acc_mean", 0.85)
SEVEN = {"network.cells": 7}
REUSE = {
    "isolated": {**SEVEN, "network.interference_load": 0.0},
    "reuse 3": {**SEVEN, "network.reuse": 3},
    "reuse 1": {**SEVEN, "network.reuse": 1},
}
BACKHAULS = {
    "cheap backhaul (100 Mbit/s, 20 ms, 10 nJ/bit)": {
        "backhaul.rate_mbps": 100.0,
        "backhaul.latency_ms": 20.0,
        "backhaul.energy_j_per_bit": 1e-8,
    },
    "dear backhaul (5 Mbit/s, 200 ms, 1 µJ/bit)": {
        "backhaul.rate_mbps": 5.0,
        "backhaul.latency_ms": 200.0,
        "backhaul.energy_j_per_bit": 1e-6,
    },
}
ALGORITHMS = {
    "FedAvg through the cloud": {},
    "HierFAVG, 2 edge rounds": {"algorithm.name": "hierfavg", "algorithm.hierfavg.edge_rounds": 2},
    "HierFAVG, 4 edge rounds": {"algorithm.name": "hierfavg", "algorithm.hierfavg.edge_rounds": 4},
}


def to_target(overrides: dict, seeds: list[int], rounds: int, stop: bool = False) -> list[dict]:
    """Per seed: time (s), device energy (J) and backhaul energy (J) when the target is reached (None: not
    reached); ``stop``: end the run once the target is confirmed (the same reached round, fewer rounds run). The
    seeds are trained together (edgefl.seed_axis.run_seeds: each run's numbers are its solo run's)."""
    stop_at = {"run.stop_at": f"{TARGET.metric}={TARGET.value}"} if stop else {}
    scenarios = [
        load_scenario(SCENARIO, {**overrides, **stop_at, "run.seed": seed, "run.rounds": rounds, "run.eval_every": 1})
        for seed in seeds
    ]
    return [reached_at(result.metrics) for result in run_seeds(scenarios)]


def reached_at(rows: list[dict]) -> dict:
    """A run's time, device and backhaul energy when the target is reached (None: not reached)."""
    reached = rounds_to_target([r["round"] for r in rows], [r["acc_mean"] for r in rows], TARGET)
    if reached is None:
        return {"round": None, "time_s": None, "energy_j": None, "booked_j": None, "backhaul_j": None}
    row = rows[reached - 1]
    return {
        "round": reached,
        "time_s": row["sim_time_s"],
        "energy_j": energy_at(row),  # committed: what stopping there costs (docs/model.md §8)
        "booked_j": row["energy_j"],
        "backhaul_j": row.get("backhaul_energy_j") or 0.0,
    }


def paired(a: list[dict], b: list[dict], key: str) -> list[float] | None:
    """Mean and half-width of a − b over the seeds where both reached the target."""
    pairs = [(x[key], y[key]) for x, y in zip(a, b) if x[key] is not None and y[key] is not None]
    return list(mean_ci([x - y for x, y in pairs])) if len(pairs) >= 2 else None


def fmt(ci) -> str:
    if ci is None or math.isnan(ci[0]):
        return "–"
    return f"{ci[0]:.3g} ± {ci[1]:.2g}" if not math.isnan(ci[1]) else f"{ci[0]:.3g}"


def table(runs: dict[str, list[dict]], baseline: str, keys: list[str]) -> str:
    head = "| configuration | reached | " + " | ".join(f"{k} (mean ± 95 % CI)" for k in keys)
    head += " | " + " | ".join(f"Δ{k} vs {baseline}" for k in keys) + " |"
    lines = [head, "|" + "---|" * (2 + 2 * len(keys))]
    for name, rs in runs.items():
        ok = [r for r in rs if r["round"] is not None]
        cells = [fmt(mean_ci([r[k] for r in ok]) if ok else None) for k in keys]
        deltas = ["" if name == baseline else fmt(paired(rs, runs[baseline], k)) for k in keys]
        lines.append(f"| {name} | {len(ok)}/{len(rs)} | " + " | ".join(cells + deltas) + " |")
    return "\n".join(lines)


def reached_ci(runs: list[dict], key: str) -> dict:
    """Mean ± 95 % t-interval of ``key`` over the seeds that reached the target, and how many did."""
    ok = [r[key] for r in runs if r["round"] is not None]
    return {"n": len(ok), "of": len(runs), "ci": list(mean_ci(ok)) if ok else None}


def optimum(options: dict[str, list[dict]]) -> dict:
    """The option of least mean device energy to the target among those every seed reached; each other option's
    paired energy difference to it (mean ± 95 % CI), and those whose interval lies above 0 (worse, separably)."""
    full = [name for name, runs in options.items() if all(r["round"] is not None for r in runs)]
    best = min(full, key=lambda name: mean_ci([r["energy_j"] for r in options[name]])[0])
    deltas = {name: paired(runs, options[best], "energy_j") for name, runs in options.items() if name != best}
    worse = [name for name, d in deltas.items() if d is not None and d[0] - d[1] > 0]
    close = [name for name in deltas if name in full and name not in worse]
    return {"best": best, "deltas": deltas, "worse": worse, "close": close}


def summarise(grids: dict) -> dict:
    """What the page shows: each configuration's energy and time to target by τ (and edge_rounds), the optimum."""
    tau = {}
    for name, by_tau in grids["tau"].items():
        tau[name] = {
            "energy": {t: reached_ci(runs, "energy_j") for t, runs in by_tau.items()},
            "time": {t: reached_ci(runs, "time_s") for t, runs in by_tau.items()},
            "round": {t: reached_ci(runs, "round") for t, runs in by_tau.items()},
            "optimum": optimum(by_tau),
        }
    hier = {}
    for backhaul, by_pair in grids["hierarchical"].items():
        flat = {key: runs for key, runs in by_pair.items() if key.endswith(",1")}
        edge = {key: runs for key, runs in by_pair.items() if not key.endswith(",1")}
        h = {
            "energy": {key: reached_ci(runs, "energy_j") for key, runs in by_pair.items()},
            "time": {key: reached_ci(runs, "time_s") for key, runs in by_pair.items()},
            "backhaul": {key: reached_ci(runs, "backhaul_j") for key, runs in by_pair.items()},
            "optimum": optimum(by_pair),
            "flat_optimum": optimum(flat),
            "edge_optimum": optimum(edge),
        }
        # the best HierFAVG pair with edge aggregations (edge_rounds > 1) against the best flat one, paired
        best, flat_best = by_pair[h["edge_optimum"]["best"]], by_pair[h["flat_optimum"]["best"]]
        h["vs_flat"] = {key: paired(best, flat_best, key) for key in ("round", "time_s", "energy_j", "backhaul_j")}
        hier[backhaul] = h
    return {"tau": tau, "hierarchical": hier}


def render(grids: dict) -> str:
    """docs/multi-cell-grids.md from the stored runs (docs/data/multi-cell-grids.json)."""
    return pages.render(
        "multi-cell-grids.md.j2",
        filters={
            "ci": fmt,
            "cell": lambda c: "–" if c["ci"] is None else fmt(c["ci"]) + reached_mark(c),
            "pair": lambda key: "({}, {})".format(*key.split(",")),
            "verdict": verdict,
        },
        grids=grids,
        summary=summarise(grids),
        committed=any("booked_j" in r for by_tau in grids["tau"].values() for rs in by_tau.values() for r in rs),
    )


def verdict(ci: list[float] | None) -> str:
    """A paired difference's sign, if its 95 % interval excludes 0."""
    if ci is None or math.isnan(ci[1]):
        return "not measured"
    return "lower" if ci[0] + ci[1] < 0 else "higher" if ci[0] - ci[1] > 0 else "not separable"


def reached_mark(c: dict) -> str:
    return "" if c["n"] == c["of"] else f" ({c['n']}/{c['of']})"


def grids(seeds: list[int], rounds: int) -> None:
    """(c) τ* per reuse; (d) HierFAVG's (τ, edge_rounds) at both backhauls: docs/data/multi-cell-grids.json, then
    docs/multi-cell-grids.md rendered from it."""
    start = time.time()
    command = f"python experiments/multi_cell_target.py --grids --seeds {' '.join(map(str, seeds))} --rounds {rounds}"
    produced = provenance.current(command, 0.0)  # the code as it is when the runs start
    tau = {}
    for name, o in REUSE.items():
        tau[name] = {str(t): to_target({**o, "algorithm.local_steps": t}, seeds, rounds, stop=True) for t in TAUS}
        print(name, {t: [r["energy_j"] for r in rs] for t, rs in tau[name].items()}, flush=True)
    hier: dict[str, dict] = {}
    for backhaul, b in BACKHAULS.items():
        hier[backhaul] = {}
        for t in TAUS:
            for k in EDGE_ROUNDS:
                o = {**SEVEN, **b, "algorithm.name": "hierfavg", "algorithm.local_steps": t}
                o["algorithm.hierfavg.edge_rounds"] = k
                hier[backhaul][f"{t},{k}"] = to_target(o, seeds, rounds, stop=True)
                print(backhaul, t, k, [r["energy_j"] for r in hier[backhaul][f"{t},{k}"]], flush=True)
    produced["wall_s"] = round(time.time() - start)
    summary = {
        "produced": produced,
        "seeds": seeds,
        "rounds": rounds,
        "target": "acc_mean >= 0.85",
        "taus": list(TAUS),
        "edge_rounds": list(EDGE_ROUNDS),
        "tau": tau,
        "hierarchical": hier,
    }
    pages.store_and_render(summary, GRIDS, GRIDS_DOC, render, time.time() - start)


# The 5-seed study's configurations as (τ, edge_rounds) pairs of the grids at the scenario's τ = 10: its runs are the
# grids' runs of those seeds (the same overrides; run.stop_at ends a run at the round the full run confirms it, and
# run.rounds, 40 or 80, is not reached): checked run by run before the page used them (docs/multi-cell.md).
FROM_GRIDS = {
    "FedAvg through the cloud": "10,1",
    "HierFAVG, 2 edge rounds": "10,2",
    "HierFAVG, 4 edge rounds": "10,4",
}


def from_grids(seeds: list[int]) -> dict:
    """The 5-seed study (a) and (b) at ``seeds``, taken from docs/data/multi-cell-grids.json at τ = 10."""
    grids = json.loads(GRIDS.read_text())
    at = [grids["seeds"].index(seed) for seed in seeds]
    reuse = {name: [grids["tau"][name]["10"][i] for i in at] for name in REUSE}
    hier = {
        backhaul: {name: [grids["hierarchical"][backhaul][pair][i] for i in at] for name, pair in FROM_GRIDS.items()}
        for backhaul in BACKHAULS
    }
    return {"produced": grids["produced"], "reuse": reuse, "hierarchical": hier}


def print_tables(reuse: dict, hier: dict) -> None:
    print(table(reuse, "isolated", ["round", "time_s", "energy_j", "booked_j"]), "\n", flush=True)
    for backhaul, runs in hier.items():
        print(f"**{backhaul}**\n")
        print(table(runs, "FedAvg through the cloud", ["round", "time_s", "energy_j", "booked_j", "backhaul_j"]), "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--rounds", type=int, default=None, help="rounds at most (default 40; --grids: 80)")
    parser.add_argument("--grids", action="store_true", help="the τ* and (τ, edge_rounds) grids")
    parser.add_argument("--from-data", action="store_true", help="re-render docs/multi-cell-grids.md, running nothing")
    parser.add_argument(
        "--from-grids", action="store_true", help="print the 5-seed study's tables from the grids' runs at τ = 10"
    )
    args = parser.parse_args()
    if args.from_grids:
        stored = from_grids(args.seeds)
        print_tables(stored["reuse"], stored["hierarchical"])
        return
    if args.from_data:
        GRIDS_DOC.write_text(render(json.loads(GRIDS.read_text())))
        return
    if args.grids:
        grids(args.seeds, args.rounds or 80)
        return
    args.rounds = args.rounds or 40
    start = time.time()
    command = f"python experiments/multi_cell_target.py --seeds {' '.join(map(str, args.seeds))} --rounds {args.rounds}"
    produced = provenance.current(command, 0.0)  # the code as it is when the runs start
    reuse = {name: to_target(o, args.seeds, args.rounds) for name, o in REUSE.items()}
    print(table(reuse, "isolated", ["round", "time_s", "energy_j", "booked_j"]), "\n", flush=True)
    hier = {}
    for backhaul, b in BACKHAULS.items():
        hier[backhaul] = {
            name: to_target({**SEVEN, **b, **o}, args.seeds, args.rounds) for name, o in ALGORITHMS.items()
        }
        print(f"**{backhaul}**\n")
        keys = ["round", "time_s", "energy_j", "booked_j", "backhaul_j"]
        print(table(hier[backhaul], "FedAvg through the cloud", keys), "\n", flush=True)
    produced["wall_s"] = round(time.time() - start)
    SUMMARY.parent.mkdir(exist_ok=True)
    SUMMARY.write_text(
        json.dumps(
            {
                "produced": produced,
                "seeds": args.seeds,
                "rounds": args.rounds,
                "target": "acc_mean >= 0.85",
                "reuse": reuse,
                "hierarchical": hier,
            },
            indent=1,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
