"""The built-in components of the co-simulation (edgefl.sim.component): each a small class with its own
state and SimPy processes. :func:`default_components` picks those a population and network need."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from channel.cells import handover
from edgefl.deployment import NetworkParams, Population
from edgefl.sim.availability import Availability
from edgefl.sim.booking import listed_energies_j, rows_energies_j, step_codes
from edgefl.sim.component import Component
from edgefl.sim.mobility import RandomWaypoint
from edgefl.sim.physics import COMPUTE
from energy import BatteryBank


def _rng(seed: int, stream: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed, stream]))


class Stragglers(Component):
    """``devices.slowdown``: a straggler's computations take longer. A factor drawn once per round for every
    device (its own stream; exponential: 1 + Exp(mean) >= 1, a shifted exponential, Lee et al. 2018;
    lognormal: exp(sigma·N(0, 1)), median 1) stretches the time of its compute steps: its cycles per
    second fall, its cycles and its CPU's frequency (what its energy is charged at) do not."""

    acts_during_phases = False  # (it stretches the plans at a phase's start)

    def __init__(self, population: Population, seed: int):
        self.pop = population
        self._rng = _rng(seed, 0x5104)
        self._factors: tuple[int, np.ndarray] | None = None  # (round, factor per device)

    def phase_start(self, phase, clients, plans) -> set[int]:
        compute = [(c, step) for c in clients for step in plans[c] if step.kind == COMPUTE]
        if compute:
            factor, cpu_hz = self._factors_in(phase.round), self.core.devices.cpu_hz
            for c, step in compute:
                # Python floats, not numpy scalars (the same products): a step's time reaches the SimPy clock, and a
                # numpy scalar there makes every later sum of simulated time one (benchmarks [8])
                stretch = float(factor[c])
                step.duration_s *= stretch
                step.cycles_per_s = float(cpu_hz[c]) / stretch
        return set()

    def _factors_in(self, round_: int) -> np.ndarray:
        if self._factors is None or self._factors[0] != round_:
            pop = self.pop
            if pop.slowdown == "exponential":
                factor = 1.0 + self._rng.exponential(pop.slowdown_mean, size=pop.num_clients)
            else:
                factor = np.exp(pop.slowdown_sigma * self._rng.standard_normal(pop.num_clients))
            self._factors = (round_, factor)
        return self._factors[1]


class Failures(Component):
    """``devices.p_fail``: each device fails in a round with that probability (drawn once per round for
    every device, its own stream), at a uniform fraction of its work (nominal durations) in its first
    phase of the round; the rest of its round is lost (status ``failed``)."""

    def __init__(self, population: Population, seed: int):
        self.p_fail, self.n = population.p_fail, population.num_clients
        self._rng = _rng(seed, 0xFA11)
        self._failures: tuple[int, np.ndarray, np.ndarray] | None = None  # (round, fails, when in [0, 1))
        self._crashed: set[int] = set()  # clients that failed in the current round

    def phase_start(self, phase, clients, plans) -> set[int]:
        if self._failures is None or self._failures[0] != phase.round:
            n = self.n
            self._failures = (phase.round, self._rng.random(n) < self.p_fail, self._rng.random(n))
            self._crashed = set()
        return set(self._crashed)

    def chains_started(self, clients, plans, procs) -> None:
        assert self._failures is not None  # drawn at the phase's start
        _, fails, when = self._failures
        core = self.core
        for client, proc in zip(clients, procs):
            if fails[client] and client not in self._crashed:
                self._crashed.add(client)
                core.interrupt_after(proc, when[client] * sum(core.physics.nominal_seconds(plans[client])), "failed")


