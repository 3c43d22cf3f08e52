"""What each effect of the realistic radio and device model does: docs/realistic-network.md.

The baseline is scenarios/phones-in-a-cell.toml (FedAvg) with every effect on; each other
configuration switches ONE effect off, the rest as in the baseline. For every configuration,
local steps tau in TAUS and SEEDS seeds: energy, simulated time and rounds to a target on the mean
per-client accuracy (the project's one rounds-to-target definition, edgefl.target), mean ±
95 % t-interval over the seeds, and the energy-optimal tau* among the tau every seed reaches.

    .venv/bin/python experiments/realistic_network.py --workers 2          # ~5 minutes on 2 cores
    .venv/bin/python experiments/realistic_network.py --from-data           # re-render from docs/data
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import sys
import time
import tomllib
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from edgefl.results import atomic_write_text  # noqa: E402
from edgefl.sweeps.jobs import run_keyed  # noqa: E402
from edgefl.target import Target, definition, energy_at, rounds_to_target  # noqa: E402
from experiments import pages, provenance  # noqa: E402

SCENARIO = ROOT / "scenarios" / "phones-in-a-cell.toml"
PAGE = ROOT / "docs" / "realistic-network.md"
FIGURE = ROOT / "docs" / "figures" / "realistic-network-energy.png"
DATA = ROOT / "docs" / "data" / "realistic-network-runs.csv"  # one line per run: what the page is rendered from
PRODUCED = ROOT / "docs" / "data" / "realistic-network-produced.json"  # the commit and command of those runs
TAUS = (2, 5, 10, 20)
SEEDS = (0, 1, 2, 3, 4)
TARGET = Target("acc_mean", 0.85)


def _no_batteries(raw: dict) -> None:
    for table in [raw["devices"], *raw["devices"].get("classes", [])]:
        for key in ("battery_j", "battery_reserve_j", "harvest_w", "harvest"):
            table.pop(key, None)


# (name, what changes, how); the baseline first, then one effect off at a time, then extras.
CONFIGURATIONS = [
    ("baseline", "nothing: every effect of phones-in-a-cell on", lambda raw: None),
    (
        "shannon",
        "MCS rate adaptation (Shannon rates, one Rayleigh draw per attempt)",
        lambda raw: raw["network"].update(rate="shannon"),
    ),
    ("no-arq", "retransmissions (max_retransmissions = 0)", lambda raw: raw["network"].update(max_retransmissions=0)),
    ("no-access-latency", "access latency (0 s)", lambda raw: raw["network"].update(access_latency_s=0.0)),
    ("no-tail", "radio tails (tail_power_w = 0)", lambda raw: raw["devices"].update(tail_power_w=0.0)),
    ("no-battery", "batteries and harvesting (mains power)", _no_batteries),
    (
        "always-available",
        "Markov availability (always online)",
        lambda raw: raw["devices"].update(availability="always"),
    ),
    ("no-stragglers", "stragglers (slowdown = none)", lambda raw: raw["devices"].update(slowdown="none")),
    ("static", "mobility (speed 0 m/s)", lambda raw: raw["devices"].update(speed_mps=0.0)),
    ("no-deadline", "the deadline", lambda raw: raw["network"].pop("deadline_s", None)),
    # Two effects off at once: Shannon rates without the deadline that truncates long uploads.
    (
        "shannon-no-deadline",
        "MCS and the deadline (Shannon rates, no deadline)",
        lambda raw: (raw["network"].update(rate="shannon"), raw["network"].pop("deadline_s", None)),
    ),
    # Switched ON: effects the scenario leaves off.
    (
        "over-selection",
        "ON: over-selection 0.3 (13 selected, the first 10 uploads kept)",
        lambda raw: raw["algorithm"].update(over_selection=0.3),
    ),
    ("failures", "ON: failures, p_fail = 0.05 per device and round", lambda raw: raw["devices"].update(p_fail=0.05)),
]


def scenario_dict(name: str, tau: int, seed: int) -> dict:
    with open(SCENARIO, "rb") as handle:
        raw = tomllib.load(handle)
    raw["data"]["dir"] = str((SCENARIO.parent / raw["data"]["dir"]).resolve())
    {config: switch_off for config, _, switch_off in CONFIGURATIONS}[name](raw)
    raw["algorithm"]["local_steps"] = tau
    raw["run"]["seed"] = seed
    return raw


def run_jobs(jobs: list[dict]) -> list[dict]:
    """The runs of ``jobs`` (a worker process), the seeds of one configuration and tau trained together
    (edgefl.seed_axis.run_seeds: each run's numbers are its solo run's): the per-round metrics they need."""
    import torch

    from edgefl.scenario import scenario_from_dict
    from edgefl.seed_axis import run_seeds

    torch.set_num_threads(1)
    started = time.perf_counter()
    results = run_seeds([scenario_from_dict(scenario_dict(job["config"], job["tau"], job["seed"])) for job in jobs])
    wall_s = (time.perf_counter() - started) / len(jobs)  # each run's share
    keep = ("round", "sim_time_s", "energy_j", "committed_energy_j", "acc_mean")
    return [
        {
            "rows": [{k: row.get(k) for k in keep} for row in result.metrics],
            "wall_s": wall_s,
            "stopped": result.summary.get("stopped"),
        }
        for result in results
    ]


def seedless(job: dict) -> tuple[str, int]:
    """The jobs run together (run_jobs): one configuration and tau, their seeds."""
    return job["config"], job["tau"]


def outcome(rows: list[dict]) -> tuple[float, float, int, float] | None:
    """(committed energy J, simulated s, rounds, booked energy J) at the round the target is reached, or None."""
    r = rounds_to_target([row["round"] for row in rows], [row["acc_mean"] for row in rows], TARGET)
    if r is None:
        return None
    row = next(row for row in rows if row["round"] == r)
    return energy_at(row), row["sim_time_s"], r, row["energy_j"]


def mean_ci(values: list[float]) -> tuple[float, float]:
    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        return float(values.mean()), math.nan
    half = stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / math.sqrt(len(values))
    return float(values.mean()), float(half)


RUN_FIELDS = ("config", "tau", "seed", "energy_j", "sim_time_s", "rounds", "wall_s", "stopped", "booked_energy_j")


def run_record(job: dict, result: dict) -> dict:
    """One run's line of docs/data/realistic-network-runs.csv: its outcome at the target (empty
    where it never reached it), its wall time and why it stopped early, if it did."""
    reached = outcome(result["rows"])
    energy, sim_time, rounds, booked = reached if reached is not None else (None, None, None, None)
    return {
        "config": job["config"],
        "tau": job["tau"],
        "seed": job["seed"],
        "energy_j": energy,
        "sim_time_s": sim_time,
        "rounds": rounds,
        "wall_s": result["wall_s"],
        "stopped": result.get("stopped"),
        "booked_energy_j": booked,  # energy_j is the committed energy (docs/model.md §8)
    }


def write_runs(runs: list[dict], path: Path) -> None:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=RUN_FIELDS, lineterminator="\n")
    writer.writeheader()
    for run in runs:
        writer.writerow(
            {k: ("" if run[k] is None else repr(run[k]) if isinstance(run[k], float) else run[k]) for k in RUN_FIELDS}
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, buffer.getvalue())


def read_runs(path: Path) -> list[dict]:
    def number(text: str, kind):
        return kind(text) if text != "" else None

    return [
        {
            "config": row["config"],
            "tau": int(row["tau"]),
            "seed": int(row["seed"]),
            "energy_j": number(row["energy_j"], float),
            "sim_time_s": number(row["sim_time_s"], float),
            "rounds": number(row["rounds"], int),
            "wall_s": float(row["wall_s"]),
            "stopped": row["stopped"] or None,
            "booked_energy_j": number(row.get("booked_energy_j") or "", float),
        }
        for row in csv.DictReader(path.open())
    ]


def summarise(runs: list[dict]) -> dict:
    """Per (configuration, tau): mean ± CI of energy, time, rounds over the seeds that reached the
    target, how many did, and tau* per configuration."""
    by_key = {(run["config"], run["tau"], run["seed"]): run for run in runs}
    table = {}
    for name, _, _ in CONFIGURATIONS:
        for tau in TAUS:
            reached = [
                (run["energy_j"], run["sim_time_s"], run["rounds"])
                for seed in SEEDS
                if (run := by_key[(name, tau, seed)])["rounds"] is not None
            ]
            cell = {"reached": len(reached)}
            if reached:
                for k, label in enumerate(("energy", "time", "rounds")):
                    cell[label] = mean_ci([o[k] for o in reached])
            table[(name, tau)] = cell
    optimum, ties = {}, {}
    for name, _, _ in CONFIGURATIONS:
        eligible = [
            (table[(name, tau)]["energy"][0], tau) for tau in TAUS if table[(name, tau)]["reached"] == len(SEEDS)
        ]
        optimum[name] = min(eligible)[1] if eligible else None
        if eligible:  # other tau whose mean energy lies inside tau*'s 95 % interval: not told apart
            mean, half = table[(name, optimum[name])]["energy"]
            ties[name] = [tau for energy, tau in sorted(eligible)[1:] if abs(energy - mean) <= half]
    return {"table": table, "optimum": optimum, "ties": ties}


def fmt(cell: dict, key: str, digits: int) -> str:
    if key not in cell:
        return "never"
    mean, half = cell[key]
    text = pages.pm((mean, half), digits) if math.isfinite(half) else pages.fixed(mean, digits)
    return text if cell["reached"] == len(SEEDS) else f"{text} ({cell['reached']}/{len(SEEDS)})"


def plot(summary: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 5.5))
    colours = plt.get_cmap("tab20").colors
    for index, (name, what, _) in enumerate(CONFIGURATIONS):
        points = [
            (tau, summary["table"][(name, tau)]["energy"][0])
            for tau in TAUS
            if "energy" in summary["table"][(name, tau)]
        ]
        if points:
            ax.plot(
                *zip(*points),
                marker="o",
                color="black" if name == "baseline" else colours[index],
                lw=2.5 if name == "baseline" else 1.2,
                zorder=3 if name == "baseline" else 2,
                ls="--" if what.startswith("ON") else "-",
                label=name,
            )
    ax.set_xlabel("local steps τ")
    ax.set_ylabel(f"committed energy to {TARGET} (J, all clients)")
    ax.set_xscale("log")
    ax.set_yscale("log")  # without radio tails the energy is several times lower
    ax.set_xticks(TAUS, [str(t) for t in TAUS])
    low, high = ax.get_ylim()  # labelled ticks at 1, 2, 5 x 10^k: a log axis over one decade has one at most
    ticks = [
        m * 10.0**k
        for k in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
        for m in (1, 2, 5)
        if low <= m * 10.0**k <= high
    ]
    ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
    ax.minorticks_off()
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.13))  # below: covers no curve
    ax.set_title("phones-in-a-cell: one effect changed at a time")
    fig.tight_layout()
    FIGURE.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(FIGURE, dpi=110)
    plt.close(fig)


def command(workers: int) -> str:
    return f".venv/bin/python experiments/realistic_network.py --workers {workers}"


def quoted(summary: dict, runs: list[dict]) -> dict:
    """What the hand-written explanation (experiments/realistic_network_why.md, itself a template) may
    quote, all from the stored runs: E/T/R(config, tau) the mean committed energy, time and rounds to
    target, B(config, tau) the mean booked energy of the same runs, and the booked definition's tau*."""
    by_key = {(run["config"], run["tau"], run["seed"]): run for run in runs}
    table = summary["table"]
    has_booked = all(run.get("booked_energy_j") is not None for run in runs if run["rounds"] is not None)
    booked = summarise([{**run, "energy_j": run["booked_energy_j"]} for run in runs]) if has_booked else None

    def per_seed(config: str, tau: int, f) -> list[float]:
        return [f(by_key[(config, tau, seed)]) for seed in SEEDS]

    def tail_share(tau: int, key: str = "energy_j") -> list[float]:  # 1 - E(no-tail) / E(baseline), per seed
        return per_seed("baseline", tau, lambda run: 1 - by_key[("no-tail", tau, run["seed"])][key] / run[key])

    reached = [run["rounds"] for run in runs if run["rounds"] is not None]
    with open(SCENARIO, "rb") as handle:
        devices = tomllib.load(handle)["devices"]
    tail_j = devices["tail_s"] * devices["tail_power_w"]  # one whole tail, J
    return {
        "E": lambda c, t: pages.fixed(table[(c, t)]["energy"][0], 1),
        "Eci": lambda c, t: pages.pm(table[(c, t)]["energy"], 1),
        "B": lambda c, t: pages.fixed(booked["table"][(c, t)]["energy"][0], 1),
        "Bci": lambda c, t: pages.pm(booked["table"][(c, t)]["energy"], 1),
        "T": lambda c, t: pages.fixed(table[(c, t)]["time"][0], 2),
        "Tci": lambda c, t: pages.pm(table[(c, t)]["time"], 2),
        "R": lambda c, t: pages.fixed(table[(c, t)]["rounds"][0], 1),
        "share": lambda t: pages.pct(float(np.mean(tail_share(t))), 1),
        "booked_share": lambda t: pages.pct(float(np.mean(tail_share(t, "booked_energy_j"))), 1),
        "ratio": lambda c, t: pages.fixed(table[(c, t)]["energy"][0] / booked["table"][(c, t)]["energy"][0], 1),
        # relative change of the mean energy against the baseline at tau: committed, and booked
        "rel": lambda c, t: pages.signed_pct(table[(c, t)]["energy"][0] / table[("baseline", t)]["energy"][0] - 1, 0),
        "brel": lambda c, t: pages.signed_pct(
            booked["table"][(c, t)]["energy"][0] / booked["table"][("baseline", t)]["energy"][0] - 1, 0
        ),
        # phones still in a tail at the target, on average: (committed - booked) / the energy of one whole tail
        "in_tail": lambda t: pages.fixed(
            float(np.mean(per_seed("baseline", t, lambda run: run["energy_j"] - run["booked_energy_j"]))) / tail_j,
            0,
        ),
        "tail_j": pages.fixed(tail_j, 1),
        # the rest are functions too: computed only where the explanation quotes them
        "share_low": lambda: pages.pct(min(float(np.mean(tail_share(t))) for t in TAUS), 1),
        "share_high": lambda: pages.pct(max(float(np.mean(tail_share(t))) for t in TAUS), 1),
        "watts": lambda key="energy_j": ", ".join(  # energy to target / time to target, W, mean over seeds
            f"{np.mean(per_seed('baseline', tau, lambda run: run[key] / run['sim_time_s'])):.0f}" for tau in TAUS
        ),
        "first_round": min(reached),
        "last_round": max(reached),
        "all_reached": len(reached) == len(runs),
        "baseline_rounds_10": sorted(r for r in per_seed("baseline", 10, lambda run: run["rounds"]) if r is not None),
        "booked": booked,
        "optimum": summary["optimum"],
        "ties": summary["ties"],
        "configurations": [name for name, _, _ in CONFIGURATIONS],
        "taus": TAUS,
    }


