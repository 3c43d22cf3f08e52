"""The co-simulation: SimPy processes charge every activity in simulated time and energy.

One ``simpy.Environment`` for the whole run; simulated time is continuous across rounds. In a
phase (docs/architecture.md, "A round's life"), each client with work is a SimPy process that
runs its chain of activities (download -> compute -> upload ...) one after another, starting
when the phase starts. Uplinks use the configured access: a dedicated band (an upload is a
timeout), FDMA processor sharing (:class:`~edgefl.sim.band.SharedBand`, a band that re-plans
when an upload starts or ends) or TDMA (a ``simpy.Resource`` of capacity 1, first come first
served). A deadline is a timeout: the clients still busy when it fires are interrupted; the
energy they spent until then counts, their upload does not arrive.

This is the core: it runs client chains in phases and nothing else. Availability, batteries,
mobility, failures, over-selection, a controller's knobs and the radio's states are components
(:mod:`edgefl.sim.component`, :mod:`edgefl.sim.components`, :mod:`edgefl.sim.radio`), called at
their hooks. A component can change a CPU's frequency in the middle of a computation
(:meth:`SimPyPricer.set_cpu_hz`): the cycles left are re-timed and each segment is logged, and
charged, at the frequency it ran at; every log row carries the knobs it ran with, so energy is
booked from what happened, whenever it is booked.

Speed comes from doing a phase's physics in numpy at once before its processes start
(:class:`~edgefl.sim.physics.PhasePhysics`: fading, rates, durations, losses) and from pricing
energy per phase, vectorised per category (:func:`~edgefl.sim.booking.book`): the processes
themselves only wait on timeouts and shared resources.
"""

from __future__ import annotations

from collections import deque
from functools import partial

import numpy as np
import simpy
from simpy.core import EmptySchedule
from simpy.events import URGENT

from edgefl.deployment import NetworkParams, Population
from edgefl.plugins import core_fault, positive_finite, returned_fault, shown
from edgefl.sim.access import RETIME, AirCompUplink, DedicatedUplink, make_uplink
from edgefl.sim.activities import Event, PhaseRecord
from edgefl.sim.booking import LiveLog, LogRow, PopulationLists, book, listed_rows_energies_j
from edgefl.sim.chain import OwnClock, chain, cut_rows, in_end_order, runs_inline
from edgefl.sim.chain import paths as chain_paths
from edgefl.sim.component import HOOKS, Component, overriding
from edgefl.sim.components import default_components
from edgefl.sim.devices import DeviceState
from edgefl.sim.journal import journaled
from edgefl.sim.participation import can_change_participation
from edgefl.sim.physics import PhasePhysics
from edgefl.sim.radio import RadioStates
from energy import EnergyLedger

SAME_INSTANT_S = 1e-12  # s: chain ends closer than this are one instant (relative beyond 1 s of simulated time)


def same_instant_s(t: float) -> float:
    """How close (s) two event times near ``t`` are to be one instant: SAME_INSTANT_S, relative to t beyond 1 s (a
    float's last bits at t = 10^6 s are about 10^-10 s)."""
    return SAME_INSTANT_S * max(1.0, abs(t))


class NoDeviceAvailable(RuntimeError):
    """No device can take part in a round, and none ever will (empty batteries, no harvesting, or an
    availability trace that has ended): the run stops there."""


