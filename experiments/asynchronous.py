"""Synchronous FedAvg against FedAsync and FedBuff on phones-in-a-cell, with and without stragglers (issue 22,
docs/asynchronous.md): time and energy to a target accuracy, with paired t-intervals over seeds; then the
energy-optimal local steps τ and buffer size K.

    python experiments/asynchronous.py [--seeds 0 1 2 3 4] [--target acc_mean=0.88]
    python experiments/asynchronous.py --from-data     # re-render the page from docs/data/asynchronous.json

1. The grid: FedAvg (m = 10), FedAsync with concurrency C ∈ {10, 20, 50} and FedBuff with buffer size
   K ∈ {1, 5, 10} × C ∈ {10, 20, 50}, on the committed scenario (stragglers) and with `devices.slowdown =
   "none"`. Every run has `run.stop_at` = the target (it ends once the target is reached and confirmed);
   FedAvg gets its 60 rounds, an asynchronous server as many server updates as give the same 600 client
   uploads (600 / K; FedAsync: 600).
2. The energy-optimal (τ, K): FedBuff with `algorithm.local_steps` τ ∈ {2, 5, 10, 20} × K ∈ {1, 5, 10} at the
   grid's most energy-efficient concurrency, with stragglers, beside FedAvg at each τ; a run gets 600 uploads
   or, for τ < 10, as many as give FedAvg's 6000 local steps per client slot (600 · 10 / τ).

Every run is stored (docs/data/asynchronous.json); the page's tables and judgements are computed from them.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

from edgefl.results import atomic_write_text  # noqa: E402  (after the path: run from a checkout)
from edgefl.runner import Simulation  # noqa: E402
from edgefl.scenario import load_scenario  # noqa: E402
from edgefl.sweeps.analysis import mean_ci  # noqa: E402
from edgefl.target import parse_target  # noqa: E402
from experiments import pages, provenance  # noqa: E402

PHONES = REPO / "scenarios" / "phones-in-a-cell.toml"
DOC = REPO / "docs" / "asynchronous.md"
SUMMARY = REPO / "docs" / "data" / "asynchronous.json"
TRIPS = 600  # client uploads FedAvg's 60 rounds of m = 10 ask for
TAU = 10  # the scenario's algorithm.local_steps
BUFFERS = (1, 5, 10)
CONCURRENCIES = (10, 20, 50)
TAUS = (2, 5, 10, 20)
STRAGGLERS = {True: [], False: ["devices.slowdown=none"]}  # with the scenario's Exp(0.5) slowdown, or without


def server(name: str, k: int | None = None, c: int | None = None) -> dict:
    """A server setting: FedAvg, FedAsync (C) or FedBuff (K, C)."""
    return {"server": name, "K": k, "C": c}


GRID = [
    server("fedavg"),
    *(server("fedasync", 1, c) for c in CONCURRENCIES),
    *(server("fedbuff", k, c) for c in CONCURRENCIES for k in BUFFERS),
]


def label(setting: dict) -> str:
    if setting["server"] == "fedavg":
        return "FedAvg (sync, m = 10)"
    if setting["server"] == "fedasync":
        return f"FedAsync C = {setting['C']}"
    return f"FedBuff K = {setting['K']}, C = {setting['C']}"


def overrides(setting: dict, tau: int) -> list[str]:
    name = setting["server"]
    keys = [f"algorithm.name={name}", f"algorithm.local_steps={tau}"]
    if name != "fedavg":
        keys.append(f"algorithm.{name}.concurrency={setting['C']}")
    if name == "fedbuff":
        keys.append(f"algorithm.fedbuff.buffer_size={setting['K']}")
    return keys


def uploads_cap(tau: int) -> int:
    """600 uploads, or for τ < 10 as many as give FedAvg's local steps (600 · 10 / τ)."""
    return TRIPS * max(1, TAU // tau)


def run(study: str, setting: dict, stragglers: bool, tau: int, seed: int, target: str) -> dict:
    """One run to the target: where it reached it (simulated time, energy of all devices) and what it spent."""
    per_update = 10 if setting["server"] == "fedavg" else setting["K"]
    scenario = load_scenario(
        PHONES,
        [
            *overrides(setting, tau),
            *STRAGGLERS[stragglers],
            f"run.seed={seed}",
            f"run.rounds={uploads_cap(tau) // per_update}",
            f'run.stop_at="{target}"',
        ],
    )
    result = Simulation(scenario).run(progress=False, targets=[parse_target(target)])
    outcome = result.summary["targets"][0]
    rows = result.metrics
    staleness = [r["staleness_mean"] for r in rows if not math.isnan(r.get("staleness_mean", math.nan))]
    return {
        "study": study,
        **setting,
        "stragglers": stragglers,
        "tau": tau,
        "seed": seed,
        "reached": bool(outcome["reached"]),
        "updates": outcome["rounds"] if outcome["reached"] else None,
        "time_s": outcome["sim_time_s"] if outcome["reached"] else None,
        "energy_j": outcome["energy_j"] if outcome["reached"] else None,  # committed (docs/model.md §8)
        "booked_energy_j": outcome["booked_energy_j"] if outcome["reached"] else None,
        "uploads_arrived": int(sum(r["uploads_arrived"] for r in rows)),
        "uploads_missed": int(sum(r["uploads_missed"] for r in rows)),
        "updates_dropped": int(sum(r.get("updates_dropped", 0) for r in rows)),
        "staleness_mean": float(np.mean(staleness)) if staleness else 0.0,
    }


def _logged_run(*call) -> dict:
    """run(), its result printed to stderr as it ends (--reuse-log reads these lines)."""
    outcome = run(*call)
    print(outcome, file=sys.stderr, flush=True)
    return outcome


def select(runs: list[dict], **where) -> list[dict]:
    return [r for r in runs if all(r[k] == v for k, v in where.items())]


def ci(values: list[float]) -> list[float | None] | None:
    """[mean, 95 % t half-width] (half-width None for one value), None for no value."""
    if not values:
        return None
    mean, half = mean_ci(values)
    return [mean, None if math.isnan(half) else half]


def paired(runs: list[dict], base: list[dict], key: str) -> list[float | None] | None:
    """Mean and 95 % half-width of runs − base in `key`, paired by seed over the seeds where both reached."""
    by_seed = {b["seed"]: b for b in base if b["reached"]}
    pairs = [r[key] - by_seed[r["seed"]][key] for r in runs if r["reached"] and r["seed"] in by_seed]
    return ci(pairs) if len(pairs) >= 2 else None


def cell(runs: list[dict], base: list[dict] | None) -> dict:
    """A table row's numbers: reached n of N, updates, time and energy to target (committed; booked beside it), Δ
    against `base`, uploads."""
    ok = [r for r in runs if r["reached"]]
    return {
        "reached": len(ok),
        "of": len(runs),
        "updates": ci([r["updates"] for r in ok]),
        "time_s": ci([r["time_s"] for r in ok]),
        "energy_j": ci([r["energy_j"] for r in ok]),
        "booked_energy_j": ci([r["booked_energy_j"] for r in ok]),
        "d_time_s": paired(runs, base, "time_s") if base is not None else None,
        "d_energy_j": paired(runs, base, "energy_j") if base is not None else None,
        "d_booked_energy_j": paired(runs, base, "booked_energy_j") if base is not None else None,
        "missed": sum(r["uploads_missed"] for r in runs),
        "arrived": sum(r["uploads_arrived"] for r in runs),
        "dropped": sum(r["updates_dropped"] for r in runs),
        "staleness": float(np.mean([r["staleness_mean"] for r in runs])),
    }


def grid_table(runs: list[dict]) -> list[dict]:
    """The grid's rows: each server setting with and without stragglers, Δ paired against FedAvg."""
    rows = []
    for stragglers in STRAGGLERS:
        base = select(runs, study="grid", server="fedavg", stragglers=stragglers)
        for setting in GRID:
            these = select(runs, study="grid", stragglers=stragglers, **setting)
            is_base = setting["server"] == "fedavg"
            rows.append(
                {"stragglers": stragglers, "label": label(setting), **setting, **cell(these, None if is_base else base)}
            )
    return rows


def best_concurrency(runs: list[dict]) -> int:
    """The concurrency of the grid's FedBuff setting with the least mean energy to target with stragglers,
    among those that reached it in every seed (the τ study runs there)."""
    rows = [r for r in grid_table(runs) if r["server"] == "fedbuff" and r["stragglers"] and r["reached"] == r["of"]]
    return min(rows, key=lambda r: r["energy_j"][0])["C"]


def tau_runs(runs: list[dict], setting: dict, tau: int) -> list[dict]:
    """The runs of one (τ, setting) with stragglers: the grid's at the scenario's τ, the τ study's otherwise."""
    study = "grid" if tau == TAU else "tau"
    return select(runs, study=study, stragglers=True, tau=tau, **setting)


def tau_table(runs: list[dict], concurrency: int) -> list[dict]:
    """Energy (and time) to target per (τ, K) at `concurrency`, and FedAvg's per τ, Δ paired against FedAvg
    at τ = 10."""
    base = tau_runs(runs, server("fedavg"), TAU)
    rows = []
    for tau in TAUS:
        for setting in [server("fedavg"), *(server("fedbuff", k, concurrency) for k in BUFFERS)]:
            rows.append({"tau": tau, "label": label(setting), **setting, **cell(tau_runs(runs, setting, tau), base)})
    return rows


def energy_optimum(runs: list[dict], concurrency: int) -> dict:
    """The FedBuff (τ, K) with the least mean energy to target among those that reached it in every seed, the
    runner-up, and best − runner-up paired by seed."""
    rows = sorted(
        (r for r in tau_table(runs, concurrency) if r["server"] == "fedbuff" and r["reached"] == r["of"]),
        key=lambda r: r["energy_j"][0],
    )
    best, second = rows[:2]
    difference = paired(
        tau_runs(runs, server("fedbuff", best["K"], concurrency), best["tau"]),
        tau_runs(runs, server("fedbuff", second["K"], concurrency), second["tau"]),
        "energy_j",
    )
    beaten = [  # the others that the optimum beats, paired by seed with an interval below 0
        r
        for r in rows[1:]
        if excludes_zero(
            paired(
                tau_runs(runs, server("fedbuff", best["K"], concurrency), best["tau"]),
                tau_runs(runs, server("fedbuff", r["K"], concurrency), r["tau"]),
                "energy_j",
            )
        )
        < 0
    ]
    return {"best": best, "second": second, "difference": difference, "candidates": len(rows), "beaten": len(beaten)}


def fmt(value: list | None, digits: int = 3) -> str:
    """A [mean, 95 % half-width]: "m ± h" ("m" without a half-width), "–" for none."""
    if value is None:
        return "–"
    mean, half = value
    text = f"{float(f'{mean:.{digits}g}'):g}"  # significant digits without an exponent: 161.4 -> "161"
    return text if half is None else f"{text} ± {float(f'{half:.2g}'):g}"


def excludes_zero(value: list | None) -> int:
    """−1 if the interval lies below 0, +1 above, 0 if it contains 0 or is not defined."""
    if value is None or value[1] is None:
        return 0
    mean, half = value
    return -1 if mean + half < 0 else 1 if mean - half > 0 else 0


def soonest(rows: list[dict], stragglers: bool) -> dict:
    """The grid row, with or without stragglers, that reached the target in every seed with the least mean time."""
    case = [r for r in rows if r["stragglers"] == stragglers and r["reached"] == r["of"]]
    return min(case, key=lambda r: r["time_s"][0])


def verdict(summary: dict) -> dict[str, str]:
    """The page's judgements, from the stored runs."""
    runs = summary["runs"]
    rows = grid_table(runs)
    text = {}
    for key, what in (("d_time_s", "time"), ("d_energy_j", "energy")):
        parts = []
        for stragglers in STRAGGLERS:
            case = [r for r in rows if r["stragglers"] == stragglers and r["server"] != "fedavg"]
            less = [r["label"] for r in case if excludes_zero(r[key]) < 0]
            more = [r["label"] for r in case if excludes_zero(r[key]) > 0]
            parts.append(
                f"{'With' if stragglers else 'without'} stragglers, {len(less)} of {len(case)} settings take "
                f"significantly less {what} to target than FedAvg ({'; '.join(less) or 'none'}) and {len(more)} "
                f"significantly more ({'; '.join(more) or 'none'})"
            )
        text[what] = "; ".join(parts) + "."
    by_c = []
    for c in CONCURRENCIES:
        these = [r for r in rows if r["C"] == c]
        missed, arrived = sum(r["missed"] for r in these), sum(r["arrived"] for r in these)
        reached, of = sum(r["reached"] for r in these), sum(r["of"] for r in these)
        by_c.append(
            f"C = {c}: {100 * missed / (missed + arrived):.0f} % of the uploads missed, the target reached in "
            f"{reached} of {of} runs"
        )
    text["concurrency"] = "; ".join(by_c) + "."
    fedavg = {s: next(r for r in rows if r["server"] == "fedavg" and r["stragglers"] == s) for s in STRAGGLERS}
    base = {s: select(runs, study="grid", server="fedavg", stragglers=s) for s in STRAGGLERS}
    slower = paired(base[True], base[False], "time_s")
    text["stragglers"] = (
        f"FedAvg's time to target is {fmt(fedavg[True]['time_s'])} s with stragglers and "
        f"{fmt(fedavg[False]['time_s'])} s without; paired by seed, with − without = {fmt(slower, 2)} s: "
        + (
            "stragglers change it by no significant amount. The 0.4 s deadline already cuts the slow phones, in "
            "synchronous rounds and asynchronous chains alike; without a deadline the synchronous rounds would wait "
            "for them."
            if excludes_zero(slower) == 0
            else "a significant difference."
        )
    )
    k1 = [r for r in rows if r["server"] == "fedbuff" and r["K"] == 1]
    text["staleness"] = (
        "FedBuff K = 1 makes every upload a server update, weighted 1/√(1 + s): its mean staleness is "
        + ", ".join(f"{r['staleness']:.2f} at C = {r['C']}" for r in k1 if r["stragglers"])
        + " (with stragglers), against "
        + ", ".join(
            f"{r['staleness']:.2f}" for r in rows if r["server"] == "fedbuff" and r["K"] == 10 and r["stragglers"]
        )
        + " for K = 10: a larger buffer makes fewer, fresher updates. K = 1 reached the target in "
        + f"{sum(r['reached'] for r in k1)} of {sum(r['of'] for r in k1)} runs, K = 10 in "
        + f"{sum(r['reached'] for r in rows if r['server'] == 'fedbuff' and r['K'] == 10)} of "
        + f"{sum(r['of'] for r in rows if r['server'] == 'fedbuff' and r['K'] == 10)}."
    )
    fastest = []
    for stragglers in STRAGGLERS:
        best_time = soonest(rows, stragglers)
        fastest.append(
            f"{'with' if stragglers else 'without'} stragglers, {best_time['label']} reaches it soonest "
            f"({fmt(best_time['time_s'])} s; against FedAvg Δ time {fmt(best_time['d_time_s'], 2)} s, Δ energy "
            f"{fmt(best_time['d_energy_j'], 2)} J)"
        )
    text["fastest"] = "Of the settings that reached the target in every seed, " + "; ".join(fastest) + "."
    optimum = energy_optimum(runs, summary["tau_concurrency"])
    best, second, difference = optimum["best"], optimum["second"], optimum["difference"]
    sure = excludes_zero(difference) < 0
    text["optimum"] = (
        f"Among the {optimum['candidates']} FedBuff settings (C = {summary['tau_concurrency']}) that reached the "
        f"target in every seed, τ = {best['tau']}, K = {best['K']} spends the least energy to target, "
        f"{fmt(best['energy_j'])} J; the runner-up, τ = {second['tau']}, K = {second['K']}, {fmt(second['energy_j'])} J. "
        f"Paired by seed, best − runner-up = {fmt(difference, 2)} J: "
        + (
            "the interval excludes 0, so the optimum is significant at 95 % against the runner-up."
            if sure
            else "the interval contains 0, so at this many seeds the two cannot be told apart: the optimum is "
            "one of them, not established."
        )
        + f" Paired the same way against each of the {optimum['candidates'] - 1} others, its energy is significantly "
        f"lower than that of {optimum['beaten']} of them."
    )
    trend = [r for r in tau_table(runs, summary["tau_concurrency"]) if r["server"] == "fedbuff" and r["K"] == best["K"]]
    text["tau"] = (
        f"At K = {best['K']}, the energy to target goes "
        + ", ".join(f"{fmt(r['energy_j'])} J at τ = {r['tau']} ({r['reached']}/{r['of']} reached)" for r in trend)
        + "."
    )
    return text


def as_booked(summary: dict) -> dict:
    """The same runs with the booked energy to target as their energy (what the page gave before issue 28)."""
    runs = [{**r, "energy_j": r["booked_energy_j"]} for r in summary["runs"]]
    return {**summary, "runs": runs}


def energy_lists(rows: list[dict], key: str) -> dict[bool, tuple[list[str], list[str]]]:
    """Per stragglers case, the settings whose paired Δ `key` against FedAvg lies below 0 and above 0."""
    lists = {}
    for stragglers in STRAGGLERS:
        case = [r for r in rows if r["stragglers"] == stragglers and r["server"] != "fedavg"]
        lists[stragglers] = (
            [r["label"] for r in case if excludes_zero(r[key]) < 0],
            [r["label"] for r in case if excludes_zero(r[key]) > 0],
        )
    return lists


def changes(summary: dict) -> list[str]:
    """Each energy conclusion of the page, booked (the same runs' booked energy to target) against committed: what
    changed with the committed energy of issue 28, both numbers stated."""
    runs = summary["runs"]
    booked_summary = as_booked(summary)
    rows = grid_table(runs)
    out = []
    factors = [r["energy_j"] / r["booked_energy_j"] for r in runs if r["reached"]]
    tails = [r["energy_j"] - r["booked_energy_j"] for r in runs if r["reached"]]
    # a run that reaches the target at its last update: the tails still running at the end are charged under the
    # last round (docs/model.md §8), so its booked energy there is its committed one
    at_end = [
        f"{label(r)}{' without stragglers' if not r['stragglers'] else ''}, τ = {r['tau']}, seed {r['seed']}"
        for r in runs
        if r["reached"] and math.isclose(r["energy_j"], r["booked_energy_j"], rel_tol=1e-9)
    ]
    out.append(
        f"**Energy to target**, every run that reached it: the committed energy is {min(factors):.1f}-"
        f"{max(factors):.1f} times the booked one (median {np.median(factors):.1f}); the tails still to run at the "
        f"target add {round(min(tails))}-{round(max(tails))} J (median {round(float(np.median(tails)))} J): when the "
        "target is reached, nearly every phone that has sent something in the last 11.6 s is in its tail."
        + (
            f" (Factor 1, nothing added: {len(at_end)} run{'s' if len(at_end) > 1 else ''} that reached the target at "
            f"{'its' if len(at_end) == 1 else 'their'} last update ({'; '.join(at_end)}): the tails still running when a run ends are charged under its "
            "last round, docs/model.md §8, so its booked energy there is already its committed one.)"
            if at_end
            else ""
        )
    )
    fedavg = {s: next(r for r in rows if r["server"] == "fedavg" and r["stragglers"] == s) for s in STRAGGLERS}
    ratios = []
    for stragglers in STRAGGLERS:
        base = {r["seed"]: r for r in select(runs, study="grid", server="fedavg", stragglers=stragglers)}
        for setting in GRID[1:]:
            these = [
                r
                for r in select(runs, study="grid", stragglers=stragglers, **setting)
                if r["reached"] and base[r["seed"]]["reached"]
            ]
            if len(these) == len(select(runs, study="grid", stragglers=stragglers, **setting)) and these:
                ratios.append(
                    (
                        stragglers,
                        label(setting),
                        np.mean([r["booked_energy_j"] / base[r["seed"]]["booked_energy_j"] for r in these]),
                        np.mean([r["energy_j"] / base[r["seed"]]["energy_j"] for r in these]),
                    )
                )
    out.append(
        "**Energy to target against FedAvg** (mean of the per-seed ratios, settings that reached the target in every "
        "seed), booked → committed: "
        + "; ".join(f"{name} ({'with' if s else 'without'} stragglers) {b:.2f} → {c:.2f}" for s, name, b, c in ratios)
        + f". FedAvg's own energy to target, booked → committed: {fmt(fedavg[True]['booked_energy_j'])} → "
        f"{fmt(fedavg[True]['energy_j'])} J with stragglers, {fmt(fedavg[False]['booked_energy_j'])} → "
        f"{fmt(fedavg[False]['energy_j'])} J without. The committed ratio lies nearer 1 than the booked one for "
        f"{sum(abs(c - 1) < abs(b - 1) for _, _, b, c in ratios)} of these {len(ratios)} settings: the tails still "
        "to run at the target are a large block of every run's committed energy, whichever server reached it."
    )
    committed_lists, booked_lists = energy_lists(rows, "d_energy_j"), energy_lists(rows, "d_booked_energy_j")
    for stragglers in STRAGGLERS:
        case = f"{'With' if stragglers else 'Without'} stragglers"
        (b_less, b_more), (c_less, c_more) = booked_lists[stragglers], committed_lists[stragglers]
        same = (b_less, b_more) == (c_less, c_more)
        out.append(
            f"**Energy against FedAvg, {case.lower()}** ({'unchanged' if same else 'changed'}): significantly less "
            f"energy to target than FedAvg, booked: {'; '.join(b_less) or 'none'}; committed: "
            f"{'; '.join(c_less) or 'none'}. Significantly more, booked: {'; '.join(b_more) or 'none'}; committed: "
            f"{'; '.join(c_more) or 'none'}. Paired Δ energy against FedAvg, booked → committed (J): "
            + "; ".join(
                f"{r['label']} {fmt(r['d_booked_energy_j'], 2)} → {fmt(r['d_energy_j'], 2)}"
                for r in rows
                if r["stragglers"] == stragglers and r["server"] != "fedavg" and r["d_energy_j"] is not None
            )
            + "."
        )
    for stragglers in STRAGGLERS:
        best = soonest(rows, stragglers)
        out.append(
            f"**The soonest setting {'with' if stragglers else 'without'} stragglers**, {best['label']}: Δ energy "
            f"against FedAvg {fmt(best['d_booked_energy_j'], 2)} J booked → {fmt(best['d_energy_j'], 2)} J committed "
            f"({'significant' if excludes_zero(best['d_booked_energy_j']) else 'not significant'} → "
            f"{'significant' if excludes_zero(best['d_energy_j']) else 'not significant'})."
        )
    c_committed, c_booked = summary["tau_concurrency"], best_concurrency(booked_summary["runs"])
    out.append(
        f"**The τ study's concurrency** (the grid's FedBuff C with the least energy to target with stragglers): C = "
        f"{c_booked} booked, C = {c_committed} committed"
        + (
            " (unchanged)."
            if c_booked == c_committed
            else "; the τ study ran at the committed choice only, so its booked figures below are at that C too."
        )
    )
    optimum, booked_optimum = energy_optimum(runs, c_committed), energy_optimum(booked_summary["runs"], c_committed)
    b, c = booked_optimum["best"], optimum["best"]
    out.append(
        f"**The energy-optimal FedBuff (τ, K)** at C = {c_committed}: booked τ = {b['tau']}, K = {b['K']} "
        f"({fmt(b['energy_j'])} J; best − runner-up {fmt(booked_optimum['difference'], 2)} J, significantly below "
        f"{booked_optimum['beaten']} of the {booked_optimum['candidates'] - 1} others); committed τ = {c['tau']}, "
        f"K = {c['K']} ({fmt(c['energy_j'])} J; best − runner-up {fmt(optimum['difference'], 2)} J, significantly "
        f"below {optimum['beaten']} of the {optimum['candidates'] - 1} others)"
        + (": the same setting." if (b["tau"], b["K"]) == (c["tau"], c["K"]) else ": a different setting.")
    )
    trend = [r for r in tau_table(runs, c_committed) if r["server"] == "fedbuff" and r["K"] == c["K"]]
    out.append(
        f"**Energy to target by τ at K = {c['K']}**, booked → committed: "
        + "; ".join(f"τ = {r['tau']}: {fmt(r['booked_energy_j'])} → {fmt(r['energy_j'])} J" for r in trend)
        + "."
    )
    return out


def render(summary: dict) -> str:
    """The page from the study's stored runs."""
    runs = summary["runs"]
    c = summary["tau_concurrency"]
    return pages.render(
        "asynchronous.md.j2",
        filters={"ci": fmt},
        grid=grid_table(runs),
        taus=tau_table(runs, c),
        verdict=verdict(summary),
        runs_count=len(runs),
        changes=changes(summary),
        **{k: v for k, v in summary.items() if k != "runs"},
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--target", default="acc_mean=0.88")
    parser.add_argument("--from-data", action="store_true", help="re-render the page from its stored results")
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="runs at a time in worker processes (each run is seeded on its own: the results do not depend on it)",
    )
    args = parser.parse_args(argv)
    if args.from_data:
        summary = json.loads(SUMMARY.read_text())
        atomic_write_text(DOC, render(summary))
        print(f"wrote {DOC.relative_to(REPO)}")
        return
    start = time.time()
    command = "experiments/asynchronous.py" + (
        f" --seeds {' '.join(map(str, args.seeds))}" if args.seeds != [0, 1, 2, 3, 4] else ""
    )
    command += f" --target {args.target}" if args.target != "acc_mean=0.88" else ""
    command += f" --jobs {args.jobs}" if args.jobs != 1 else ""
    produced = provenance.current(".venv/bin/python " + command, 0.0)  # the code as it is when the runs start
    runs: list[dict] = []

    def add(jobs: list[tuple]) -> None:
        """Run (study, setting, stragglers, tau) for every seed, in order, --jobs at a time."""
        calls = [(*job, seed, args.target) for job in jobs for seed in args.seeds]
        if args.jobs > 1:
            with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
                done = pool.starmap(_logged_run, calls, chunksize=1)
        else:
            done = [_logged_run(*call) for call in calls]
        runs.extend(done)

    add([("grid", setting, stragglers, TAU) for stragglers in STRAGGLERS for setting in GRID])
    concurrency = best_concurrency(runs)
    add(
        [
            ("tau", setting, True, tau)
            for tau in TAUS
            if tau != TAU
            for setting in [server("fedavg"), *(server("fedbuff", k, concurrency) for k in BUFFERS)]
        ]
    )
    produced["wall_s"] = round(time.time() - start)
    summary = {
        "seeds": args.seeds,
        "target": args.target,
        "tau_concurrency": concurrency,
        "produced": produced,
        "runs": runs,
    }
    pages.store_and_render(summary, SUMMARY, DOC, render, time.time() - start)


if __name__ == "__main__":
    main()
