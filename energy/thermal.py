"""A device's temperature: a lumped RC thermal model (one node).

    C_th · dT/dt = P − (T − T_ambient) / R_th

T [°C], P [W] the heat the device dissipates (its computing power), R_th [K/W] the thermal
resistance to the ambient, C_th [J/K] the heat capacity, τ = R_th·C_th [s]. Under a constant P the
temperature relaxes exponentially towards the steady state T_ambient + P·R_th. The first-order lumped
model of a chip and its package (e.g. Skadron et al., "Temperature-aware microarchitecture", ISCA 2003,
the lumped RC of HotSpot; phones: a single node with τ of tens of seconds to minutes).
"""

from __future__ import annotations

import numpy as np

from arraychecks import out, require_nonnegative, require_positive


def compute_power_w(cpu_hz, kappa, static_power_w=0.0):
    """Power of a CPU computing at f [Hz]: P = κ·f³ + P_static [W] (the energy κ·C·f² + P_static·C/f of
    C cycles over their time C/f; Yang et al. 2021)."""
    cpu_hz = require_positive(cpu_hz, "cpu_hz")
    return out(require_nonnegative(kappa, "kappa") * cpu_hz**3 + require_nonnegative(static_power_w, "static_power_w"))


def temperature_c(elapsed_s, start_c, ambient_c, power_w, resistance_k_per_w, capacitance_j_per_k):
    """T(t) [°C] after ``elapsed_s`` under a constant power P from T(0) = ``start_c``:
    T(t) = T_ss + (T(0) − T_ss)·exp(−t/τ), T_ss = T_ambient + P·R_th, τ = R_th·C_th."""
    tau_s = require_positive(resistance_k_per_w, "resistance_k_per_w") * require_positive(
        capacitance_j_per_k, "capacitance_j_per_k"
    )
    steady_c = np.asarray(ambient_c) + require_nonnegative(power_w, "power_w") * resistance_k_per_w
    return out(
        steady_c + (np.asarray(start_c) - steady_c) * np.exp(-require_nonnegative(elapsed_s, "elapsed_s") / tau_s)
    )


def time_to_temperature_s(target_c, start_c, ambient_c, power_w, resistance_k_per_w, capacitance_j_per_k):
    """The time [s] until T reaches ``target_c`` from ``start_c`` under a constant power P (inf if it never
    does: the steady state T_ss = T_ambient + P·R_th is not beyond the target): t = τ·ln((T(0) − T_ss) /
    (T_target − T_ss)). From T(0) = T_ambient up to a threshold: −R·C·ln(1 − (T_target − T_ambient)/(P·R))."""
    tau_s = require_positive(resistance_k_per_w, "resistance_k_per_w") * require_positive(
        capacitance_j_per_k, "capacitance_j_per_k"
    )
    steady_c = np.asarray(ambient_c, dtype=np.float64) + require_nonnegative(power_w, "power_w") * resistance_k_per_w
    start_c, target_c = np.asarray(start_c, dtype=np.float64), np.asarray(target_c, dtype=np.float64)
    gap, left = start_c - steady_c, target_c - steady_c  # T approaches T_ss: reached iff target between them
    reached = (gap * left > 0) & (np.abs(left) < np.abs(gap))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(reached, tau_s * np.log(np.where(reached, gap / left, 1.0)), np.inf)
    return out(np.where(start_c == target_c, 0.0, t))
