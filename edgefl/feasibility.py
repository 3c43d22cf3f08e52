"""Is the run meaningful? Derived quantities, checked once before the first round.

Every scenario key has bounds, but combinations can still make a run meaningless: a mean SNR of −50 dB
over a 1 kHz band uploads a model in years; a 10 kHz CPU running 10^5 local steps of a large batch
computes for centuries; a deadline shorter than any device's phase cuts every upload. This module
computes, for every device at once (numpy over N), its *nominal* round: one model down, τ local steps
of a minibatch, one model up, each preceded by the access latency unless a radio tail can still run then,
at the device's mean channel (no fading), alone on the whole band, at its nominal CPU frequency and powers
(no stragglers, queueing, retransmissions, radio tails or idle waits). That is a lower bound of what any algorithm's round costs
(DRDM or SCAFFOLD send more, a shared band is slower), so what it rejects is infeasible whatever happens
in the run. The formulas are the engine's (``channel/``, ``energy/``, :class:`edgefl.sim.physics.PhasePhysics`).

Errors (:class:`edgefl.errors.UserError`, exit 2, naming the keys and their values, with a suggestion):

- a nominal time or energy that is not a finite number (a rate of zero: the message never arrives);
- without ``network.deadline_s``: a device whose nominal round lasts more than :data:`MAX_ROUND_S`
  (10^7 s, about 116 days of simulated time). The round waits for its slowest participant, so once
  such a device is selected the simulated clock is meaningless, and processes that live in simulated
  time (Markov availability, harvesting) would step through it event by event. With a deadline the
  phase is cut at the deadline instead, so long nominal times are not an error there (see below);
- a device whose nominal round costs more than :data:`MAX_ROUND_J` (10^9 J, the largest battery a
  scenario may declare, ``devices.battery_j``), counting with a deadline only what is spent before it;
- uploads (or downloads) that cannot be expected to arrive: an attempt fails when its SNR is below the
  lowest MCS entry (``network.rate = "mcs"``) or ``network.outage_snr_db``. Without fading every attempt
  sees the mean SNR, so a device below the threshold never delivers; under Rayleigh fading an attempt
  succeeds with probability exp(−θ/SNR̄), a message within 1 + ``max_retransmissions`` attempts. When
  fewer than one message is expected to arrive in the whole run, were every device to take part in every
  round (run.rounds × Σ_i P(delivered)_i < 1), the run learns nothing: an error. (Rician fading and block
  fading, where the transmitter waits out outage blocks, are not checked here; a shared FDMA band is
  taken at its best SNR, 1/m of the band, and not checked when a controller allocates shares);
- with ``network.deadline_s``: no download, or no upload, that can finish within the deadline even at the best rate
  any device can have (alone on the whole band, at its mean SNR times the fading gain that one draw exceeds with
  probability :data:`MIN_DELIVERY`, at its highest power; over the air, the slot's airtime): every chain is cut
  before its message arrives, so the run learns nothing (a CNN whose every download outlasted the deadline
  trained for minutes before a warning at the end). The message names the message's size in bits, the rate and
  the deadline;
- ``devices.availability = "trace"`` listing fewer devices than ``algorithm.clients_per_round`` in
  total: no round can ever have m participants. It is the m <= N check of the scenario after
  availability (the engine would run every round with fewer than the m the scenario asks for).

Warnings (``edgefl.logs``; the run goes on):

- a deadline shorter than every device's nominal phase (with a controller that sets the local steps,
  a phase of one local step): every upload is cut, which is a legitimate experiment (what a deadline
  that is too tight costs), and fading and lognormal stragglers can still let some through. It is not
  an empty run either: every round is simulated and charged, and the outputs say what was cut;
- several cells (``network.cells`` > 1) of which some serve no device (as dropped; they still interfere);
- some devices (not all) whose messages practically never get through (probability < :data:`MIN_DELIVERY`,
  10^-6; e.g. at a cell's edge without fading);

``run.engine = "ideal"`` charges neither time nor energy: only the trace is checked. Cost: one pass over
the devices' links (as the pricer makes) and a few numpy operations over N.

What is checked is read from the run's parts (:class:`edgefl.parts.RunParts`: the network, the devices, the
model, the pricer's physics, the algorithm, the compressor, the controller); the scenario's [network], [devices],
[model] and [backhaul] sections (:class:`Keys`) are read only to name their keys and values, as written, in the
messages.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from channel import (
    aircomp_airtime_s,
    db_to_linear,
    fading_gain_exceeded,
    linear_to_db,
    payload_bits,
    rayleigh_outage_probability,
    transmission_time_s,
)
from edgefl.errors import UserError
from edgefl.logs import get_logger
from edgefl.sim import SimPyPricer
from edgefl.sim.availability import online_share
from edgefl.sim.backhaul import Backhaul, backhaul_round_s
from energy import (
    compute_energy_j,
    compute_time_s,
    cycles_per_step,
    downlink_energy_j,
    promotion_energy_j,
    uplink_energy_j,
)

if TYPE_CHECKING:
    from edgefl.parts import RunParts
    from edgefl.scenario.sections import BackhaulSection, DevicesSection, ModelSection, NetworkSection

log = get_logger(__name__)

MAX_ROUND_S = 1e7  # s, about 116 days: a nominal round longer than this (without a deadline) is an error
MAX_ROUND_J = 1e9  # J: the largest battery a scenario may declare (devices.battery_j <= 1e9)
MIN_DELIVERY = 1e-6  # a device whose messages get through with a lower probability is warned about


class Keys(NamedTuple):
    """The sections whose keys and values the messages name (edgefl.parts hands them over)."""

    network: NetworkSection
    devices: DevicesSection
    model: ModelSection
    backhaul: BackhaulSection | None


def check_feasible(parts: RunParts, keys: Keys) -> None:
    """Raise :class:`UserError` when the run cannot be meaningful (see the module's docstring); log a
    warning for what is legitimate but probably not meant. ``parts``: the run's (edgefl.parts.build_parts; the
    pricer's physics: its mean rates are read, no random draw is made; the data is not read); ``keys``: its
    sections whose keys and values the messages name (:class:`Keys`)."""
    _check_trace(parts, keys)
    _check_empty_cells(parts)
    if parts.run.engine != "simpy":
        return
    _check_markov_wait(parts, keys)
    nominal = _Nominal(parts, keys)
    nominal.check_outage()
    nominal.check_finite()
    nominal.check_messages_fit_the_deadline()
    nominal.check_backhaul()
    nominal.check_buffer_can_fill()
    nominal.check_time()
    nominal.check_energy()
    nominal.check_deadline()


# -- the nominal round ---------------------------------------------------------------------------
class _Nominal:
    """Every device's nominal times (s) and energies (J) per activity of a round (arrays [N])."""

    PARTS = ("download", "compute", "upload")

    def __init__(self, parts: RunParts, keys: Keys):
        self.keys = keys
        self.net, self.pop = net, pop = parts.network, parts.population
        self.algorithm = a = parts.algorithm
        self.compressor = compressor = parts.compressor
        self.controlled = parts.controller.steers()  # a controller sets the knobs (and may set the local steps)
        self.rounds = parts.run.rounds
        n = pop.num_clients
        # the engine's rates: the pricer's own PhasePhysics (reading its links once is enough)
        assert isinstance(parts.pricer, SimPyPricer)  # run.engine = "simpy"
        self.physics = physics = parts.pricer.physics
        self.d = int(parts.model.dim)
        model_bits = float(payload_bits(self.d, net.bits_per_param))
        self.down_bits = model_bits + net.header_bits
        self.up_bits = compressor.bits(self.d) + net.header_bits
        # The mean SNR over the whole band (alone on it: the fastest a device can send), and the rate at it
        # that PhasePhysics charges (nominal_rate: mcs below the table at its lowest entry; the fixed rate of
        # network.outage_snr_db).
        self.up_snr = physics.mean_up_snr(net.bandwidth_hz)
        self.down_snr = physics.mean_down_snr(net.downlink_bandwidth_hz)
        with np.errstate(all="ignore"):
            up_airtime_rate = physics.nominal_rate(net.bandwidth_hz, self.up_snr, "up")
            down_airtime_rate = physics.nominal_rate(net.downlink_bandwidth_hz, self.down_snr, "down")
        self.steps = a.local_steps
        self.cycles = (
            np.asarray(cycles_per_step(a.batch_size, cycles_per_sample=pop.train_cycles_per_sample)) * self.steps
        )
        self.time = {
            "download": np.asarray(transmission_time_s(self.down_bits, down_airtime_rate)),
            "compute": np.asarray(compute_time_s(self.cycles, pop.cpu_hz)),
            "upload": np.asarray(transmission_time_s(self.up_bits, up_airtime_rate)),
        }
        self.latency_s = net.access_latency_s
        with np.errstate(all="ignore"):
            self.energy = {
                "download": np.asarray(downlink_energy_j(self.time["download"], pop.rx_power_w)),
                "compute": np.asarray(compute_energy_j(self.cycles, pop.cpu_hz, pop.kappa, pop.static_power_w)),
                "upload": np.asarray(
                    uplink_energy_j(self.time["upload"], pop.tx_power_w, pop.circuit_power_w, pop.pa_efficiency)
                ),
            }
            self.latency_j = np.asarray(promotion_energy_j(self.latency_s, pop.promotion_power_w))  # from an idle radio
            # Promotions (docs/model.md §8), at least: the download's unless a radio tail can still run from the
            # previous round (tail_s > 0), the upload's unless the download's tail outlasts the compute.
            self.promotions = (pop.tail_s <= 0) + (pop.tail_s <= self.time["compute"]) * 1.0
            self.round_s = (
                self.time["download"] + self.time["compute"] + self.time["upload"] + self.promotions * self.latency_s
            )
        self.n = n
        self.components = parts.components

    # -- the checks ---------------------------------------------------------------------------
    def check_outage(self) -> None:
        """Messages that cannot get through. An attempt fails when its SNR (mean x fading gain) is below a
        threshold: ``network.outage_snr_db`` for fixed-rate uploads, the lowest MCS entry for adaptive mcs
        rates (a shannon rate is 0 only at an SNR of 0, an infinite time: check_finite). Without fading the
        gain is 1: below the threshold, never; with Rayleigh fading an attempt fails with probability
        1 − exp(−θ/SNR̄) (channel.rayleigh_outage_probability), a message after 1 + max_retransmissions
        attempts. Error: fewer than one message expected to arrive in the whole run even if every device
        took part in every round; warning: some devices that practically never deliver (< MIN_DELIVERY)."""
        net = self.net
        if net.fading not in ("none", "rayleigh") or (net.block_fading and net.outage_snr_db is None):
            return  # rician: not modelled here; block fading waits out outage blocks (nothing fails)
        up_snr = self.up_snr
        if net.access == "fdma":  # a link budget over a share B/n has an n times higher SNR
            if self.controlled:
                up_snr = None  # a controller may allocate any share: nothing is certain
            else:
                a = self.algorithm
                sharers = min(self.n, math.ceil(a.clients_per_round * (1 + a.over_selection)))
                up_snr = np.where(
                    self.physics.mean_up_snr.scales_with_band,
                    self.physics.mean_up_snr(net.bandwidth_hz / sharers),
                    self.up_snr,
                )
        mcs_db = net.mcs_snr_db[0] if net.rate == "mcs" else None
        up_db = net.outage_snr_db if net.outage_snr_db is not None else mcs_db
        for direction, snr, threshold_db in (("upload", up_snr, up_db), ("download", self.down_snr, mcs_db)):
            if snr is None or threshold_db is None:
                continue
            delivered = self._delivery_probability(snr, threshold_db)
            expected = self.rounds * float(delivered.sum())
            floor = self._floor(direction)
            if expected < 1:
                keys = self._link_keys(direction) + self._rate_keys(direction == "upload")
                how = (
                    'without fading (network.fading = "none") every attempt sees the mean SNR and fails'
                    if net.fading == "none"
                    else "under Rayleigh fading an attempt then succeeds with probability "
                    "exp(-threshold / mean SNR), practically never"
                )
                raise UserError(
                    f"no {direction} can be expected to arrive: every device's mean {direction} SNR is at most "
                    f"{float(linear_to_db(snr.max())):.3g} dB, below {floor}, and {how} (expected arrivals in the whole "
                    f"run, were every device to take part in all run.rounds = {self.rounds} rounds with "
                    f"network.max_retransmissions = {net.max_retransmissions}: {expected:.3g}). Keys: {keys}. Expected "
                    f"a mean SNR near or above the threshold: raise the SNR ({self._raise_snr(direction)}) or lower the "
                    f"threshold"
                )
            dead = delivered < MIN_DELIVERY
            if dead.any():
                i = int(np.argmax(dead))
                log.warning(
                    "%d of %d devices practically never %s (a message gets through with probability < %g: mean "
                    "SNR far below %s; e.g. device %d at %.3g dB%s)",
                    int(dead.sum()),
                    self.n,
                    direction,
                    MIN_DELIVERY,
                    floor,
                    i,
                    float(linear_to_db(snr[i])),
                    self._where(i),
                )

    def check_messages_fit_the_deadline(self) -> None:
        """Error when no download, or no upload, can finish within ``network.deadline_s`` even at the best rate
        (see the module's docstring): the fastest message of every device, its bits over the best rate."""
        net = self.net
        deadline = net.deadline_s
        if deadline is None:
            return
        gain = fading_gain_exceeded(net.fading, MIN_DELIVERY, net.rician_k)
        for direction in ("download", "upload"):
            up = direction == "upload"
            bits = self.up_bits if up else self.down_bits
            if up and net.uplink == "aircomp":  # one analog value per symbol, whatever the rate
                values = max(bits - net.header_bits, 0.0) / net.bits_per_param
                seconds = aircomp_airtime_s(values, net.bandwidth_hz, net.aircomp_symbols_per_hz)
                if seconds > deadline:
                    raise UserError(
                        f"no upload can finish within network.deadline_s = {deadline:g} s: over the air a model of "
                        f"{values:.4g} values ({self._size(up)}) takes {seconds:.3g} s at network.bandwidth_mhz = "
                        f"{self.keys.network.bandwidth_mhz:g} and network.aircomp_symbols_per_hz = "
                        f"{net.aircomp_symbols_per_hz:g} (one value per symbol). Expected an airtime within the "
                        "deadline: raise network.deadline_s or the bandwidth, or use a smaller model or compression"
                    )
                continue
            snr = self.up_snr if up else self.down_snr
            band = net.bandwidth_hz if up else net.downlink_bandwidth_hz
            with np.errstate(all="ignore"):
                best_rate = np.asarray(net.rate_bps(band, snr * gain, "up" if up else "down"), dtype=np.float64)
            i = int(np.argmax(best_rate))
            seconds = bits / best_rate[i] if best_rate[i] > 0 else math.inf
            if seconds <= deadline:
                continue
            faded = (
                ""
                if net.fading == "none"
                else f" times a fading gain of {float(linear_to_db(gain)):.3g} dB, which one {net.fading} draw exceeds "
                f"with probability {MIN_DELIVERY:g}"
            )
            raise UserError(
                f"no {direction} can finish within network.deadline_s = {deadline:g} s, even at the best rate: a model "
                f"of {bits:.4g} bits ({self._size(up)}) at {best_rate[i]:.4g} bit/s, the best rate of any device (device "
                f"{i}, alone on {_hz(band)}, at its mean SNR of {float(linear_to_db(snr[i])):.3g} dB{faded}{self._where(i)}), "
                f"takes {seconds:.3g} s: every chain would be cut before its {direction} arrives, and the run would learn "
                f"nothing. Keys: {self._band_key(up)}, {self._link_keys(direction)}{self._rate_keys(up)}. Expected a "
                f"{direction} within the deadline: raise network.deadline_s to at least {seconds:.3g}, or "
                f"{self._suggest(direction)}"
            )

    def check_backhaul(self) -> None:
        """Error when the backhaul's exchange with the cloud, once per round, takes more than MAX_ROUND_S: the
        server waits for it, so the simulated clock would run for years a round (and the processes that live in
        simulated time would step through them event by event: the run would not end)."""
        backhaul = next((c for c in self.components if isinstance(c, Backhaul)), None)
        if backhaul is None:
            return
        seconds = backhaul_round_s(backhaul.latency_s, self.up_bits, backhaul.rate_bps)
        if seconds <= MAX_ROUND_S:
            return
        b = self.keys.backhaul
        raise UserError(
            f"the backhaul's exchange with the cloud takes {seconds:.3g} s of simulated time a round (2 x (latency + "
            f"bits / rate): backhaul.latency_ms = {b.latency_ms:g}, an aggregate of {self.up_bits:.4g} bits "
            f"({self._size(True)}) at backhaul.rate_mbps = {b.rate_mbps:g}), more than {MAX_ROUND_S:.0e} s (about "
            f"{MAX_ROUND_S / 86400:.0f} days). Expected at most {MAX_ROUND_S:.0e} s: raise backhaul.rate_mbps or lower "
            "backhaul.latency_ms"
        )

    def check_buffer_can_fill(self) -> None:
        """Error when a buffering server (FedBuff: ``buffer_size`` K uploads per server update) can never receive K
        uploads in the whole run: devices on batteries that nothing recharges (devices.harvest_w = 0) complete at
        most floor(battery / nominal chain energy) chains each (a chain: its download, its τ steps, its upload, the
        promotions; radio tails, retransmissions and idle waits make it dearer), so the model would never change."""
        k = getattr(self.algorithm.hp, "buffer_size", None)
        pop = self.pop
        if k is None or not np.isfinite(pop.battery_j).all() or (pop.harvest_w > 0).any():
            return
        chain_j = sum(self.energy[part] for part in self.PARTS) + self.promotions * self.latency_j
        with np.errstate(divide="ignore", invalid="ignore"):
            chains = np.where(chain_j > 0, np.floor(pop.battery_j / chain_j), np.inf)
        most = float(chains.sum())
        if most >= k:
            return
        raise UserError(
            f"algorithm.{self.algorithm.name}.buffer_size = {k} uploads per server update, but the devices' batteries "
            f"(devices.battery_j, nothing recharging them: devices.harvest_w = 0) pay for at most {most:.0f} chains "
            f"in the whole run (at least {float(np.min(chain_j)):.3g} J a chain: a model down, "
            f"algorithm.local_steps = {self.steps} steps, a model up): the buffer could never fill, and the model "
            f"would never change. Expected buffer_size <= {most:.0f}: lower it, or give the devices more battery or "
            "harvesting"
        )

    def _size(self, up: bool) -> str:
        """How a message's bits come about (model.name, d, bits per parameter, compression, header)."""
        return (
            f"model.name = {self.keys.model.name!r}: d = {self.d:,} parameters x network.bits_per_param = "
            f"{self.net.bits_per_param}{self._compression() if up else ''} + network.header_bits = "
            f"{self.keys.network.header_bits}"
        )

    def _delivery_probability(self, snr: np.ndarray, threshold_db: float) -> np.ndarray:
        """Probability that a message gets through within its 1 + max_retransmissions attempts."""
        if self.net.fading == "none":
            return (snr >= db_to_linear(threshold_db)).astype(np.float64)
        fails = np.asarray(rayleigh_outage_probability(snr, threshold_db), dtype=np.float64)
        return 1.0 - fails ** (1 + self.net.max_retransmissions)

    def check_finite(self) -> None:
        for part in self.PARTS:
            for what, values in (("time", self.time[part]), ("energy", self.energy[part])):
                bad = ~np.isfinite(values)
                if bad.any():
                    i = int(np.argmax(bad))
                    raise UserError(
                        f"the nominal {part} {what} of device {i} is not a finite number ({values[i]}; a rate of 0 "
                        f"never delivers): {self._explain(part, i)}. Expected a finite {what}: {self._suggest(part)}"
                    )

    def check_time(self) -> None:
        if self.net.deadline_s is not None:  # phases are cut at the deadline: long nominal times are no error
            return
        i = int(np.argmax(self.round_s))
        if self.round_s[i] <= MAX_ROUND_S:
            return
        part = max(self.PARTS, key=lambda p: self.time[p][i])
        raise UserError(
            f"the nominal round of device {i} lasts {self.round_s[i]:.3g} s of simulated time, more than "
            f"{MAX_ROUND_S:.0e} s (about {MAX_ROUND_S / 86400:.0f} days; a lower bound: the device alone on the band, at "
            f"its mean SNR): its {part} takes {self.time[part][i]:.3g} s, {self._explain(part, i)}. Expected at most "
            f"{MAX_ROUND_S:.0e} s: {self._suggest(part)}, or set network.deadline_s to cut such devices"
        )

    def check_energy(self) -> None:
        energy = self._energy_until_deadline()
        total = sum(energy.values())
        i = int(np.argmax(total))
        if total[i] <= MAX_ROUND_J:
            return
        part = max(self.PARTS, key=lambda p: energy[p][i])
        raise UserError(
            f"the nominal round of device {i} costs {total[i]:.3g} J, more than {MAX_ROUND_J:.0e} J (the largest battery "
            f"a scenario may declare): its {part} costs {energy[part][i]:.3g} J, {self._explain(part, i, energy=True)}. "
            f"Expected at most {MAX_ROUND_J:.0e} J per device and round: {self._suggest(part, energy=True)}"
        )

    def check_deadline(self) -> None:
        deadline = self.net.deadline_s
        if deadline is None:
            return
        parts = dict(self.time, **{"access latency": self.promotions * self.latency_s})
        steps_set_by_controller = self.controlled
        if steps_set_by_controller:  # e.g. deadline_fit: as few as one local step
            parts["compute"] = parts["compute"] / self.steps
        phase_s = sum(parts.values())
        late = phase_s > deadline
        if late.all():
            i = int(np.argmin(phase_s))
            part = max(parts, key=lambda p: parts[p][i])
            log.warning(
                "network.deadline_s = %g is shorter than every device's nominal phase (the fastest, device %d, needs "
                "%.3g s%s, mostly its %s of %.3g s): expect every upload to be cut (only fading or stragglers can let "
                "some through). Raise network.deadline_s if that is not the experiment",
                deadline,
                i,
                float(phase_s[i]),
                " with one local step" if steps_set_by_controller else "",
                part,
                float(parts[part][i]),
            )
        elif late.any():
            log.info(
                "%d of %d devices cannot finish a nominal phase within network.deadline_s = %g",
                int(late.sum()),
                self.n,
                deadline,
            )

    # -- helpers ------------------------------------------------------------------------------
    def _energy_until_deadline(self) -> dict[str, np.ndarray]:
        """Each part's energy, with a deadline only the fraction done before it (the chain: latency,
        download, compute, latency unless the radio's tail covers the compute, upload; energies are linear in
        the time spent)."""
        parts = {
            "download": self.energy["download"],
            "compute": self.energy["compute"],
            "upload": self.energy["upload"],
            "promotion": self.promotions * self.latency_j,
        }
        deadline = self.net.deadline_s
        if deadline is None:
            return parts
        start = (self.pop.tail_s <= 0) * self.latency_s  # the download's promotion
        done: dict[str, np.ndarray] = {}
        with np.errstate(divide="ignore", invalid="ignore"):
            for part in self.PARTS:
                t = self.time[part]
                fraction = np.where(t > 0, np.clip((deadline - start) / t, 0.0, 1.0), (start <= deadline) * 1.0)
                done[part] = np.where(fraction > 0, parts[part] * fraction, 0.0)
                start = start + t + ((self.pop.tail_s <= t) * self.latency_s if part == "compute" else 0.0)
        done["promotion"] = parts["promotion"]  # at most two promotions: an upper bound
        return done

    def _value(self, key: str, i: int) -> str:
        """``devices.<key>`` of device i, with its class when it has one."""
        cls = self.pop.device_class[i]
        value = getattr(self.keys.devices, key)
        for c in self.keys.devices.classes:
            if c.name == cls and getattr(c, key, None) is not None:
                value = getattr(c, key)
        shown = f"{value:g}" if isinstance(value, float) else repr(value)
        return f"devices.{key} = {shown}" + (f" (class {cls!r})" if cls != "base" else "")

    def _where(self, i: int) -> str:
        d = self.pop.distance_m
        return "" if d is None else f", {d[i]:.4g} m from the base station"

    def _explain(self, part: str, i: int, energy: bool = False) -> str:
        keys, net, pop, a = self.keys, self.net, self.pop, self.algorithm
        if part == "compute":
            per_sample = float(pop.train_cycles_per_sample[i])
            source = (
                self._value("cycles_per_sample", i)
                if self._explicit_cycles(i)
                else f"model.name = {keys.model.name!r} measured FLOPs x {self._value('cycles_per_flop', i)}"
            )
            text = (
                f"{self.cycles[i]:.3g} cycles (algorithm.local_steps = {a.local_steps} x "
                f"algorithm.batch_size = {a.batch_size} x {per_sample:.3g} cycles per sample: {source}) "
                f"at {self._value('cpu_ghz', i)}"
            )
            if energy:
                text += f", {self._value('kappa', i)}, {self._value('static_power_w', i)}"
            return text
        up = part == "upload"
        bits = self.up_bits if up else self.down_bits
        snr = (self.up_snr if up else self.down_snr)[i]
        band = net.bandwidth_hz if up else net.downlink_bandwidth_hz
        text = (
            f"{bits:.3g} bits (model.name = {keys.model.name!r}: d = {self.d:,} parameters x network.bits_per_param = "
            f"{net.bits_per_param}{self._compression()} + network.header_bits = {keys.network.header_bits}) "
            f"at a mean SNR of {float(linear_to_db(snr)):.3g} dB{self._where(i)} over {_hz(band)} "
            f"({self._band_key(up)}); keys: {self._link_keys(part) + self._rate_keys(up)}"
        )
        if energy:
            text += (
                f"; {self._value('tx_power_dbm', i)}, {self._value('circuit_power_w', i)}"
                if up
                else f"; {self._value('rx_power_w', i)}"
            )
        return text

    def _suggest(self, part: str, energy: bool = False) -> str:
        if part == "compute":
            text = (
                "lower algorithm.local_steps or algorithm.batch_size, raise devices.cpu_ghz, or use a smaller model "
                "or devices.cycles_per_sample"
            )
            return text + (", or lower devices.kappa or devices.static_power_w" if energy else "")
        up = part == "upload"
        text = (
            f"raise {self._band_key(up).split(' =')[0]} or the SNR ({self._raise_snr(part)}), or use a smaller model"
            + (" or compression" if up else "")
        )
        return text + (f", or lower {'devices.tx_power_dbm' if up else 'devices.rx_power_w'}" if energy else "")

    def _explicit_cycles(self, i: int) -> bool:
        cls = self.pop.device_class[i]
        own = [c.cycles_per_sample for c in self.keys.devices.classes if c.name == cls]
        return self.keys.devices.cycles_per_sample is not None or any(v is not None for v in own)

    def _compression(self) -> str:
        c = self.compressor
        return "" if c.name == "none" else f", compressed by compression.name = {c.name!r}"

    def _band_key(self, up: bool) -> str:
        n = self.keys.network
        if up or n.downlink_bandwidth_mhz is None:
            return f"network.bandwidth_mhz = {n.bandwidth_mhz:g}"
        return f"network.downlink_bandwidth_mhz = {n.downlink_bandwidth_mhz:g}"

    def _link_keys(self, part: str) -> str:
        n = self.keys.network
        if part == "download" and n.downlink_snr_db is not None:
            return f"network.downlink_snr_db = {n.downlink_snr_db:g}"
        if n.snr_db is not None:
            return f"network.snr_db = {n.snr_db:g}"
        where = (
            f"network.distance_m = {n.distance_m:g}"
            if n.distance_m is not None
            else f"network.cell_radius_m = {n.cell_radius_m:g}"
        )
        power = (
            f"devices.tx_power_dbm = {self.keys.devices.tx_power_dbm:g}"
            if part == "upload"
            else f"network.bs_tx_power_dbm = {n.bs_tx_power_dbm:g}"
        )
        own = n.bs_noise_figure_db if part == "upload" else n.device_noise_figure_db
        noise = (
            f"network.noise_figure_db = {n.noise_figure_db:g}"
            if own is None
            else f"network.{'bs' if part == 'upload' else 'device'}_noise_figure_db = {own:g}"
        )
        return (
            f"a link budget: {where}, network.path_loss = {n.path_loss!r}, {power}, {noise}, "
            f"network.shadowing_std_db = {n.shadowing_std_db:g}"
        )

    def _rate_keys(self, up: bool) -> str:
        n = self.keys.network
        keys = [f"network.rate = {n.rate!r}"]
        if n.rate == "shannon":
            keys += [f"network.shannon_efficiency = {n.shannon_efficiency:g}", f"network.snr_gap_db = {n.snr_gap_db:g}"]
        if up and n.outage_snr_db is not None:
            keys.append(f"network.outage_snr_db = {n.outage_snr_db:g}")
        if up and n.uplink_max_bits_per_hz is not None:
            keys.append(f"network.uplink_max_bits_per_hz = {n.uplink_max_bits_per_hz:g}")
        if n.overhead_fraction:
            keys.append(f"network.overhead_fraction = {n.overhead_fraction:g}")
        if n.standard == "nr":
            keys.append('network.standard = "nr" (framing overhead)')
        return ", " + ", ".join(keys)

    def _raise_snr(self, part: str) -> str:
        n = self.keys.network
        if part == "download" and n.downlink_snr_db is not None:
            return "network.downlink_snr_db"
        if n.snr_db is not None:
            return "network.snr_db"
        return "a shorter network.distance_m or network.cell_radius_m, or more " + (
            "devices.tx_power_dbm" if part == "upload" else "network.bs_tx_power_dbm"
        )

    def _floor(self, direction: str) -> str:
        n = self.net
        if direction == "upload" and n.outage_snr_db is not None:
            return f"network.outage_snr_db = {n.outage_snr_db:g} dB"
        return f'the lowest entry of the MCS table ({n.mcs_snr_db[0]:g} dB; network.rate = "mcs", network.mcs_table)'


def _hz(hz: float) -> str:
    for unit, scale in (("GHz", 1e9), ("MHz", 1e6), ("kHz", 1e3)):
        if hz >= scale:
            return f"{hz / scale:.4g} {unit}"
    return f"{hz:.4g} Hz"


# -- availability: how long a round waits -------------------------------------------------------
def _check_markov_wait(parts: RunParts, keys: Keys) -> None:
    """Markov on/off availability under which m devices are practically never online at once: each round would wait
    (simulated time passes, every availability change an event) for about 1 / (the rate at which the count of
    online devices goes from m - 1 to m), more than MAX_ROUND_S: error. The count is Binomial(N, p), p = on / (on +
    off) (independent devices in their stationary state); it goes up from m - 1 when one of the N - m + 1 offline
    devices comes online (rate 1 / mean_off_s each): :func:`markov_wait_s`."""
    pop = parts.population
    if pop.availability != "markov":
        return
    n, m = pop.num_clients, parts.algorithm.clients_per_round
    on, off = pop.mean_on_s, pop.mean_off_s
    p = online_share(on, off)
    wait_s = markov_wait_s(n, m, on, off)
    if wait_s <= MAX_ROUND_S:
        return
    raise UserError(
        f'devices.availability = "markov" with devices.mean_on_s = {keys.devices.mean_on_s:g} and '
        f"devices.mean_off_s = {keys.devices.mean_off_s:g}: a device is online {100 * p:.3g} % of the time, "
        f"{n * p:.3g} of data.num_clients = {n} on average, so algorithm.clients_per_round = {m} are online at once "
        f"only every {wait_s:.3g} s of simulated time or so, more than {MAX_ROUND_S:.0e} s: each round would wait for "
        f"them. Expected m well below the devices online on average: lower algorithm.clients_per_round (to "
        f"{max(1, math.floor(n * p))} or less), or raise devices.mean_on_s or data.num_clients"
    )


def markov_wait_s(n: int, m: int, mean_on_s: float, mean_off_s: float) -> float:
    """The mean wait (s) between the moments m of n devices are online at once, each on and off for exponential
    periods of means ``mean_on_s`` and ``mean_off_s``: P(X < m) / (P(X = m - 1) (n - m + 1) / mean_off_s) for X ~
    Binomial(n, p), p = on / (on + off) (the share of the time below m over the rate of up-crossings to m). The ratio
    P(X < m) / P(X = m - 1) is the sum over k < m of P(X = k) / P(X = m - 1), each term the one before times
    P(X = k - 1) / P(X = k) = k (1 - p) / ((n - k + 1) p): no binomial coefficient and no special function (scipy.stats
    took a second to import), nor an underflow where both probabilities are below the smallest float; inf where the
    sum overflows (a wait that long is an error anyway)."""
    if m > n:
        return math.inf  # (never m online)
    p = online_share(mean_on_s, mean_off_s)
    k = np.arange(m - 1, 0, -1, dtype=np.float64)  # m - 1, ..., 1
    with np.errstate(over="ignore", invalid="ignore"):
        terms = np.cumprod(k * (1.0 - p) / ((n - k + 1.0) * p))
        ratio = 1.0 + float(terms.sum())
    return ratio * mean_off_s / (n - m + 1)


# -- cells ---------------------------------------------------------------------------------------
def _check_empty_cells(parts: RunParts) -> None:
    """Several cells of which some serve no device (as dropped; devices that move may reach them later): a
    warning naming them (they have a base station, an edge server, a band, and co-channel interference)."""
    layout = parts.population.cells
    if layout is None:
        return
    cells = len(layout.band)
    served = np.bincount(np.asarray(layout.serving, dtype=np.int64), minlength=cells)
    empty = np.flatnonzero(served == 0)
    if len(empty):
        log.warning(
            "%d of network.cells = %d serve no device as dropped (cell%s %s; %d devices): they receive no uploads "
            "(moving devices may reach them later) but still interfere. Use fewer cells, or more devices "
            "(data.num_clients), if that is not the experiment",
            len(empty),
            cells,
            "" if len(empty) == 1 else "s",
            ", ".join(str(int(c)) for c in empty[:20]) + (" ..." if len(empty) > 20 else ""),
            parts.population.num_clients,
        )


# -- availability ---------------------------------------------------------------------------------
def _check_trace(parts: RunParts, keys: Keys) -> None:
    """A trace that lists fewer than m devices, or never has m online at once: error (each round waits for m
    devices online, so the first round would wait through the whole trace and find nobody at its end)."""
    pop = parts.population
    if pop.availability != "trace":
        return
    m = parts.algorithm.clients_per_round
    trace = keys.devices.availability_trace
    intervals = pop.availability_intervals
    listed = sum(1 for spans in intervals.values() if spans)
    if listed < m:
        raise UserError(
            f"devices.availability_trace = {trace!r} lists {listed} device(s) with an online "
            f"interval, fewer than algorithm.clients_per_round = {m}: no round can ever have m participants. Expected "
            f"at least {m} devices in the trace: lower algorithm.clients_per_round or add devices to the trace"
        )
    # the most devices online at once: merge each device's intervals, then sweep over the ends
    events = []
    for spans in intervals.values():
        merged: list[list[float]] = []
        for start, end in sorted(spans):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        events += [(start, 1) for start, _ in merged] + [(end, -1) for _, end in merged]
    events.sort()  # at one instant, ends (-1) before starts: intervals are [start, end)
    deltas = np.array([d for _, d in events], dtype=np.int64)
    most = int(np.cumsum(deltas).max()) if len(deltas) else 0
    if most < m:
        raise UserError(
            f"devices.availability_trace = {trace!r} never has algorithm.clients_per_round = "
            f"{m} devices online at the same time (at most {most}): each round waits until m devices are online, so "
            f"no round could start before the trace ends. Lower algorithm.clients_per_round to {max(most, 1)} or "
            "less, or give the trace intervals in which m devices are online together"
        )
