"""The per-round minimum-energy problem of Yang et al., "Energy efficient federated learning over
wireless communication networks", IEEE TWC 2021 (problem (13)), for one phase of n devices:

    minimise   Σ_i  κ_i C_i f_i² + P_static,i C_i / f_i + (p_i + P_circuit,i) · S_i / r_i        (J)
    subject to C_i / f_i + S_i / r_i <= T_i,    r_i = rate(b_i B, SNR_i(p_i, b_i))               (s, bit/s)
               f_i in [f_min,i, f_max,i],  p_i in [p_min,i, p_max,i],  b_i >= 0,  Σ_i b_i <= 1

SNR_i(p, b) = g_i p / b for a link budget (noise N0·b·B; g_i: SNR per W over the whole band B) and
g_i p for a configured SNR; ``rate`` is the scenario's rate model (Shannon with efficiency, gap and
cap, or an MCS table: channel.rate.link_rate_bps), so the solution is what the engine will charge.

How it is solved (what is the paper's and what is ours):

- **Frequency** (the paper's closed form, Yang et al. Lemma 2 / eq. (21)): with a compute time t_c the
  least energy is at the least frequency that meets it, f = C/t_c (energy grows with f).
- **Power** (the paper's, generalised): for a band share and an upload time t_u, the least-energy
  power is max(p_req, p_ee) within the bounds, p_req the least power giving the rate S/t_u
  (channel.rate.snr_for_rate, the inverse of the rate model) and p_ee the power of least energy per
  bit (p_ee → p_min without circuit power: transmitting slower is cheaper). With an MCS table the
  candidates are the powers at the table's thresholds instead (ours: the paper has Shannon only).
- **Split of T_i between compute and upload** (ours): Shannon: with t_u = T - t_c the objective is
  convex on each side of the radio tail's kink, so a golden-section search on each side; MCS: each
  candidate power fixes the airtime and the best compute time in what is left is in closed form
  (the stationary points of κC³/t² + P t, the kink or an end), so that case is exact.
- **Band** (ours; the paper alternates a bisection on the time with a closed-form bandwidth for
  Shannon): first each device's least share meeting its time at f_max, p_max (bisection); only the
  slack above those is gridded, so tight budgets are not lost to the grid. Up to DP_MAX_DEVICES
  devices: the slack is cut into K units (K = 200, or 20 per device), each device's least energy is
  tabulated for every number of units and an exact dynamic programme picks the units (any shape of
  energy curve, MCS steps included). Beyond: a log grid of slack per device, the Lagrangian of
  Σ b_i <= 1 (bisection on the multiplier, each device minimising E_i(b) + ν b on its grid), a second
  pass on a finer grid around each pick, the leftover given greedily, then the shares scaled up to
  use the whole band where that does not cost more. A device that cannot meet its time even at
  f_max, p_max with the whole band (MCS: with its best share) is marked infeasible, runs at f_max and
  p_max and gets an equal share 1/n; the others share the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from channel import CQI_EFFICIENCY, CQI_SNR_DB, link_rate_bps, snr_for_rate
from energy import compute_energy_j, tail_energy_j, uplink_energy_j

GOLDEN = 30  # golden-section iterations for p_ee
GOLDEN_SPLIT = 40  # ... and for the compute/upload split (interval shrinks by 0.618^40 ~ 4e-9)
DP_MAX_DEVICES = 16  # up to this many devices, the band by the exact dynamic programme; beyond, the Lagrangian
LAGRANGE_POINTS = 96  # shares per device tabulated for the Lagrangian, log-spaced ...
LAGRANGE_SPAN = 100.0  # ... from left / (LAGRANGE_SPAN n) to left
LAGRANGE_REFINE = 33  # then this many more around each device's pick (one grid step either side)
PHI = (np.sqrt(5.0) - 1.0) / 2.0


@dataclass(frozen=True)
class RateModel:
    """How bits/s follow from band and SNR (the fields of edgefl.deployment.NetworkParams)."""

    bandwidth_hz: float
    rate: str = "shannon"  # shannon | mcs
    efficiency: float = 1.0
    snr_gap_db: float = 0.0
    max_spectral_efficiency: float | None = None
    mcs_snr_db: tuple[float, ...] = CQI_SNR_DB
    mcs_efficiency: tuple[float, ...] = CQI_EFFICIENCY
    modulation_cap_bits_per_hz: float | None = None  # the uplink's (network.uplink_max_bits_per_hz)
    overhead_fraction: float = 0.0

    def rate_bps(self, band_hz, snr):
        return np.asarray(
            link_rate_bps(
                band_hz,
                snr,
                self.rate,
                self.efficiency,
                self.snr_gap_db,
                self.max_spectral_efficiency,
                self.mcs_snr_db,
                self.mcs_efficiency,
                self.modulation_cap_bits_per_hz,
                self.overhead_fraction,
            )
        )

    def snr_for(self, rate_bps, band_hz):
        return np.asarray(
            snr_for_rate(
                rate_bps,
                band_hz,
                self.rate,
                self.efficiency,
                self.snr_gap_db,
                self.max_spectral_efficiency,
                self.mcs_snr_db,
                self.mcs_efficiency,
                self.modulation_cap_bits_per_hz,
                self.overhead_fraction,
            )
        )


@dataclass(frozen=True)
class RoundProblem:
    """One phase's devices (arrays of length n, SI units)."""

    cycles: np.ndarray  # C_i, CPU cycles of the local work
    upload_bits: np.ndarray  # S_i
    time_budget_s: np.ndarray  # T_i for compute + upload
    kappa: np.ndarray  # J / (cycle Hz^2)
    static_power_w: np.ndarray
    f_min_hz: np.ndarray
    f_max_hz: np.ndarray
    snr_per_w: np.ndarray  # g_i: SNR per W over the whole band
    noise_scales_with_band: np.ndarray  # bool
    p_min_w: np.ndarray
    p_max_w: np.ndarray
    circuit_power_w: np.ndarray
    rate_model: RateModel
    # A radio tail after the phase's download (ours, not in Yang et al.): the radio stays at
    # tail_power_w until the upload starts, at most tail_s, i.e. for min(tail_s, t_c + tail_gap_s)
    # (tail_gap_s: a wait between compute and upload; none in the engine, docs/model.md §8). None: no tail.
    tail_power_w: np.ndarray | None = None
    tail_s: np.ndarray | None = None
    tail_gap_s: np.ndarray | None = None


