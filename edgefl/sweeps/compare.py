"""``edgefl compare``: several algorithms on one scenario, K seeds each, with energy, time and rounds to a
target and their confidence intervals (no τ grid needed). It is a sweep over ``algorithm.name`` (resumable,
the same folder layout), summarised per algorithm.

Per algorithm and seed: rounds, committed energy (J; ``edgefl.target.COMMITTED_ENERGY``) and simulated
time (s) to the target (the one definition, :mod:`edgefl.target`), and the final values of the run. Per algorithm: means with t-intervals
over the seeds that reached the target, and the energy relative to the first algorithm paired over the
seeds (the same seed gives every algorithm the same data partition, initial model and channel draws), and
in words whether it differs significantly from the first algorithm's: the paired t-interval of the mean
over seeds of E_alg,s - E_first,s excludes 0 (:func:`differences`). Each algorithm's own settings
(``[algorithm.<name>]``, defaults included) are printed with the table: FedProx at a small mu_p is FedAvg
to several digits, which would otherwise read like a bug.

Outputs go in ``<out>/compare_<metric>=<value>/`` (one folder per target, as `optimal-tau`) or
``<out>/compare/`` without a target (:func:`report_folder`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgefl.results import atomic_file
from edgefl.sweeps.analysis import DEFAULT_CONFIDENCE, mean_ci
from edgefl.target import (
    COMMITTED,
    DEFAULT_WINDOW,
    Target,
    definition,
    energy_at,
    energy_definition,
    energy_sentence,
    rounds_to_target,
)

ALGORITHM_KEY = "algorithm.name"


def report_folder(out, target: Target | None):
    """Where a comparison's tables and figure go: one folder per target, so that a second target never
    overwrites the first (as ``optimal-tau_<target>``)."""
    return Path(out) / (f"compare_{target}" if target is not None else "compare")


def own_settings(scenario, name: str) -> dict:
    """Algorithm ``name``'s own keys in ``scenario`` (its ``[algorithm.<name>]`` table, defaults included)."""
    return scenario.algorithm.hyperparams(name).model_dump(mode="json")


def settings_text(settings: dict) -> str:
    return ", ".join(f"{k} = {v}" for k, v in settings.items()) or "no own keys"


@dataclass
class AlgorithmOutcome:
    algorithm: str
    seeds: int
    reached: int  # seeds that reached the target
    rounds: tuple[float, float]  # mean, CI half-width (over the seeds that reached it)
    energy_j: tuple[float, float]
    time_s: tuple[float, float]
    energy_ratio: tuple[float, float]  # to the first algorithm, paired over the seeds both reached
    energy_difference_j: tuple[float, float]  # E - E_first: mean, CI half-width, paired over the seeds both reached
    paired_seeds: int  # how many seeds the two above are over
    final: dict[str, float]  # metric -> mean over seeds at the last round
    energy_total_j: float  # mean over seeds, whole run
    energy_definition: str = COMMITTED  # which energy to target (edgefl.target.energy_definition)


