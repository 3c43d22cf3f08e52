"""Rate adaptation: the spectral efficiency a link uses at a given SNR.

Two modes (``network.rate``):

- ``shannon``: η · log2(1 + SNR / Γ) bit/s/Hz, optionally capped at ``max_spectral_efficiency``
  (no real modem exceeds its highest modulation and coding scheme: 5.55 bit/s/Hz in LTE's
  4-bit CQI table, 7.4 with 256-QAM);
- ``mcs``: the highest entry of a modulation-and-coding table whose SNR threshold the SNR
  reaches; 0 bit/s/Hz below the lowest entry (the block is in outage).

The default table is the 3GPP 4-bit CQI table (TS 36.213, Table 7.2.3-1: spectral efficiencies
of CQI 1..15) with the SNR at which each entry reaches 10 % block error rate on an AWGN link, as
widely used with LTE link-level simulations (-6.7 dB for CQI 1 ... 22.7 dB for CQI 15).
Units: linear SNR in, bit/s/Hz out; thresholds in dB.
"""

from __future__ import annotations

import functools

import numpy as np

from arraychecks import out, require_nonnegative

from .units import db_to_linear

# 3GPP TS 36.213 Table 7.2.3-1, CQI 1..15 (bit/s/Hz), and the SNR (dB) for 10 % BLER of each.
CQI_EFFICIENCY = (
    0.1523,
    0.2344,
    0.3770,
    0.6016,
    0.8770,
    1.1758,
    1.4766,
    1.9141,
    2.4063,
    2.7305,
    3.3223,
    3.9023,
    4.5234,
    5.1152,
    5.5547,
)
CQI_SNR_DB = (-6.7, -4.7, -2.3, 0.2, 2.4, 4.3, 5.9, 8.1, 10.3, 11.7, 14.1, 16.3, 18.7, 21.0, 22.7)
RATE_MODES = ("shannon", "mcs")


def check_mcs_table(snr_db, efficiency) -> tuple[np.ndarray, np.ndarray]:
    """The table as arrays; thresholds and efficiencies must both increase strictly and be finite."""
    snr_db = np.asarray(snr_db, dtype=np.float64)
    efficiency = np.asarray(efficiency, dtype=np.float64)
    if snr_db.ndim != 1 or snr_db.shape != efficiency.shape or not len(snr_db):
        raise ValueError("an MCS table needs as many SNR thresholds as efficiencies (at least one entry)")
    if not (np.all(np.isfinite(snr_db)) and np.all(np.isfinite(efficiency)) and np.all(efficiency > 0)):
        raise ValueError("MCS table entries must be finite, efficiencies > 0")
    if np.any(np.diff(snr_db) <= 0) or np.any(np.diff(efficiency) <= 0):
        raise ValueError("MCS table thresholds and efficiencies must both increase from entry to entry")
    return snr_db, efficiency


@functools.lru_cache(maxsize=16)
def _linear_table(snr_db: tuple, efficiency: tuple) -> tuple[np.ndarray, np.ndarray]:
    thresholds, efficiencies = check_mcs_table(snr_db, efficiency)
    return np.asarray(db_to_linear(thresholds)), efficiencies


def mcs_spectral_efficiency(snr_linear, snr_db=CQI_SNR_DB, efficiency=CQI_EFFICIENCY):
    """bit/s/Hz of the highest entry whose threshold ``snr_linear`` reaches; 0 below the lowest."""
    snr_linear = require_nonnegative(snr_linear, "snr_linear")
    thresholds, efficiency = _linear_table(tuple(map(float, snr_db)), tuple(map(float, efficiency)))
    index = np.searchsorted(thresholds, snr_linear, side="right") - 1
    return out(np.where(index >= 0, efficiency[np.maximum(index, 0)], 0.0))