@dataclass
class Solution:
    cpu_hz: np.ndarray
    tx_power_w: np.ndarray
    band_share: np.ndarray  # sums to <= 1
    energy_j: np.ndarray  # per device, at the solution
    time_s: np.ndarray  # compute + upload per device
    feasible: np.ndarray  # bool: meets its time budget


Allocation = Solution  # the name in the solver's brief (edgefl.control.base.Allocation is the controller's)


def _tail_j(problem: RoundProblem, compute_s: np.ndarray, ndim: int) -> np.ndarray:
    """Energy of the download's radio tail, which runs through the compute (J)."""
    if problem.tail_power_w is None:
        return np.zeros_like(compute_s)
    gap = 0.0 if problem.tail_gap_s is None else _column(problem.tail_gap_s, ndim)
    return tail_energy_j(
        np.minimum(_column(problem.tail_s, ndim), compute_s + gap), _column(problem.tail_power_w, ndim)
    )


def _column(x, ndim: int) -> np.ndarray:
    """A per-device array [n] shaped [n, 1, ...] to broadcast against ``ndim`` dimensions."""
    return np.asarray(x, dtype=np.float64).reshape((-1,) + (1,) * (ndim - 1))


def device_energy_j(problem: RoundProblem, f_hz, p_w, b) -> tuple[np.ndarray, np.ndarray]:
    """(energy J, time s) of every device at frequency ``f_hz``, power ``p_w`` and band share ``b``
    (arrays whose first axis is the device, broadcasting): the objective and the constraint."""
    f_hz, p_w, b = (np.asarray(x, dtype=np.float64) for x in (f_hz, p_w, b))
    ndim = max(f_hz.ndim, p_w.ndim, b.ndim, 1)
    P = {
        name: _column(getattr(problem, name), ndim)
        for name in ("cycles", "upload_bits", "kappa", "static_power_w", "snr_per_w", "circuit_power_w")
    }
    scales = _column(problem.noise_scales_with_band, ndim) > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        compute_s = np.where(P["cycles"] > 0, P["cycles"] / f_hz, 0.0)
        compute_j = compute_energy_j(P["cycles"], f_hz, P["kappa"], P["static_power_w"]) + _tail_j(
            problem, compute_s, ndim
        )
        snr = P["snr_per_w"] * p_w * np.where(scales, 1.0 / b, 1.0)
        rate = problem.rate_model.rate_bps(problem.rate_model.bandwidth_hz * b, np.nan_to_num(snr, posinf=0.0))
        upload_s = np.where(P["upload_bits"] > 0, P["upload_bits"] / rate, 0.0)
        upload_j = uplink_energy_j(upload_s, p_w, P["circuit_power_w"])
    return compute_j + upload_j, compute_s + upload_s


