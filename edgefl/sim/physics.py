"""A phase's physics, vectorised: every activity's duration, rate table and loss, in numpy at once.

The SimPy processes (:mod:`edgefl.sim.pricer`) only order events in time; what each event lasts
is computed here before the phase starts, for all clients together: one fading draw, one rate
computation for every transmission (for FDMA, every upload's rate at every possible number of
sharers B/1 .. B/n, so the band never calls the physics while it runs), compute times per
(client, samples). Formulas live in ``channel/`` and ``energy/``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from channel import db_to_linear, fading_power_gain, is_outage, shannon_rate_bps, snr_from_link
from edgefl.physical import NetworkParams, Population
from edgefl.sim.activities import Activity, PhaseRecord
from energy import compute_time_s

COMPUTE, DOWNLOAD, UPLOAD = range(3)
KIND_CODE = {"compute": COMPUTE, "download": DOWNLOAD, "upload": UPLOAD}


@dataclass(slots=True)
class Step:
    """One activity of one client's chain with its physics resolved."""

    kind: int  # COMPUTE | DOWNLOAD | UPLOAD
    activity: Activity
    duration_s: float  # compute, download, dedicated or TDMA upload: the time it takes
    bits: float
    cycles: float  # compute only
    lost: bool = False  # upload in outage: sent, charged, not received
    rates_bps: list[float] | None = None  # FDMA upload: rate with n sharers at rates_bps[n - 1]


class MeanSnr:
    """Every client's mean linear SNR over a bandwidth, as ``Link.snr_linear(B, 1.0)`` gives it,
    for all clients at once (one array per bandwidth, cached)."""

    def __init__(self, links):
        self.links = links
        self._by_bandwidth: dict[float, np.ndarray] = {}
        self._shares: dict[tuple[float, int], tuple[np.ndarray, np.ndarray]] = {}
        configured = np.array([lk.mode == "snr" for lk in links], dtype=bool)
        self._snr_idx = np.flatnonzero(configured)
        self._budget_idx = np.flatnonzero(~configured)
        self._snr_db = np.array([links[i].snr_db for i in self._snr_idx], dtype=np.float64)
        self._budget = {name: np.array([getattr(links[i], name) for i in self._budget_idx], dtype=np.float64)
                        for name in ("tx_power_w", "path_loss_db", "noise_figure_db", "shadowing_db",
                                     "n0_dbm_per_hz")}

    def __call__(self, bandwidth_hz: float) -> np.ndarray:
        cached = self._by_bandwidth.get(bandwidth_hz)
        if cached is None:
            cached = np.empty(len(self.links))
            if len(self._snr_idx):  # a configured SNR does not depend on the bandwidth
                cached[self._snr_idx] = np.asarray(db_to_linear(self._snr_db)) * 1.0
            if len(self._budget_idx):
                b = self._budget
                cached[self._budget_idx] = snr_from_link(
                    b["tx_power_w"], b["path_loss_db"], bandwidth_hz, b["noise_figure_db"],
                    b["shadowing_db"], b["n0_dbm_per_hz"])
            self._by_bandwidth[bandwidth_hz] = cached
        return cached

    def shared(self, bandwidth_hz: float, sharers: int) -> tuple[np.ndarray, np.ndarray]:
        """The shares B/1 .. B/sharers [F] and every client's mean SNR at each [N, F] (cached)."""
        key = (bandwidth_hz, sharers)
        if key not in self._shares:
            shares = bandwidth_hz / np.arange(1, sharers + 1)
            self._shares[key] = (shares, np.stack([self(float(b)) for b in shares], axis=1))
        return self._shares[key]

    def instantaneous(self, bandwidth_hz: float, clients: np.ndarray, gains: np.ndarray) -> np.ndarray:
        """SNR with fading gains, as ``Link.snr_linear(B, gain)`` gives it."""
        return faded(self(float(bandwidth_hz))[clients], gains)