def compare(
    rows: list[dict], target: Target | None, window: int = DEFAULT_WINDOW, confidence: float = DEFAULT_CONFIDENCE
) -> list[AlgorithmOutcome]:
    """Summarise a sweep over ``algorithm.name`` (results.csv rows), in the order the algorithms appear."""
    runs: dict[str, dict[int, list[dict]]] = {}
    for row in rows:
        runs.setdefault(row[ALGORITHM_KEY], {}).setdefault(int(row["seed"]), []).append(row)
    per_seed: dict[str, dict[int, dict]] = {}
    for name, by_seed in runs.items():
        per_seed[name] = {}
        for seed, run in by_seed.items():
            run.sort(key=lambda r: r["round"])
            at = None
            if target is not None:
                reached = rounds_to_target(
                    [r["round"] for r in run], [r.get(target.metric) for r in run], target, window
                )
                at = next((r for r in run if r["round"] == reached), None)
            per_seed[name][seed] = {
                "at": at,
                "last": run[-1],
                "final": next(
                    (r for r in reversed(run) if r.get("acc_worst") is not None or r.get("loss") is not None), run[-1]
                ),
            }
    first = next(iter(per_seed), None)
    out = []
    for name, seeds in per_seed.items():
        hit = {s: v["at"] for s, v in seeds.items() if v["at"] is not None}
        base = {s: v["at"] for s, v in per_seed[first].items() if v["at"] is not None}
        ratios = [energy_at(hit[s]) / energy_at(base[s]) for s in hit if s in base and energy_at(base[s]) > 0]
        if target is None:  # no target: the whole run's energy, paired over every seed both ran
            last = {s: v["last"]["energy_j"] for s, v in per_seed[first].items()}
            differences = [v["last"]["energy_j"] - last[s] for s, v in seeds.items() if s in last]
        else:
            differences = [energy_at(hit[s]) - energy_at(base[s]) for s in hit if s in base]
        metrics = [
            k for k in ("acc_mean", "acc_worst", "loss") if any(v["final"].get(k) is not None for v in seeds.values())
        ]
        out.append(
            AlgorithmOutcome(
                name,
                len(seeds),
                len(hit),
                mean_ci([r["round"] for r in hit.values()], confidence),
                mean_ci([energy_at(r) for r in hit.values()], confidence),
                mean_ci([r["sim_time_s"] for r in hit.values()], confidence),
                mean_ci(ratios, confidence),
                mean_ci(differences, confidence),
                len(differences),
                {
                    k: float(np.mean([v["final"][k] for v in seeds.values() if v["final"].get(k) is not None]))
                    for k in metrics
                },
                float(np.mean([v["last"]["energy_j"] for v in seeds.values()])),
                energy_definition(rows),
            )
        )
    return out


def _fmt(pair: tuple[float, float], digits: int = 4) -> str:
    mean, half = pair
    if math.isnan(mean):
        return ""
    return f"{mean:.{digits}g}" + ("" if math.isnan(half) else f" ± {half:.2g}")


def table_rows(
    outcomes: list[AlgorithmOutcome], settings: dict[str, dict] | None = None
) -> tuple[list[str], list[list]]:
    """compare.csv: one row per algorithm; ``settings``: each algorithm's own keys (:func:`own_settings`)."""
    finals = list(dict.fromkeys(k for o in outcomes for k in o.final))
    header = [
        "algorithm",
        "seeds",
        "seeds_reached",
        "rounds_mean",
        "rounds_ci95",
        "energy_j_mean",
        "energy_j_ci95",
        "time_s_mean",
        "time_s_ci95",
        "energy_ratio_to_first",
        "energy_ratio_ci95",
        "energy_difference_to_first_j",
        "energy_difference_ci95",
        "energy_difference_significant",
        "energy_total_j",
        *[f"final_{k}" for k in finals],
        "own_settings",
    ]
    rows = [
        [
            o.algorithm,
            o.seeds,
            o.reached,
            *o.rounds,
            *o.energy_j,
            *o.time_s,
            *o.energy_ratio,
            *o.energy_difference_j,
            significance(o.energy_difference_j),
            o.energy_total_j,
            *[o.final.get(k) for k in finals],
            settings_text((settings or {}).get(o.algorithm, {})),
        ]
        for o in outcomes
    ]
    return header, rows


def significance(difference: tuple[float, float]) -> str:
    """ "significant" when the paired t-interval of the difference excludes 0; "not significant" when it holds 0;
    "one seed: cannot tell" without an interval (fewer than two paired seeds); "" without a difference."""
    mean, half = difference
    if math.isnan(mean):
        return ""
    if math.isnan(half):
        return "one seed: cannot tell"
    if mean == 0 and half == 0:
        return "not significant (identical on every seed)"
    return "significant" if abs(mean) > half else "not significant"


def differences(outcomes: list[AlgorithmOutcome], target: Target | None, confidence: float) -> list[str]:
    """Each algorithm against the first, in words: "fedprox vs fedavg: energy to target differs by +1.2 J
    (95 % paired CI [-0.3, 2.7] J, 3 seeds): not significant"."""
    if not outcomes:
        return []
    first, what = outcomes[0].algorithm, "energy to target" if target is not None else "energy of the whole run"
    lines = []
    for o in outcomes[1:]:
        mean, half = o.energy_difference_j
        if math.isnan(mean):
            lines.append(f"{o.algorithm} vs {first}: {what}: no seed where both reached the target")
            continue
        ci = "" if math.isnan(half) else f"{confidence:.0%} paired CI [{mean - half:+.4g}, {mean + half:+.4g}] J, "
        lines.append(
            f"{o.algorithm} vs {first}: {what} differs by {mean:+.4g} J ({ci}{o.paired_seeds} "
            f"seed{'s' if o.paired_seeds != 1 else ''}): {significance(o.energy_difference_j)}"
        )
    return lines


