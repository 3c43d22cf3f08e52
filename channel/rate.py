"""Achievable rate, transmission time and outage.

Units: Hz, bit/s, s, bits, linear SNR; the SNR gap and outage threshold are in dB.
"""

from __future__ import annotations

import numpy as np

from arraychecks import out, require_nonnegative, require_nonnegative_float

from .mcs import CQI_EFFICIENCY, CQI_SNR_DB, RATE_MODES, mcs_spectral_efficiency
from .units import db_to_linear


def shannon_rate_bps(bandwidth_hz, snr_linear, efficiency=1.0, snr_gap_db=0.0):
    """Achievable rate in bit/s: R = η · B · log2(1 + SNR / Γ),  Γ = 10^(gap_dB/10).

    Shannon capacity of an AWGN channel, scaled by an efficiency η in (0, 1] (e.g.
    protocol overhead) and with an SNR gap Γ >= 1 (distance of a practical modulation
    and coding scheme from capacity). B [Hz], SNR linear. Gives 0 when B = 0.
    """
    if isinstance(bandwidth_hz, (int, float)):  # one band, checked as a number (an array's check costs ~2 us a call)
        bandwidth_hz = require_nonnegative_float(bandwidth_hz, "bandwidth_hz")
    else:
        bandwidth_hz = require_nonnegative(bandwidth_hz, "bandwidth_hz")
    snr_linear = require_nonnegative(snr_linear, "snr_linear")
    # (The engine calls this once or twice per phase on ~20 x 20 rates: each numpy call's fixed cost counts, so
    # a number is checked as a number, η = 1 and Γ = 1 multiply and divide by nothing, x * 1 and x / 1 being x.)
    if isinstance(efficiency, (int, float)):
        if not 0 < efficiency <= 1:  # (NaN fails too)
            raise ValueError(f"efficiency must be in (0, 1], got {float(efficiency)}")
    else:
        efficiency = np.asarray(efficiency, dtype=np.float64)
        if not ((efficiency > 0) & (efficiency <= 1)).all():
            raise ValueError(f"efficiency must be in (0, 1], got {efficiency}")
    if isinstance(snr_gap_db, (int, float)) and snr_gap_db == 0:
        ratio = snr_linear
    else:
        ratio = snr_linear / np.asarray(db_to_linear(snr_gap_db))
    band = bandwidth_hz if isinstance(efficiency, (int, float)) and efficiency == 1 else efficiency * bandwidth_hz
    # (an array's: count_nonzero, a fifth of all()'s cost, a Python wrapper: an FDMA phase's shares, per phase)
    if (bandwidth_hz != 0) if isinstance(bandwidth_hz, float) else np.count_nonzero(bandwidth_hz) == bandwidth_hz.size:
        return out(band * np.log2(1.0 + ratio))
    with np.errstate(invalid="ignore"):
        rate = band * np.log2(1.0 + ratio)
    # B = 0 with SNR = inf (link budget over no bandwidth): nothing gets through.
    return out(np.where(bandwidth_hz == 0, 0.0, rate))


def link_rate_bps(
    bandwidth_hz,
    snr_linear,
    rate="shannon",
    efficiency=1.0,
    snr_gap_db=0.0,
    max_spectral_efficiency=None,
    mcs_snr_db=CQI_SNR_DB,
    mcs_efficiency=CQI_EFFICIENCY,
    modulation_cap_bits_per_hz=None,
    overhead_fraction=0.0,
):
    """Rate in bit/s at ``bandwidth_hz`` [Hz] and linear SNR under the configured rate adaptation
    (channel/mcs.py), R = (1 − o) · min(R_mode, B·m):

    - R_mode: shannon, min(η·B·log2(1 + SNR/Γ), B·cap) (no cap if ``max_spectral_efficiency`` is None);
      mcs, B·se_MCS(SNR), 0 in outage;
    - m = ``modulation_cap_bits_per_hz``: the highest spectral efficiency the link's modulation allows
      (e.g. a phone's uplink capped at 16QAM: about 2.4 bit/s/Hz, the CQI table's 16QAM entries), None:
      no cap; it does not change when a message is in outage;
    - o = ``overhead_fraction`` in [0, 1): the share of the resource taken by control channels and
      reference signals, not data (LTE: roughly 15-25 %)."""
    if rate == "shannon":
        r = shannon_rate_bps(bandwidth_hz, snr_linear, efficiency, snr_gap_db)
        if max_spectral_efficiency is not None:
            r = np.minimum(r, np.asarray(bandwidth_hz, dtype=np.float64) * float(max_spectral_efficiency))
    elif rate == "mcs":
        if isinstance(bandwidth_hz, (int, float)):  # one band, checked as a number (as shannon_rate_bps's)
            bandwidth_hz = require_nonnegative_float(bandwidth_hz, "bandwidth_hz")
        else:
            bandwidth_hz = require_nonnegative(bandwidth_hz, "bandwidth_hz")
        r = bandwidth_hz * np.asarray(mcs_spectral_efficiency(snr_linear, mcs_snr_db, mcs_efficiency))
    else:
        raise ValueError(f"unknown rate adaptation {rate!r}; expected one of {RATE_MODES}")
    if modulation_cap_bits_per_hz is not None:
        r = np.minimum(r, np.asarray(bandwidth_hz, dtype=np.float64) * float(modulation_cap_bits_per_hz))
    if overhead_fraction:
        if not 0 <= overhead_fraction < 1:
            raise ValueError(f"overhead_fraction must be in [0, 1), got {overhead_fraction}")
        r = (1.0 - overhead_fraction) * np.asarray(r)
    return out(r)


