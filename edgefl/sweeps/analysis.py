"""Energy-to-target and the energy-optimal number of local steps τ*, computed from a sweep's
results.csv (rounds-to-target: :mod:`edgefl.target`).

Definitions (printed with every output):

- **rounds-to-target** of one seed: :func:`edgefl.target.rounds_to_target`, the first
  evaluated round at which the measured metric and its centred moving average (window w,
  default 5 evaluations: the evaluation, two before and two after, fewer at the ends of the
  run) both reach the target (>= for accuracies, <= for losses). A seed that never gets there
  is "never reached".
- **energy-to-target** of one seed: the cumulative energy of all clients (J) at that round,
  split into compute and transmission (uplink + downlink; idle apart).
- Per (channel point, τ): means over seeds with a t-distribution confidence interval
  (95% by default; none with one seed). A τ is **eligible** only if every seed reaches the
  target; τ* is the eligible τ with the least mean energy-to-target (ties: the smaller τ).
- **τ set** (what τ* means given the seeds): the eligible τ whose energy-to-target is not
  significantly worse than τ*'s, paired over seeds. For every seed, d_s = ln(E_τ,s / E_τ*,s) (the
  same seed's runs share data partition, initial model and sampling); τ is in the set when the
  lower end of the t-interval of the mean of d_s (at the report's confidence, 95 % by default) is
  <= 0, i.e. the seeds cannot tell it apart from τ*. τ* is always in the set; with a single seed
  every eligible τ is (nothing can be told apart).

The structure behind τ*: E(τ) = R(τ) · (τ·a + b), R the rounds to target, a the compute
energy per local step of a round's participants, b the transmission energy per round. A
cheaper channel (higher SNR, wider band) lowers b, so τ* can only fall (never rise) as
SNR or bandwidth grows (tests/test_optimal_tau.py checks this property).
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path

import numpy as np

from edgefl.sweeps.common import TAU_KEY, SweepError
from edgefl.target import (
    COMMITTED,
    DEFAULT_WINDOW,
    Target,
    energy_at,
    energy_definition,
    energy_sentence,
    rounds_to_target,
)
from edgefl.target import definition as target_definition

DEFAULT_CONFIDENCE = 0.95
COMPUTE_COLUMNS = ("compute_energy_j", "idle_energy_j")  # the rest of the committed energy is the radio's


def definition(target: Target, window: int, confidence: float = DEFAULT_CONFIDENCE, energy: str = COMMITTED) -> str:
    return (
        f"{target_definition(target, window)} (per seed); energy-to-target = the {energy} energy of all clients at "
        f"that round ({energy_sentence(energy)}); mean over seeds ± {confidence:.0%} t-interval; a τ is eligible only "
        f"if every seed reaches the target; τ* = eligible τ with the least mean energy-to-target; τ set = "
        f"the eligible τ not significantly worse than τ*: the lower end of the {confidence:.0%} paired "
        f"t-interval of the mean over seeds of ln(E_τ / E_τ*) is <= 0."
    )


# -- reading results.csv ------------------------------------------------------------------
_NOT_INTEGER = re.compile(r"[.eEnN]").search


def _value(text: str):
    """A cell of results.csv: None (empty), an int (an integer literal), a float, else the text. (Parsed as a float
    first: most cells are, and every text int() takes float() takes too; a failed int() costs an exception.)"""
    if text == "":
        return None
    try:
        number = float(text)
    except ValueError:
        return text
    if _NOT_INTEGER(text):  # a decimal point, an exponent, inf or nan: not an integer literal
        return number
    try:
        return int(text)
    except ValueError:
        return number


def read_results(path: Path) -> tuple[list[str], list[dict]]:
    try:
        with open(path, newline="") as handle:
            reader = csv.reader(handle)
            header = next(reader)
            rows = [dict(zip(header, map(_value, line))) for line in reader]
    except FileNotFoundError:
        raise SweepError(f"{path}: not found; run `edgefl sweep` to completion first") from None
    except StopIteration:
        raise SweepError(f"{path}: empty") from None
    return header, rows


# -- energy to target and τ* -------------------------------------------------------------------
@dataclass
class SeedOutcome:
    channel: tuple  # values of the grid keys other than τ
    tau: int
    seed: int
    rounds: int | None  # None: never reached
    energy_j: float | None
    compute_j: float | None
    transmit_j: float | None


@dataclass
class TauStats:
    channel: tuple
    tau: int
    seeds: list[int]
    never_reached: list[int]
    rounds_mean: float
    rounds_ci: float
    energy_mean: float
    energy_ci: float
    compute_mean: float
    transmit_mean: float
    energy_by_seed: dict[int, float] = field(default_factory=dict)  # energy-to-target of each seed that reached

    @property
    def eligible(self) -> bool:
        return not self.never_reached

    @property
    def status(self) -> str:
        if not self.never_reached:
            return "reached"
        return f"never reached by seed(s) {','.join(map(str, self.never_reached))}"


@dataclass
class ChannelOptimum:
    channel: tuple
    tau_star: int | None  # None: no τ reached the target with every seed
    best: TauStats | None
    candidates: list[TauStats] = field(default_factory=list)
    # τ -> (mean of ln(E_τ / E_τ*) over seeds, its CI half-width, two-sided paired t-test p-value)
    paired: dict[int, tuple[float, float, float]] = field(default_factory=dict)
    tau_set: list[int] = field(default_factory=list)  # τ not significantly worse than τ* (module docstring)

    @property
    def tau_set_label(self) -> str:
        return tau_set_label(self.tau_set, [c.tau for c in self.candidates])

    @property
    def status(self) -> str:
        return "ok" if self.tau_star is not None else "never reached (no τ reached the target with every seed)"


@dataclass
class OptimalTau:
    target: Target
    window: int
    confidence: float
    channel_keys: list[str]
    per_tau: list[TauStats]
    per_channel: list[ChannelOptimum]
    energy: str = COMMITTED  # which energy to target (edgefl.target.energy_definition): committed, or booked

    @property
    def definition(self) -> str:
        return definition(self.target, self.window, self.confidence, self.energy)


def mean_ci(values, confidence: float = DEFAULT_CONFIDENCE) -> tuple[float, float]:
    """Mean and the half-width of its t-interval (nan with fewer than two values)."""
    x = np.asarray(values, dtype=float)
    if len(x) == 0:
        return math.nan, math.nan
    if len(x) < 2:
        return float(x.mean()), math.nan
    # Student's t quantile: scipy.special's stdtrit(df, q), the function scipy.stats.t.ppf(q, df) calls (the same
    # numbers); scipy.special loads in a third of the time scipy.stats does. Here, not at the top: a sweep's scenario
    # is checked before scipy loads.
    from scipy.special import stdtrit

    half = stdtrit(len(x) - 1, 0.5 + confidence / 2) * x.std(ddof=1) / math.sqrt(len(x))
    return float(x.mean()), float(half)


def seed_outcomes(
    rows: list[dict], grid_keys: list[str], target: Target, window: int, columns: list[str] | None = None
) -> list[SeedOutcome]:
    """Each run's rounds and energy to target. ``columns``: results.csv's (default: the rows'), named when the
    target's metric is not one of them."""
    if TAU_KEY not in grid_keys:
        raise SweepError(f"optimal τ needs {TAU_KEY} in the sweep grid (e.g. --grid {TAU_KEY}=5,10,20)")
    if rows and target.metric not in rows[0]:
        known = [k for k in (rows[0] if columns is None else columns) if k.startswith(("acc", "loss"))]
        raise SweepError(f"--target: no column {target.metric!r} in results.csv (known: {', '.join(known)})")
    channel_keys = [k for k in grid_keys if k != TAU_KEY]
    runs: dict[tuple, list[dict]] = {}
    run_of = itemgetter(*channel_keys, TAU_KEY, "seed")  # (channel values..., τ, seed)
    for row in rows:
        runs.setdefault(run_of(row), []).append(row)
    outcomes = []
    for key, run in runs.items():
        channel, tau, seed = key[:-2], key[-2], key[-1]
        rounds = [r["round"] for r in run]
        if rounds != sorted(rounds):  # (results.csv holds a run's rows in round order: sorted already)
            run.sort(key=lambda r: r["round"])
            rounds = [r["round"] for r in run]
        reached = rounds_to_target(rounds, [r[target.metric] for r in run], target, window)
        at = None if reached is None else run[rounds.index(reached)]
        outcomes.append(
            SeedOutcome(
                channel,
                int(tau),
                int(seed),
                reached,
                None if at is None else energy_at(at),
                None if at is None else at["compute_energy_j"],
                None if at is None else energy_at(at) - sum(at[c] for c in COMPUTE_COLUMNS),
            )
        )
    return outcomes


def tau_stats(outcomes: list[SeedOutcome], confidence: float) -> list[TauStats]:
    groups: dict[tuple, list[SeedOutcome]] = {}
    for o in outcomes:
        groups.setdefault((o.channel, o.tau), []).append(o)
    result = []
    for (channel, tau), group in groups.items():
        ok = [o for o in group if o.rounds is not None]
        rounds_mean, rounds_ci = mean_ci([o.rounds for o in ok], confidence)
        energy_mean, energy_ci = mean_ci([o.energy_j for o in ok], confidence)
        result.append(
            TauStats(
                channel,
                tau,
                sorted(o.seed for o in group),
                sorted(o.seed for o in group if o.rounds is None),
                rounds_mean,
                rounds_ci,
                energy_mean,
                energy_ci,
                mean_ci([o.compute_j for o in ok])[0],
                mean_ci([o.transmit_j for o in ok])[0],
                {o.seed: o.energy_j for o in ok},
            )
        )
    return result


def paired_log_ratio(
    energy: dict[int, float], reference: dict[int, float], confidence: float
) -> tuple[float, float, float]:
    """Mean over the common seeds of ln(E / E_ref), its t-interval half-width and the two-sided paired
    t-test p-value (NaN half-width and p with fewer than two seeds; half-width 0 and p 1 when every
    seed gives the same ratio... unless it is not 0, then p 0)."""
    seeds = sorted(set(energy) & set(reference))
    d = np.array([math.log(energy[s] / reference[s]) for s in seeds if energy[s] > 0 and reference[s] > 0])
    if len(d) < 2:
        return (float(d.mean()) if len(d) else math.nan), math.nan, math.nan
    mean, half = mean_ci(d, confidence)
    spread = d.std(ddof=1)
    if spread > 1e-12 * max(1.0, abs(mean)):  # two-sided one-sample t-test of mean 0
        from scipy.special import stdtr  # t's distribution function: scipy.stats.t.sf(x, df) is stdtr(df, -x)

        p = float(2 * stdtr(len(d) - 1, -(abs(mean) / (spread / math.sqrt(len(d))))))
    else:  # every seed gives the same ratio
        p = 1.0 if abs(mean) <= 1e-12 else 0.0
    return mean, half, p


def tau_set(optimum: TauStats, candidates: list[TauStats], confidence: float) -> tuple[list[int], dict]:
    """The eligible τ not significantly worse than τ* (module docstring), and each one's paired numbers."""
    members, paired = [], {}
    for c in candidates:
        if not c.eligible:
            continue
        mean, half, p = paired_log_ratio(c.energy_by_seed, optimum.energy_by_seed, confidence)
        paired[c.tau] = (mean, half, p)
        lower = mean - half if not math.isnan(half) else -math.inf
        if c.tau == optimum.tau or lower <= 0:
            members.append(c.tau)
    return sorted(members), paired


def tau_set_label(members: list[int], grid: list[int]) -> str:
    """``[10, 15, 25]`` on the grid 5..30 -> "10-15,25" (runs of neighbours in the grid joined by '-')."""
    grid = sorted(grid)
    runs: list[list[int]] = []
    for tau in sorted(members):
        if runs and grid.index(tau) == grid.index(runs[-1][-1]) + 1:
            runs[-1].append(tau)
        else:
            runs.append([tau])
    return ",".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


def best_tau(candidates: list[TauStats]) -> TauStats | None:
    """The eligible τ with the least mean energy-to-target (ties: the smaller τ)."""
    eligible = [c for c in candidates if c.eligible]
    return min(eligible, key=lambda c: (c.energy_mean, c.tau)) if eligible else None


def optimal_tau(
    rows: list[dict],
    grid_keys: list[str],
    target: Target,
    window: int = DEFAULT_WINDOW,
    confidence: float = DEFAULT_CONFIDENCE,
    columns: list[str] | None = None,
) -> OptimalTau:
    """τ* for every channel point (every combination of the grid keys other than τ). ``columns``: results.csv's,
    where the rows hold only some (edgefl.sweeps.folder.read_sweep's ``metrics``)."""
    if window < 1:
        raise SweepError(f"--window must be >= 1, got {window}")
    if not 0 < confidence < 1:
        raise SweepError(f"--confidence must be in (0, 1), got {confidence}")
    per_tau = tau_stats(seed_outcomes(rows, grid_keys, target, window, columns), confidence)
    by_channel: dict[tuple, list[TauStats]] = {}
    for s in per_tau:
        by_channel.setdefault(s.channel, []).append(s)
    per_channel = []
    for channel, candidates in by_channel.items():
        candidates.sort(key=lambda c: c.tau)
        best = best_tau(candidates)
        members, paired = tau_set(best, candidates, confidence) if best else ([], {})
        per_channel.append(ChannelOptimum(channel, best.tau if best else None, best, candidates, paired, members))
    channel_keys = [k for k in grid_keys if k != TAU_KEY]
    return OptimalTau(target, window, confidence, channel_keys, per_tau, per_channel, energy_definition(rows))


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the points not dominated in (x, y), both minimised; sorted by x."""
    order = sorted(range(len(points)), key=lambda i: (points[i][0], points[i][1]))
    front, best_y = [], math.inf
    for i in order:
        if points[i][1] < best_y:
            front.append(i)
            best_y = points[i][1]
    return front


# -- output -------------------------------------------------------------------------------
def _fmt(x, digits=4) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    return f"{x:.{digits}g}"


def per_channel_rows(result: OptimalTau) -> tuple[list[str], list[list]]:
    header = [
        *result.channel_keys,
        "tau_star",
        "tau_set",
        "rounds_mean",
        "rounds_ci95",
        "energy_j_mean",
        "energy_j_ci95",
        "compute_j",
        "transmit_j",
        "transmit_share",
        "status",
    ]
    rows = []
    for c in result.per_channel:
        b = c.best
        rows.append(
            [
                *c.channel,
                c.tau_star,
                c.tau_set_label or None,
                *(
                    (None,) * 6
                    if b is None
                    else (b.rounds_mean, b.rounds_ci, b.energy_mean, b.energy_ci, b.compute_mean, b.transmit_mean)
                ),
                None if b is None else b.transmit_mean / b.energy_mean,
                c.status,
            ]
        )
    return header, rows


def per_tau_rows(result: OptimalTau) -> tuple[list[str], list[list]]:
    header = [
        *result.channel_keys,
        "tau",
        "seeds",
        "seeds_reached",
        "rounds_mean",
        "rounds_ci95",
        "energy_j_mean",
        "energy_j_ci95",
        "compute_j",
        "transmit_j",
        "eligible",
        "is_optimal",
        "within_ci",
        "log_ratio_to_optimal",
        "log_ratio_ci95",
        "paired_p_value",
        "status",
    ]
    stars = {c.channel: c.tau_star for c in result.per_channel}
    rows = []
    for c in result.per_channel:
        for s in c.candidates:
            mean, half, p = c.paired.get(s.tau, (None, None, None))
            rows.append(
                [
                    *s.channel,
                    s.tau,
                    len(s.seeds),
                    len(s.seeds) - len(s.never_reached),
                    s.rounds_mean,
                    s.rounds_ci,
                    s.energy_mean,
                    s.energy_ci,
                    s.compute_mean,
                    s.transmit_mean,
                    s.eligible,
                    stars[s.channel] == s.tau,
                    s.tau in c.tau_set,
                    mean,
                    half,
                    p,
                    s.status,
                ]
            )
    return header, rows


def format_report(result: OptimalTau) -> str:
    """The printed table: a τ* matrix over SNR x bandwidth when both are swept, then one
    line per channel point."""
    lines = [f"target {result.target}", f"definition: {result.definition}", ""]
    keys = result.channel_keys
    if "network.snr_db" in keys and "network.bandwidth_mhz" in keys:
        i_snr, i_bw = keys.index("network.snr_db"), keys.index("network.bandwidth_mhz")
        facets: dict[tuple, dict] = {}
        for c in result.per_channel:
            facet = tuple(v for k, v in enumerate(c.channel) if k not in (i_snr, i_bw))
            facets.setdefault(facet, {})[(c.channel[i_snr], c.channel[i_bw])] = c
        other = [k for k in keys if k not in ("network.snr_db", "network.bandwidth_mhz")]
        for facet, table in facets.items():
            snrs = sorted({k[0] for k in table})
            bws = sorted({k[1] for k in table})
            title = ", ".join(f"{k}={v}" for k, v in zip(other, facet))
            for what, cell in (
                ("τ*", lambda c: c.tau_star),
                (
                    f"τ set (not significantly worse than τ*, paired, {result.confidence:.0%})",
                    lambda c: c.tau_set_label or None,
                ),
            ):
                lines.append(
                    f"{what} (rows: SNR dB, columns: bandwidth MHz){' for ' + title if title else ''}; "
                    f"'-' = no τ reached the target with every seed"
                )
                width = max([7] + [len(str(cell(c))) + 2 for c in table.values()])
                lines.append("SNR\\BW " + "".join(f"{b:>{width}g}" for b in bws))
                for s in snrs:
                    lines.append(
                        f"{s:>6g} "
                        + "".join(
                            f"{'-' if table.get((s, b)) is None or cell(table[(s, b)]) is None else cell(table[(s, b)]):>{width}}"
                            for b in bws
                        )
                    )
                lines.append("")
    header, rows = per_channel_rows(result)
    widths = [max(len(h), 8) for h in header]
    lines.append("  ".join(h.rjust(w) for h, w in zip(header[:-1], widths)) + "  status")
    for row in rows:
        cells = [str(v) if isinstance(v, (int, str)) and not isinstance(v, bool) else _fmt(v) for v in row[:-1]]
        cells = ["-" if v == "None" else v for v in cells]
        lines.append("  ".join(c.rjust(w) for c, w in zip(cells, widths)) + f"  {row[-1]}")
    return "\n".join(lines) + "\n"