class SimPyPricer:
    """The core: co-simulates phases of client chains on one SimPy environment; keeps the energy
    ledger and the event log. Everything else is a component (:mod:`edgefl.sim.component`):
    ``components`` (default: :func:`~edgefl.sim.components.default_components`, what the population
    and network need) are attached after the radio's state machine, and called at their hooks in order.

    ``record_events=False`` keeps only the ledger and the clock (re-pricing a trace for a sweep
    needs no event log). ``before_step`` (a generator function ``(client, step)``), if set, adds a
    wait before every step of every chain, as a component's ``before_step`` hook does.
    """

    journal: list | None = None  # the state-changing calls received, when a run checkpoints (edgefl.sim.journal)
    _journal_depth = 0

    def __init__(
        self,
        network: NetworkParams,
        population: Population,
        seed: int,
        record_events: bool = True,
        components: list[Component] | None = None,
        devices: DeviceState | None = None,
    ):
        self.net = network
        self.pop = population  # the devices as the scenario built them (never written) ...
        self.devices = DeviceState.of(population) if devices is None else devices  # ... and as they are now
        self.env = simpy.Environment()
        fading_rng = np.random.default_rng(np.random.SeedSequence([seed, 0xFAD1]))
        self.physics = PhasePhysics(network, population, fading_rng, self.devices)
        self._ledger = EnergyLedger(population.num_clients)
        # the population's values as lists, for every booking in floats (edgefl.sim.booking)
        self._lists = PopulationLists(population)
        self._events: list[Event] | None = [] if record_events else None
        self._unbooked: list[tuple[int, int, list]] = []  # phases simulated, energy not yet booked (LogRow rows)
        self._phases_unbooked = 0
        self._phase_log: list | None = None  # the log of the phase running
        self._running: dict = {}  # client -> its process, while its chain runs
        self.chain_states: dict = {}  # client -> (its step, what it does since when): its chain's step running
        # Per round ended (end_round): [the ledger's energy by category at its end (None until booked), J the run had
        # committed beyond its ledger then (spent by chains cut, then radio tails to run)]; the last one's; and the
        # round ends not booked yet, as (entries of _unbooked before it, its entry): read when booked (_book), so
        # that re-pricing books a few batches rather than one per round (benchmarks [5]).
        self._round_energy: dict[int, list] = {}
        self._last_round_energy: list | None = None
        self._round_ends: list[tuple[int, list]] = []
        # Chains started by start_chains: client -> its process; who completed; (when, client) of those ended
        # and not yet taken by next_arrival; where they log (the round in progress's rows).
        self._flight: dict = {}
        self._flight_done: dict[int, bool] = {}
        self._ended: list[tuple[float, int]] = []
        self._live = LiveLog()
        self._computing: dict = {}  # client -> its process, while it computes (set_cpu_hz re-times it) ...
        self._watch_cpu = False  # ... kept only when a component declares changes_cpu_rate (the engine's overhead)
        self._user_wait = None
        self.knobs_changed()
        self._exposed: dict[str, Component] = {}  # per-device value -> the component that keeps it
        self.columns: dict[str, str] = {}  # the metrics.csv columns the components add (name -> what it holds)
        self.radio = RadioStates(population)
        self.uplink = make_uplink(network, self.env, self.radio, seed)  # edgefl.sim.access; a component
        self.downlink = DedicatedUplink(self.env, self.radio, link="downlink")  # every download on its own band
        self.components: list[Component] = []
        for component in [
            self.radio,
            self.uplink,
            *(default_components(network, population, seed) if components is None else components),
        ]:
            self._attach(component)
        self._components_changed()  # (once for them all: a sweep builds a pricer per channel point, benchmarks [5])

    def add_component(self, component: Component) -> None:
        """Attach a component (edgefl.sim.component) after those there are; the core calls its hooks from
        now on. (Not part of a checkpoint: a resumed run is built with the components of its scenario.)"""
        self._attach(component)
        self._components_changed()

    def _attach(self, component: Component) -> None:
        self.components.append(component)
        self.uplink.retimable |= component.changes_uplink_rate
        self.downlink.retimable |= component.changes_downlink_rate
        self._watch_cpu |= component.changes_cpu_rate
        for name in component.exposes:
            if name in self._exposed or name in CORE_VALUES:
                keeper = self._exposed.get(name, self)
                raise ValueError(f"{type(component).__name__} exposes {name!r}, which {type(keeper).__name__} keeps")
            self._exposed[name] = component
        self.columns.update(component.columns)
        component.attach(self)

    def _components_changed(self) -> None:
        """What the core reads of its components: their hooks, whether any acts during phases, the chains' paths."""
        self._quiet = all(not c.acts_during_phases for c in self.components)  # (_on_own_clocks)
        self._hooks = {hook: overriding(self.components, hook) for hook in HOOKS}
        self._may_start, self._on_upload = self._hooks["chain_may_start"], self._hooks["upload_arrived"]
        self._on_compute_start, self._on_compute_end = self._hooks["compute_start"], self._hooks["compute_end"]
        self.before_step = self._user_wait
        self.chain_paths = chain_paths(self)  # (read by every chain: the components' flags and hooks decide them)

    @property
    def before_step(self):
        return self._user_wait

    @before_step.setter
    def before_step(self, wait) -> None:
        self._user_wait = wait  # after the components' waits
        self._before_step = self._hooks["before_step"] + ([wait] if wait is not None else [])

    @property
    def now(self) -> float:
        return self.env.now

    @property
    def can_change_participation(self) -> bool:
        return can_change_participation(self.net, self.pop.availability, self.pop.p_fail)

    # -- what components use --------------------------------------------------------------
    def knobs_changed(self) -> None:
        """The devices' CPU frequencies or transmit powers changed (a controller's knobs): the next
        activities run at them."""
        self._knob_hz = self.devices.cpu_hz.tolist()  # what the physics plans compute times with
        self._cpu_hz = list(self._knob_hz)  # what each CPU runs at now
        self._tx_power_w = self.devices.tx_power_w.tolist()

    def cpu_hz_of(self, client: int) -> float:
        """The frequency (Hz) the client's CPU runs at now."""
        return self._cpu_hz[client]

    def knob_cpu_hz(self, client: int) -> float:
        """The frequency (Hz) the scenario or the controller set for the client's CPU."""
        return self._knob_hz[client]

    def set_cpu_hz(self, client: int, hz: float) -> None:
        """The client's CPU runs at ``hz`` from now on; a computation in progress is re-timed (the cycles
        left at the new speed), each segment charged at its own frequency."""
        if not self._watch_cpu:
            raise core_fault(
                f"set_cpu_hz({client}, {shown(hz)})",
                "a CPU frequency changed, but no component declared changes_cpu_rate = True "
                "(edgefl.sim.component): set it on the component's class",
                RuntimeError,
            )
        if not positive_finite(hz):
            raise core_fault(f"set_cpu_hz({client}, {shown(hz)})", "a CPU frequency is a finite number of Hz > 0")
        self._cpu_hz[client] = hz
        proc = self._computing.get(client)
        if proc is not None and proc.is_alive and proc is not self.env.active_process:
            proc.interrupt(RETIME)  # (from the chain itself, e.g. a compute_start hook: it re-times after the hooks)

    def set_tx_power_w(self, client: int, watts: float) -> None:
        """The client transmits at ``watts`` from its next upload on (what it is charged at), until the knobs
        change (:meth:`knobs_changed`)."""
        if not positive_finite(watts):
            raise core_fault(
                f"set_tx_power_w({client}, {shown(watts)})", "a transmit power is a finite number of W > 0"
            )
        self._tx_power_w[client] = watts

    @property
    def analog_uplink(self) -> bool:
        """Whether the server receives uploads as an analog sum (over-the-air computation): see :meth:`superpose`."""
        return self.uplink.analog

    def superpose(self, updates, clients=None):
        """The arrived clients' update vectors [K, d] (a torch tensor; ``clients`` [K]: whose) as the server receives
        them: as sent (digital), or each plus its cell's noise vector, so that their mean is the over-the-air
        estimate."""
        return self.uplink.superpose(updates, clients)

    @journaled
    def analog_noise(self, values: int) -> np.ndarray:
        """``values`` standard normal draws of the analog uplink's aggregation noise (its own stream). Journaled: the
        engine asks for it outside the pricer's phases, so a resumed run draws it again and its stream goes on where
        the interrupted run's was (edgefl.checkpoint)."""
        assert isinstance(self.uplink, AirCompUplink)  # (only an analog uplink asks)
        return self.uplink.noise(values)

    def set_uplink_rate_factor(self, client: int, factor: float) -> None:
        """The client's uplink rate is ``factor`` times the planned one from now on (e.g. interference); an
        upload in progress is re-timed (FDMA: the band re-planned)."""
        _check_rate_factor("set_uplink_rate_factor", client, factor, self.uplink.retimable, "changes_uplink_rate")
        self.uplink.rate_changed(client, factor)

    def set_downlink_rate_factor(self, client: int, factor: float) -> None:
        """The client's download rate is ``factor`` times the planned one from now on; a download in progress
        is re-timed."""
        _check_rate_factor("set_downlink_rate_factor", client, factor, self.downlink.retimable, "changes_downlink_rate")
        self.downlink.rate_changed(client, factor)

    def log_rows(self, at: tuple[int, int], rows: list) -> None:
        """Log rows outside a chain (radio tails; :class:`LogRow`'s fields, plain tuples or LogRows), in order: in the
        phase running, or under ``at`` (round, phase), as one entry (a round's end logs ~30 tails: benchmarks [8]).
        The caller hands the list over (it keeps no reference to it)."""
        if not rows:
            return
        if self._phase_log is not None:
            self._phase_log.extend(rows)
        else:
            self._unbooked.append((*at, rows))

    def current_log(self) -> list:
        """The rows logged in the phase running, not booked yet (empty between phases)."""
        return self._phase_log or []

    def logged(self) -> tuple[int, int, int, int]:
        """A stamp of what was logged and booked: it changes whenever a row is logged or the ledger is written, so a
        component can tell that nothing was charged since it last read the batteries (RadioStates.expire_tails)."""
        return self._ledger.changes, len(self._unbooked), len(self._live.rows), len(self._phase_log or ())

    def interrupt(self, client: int, cause: str) -> None:
        """Stop the client's chain now, if it runs (its status: ``cause``)."""
        proc = self._running.get(client)
        if proc is not None and proc.is_alive:
            proc.interrupt(cause)

    def interrupt_all(self, cause: str) -> None:
        """Stop every chain still running (except the one calling)."""
        for proc in self._running.values():
            if proc.is_alive and proc is not self.env.active_process:
                proc.interrupt(cause)

    def interrupt_after(self, proc, delay_s: float, cause: str) -> None:
        """Stop a chain's process ``delay_s`` from now if it still runs then."""
        self._cut_after([proc], delay_s, cause)

    def _cut_after(self, procs: list, delay_s: float, cause: str) -> None:
        """:meth:`interrupt_after` for each of ``procs``, in order, without a process each: one urgent event, scheduled
        now as a process's start would be, sets a timeout per chain when it is processed (where such a process would
        have set its own: the same order of events), whose callback interrupts the chain if it still runs (benchmarks
        [8]: 3 of a dispatched chain's 11 SimPy events were its deadline's process)."""
        env = self.env

        def set_timeouts(_) -> None:
            for proc in procs:
                env.timeout(delay_s).callbacks.append(partial(_interrupt_if_alive, proc, cause))

        start = env.event()
        start.callbacks.append(set_timeouts)
        start._ok, start._value = True, None  # (triggered, as SimPy's Initialize of a process: urgent, now)
        env.schedule(start, URGENT)

    # -- the pricer's calls (journaled: a checkpoint replays them) ---------------------------
    @journaled
    def start_round(self, needed: int) -> np.ndarray | None:
        """At the start of a round: components bring devices to now (they move, links rebuilt), then the
        server waits for enough of them (:meth:`online_clients`); returns who is online."""
        for hook in self._hooks["round_start"]:
            hook()
        online = self.online_clients(needed)
        for hook in self._hooks["round_ready"]:
            hook()
        return online

    @journaled
    def allocate(self, allocation) -> None:
        """A controller's knobs for the next phase (an :class:`edgefl.control.Allocation`; None: the
        scenario's values): CPU frequencies, transmit powers and FDMA band shares (the Knobs component).
        The phases simulated before keep the knobs they ran with (each log row carries them)."""
        for hook in self._hooks["allocate"]:
            hook(allocation)

    def radio_connected_until_s(self) -> np.ndarray:
        """When each device's radio tail runs out (s; -inf: idle; :meth:`RadioStates.connected_until_s`)."""
        return self.radio.connected_until_s()

    def channel_state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What a base station knows of the links now (no fading): every device's mean uplink SNR per W
        of transmit power over the whole uplink band, whether its noise scales with the band (a link
        budget), and its mean download rate (bit/s) over the downlink band."""
        return self.physics.mean_channel()

    def positions_m(self) -> np.ndarray | None:
        """Every device's position (x, y) in m, the base station at the origin; None if static."""
        return self._device_value("position_m")

    @journaled
    def device_value(self, name: str) -> np.ndarray | None:
        """The per-device value ``name`` now (edgefl.sim.component.DEVICE_VALUES: ``battery_j``, ``cpu_hz``,
        ``tx_power_w``, ...): an array [N], or None when no component keeps it. (Journaled: reading a value may
        bring its component's state to now.)"""
        return self._device_value(name)

    def _device_value(self, name: str) -> np.ndarray | None:
        if name == "cpu_hz":
            return np.array(self._cpu_hz)
        if name == "tx_power_w":
            return np.array(self._tx_power_w)
        keeper = self._exposed.get(name)
        return None if keeper is None else keeper.device_value(name)

    @journaled
    def component_metrics(self) -> dict[str, float]:
        """The components' metrics.csv columns (:attr:`columns`) at the end of a round. (Journaled: a component's
        ``metrics()`` may bring its state to now.)"""
        values: dict[str, float] = {}
        for component in self.components:
            if component.columns:
                got = component.metrics()
                if not isinstance(got, dict) or list(got) != list(component.columns):
                    raise returned_fault(
                        component,
                        component.metrics,
                        got,
                        f"expected a dict of its columns, {list(component.columns)}, in that order",
                        f"the component {type(component).__name__}",
                    )
                values.update(got)
        return values

    def serving_cells(self) -> np.ndarray | None:
        """Every device's serving cell now (a copy; it changes at handovers); None with one cell."""
        return None if self.devices.cell is None else self.devices.cell.copy()

    @journaled
    def online_clients(self, needed: int, patience_s: float = 1e7) -> np.ndarray | None:
        """At the start of a round: wait (simulated time passes; nobody is charged) until at least
        ``needed`` devices can take part (every component that restricts who can agrees), and return
        who can (bool [N]); None when no component restricts it. When nothing can bring that many (no
        component's wake-up pending), the round goes on with those there are; with none,
        :class:`NoDeviceAvailable`."""
        restrict, settle, wakeups = self._hooks["restrict"], self._hooks["settle"], self._hooks["wakeups"]
        if not restrict:
            return None
        start = self.env.now
        while True:
            for hook in settle:
                hook()
            online = np.ones(self.pop.num_clients, dtype=bool)
            for hook in restrict:
                online = hook(online)
            if np.count_nonzero(online) >= needed:
                return online
            waits = [event for hook in wakeups for event in hook()]
            if not waits or self.env.now - start > patience_s or self.env.peek() == float("inf"):
                if np.count_nonzero(online):  # nothing can bring more: the round goes on with fewer
                    return online
                raise NoDeviceAvailable(
                    f"no device can take part any more (simulated time {self.env.now:.4g} s): every battery is "
                    f"empty or under its reserve and nothing harvests, or no device will be online again"
                )
            until = self.env.any_of(waits)
            try:
                self.env.run(until=until)
            except RuntimeError:  # SimPy: no event left, none of `waits` can come (e.g. the trace has ended)
                if until.triggered or self.env.peek() != float("inf"):
                    raise

    @journaled
    def battery_levels(self) -> np.ndarray | None:
        """Every device's battery level (J) now; None without batteries."""
        return self._device_value("battery_j")

    @journaled
    def end_round(self, round_: int) -> None:
        """The round ends (its metrics are read next): what runs on (radio tails) is charged up to now, and the
        energy the run has committed now is computed (:meth:`committed_energy_j`)."""
        self._live.close_round(self._unbooked, round_)  # (chains still running log under the round they end in)
        for hook in self._hooks["round_end"]:
            hook(round_)
        entry = self._round_energy[round_] = self._last_round_energy = [None, 0.0, 0.0]
        self._round_ends.append((len(self._unbooked), entry))  # (the ledger as booked up to here: read when booked)
        entry[1:] = self._committed_beyond_ledger_j()

    def committed_energy_j(self) -> float:
        """The energy (J) the run had committed at the last round's end (docs/model.md §8): what was booked, plus
        what the radios still in a tail would spend if no further message came, plus, for the chains of an
        asynchronous server still running, what cutting them then costs (the part done, the tail after a cut
        message): what stopping there costs, the run's ledger once :meth:`finish` is called then."""
        return 0.0 if self._last_round_energy is None else self._energy_at(self._last_round_energy)[1]

    def round_end_energy(self, round_: int) -> tuple[dict[str, float], float]:
        """The ledger's energy by category (J) at the end of round ``round_`` (its last :meth:`end_round`) and the
        energy committed then (:meth:`committed_energy_j`): read after the rounds that follow were priced (a
        re-pricing reads every round's at the end: benchmarks [5]), the numbers read at the round's end."""
        return self._energy_at(self._round_energy[round_])

    def _energy_at(self, entry: list) -> tuple[dict[str, float], float]:
        if entry[0] is None:
            self._book()
        by_category, spent_j, pending_j = entry
        booked = sum(by_category.values())  # (as metrics.csv's energy_j sums it: equal when none runs on)
        return dict(by_category), booked + spent_j + pending_j

    def _committed_beyond_ledger_j(self) -> tuple[float, float]:
        """What the run has committed now beyond its ledger (J): what the chains of an asynchronous server still
        running would spend if cut now, and what the radio tails will still spend then."""
        rows, cut = [], set()
        for client, proc in self._flight.items():  # an asynchronous server's chains still running: cut now
            state = self.chain_states.get(client)
            if state is not None and proc.is_alive:
                step, doing = state
                step_rows, tail_follows = cut_rows(self, client, step, doing, "aborted")
                rows += step_rows
                if tail_follows:
                    cut.add(client)
        spent: dict[int, float] = {}
        if rows:
            for row, j in zip(rows, listed_rows_energies_j(self.pop, rows, self._lists)):
                spent[row[0]] = spent.get(row[0], 0.0) + j
        return sum(spent.values()), self.radio.pending_j(spent, cut)

    @journaled
    def finish(self) -> None:
        """The run ends: the chains of an asynchronous server still running are cut now (status ``aborted``:
        the part done is charged, a message cut mid-way is followed by its tail), then what still runs on
        (radio tails) is charged in full, under the last round."""
        running = [proc for proc in self._flight.values() if proc.is_alive]
        if running:
            self._live.round -= 1  # (the last round's, not the next one's)
            for proc in running:
                proc.interrupt("aborted")
            self.env.run(until=self.env.all_of(running))
        for hook in self._hooks["run_end"]:
            hook()

    # -- phases of chains -------------------------------------------------------------------
    @journaled
    def price_phase(self, phase: PhaseRecord) -> dict[int, bool]:
        """Simulate the phase: its chains start now, and the phase ends when the last one ends, or at
        the deadline (the chains still running are cut); return, per client, whether its whole chain completed."""
        completed: dict[int, bool] = {}
        log: list[LogRow] = []
        if self._on_own_clocks(phase):
            last = self._start_on_own_clocks(phase, completed, log)
            self._phase_log = log  # (as below: the phase's start hooks log outside it)
            self._pass(last)  # the core's clock goes where the last chain ended
        else:
            self._run_processes(phase, completed, log)
        self._running = {}
        self._phase_log = None
        if log:
            self._unbooked.append((phase.round, phase.phase, log))
        self._phases_unbooked += 1
        if self._phases_unbooked >= 16:
            self._book()
        return completed

    def _on_own_clocks(self, phase: PhaseRecord) -> bool:
        """Whether the phase's chains may run one after another, each at once on its own clock (chain.OwnClock),
        rather than as SimPy processes: the same chain code, times and rows, where nothing can see or act on a chain
        while it runs: every step inline (chain.runs_inline: no wait, no shared channel, no re-timing, no radio
        promotion or tail), no component that acts during phases (Component.acts_during_phases), no deadline, no
        over-selection (``phase.needed``), no chain of an asynchronous server running. Where the event log is kept,
        the rows are then put in the order the processes would have ended them (chain.in_end_order). Re-pricing a
        trace for a sweep (benchmarks [5]), a synchronous co-simulated run on a plain network (benchmarks [3])."""
        return (
            self._quiet
            and phase.needed is None
            and self.net.deadline_s is None
            and not self._flight
            and runs_inline(self)
        )

    def _pass(self, clock: OwnClock) -> None:
        """The core's clock goes to ``clock.now``, where the chain that ends last ended. Where no other event is due
        by then and SimPy's sum (now + delay) lands on it exactly: in one timeout (benchmarks [5]: the process below
        was 3 of a phase's 4 events); else through that chain's waits (:meth:`_passing`)."""
        env, now, end = self.env, self.env.now, clock.now
        while env.peek() <= now:  # what is due now first (e.g. the stop event SimPy leaves queued at every run's end)
            env.step()
        if env.peek() > end and now + (end - now) == end:
            env.timeout(end - now)  # (a timeout, not until=end: the clock keeps the sum's type) ...
            env.step()  # ... and nothing else is due by then: the next event is that timeout (no run loop)
        else:
            env.run(until=env.process(self._passing(clock)))

    def _passing(self, clock: OwnClock):
        """A process that passes ``clock``'s time: in one timeout where SimPy's sum (now + delay) lands on it
        exactly, else through its waits one after another (the same float sums as the clock's)."""
        now = self.env.now
        if now + (clock.now - now) == clock.now:
            yield self.env.timeout(clock.now - now)
        else:
            for seconds in clock.waits:
                yield self.env.timeout(seconds)

    def _run_processes(self, phase: PhaseRecord, completed: dict, log: list) -> None:
        """The phase's chains as SimPy processes, until the last ends (or the deadline cuts those still running)."""
        env = self.env
        procs = self._start(phase, completed, log)
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

    def _wait_all(self, procs):
        """Ends when every one of ``procs`` has ended: each waited for in turn (one that has ended already is passed
        at once), not an AllOf condition, whose check per process and value over them all cost 3 % of an FDMA +
        Rayleigh phase (benchmarks [3]); the same events, but for the condition's own."""
        for proc in procs:
            yield proc

    def _planned(self, phase: PhaseRecord, physics: PhasePhysics | None = None) -> tuple[list[int], dict, set[int]]:
        """The phase's clients, their chains' steps (the plan of ``physics``, by default the pricer's) and those that
        do nothing (the components' phase_start hooks)."""
        clients = sorted(phase.chains)
        plans = (physics or self.physics).plan(phase, clients)
        skip: set[int] = set()
        for hook in self._hooks["phase_start"]:
            skip |= hook(phase, clients, plans)
        return clients, plans, skip

    def _start(self, phase: PhaseRecord, completed: dict, log) -> list:
        """Start the phase's chains now, as processes (components' phase_start and chains_started hooks around it)."""
        clients, plans, skip = self._planned(phase)
        procs = [self.env.process(chain(self, c, plans[c], completed, log, c in skip)) for c in clients]
        self._running.update(zip(clients, procs))
        for hook in self._hooks["chains_started"]:
            hook(clients, plans, procs)
        return procs

    def _start_on_own_clocks(self, phase: PhaseRecord, completed: dict, log) -> OwnClock:
        """Run the phase's chains now, each at once on its own clock (:meth:`_on_own_clocks`); the clock of the one
        that ends last."""
        clients, plans, skip = self._planned(phase)
        now = self.env.now
        last, clock = OwnClock(now), OwnClock(now)  # (two clocks for all the chains: the last one's and the next's)
        # each chain's rows in the log, for the event log's order (chain.in_end_order)
        spans: list[tuple[int, int]] | None = [] if self._events is not None else None
        run = deque[None](maxlen=0).extend  # runs a chain to its end (one deque for them all)
        for c in clients:
            first = len(log)
            run(chain(self, c, plans[c], completed, log, c in skip, clock))
            if spans is not None:
                spans.append((first, len(log)))
            if clock.now > last.now:
                last, clock = clock, last
            clock.now = now  # (the next chain's clock, set back to the phase's start)
            clock.waits.clear()
        if spans:
            log[:] = in_end_order(log, spans)
        return last

    @journaled
    def start_chains(self, phase: PhaseRecord) -> None:
        """Start the phase's chains now and return at once (no simulated time passes): chains that run while
        the server works (an asynchronous server, edgefl.sim.engine). A client has at most one chain running.
        With ``network.deadline_s``, each chain is cut ``deadline_s`` after it starts. Their activities are
        logged under the round in progress when each ends; :meth:`next_arrival` waits for them."""
        busy = [c for c in phase.chains if c in self._flight]
        if busy:
            raise ValueError(f"clients {sorted(busy)} already have a chain running")
        procs = self._start(phase, self._flight_done, self._live)
        for client, proc in zip(sorted(phase.chains), procs):
            self._in_flight(client, proc)
        if self.net.deadline_s is not None:
            self._cut_after(procs, self.net.deadline_s, "deadline")

    def _in_flight(self, client: int, proc) -> None:
        """The client's chain ``proc`` runs while the server works: :meth:`next_arrival` waits for it."""
        self._flight[client] = proc
        proc.callbacks.append(lambda _, client=client: self._ended.append((self.env.now, client)))

    @journaled
    def next_arrival(self) -> tuple[int, bool] | None:
        """Let simulated time pass until the next chain started by :meth:`start_chains` ends; return (client,
        completed: its whole chain got through). Chains ending at the same instant come in client order.
        None when no such chain is running."""
        env, ended = self.env, self._ended
        if not ended:
            if not self._flight:
                return None
            # until one of them ends (its process's callback lists it): the events env.run(until=env.any_of(...))
            # would process, in the same order, without a condition over every chain at each update (benchmarks [8])
            try:
                while not ended:
                    env.step()
            except EmptySchedule:
                raise RuntimeError(f"no event left, and none of the chains running ended: {sorted(self._flight)}")
            # every chain that ends at this instant, to take them in client order (times that agree in exact
            # arithmetic may differ in their last bits: within SAME_INSTANT_S they are one instant)
            while env.peek() <= env.now + same_instant_s(env.now):
                env.step()
        self._ended.sort()
        first = self._ended[0][0]
        at_first = [entry for entry in self._ended if entry[0] <= first + same_instant_s(first)]
        taken = min(at_first, key=lambda entry: entry[1])  # the lowest client of the first instant
        self._ended.remove(taken)
        client = taken[1]
        del self._flight[client]
        self._running.pop(client, None)
        return client, self._flight_done.pop(client)

    def arrived_by_now(self) -> bool:
        """Whether a chain started by :meth:`start_chains` has ended and :meth:`next_arrival` has not returned it
        yet (taking it would let no time pass): the server handles every upload that has arrived before it
        refills free slots."""
        return bool(self._ended)

    # -- energy, booked from what happened ---------------------------------------------------
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
        if not (self._unbooked or self._round_ends or self._live.rows):  # (nothing to book: most ledger reads)
            return
        self._live.flush(self._unbooked)
        ends, self._round_ends = self._round_ends, []
        unbooked, self._unbooked = self._unbooked, []
        read_after = [at for at, _ in ends]
        totals = book(self.pop, self._ledger, self._events, unbooked, read_after, self._lists) if unbooked else []
        if ends:  # (the ledger's energy by category at each of those rounds' ends)
            for (_, entry), by_category in zip(ends, totals or [self._ledger.by_category()] * len(ends)):
                entry[0] = by_category


def _interrupt_if_alive(proc, cause: str, _timer) -> None:
    """A timer's callback (SimPyPricer._cut_after): interrupt ``proc`` with ``cause`` if it still runs."""
    if proc.is_alive:
        proc.interrupt(cause)


CORE_VALUES = ("cpu_hz", "tx_power_w")  # the per-device values the core itself keeps (device_value)


def _check_rate_factor(setter: str, client: int, factor, declared: bool, flag: str) -> None:
    """A rate factor a component sets (core.set_uplink_rate_factor / set_downlink_rate_factor): declared by its
    class, finite and > 0 (a PluginError naming a plug-in that breaks the rule)."""
    if not declared:
        raise core_fault(
            f"{setter}({client}, {shown(factor)})",
            f"a rate changed, but no component declared {flag} = True (edgefl.sim.component): set it on the "
            "component's class",
            RuntimeError,
        )
    if not positive_finite(factor):
        raise core_fault(f"{setter}({client}, {shown(factor)})", "a rate factor is a finite number > 0 (1: as planned)")
