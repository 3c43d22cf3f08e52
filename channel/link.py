"""Link budget: thermal noise, shadowing, mean SNR (path-loss models: channel/path_loss.py).

Units: W, Hz, linear SNR inside; dB/dBm only where the argument name says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from arraychecks import out, require_nonnegative

from .rate import shannon_rate_bps
from .units import db_to_linear, dbm_to_w

# Thermal noise power spectral density k·T at T = 290 K, in dBm/Hz (≈ -173.98).
N0_DBM_PER_HZ = -174.0


def noise_power_w(bandwidth_hz, noise_figure_db=0.0, n0_dbm_per_hz=N0_DBM_PER_HZ):
    """Receiver noise power in W: N = N0 · B · NF.

    N0 [W/Hz] = 10^((n0_dbm_per_hz - 30)/10), B [Hz], NF = 10^(noise_figure_db/10)
    (thermal noise k·T·B, raised by the receiver's noise figure).
    """
    bandwidth_hz = require_nonnegative(bandwidth_hz, "bandwidth_hz")
    n0_w_per_hz = dbm_to_w(n0_dbm_per_hz)
    return out(n0_w_per_hz * bandwidth_hz * np.asarray(db_to_linear(noise_figure_db)))


def draw_shadowing_db(rng: np.random.Generator, sigma_db: float, size=None):
    """Log-normal shadowing draw in dB: X ~ Normal(0, sigma_db²).

    Positive values are extra loss (added to the path loss). sigma_db = 8 dB is the
    usual macro-cell value (3GPP TR 36.814). sigma_db = 0 gives exactly 0.
    """
    if sigma_db < 0 or math.isnan(sigma_db):
        raise ValueError(f"sigma_db must be >= 0, got {sigma_db}")
    if sigma_db == 0:
        return 0.0 if size is None else np.zeros(size)
    return out(rng.normal(0.0, sigma_db, size))


def snr_from_link(
    tx_power_w,
    path_loss_db,
    bandwidth_hz,
    noise_figure_db=0.0,
    shadowing_db=0.0,
    n0_dbm_per_hz=N0_DBM_PER_HZ,
    interference_w_per_hz=0.0,
    noise_w=None,
    power_checked=False,
):
    """Mean received SNR (linear) from a link budget; with interference, the SINR.

    SNR = P_tx · 10^(-(PL + shadowing)/10) / (N0 · B · NF + I0 · B)
    P_tx [W], PL and shadowing [dB, positive = loss], B [Hz], I0 [W/Hz] the interference spread over the band
    (0: none; channel/cells.py). Gives inf when B = 0. ``noise_w``: N0 · B · NF as :func:`noise_power_w` gave it for
    these B, NF and N0, if the caller kept it (it does not change when devices move: edgefl.sim.physics.MeanSnr
    keeps it per bandwidth; benchmarks [8]); None: computed here. ``power_checked``: the caller has checked
    ``tx_power_w`` (>= 0, not NaN: links' powers, checked when built, Link), so it is not checked again
    (edgefl.sim.physics.MeanSnr at every move of a moving population, where the check was a tenth of a dispatched
    chain's mean SNR, benchmarks [8]).
    """
    if not power_checked:
        tx_power_w = require_nonnegative(tx_power_w, "tx_power_w")
    gain = np.asarray(db_to_linear(-(np.asarray(path_loss_db, dtype=np.float64) + shadowing_db)))
    if noise_w is None:
        noise_w = noise_power_w(bandwidth_hz, noise_figure_db, n0_dbm_per_hz)
    noise = np.asarray(noise_w)
    # (only then: a single cell's numbers stay as they were; count_nonzero, one call (NaN counts): 2 us of each plan, [8])
    if np.count_nonzero(interference_w_per_hz):
        noise = noise + np.asarray(interference_w_per_hz, dtype=np.float64) * np.asarray(bandwidth_hz)
    with np.errstate(divide="ignore", invalid="ignore"):
        snr = tx_power_w * gain / noise
    return out(snr)


def moved_fields(tx_power_w, path_loss_db) -> dict:
    """What moving a budget link sets, every other field kept: the transmit power [W] and path loss [dB] at the new
    position, and no interference (what was measured at the old one no longer holds). The one rule of a move: one
    link's floats (:meth:`Link.moved`), or a moving population's arrays (edgefl.sim.physics.MeanSnr.moved)."""
    return {"tx_power_w": tx_power_w, "path_loss_db": path_loss_db, "interference_w_per_hz": 0.0}


@dataclass(frozen=True)
class Link:
    """One client's mean (large-scale) uplink.

    Two modes; build with the class methods:

    - ``Link.from_snr_db(snr_db)``: a configured mean SNR. The SNR does not depend on
      the bandwidth the client is given (the usual "SNR grid" of FL papers).
    - ``Link.from_budget(tx_power_w, path_loss_db, ...)``: a physical link budget.
      Noise is N0·B, so the SNR depends on the bandwidth actually allocated: halving
      B doubles the SNR.

    Small-scale fading enters per transmission as ``fading_gain`` (unit-mean |h|²).
    """

    mode: Literal["snr", "budget"]
    snr_db: float | None = None
    tx_power_w: float | None = None
    path_loss_db: float | None = None
    noise_figure_db: float = 0.0
    shadowing_db: float = 0.0
    n0_dbm_per_hz: float = N0_DBM_PER_HZ
    interference_w_per_hz: float = 0.0  # budget: co-channel interference spread over the band (W/Hz; several cells)

    def __post_init__(self) -> None:
        if self.mode == "snr":
            if self.snr_db is None or math.isnan(self.snr_db):
                raise ValueError("Link(mode='snr') needs snr_db")
            if self.tx_power_w is not None or self.path_loss_db is not None:
                raise ValueError("Link(mode='snr') takes no tx_power_w / path_loss_db")
        elif self.mode == "budget":
            if self.tx_power_w is None or self.path_loss_db is None:
                raise ValueError("Link(mode='budget') needs tx_power_w and path_loss_db")
            if not self.tx_power_w >= 0:
                raise ValueError(f"tx_power_w must be >= 0, got {self.tx_power_w}")
            if self.snr_db is not None:
                raise ValueError("Link(mode='budget') takes no snr_db")
        else:
            raise ValueError(f"unknown Link mode {self.mode!r}; use 'snr' or 'budget'")

    @classmethod
    def from_snr_db(cls, snr_db: float) -> "Link":
        """Link with a configured mean SNR in dB, independent of bandwidth."""
        return cls(mode="snr", snr_db=float(snr_db))

    @classmethod
    def from_budget(
        cls,
        tx_power_w: float,
        path_loss_db: float,
        noise_figure_db: float = 0.0,
        shadowing_db: float = 0.0,
        n0_dbm_per_hz: float = N0_DBM_PER_HZ,
        interference_w_per_hz: float = 0.0,
    ) -> "Link":
        """Link from transmit power [W], path loss [dB], noise figure [dB], shadowing [dB], interference [W/Hz]."""
        return cls(
            mode="budget",
            tx_power_w=float(tx_power_w),
            path_loss_db=float(path_loss_db),
            noise_figure_db=float(noise_figure_db),
            shadowing_db=float(shadowing_db),
            n0_dbm_per_hz=float(n0_dbm_per_hz),
            interference_w_per_hz=float(interference_w_per_hz),
        )

    def with_shadowing(self, shadowing_db: float) -> "Link":
        """Same link with another shadowing value [dB] (budget mode only)."""
        if self.mode != "budget":
            raise ValueError("shadowing applies to a link budget; Link.from_snr_db has none")
        return replace(self, shadowing_db=float(shadowing_db))

    def moved(self, tx_power_w: float, path_loss_db: float) -> "Link":
        """This budget link with another transmit power [W] and path loss [dB] and no interference: what
        ``Link.from_budget(tx_power_w, path_loss_db, noise_figure_db, shadowing_db, n0_dbm_per_hz)`` of its fields
        gives, without checking the fields again (they were checked when it was built; a moving population's links
        are rebuilt at every server update: benchmarks [8])."""
        if self.mode != "budget" or not tx_power_w >= 0:
            raise ValueError(f"moved() needs a budget link and tx_power_w >= 0 (got {self.mode!r}, {tx_power_w})")
        link = object.__new__(Link)
        fields = link.__dict__  # (a frozen dataclass: its fields set as its own __init__ sets them)
        fields.update(self.__dict__)
        fields.update(moved_fields(float(tx_power_w), float(path_loss_db)))
        return link

    def snr_linear(self, bandwidth_hz, fading_gain=1.0):
        """Instantaneous linear SNR over ``bandwidth_hz`` [Hz] with power gain |h|² = fading_gain."""
        fading_gain = require_nonnegative(fading_gain, "fading_gain")
        bandwidth_hz = require_nonnegative(bandwidth_hz, "bandwidth_hz")
        if self.mode == "snr":
            mean = db_to_linear(self.snr_db) * np.ones_like(bandwidth_hz)
        else:
            mean = np.asarray(
                snr_from_link(
                    self.tx_power_w,
                    self.path_loss_db,
                    bandwidth_hz,
                    self.noise_figure_db,
                    self.shadowing_db,
                    self.n0_dbm_per_hz,
                    self.interference_w_per_hz,
                )
            )
        with np.errstate(invalid="ignore"):
            snr = mean * fading_gain
        # inf SNR (B = 0) times a zero fading gain: no signal, call it 0.
        return out(np.where(np.isnan(snr), 0.0, snr))

    def rate_bps(self, bandwidth_hz, fading_gain=1.0, efficiency=1.0, snr_gap_db=0.0):
        """Achievable rate [bit/s] over ``bandwidth_hz``: see :func:`channel.rate.shannon_rate_bps`."""
        return shannon_rate_bps(bandwidth_hz, self.snr_linear(bandwidth_hz, fading_gain), efficiency, snr_gap_db)
