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
- **Split of T_i between compute and upload** (ours): a 1-D minimisation over t_c, on a grid then
  refined by golden-section search around the best grid point (robust to the MCS steps).
- **Band** (ours; the paper alternates a bisection on the time with a closed-form bandwidth for
  Shannon): the shares are cut into K units (K = 200, or 20 per device), each device's least energy
  is tabulated for every number of units, and an exact dynamic programme over the devices picks the
  units (any shape of energy curve, including the MCS steps). A device that cannot meet its time
  even with the whole band at f_max and p_max is marked infeasible, runs at f_max and p_max and gets
  an equal share of the band; the others share the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from channel import CQI_EFFICIENCY, CQI_SNR_DB, link_rate_bps, snr_for_rate

GRID = 32  # compute-time grid points per (device, share)
GOLDEN = 30  # golden-section iterations
PHI = (np.sqrt(5.0) - 1.0) / 2.0


@dataclass(frozen=True)
class RateModel:
    """How bits/s follow from band and SNR (the fields of edgefl.physical.NetworkParams)."""

    bandwidth_hz: float
    rate: str = "shannon"  # shannon | mcs
    efficiency: float = 1.0
    snr_gap_db: float = 0.0
    max_spectral_efficiency: float | None = None
    mcs_snr_db: tuple[float, ...] = CQI_SNR_DB
    mcs_efficiency: tuple[float, ...] = CQI_EFFICIENCY

    def rate_bps(self, band_hz, snr):
        return np.asarray(link_rate_bps(band_hz, snr, self.rate, self.efficiency, self.snr_gap_db,
                                        self.max_spectral_efficiency, self.mcs_snr_db, self.mcs_efficiency))

    def snr_for(self, rate_bps, band_hz):
        return np.asarray(snr_for_rate(rate_bps, band_hz, self.rate, self.efficiency, self.snr_gap_db,
                                       self.max_spectral_efficiency, self.mcs_snr_db, self.mcs_efficiency))


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
    # (tail_gap_s: the wait between compute and upload, e.g. the access latency). None: no tail.
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


def _tail_j(problem: RoundProblem, compute_s: np.ndarray, ndim: int) -> np.ndarray:
    """Energy of the download's radio tail, which runs through the compute (J)."""
    if problem.tail_power_w is None:
        return np.zeros_like(compute_s)
    gap = 0.0 if problem.tail_gap_s is None else _column(problem.tail_gap_s, ndim)
    return _column(problem.tail_power_w, ndim) * np.minimum(_column(problem.tail_s, ndim), compute_s + gap)


def _column(x, ndim: int) -> np.ndarray:
    """A per-device array [n] shaped [n, 1, ...] to broadcast against ``ndim`` dimensions."""
    return np.asarray(x, dtype=np.float64).reshape((-1,) + (1,) * (ndim - 1))


def device_energy_j(problem: RoundProblem, f_hz, p_w, b) -> tuple[np.ndarray, np.ndarray]:
    """(energy J, time s) of every device at frequency ``f_hz``, power ``p_w`` and band share ``b``
    (arrays whose first axis is the device, broadcasting): the objective and the constraint."""
    f_hz, p_w, b = (np.asarray(x, dtype=np.float64) for x in (f_hz, p_w, b))
    ndim = max(f_hz.ndim, p_w.ndim, b.ndim, 1)
    P = {name: _column(getattr(problem, name), ndim) for name in
         ("cycles", "upload_bits", "kappa", "static_power_w", "snr_per_w", "circuit_power_w")}
    scales = _column(problem.noise_scales_with_band, ndim) > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        compute_s = np.where(P["cycles"] > 0, P["cycles"] / f_hz, 0.0)
        compute_j = P["kappa"] * P["cycles"] * f_hz ** 2 + P["static_power_w"] * compute_s + _tail_j(problem, compute_s, ndim)
        snr = P["snr_per_w"] * p_w * np.where(scales, 1.0 / b, 1.0)
        rate = problem.rate_model.rate_bps(problem.rate_model.bandwidth_hz * b, np.nan_to_num(snr, posinf=0.0))
        upload_s = np.where(P["upload_bits"] > 0, P["upload_bits"] / rate, 0.0)
        upload_j = (p_w + P["circuit_power_w"]) * upload_s
    return compute_j + upload_j, compute_s + upload_s


