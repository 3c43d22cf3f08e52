"""The co-simulation: SimPy processes charge every activity in simulated time and energy.

One ``simpy.Environment`` for the whole run; simulated time is continuous across rounds. In a
phase (docs/architecture.md, "A round's life"), each client with work is a SimPy process that
runs its chain of activities (download -> compute -> upload ...) one after another, starting
when the phase starts. Uplinks use the configured access: a dedicated band (an upload is a
timeout), FDMA processor sharing (:class:`~edgefl.sim.band.SharedBand`, a band that re-plans
when an upload starts or ends) or TDMA (a ``simpy.Resource`` of capacity 1, first come first
served). A deadline is a timeout: the clients still busy when it fires are interrupted; the
energy they spent until then counts, their upload does not arrive.

Speed comes from doing a phase's physics in numpy at once before its processes start
(:class:`~edgefl.sim.physics.PhasePhysics`: fading, rates, durations, losses) and from pricing
energy per phase, vectorised per category (:func:`~edgefl.sim.booking.book`): the processes
themselves only wait on timeouts and shared resources.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import simpy

from edgefl.physical import NetworkParams, Population
from edgefl.sim.activities import Event, PhaseRecord
from edgefl.sim.availability import Availability
from edgefl.sim.band import SharedBand
from edgefl.sim.journal import journaled
from edgefl.sim.mobility import RandomWaypoint
from edgefl.sim.booking import (
    CAT_COMPUTE,
    CAT_DOWNLINK,
    CAT_DOWNLINK_TAIL,
    CAT_IDLE,
    CAT_UPLINK,
    CAT_UPLINK_PROMOTION,
    CAT_DOWNLINK_PROMOTION,
    CAT_UPLINK_TAIL,
    book,
    energies_j,
    step_codes,
)
from edgefl.sim.physics import COMPUTE, DOWNLOAD, UPLOAD, PhasePhysics, Step
from energy import BatteryBank, EnergyLedger


# What a client is doing within a step (for what an interrupt cuts): waiting, its radio promoting, working.
_WAIT, _PROMOTION, _WORK = range(3)
_CATEGORY = {DOWNLOAD: CAT_DOWNLINK, UPLOAD: CAT_UPLINK}  # charge codes of a message ...
_TAIL_CODE = {DOWNLOAD: CAT_DOWNLINK_TAIL, UPLOAD: CAT_UPLINK_TAIL}  # ... of its tail ...
_PROMOTION_CODE = {DOWNLOAD: CAT_DOWNLINK_PROMOTION, UPLOAD: CAT_UPLINK_PROMOTION}  # ... and of the promotion before it


class NoDeviceAvailable(RuntimeError):
    """No device can take part in a round, and none ever will (empty batteries, no harvesting, or an
    availability trace that has ended): the run stops there."""


def can_change_participation(network: NetworkParams, availability: str = "always", p_fail: float = 0.0,
                             over_selection: float = 0.0) -> bool:
    """Whether the network can decide who takes part in a round: a deadline can cut a client off,
    a packet error (``outage_snr_db``) or an MCS outage can lose a message (except with block
    fading, where outage blocks are waited out), devices can be offline or fail, over-selection keeps
    the first uploads to arrive. When it cannot,
    the learning trajectory does not depend on the channel, and re-pricing a recorded op trace on
    another channel is exact."""
    mcs_outage = network.rate == "mcs" and not (network.coherence_s is not None and network.fading != "none")
    return (network.deadline_s is not None or network.outage_snr_db is not None or mcs_outage
            or availability != "always" or p_fail > 0 or over_selection > 0)


class SimPyPricer:
    """Co-simulates phases on one SimPy environment; keeps the energy ledger and the event log.

    ``record_events=False`` keeps only the ledger and the clock (re-pricing a trace for a sweep
    needs no event log).

    Extension point (docs/architecture.md, "Adding a physical process"): ``before_step``, if set,
    is a generator function ``(client, step)`` (or a method of a subclass) yielding the SimPy events
    a client waits for before each step of its chain starts; the wait is idle time. Background processes (availability,
    mobility, charging) are plain ``pricer.env.process(...)``: the environment lives for the run.
    """

    before_step = None
    journal: list | None = None  # the state-changing calls received, when a run checkpoints (edgefl.sim.journal)
    _journal_depth = 0

    def __init__(self, network: NetworkParams, population: Population, seed: int, record_events: bool = True):
        self.net = network
        self.pop = population
        self.env = simpy.Environment()
        self.physics = PhasePhysics(network, population, np.random.default_rng(np.random.SeedSequence([seed, 0xFAD1])),
                                    np.random.default_rng(np.random.SeedSequence([seed, 0x5104])))
        self._ledger = EnergyLedger(population.num_clients)
        self._events: list[Event] | None = [] if record_events else None
        self._unbooked: list[tuple[int, int, list]] = []  # phases simulated, energy not yet booked
        self._phases_unbooked = 0
        # Every device's radio tail still running: client -> [start s, charged until s, charge code, label of the
        # message it follows]; charged when it ends (the next transfer starts, it runs out, finish()) and up to
        # the end of every round (end_round).
        self._tails: dict[int, list] = {}
        self._at = (0, 0)  # the round and phase being priced (or the last priced): where tails are logged
        self._phase_log: list | None = None  # the log of the phase running
        self.band = SharedBand(self.env, network.coherence_s)
        self.tdma = simpy.Resource(self.env, capacity=1)
        self.batteries = None  # devices.battery_j: levels, drawn from the ledger, harvesting
        if np.isfinite(population.battery_j).any():
            self.batteries = BatteryBank(population.battery_j, population.battery_reserve_j, population.harvest_w)
        self._battery_time, self._battery_spent = 0.0, np.zeros(population.num_clients)
        self.mobility = None
        if population.cell is not None and (population.speed_mps > 0).any():
            self.mobility = RandomWaypoint(population.distance_m, population.speed_mps, *population.cell[:2],
                                           np.random.default_rng(np.random.SeedSequence([seed, 0x30B1])))
        self.availability = None
        if population.availability != "always":
            self.availability = Availability(
                self.env, population.num_clients, np.random.default_rng(np.random.SeedSequence([seed, 0xA7A1])),
                population.availability, population.mean_on_s, population.mean_off_s,
                population.availability_intervals, on_offline=self._went_offline)
        self._fail_rng = np.random.default_rng(np.random.SeedSequence([seed, 0xFA11]))
        self._failures: tuple[int, np.ndarray, np.ndarray] | None = None  # (round, fails, when in [0, 1))
        self._crashed: set[int] = set()  # clients that failed in the current round
        self._running: dict = {}  # client -> its process, during a phase
        self._needed, self._arrived = None, 0  # over-selection: uploads the phase needs, and has
        self._upload = {"dedicated": self._timed_upload, "fdma": self._shared_upload,
                        "tdma": self._queued_upload}[network.access]
        self._idle_power_w = population.idle_power_w.tolist()
        self._tail_s, self._tail_power_w = population.tail_s.tolist(), population.tail_power_w.tolist()
        self._cpu_hz = population.cpu_hz.tolist()
        # A controller's knobs (allocate): the scenario's values are the nominal ones.
        self._nominal_cpu_hz, self._nominal_tx_power_w = population.cpu_hz.copy(), population.tx_power_w.copy()
        self._nominal_snr_db = [lk.snr_db for lk in population.uplink]  # configured-SNR links: at nominal power
        self._allocated = False

    @property
    def now(self) -> float:
        return self.env.now

    @property
    def can_change_participation(self) -> bool:
        return can_change_participation(self.net, self.pop.availability, self.pop.p_fail)

    @journaled
    def start_round(self, needed: int) -> np.ndarray | None:
        """At the start of a round: devices move to where they are now (links rebuilt), then the
        server waits for enough of them (:meth:`online_clients`); returns who is online."""
        if self.mobility is not None:
            self._move()
        online = self.online_clients(needed)
        if self.mobility is not None and self.env.now > self.mobility.time_s:  # time passed while waiting
            self._move()
        return online

    def _move(self) -> None:
        pop = self.pop
        self.mobility.advance(self.env.now)
        *_, path_loss_db, bs_w = pop.cell
        pop.uplink, pop.downlink = self.mobility.links(pop.uplink, pop.downlink, path_loss_db, bs_w)
        pop.distance_m = self.mobility.distance_m
        self.physics.links_changed()

    @journaled
    def allocate(self, allocation) -> None:
        """A controller's knobs for the next phase (an :class:`edgefl.control.Allocation`; None: the
        scenario's values): CPU frequencies, transmit powers (the uplink SNR scales with p / p_nominal)
        and FDMA band shares. Phases simulated before are booked first, at the knobs they ran with."""
        if allocation is None and not self._allocated:
            return
        self._book()
        pop = self.pop
        cpu = getattr(allocation, "cpu_hz", None)
        power = getattr(allocation, "tx_power_w", None)
        pop.cpu_hz = np.array(self._nominal_cpu_hz if cpu is None else cpu, dtype=np.float64)
        power = np.array(self._nominal_tx_power_w if power is None else power, dtype=np.float64)
        if not np.array_equal(power, pop.tx_power_w):
            pop.uplink = [replace(lk, tx_power_w=float(p)) if lk.mode == "budget" else
                          replace(lk, snr_db=float(snr_db + 10 * np.log10(p / p0)))
                          for lk, p, p0, snr_db in zip(pop.uplink, power, self._nominal_tx_power_w,
                                                       self._nominal_snr_db)]
            pop.tx_power_w = power
        self.physics.resources_changed(getattr(allocation, "band_share", None))
        self._cpu_hz = pop.cpu_hz.tolist()
        self._allocated = allocation is not None

    def channel_state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What a base station knows of the links now (no fading): every device's mean uplink SNR per W
        of transmit power over the whole uplink band, whether its noise scales with the band (a link
        budget), and its mean download rate (bit/s) over the downlink band."""
        return self.physics.mean_channel()

    def positions_m(self) -> np.ndarray | None:
        """Every device's position (x, y) in m, the base station at the origin; None if static."""
        return None if self.mobility is None else self.mobility.position_m.copy()

    @journaled
    def online_clients(self, needed: int, patience_s: float = 1e7) -> np.ndarray | None:
        """At the start of a round: wait (simulated time passes; nobody is charged) until at least
        ``needed`` devices are online and charged above their reserve, and return who is (bool [N]);
        None when devices are always available. When nothing can bring that many (no availability
        change nor harvesting pending), the round goes on with those there are; with none,
        :class:`NoDeviceAvailable`."""
        if self.availability is None and self.batteries is None:
            return None
        start = self.env.now
        while True:
            self._update_batteries()
            online = self._available()
            if np.count_nonzero(online) >= needed:
                return online
            waits = [] if self.availability is None else [self.availability.changed]
            if self.batteries is not None:
                recharge_s = self.batteries.seconds_to_reserve()
                recharge_s = recharge_s[(recharge_s > 0) & np.isfinite(recharge_s)]
                if len(recharge_s):  # at least a few ulps of the clock: a wait that does not move it would spin
                    waits.append(self.env.timeout(max(float(recharge_s.min()), 4 * float(np.spacing(self.env.now)))))
            if not waits or self.env.now - start > patience_s or self.env.peek() == float("inf"):
                if np.count_nonzero(online):  # nothing can bring more: the round goes on with fewer
                    return online
                raise NoDeviceAvailable(
                    f"no device can take part any more (simulated time {self.env.now:.4g} s): every battery is "
                    f"empty or under its reserve and nothing harvests, or no device will be online again")
            until = self.env.any_of(waits)
            try:
                self.env.run(until=until)
            except RuntimeError:  # SimPy: no event left, none of `waits` can come (e.g. the trace has ended)
                if until.triggered or self.env.peek() != float("inf"):
                    raise

    def _available(self) -> np.ndarray:
        online = np.ones(self.pop.num_clients, dtype=bool) if self.availability is None else self.availability.online.copy()
        return online if self.batteries is None else online & self.batteries.available()

    def _update_batteries(self) -> None:
        """Harvest since the last update, then draw what the ledger charged since (levels >= 0), radio tails
        that have run out included."""
        if self.batteries is None:
            return
        self._expire_tails()
        spent = self.ledger.client_totals()
        self.batteries.harvest(self.env.now - self._battery_time)
        self.batteries.draw(spent - self._battery_spent)
        self._battery_time, self._battery_spent = self.env.now, spent

    @journaled
    def battery_levels(self) -> np.ndarray | None:
        """Every device's battery level (J) now; None without batteries."""
        if self.batteries is None:
            return None
        self._update_batteries()
        return self.batteries.level_j.copy()

    def _upload_arrived(self) -> None:
        """Over-selection: once the phase has the uploads it needs, the clients still working are
        told to stop (status ``stopped``; their energy until now counts)."""
        self._arrived += 1
        if self._arrived == self._needed:
            for proc in self._running.values():
                if proc.is_alive and proc is not self.env.active_process:
                    proc.interrupt("stopped")

    def _went_offline(self, client: int) -> None:
        proc = self._running.get(client)
        if proc is not None and proc.is_alive:
            proc.interrupt("offline")

    @property
    def ledger(self) -> EnergyLedger:
        """Energy by client and category so far (phases simulated since the last read are booked
        first: a round's phases are then priced with one vectorised computation per category)."""
        self._book()
        return self._ledger

    @property
    def events(self) -> list[Event] | None:
        """Every activity as it happened (events.csv rows), in the order they ended."""
        self._book()
        return self._events

    def _book(self) -> None:
        self._phases_unbooked = 0
        if self._unbooked:
            unbooked, self._unbooked = self._unbooked, []
            book(self.pop, self._ledger, self._events, unbooked)

    # -- one phase ------------------------------------------------------------------------
    @journaled
    def price_phase(self, phase: PhaseRecord) -> dict[int, bool]:
        """Simulate the phase; return, per client, whether its whole chain completed."""
        env = self.env
        clients = sorted(phase.chains)
        plans = self.physics.plan(phase, clients)
        completed: dict[int, bool] = {}
        log: list[tuple] = []
        self._at = (phase.round, phase.phase)
        self._expire_tails()
        failed = self._failed_earlier(phase.round) if self.pop.p_fail > 0 else set()
        if self.batteries is not None:
            self._update_batteries()
            empty = self.batteries.empty()
            failed |= {c for c in clients if empty[c]}  # an empty device does nothing
        procs = [env.process(self._client(c, plans[c], completed, log, c in failed)) for c in clients]
        self._running = dict(zip(clients, procs))
        self._needed, self._arrived = phase.needed, 0
        if self.pop.p_fail > 0:
            self._schedule_failures(clients, plans, procs)
        if self.batteries is not None:
            self._schedule_depletion(clients, plans, procs)
        # A process (not a bare AllOf condition): AnyOf would strip a nested condition's callbacks
        # when the deadline fires first, and the AllOf would never trigger.
        everyone = env.process(self._wait_all(procs))
        self._phase_log = log  # tails charged while the phase runs
        if self.net.deadline_s is None:
            env.run(until=everyone)
        else:
            env.run(until=env.any_of([everyone, env.timeout(self.net.deadline_s)]))
            for proc in procs:
                if proc.is_alive:
                    proc.interrupt("deadline")
            if not everyone.processed:
                env.run(until=everyone)
        self._running = {}
        self._phase_log = None
        if log:
            self._unbooked.append((phase.round, phase.phase, log))
        self._phases_unbooked += 1
        if self._phases_unbooked >= 16:
            self._book()
        return completed

    def _wait_all(self, procs):
        yield self.env.all_of(procs)

    def _failed_earlier(self, round_: int) -> set[int]:
        """``devices.p_fail``: each device fails in a round with that probability (drawn once per
        round for every device, its own stream); the clients that already failed this round."""
        if self._failures is None or self._failures[0] != round_:
            n = self.pop.num_clients
            self._failures = (round_, self._fail_rng.random(n) < self.pop.p_fail, self._fail_rng.random(n))
            self._crashed = set()
        return set(self._crashed)

    def _schedule_failures(self, clients: list[int], plans: dict, procs: list) -> None:
        """A failing device fails at a uniform fraction of its work (nominal durations) in its first
        phase of the round; the rest of its round is lost."""
        _, fails, when = self._failures
        for client, proc in zip(clients, procs):
            if fails[client] and client not in self._crashed:
                self._crashed.add(client)
                self.env.process(self._fail_at(proc, when[client] * sum(self._nominal_seconds(plans[client]))))

    def _schedule_depletion(self, clients: list[int], plans: dict, procs: list) -> None:
        """A device whose battery cannot pay for its chain stops when it is empty (status
        ``battery``): at the moment its nominal schedule (steps back to back, each message after a
        promotion, waits and tails excluded) has spent its level; its work is lost, its energy counted. The steps' energies: the ledger's
        formulas, one vectorised call for the phase."""
        level = self.batteries.level_j
        mortal = [c for c in clients if np.isfinite(level[c])]
        if not mortal:
            return
        seconds = {c: self._nominal_seconds(plans[c]) for c in mortal}
        owner, codes, amounts = [], [], []
        for c in mortal:
            step_code, step_amount = step_codes(plans[c], seconds[c])
            owner += [c] * len(step_code)
            codes += step_code
            amounts += step_amount
        joules = energies_j(self.pop, np.array(owner), np.array(codes), np.array(amounts, dtype=np.float64)).tolist()
        latency_s, proc_of, k = self.net.access_latency_s, dict(zip(clients, procs)), 0
        promotion_w = self.pop.promotion_power_w
        for c in mortal:
            spent = elapsed = 0.0
            steps = plans[c]
            segments = []  # (seconds, joules): each message after a promotion (nominal: from an idle radio)
            for step, step_s, step_j in zip(steps, seconds[c], joules[k:k + len(steps)]):
                if step.kind != COMPUTE and latency_s > 0:
                    segments.append((latency_s, latency_s * float(promotion_w[c])))
                segments.append((step_s, step_j))
            for segment_s, segment_j in segments:
                if spent + segment_j > level[c]:
                    fraction = (level[c] - spent) / segment_j
                    self.env.process(self._fail_at(proc_of[c], elapsed + fraction * segment_s, "battery"))
                    break
                spent += segment_j
                elapsed += segment_s
            k += len(steps)

    def _nominal_seconds(self, steps: list[Step]) -> list[float]:
        """Each step's duration as planned: an FDMA upload's airtime alone on the band (it depends on
        the others' timing; a first coherence block in outage counts one block)."""
        return [step.duration_s if step.rates_bps is None
                else step.bits / step.rates_bps[0] if step.rates_bps[0] > 0 else self.net.coherence_s
                for step in steps]

    def _fail_at(self, proc, delay_s: float, cause: str = "failed"):
        yield self.env.timeout(delay_s)
        if proc.is_alive:
            proc.interrupt(cause)

    def _client(self, client: int, steps: list[Step], completed: dict, log: list, failed: bool = False):
        """One client's chain: its steps one after another; the chain ends at its first step that does not
        complete (a lost message, or an interrupt: deadline, offline, failure, battery, stopped), and the
        steps after it are neither run nor logged. Log rows: (client, kind, label, start, end, bits, charge
        code, cycles or seconds to charge, cycles, status)."""
        env = self.env
        if failed or (self.availability is not None and not self.availability.online[client]):
            completed[client] = False  # failed earlier in this round, or offline: does nothing
            return
        before_step = self.before_step
        latency_s = self.net.access_latency_s
        ok = True
        for step in steps:
            kind, activity = step.kind, step.activity
            doing = [_WAIT, env.now]  # what the client is doing (waiting, promoting its radio, working) since when
            try:
                if before_step is not None:
                    yield from before_step(client, step)
                if kind == COMPUTE:
                    self._log_wait(log, client, doing[1], env.now)
                    doing[:] = [_WORK, env.now]
                    yield env.timeout(step.duration_s)
                    log.append((client, "compute", activity.label, doing[1], env.now, 0.0, CAT_COMPUTE,
                                step.cycles, step.cycles, "ok"))
                    continue
                if not self._radio_connected(client, env.now) and latency_s > 0:  # idle radio: promotion first
                    self._log_wait(log, client, doing[1], env.now)
                    doing[:] = [_PROMOTION, env.now]
                    yield env.timeout(latency_s)
                    log.append((client, "promotion", activity.label, doing[1], env.now, 0.0,
                                _PROMOTION_CODE[kind], latency_s, 0.0, "ok"))
                    doing[:] = [_WAIT, env.now]
                if kind == DOWNLOAD:
                    self._start_transfer(log, client, doing)
                    yield env.timeout(step.duration_s)
                    lost = step.lost
                else:
                    lost = yield from self._upload(client, step, log, doing)
                log.append((client, activity.kind, activity.label, doing[1], env.now, step.bits, _CATEGORY[kind],
                            env.now - doing[1], 0.0, "lost" if lost else "ok"))
                self._transfer_ended(client, _TAIL_CODE[kind], activity.label)
                if lost:  # the chain ends here: what follows would be wasted (docs/model.md §6)
                    ok = False
                    break
                if kind == UPLOAD and self._needed is not None:
                    self._upload_arrived()
            except simpy.Interrupt as stop:  # the deadline, the device going offline, failing, empty, or stopped
                ok = False
                status = "cut" if stop.cause == "deadline" else stop.cause
                what, since = doing
                if what == _WAIT:  # in a plug-in's wait or the TDMA queue
                    self._log_wait(log, client, since, env.now)
                elif what == _PROMOTION:  # the radio falls back to idle
                    log.append((client, "promotion", activity.label, since, env.now, 0.0, _PROMOTION_CODE[kind],
                                env.now - since, 0.0, status))
                elif kind == COMPUTE:
                    done = (env.now - since) * (step.cycles_per_s or self._cpu_hz[client])
                    log.append((client, "compute", activity.label, since, env.now, 0.0, CAT_COMPUTE, done, done, status))
                else:  # the message did not get through: no bits delivered; the radio's tail follows
                    log.append((client, activity.kind, activity.label, since, env.now, 0.0, _CATEGORY[kind],
                                env.now - since, 0.0, status))
                    self._transfer_ended(client, _TAIL_CODE[kind], activity.label)
                break
        completed[client] = ok

    # -- the radio of each device: a state machine that lives across phases and rounds ------------
    # idle --(a message: promotion, network.access_latency_s at promotion_power_w)--> connected (transfer)
    # --(transfer ends)--> tail (tail_s at tail_power_w) --(tail_s without a transfer)--> idle;
    # a transfer asked for in the tail needs no promotion, and the tail ends when it starts (docs/model.md §8).
    def radio_connected_until_s(self) -> np.ndarray:
        """When each device's radio tail runs out (s; -inf: its radio is idle): a message asked for before then
        needs no promotion. What a base station knows of its devices' RRC states; changes nothing."""
        until = np.full(self.pop.num_clients, -np.inf)
        for client, tail in self._tails.items():
            until[client] = tail[0] + self._tail_s[client]
        return until

    def _radio_connected(self, client: int, now: float) -> bool:
        """Whether the client's radio is still connected (in the tail of its last transfer) at ``now``; a tail
        that ran out before is charged in full."""
        tail = self._tails.get(client)
        if tail is None:
            return False
        if now < tail[0] + self._tail_s[client]:
            return True
        self._end_tail(client, None)
        return False

    def _start_transfer(self, log: list, client: int, doing: list) -> None:
        """A transfer starts now: the wait before it is logged (idle where no tail covers it), the radio's tail
        ends (charged until now, at most tail_s)."""
        now = self.env.now
        if doing[0] == _WAIT:
            self._log_wait(log, client, doing[1], now)
        if client in self._tails:
            self._end_tail(client, now)
        doing[:] = [_WORK, now]

    def _transfer_ended(self, client: int, code: int, label: str) -> None:
        """A transfer ended now: the radio's tail starts (no tail if ``tail_s`` is 0: the radio is idle)."""
        if self._tail_s[client] > 0:
            now = self.env.now
            self._tails[client] = [now, now, code, label]

    def _charge_tail(self, client: int, until: float) -> None:
        """Log the client's tail from where it was last charged until ``until`` (at most tail_s after it began),
        under the round and phase being priced (at a round's end: its last phase)."""
        tail = self._tails[client]
        end = min(until, tail[0] + self._tail_s[client])
        seconds = end - tail[1]
        if seconds > 0 and self._tail_power_w[client] > 0:
            row = (client, "tail", tail[3], tail[1], end, 0.0, tail[2], seconds, 0.0, "ok")
            if self._phase_log is not None:
                self._phase_log.append(row)
            else:
                self._unbooked.append((*self._at, [row]))
        tail[1] = max(tail[1], end)

    def _end_tail(self, client: int, cut_at: float | None) -> None:
        """The client's tail ends: cut by a transfer starting at ``cut_at``, or run out in full (None)."""
        self._charge_tail(client, float("inf") if cut_at is None else cut_at)
        del self._tails[client]

    def _expire_tails(self) -> None:
        """Charge in full every tail that has run out by now (called at the start of every phase and wherever
        batteries are read: journaled calls only, so a replayed pricer books the same rows in the same order)."""
        now = self.env.now
        tail_s = self._tail_s
        for client in [c for c, tail in self._tails.items() if tail[0] + tail_s[c] <= now]:
            self._end_tail(client, None)

    @journaled
    def end_round(self, round_: int) -> None:
        """The round ends (its metrics are read next): the tails still running are charged up to now, and go on
        (the rest is charged in the rounds they run in), so that a round's energy is what it spent."""
        self._at = (round_, self._at[1] if self._at[0] == round_ else 0)
        self._expire_tails()
        for client in self._tails:
            self._charge_tail(client, self.env.now)

    @journaled
    def finish(self) -> None:
        """The run ends: every radio tail still running is charged in full (it runs out after the last
        message, as it would on the device), under the last round."""
        for client in list(self._tails):
            self._end_tail(client, None)

    def _log_wait(self, log: list, client: int, start: float, end: float) -> None:
        """A wait inside the chain (a plug-in's before_step, the TDMA queue, before a promotion): idle power,
        except the part inside the radio's tail, which the tail pays for (never both)."""
        tail = self._tails.get(client)
        if tail is not None:
            start = max(start, tail[0] + self._tail_s[client])
        if end - start > 1e-12 and self._idle_power_w[client] > 0:
            log.append((client, "idle", "wait", start, end, 0.0, CAT_IDLE, end - start, 0.0, "ok"))

    # -- uplink access (each returns whether the message was lost) ----------------------------
    def _timed_upload(self, client: int, step: Step, log: list, doing: list):
        """Dedicated band: the upload (all its attempts) takes its airtime."""
        self._start_transfer(log, client, doing)
        yield self.env.timeout(step.duration_s)
        return step.lost

    def _queued_upload(self, client: int, step: Step, log: list, doing: list):
        """TDMA: wait for the channel (idle, or the radio's tail: not transmission), then send at the full
        band's rate, keeping the channel for every attempt."""
        with self.tdma.request() as slot:
            yield slot
            self._start_transfer(log, client, doing)
            yield self.env.timeout(step.duration_s)
        return step.lost

    def _shared_upload(self, client: int, step: Step, log: list, doing: list):
        """FDMA: share the band with the uploads in progress. With retransmissions (or attempts that
        can fail), each attempt is a flow; whether it fails is decided on the share it holds when it
        starts."""
        self._start_transfer(log, client, doing)
        if step.rates_bps is None:  # a band share of its own (a controller's allocation): timed
            yield self.env.timeout(step.duration_s)
            return step.lost
        if step.fdma_attempts is None:  # one attempt that gets through
            yield from self._flow(client, step.bits, step.rates_bps, step.block_rates)
            return False
        for ok_rates, failed_rates, fails in step.fdma_attempts:
            failed = fails[len(self.band.flows)]  # n - 1 with n = the others + this one
            yield from self._flow(client, step.bits, failed_rates if failed else ok_rates)
            if not failed:
                return False
        return True

    def _flow(self, client: int, bits: float, rates_bps: list[float], block_rates=None):
        flow = self.band.transmit(client, bits, rates_bps, block_rates)
        try:
            yield flow.done
        except simpy.Interrupt:
            self.band.cancel(flow)
            raise
