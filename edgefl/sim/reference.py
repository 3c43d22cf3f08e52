"""The SimPy model of a phase, kept as the reference that :class:`edgefl.sim.SimPyPricer` reproduces.

This is the co-simulation written directly with SimPy: each client with work in a phase is
a SimPy process that runs its chain of activities (download -> compute -> upload ...) one
after another, starting when the phase starts. Uplinks use the configured access
(dedicated band, FDMA processor sharing in :class:`~edgefl.sim.band.SharedBand`, or a TDMA
FIFO queue as a ``simpy.Resource``); fading is drawn per transmission. If the phase
outlives the deadline, the clients still busy are cut off: the energy they spent until then
counts, their upload does not arrive. Formulas live in ``channel/`` and ``energy/``.

The pricer the runner uses (:class:`edgefl.sim.pricer.SimPyPricer`) runs the same model in a
lean event loop of its own and gives the same events, times and energies
(tests/test_batched_equivalence.py compares them field by field); this one is easier to
extend (batteries, mobility: anything that is natural as a SimPy process) and is where a
change of semantics should be tried first.
"""

from __future__ import annotations

import numpy as np
import simpy

from channel import fading_power_gain, is_outage
from edgefl.physical import NetworkParams, Population
from edgefl.sim.activities import Activity, Event, PhaseRecord
from edgefl.sim.band import SharedBand
from energy import (
    EnergyLedger,
    compute_energy_j,
    compute_time_s,
    downlink_energy_j,
    idle_energy_j,
    uplink_energy_j,
)