def render(summary: dict, runs: list[dict], workers: int, why: str, produced: dict) -> str:
    """The page from the stored runs' summary, through experiments/templates/realistic-network.md.j2; the
    explanation `why` is rendered first, as a template over quoted(), so its numbers are the data's."""
    why = pages.environment().from_string(why).render(**quoted(summary, runs))
    return pages.render(
        "realistic-network.md.j2",
        filters={"cell": fmt},
        produced=produced,
        command=command(workers),
        workers=workers,
        taus=TAUS,
        seeds=SEEDS,
        runs=len(runs),
        wall_s=sum(run["wall_s"] for run in runs),
        definition=definition(TARGET, 5),
        figure=FIGURE.name,
        configurations=[(name, what) for name, what, _ in CONFIGURATIONS],
        table=summary["table"],
        optimum=summary["optimum"],
        ties=summary["ties"],
        stopped=sorted({f"{run['config']} τ={run['tau']} seed={run['seed']}" for run in runs if run["stopped"]}),
        why=why.strip(),
        committed=any(run.get("booked_energy_j") is not None for run in runs),  # runs since issue 28
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--cache",
        type=Path,
        default=ROOT / "results" / "realistic-network",
        help="one JSON per run; a rerun reads them back",
    )
    parser.add_argument(
        "--from-data",
        action="store_true",
        help=f"render the page and figure from {DATA.relative_to(ROOT)} without running anything",
    )
    parser.add_argument(
        "--why",
        type=Path,
        default=Path(__file__).with_name("realistic_network_why.md"),
        help="the page's explanation section (hand-written: it quotes the table)",
    )
    args = parser.parse_args()
    started = time.perf_counter()
    if args.from_data:
        runs, produced = read_runs(DATA), provenance.read(PRODUCED)
    else:
        runs = compute(args.workers, args.cache)
        write_runs(runs, DATA)
        produced = provenance.current(command(args.workers), time.perf_counter() - started)
        provenance.write(PRODUCED, produced)
    summary = summarise(runs)
    plot(summary)
    atomic_write_text(PAGE, render(summary, runs, args.workers, args.why.read_text(), produced))
    written = f"{PAGE}, {FIGURE}" + ("" if args.from_data else f", {DATA} and {PRODUCED}")
    print(f"wrote {written} in {time.perf_counter() - started:.0f} s")


def compute(workers: int, cache: Path) -> list[dict]:
    jobs = [
        {
            "key": f"{name}-t{tau}-s{seed}",
            "label": f"{name} tau={tau} seed={seed}",
            "config": name,
            "tau": tau,
            "seed": seed,
        }
        for name, _, _ in CONFIGURATIONS
        for tau in TAUS
        for seed in SEEDS
    ]
    results = run_keyed(run_jobs, jobs, together=seedless, workers=workers, cache=cache, desc="realistic network")
    return [run_record(job, results[job["key"]]) for job in jobs]


if __name__ == "__main__":
    main()