class Batteries(Component):
    """``devices.battery_j``: levels drawn from the ledger, harvesting; an empty device does nothing, one
    whose battery cannot pay for its chain stops when it is empty (status ``battery``); under its reserve
    it cannot take part until it has harvested back."""

    def __init__(self, population: Population):
        self.pop = population
        self.bank = BatteryBank(population.battery_j, population.battery_reserve_j, population.harvest_w)
        self._time, self._spent = 0.0, np.zeros(population.num_clients)
        self._drawn_at = (0.0, 0)  # (simulated time, ledger.changes) of the last draw: nothing to do while both hold
        self._levels_j = self.bank.level_j.tolist()  # the levels after the last draw, as floats (left_j reads a few)

    exposes = {
        "battery_j": "each device's battery level now (J)",
        "harvested_j": "what each device has harvested so far (J)",
    }

    def attach(self, core) -> None:
        super().attach(core)
        core.radio.budget_j = self.left_j  # a radio tail stops when the battery is empty

    def device_value(self, name: str) -> np.ndarray:
        return self.levels() if name == "battery_j" else self.bank.harvested_j.copy()

    def _draw(self) -> None:
        """Harvest since the last update, then draw what the ledger charged since (levels >= 0). Nothing to do when
        neither the clock nor the ledger moved since (a radio tail asks its budget once per tail: benchmarks [3])."""
        core = self.core
        ledger = core.ledger  # (books what the phases logged)
        now = core.env.now
        if (now, ledger.changes) == self._drawn_at:
            return
        spent = ledger.client_totals()
        self.bank.harvest(now - self._time)
        self.bank.draw(spent - self._spent)
        self._time, self._spent = now, spent
        self._drawn_at = (now, ledger.changes)
        self._levels_j = self.bank.level_j.tolist()

    def settle(self) -> None:
        """Bring the levels to now: what the ledger charged since the last update is drawn, radio tails that have
        run out (or that the battery could not pay) included."""
        self._draw()
        self.core.radio.expire_tails()
        self._draw()

    def left_j(self, clients: list[int]) -> list[float]:
        """The joules each client's battery has left now, once what it has been charged is drawn (the phase
        running's rows of it included); inf for mains power."""
        self._draw()
        levels_j = self._levels_j
        levels = [levels_j[c] for c in clients]
        log = self.core.current_log()
        if not log:
            return levels
        for k, (client, level) in enumerate(zip(clients, levels)):
            if not np.isfinite(level):
                continue
            rows = [row for row in log if row[0] == client]
            if rows:
                _, joules = rows_energies_j(self.pop, rows)
                levels[k] = level - float(joules.sum())
        return levels

    def levels(self) -> np.ndarray:
        self.settle()
        return self.bank.level_j.copy()

    def run_end(self) -> None:
        """The run ends: the radio tails charged after the last round are drawn too (no harvesting after the run)."""
        self._draw()

    def restrict(self, online: np.ndarray) -> np.ndarray:
        return online & self.bank.available()

    def wakeups(self) -> list:
        env = self.core.env
        recharge_s = self.bank.seconds_to_reserve()
        recharge_s = recharge_s[(recharge_s > 0) & np.isfinite(recharge_s)]
        if len(recharge_s):  # at least a few ulps of the clock: a wait that does not move it would spin
            return [env.timeout(max(float(recharge_s.min()), 4 * float(np.spacing(env.now))))]
        return []

    def phase_start(self, phase, clients, plans) -> set[int]:
        self.settle()
        empty = self.bank.empty()
        return {c for c in clients if empty[c]}  # an empty device does nothing

    def chains_started(self, clients, plans, procs) -> None:
        """A device whose battery cannot pay for its chain stops when it is empty: at the moment its nominal
        schedule (steps back to back, each message after a promotion, waits and tails excluded) has spent its
        level; its work is lost, its energy counted. The steps' energies: the ledger's formulas, one
        vectorised call for the phase."""
        level = self.bank.level_j
        mortal = [c for c in clients if np.isfinite(level[c])]
        if not mortal:
            return
        core = self.core
        seconds = {c: core.physics.nominal_seconds(plans[c]) for c in mortal}
        owner, codes, amounts = [], [], []
        for c in mortal:
            step_code, step_amount = step_codes(plans[c], seconds[c])
            owner += [c] * len(step_code)
            codes += step_code
            amounts += step_amount
        cpu_hz, tx_power_w = core.devices.cpu_hz, core.devices.tx_power_w  # at the knobs now
        joules = listed_energies_j(
            self.pop, owner, codes, amounts, [cpu_hz[c] for c in owner], [tx_power_w[c] for c in owner]
        )
        latency_s, proc_of, k = core.net.access_latency_s, dict(zip(clients, procs)), 0
        promotion_w = self.pop.promotion_power_w
        assert promotion_w is not None  # Population fills it in
        for c in mortal:
            spent = elapsed = 0.0
            steps = plans[c]
            segments = []  # (seconds, joules): each message after a promotion (nominal: from an idle radio)
            for step, step_s, step_j in zip(steps, seconds[c], joules[k : k + len(steps)]):
                if step.kind != COMPUTE and latency_s > 0:
                    segments.append((latency_s, latency_s * float(promotion_w[c])))
                segments.append((step_s, step_j))
            for segment_s, segment_j in segments:
                if spent + segment_j > level[c]:
                    fraction = (level[c] - spent) / segment_j
                    core.interrupt_after(proc_of[c], elapsed + fraction * segment_s, "battery")
                    break
                spent += segment_j
                elapsed += segment_s
            k += len(steps)


