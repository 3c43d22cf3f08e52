"""Rounds-to-target: the one definition, used by `edgefl run --target` and `run.stop_at`, `edgefl
optimal-tau`, `edgefl plot` and the scripts in ``experiments/``."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from edgefl.errors import UserError

DEFAULT_WINDOW = 5


@dataclass(frozen=True)
class Target:
    """A metric and the value to reach: >= for accuracies, <= for losses and errors (metric
    names ``loss``, ``*loss``, ``*error``)."""

    metric: str
    value: float

    @property
    def higher_is_better(self) -> bool:
        return not (self.metric == "loss" or self.metric.endswith("loss") or self.metric.endswith("error"))

    def reached(self, value: float) -> bool:
        return value >= self.value if self.higher_is_better else value <= self.value

    def __str__(self) -> str:
        return f"{self.metric}={self.value:g}"


def parse_target(text: str) -> Target:
    """``metric=value`` (the ``--target`` option)."""
    metric, sep, raw = text.partition("=")
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    percent = _percentage(raw)
    if sep and metric.strip() and percent is not None:
        what = (
            f"{metric.strip()} is an accuracy, a fraction in [0, 1]: write {percent / 100:g}"
            if is_accuracy(metric.strip())
            else f"write {metric.strip()}'s value in its own unit, a plain number without %"
        )
        raise UserError(f"--target {text!r}: {raw.strip()!r} is a percentage; {what}")
    if not sep or not metric.strip() or not math.isfinite(value):
        raise UserError(f"--target {text!r}: expected metric=value, e.g. --target acc_worst=0.80")
    metric = metric.strip()
    if is_accuracy(metric) and not 0.0 <= value <= 1.0:
        hint = (
            f"{value:g} looks like a percentage: write {value / 100:g}"
            if 1.0 < value <= 100.0
            else "write a fraction, e.g. 0.8"
        )
        raise UserError(f"--target {text!r}: {metric} is an accuracy, a fraction in [0, 1]; {hint}")
    return Target(metric, value)


def _percentage(raw: str) -> float | None:
    """The number of ``raw`` written as a percentage (``"85%"`` -> 85.0), or None."""
    raw = raw.strip()
    if not raw.endswith("%"):
        return None
    try:
        value = float(raw[:-1])
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def is_accuracy(metric: str) -> bool:
    """Accuracy metrics (acc_mean, acc_worst, acc_std, ...: names that start with ``acc``) are fractions in
    [0, 1] (edgefl.metrics)."""
    return metric.startswith("acc")


def centred_moving_average(values, window: int) -> np.ndarray:
    """Mean over [i - (w-1)//2, i + w//2], cut at the ends."""
    values = np.asarray(values, dtype=float)
    return np.array([_centred_mean(values, i, window) for i in range(len(values))])


def _centred_mean(values: np.ndarray, i: int, window: int):
    """:func:`centred_moving_average` at the i-th value."""
    return values[max(0, i - (window - 1) // 2) : i + window // 2 + 1].mean()


def rounds_to_target(rounds, values, target: Target, window: int = DEFAULT_WINDOW) -> int | None:
    """The round at which ``target`` is reached, or None if it never is.

    - Only evaluated rounds count: pairs (round, value) whose value is None or NaN are dropped.
    - The values are smoothed by a **centred moving average** over ``window`` evaluations
      (default 5): at the i-th evaluation, the mean of evaluations i - (w-1)//2 .. i + w//2
      (for w = 5: the evaluation itself, two before and two after), cut at the ends of the run
      (fewer values there, no padding). ``window=1`` uses the raw values.
    - The target counts as reached at the first evaluated round whose **measured value and
      smoothed value both** reach it (>= the target; <= for losses and errors, :class:`Target`),
      compared exactly (no tolerance). The measured value keeps the average of later, better
      evaluations from claiming the target before any evaluation reached it; the average keeps
      one lucky evaluation from counting.
    """
    pairs = [(r, v) for r, v in zip(rounds, values) if v is not None and not math.isnan(v)]
    if not pairs:
        return None
    measured = np.asarray([v for _, v in pairs], dtype=float)
    for i, (r, v) in enumerate(pairs):  # the average only where the measured value reaches the target: the numbers
        # of centred_moving_average, at a fraction of its cost
        if target.reached(v) and target.reached(_centred_mean(measured, i, window)):
            return int(r)
    return None


def definition(target: Target, window: int) -> str:
    """:func:`rounds_to_target` in one sentence, for printed reports and captions."""
    sense = ">=" if target.higher_is_better else "<="
    if window == 1:
        return f"rounds-to-target = first evaluated round at which {target.metric} is {sense} {target.value:g}"
    return (
        f"rounds-to-target = first evaluated round at which {target.metric} and its centred moving average "
        f"over {window} evaluations are both {sense} {target.value:g}"
    )


# Energy to a target: what reaching it and stopping there costs (docs/model.md §8, "Committed energy").
COMMITTED = "committed"
COMMITTED_ENERGY = (
    "committed energy = the energy booked by the end of the round plus what the radios still in a tail then (and "
    "the activities already started) will spend if no further message comes: what stopping there costs"
)
BOOKED_ENERGY = "booked energy = the energy charged by the end of the round (radio tails up to then only)"
ENERGY_COLUMN = {COMMITTED: "committed_energy_j", "booked": "energy_j"}


def energy_definition(rows: list[dict]) -> str:
    """Which energy a run's metrics rows give to a target: ``committed`` (metrics.csv's ``committed_energy_j``),
    or ``booked`` for results written before committed energy was recorded."""
    return COMMITTED if any(row.get("committed_energy_j") is not None for row in rows[:1]) else "booked"


def energy_at(row: dict, which: str = COMMITTED) -> float:
    """The energy (J) of a metrics row by the definition ``which`` (:data:`ENERGY_COLUMN`); committed falls back
    to booked in rows that predate it (say so with :func:`energy_definition`)."""
    value = row.get(ENERGY_COLUMN[which])
    return float(row["energy_j"] if value is None else value)


def energy_sentence(which: str) -> str:
    """The one sentence that defines the energy a figure uses."""
    return COMMITTED_ENERGY if which == COMMITTED else BOOKED_ENERGY
