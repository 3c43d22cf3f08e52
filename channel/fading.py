"""Small-scale fading: unit-mean power gain |h|² drawn per transmission."""

from __future__ import annotations

import numpy as np

from arraychecks import out

FADING_KINDS = ("none", "rayleigh", "rician")


def fading_power_gain(kind: str, rng: np.random.Generator, size=None, rician_k: float = 1.0):
    """Draw the fading power gain |h|² (linear, E[|h|²] = 1).

    - ``'none'``: 1 (no fading).
    - ``'rayleigh'``: h ~ CN(0, 1), so |h|² ~ Exp(1).
    - ``'rician'``: h = sqrt(K/(K+1)) + sqrt(1/(K+1)) · CN(0, 1): line-of-sight power
      K/(K+1) plus scattered power 1/(K+1). K = 0 is Rayleigh; K -> inf is no fading.

    ``rng`` is a ``numpy.random.Generator``; ``size`` as in numpy (None -> a float).
    """
    kind_l = str(kind).lower()
    if kind_l == "none":
        return 1.0 if size is None else np.ones(size)
    if kind_l == "rayleigh":
        return out(rng.exponential(1.0, size))
    if kind_l == "rician":
        k = float(rician_k)
        if not k >= 0:
            raise ValueError(f"rician_k must be >= 0, got {rician_k}")
        los = np.sqrt(k / (k + 1.0))
        sigma = np.sqrt(1.0 / (2.0 * (k + 1.0)))  # per real dimension of the scattered part
        re = los + sigma * rng.standard_normal(size)
        im = sigma * rng.standard_normal(size)
        return out(re * re + im * im)
    raise ValueError(f"unknown fading kind {kind!r}; expected one of {FADING_KINDS}")


def fading_gain_exceeded(kind: str, probability: float, rician_k: float = 1.0) -> float:
    """The power gain |h|² that one draw of :func:`fading_power_gain` exceeds with ``probability`` (linear): none, 1;
    Rayleigh, Exp(1): -ln p; Rician, |h|² = chi'²(2, 2K) / (2 (K + 1)) (a noncentral chi-square with 2 degrees of
    freedom and noncentrality 2K, scaled to unit mean)."""
    kind_l = str(kind).lower()
    if kind_l == "none":
        return 1.0
    if kind_l == "rayleigh":
        return float(-np.log(probability))
    if kind_l == "rician":
        # (scipy.special's inverse CDF, not scipy.stats' ncx2.isf: the same quantile within 1e-6 down to 1e-9, and an
        # import of 0.4 s where scipy.stats took 1-1.5 s on the 2-core machines, for every run the check prices)
        from scipy.special import chndtrix

        k = float(rician_k)
        if k == 0:
            return float(-np.log(probability))
        return float(chndtrix(1.0 - probability, 2, 2.0 * k) / (2.0 * (k + 1.0)))
    raise ValueError(f"unknown fading kind {kind!r}; expected one of {FADING_KINDS}")
