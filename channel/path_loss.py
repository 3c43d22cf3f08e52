"""Path-loss models: mean loss (dB) between a device and the base station at a ground distance (m).

Each model is a function ``model(distance_m, network) -> loss_db`` that reads the ``[network]``
keys it needs; :data:`MODELS` names the built-ins, and :func:`get` also resolves models of one's
own: ``network.path_loss = "package.module:function"`` (any function on the Python path with that
signature) or a name an installed package registers under the entry-point group
``edgefl.path_loss``. The formulas below are plain functions of numbers, with their sources.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from arraychecks import out, require_positive
from plugin_registry import Registry

SPEED_OF_LIGHT_MPS = 299_792_458.0


def log_distance_db(distance_m, intercept_db=128.1, slope_db=37.6):
    """Macro-cell path loss in dB: PL = intercept + slope · log10(d / 1 km).

    Source: 3GPP TR 36.814 (Table A.2.1.1.2-3), PL = 128.1 + 37.6·log10(d[km]).
    ``distance_m`` in metres, > 0.
    """
    distance_m = require_positive(distance_m, "distance_m")
    return out(intercept_db + slope_db * np.log10(distance_m / 1000.0))


def free_space_db(distance_m, carrier_ghz):
    """Friis free-space loss in dB: FSPL = 20·log10(4π d f / c), d in m, f in Hz (isotropic antennas)."""
    distance_m = require_positive(distance_m, "distance_m")
    carrier_hz = float(require_positive(carrier_ghz, "carrier_ghz")) * 1e9
    return out(20.0 * np.log10(4.0 * np.pi * distance_m * carrier_hz / SPEED_OF_LIGHT_MPS))


def umi_street_canyon_db(distance_m, carrier_ghz, bs_height_m=10.0, ue_height_m=1.5, line_of_sight=False):
    """3GPP TR 38.901 (v17, Table 7.4.1-1) UMi - Street Canyon path loss in dB, fc in GHz, distances in m.

    d3D = sqrt(d2D² + (hBS - hUT)²); breakpoint d'BP = 4 h'BS h'UT fc / c with h' = h - 1 m (fc in Hz).
    LOS:  PL1 = 32.4 + 21 log10(d3D) + 20 log10(fc) up to d'BP,
          PL2 = 32.4 + 40 log10(d3D) + 20 log10(fc) - 9.5 log10(d'BP² + (hBS - hUT)²) beyond.
    NLOS: max(PL_LOS, 35.3 log10(d3D) + 22.4 + 21.3 log10(fc) - 0.3 (hUT - 1.5)).
    The table's shadowing (LOS 4 dB, NLOS 7.82 dB) is network.shadowing_std_db, set separately.
    Valid for 10 m <= d2D <= 5 km and 1.5 m <= hUT <= 22.5 m (the scenario checks the heights).
    """
    distance_m = require_positive(distance_m, "distance_m")
    fc = float(require_positive(carrier_ghz, "carrier_ghz"))
    d3d, los = _two_slope_los_db(distance_m, fc, bs_height_m, ue_height_m, 32.4, 21.0, 9.5)
    if line_of_sight:
        return out(los)
    nlos = 35.3 * np.log10(d3d) + 22.4 + 21.3 * np.log10(fc) - 0.3 * (ue_height_m - 1.5)
    return out(np.maximum(los, nlos))


def _two_slope_los_db(distance_m, fc, bs_height_m, ue_height_m, intercept_db, near_slope, far_correction):
    """The UMi / UMa LOS path loss of TR 38.901 Table 7.4.1-1 (h_E = 1 m) and d3D: with d'BP = 4 h'BS h'UT f_c[Hz]/c,
    PL1 = A + s log10 d3D + 20 log10 f_c up to d'BP, PL2 = A + 40 log10 d3D + 20 log10 f_c − k log10(d'BP² + Δh²)
    beyond; (A, s, k) = (32.4, 21, 9.5) for UMi, (28, 22, 9) for UMa."""
    d3d = np.sqrt(distance_m**2 + (bs_height_m - ue_height_m) ** 2)
    breakpoint_m = 4.0 * (bs_height_m - 1.0) * (ue_height_m - 1.0) * fc * 1e9 / SPEED_OF_LIGHT_MPS
    pl1 = intercept_db + near_slope * np.log10(d3d) + 20.0 * np.log10(fc)
    pl2 = (
        intercept_db
        + 40.0 * np.log10(d3d)
        + 20.0 * np.log10(fc)
        - far_correction * np.log10(breakpoint_m**2 + (bs_height_m - ue_height_m) ** 2)
    )
    return d3d, np.where(distance_m <= breakpoint_m, pl1, pl2)


RMA_BUILDING_HEIGHT_M = 5.0  # TR 38.901 Table 7.4.1-1 RMa: average building height h (default 5 m) ...
RMA_STREET_WIDTH_M = 20.0  # ... and street width W (default 20 m)


def uma_db(distance_m, carrier_ghz, bs_height_m=25.0, ue_height_m=1.5, line_of_sight=False):
    """TR 38.901 Table 7.4.1-1 UMa path loss (dB), f_c in GHz, d in m; h_E = 1 m (h_UT < 13 m: C(d, h_UT) = 0).

    d'BP = 4 h'BS h'UT f_c[Hz] / c with h' = h − h_E. LOS: PL1 = 28 + 22 log10 d3D + 20 log10 f_c up to d'BP,
    PL2 = 28 + 40 log10 d3D + 20 log10 f_c − 9 log10(d'BP² + (h_BS − h_UT)²) beyond (σ 4 dB). NLOS:
    max(PL_LOS, 13.54 + 39.08 log10 d3D + 20 log10 f_c − 0.6 (h_UT − 1.5)) (σ 6 dB)."""
    d = require_positive(distance_m, "distance_m")
    fc = float(require_positive(carrier_ghz, "carrier_ghz"))
    d3d, los = _two_slope_los_db(d, fc, bs_height_m, ue_height_m, 28.0, 22.0, 9.0)
    if line_of_sight:
        return out(los)
    nlos = 13.54 + 39.08 * np.log10(d3d) + 20.0 * np.log10(fc) - 0.6 * (ue_height_m - 1.5)
    return out(np.maximum(los, nlos))


def rma_breakpoint_m(carrier_ghz, bs_height_m=35.0, ue_height_m=1.5) -> float:
    """RMa's breakpoint d_BP = 2π h_BS h_UT f_c[Hz] / c (m; Table 7.4.1-1, note 5: heights not reduced)."""
    return float(2.0 * np.pi * bs_height_m * ue_height_m * carrier_ghz * 1e9 / SPEED_OF_LIGHT_MPS)


def rma_db(distance_m, carrier_ghz, bs_height_m=35.0, ue_height_m=1.5, line_of_sight=False):
    """TR 38.901 Table 7.4.1-1 RMa path loss (dB), f_c in GHz, d in m, h = 5 m, W = 20 m.

    LOS: PL1(d) = 20 log10(40π d3D f_c / 3) + min(0.03 h^1.72, 10) log10 d3D − min(0.044 h^1.72, 14.77)
    + 0.002 log10(h) d3D up to d_BP, PL2 = PL1(d_BP) + 40 log10(d3D / d_BP) beyond. NLOS: max(PL_LOS, PL'),
    PL' = 161.04 − 7.1 log10 W + 7.5 log10 h − (24.37 − 3.7 (h/h_BS)²) log10 h_BS
    + (43.42 − 3.1 log10 h_BS)(log10 d3D − 3) + 20 log10 f_c − (3.2 (log10(11.75 h_UT))² − 4.97)."""
    d = require_positive(distance_m, "distance_m")
    fc = float(require_positive(carrier_ghz, "carrier_ghz"))
    h, w = RMA_BUILDING_HEIGHT_M, RMA_STREET_WIDTH_M
    d3d = np.sqrt(d**2 + (bs_height_m - ue_height_m) ** 2)
    d_bp = rma_breakpoint_m(fc, bs_height_m, ue_height_m)

    def pl1(x):
        return (
            20.0 * np.log10(40.0 * np.pi * x * fc / 3.0)
            + min(0.03 * h**1.72, 10.0) * np.log10(x)
            - min(0.044 * h**1.72, 14.77)
            + 0.002 * np.log10(h) * x
        )

    los = np.where(d <= d_bp, pl1(d3d), pl1(d_bp) + 40.0 * np.log10(d3d / d_bp))
    if line_of_sight:
        return out(los)
    nlos = (
        161.04
        - 7.1 * np.log10(w)
        + 7.5 * np.log10(h)
        - (24.37 - 3.7 * (h / bs_height_m) ** 2) * np.log10(bs_height_m)
        + (43.42 - 3.1 * np.log10(bs_height_m)) * (np.log10(d3d) - 3.0)
        + 20.0 * np.log10(fc)
        - (3.2 * np.log10(11.75 * ue_height_m) ** 2 - 4.97)
    )
    return out(np.maximum(los, nlos))


# -- the models a scenario names: model(distance_m, network) -> dB -------------------------------
def log_distance(distance_m, network):
    """network.path_loss_intercept_db + network.path_loss_slope_db · log10(d / 1 km)."""
    return log_distance_db(distance_m, network.path_loss_intercept_db, network.path_loss_slope_db)


def free_space(distance_m, network):
    """Friis free space at network.carrier_ghz."""
    return free_space_db(distance_m, network.carrier_ghz)


def umi_street_canyon(distance_m, network):
    """3GPP UMi - Street Canyon at network.carrier_ghz, bs_height_m, ue_height_m, line_of_sight."""
    return umi_street_canyon_db(
        distance_m, network.carrier_ghz, network.bs_height_m, network.ue_height_m, network.line_of_sight is True
    )


def uma(distance_m, network):
    """3GPP UMa at network.carrier_ghz, bs_height_m (38.901: 25 m), ue_height_m, line_of_sight."""
    return uma_db(
        distance_m, network.carrier_ghz, network.bs_height_m, network.ue_height_m, network.line_of_sight is True
    )


def rma(distance_m, network):
    """3GPP RMa at network.carrier_ghz, bs_height_m (38.901: 35 m), ue_height_m, line_of_sight."""
    return rma_db(
        distance_m, network.carrier_ghz, network.bs_height_m, network.ue_height_m, network.line_of_sight is True
    )


MODELS: dict[str, Callable] = {
    "log_distance": log_distance,
    "free_space": free_space,
    "umi_street_canyon": umi_street_canyon,
    "uma": uma,
    "rma": rma,
}
DEFAULT_MODEL = "log_distance"
PATH_LOSS_MODELS = Registry.of("network.path_loss", MODELS, callable)
ENTRY_POINT_GROUP = PATH_LOSS_MODELS.group  # installed plug-ins: name = "package.module:function"


def names() -> list[str]:
    """The built-in models and the installed plug-ins."""
    return PATH_LOSS_MODELS.names()


def get(name: str) -> Callable:
    """The model called ``name``: a built-in, an installed plug-in or ``"package.module:function"``.
    UnknownPlugin (a ValueError) saying what is wrong otherwise."""
    return PATH_LOSS_MODELS.get(name)