def format_report(
    outcomes: list[AlgorithmOutcome],
    target: Target | None,
    window: int,
    confidence: float,
    settings: dict[str, dict] | None = None,
) -> str:
    lines = []
    if settings:
        lines += ["own settings of each algorithm ([algorithm.<name>], defaults included):"]
        lines += [f"  {name}: {settings_text(values)}" for name, values in settings.items()] + [""]
    if target is not None:
        lines += [
            f"target {target}; {definition(target, window)}; energy to target: the "
            f"{energy_sentence(outcomes[0].energy_definition)}; means over the seeds that reached it ± "
            f"{confidence:.0%} t-interval; energy ratio to {outcomes[0].algorithm}: paired over seeds",
            "",
        ]
    header = [
        "algorithm",
        "reached",
        "rounds",
        "energy J",
        "time s",
        "energy / first",
        "energy, whole run J",
        *[f"final {k}" for k in dict.fromkeys(k for o in outcomes for k in o.final)],
    ]
    cells = [
        [
            o.algorithm,
            f"{o.reached}/{o.seeds}",
            _fmt(o.rounds, 3),
            _fmt(o.energy_j),
            _fmt(o.time_s),
            _fmt(o.energy_ratio, 3),
            f"{o.energy_total_j:.4g}",
            *[f"{v:.4f}" for v in o.final.values()],
        ]
        for o in outcomes
    ]
    if target is None:
        keep = [0, 6, *range(7, len(header))]
        header, cells = [header[i] for i in keep], [[c[i] for i in keep] for c in cells]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(header)]
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in cells]
    if len(outcomes) > 1:
        lines += [
            "",
            f"significance (each against {outcomes[0].algorithm}, paired over the seeds; significant when "
            f"the {confidence:.0%} t-interval of the difference excludes 0):",
        ]
        lines += [f"  {line}" for line in differences(outcomes, target, confidence)]
    return "\n".join(lines) + "\n"


def plot(outcomes: list[AlgorithmOutcome], target: Target, path, scenario=None) -> None:
    """Energy, time and rounds to the target per algorithm, with the t-intervals, written to ``path`` in the
    format of its suffix (png, pdf, svg). An asynchronous algorithm's rounds are server updates: the rounds panel
    says so under its name (simulated time compares both kinds). ``scenario``: the compared runs' common
    settings, for the title (cells, reuse, controller ...)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from edgefl.figures import save_figure
    from edgefl.run_plots import fit_title
    from edgefl.sweeps.plots import rounds_axis

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
    names = [o.algorithm for o in outcomes]
    rounds_label, marks = rounds_axis(names)
    for ax, (label, attr) in zip(
        axes,
        (
            (f"{outcomes[0].energy_definition} energy to target (J)", "energy_j"),
            ("simulated time to target (s)", "time_s"),
            (rounds_label, "rounds"),
        ),
    ):
        means = [getattr(o, attr)[0] for o in outcomes]
        errors = [0 if math.isnan(getattr(o, attr)[1]) else getattr(o, attr)[1] for o in outcomes]
        ax.bar(
            range(len(names)),
            [0 if math.isnan(m) else m for m in means],
            yerr=errors,
            capsize=4,
            color="tab:blue",
            alpha=0.8,
        )
        ticks = [f"{n}\n({o.reached}/{o.seeds})" for n, o in zip(names, outcomes)]
        if attr == "rounds":
            ticks = [t + marks[n] for t, n in zip(ticks, names)]
        ax.set_xticks(range(len(names)), ticks, fontsize=8)
        ax.set_ylabel(label)
    caption = f"target {target}: mean ± 95 % CI over the seeds that reached it (reached/seeds under each name)"
    if scenario is not None:
        caption = scenario.title(algorithm=", ".join(names)) + "\n" + caption
    fig.suptitle(fit_title(caption, 12), fontsize=9)
    fig.tight_layout()
    path = Path(path)
    with atomic_file(path) as tmp:  # then a rename: never a half figure (kill -9)
        save_figure(fig, tmp, fmt=path.suffix.lstrip("."))
