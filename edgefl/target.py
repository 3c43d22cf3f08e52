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
    if not sep or not metric.strip() or not math.isfinite(value):
        raise UserError(f"--target {text!r}: expected metric=value, e.g. --target acc_worst=0.80")
    return Target(metric.strip(), value)


def centred_moving_average(values, window: int) -> np.ndarray:
    """Mean over [i - (w-1)//2, i + w//2], cut at the ends."""
    values = np.asarray(values, dtype=float)
    before, after = (window - 1) // 2, window // 2
    return np.array([values[max(0, i - before): i + after + 1].mean() for i in range(len(values))])


def rounds_to_target(rounds, values, target: Target, window: int = DEFAULT_WINDOW) -> int | None:
    """The round at which ``target`` is reached, or None if it never is.

    - Only evaluated rounds count: pairs (round, value) whose value is None or NaN are dropped.
    - The values are smoothed by a **centred moving average** over ``window`` evaluated rounds
      (default 5): at the i-th evaluation, the mean of evaluations i - (w-1)//2 .. i + w//2
      (for w = 5: the round itself, two before and two after), cut at the ends of the run
      (fewer values there, no padding). It keeps one lucky round from counting and, centred,
      adds no lag. ``window=1`` uses the raw values.
    - The target counts as crossed at the first round whose smoothed value is >= the target
      (<= for losses and errors, :class:`Target`), compared exactly (no tolerance).
    """
    pairs = [(r, v) for r, v in zip(rounds, values) if v is not None and not math.isnan(v)]
    if not pairs:
        return None
    smooth = centred_moving_average([v for _, v in pairs], window)
    for (r, _), s in zip(pairs, smooth):
        if target.reached(s):
            return int(r)
    return None


def definition(target: Target, window: int) -> str:
    """:func:`rounds_to_target` in one sentence, for printed reports."""
    sense = ">=" if target.higher_is_better else "<="
    return (f"rounds-to-target = first round at which the centred {window}-round moving average of "
            f"{target.metric} is {sense} {target.value:g}")
