"""Bandwidth access and payload size."""

from __future__ import annotations

import numpy as np

from arraychecks import out, require_nonnegative

ACCESS_SCHEMES = ("dedicated", "fdma", "tdma")


def fdma_bandwidth_hz(total_bandwidth_hz, n_active):
    """Bandwidth in Hz of each of ``n_active`` simultaneous uploaders: B / n (equal FDMA split).

    Processor sharing: the engine recomputes it whenever an upload starts or ends.
    """
    total_bandwidth_hz = require_nonnegative(total_bandwidth_hz, "total_bandwidth_hz")
    n_active = np.asarray(n_active)
    if np.any(~(n_active >= 1)):
        raise ValueError(f"n_active must be >= 1, got {n_active}")
    return out(total_bandwidth_hz / n_active)


def payload_bits(num_params, bits_per_param=32, header_bits=0):
    """Bits of one message: parameters × bits per parameter + header bits."""
    num_params = require_nonnegative(num_params, "num_params")
    bits_per_param = require_nonnegative(bits_per_param, "bits_per_param")
    header_bits = require_nonnegative(header_bits, "header_bits")
    return out(num_params * bits_per_param + header_bits)