class SimPyReference:
    def __init__(self, network: NetworkParams, population: Population, seed: int):
        self.net = network
        self.pop = population
        self.env = simpy.Environment()
        self.rng = np.random.default_rng(np.random.SeedSequence([seed, 0xFAD1]))
        self.ledger = EnergyLedger(population.num_clients)
        self.events: list[Event] = []
        self.band = SharedBand(self.env, network.bandwidth_hz, self._uplink_rate)
        self.tdma = simpy.Resource(self.env, capacity=1)

    @property
    def now(self) -> float:
        return self.env.now

    @property
    def can_change_participation(self) -> bool:
        """True when the channel can decide who arrives (then re-pricing is not exact)."""
        return self.net.deadline_s is not None or self.net.outage_snr_db is not None

    # -- rates --------------------------------------------------------------------------
    def _uplink_rate(self, client: int, bandwidth_hz: float, gain: float) -> float:
        return self.pop.uplink[client].rate_bps(bandwidth_hz, gain, self.net.efficiency, self.net.snr_gap_db)

    def _downlink_rate(self, client: int, gain: float) -> float:
        return self.pop.downlink[client].rate_bps(
            self.net.downlink_bandwidth_hz, gain, self.net.efficiency, self.net.snr_gap_db
        )

    # -- one phase ----------------------------------------------------------------------
    def price_phase(self, phase: PhaseRecord) -> dict[int, bool]:
        """Simulate the phase; return, per client, whether its whole chain completed."""
        clients = sorted(phase.chains)
        # Fading gains drawn up front in a fixed order (client, activity): the draws do not
        # depend on simulated timing, so a trace re-priced on another channel sees the same
        # sequence of random numbers as a full co-simulation on that channel.
        transmissions = sum(a.kind != "compute" for c in clients for a in phase.chains[c])
        gains = iter(fading_power_gain(self.net.fading, self.rng, size=transmissions, rician_k=self.net.rician_k)
                     if transmissions else [])
        plans = {c: [(a, next(gains) if a.kind != "compute" else 1.0) for a in phase.chains[c]] for c in clients}
        completed: dict[int, bool] = {}
        start = self.env.now
        procs = [self.env.process(self._client(phase, c, plans[c], start, completed)) for c in clients]
        # A process (not a bare AllOf condition): AnyOf would strip a nested condition's
        # callbacks when the deadline fires first, and the AllOf would never trigger.
        everyone = self.env.process(self._wait_all(procs))
        if self.net.deadline_s is None:
            self.env.run(until=everyone)
        else:
            self.env.run(until=self.env.any_of([everyone, self.env.timeout(self.net.deadline_s)]))
            for proc in procs:
                if proc.is_alive:
                    proc.interrupt("deadline")
            if not everyone.processed:
                self.env.run(until=everyone)
        return completed

    def _wait_all(self, procs):
        yield self.env.all_of(procs)

    def _client(self, phase: PhaseRecord, client: int, plan, phase_start: float, completed: dict):
        env, pop = self.env, self.pop
        busy_s = 0.0
        ok = True
        for activity, gain in plan:
            begin = env.now
            radio_on = {"at": None if activity.kind == "upload" else begin}
            try:
                if activity.kind == "compute":
                    per_sample = pop.train_cycles_per_sample if activity.work == "train" else pop.eval_cycles_per_sample
                    cycles = activity.samples * per_sample[client]
                    yield env.timeout(compute_time_s(cycles, pop.cpu_hz[client]))
                    self._charge_compute(phase, client, activity, begin, cycles, "ok")
                elif activity.kind == "download":
                    yield env.timeout(activity.bits / self._downlink_rate(client, gain))
                    self._charge_radio(phase, client, activity, begin, "ok")
                else:
                    yield from self._upload(client, activity, gain, radio_on)
                    # Outage: judged on the instantaneous SNR over the configured band.
                    snr = pop.uplink[client].snr_linear(self.net.bandwidth_hz, gain)
                    lost = bool(is_outage(snr, self.net.outage_snr_db))
                    self._charge_radio(phase, client, activity, radio_on["at"], "lost" if lost else "ok")
                    ok = ok and not lost
            except simpy.Interrupt:
                ok = False
                if radio_on["at"] is not None:  # nothing to charge if cut while queued for TDMA
                    self._charge_cut(phase, client, activity, radio_on["at"])
                    busy_s += env.now - radio_on["at"]
                break
            busy_s += env.now - radio_on["at"]
        # Time inside the phase spent waiting (e.g. queued for the TDMA channel).
        idle_s = (env.now - phase_start) - busy_s
        if idle_s > 1e-12 and pop.idle_power_w[client] > 0:
            energy = float(idle_energy_j(idle_s, pop.idle_power_w[client]))
            self._log(phase, client, "idle", "wait", phase_start, env.now, 0.0, 0.0, energy, "idle", "ok")
        completed[client] = ok

    def _upload(self, client: int, activity: Activity, gain: float, radio_on: dict):
        """Transmit ``activity.bits``; ``radio_on['at']`` is set when the radio switches on."""
        env = self.env
        if self.net.access == "tdma":
            with self.tdma.request() as slot:
                yield slot  # waiting for the channel counts as idle, not as transmission
                radio_on["at"] = env.now
                yield env.timeout(activity.bits / self._uplink_rate(client, self.net.bandwidth_hz, gain))
        elif self.net.access == "fdma":
            radio_on["at"] = env.now
            flow = self.band.transmit(client, activity.bits, gain)
            try:
                yield flow.done
            except simpy.Interrupt:
                self.band.cancel(flow)
                raise
        else:  # dedicated band
            radio_on["at"] = env.now
            yield env.timeout(activity.bits / self._uplink_rate(client, self.net.bandwidth_hz, gain))

    # -- energy bookkeeping -------------------------------------------------------------
    def _charge_compute(self, phase, client, activity, begin, cycles, status):
        pop = self.pop
        energy = float(compute_energy_j(cycles, pop.cpu_hz[client], pop.kappa[client], pop.static_power_w[client]))
        self._log(phase, client, "compute", activity.label, begin, self.env.now, 0.0, cycles, energy, "compute", status)

    def _charge_radio(self, phase, client, activity, begin, status, bits=None):
        pop = self.pop
        duration = self.env.now - begin
        if activity.kind == "download":
            energy = float(downlink_energy_j(duration, pop.rx_power_w[client]))
            category = "downlink"
        else:
            energy = float(uplink_energy_j(duration, pop.tx_power_w[client], pop.circuit_power_w[client]))
            category = "uplink"
        bits = activity.bits if bits is None else bits
        self._log(phase, client, activity.kind, activity.label, begin, self.env.now, bits, 0.0, energy, category, status)

    def _charge_cut(self, phase, client, activity, begin):
        """Charge the part of an activity done before the deadline cut it off."""
        if activity.kind == "compute":
            cycles_done = (self.env.now - begin) * self.pop.cpu_hz[client]
            self._charge_compute(phase, client, activity, begin, cycles_done, "cut")
        else:  # the message did not get through: no bits delivered
            self._charge_radio(phase, client, activity, begin, "cut", bits=0.0)

    def _log(self, phase, client, kind, label, start, end, bits, cycles, energy, category, status):
        self.ledger.add(client, category, energy)
        self.events.append(
            Event(phase.round, phase.phase, client, kind, label, start, end, bits, cycles, energy, category, status)
        )
