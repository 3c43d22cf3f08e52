"""Local computation: CPU cycles, time and energy.

Units: cycles, Hz (cycles/s), s, J, W. Energy model: Yang et al., "Energy efficient
federated learning over wireless communication networks", IEEE TWC 2021 (also Tran
et al., "Federated learning over wireless networks: optimization model design and
analysis" (FEDL), INFOCOM 2019): dynamic CMOS energy κ·C·f².
"""

from __future__ import annotations

from arraychecks import out, require_nonnegative, require_positive

DEFAULT_KAPPA = 1e-28  # effective switched capacitance [J/(cycle·Hz²)], Yang et al. 2021


def cycles_per_step(batch_size, *, flops_per_sample=None, cycles_per_flop=1.0, cycles_per_sample=None):
    """CPU cycles of one local step on a minibatch of ``batch_size`` samples.

    C = cycles_per_sample · B                       if ``cycles_per_sample`` is given,
    C = flops_per_sample · cycles_per_flop · B      otherwise.
    ``flops_per_sample`` is the measured forward + backward FLOPs per sample (the
    caller measures it, e.g. with torch.utils.flop_counter).
    """
    batch_size = require_nonnegative(batch_size, "batch_size")
    if cycles_per_sample is not None:
        return out(require_nonnegative(cycles_per_sample, "cycles_per_sample") * batch_size)
    if flops_per_sample is None:
        raise ValueError("cycles_per_step needs cycles_per_sample or flops_per_sample")
    flops = require_nonnegative(flops_per_sample, "flops_per_sample")
    cpf = require_nonnegative(cycles_per_flop, "cycles_per_flop")
    return out(flops * cpf * batch_size)


def compute_time_s(cycles, cpu_hz):
    """Compute time in s: t = C / f  (C cycles, f [Hz] CPU frequency)."""
    cycles = require_nonnegative(cycles, "cycles")
    cpu_hz = require_positive(cpu_hz, "cpu_hz")
    return out(cycles / cpu_hz)


def compute_energy_j(cycles, cpu_hz, kappa=DEFAULT_KAPPA, static_power_w=0.0):
    """Compute energy in J: E = κ · C · f² + P_static · C / f.

    Dynamic CMOS energy κ·C·f² (Yang et al. 2021; Tran et al. FEDL), κ [J/(cycle·Hz²)],
    C cycles, f [Hz]; plus static/leakage power P_static [W] over the compute time C/f.
    """
    cycles = require_nonnegative(cycles, "cycles")
    cpu_hz = require_positive(cpu_hz, "cpu_hz")
    kappa = require_nonnegative(kappa, "kappa")
    static_power_w = require_nonnegative(static_power_w, "static_power_w")
    return out(compute_energy_unchecked_j(cycles, cpu_hz, kappa, static_power_w))


def compute_energy_unchecked_j(cycles, cpu_hz, kappa, static_power_w):
    """:func:`compute_energy_j`'s formula without its checks: arrays, or plain floats that the caller checked (a
    booking of a few log rows, edgefl.sim.booking: the checks' array conversions cost more than the formula). f² as
    f · f: an array's ``**2`` is numpy's square, f · f, but a float's is C's pow(f, 2), which differs from it in the
    last bit for about 1 frequency in 1,000, so that a row priced in floats would not be the arrays' number."""
    return kappa * cycles * (cpu_hz * cpu_hz) + static_power_w * cycles / cpu_hz
