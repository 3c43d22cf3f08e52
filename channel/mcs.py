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

# NR PUSCH (and PDSCH) MCS index table 1, 3GPP TS 38.214 V17 Table 5.1.3.1-1 (QPSK .. 64QAM, no transform precoding):
# the spectral efficiency Q_m · R of MCS 0..28 (bit per resource element), MCS 17 left out: it has less spectral
# efficiency than MCS 16 (2.5664 < 2.5703) and needs more SNR, so a link never picks it.
NR_PUSCH_MCS = tuple(i for i in range(29) if i != 17)
NR_PUSCH_EFFICIENCY = (
    0.2344, 0.3066, 0.3770, 0.4902, 0.6016, 0.7402, 0.8770, 1.0273, 1.1758, 1.3262,  # MCS 0-9: QPSK
    1.3281, 1.4766, 1.6953, 1.9141, 2.1602, 2.4063, 2.5703,  # MCS 10-16: 16QAM
    2.7305, 3.0293, 3.3223, 3.6094, 3.9023, 4.2129, 4.5234, 4.8164, 5.1152, 5.3320, 5.5547,  # MCS 18-28: 64QAM
)  # fmt: skip
# The SNR (dB) at which each reaches 10 % BLER on an AWGN link: read off the link-level BLER curves of the CTTC
# 5G-LENA NR error model (ns-3 NR module, NrEesmErrorModel, HARQ-IR tables for MCS table 1: nr-eesm-t1-bg2.cc for
# MCS 0-3, LDPC base graph 2, code block 3624-3752 bits; nr-eesm-t1-bg1.cc for MCS 4-28, base graph 1, the largest
# code block tabulated, 7808-8192 bits, 928 bits for MCS 28), by interpolating log10(BLER) linearly in SNR (dB)
# between the two points around 0.1. Copy read: github.com/UniVe-NeDS-Lab/fivegchannel (channelmodel/sinr_bler/LENA,
# commit 19875ca), derivation in docs/model.md §3a. At equal spectral efficiency (interpolated) they are 1.0-3.7 dB
# above the LTE CQI thresholds below 0.9 bit/s/Hz, within 1.1 dB from 1.2 to 3.3, and 0.5-1.4 dB below from 3.9 up.
NR_PUSCH_SNR_DB = (
    -1.01, -0.61, 0.21, 1.20, 1.95, 2.68, 3.44, 4.03, 4.83, 5.61,
    6.26, 6.97, 7.71, 8.50, 9.31, 10.26, 10.82,
    12.19, 13.14, 14.00, 14.83, 15.75, 16.62, 17.66, 18.47, 19.65, 20.61, 22.64,
)  # fmt: skip
MCS_TABLES = {"lte": (CQI_SNR_DB, CQI_EFFICIENCY), "nr": (NR_PUSCH_SNR_DB, NR_PUSCH_EFFICIENCY)}


def nr_overhead_fraction(pusch_symbols: int = 14, dmrs_symbols: int = 1) -> float:
    """The share of an NR uplink band's resource that carries no data (TS 38.211 §4, §6.4.1.1; normal cyclic prefix):
    a slot of 1/2^μ ms holds 14 OFDM symbols on subcarriers 15·2^μ kHz apart, so a Hz of occupied subcarriers carries
    14 / (15 kHz · 1 ms) = 14/15 resource elements per second whatever the numerology μ (the cyclic prefix takes the
    other 1/15); of a slot's 14 symbols, ``pusch_symbols`` carry the PUSCH and ``dmrs_symbols`` of them its
    demodulation reference signal (DMRS type 1 without data: the whole symbol), so 1 − (S − D)/15."""
    if not 1 <= dmrs_symbols < pusch_symbols <= 14:
        raise ValueError(f"need 1 <= dmrs_symbols < pusch_symbols <= 14, got {dmrs_symbols}, {pusch_symbols}")
    return 1.0 - (pusch_symbols - dmrs_symbols) / 15.0


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
    """The thresholds (linear) and the efficiencies after a 0 (bit/s/Hz below the lowest threshold): entry k + 1 is
    the efficiency of the k-th threshold, so a count of thresholds reached indexes it directly."""
    thresholds, efficiencies = check_mcs_table(snr_db, efficiency)
    return np.asarray(db_to_linear(thresholds)), np.concatenate(([0.0], efficiencies))


def mcs_spectral_efficiency(snr_linear, snr_db=CQI_SNR_DB, efficiency=CQI_EFFICIENCY):
    """bit/s/Hz of the highest entry whose threshold ``snr_linear`` reaches; 0 below the lowest."""
    snr_linear = require_nonnegative(snr_linear, "snr_linear")
    thresholds, after_zero = _linear_table(  # (a network's table is a tuple of floats already: the engine's calls)
        snr_db if type(snr_db) is tuple else tuple(map(float, snr_db)),
        efficiency if type(efficiency) is tuple else tuple(map(float, efficiency)),
    )
    # one look-up per SNR: the count of thresholds it reaches (0: none, efficiency 0) indexes the table after a 0
    # (the method, not np.searchsorted's wrapper: a third of its cost, 2-3 calls per plan of a dispatched chain, [8])
    return out(after_zero[thresholds.searchsorted(snr_linear, side="right")])