class DeviceAvailability(Component):
    """``devices.availability``: devices online and offline (edgefl.sim.availability); a device that goes
    offline releases its radio connection and, while it works, is interrupted (status ``offline``); an offline
    device does nothing."""

    def __init__(self, population: Population, seed: int):
        self.pop, self.seed = population, seed

    def attach(self, core) -> None:
        super().attach(core)
        pop = self.pop
        self.states = Availability(
            core.env,
            pop.num_clients,
            _rng(self.seed, 0xA7A1),
            pop.availability,
            pop.mean_on_s,
            pop.mean_off_s,
            pop.availability_intervals,
            on_offline=self._offline,
        )

    def _offline(self, client: int) -> None:
        """The device becomes unreachable: it releases its radio connection (no tail while offline,
        docs/model.md §8), and its chain, if it runs, stops (status ``offline``)."""
        self.core.radio.release(client)
        self.core.interrupt(client, "offline")

    def restrict(self, online: np.ndarray) -> np.ndarray:
        return online & self.states.online

    def wakeups(self) -> list:
        return [self.states.changed]

    def chain_may_start(self, client: int) -> bool:
        return bool(self.states.online[client])


class Mobility(Component):
    """``devices.speed_mps``: devices walk (random waypoint) and their links are rebuilt at the start of
    every round, and again after the server waited for devices."""

    def __init__(self, population: Population, seed: int):
        assert population.cell is not None and population.distance_m is not None  # devices in a cell
        assert population.speed_mps is not None  # Population fills it in
        self.pop = population
        r_min, r_max = population.cell.min_distance_m, population.cell.radius_m
        self.walk = RandomWaypoint(population.distance_m, population.speed_mps, r_min, r_max, _rng(seed, 0x30B1))

    exposes = {"position_m": "each device's position (x, y) in m, the base station at the origin"}

    def device_value(self, name: str) -> np.ndarray:
        return self.walk.position_m.copy()

    def _move(self) -> None:
        cell, devices = self.pop.cell, self.core.devices
        self.walk.advance(self.core.env.now)
        assert cell is not None
        devices.distance_m = self.walk.distance_m
        devices.uplink, devices.downlink = self.walk.links(
            devices.uplink, devices.downlink, cell.path_loss_db, cell.bs_power_w, devices.distance_m
        )
        self.core.physics.links_moved()

    def round_start(self) -> None:
        self._move()

    def round_ready(self) -> None:
        if self.core.env.now > self.walk.time_s:  # time passed while waiting
            self._move()