def snr_for_rate(
    rate_bps,
    bandwidth_hz,
    rate="shannon",
    efficiency=1.0,
    snr_gap_db=0.0,
    max_spectral_efficiency=None,
    mcs_snr_db=CQI_SNR_DB,
    mcs_efficiency=CQI_EFFICIENCY,
    modulation_cap_bits_per_hz=None,
    overhead_fraction=0.0,
):
    """The least linear SNR at which :func:`link_rate_bps` gives at least ``rate_bps`` [bit/s] over
    ``bandwidth_hz`` [Hz]: its inverse. With s = R / ((1 − o)·B) the spectral efficiency needed: inf
    above the modulation cap (s > m); shannon: SNR = Γ · (2^(s/η) − 1), inf above the cap s > cap; mcs:
    the threshold of the lowest table entry with se >= s, inf above the top entry. 0 where R <= 0; inf
    where B = 0 and R > 0."""
    rate_bps = np.asarray(rate_bps, dtype=np.float64)
    bandwidth_hz = np.asarray(bandwidth_hz, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        needed = np.where(bandwidth_hz > 0, rate_bps / ((1.0 - overhead_fraction) * bandwidth_hz), np.inf)  # bit/s/Hz
        if rate == "shannon":
            gap = np.asarray(db_to_linear(snr_gap_db))
            snr = gap * np.expm1(needed / efficiency * np.log(2.0))
            if max_spectral_efficiency is not None:
                snr = np.where(needed > max_spectral_efficiency, np.inf, snr)
        elif rate == "mcs":
            thresholds = np.asarray(db_to_linear(np.asarray(mcs_snr_db, dtype=np.float64)))
            table = np.asarray(mcs_efficiency, dtype=np.float64)
            index = np.searchsorted(table, needed, side="left")  # the lowest entry with se >= needed
            snr = np.where(index < len(table), thresholds[np.minimum(index, len(table) - 1)], np.inf)
        else:
            raise ValueError(f"unknown rate adaptation {rate!r}; expected one of {RATE_MODES}")
        if modulation_cap_bits_per_hz is not None:
            snr = np.where(needed > modulation_cap_bits_per_hz, np.inf, snr)
    return out(np.where(rate_bps <= 0, 0.0, snr))


def transmission_time_s(bits, rate_bps):
    """Time in s to send ``bits`` at ``rate_bps`` [bit/s]: t = bits / R.

    inf where R = 0 (the message never arrives), 0 where bits = 0 (nothing to send).
    """
    bits = require_nonnegative(bits, "bits")
    rate_bps = require_nonnegative(rate_bps, "rate_bps")
    with np.errstate(divide="ignore", invalid="ignore"):
        t = bits / rate_bps
    t = np.where(bits == 0, 0.0, np.where(rate_bps == 0, np.inf, t))
    return out(t)


def is_outage(snr_linear, outage_snr_db):
    """True where the instantaneous SNR is below the outage threshold [dB].

    An upload in outage is lost: its energy is spent, its data does not count.
    ``outage_snr_db=None`` disables outage (always False).
    """
    snr_linear = np.asarray(snr_linear, dtype=np.float64)
    if outage_snr_db is None:
        return out(np.zeros(snr_linear.shape, dtype=bool))
    return out(snr_linear < db_to_linear(outage_snr_db))


def rayleigh_outage_probability(mean_snr_linear, outage_snr_db):
    """P(SNR < threshold) under Rayleigh fading: 1 - exp(-SNR_th / mean SNR).

    (|h|² ~ Exp(1), so SNR ~ Exp with mean ``mean_snr_linear``.) Useful to check
    simulated loss rates.
    """
    mean_snr_linear = require_nonnegative(mean_snr_linear, "mean_snr_linear")
    with np.errstate(divide="ignore"):
        p = -np.expm1(-db_to_linear(outage_snr_db) / mean_snr_linear)
    return out(p)
