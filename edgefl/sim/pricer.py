"""Discrete-event co-simulation of a phase: charges every activity in simulated time and energy.

The model (docs/architecture.md, "Phases and simulated time"): each client with work in a
phase runs its chain of activities (download -> compute -> upload ...) one after another,
starting when the phase starts. Uplinks use the configured access (dedicated band, FDMA
processor sharing, or a TDMA first-come-first-served queue); fading is drawn per
transmission. If the phase outlives the deadline, the clients still busy are cut off: the
energy they spent until then counts, their upload does not arrive. Formulas live in
``channel/`` and ``energy/``.

:class:`SimPyPricer` runs that model in a lean event loop of its own instead of SimPy
processes, because SimPy's per-event machinery (generators, event objects, callbacks) and
per-scalar physics calls cost more than a round of batched training. It reproduces the SimPy
model (:class:`edgefl.sim.reference.SimPyReference`) event for event: the same heap order
(time, priority, sequence number) for simultaneous events, the same floating-point
operations for every time, remaining bit and energy, hence the same events, times and
energies (tests compare them field by field). What it does differently:

- the physics of a phase is evaluated once, vectorised: all rates (for FDMA, every client's
  rate at every possible number of sharers) in one call, durations, outage flags; compute
  times are remembered per (client, samples);
- energies are computed when the ledger or the event log is next read, per category for all
  phases priced since (a round's phases at once), and entered into the ledger in event order;
- without deadline and outage every chain completes, so a phase is simulated only when the
  clock, the ledger or the events are next read (in order; a round's phases back to back);
- an FDMA reschedule only reserves the timer's sequence number; the rates and the timer are
  computed when simulated time is about to move, so n uploads starting at one instant cost
  one recomputation, not n.

Measured on the DRDM MNIST run of benchmarks/run.py: about 30x less time than the SimPy
processes, with bit-identical events and ledger (docs/performance.md).
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from channel import db_to_linear, fading_power_gain, is_outage, shannon_rate_bps, snr_from_link
from edgefl.physical import NetworkParams, Population
from edgefl.sim.activities import Event, PhaseRecord
from energy import (
    EnergyLedger,
    compute_energy_j,
    compute_time_s,
    downlink_energy_j,
    idle_energy_j,
    uplink_energy_j,
)

NORMAL = 1  # SimPy's priority of ordinary events (URGENT = 0: process starts, interrupts)
# heap entry kinds
_TIMEOUT, _BAND, _DONE, _GRANT, _RELEASE, _DEADLINE = range(6)
_COMPUTE, _DOWNLOAD, _UPLOAD = range(3)
_KIND = {"compute": _COMPUTE, "download": _DOWNLOAD, "upload": _UPLOAD}


class MeanSnr:
    """Every client's mean linear SNR over a bandwidth, as ``Link.snr_linear(B, 1.0)`` gives it,
    for all clients at once (one array per bandwidth, cached)."""

    def __init__(self, links):
        self.links = links
        self._by_bandwidth: dict[float, np.ndarray] = {}
        self._shares: dict[tuple[float, int], tuple[np.ndarray, np.ndarray]] = {}
        snr = np.array([lk.mode == "snr" for lk in links], dtype=bool)
        self._snr_idx = np.flatnonzero(snr)
        self._budget_idx = np.flatnonzero(~snr)
        self._snr_db = np.array([links[i].snr_db for i in self._snr_idx], dtype=np.float64)

        def column(name):
            return np.array([getattr(links[i], name) for i in self._budget_idx], dtype=np.float64)

        self._budget = {name: column(name) for name in
                        ("tx_power_w", "path_loss_db", "noise_figure_db", "shadowing_db", "n0_dbm_per_hz")}

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
            shares = bandwidth_hz / np.arange(1, sharers + 1)  # as SharedBand: B / len(flows)
            self._shares[key] = (shares, np.stack([self(float(b)) for b in shares], axis=1))
        return self._shares[key]

    def instantaneous(self, bandwidth_hz: float, clients: np.ndarray, gains: np.ndarray) -> np.ndarray:
        """SNR with fading gains, as ``Link.snr_linear(B, gain)`` gives it."""
        return _faded(self(float(bandwidth_hz))[clients], gains)


def _faded(mean: np.ndarray, gains: np.ndarray) -> np.ndarray:
    """``mean * gains``, with 0 where an infinite mean SNR (B = 0) meets a zero gain: no signal."""
    if not np.isinf(mean).any():
        return mean * gains
    with np.errstate(invalid="ignore"):
        snr = mean * gains
    return np.where(np.isnan(snr), 0.0, snr)


class _Flow:
    __slots__ = ("client", "remaining", "rates", "rate")

    def __init__(self, client: int, bits: float, rates: list[float]):
        self.client = client
        self.remaining = bits
        self.rates = rates  # rate with n sharers at rates[n - 1]
        self.rate = 0.0


class SimPyPricer:
    def __init__(self, network: NetworkParams, population: Population, seed: int):
        self.net = network
        self.pop = population
        self.rng = np.random.default_rng(np.random.SeedSequence([seed, 0xFAD1]))
        self._ledger = _Ledger(population.num_clients, lambda: self._book())
        self._events: list[Event] = []
        self._deferred: list[PhaseRecord] = []  # phases whose outcome is known, not simulated yet
        self._unbooked: list[tuple[int, int, list]] = []  # (round, phase, log) not in ledger/events yet
        self._now = 0.0
        self._seq = 0
        self._up = MeanSnr(population.uplink)
        self._down = MeanSnr(population.downlink)
        self._band_last = 0.0  # FDMA band state that outlives a phase (as SharedBand's)
        self._compute_cache: dict[tuple, tuple[float, float]] = {}
        self._idle_power_w, self._cpu_hz = population.idle_power_w.tolist(), population.cpu_hz.tolist()

    @property
    def now(self) -> float:
        self._price_deferred()
        return self._now

    @property
    def ledger(self) -> EnergyLedger:
        """Energy by client and category; phases priced since the last read are entered first."""
        return self._ledger

    @property
    def events(self) -> list[Event]:
        """Every activity as it happened (events.csv rows), in the order they ended."""
        self._book()
        return self._events

    @property
    def can_change_participation(self) -> bool:
        """True when the channel can decide who arrives (then re-pricing is not exact)."""
        return self.net.deadline_s is not None or self.net.outage_snr_db is not None

    # -- one phase ------------------------------------------------------------------------
    def price_phase(self, phase: PhaseRecord) -> dict[int, bool]:
        """Simulate the phase; return, per client, whether its whole chain completed.

        Without deadline and outage every chain completes, whatever the timing: the phase is then
        only queued and simulated when the clock, the ledger or the events are next read (a
        round's phases one after the other, while the caches are warm), in the same order."""
        if not self.can_change_participation:
            self._deferred.append(phase)
            if len(self._deferred) >= 64:
                self._price_deferred()
            return dict.fromkeys(sorted(phase.chains), True)
        self._price_deferred()
        return self._price(phase)

    def _price(self, phase: PhaseRecord) -> dict[int, bool]:
        clients = sorted(phase.chains)
        completed, self._now, log = _simulate(self, self._plan(phase, clients), clients)
        if log:
            self._unbooked.append((phase.round, phase.phase, log))
            if len(self._unbooked) >= 64:
                self._book()
        return completed

    def _price_deferred(self) -> None:
        deferred, self._deferred = self._deferred, []
        for phase in deferred:
            self._price(phase)

    def _plan(self, phase: PhaseRecord, clients: list[int]) -> dict[int, list]:
        """The physics of every activity: per client a list of rows [kind, activity, duration,
        bits, cycles, lost, FDMA rates by number of sharers]. One pass over the chains sorts the
        activities by kind; the physics is then one vectorised computation per kind."""
        net = self.net
        fdma = net.access == "fdma"
        plans: dict[int, list] = {}
        compute, down, up = [], [], []  # (client, row, index of its fading gain)
        radio = 0
        for c in clients:
            plans[c] = rows = []
            for a in phase.chains[c]:
                row = [_KIND[a.kind], a, 0.0, a.bits, 0.0, False, None]
                rows.append(row)
                if row[0] == _COMPUTE:
                    compute.append((c, row, -1))
                else:
                    (down if row[0] == _DOWNLOAD else up).append((c, row, radio))
                    radio += 1
        # Fading gains drawn up front in a fixed order (client, activity): the draws do not
        # depend on simulated timing, so a trace re-priced on another channel sees the same
        # sequence of random numbers as a full co-simulation on that channel.
        gains = np.ones(0)
        if radio:
            gains = np.atleast_1d(fading_power_gain(net.fading, self.rng, size=radio, rician_k=net.rician_k))
        if compute:
            for (_, row, _), (cycles, seconds) in zip(compute, self._compute([(c, row[1]) for c, row, _ in compute])):
                row[4], row[2] = cycles, seconds
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
            snrs.append(_faded(mean[up_c], up_g[:, None]).ravel())  # [uploads, sharers]
        else:
            bandwidths.append(np.full(len(up), net.bandwidth_hz))
            snrs.append(self._up.instantaneous(net.bandwidth_hz, up_c, up_g))
        rate = self._rate(np.concatenate(bandwidths), np.concatenate(snrs))
        timed = down if fdma else down + up  # transmissions with a fixed rate: duration = bits / rate
        bits = np.array([row[3] for _, row, _ in timed], dtype=np.float64)
        for (_, row, _), seconds in zip(timed, (bits / rate[:len(timed)]).tolist()):
            row[2] = seconds
        if fdma and up:
            for (_, row, _), table in zip(up, rate[len(down):].reshape(len(up), len(up)).tolist()):
                row[6] = table
        if up and net.outage_snr_db is not None:  # judged on the instantaneous SNR over the configured band
            lost = is_outage(self._up.instantaneous(net.bandwidth_hz, up_c, up_g), net.outage_snr_db)
            for (_, row, _), flag in zip(up, np.atleast_1d(lost).tolist()):
                row[5] = flag
        return plans

    def _compute(self, work: list[tuple[int, object]]) -> list[tuple[float, float]]:
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

    def _rate(self, bandwidth_hz, snr: np.ndarray) -> np.ndarray:
        return np.asarray(shannon_rate_bps(bandwidth_hz, snr, self.net.efficiency, self.net.snr_gap_db))

    def _book(self) -> None:
        """Energies of the phases priced since the last booking, vectorised per category, into
        the ledger (each category's charges in event order, as if added one by one) and the
        event log. Deferred until the ledger or the events are read: a round's phases are then
        booked with one energy computation and one ledger update per category."""
        self._price_deferred()
        if not self._unbooked:
            return
        unbooked, self._unbooked = self._unbooked, []
        rounds = [r for r, _, log in unbooked for _ in log]
        phases = [p for _, p, log in unbooked for _ in log]
        log = [row for _, _, rows in unbooked for row in rows]
        clients, kinds, labels, starts, ends, bits, cats, amounts, cycles, statuses = zip(*log)
        client = np.array(clients, dtype=np.int64)
        cat = np.array(cats, dtype=np.int64)
        amount = np.array(amounts, dtype=np.float64)  # cycles for compute, seconds otherwise
        energy = np.zeros(len(log))
        for code, (_, charge) in enumerate(_CHARGES):
            sel = np.flatnonzero(cat == code)
            if len(sel):
                energy[sel] = charge(self.pop, client[sel], amount[sel])
        self._ledger.add_rows(client, cat, energy)
        self._events.extend(map(Event, rounds, phases, clients, kinds, labels, starts, ends, bits, cycles,
                                energy.tolist(), map(_CATEGORIES.__getitem__, cats), statuses))


class _Ledger(EnergyLedger):
    """The pricer's ledger: every read (and write) first books the phases priced since."""

    __slots__ = ("_book",)

    def __init__(self, num_clients: int, book):
        super().__init__(num_clients)
        self._book = book

    def add_rows(self, clients: np.ndarray, categories: np.ndarray, joules: np.ndarray) -> None:
        """``add_many`` for rows of mixed categories (indices into CATEGORIES), in one update;
        repeated (client, category) cells accumulate in row order, as one ``add`` per row."""
        if not (np.all(np.isfinite(joules)) and np.all(joules >= 0)):
            raise ValueError("joules must be finite and >= 0")
        np.add.at(self._j, (clients, categories), joules)


def _booking_first(name: str):
    method = getattr(EnergyLedger, name)

    def booked(self, *args, **kwargs):
        self._book()
        return method(self, *args, **kwargs)

    booked.__name__, booked.__doc__ = name, method.__doc__
    return booked


for _name in ("add", "add_many", "merge", "by_category", "per_client", "client_totals", "total", "copy", "__repr__"):
    setattr(_Ledger, _name, _booking_first(_name))


_CHARGES = (
    ("compute", lambda pop, c, cycles: compute_energy_j(cycles, pop.cpu_hz[c], pop.kappa[c], pop.static_power_w[c])),
    ("uplink", lambda pop, c, seconds: uplink_energy_j(seconds, pop.tx_power_w[c], pop.circuit_power_w[c])),
    ("downlink", lambda pop, c, seconds: downlink_energy_j(seconds, pop.rx_power_w[c])),
    ("idle", lambda pop, c, seconds: idle_energy_j(seconds, pop.idle_power_w[c])),
)
_CATEGORIES = tuple(name for name, _ in _CHARGES)  # = energy.CATEGORIES
_CAT_COMPUTE, _CAT_UPLINK, _CAT_DOWNLINK, _CAT_IDLE = range(4)


def _simulate(pricer: SimPyPricer, plans: dict, clients: list[int]):
    """One phase's event loop: (completed, end time, log). It mirrors SimPyReference's processes
    step by step. The heap holds (time, priority, sequence number, kind, payload) as SimPy's
    holds (time, priority, event id, event); the comments name the SimPy event each entry stands
    for, since their order decides what happens first at one instant. (Closures over local
    state rather than an object's attributes: this loop is the pricer's hot path.)"""
    access = pricer.net.access
    fdma, tdma = access == "fdma", access == "tdma"
    timed_uploads = not (fdma or tdma)  # dedicated band: an upload is a plain timeout
    idle_power_w, cpu_hz = pricer._idle_power_w, pricer._cpu_hz  # Python floats
    heappush, heappop = heapq.heappush, heapq.heappop
    heap: list = []
    log: list = []  # (client, kind, label, start, end, bits, category, cycles or seconds, cycles, status)
    ptr = dict.fromkeys(clients, 0)
    radio_at: dict = dict.fromkeys(clients)  # when the current activity's radio (or CPU) started
    busy = dict.fromkeys(clients, 0.0)
    ok = dict.fromkeys(clients, True)
    waiting: dict = dict.fromkeys(clients)  # seq of the timeout waited on, a _Flow, or QUEUED
    completed: dict[int, bool] = {}
    flows: list[_Flow] = []  # FDMA: uploads in progress (SharedBand.flows)
    queue: list[int] = []  # TDMA: waiting requests (Resource.put_queue)
    start = now = pricer.now
    seq, band_last = pricer._seq, pricer._band_last
    alive, band_version, band_pending, holder = len(clients), 0, None, None

    def push(delay, kind, what):
        nonlocal seq
        seq += 1
        heappush(heap, (now + delay, NORMAL, seq, kind, what))
        return seq

    def next_activity(c):
        plan, i = plans[c], ptr[c]
        if i == len(plan):
            finish(c)
            return
        kind, activity, duration, bits, cycles, lost, rates = plan[i]
        if kind != _UPLOAD or timed_uploads:
            radio_at[c] = now
            waiting[c] = push(duration, _TIMEOUT, c)
        elif fdma:  # SharedBand.transmit
            radio_at[c] = now
            flow = waiting[c] = _Flow(c, bits, rates)
            band_advance()
            flows.append(flow)
            band_reschedule()
        else:  # TDMA: request the channel; waiting for it counts as idle, not as transmission
            radio_at[c] = None
            waiting[c] = QUEUED
            queue.append(c)
            trigger_put()

    def activity_done(c):
        nonlocal seq
        plan, i = plans[c], ptr[c]
        kind, activity, duration, bits, cycles, lost, _ = plan[i]
        at = radio_at[c]
        if kind == _COMPUTE:
            log.append((c, "compute", activity.label, at, now, 0.0, _CAT_COMPUTE, cycles, cycles, "ok"))
        elif kind == _DOWNLOAD:
            log.append((c, "download", activity.label, at, now, bits, _CAT_DOWNLINK, now - at, 0.0, "ok"))
        else:
            log.append((c, "upload", activity.label, at, now, bits, _CAT_UPLINK, now - at, 0.0, "lost" if lost else "ok"))
            ok[c] = ok[c] and not lost
        busy[c] += now - at
        ptr[c] = i = i + 1
        if i < len(plan) and (plan[i][0] != _UPLOAD or timed_uploads):  # the next activity is a timeout
            radio_at[c] = now
            seq += 1
            heappush(heap, (now + plan[i][2], NORMAL, seq, _TIMEOUT, c))
            waiting[c] = seq
        else:
            next_activity(c)

    def finish(c):
        nonlocal alive
        # Time inside the phase spent waiting (e.g. queued for the TDMA channel).
        idle_s = (now - start) - busy[c]
        if idle_s > 1e-12 and idle_power_w[c] > 0:
            log.append((c, "idle", "wait", start, now, 0.0, _CAT_IDLE, idle_s, 0.0, "ok"))
        completed[c] = ok[c]
        waiting[c] = None
        alive -= 1

    def interrupt(c):
        """The deadline: charge the part done of the current activity, then end the chain."""
        nonlocal holder
        ok[c] = False
        kind, activity, *_ = plans[c][ptr[c]]
        flow = waiting[c]
        if isinstance(flow, _Flow) and flow in flows:  # SharedBand.cancel
            band_advance()
            flows.remove(flow)
            band_reschedule()
        if holder == c:
            holder = None
        if c in queue:
            queue.remove(c)
        at = radio_at[c]
        if at is not None:  # nothing to charge if cut while queued for TDMA
            if kind == _COMPUTE:
                done = (now - at) * cpu_hz[c]
                log.append((c, "compute", activity.label, at, now, 0.0, _CAT_COMPUTE, done, done, "cut"))
            else:  # the message did not get through: no bits delivered
                category = _CAT_DOWNLINK if kind == _DOWNLOAD else _CAT_UPLINK
                log.append((c, activity.kind, activity.label, at, now, 0.0, category, now - at, 0.0, "cut"))
            busy[c] += now - at
        finish(c)

    # -- TDMA: simpy.Resource(capacity=1) -----------------------------------------------------
    def trigger_put():
        """Resource._trigger_put: the first waiting request gets the free channel."""
        nonlocal holder
        if holder is None and queue:
            holder = queue.pop(0)
            push(0.0, _GRANT, holder)  # Request.succeed()

    # -- FDMA: SharedBand ---------------------------------------------------------------------
    def band_advance():
        nonlocal band_last
        elapsed = now - band_last
        if elapsed > 0:
            for flow in flows:
                flow.remaining -= flow.rate * elapsed
        band_last = now

    def band_reschedule():
        # SimPy creates the timer here (its sequence number is taken now); rates and wait are
        # computed in flush_band, before simulated time moves, from the same values.
        nonlocal band_version, band_pending, seq
        band_version += 1
        if flows:
            seq += 1
            band_pending = (seq, band_version)
        else:
            band_pending = None

    def flush_band():
        nonlocal band_pending
        timer_seq, version = band_pending
        band_pending = None
        n = len(flows)
        wait = math.inf
        for flow in flows:  # wait = min(max(remaining, 0) / rate)
            flow.rate = rate = flow.rates[n - 1]
            remaining = flow.remaining
            t = (0.0 if 0.0 > remaining else remaining) / rate
            if t < wait:
                wait = t
        heappush(heap, (now + wait, NORMAL, timer_seq, _BAND, version))

    def band_timer():
        nonlocal band_last
        # SharedBand._advance, and the flows finished within a relative rounding tolerance of
        # zero bits left, in one pass
        elapsed = now - band_last
        band_last = now
        finished = []
        for f in flows:
            if elapsed > 0:
                f.remaining -= f.rate * elapsed
            if f.remaining <= 1e-9 * (f.rate if f.rate > 1.0 else 1.0):  # max(1, rate)
                finished.append(f)
        if not finished:  # rounding left a sliver: finish the closest one (the first, as min())
            finished = [min(flows, key=lambda f: f.remaining / f.rate)]
        for flow in finished:
            flows.remove(flow)
            push(0.0, _DONE, flow.client)  # flow.done.succeed()
        band_reschedule()

    # -- the run --------------------------------------------------------------------------------
    # SimPy: Initialize events (URGENT) of the client processes and of the process waiting for
    # all of them, then the deadline timeout is created; the inits run in client order before
    # anything else happens at this instant.
    if pricer.net.deadline_s is not None:
        push(pricer.net.deadline_s, _DEADLINE, None)
    for c in clients:
        next_activity(c)
    stop = None
    while alive:
        if band_pending is not None:
            flush_band()
        if not heap:
            raise RuntimeError("phase cannot finish: clients wait with nothing scheduled")
        if stop is not None and heap[0][:3] >= stop:
            break
        now, _, event_seq, kind, what = heappop(heap)
        if kind == _TIMEOUT:  # Timeout: an activity (or a TDMA transmission) ends
            if waiting[what] == event_seq:
                if tdma and plans[what][ptr[what]][0] == _UPLOAD:
                    holder = None  # leaving `with request` releases the channel
                    push(0.0, _RELEASE, None)
                activity_done(what)
        elif kind == _DONE:  # flow.done of an FDMA upload
            activity_done(what)
        elif kind == _BAND:  # SharedBand's timer; superseded ones are no-ops
            if what == band_version:
                band_timer()
        elif kind == _GRANT:  # the TDMA Request event: the radio switches on
            if waiting[what] is QUEUED:
                radio_at[what] = now
                waiting[what] = push(plans[what][ptr[what]][2], _TIMEOUT, what)
        elif kind == _RELEASE:  # the TDMA Release event: Resource._trigger_put
            trigger_put()
        else:  # the deadline timeout: SimPy schedules the AnyOf (NORMAL) now; what is already
            # queued for this instant runs first, then the run stops and the busy are interrupted
            seq += 1
            stop = (now, NORMAL, seq)
    if alive:  # the deadline cut the phase
        for c in clients:
            if c not in completed:
                interrupt(c)
    pricer._seq, pricer._band_last = seq, band_last
    return completed, now, log


QUEUED = "queued"  # a TDMA client waiting for the channel
