"""What a server can estimate of a device's airtimes from the mean channel it observes (no fading).
Used by the controllers that plan against a deadline (deadline_fit, min_energy)."""

from __future__ import annotations

import numpy as np

from edgefl.control.base import ControlContext, Observation


def uplink_rate_bps(ctx: ControlContext, obs: Observation, power_w, band_share) -> np.ndarray:
    """Mean uplink rate (bit/s) of every device at ``power_w`` over ``band_share`` of the uplink band:
    SNR = (SNR per W) · p, over the share when the noise scales with the band (a link budget)."""
    net = ctx.network
    share = np.asarray(band_share, dtype=np.float64)
    snr = obs.uplink_snr_per_w * power_w * np.where(obs.noise_scales_with_band, 1.0 / share, 1.0)
    return net.rate_bps(net.bandwidth_hz * share, snr, "up")


def equal_share(ctx: ControlContext) -> float:
    """The share of the uplink band a device gets when the m selected ones share it equally (FDMA; for
    TDMA the same on average), the whole band when each device has its own."""
    return 1.0 if ctx.network.access == "dedicated" else 1.0 / ctx.clients_per_round


def download_s(ctx: ControlContext, obs: Observation, download_bits: np.ndarray, receivers: int) -> np.ndarray:
    """Mean download time (s) of every device for ``download_bits`` [N], with ``receivers`` devices
    downloading in the phase: broadcast, each at its own rate; unicast, 1/receivers of the band;
    multicast, at the weakest receiver's rate (approximated by the weakest device of all)."""
    rate = obs.downlink_rate_bps
    if ctx.network.downlink == "unicast":
        rate = rate / max(receivers, 1)
    elif ctx.network.downlink == "multicast":
        rate = np.full_like(rate, rate.min())
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(download_bits > 0, download_bits / rate, 0.0)


def promotion_s(ctx: ControlContext, obs: Observation, messages: np.ndarray) -> np.ndarray:
    """The access latency (s) each device is expected to wait in a phase of ``messages`` [N] messages
    (docs/model.md section 8): a promotion, ``network.access_latency_s``, before a message asked for while
    its radio is idle. The first message needs one unless the device's radio is still in its tail now
    (:attr:`Observation.radio_connected_until_s`); each later one unless the tail lasts at least the
    deadline (the gap between two messages of a phase is shorter than the phase). Without a deadline
    every later message is counted (an upper bound)."""
    latency_s = ctx.network.access_latency_s
    if latency_s == 0:
        return np.zeros(ctx.num_clients)
    connected = (
        np.zeros(ctx.num_clients, dtype=bool)
        if obs.radio_connected_until_s is None
        else obs.radio_connected_until_s > obs.now_s
    )
    deadline_s = ctx.network.deadline_s
    tail_covers_gaps = np.zeros(ctx.num_clients, dtype=bool) if deadline_s is None else ctx.devices.tail_s >= deadline_s
    first = np.where(connected, 0.0, 1.0)
    later = np.where(tail_covers_gaps, 0.0, np.maximum(messages - 1.0, 0.0))
    return np.where(messages > 0, first + later, 0.0) * latency_s
