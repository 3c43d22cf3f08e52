"""Energy to a target, booked and committed (issue 28's closing note; docs/committed-energy.md).

    python experiments/committed_energy.py [--seeds 0 1 2 3 4] [--target acc_mean=0.85]
    python experiments/committed_energy.py --from-data     # re-render the page from docs/data/committed-energy.json

FedBuff against FedAvg on phones-in-a-cell (LTE radio tails of 11.6 s at 1.06 W), in one cell and in 7 cells at
frequency reuse 1 and 3, each run stopped once the target is reached and confirmed (``run.stop_at``): the energy
to the target booked (what was charged by that round) and committed (booked plus what the radios still in a tail
then will spend: what stopping there costs, docs/model.md §8), per seed, and the FedBuff / FedAvg ratio of each,
paired over the seeds.
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

from edgefl.results import atomic_write_text  # noqa: E402  (after the path: run from a checkout)
from edgefl.scenario import load_scenario  # noqa: E402
from edgefl.seed_axis import run_seeds  # noqa: E402
from edgefl.sweeps.analysis import mean_ci  # noqa: E402
from edgefl.target import COMMITTED_ENERGY, parse_target  # noqa: E402
from experiments import pages, provenance  # noqa: E402

PHONES = REPO / "scenarios" / "phones-in-a-cell.toml"
DOC = REPO / "docs" / "committed-energy.md"
DATA = REPO / "docs" / "data" / "committed-energy.json"
NETWORKS = {
    "1 cell": [],
    "7 cells, reuse 1": ["network.cells=7", "network.reuse=1"],
    "7 cells, reuse 3": ["network.cells=7", "network.reuse=3"],
}
# FedAvg: the scenario's 60 rounds of m = 10; FedBuff (K = 5, C = 10): as many server updates as 600 uploads.
SERVERS = {
    "FedAvg": ["algorithm.name=fedavg"],
    "FedBuff K = 5, C = 10": [
        "algorithm.name=fedbuff",
        "algorithm.fedbuff.buffer_size=5",
        "algorithm.fedbuff.concurrency=10",
        "run.rounds=120",
    ],
}


def runs_of(network: str, server: str, seeds: list[int], target: str) -> list[dict]:
    """The runs of one network and server, a run per seed, the seeds trained together (edgefl.seed_axis.run_seeds:
    each run's numbers are its solo run's)."""
    scenarios = [
        load_scenario(PHONES, [*NETWORKS[network], *SERVERS[server], f"run.seed={seed}", f"run.stop_at={target}"])
        for seed in seeds
    ]
    results = run_seeds(scenarios, run=lambda sim: sim.run(progress=False, targets=[parse_target(target)]))
    return [one_run(network, server, seed, result) for seed, result in zip(seeds, results)]


def one_run(network: str, server: str, seed: int, result) -> dict:
    """What the page keeps of a run."""
    (outcome,) = result.summary["targets"]
    return {
        "network": network,
        "server": server,
        "seed": seed,
        "reached": outcome["reached"],
        "rounds": outcome["rounds"],
        "sim_time_s": outcome["sim_time_s"],
        "booked_j": outcome["booked_energy_j"],
        "committed_j": outcome["energy_j"],
        "final_j": result.summary["energy_j"],  # the run stopped at the confirming round: its committed energy
        "final_committed_j": result.metrics[-1]["committed_energy_j"],
    }


def _pm(values) -> str:
    mean, half = mean_ci(values)
    if math.isnan(mean):
        return "–"
    return f"{mean:.4g}" + ("" if math.isnan(half) else f" ± {half:.2g}")


def _ratio(runs: list[dict], network: str, key: str) -> tuple[str, bool | None, int]:
    """FedBuff / FedAvg of ``key`` in ``network``: the geometric mean over the seeds both reached the target with of
    the per-seed ratio and its 95 % t-interval (on the log-ratios), as text; whether significant; the seeds."""
    first, second = SERVERS
    by = {
        s: {r["seed"]: r for r in runs if r["network"] == network and r["server"] == s and r["reached"]}
        for s in SERVERS
    }
    seeds = sorted(set(by[first]) & set(by[second]))
    mean, half = mean_ci([math.log(by[second][s][key] / by[first][s][key]) for s in seeds])
    if math.isnan(mean):
        return "–", None, len(seeds)
    if math.isnan(half):
        return f"{math.exp(mean):.3f}", None, len(seeds)
    lo, hi = mean - half, mean + half
    significant = hi < 0 or lo > 0
    verdict = "significant" if significant else "not significant"
    return f"{math.exp(mean):.3f} [{math.exp(lo):.3f}, {math.exp(hi):.3f}] ({verdict})", significant, len(seeds)


def render(data: dict) -> str:
    """The page from the stored runs, through experiments/templates/committed-energy.md.j2."""
    runs = data["runs"]
    rows = []
    for network in NETWORKS:
        for server in SERVERS:
            mine = [r for r in runs if r["network"] == network and r["server"] == server]
            ok = [r for r in mine if r["reached"]]
            rows.append(
                {
                    "network": network,
                    "server": server,
                    "reached": f"{len(ok)}/{len(mine)}",
                    "time": _pm([r["sim_time_s"] for r in ok]),
                    "booked": _pm([r["booked_j"] for r in ok]),
                    "committed": _pm([r["committed_j"] for r in ok]),
                    "factor": _pm([r["committed_j"] / r["booked_j"] for r in ok]),
                }
            )
    ratios = []
    for network in NETWORKS:
        booked, booked_sig, seeds = _ratio(runs, network, "booked_j")
        committed, committed_sig, _ = _ratio(runs, network, "committed_j")
        ratios.append(
            {
                "network": network,
                "booked": booked,
                "committed": committed,
                "seeds": seeds,
                "flips": booked_sig != committed_sig,
            }
        )
    return pages.render(
        "committed-energy.md.j2",
        produced=data["produced"],
        target=data["target"],
        seeds=data["seeds"],
        committed_energy=COMMITTED_ENERGY,
        rows=rows,
        ratios=ratios,
        changed=[r["network"] for r in ratios if r["flips"]],
        worst=max(abs(r["final_j"] - r["final_committed_j"]) for r in runs),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--target", default="acc_mean=0.85")
    parser.add_argument("--from-data", action="store_true")
    args = parser.parse_args()
    if args.from_data:
        data = json.loads(DATA.read_text())
    else:
        command = ".venv/bin/python experiments/committed_energy.py" + (
            f" --seeds {' '.join(map(str, args.seeds))}" if args.seeds != [0, 1, 2, 3, 4] else ""
        )
        produced = provenance.current(command, 0.0)  # the code as it is when the runs start
        started, runs = time.perf_counter(), []
        for network in NETWORKS:
            for server in SERVERS:
                for r in runs_of(network, server, args.seeds, args.target):
                    runs.append(r)
                    print(
                        f"{network} | {server} | seed {r['seed']}: {r['booked_j']} J booked, {r['committed_j']} J committed"
                    )
        produced["wall_s"] = round(time.perf_counter() - started)
        data = {"target": args.target, "seeds": args.seeds, "runs": runs, "produced": produced}
        atomic_write_text(DATA, json.dumps(data, indent=1) + "\n")
    atomic_write_text(DOC, render(data))


if __name__ == "__main__":
    main()