class _Device:
    """The per-(device, share) sub-problems, vectorised over arrays [n, K] of shares."""

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
        self.p_ee = self._least_energy_per_bit_power()

    def _rate(self, p, extra: int):
        g, band = self.g, self.band
        for _ in range(extra):
            g, band = g[..., None], band[..., None]
        return self.model.rate_bps(band, g * p)

    def _least_energy_per_bit_power(self) -> np.ndarray:
        """p_ee: the power of least (p + P_circuit) / rate(p) in [p_min, p_max] (Shannon: unimodal;
        golden-section search on log p). MCS: not used (its thresholds are the candidates)."""
        if self.model.rate != "shannon":
            return np.broadcast_to(self.pmin, self.b.shape).copy()
        lo, hi = np.log(np.broadcast_to(self.pmin, self.b.shape)), np.log(np.broadcast_to(self.pmax, self.b.shape))
        cost = lambda logp: (np.exp(logp) + self.pc) / np.maximum(self._rate(np.exp(logp), 0), 1e-300)  # noqa: E731
        a, b = lo.copy(), hi.copy()
        for _ in range(GOLDEN):
            x1, x2 = b - PHI * (b - a), a + PHI * (b - a)
            left = cost(x1) <= cost(x2)
            b, a = np.where(left, x2, b), np.where(left, a, x1)
        return np.exp((a + b) / 2)

    def upload(self, upload_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Least upload energy within ``upload_s`` [n, K, G] and its power (inf where impossible)."""
        S = self.S[..., None]
        with np.errstate(divide="ignore", invalid="ignore"):
            needed_rate = np.where(upload_s > 0, S / upload_s, np.inf)
            # (1 + 1e-9): a power exactly at a threshold must not round below it (MCS steps)
            p_req = self.model.snr_for(needed_rate, self.band[..., None]) / self.g[..., None] * (1 + 1e-9)
        pmin, pmax = self.pmin[..., None], self.pmax[..., None]
        candidates = [np.maximum(p_req, self.p_ee[..., None]), p_req, pmin + 0 * upload_s, pmax + 0 * upload_s]
        if self.model.rate == "mcs":  # the least power of every table entry
            thresholds = 10 ** (np.asarray(self.model.mcs_snr_db, dtype=np.float64) / 10)
            candidates += [thresholds[k] / self.g[..., None] * (1 + 1e-9) + 0 * upload_s
                           for k in range(len(thresholds))]
        p = np.clip(np.nan_to_num(np.stack(candidates, axis=-1), nan=np.inf, posinf=np.inf), pmin[..., None],
                    pmax[..., None])
        with np.errstate(divide="ignore", invalid="ignore"):
            rate = self._rate(p, 2)
            airtime = np.where(S[..., None] > 0, S[..., None] / rate, 0.0)
            energy = (p + self.pc[..., None, None]) * airtime
        ok = airtime <= upload_s[..., None] * (1 + 1e-12)
        energy = np.where(ok, energy, np.inf)
        best = np.argmin(energy, axis=-1)[..., None]
        return np.take_along_axis(energy, best, -1)[..., 0], np.take_along_axis(p, best, -1)[..., 0]

    def compute_j(self, compute_s: np.ndarray) -> np.ndarray:
        C = self.C[..., None]
        with np.errstate(divide="ignore", invalid="ignore"):
            f = np.where(C > 0, C / compute_s, self.fmin[..., None])
        seconds = np.where(C > 0, compute_s, 0.0)
        return self.kappa[..., None] * C * f ** 2 + self.ps[..., None] * seconds + _tail_j(self.P, seconds, 3)

    def solve(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per (device, share): least energy, frequency and power (energy inf where infeasible)."""
        shape = self.b.shape
        t_lo = np.broadcast_to(np.where(self.C > 0, self.C / self.fmax, 0.0), shape)
        with np.errstate(divide="ignore", invalid="ignore"):
            fastest_up = np.where(self.S > 0, self.S / self._rate(self.pmax, 0), 0.0)
        t_hi = np.minimum(np.broadcast_to(np.where(self.C > 0, self.C / self.fmin, 0.0), shape), self.T - fastest_up)
        feasible = t_hi >= t_lo * (1 - 1e-12)
        t_hi = np.where(feasible, np.maximum(t_hi, t_lo), t_lo)

        def total(t_c):
            up_j, _ = self.upload(self.T[..., None] - t_c)
            return self.compute_j(t_c) + up_j

        grid = t_lo[..., None] + (t_hi - t_lo)[..., None] * np.linspace(0.0, 1.0, GRID)
        values = total(grid)
        k = np.argmin(values, axis=-1)
        a = np.take_along_axis(grid, np.maximum(k - 1, 0)[..., None], -1)[..., 0]
        b = np.take_along_axis(grid, np.minimum(k + 1, GRID - 1)[..., None], -1)[..., 0]
        best_t, best_v = np.take_along_axis(grid, k[..., None], -1)[..., 0], np.min(values, axis=-1)
        for _ in range(GOLDEN):  # refine in the bracket around the best grid point
            x1, x2 = b - PHI * (b - a), a + PHI * (b - a)
            v = total(np.stack([x1, x2], axis=-1))
            left = v[..., 0] <= v[..., 1]
            b, a = np.where(left, x2, b), np.where(left, a, x1)
            for x, vx in ((x1, v[..., 0]), (x2, v[..., 1])):
                better = vx < best_v
                best_t, best_v = np.where(better, x, best_t), np.where(better, vx, best_v)
        up_j, p = self.upload((self.T - best_t)[..., None])
        with np.errstate(divide="ignore", invalid="ignore"):
            f = np.where(np.broadcast_to(self.C, shape) > 0, self.C / best_t, np.broadcast_to(self.fmin, shape))
        energy = np.where(feasible, self.compute_j(best_t[..., None])[..., 0] + up_j[..., 0], np.inf)
        return energy, np.clip(f, self.fmin, self.fmax), np.where(np.isfinite(p[..., 0]), p[..., 0], self.pmax)


def _subset(problem: RoundProblem, rows: np.ndarray) -> RoundProblem:
    values = {name: (None if getattr(problem, name) is None else np.asarray(getattr(problem, name))[rows])
              for name in RoundProblem.__dataclass_fields__ if name != "rate_model"}
    return RoundProblem(**values, rate_model=problem.rate_model)


def solve_min_energy(problem: RoundProblem, fixed_share: float | None = None, units: int | None = None) -> Solution:
    """The least-energy (f_i, p_i, b_i) of a phase (module docstring). ``fixed_share``: every device has
    that share of its own band (dedicated bands: 1.0) and only f_i and p_i are chosen."""
    n = len(problem.cycles)
    if fixed_share is not None:
        energy, f, p = _Device(problem, np.full((n, 1), float(fixed_share))).solve()
        share = np.full(n, float(fixed_share))
        return _solution(problem, f[:, 0], p[:, 0], share, np.isfinite(energy[:, 0]))
    # Who can make it at all (the whole band at f_max, p_max)?
    alone, _, _ = _Device(problem, np.ones((n, 1))).solve()
    feasible = np.isfinite(alone[:, 0])
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
        k_units = units or max(200, 20 * len(rows))
        shares = left * np.arange(1, k_units + 1)[None, :] / k_units  # [1, K]
        sub = _subset(problem, rows)
        energy, f_tab, p_tab = _Device(sub, np.repeat(shares, len(rows), axis=0)).solve()
        no_upload = np.asarray(sub.upload_bits) <= 0
        chosen = _allocate_units(energy, no_upload)
        if chosen is None:  # the devices cannot all make it: drop the one needing the most band
            need = np.where(np.isfinite(energy), 1, 0).argmax(axis=1)
            need = np.where(np.isfinite(energy).any(axis=1), need, k_units)
            feasible[rows[int(np.argmax(need))]] = False
            continue
        for row, units_taken in zip(rows, chosen):
            i = int(np.flatnonzero(rows == row)[0])
            if units_taken == 0:  # no upload: only the compute, at any share (the first column)
                f[row], p[row], share[row] = f_tab[i, 0], problem.p_min_w[row], 0.0
            else:
                f[row], p[row], share[row] = f_tab[i, units_taken - 1], p_tab[i, units_taken - 1], shares[0, units_taken - 1]
        break
    return _solution(problem, f, p, share, feasible)


def _allocate_units(energy: np.ndarray, no_upload: np.ndarray) -> np.ndarray | None:
    """Exact dynamic programme: units k_i (>= 1 for an upload, 0 without) with Σ k_i <= K minimising
    Σ E_i[k_i - 1]. ``energy`` [n, K]: device i's least energy with k units (inf: infeasible)."""
    n, K = energy.shape
    best = np.zeros(K + 1)  # least total energy of the devices so far with exactly j units used
    choices = []
    j = np.arange(K + 1)
    for i in range(n):
        table = np.concatenate([[energy[i, 0] if no_upload[i] else np.inf], energy[i]])  # k = 0..K
        if no_upload[i]:
            table[1:] = np.inf  # nothing to send: no band
        # new[j] = min_k best[j - k] + table[k]
        k = j[None, :]
        prev = np.where(j[:, None] - k >= 0, best[np.clip(j[:, None] - k, 0, K)], np.inf)
        total = prev + table[None, :]
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
    return np.array(taken[::-1])


def _solution(problem, f, p, share, feasible) -> Solution:
    energy, time_s = device_energy_j(problem, f, p, np.where(share > 0, share, 1.0))
    return Solution(cpu_hz=f, tx_power_w=p, band_share=share, energy_j=energy, time_s=time_s,
                    feasible=feasible & (time_s <= problem.time_budget_s * (1 + 1e-9)))
