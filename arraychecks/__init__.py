"""Argument checks and result unwrapping shared by ``channel/`` and ``energy/``.

Their one home: both packages import only numpy, scipy and this package (which imports only numpy),
so the layering rule holds (docs/architecture.md).
"""

from __future__ import annotations

import numpy as np


def out(x):
    """Return a Python scalar for 0-d results, the array otherwise."""
    x = np.asarray(x)
    if x.ndim == 0:
        return x.item()
    return x


def require_nonnegative(x, name: str) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    # (NaN fails the comparison too; count_nonzero, not all(): a fifth of its cost, where the engine calls this per
    # phase and booking)
    if np.count_nonzero(x >= 0) != x.size:
        raise _negative(name, x if x.ndim == 0 else x[~(x >= 0)][:3])
    return x


def require_nonnegative_float(x: float, name: str) -> float:
    """:func:`require_nonnegative` of one Python number, as a float (no array: about 2 us less a call, where the
    engine calls it per phase)."""
    x = float(x)
    if not x >= 0:  # (NaN fails the comparison too)
        raise _negative(name, x)
    return x


def _negative(name: str, got) -> ValueError:
    return ValueError(f"{name} must be >= 0 (and not NaN), got {got}")


def require_positive(x, name: str) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if np.count_nonzero(x > 0) != x.size:  # (NaN fails the comparison too; count_nonzero: as require_nonnegative)
        raise ValueError(f"{name} must be > 0, got {x if x.ndim == 0 else x[~(x > 0)][:3]}")
    return x