def faded(mean: np.ndarray, gains: np.ndarray) -> np.ndarray:
    """``mean * gains``, with 0 where an infinite mean SNR (B = 0) meets a zero gain: no signal."""
    if not np.isinf(mean).any():
        return mean * gains
    with np.errstate(invalid="ignore"):
        snr = mean * gains
    return np.where(np.isnan(snr), 0.0, snr)


class PhasePhysics:
    """Resolves a phase's activities into :class:`Step` s for one network and population."""

    def __init__(self, network: NetworkParams, population: Population, rng: np.random.Generator):
        self.net = network
        self.pop = population
        self.rng = rng
        self._up = MeanSnr(population.uplink)
        self._down = MeanSnr(population.downlink)
        self._compute_cache: dict[tuple, tuple[float, float]] = {}
        # Without fading nor outage, every client's rates are the same in every phase: computed
        # once (for all clients, vectorised) and looked up (_plan_unfaded).
        self._unfaded = network.fading == "none" and network.outage_snr_db is None
        self._unfaded_rates: tuple | None = None  # (down, up) per client, () if a rate is 0
        self._unfaded_tables: dict[int, list[list[float]]] = {}

    def plan(self, phase: PhaseRecord, clients: list[int]) -> dict[int, list[Step]]:
        """Each client's chain as steps. One pass sorts the activities by kind; the physics is
        then one vectorised computation per kind."""
        if self._unfaded and self._unfaded_rates_bps() is not None:
            return self._plan_unfaded(phase, clients)
        net = self.net
        fdma = net.access == "fdma"
        plans: dict[int, list[Step]] = {}
        compute, down, up = [], [], []  # (client, step, index of its fading gain)
        radio = 0
        for c in clients:
            plans[c] = steps = []
            for a in phase.chains[c]:
                step = Step(KIND_CODE[a.kind], a, 0.0, a.bits, 0.0)
                steps.append(step)
                if step.kind == COMPUTE:
                    compute.append((c, step))
                else:
                    (down if step.kind == DOWNLOAD else up).append((c, step, radio))
                    radio += 1
        # Fading gains drawn up front in a fixed order (client, activity): the draws do not
        # depend on simulated timing, so a trace re-priced on another channel sees the same
        # sequence of random numbers as a full co-simulation on that channel.
        gains = np.ones(0)
        if radio:
            gains = np.atleast_1d(fading_power_gain(net.fading, self.rng, size=radio, rician_k=net.rician_k))
        if compute:
            for (_, step), (cycles, seconds) in zip(compute, self._compute([(c, s.activity) for c, s in compute])):
                step.cycles, step.duration_s = cycles, seconds
        # One rate computation for every transmission: downloads over the downlink band; uploads
        # over the full band, or (FDMA) over each share B/n, n = 1 .. len(up), for every upload.
        down_c = np.array([c for c, _, _ in down], dtype=np.int64)
        up_c = np.array([c for c, _, _ in up], dtype=np.int64)
        down_g, up_g = gains[[g for _, _, g in down]], gains[[g for _, _, g in up]]
        bandwidths = [np.full(len(down), net.downlink_bandwidth_hz)]
        snrs = [self._down.instantaneous(net.downlink_bandwidth_hz, down_c, down_g)]
        if fdma and up:
            shares, mean = self._up.shared(net.bandwidth_hz, len(up))
            bandwidths.append(np.tile(shares, len(up)))
            snrs.append(faded(mean[up_c], up_g[:, None]).ravel())  # [uploads, sharers]
        else:
            bandwidths.append(np.full(len(up), net.bandwidth_hz))
            snrs.append(self._up.instantaneous(net.bandwidth_hz, up_c, up_g))
        rate = self._rate(np.concatenate(bandwidths), np.concatenate(snrs))
        timed = down if fdma else down + up  # transmissions at a fixed rate: duration = bits / rate
        bits = np.array([s.bits for _, s, _ in timed], dtype=np.float64)
        for (_, step, _), seconds in zip(timed, (bits / rate[:len(timed)]).tolist()):
            step.duration_s = seconds
        if fdma and up:
            for (_, step, _), table in zip(up, rate[len(down):].reshape(len(up), len(up)).tolist()):
                step.rates_bps = table
        if up and net.outage_snr_db is not None:  # judged on the instantaneous SNR over the configured band
            lost = is_outage(self._up.instantaneous(net.bandwidth_hz, up_c, up_g), net.outage_snr_db)
            for (_, step, _), flag in zip(up, np.atleast_1d(lost).tolist()):
                step.lost = flag
        return plans

    def _rate(self, bandwidth_hz, snr: np.ndarray) -> np.ndarray:
        return np.asarray(shannon_rate_bps(bandwidth_hz, snr, self.net.efficiency, self.net.snr_gap_db))

    def _unfaded_rates_bps(self) -> tuple[list[float], list[float]] | None:
        """Every client's downlink and (full-band) uplink rate without fading; None if one is 0
        (bits / 0: left to the general path)."""
        if self._unfaded_rates is None:
            net = self.net
            down = self._rate(net.downlink_bandwidth_hz, self._down(net.downlink_bandwidth_hz))
            up = self._rate(net.bandwidth_hz, self._up(net.bandwidth_hz))
            self._unfaded_rates = (down.tolist(), up.tolist()) if (down > 0).all() and (up > 0).all() else ()
        return self._unfaded_rates or None

    def _plan_unfaded(self, phase: PhaseRecord, clients: list[int]) -> dict[int, list[Step]]:
        """:meth:`plan` without fading nor outage: the same rates (a gain of 1) and durations
        (bits / rate), the rates looked up per client instead of computed per phase."""
        net = self.net
        down_rate, up_rate = self._unfaded_rates_bps()
        table = None
        if net.access == "fdma":
            uploads = sum(a.kind == "upload" for c in clients for a in phase.chains[c])
            table = self._unfaded_tables.get(uploads)
            if table is None and uploads:
                shares, mean = self._up.shared(net.bandwidth_hz, uploads)
                table = self._unfaded_tables[uploads] = self._rate(shares[None, :], mean).tolist()
        plans: dict[int, list[Step]] = {}
        compute = []
        for c in clients:
            plans[c] = steps = []
            for a in phase.chains[c]:
                kind = KIND_CODE[a.kind]
                if kind == COMPUTE:
                    step = Step(kind, a, 0.0, a.bits, 0.0)
                    compute.append((c, step))
                elif kind == DOWNLOAD:
                    step = Step(kind, a, a.bits / down_rate[c], a.bits, 0.0)
                elif table is not None:
                    step = Step(kind, a, 0.0, a.bits, 0.0, rates_bps=table[c])
                else:
                    step = Step(kind, a, a.bits / up_rate[c], a.bits, 0.0)
                steps.append(step)
        if compute:
            for (_, step), (cycles, seconds) in zip(compute, self._compute([(c, s.activity) for c, s in compute])):
                step.cycles, step.duration_s = cycles, seconds
        return plans

    def _compute(self, work: list[tuple[int, Activity]]) -> list[tuple[float, float]]:
        """(cycles, seconds) of each (client, compute activity); remembered per (client, samples,
        work), since a run repeats the same computations round after round."""
        keys = [(c, a.samples, a.work) for c, a in work]
        missing = [k for k in dict.fromkeys(keys) if k not in self._compute_cache]
        if missing:
            pop = self.pop
            c = np.array([k[0] for k in missing], dtype=np.int64)
            train = np.array([k[2] == "train" for k in missing], dtype=bool)
            per_sample = np.where(train, pop.train_cycles_per_sample[c], pop.eval_cycles_per_sample[c])
            cycles = np.array([k[1] for k in missing], dtype=np.float64) * per_sample
            seconds = np.asarray(compute_time_s(cycles, pop.cpu_hz[c]))
            self._compute_cache.update(zip(missing, zip(cycles.tolist(), seconds.tolist())))
        return [self._compute_cache[k] for k in keys]