class CellMobility(Mobility):
    """Moving devices among several cells (docs/multi-cell.md): they walk over the cells' union; at each round's
    start a device changes cell when another's mean link beats its serving cell's by more than
    ``network.handover_margin_db`` (channel.cells.handover), and then cannot send or receive for
    ``network.handover_interruption_s`` (its messages wait, charged at idle power); links, powers (power control)
    and interference are rebuilt from the new positions and cells."""

    def __init__(self, population: Population, seed: int):
        layout = population.cells
        assert layout is not None and population.distance_m is not None and population.speed_mps is not None
        self.pop, self.layout = population, layout
        self.walk = RandomWaypoint(
            population.distance_m,
            population.speed_mps,
            layout.min_distance_m,
            float("inf"),
            _rng(seed, 0x30B1),
            position_m=layout.position_m,
            draw=layout.drop,
        )
        self._quiet_from_s = np.zeros(population.num_clients)  # when each device's handover interruption ends

    def _move(self) -> None:
        core, devices, layout = self.core, self.core.devices, self.layout
        self.walk.advance(core.env.now)
        position = self.walk.position_m
        assert devices.cell is not None and devices.handovers is not None
        serving = handover(devices.cell, layout.link_loss_db(position), layout.handover_margin_db)
        moved = serving != devices.cell
        devices.handovers = devices.handovers + moved
        self._quiet_from_s[moved] = core.env.now + layout.handover_interruption_s
        devices.cell, devices.position_m = serving, position.copy()
        power_w, devices.uplink, devices.downlink = layout.links(position, serving)
        devices.distance_m = layout.serving_distance_m(position, serving)
        if not np.array_equal(power_w, devices.tx_power_w):  # power control follows the path loss
            devices.tx_power_w = power_w
            core.knobs_changed()
        core.physics.links_changed()

    def before_step(self, client: int, step):
        if step.kind != COMPUTE:
            wait_s = self._quiet_from_s[client] - self.core.env.now
            if wait_s > 0:  # the handover's interruption is not over
                yield self.core.env.timeout(wait_s)


class EventInterference(Component):
    """``network.interference = "events"`` (docs/multi-cell.md): the uplink interference at a base station is that of
    the co-channel uploads on the air in the other cells now, not an expected load. Whenever an upload starts or
    ends (``CellUplinks.on_air``), each upload on the air gets the rate factor

        f_k = R(B, S_k / (N_k + I_k)) / R(B, S_k / N_k),   I_k = Σ_{j on air, cell(j) ≠ cell(k), same band} P_j g_{j,b(k)}

    (R the network's rate model over the band B, S_k / N_k the link's SNR without interference, g the mean gains of
    the layout at the devices' positions: path loss, shadowing, antenna), and the engine re-times what it has left
    (``core.set_uplink_rate_factor``). The factor is taken at the mean SNR, also with fading (each attempt's own draw
    scales its planned rate; the interference scales it by f_k) and over the whole band, also for an FDMA share. A rate
    model that gives 0 (below the lowest MCS) leaves the upload crawling at 10^-6 of its rate until the interference
    changes (it does not fail)."""

    changes_uplink_rate = True
    may_change_participation = False
    FLOOR = 1e-6

    def __init__(self, network: NetworkParams, population: Population):
        assert population.cells is not None
        self.net, self.layout = network, population.cells
        self._gain_at: np.ndarray | None = None  # the positions the gains were computed at
        self._gain = np.zeros((0, 0))
        self._factor: dict[int, float] = {}

    def attach(self, core) -> None:
        super().attach(core)
        core.uplink.air_changed = self._air_changed

    def _gains(self) -> np.ndarray:
        """Every device's linear mean gain to every cell [N, C] at the devices' positions now (cached per move)."""
        position = self.core.devices.position_m
        if self._gain_at is not position:
            self._gain = 10.0 ** (-self.layout.link_loss_db(position) / 10.0)
            self._gain_at = position
        return self._gain

    def _air_changed(self) -> None:
        core = self.core
        on_air = sorted(core.uplink.on_air)
        for client in [c for c in self._factor if c not in core.uplink.on_air]:  # off the air: planned rate again
            del self._factor[client]
            core.set_uplink_rate_factor(client, 1.0)
        if not on_air:
            return
        gain, cell, band = self._gains(), core.devices.cell, self.layout.band
        power = core.devices.tx_power_w
        bandwidth = self.net.bandwidth_hz
        for k in on_air:
            b = cell[k]
            interference = sum(power[j] * gain[j, b] for j in on_air if cell[j] != b and band[cell[j]] == band[b])
            snr = core.devices.uplink[k].snr_linear(bandwidth, 1.0)
            noise = power[k] * gain[k, b] / snr  # the link's noise over the band (W)
            clear = float(self.net.rate_bps(bandwidth, snr))
            factor = 1.0
            if interference > 0 and clear > 0:
                factor = max(
                    float(self.net.rate_bps(bandwidth, snr * noise / (noise + interference))) / clear, self.FLOOR
                )
            if factor != self._factor.get(k, 1.0):
                self._factor[k] = factor
                core.set_uplink_rate_factor(k, factor)


