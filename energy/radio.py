"""Radio and idle energy: power × time. Units: W, s, J."""

from __future__ import annotations

import numpy as np

from arraychecks import out, require_nonnegative


def _power_times_time(power_w, time_s):
    # 0 W for an unbounded time is 0 J, not NaN.
    if isinstance(power_w, float) and isinstance(time_s, float):  # (plain floats: the *_unchecked_j of one log row)
        return 0.0 if power_w == 0 else power_w * time_s
    with np.errstate(invalid="ignore"):
        return out(np.where(power_w == 0, 0.0, power_w * time_s))


def uplink_energy_j(time_s, tx_power_w, circuit_power_w=0.0, pa_efficiency=1.0):
    """Uplink energy in J: E = (P_tx / η_PA + P_circuit) · t, the power a device draws while it transmits:
    its radiated power P_tx through a power amplifier of efficiency η_PA in (0, 1], plus the RF circuit's
    power (W; t in s). η_PA = 1 and P_circuit = 0 give the radiated energy P_tx · t of Yang et al. 2021.
    Measured on LTE phones: about 1.29 W + 0.44 W per Mbit/s of uplink throughput (Huang et al., MobiSys
    2012); a 23 dBm amplifier (0.2 W radiated) draws roughly 0.5-1 W."""
    time_s = require_nonnegative(time_s, "time_s")
    tx_power_w = require_nonnegative(tx_power_w, "tx_power_w")
    circuit_power_w = require_nonnegative(circuit_power_w, "circuit_power_w")
    pa_efficiency = np.asarray(pa_efficiency, dtype=np.float64)
    if not ((pa_efficiency > 0) & (pa_efficiency <= 1)).all():
        raise ValueError(f"pa_efficiency must be in (0, 1], got {pa_efficiency}")
    return uplink_energy_unchecked_j(time_s, tx_power_w, circuit_power_w, pa_efficiency)


def uplink_energy_unchecked_j(time_s, tx_power_w, circuit_power_w, pa_efficiency):
    """:func:`uplink_energy_j`'s formula without its checks: arrays, or plain floats that the caller checked (a
    booking of a few log rows, edgefl.sim.booking); so are the other ``*_unchecked_j``."""
    return _power_times_time(tx_power_w / pa_efficiency + circuit_power_w, time_s)


def downlink_energy_j(time_s, rx_power_w):
    """Downlink (receive) energy in J: E = P_rx · t  (P_rx in W, t in s)."""
    time_s = require_nonnegative(time_s, "time_s")
    rx_power_w = require_nonnegative(rx_power_w, "rx_power_w")
    return downlink_energy_unchecked_j(time_s, rx_power_w)


def idle_energy_j(time_s, idle_power_w):
    """Idle energy in J: E = P_idle · t  (a participant waiting, e.g. queued for the channel)."""
    time_s = require_nonnegative(time_s, "time_s")
    idle_power_w = require_nonnegative(idle_power_w, "idle_power_w")
    return idle_energy_unchecked_j(time_s, idle_power_w)


def promotion_energy_j(time_s, promotion_power_w):
    """Radio promotion energy in J: E = P_promo · t_promo. Before a transfer from an idle radio the device
    connects (LTE: RRC_IDLE -> RRC_CONNECTED, random access and connection set-up): t ≈ 0.26 s at
    ≈ 1.2 W measured by Huang et al., MobiSys 2012 (``network.access_latency_s``,
    ``devices.promotion_power_w``)."""
    time_s = require_nonnegative(time_s, "time_s")
    promotion_power_w = require_nonnegative(promotion_power_w, "promotion_power_w")
    return promotion_energy_unchecked_j(time_s, promotion_power_w)


def tail_energy_j(time_s, tail_power_w):
    """Radio tail energy in J: E = P_tail · t. After a transmission an LTE/5G radio stays in its
    connected high-power state until an inactivity timer expires (LTE: t ≈ 11.6 s at ≈ 1.06 W,
    Huang et al., "A close examination of performance and power characteristics of 4G LTE
    networks", MobiSys 2012)."""
    time_s = require_nonnegative(time_s, "time_s")
    tail_power_w = require_nonnegative(tail_power_w, "tail_power_w")
    return tail_energy_unchecked_j(time_s, tail_power_w)


def downlink_energy_unchecked_j(time_s, rx_power_w):
    return _power_times_time(rx_power_w, time_s)


def idle_energy_unchecked_j(time_s, idle_power_w):
    return _power_times_time(idle_power_w, time_s)


def promotion_energy_unchecked_j(time_s, promotion_power_w):
    return _power_times_time(promotion_power_w, time_s)


def tail_energy_unchecked_j(time_s, tail_power_w):
    return _power_times_time(tail_power_w, time_s)