class _Device:
    """The per-(device, share) sub-problems, vectorised over arrays [n, K] of shares: for each, the
    least energy over (f, p) within the time budget (exact up to the golden-section tolerance)."""

    def __init__(self, problem: RoundProblem, shares: np.ndarray):
        self.P, self.b = problem, shares  # shares [n, K]
        col = lambda name: _column(getattr(problem, name), 2)  # noqa: E731
        self.C, self.S, self.T = col("cycles"), col("upload_bits"), col("time_budget_s")
        self.kappa, self.ps, self.pc = col("kappa"), col("static_power_w"), col("circuit_power_w")
        self.fmin, self.fmax = col("f_min_hz"), col("f_max_hz")
        self.pmin, self.pmax = col("p_min_w"), col("p_max_w")
        scales = _column(problem.noise_scales_with_band, 2) > 0
        with np.errstate(divide="ignore"):
            self.g = col("snr_per_w") * np.where(scales, 1.0 / shares, 1.0)  # SNR per W on the share
        self.band = problem.rate_model.bandwidth_hz * shares
        self.model = problem.rate_model
        if problem.tail_power_w is None:
            self.tail_w, self.kink = np.zeros_like(self.C), np.full_like(self.C, np.inf)
        else:  # the tail runs until t_c + gap reaches tail_s: E_c has a kink at t_c = tail_s - gap
            gap = 0.0 if problem.tail_gap_s is None else col("tail_gap_s")
            self.tail_w, self.kink = col("tail_power_w"), col("tail_s") - gap
        self.t_lo = np.where(self.C > 0, self.C / self.fmax, 0.0)  # fastest compute
        self.t_hi = np.where(self.C > 0, self.C / self.fmin, 0.0)  # slowest allowed compute

    def _rate(self, p, extra: int):
        g, band = self.g, self.band
        for _ in range(extra):
            g, band = g[..., None], band[..., None]
        return self.model.rate_bps(band, g * p)

    def _expand(self, x, extra: int):
        for _ in range(extra):
            x = x[..., None]
        return x

    def compute_j(self, compute_s: np.ndarray, extra: int = 1) -> np.ndarray:
        """E_c(t_c) = κC³/t_c² + P_static t_c + P_tail min(t_tail, t_c + gap): energy's compute and tail
        energies at f = C/t_c (J; no cycles: no compute energy, at any f)."""
        C, kappa, ps = (self._expand(x, extra) for x in (self.C, self.kappa, self.ps))
        with np.errstate(divide="ignore", invalid="ignore"):
            f = np.where(C > 0, C / compute_s, 1.0)
        seconds = np.where(C > 0, compute_s, 0.0)
        return compute_energy_j(C, f, kappa, ps) + _tail_j(self.P, seconds, seconds.ndim)

    def best_compute(self, hi: np.ndarray, extra: int) -> tuple[np.ndarray, np.ndarray]:
        """The least compute energy with t_c in [t_lo, hi] and its t_c, in closed form (ours): E_c is
        convex on each side of the tail's kink, with minimisers (2κC³/(P_static + P_tail))^(1/3) before
        it and (2κC³/P_static)^(1/3) after, so the optimum is one of those, the kink or an end."""
        C, kappa, ps, tw, kink, lo = (
            self._expand(x, extra) for x in (self.C, self.kappa, self.ps, self.tail_w, self.kink, self.t_lo)
        )
        with np.errstate(divide="ignore", invalid="ignore"):
            t1 = np.cbrt(2 * kappa * C**3 / (ps + tw))
            t2 = np.cbrt(2 * kappa * C**3 / ps)
        cand = np.stack(
            np.broadcast_arrays(lo, hi, kink, np.nan_to_num(t1, nan=0.0), np.nan_to_num(t2, nan=0.0)), axis=-1
        )
        cand = np.clip(cand, lo[..., None], np.maximum(hi, lo)[..., None])
        energy = self.compute_j(cand, extra + 1)
        k = np.argmin(energy, axis=-1)[..., None]
        return np.take_along_axis(energy, k, -1)[..., 0], np.take_along_axis(cand, k, -1)[..., 0]

    def solve(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per (device, share): least energy, frequency and power (energy inf where infeasible)."""
        energy, t_c, p = self._solve_mcs() if self.model.rate == "mcs" else self._solve_shannon()
        shape = self.b.shape
        with np.errstate(divide="ignore", invalid="ignore"):
            f = np.where(np.broadcast_to(self.C, shape) > 0, self.C / t_c, np.broadcast_to(self.fmin, shape))
        f = np.clip(np.nan_to_num(f, nan=0.0, posinf=0.0), self.fmin, self.fmax)
        p = np.where(np.isfinite(energy), p, np.broadcast_to(self.pmax, shape))
        return energy, f, np.where(np.broadcast_to(self.S, shape) > 0, p, np.broadcast_to(self.pmin, shape))

    def _solve_mcs(self):
        """MCS (ours; the paper has Shannon only): within a table entry the rate does not grow with the
        power, so the only powers worth trying are each entry's least (its threshold's), p_min and p_max;
        each fixes the airtime, and the compute then takes the best t_c in what is left (closed form).
        Exact."""
        thresholds = 10 ** (np.asarray(self.model.mcs_snr_db, dtype=np.float64) / 10)
        with np.errstate(divide="ignore", invalid="ignore"):
            p = thresholds / self.g[..., None] * (1 + 1e-9)  # [n, K, L]; (1 + 1e-9): not below the threshold
        p = np.concatenate(
            [
                p,
                np.broadcast_to(self.pmin[..., None], p.shape[:-1] + (1,)),
                np.broadcast_to(self.pmax[..., None], p.shape[:-1] + (1,)),
            ],
            axis=-1,
        )
        p = np.clip(np.nan_to_num(p, nan=np.inf), self.pmin[..., None], self.pmax[..., None])
        return self._finish(p)

    def _finish(self, p: np.ndarray):
        """Given candidate powers [n, K, L]: airtime, the best compute in the rest, the best candidate."""
        S = self.S[..., None]
        with np.errstate(divide="ignore", invalid="ignore"):
            rate = self._rate(p, 1)
            airtime = np.where(S > 0, S / rate, 0.0)
        hi = np.minimum(self.t_hi[..., None], self.T[..., None] - airtime)
        ok = hi >= self.t_lo[..., None] * (1 - 1e-12)
        comp_j, t_c = self.best_compute(hi, 1)
        energy = np.where(ok, comp_j + np.where(S > 0, uplink_energy_j(airtime, p, self.pc[..., None]), 0.0), np.inf)
        k = np.argmin(energy, axis=-1)[..., None]
        pick = lambda x: np.take_along_axis(x, k, -1)[..., 0]  # noqa: E731
        return pick(energy), pick(t_c), pick(p)

    def _least_energy_per_bit_power(self) -> np.ndarray:
        """p_ee: the power of least (p + P_circuit) / rate(p) in [p_min, p_max]. The rate is concave in p,
        so this ratio is quasi-convex (unimodal): golden-section search on log p."""
        lo, hi = np.log(np.broadcast_to(self.pmin, self.b.shape)), np.log(np.broadcast_to(self.pmax, self.b.shape))
        cost = lambda logp: (np.exp(logp) + self.pc) / np.maximum(self._rate(np.exp(logp), 0), 1e-300)  # noqa: E731
        return np.exp(_golden(cost, lo, hi, GOLDEN)[0])

    def _solve_shannon(self):
        """Shannon (the paper's structure, generalised): for an upload time t_u the least-energy power is
        max(p_req(S/t_u), p_ee) within the bounds (energy per bit is unimodal in p), so the upload's
        least energy U(t_u) is convex and non-increasing; with t_u = T - t_c the objective
        E_c(t_c) + U(T - t_c) is convex on each side of the tail's kink: golden-section search on each
        side (ours)."""
        shape = self.b.shape
        S, T, pmin, pmax = self.S, self.T, self.pmin, self.pmax
        p_ee = self._least_energy_per_bit_power()
        with np.errstate(divide="ignore", invalid="ignore"):
            fastest_up = np.where(S > 0, S / self._rate(pmax, 0), 0.0)
        hi = np.minimum(self.t_hi, T - fastest_up)
        feasible = np.broadcast_to(hi >= self.t_lo * (1 - 1e-12), shape)
        lo = np.broadcast_to(self.t_lo, shape)
        hi = np.maximum(np.broadcast_to(hi, shape), lo)
        kink = np.clip(np.broadcast_to(self.kink, shape), lo, hi)

        def power(t_c, extra):
            with np.errstate(divide="ignore", invalid="ignore"):
                t_u = self._expand(T, extra) - t_c
                needed = np.where(t_u > 0, self._expand(S, extra) / t_u, np.inf)
                p_req = self.model.snr_for(needed, self._expand(self.band, extra)) / self._expand(self.g, extra)
            p = np.maximum(np.nan_to_num(p_req * (1 + 1e-9), nan=np.inf), self._expand(p_ee, extra))
            return np.clip(p, self._expand(pmin, extra), self._expand(pmax, extra))

        def total(t_c, extra=1):
            p = power(t_c, extra)
            S_ = self._expand(S, extra)
            with np.errstate(divide="ignore", invalid="ignore"):
                airtime = np.where(S_ > 0, S_ / self._rate(p, extra), 0.0)
            energy = self.compute_j(t_c, extra) + np.where(
                S_ > 0, uplink_energy_j(airtime, p, self._expand(self.pc, extra)), 0.0
            )
            late = t_c + airtime > self._expand(T, extra) * (1 + 1e-10)
            return np.where(late, np.inf, energy)

        a = np.stack([lo, kink], axis=-1)  # the two convex pieces, on a last axis
        b = np.stack([kink, hi], axis=-1)
        t_best, e_best = _golden(lambda t: total(t, 1), a, b, GOLDEN_SPLIT)
        for ends in (a, b):  # the ends themselves (golden search only approaches them)
            e = total(ends, 1)
            better = e < e_best
            t_best, e_best = np.where(better, ends, t_best), np.where(better, e, e_best)
        k = np.argmin(e_best, axis=-1)[..., None]
        t_c = np.take_along_axis(t_best, k, -1)[..., 0]
        energy = np.where(feasible, np.take_along_axis(e_best, k, -1)[..., 0], np.inf)
        return energy, t_c, power(t_c, 0)


def _golden(fun, a: np.ndarray, b: np.ndarray, iterations: int) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised golden-section search for the minimum of a unimodal ``fun`` on [a, b] (one new
    evaluation per iteration): the best point seen and its value."""
    a, b = np.array(a, dtype=np.float64), np.array(b, dtype=np.float64)
    x1, x2 = b - PHI * (b - a), a + PHI * (b - a)
    f1, f2 = fun(x1), fun(x2)
    best_x, best_f = np.where(f1 <= f2, x1, x2), np.minimum(f1, f2)
    for _ in range(iterations):
        left = f1 <= f2  # the minimum is in [a, x2]
        b, a = np.where(left, x2, b), np.where(left, a, x1)
        new = np.where(left, b - PHI * (b - a), a + PHI * (b - a))
        fn = fun(new)
        x1, f1, x2, f2 = (
            np.where(left, new, x2),
            np.where(left, fn, f2),
            np.where(left, x1, new),
            np.where(left, f1, fn),
        )
        better = fn < best_f
        best_x, best_f = np.where(better, new, best_x), np.where(better, fn, best_f)
    return best_x, best_f


def _subset(problem: RoundProblem, rows: np.ndarray) -> RoundProblem:
    values = {
        name: (None if getattr(problem, name) is None else np.asarray(getattr(problem, name))[rows])
        for name in RoundProblem.__dataclass_fields__
        if name != "rate_model"
    }
    return RoundProblem(**values, rate_model=problem.rate_model)


def solve_min_energy(problem: RoundProblem, fixed_share: float | None = None, units: int | None = None) -> Solution:
    """The least-energy (f_i, p_i, b_i) of a phase (module docstring). ``fixed_share``: every device has
    that share of its own band (dedicated bands: 1.0) and only f_i and p_i are chosen. ``units``: the
    number of band units of the dynamic programme (default max(200, 20 n)); with more than
    ``DP_MAX_DEVICES`` devices the band is split by the Lagrangian instead (``units`` then unused)."""
    n = len(problem.cycles)
    if fixed_share is not None:
        energy, f, p = _Device(problem, np.full((n, 1), float(fixed_share))).solve()
        share = np.full(n, float(fixed_share))
        return _solution(problem, f[:, 0], p[:, 0], share, np.isfinite(energy[:, 0]))
    # Who can make it at all? Shannon: the whole band at f_max, p_max is the best chance; with MCS a
    # smaller share can be better (more SNR per Hz), so a log grid of shares is tried too.
    probe = np.geomspace(1e-4, 1.0, 25)[None, :] if problem.rate_model.rate == "mcs" else np.ones((1, 1))
    alone, _, _ = _Device(problem, np.repeat(probe, n, axis=0)).solve()
    feasible = np.isfinite(alone).any(axis=1)
    share = np.zeros(n)
    f, p = problem.f_max_hz.astype(float).copy(), problem.p_max_w.astype(float).copy()
    uploading = np.asarray(problem.upload_bits) > 0
    while True:
        infeasible = ~feasible
        share[infeasible & uploading] = 1.0 / n  # equal shares for those that cannot make it
        left = 1.0 - share[infeasible].sum()
        rows = np.flatnonzero(feasible)
        if not len(rows):
            break
        sub = _subset(problem, rows)
        no_upload = np.asarray(sub.upload_bits) <= 0
        # Every device's least share (ours): its grid of shares starts there, so that a tight budget
        # is not lost to the grid's resolution; only the slack above the least shares is gridded.
        least = np.where(no_upload, 0.0, _least_shares(sub, left))
        if least.sum() > left * (1 + 1e-12):  # they cannot all make it: drop the one needing the most band
            feasible[rows[int(np.argmax(least))]] = False
            continue
        slack = max(left - least.sum(), 0.0)
        anchor = np.where(no_upload, left, least)[:, None]  # (no upload: any share, it gets none)
        if len(rows) <= DP_MAX_DEVICES:
            k_units = units or max(200, 20 * len(rows))
            x = np.arange(k_units + 1)[None, :] / k_units  # [1, K + 1]: k units of slack
            shares = np.minimum(anchor + slack * x, left)
            energy, f_tab, p_tab = _Device(sub, shares).solve()
            chosen = _allocate_units(energy, no_upload)
        else:
            x = np.concatenate([[0.0], np.geomspace(1.0 / (LAGRANGE_SPAN * len(rows)), 1.0, LAGRANGE_POINTS - 1)])
            shares = np.minimum(anchor + slack * x[None, :], left)
            energy, f_tab, p_tab = _Device(sub, shares).solve()
            chosen = _allocate_lagrange(energy, shares, no_upload, left)
            if chosen is not None:  # again, with a finer grid around each device's pick added
                ratio = x[2] / x[1]
                centre = np.maximum(x[np.maximum(chosen, 0)], x[1])[:, None]
                fine_x = np.minimum(centre * ratio ** np.linspace(-1.0, 1.0, LAGRANGE_REFINE)[None, :], 1.0)
                fine = np.minimum(anchor + slack * fine_x, left)
                e2, f2, p2 = _Device(sub, fine).solve()
                shares, energy = np.concatenate([shares, fine], 1), np.concatenate([energy, e2], 1)
                f_tab, p_tab = np.concatenate([f_tab, f2], 1), np.concatenate([p_tab, p2], 1)
                chosen = _allocate_lagrange(energy, shares, no_upload, left)
        if chosen is None:  # (should not happen once the least shares fit) drop the one needing the most
            feasible[rows[int(np.argmax(least))]] = False
            continue
        for i, (row, j) in enumerate(zip(rows, chosen)):
            if j < 0:  # no upload: only the compute, at any share (the first column)
                f[row], p[row], share[row] = f_tab[i, 0], problem.p_min_w[row], 0.0
            else:
                f[row], p[row], share[row] = f_tab[i, j], p_tab[i, j], shares[i, j]
        if len(rows) > DP_MAX_DEVICES:  # polish: the shares on a continuum, then a last exact solve
            f, p, share = _polish(problem, rows, f, p, share, left)
        break
    return _solution(problem, f, p, share, feasible)


def _allocate_units(energy: np.ndarray, no_upload: np.ndarray) -> np.ndarray | None:
    """Exact dynamic programme: k_i units of slack per device with Σ k_i <= K minimising Σ E_i[k_i].
    ``energy`` [n, K + 1]: device i's least energy with k units above its least share (inf:
    infeasible). Returns the column k_i of each device (-1: no upload), or None if nothing fits."""
    n, K1 = energy.shape
    K = K1 - 1
    best = np.zeros(K + 1)  # least total energy of the devices so far with exactly j units used
    choices = []
    j = np.arange(K + 1)
    gather = np.clip(j[:, None] - j[None, :], 0, K)
    valid = j[:, None] - j[None, :] >= 0
    for i in range(n):
        table = energy[i].copy()
        if no_upload[i]:
            table[1:] = np.inf  # nothing to send: no band
        # new[j] = min_k best[j - k] + table[k]
        total = np.where(valid, best[gather], np.inf) + table[None, :]
        arg = np.argmin(total, axis=1)
        best = total[j, arg]
        choices.append(arg)
    if not np.isfinite(best).any():
        return None
    used = int(np.argmin(best))
    taken = []
    for i in reversed(range(n)):
        k = int(choices[i][used])
        taken.append(k)
        used -= k
    return np.where(no_upload, -1, np.array(taken[::-1]))


def _least_shares(problem: RoundProblem, left: float) -> np.ndarray:
    """Each device's least share of the band (up to ``left``) at which it meets its time at f_max and
    p_max (inf: none): a log grid down to left·1e-6, then bisection below the first feasible point
    (exact for Shannon, whose rate grows with the share; for MCS, the lowest feasible stretch found)."""
    n = len(problem.cycles)
    grid = left * np.geomspace(1e-6, 1.0, 64)
    budget_s = _column(problem.time_budget_s, 2) * (1 - 1e-9)  # a hair of room for rounding

    def fits(b):
        return device_energy_j(problem, problem.f_max_hz[:, None], problem.p_max_w[:, None], b)[1] <= budget_s

    ok = fits(np.broadcast_to(grid, (n, len(grid))))
    first = np.where(ok.any(axis=1), ok.argmax(axis=1), -1)
    hi = np.where(first >= 0, grid[np.maximum(first, 0)], np.inf)
    lo = np.where(first > 0, grid[np.maximum(first - 1, 0)], 0.0)
    for _ in range(50):
        mid = np.where(np.isfinite(hi), (lo + hi) / 2, 1.0)
        good = fits(mid[:, None])[:, 0]
        hi, lo = np.where(good & np.isfinite(hi), mid, hi), np.where(good | ~np.isfinite(hi), lo, mid)
    return hi


def _allocate_lagrange(energy: np.ndarray, shares: np.ndarray, no_upload: np.ndarray, left: float) -> np.ndarray | None:
    """Many devices (ours): the Lagrangian of Σ b_i <= left on each device's tabulated curve. For a
    multiplier ν each device takes argmin_j E_ij + ν b_ij; bisection on ν for the least ν whose shares
    fit, then the band left over goes greedily to the devices it saves the most energy. Exact for
    convex curves on the grid; with MCS (non-convex) the duality gap is at most about one device's
    non-convexity. Returns the chosen column per device (-1: no upload) or None if they cannot fit."""
    n, K = energy.shape
    E = np.where(no_upload[:, None], np.inf, energy)
    finite = np.isfinite(E)
    up = ~no_upload
    if not finite[up].any(axis=1).all():
        return None
    least = np.where(finite, shares, np.inf).min(axis=1)
    if least[up].sum() > left * (1 + 1e-12):
        return None
    E_up, b_up = E[up], shares[up]

    def pick(nu):
        return np.argmin(np.where(np.isfinite(E_up), E_up + nu * b_up, np.inf), axis=1)

    def used(j):
        return b_up[np.arange(len(j)), j].sum()

    j = pick(0.0)
    if used(j) > left:
        scale = np.nanmax(np.where(np.isfinite(E_up), E_up, np.nan)) / b_up.min()
        lo, hi = np.log(scale) - 40.0, np.log(scale) + 5.0
        for _ in range(60):
            mid = (lo + hi) / 2
            if used(pick(np.exp(mid))) <= left:
                hi = mid
            else:
                lo = mid
        j = pick(np.exp(hi))
        if used(j) > left * (1 + 1e-12):  # hi too low (should not happen): the least shares
            j = np.where(np.isfinite(E_up), np.arange(K)[None, :], K).min(axis=1)
    # greedy fill of what is left over
    rows = np.arange(len(j))
    for _ in range(2 * len(j)):
        spare = left - used(j)
        extra = b_up - b_up[rows, j][:, None]
        gain = E_up[rows, j][:, None] - E_up
        gain = np.where((extra > 0) & (extra <= spare) & np.isfinite(E_up), gain, 0.0)
        if not (gain > 0).any():
            break
        i, k = np.unravel_index(np.argmax(gain), gain.shape)
        j[i] = k
    chosen = np.full(n, -1)
    chosen[up] = j
    return chosen


def _polish(problem: RoundProblem, rows: np.ndarray, f, p, share, left: float):
    """The Lagrangian's shares are grid points: scale the uploading devices' shares up to use all of
    ``left`` and solve each device exactly at its share; keep, per device, the better of the two."""
    up = rows[np.asarray(problem.upload_bits)[rows] > 0]
    if not len(up):
        return f, p, share
    total = share[up].sum()
    if total <= 0 or total >= left:
        return f, p, share
    sub = _subset(problem, up)
    candidates = np.stack([share[up], share[up] * (left / total)], axis=1)  # [m, 2]
    energy, f_tab, p_tab = _Device(sub, candidates).solve()
    # each device's best of the two keeps Σ b <= left (the scaled sum is exactly left)
    k = np.argmin(np.where(np.isfinite(energy), energy, np.inf), axis=1)
    m = np.arange(len(up))
    f, p, share = f.copy(), p.copy(), share.copy()
    f[up], p[up], share[up] = f_tab[m, k], p_tab[m, k], candidates[m, k]
    return f, p, share


def _solution(problem, f, p, share, feasible) -> Solution:
    energy, time_s = device_energy_j(problem, f, p, np.where(share > 0, share, 1.0))
    return Solution(
        cpu_hz=f,
        tx_power_w=p,
        band_share=share,
        energy_j=energy,
        time_s=time_s,
        feasible=feasible & (time_s <= problem.time_budget_s * (1 + 1e-9)),
    )