class OverSelection(Component):
    """``algorithm.over_selection``: once a phase has the uploads it needs (``PhaseRecord.needed``), the
    clients still working are told to stop (status ``stopped``; their energy until now counts)."""

    acts_during_phases = False  # (it stops chains only in a phase that needs fewer uploads: never on own clocks)

    _needed, _arrived = None, 0

    def phase_start(self, phase, clients, plans) -> set[int]:
        self._needed, self._arrived = phase.needed, 0
        return set()

    def upload_arrived(self, client: int) -> None:
        if self._needed is not None:
            self._arrived += 1
            if self._arrived == self._needed:
                self.core.interrupt_all("stopped")


class Knobs(Component):
    """A controller's knobs (``allocate``): CPU frequencies, transmit powers (the uplink SNR of a configured
    link scales with p / p_nominal) and FDMA band shares; the scenario's values are the nominal ones."""

    acts_during_phases = False  # (between phases)

    def __init__(self, population: Population):
        self._nominal_cpu_hz, self._nominal_tx_power_w = population.cpu_hz.copy(), population.tx_power_w.copy()
        self._nominal_snr_db = [lk.snr_db for lk in population.uplink]  # configured-SNR links: at nominal power
        self._allocated = False

    def allocate(self, allocation) -> None:
        if allocation is None and not self._allocated:
            return
        core, devices = self.core, self.core.devices
        cpu = getattr(allocation, "cpu_hz", None)
        power = getattr(allocation, "tx_power_w", None)
        devices.cpu_hz = np.array(self._nominal_cpu_hz if cpu is None else cpu, dtype=np.float64)
        power = np.array(self._nominal_tx_power_w if power is None else power, dtype=np.float64)
        if not np.array_equal(power, devices.tx_power_w):
            devices.uplink = [
                replace(lk, tx_power_w=float(p))
                if lk.mode == "budget"
                else replace(lk, snr_db=float(snr_db + 10 * np.log10(p / p0)))
                for lk, p, p0, snr_db in zip(devices.uplink, power, self._nominal_tx_power_w, self._nominal_snr_db)
            ]
            devices.tx_power_w = power
        core.physics.resources_changed(getattr(allocation, "band_share", None))
        core.knobs_changed()
        self._allocated = allocation is not None


def default_components(network: NetworkParams, population: Population, seed: int) -> list[Component]:
    """The components a scenario's population and network need, in the order the core calls them."""
    components: list[Component] = [Stragglers(population, seed)] if population.slowdown != "none" else []
    if population.p_fail > 0:
        components.append(Failures(population, seed))
    assert population.battery_j is not None and population.speed_mps is not None  # Population fills them in
    if np.isfinite(population.battery_j).any():
        components.append(Batteries(population))
    if population.cell is not None and (population.speed_mps > 0).any():
        components.append(Mobility(population, seed) if population.cells is None else CellMobility(population, seed))
    if population.availability != "always":
        components.append(DeviceAvailability(population, seed))
    if population.cells is not None and network.interference == "events" and network.cells > 1:
        components.append(EventInterference(network, population))
    return components + [OverSelection(), Knobs(population)]
