"""Decibel conversions. The only place where dB/dBm meet linear SI values.

Everything else in ``channel/`` works in linear units (W, Hz, s, bits, linear SNR);
convert at the boundary with these functions. All accept floats or numpy arrays.
"""

from __future__ import annotations

import numpy as np

from arraychecks import out


def db_to_linear(db):
    """Power ratio in dB -> linear ratio: 10^(dB/10)."""
    return out(np.power(10.0, np.asarray(db, dtype=np.float64) / 10.0))


def linear_to_db(x):
    """Linear power ratio -> dB: 10·log10(x). Gives -inf for 0."""
    with np.errstate(divide="ignore"):
        return out(10.0 * np.log10(np.asarray(x, dtype=np.float64)))


def dbm_to_w(dbm):
    """Power in dBm -> W: 10^((dBm - 30)/10)  (0 dBm = 1 mW)."""
    return out(np.power(10.0, (np.asarray(dbm, dtype=np.float64) - 30.0) / 10.0))


def w_to_dbm(w):
    """Power in W -> dBm: 10·log10(W) + 30. Gives -inf for 0 W."""
    with np.errstate(divide="ignore"):
        return out(10.0 * np.log10(np.asarray(w, dtype=np.float64)) + 30.0)
