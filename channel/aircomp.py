"""Over-the-air computation (AirComp): broadband analog aggregation with truncated channel inversion.

Zhu, Wang & Huang, "Broadband analog aggregation for low-latency federated edge learning", IEEE TWC 2020
(BAA). The K scheduled devices send their update vectors at once, one value per analog symbol, over
the whole band; the channel adds them. Device k pre-equalises its channel: it transmits at
p_k = rho / g_k, where g_k is its SNR per W of transmit power (path loss, shadowing, this round's
fading, over the noise of the band), so that every device is received at the same SNR rho. rho is set
by the weakest scheduled device at full power, rho = min_k P_max,k · g_k; truncation leaves out every
device whose SNR at full power, P_max,k · g_k, is below a threshold (cell-interior scheduling).
Symbols carry unit average power after each device scales its vector by a common s (the largest RMS
of the vectors sent), so the server's estimate of the sum has noise of standard deviation s / sqrt(rho)
per value, and of the mean over K devices s / (K sqrt(rho)). One real value per symbol.
SI units: W, Hz, s; SNRs linear unless the name says dB.
"""

from __future__ import annotations

import numpy as np

from .units import db_to_linear


def aircomp_scheduled(full_power_snr: np.ndarray, threshold_db: float) -> np.ndarray:
    """Who is scheduled (bool [N]): SNR at full power at or above the threshold; if nobody is, the strongest
    device alone (a round is never empty for lack of channel)."""
    full_power_snr = np.asarray(full_power_snr, dtype=np.float64)
    scheduled = full_power_snr >= db_to_linear(threshold_db)
    if not scheduled.any() and len(full_power_snr):
        scheduled[int(np.argmax(full_power_snr))] = True
    return scheduled


def aircomp_receive_snr(full_power_snr: np.ndarray) -> float:
    """The common receive SNR rho of the devices that send: the weakest one's SNR at full power."""
    return float(np.min(full_power_snr))


def aircomp_tx_power_w(receive_snr: float, snr_per_w: np.ndarray) -> np.ndarray:
    """Each sender's transmit power (W) for truncated channel inversion: rho / g_k (at most its P_max,
    since rho is the weakest sender's SNR at full power)."""
    return receive_snr / np.asarray(snr_per_w, dtype=np.float64)


def aircomp_airtime_s(values: float, bandwidth_hz: float, symbols_per_hz: float) -> float:
    """Time (s) to send ``values`` analog values over the band, whatever the number of devices."""
    return values / (bandwidth_hz * symbols_per_hz)


def aircomp_mean_noise_std(rms: float, senders: int, receive_snr: float) -> float:
    """Standard deviation of the server's estimate of the mean of ``senders`` vectors, per value: s / (K sqrt(rho)),
    with s the largest RMS of the vectors sent (their common scaling to unit symbol power)."""
    return rms / (senders * np.sqrt(receive_snr))
