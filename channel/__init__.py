"""edgefl physical layer: link budget, fading, rate, bandwidth access.

Pure numpy/scipy; SI units inside (W, Hz, s, bits, linear SNR). dB/dBm appear only
in names that say so. See docs/model.md for every equation and its source.
"""

from .access import ACCESS_SCHEMES, fdma_bandwidth_hz, payload_bits
from .aircomp import (
    aircomp_airtime_s,
    aircomp_mean_noise_std,
    aircomp_receive_snr,
    aircomp_scheduled,
    aircomp_tx_power_w,
)
from .fading import FADING_KINDS, fading_gain_exceeded, fading_power_gain
from .link import (
    N0_DBM_PER_HZ,
    Link,
    draw_shadowing_db,
    noise_power_w,
    snr_from_link,
)
from .mcs import CQI_EFFICIENCY, CQI_SNR_DB, RATE_MODES, check_mcs_table, mcs_spectral_efficiency
from .path_loss import free_space_db, log_distance_db, umi_street_canyon_db
from .rate import (
    is_outage,
    link_rate_bps,
    rayleigh_outage_probability,
    shannon_rate_bps,
    snr_for_rate,
    transmission_time_s,
)
from .units import db_to_linear, dbm_to_w, linear_to_db, w_to_dbm

__all__ = [
    "aircomp_airtime_s",
    "aircomp_mean_noise_std",
    "aircomp_receive_snr",
    "aircomp_scheduled",
    "aircomp_tx_power_w",
    "ACCESS_SCHEMES",
    "CQI_EFFICIENCY",
    "CQI_SNR_DB",
    "RATE_MODES",
    "check_mcs_table",
    "link_rate_bps",
    "mcs_spectral_efficiency",
    "FADING_KINDS",
    "N0_DBM_PER_HZ",
    "Link",
    "db_to_linear",
    "dbm_to_w",
    "draw_shadowing_db",
    "fading_gain_exceeded",
    "fading_power_gain",
    "fdma_bandwidth_hz",
    "is_outage",
    "linear_to_db",
    "noise_power_w",
    "log_distance_db",
    "free_space_db",
    "umi_street_canyon_db",
    "payload_bits",
    "rayleigh_outage_probability",
    "shannon_rate_bps",
    "snr_for_rate",
    "snr_from_link",
    "transmission_time_s",
    "w_to_dbm",
]
