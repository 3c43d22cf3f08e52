"""Uplink access: how a client's upload gets the channel. Each ``send`` is a generator run inside the
client's chain process; it starts the transfer (``radio.start_transfer``) when the channel is the
client's, and returns whether the message was lost.

- dedicated: a band of its own; the upload (all its attempts) takes its airtime (a timeout).
- fdma: processor sharing of one band (:class:`~edgefl.sim.band.SharedBand`, re-planned when an
  upload starts or ends).
- tdma: one channel (a ``simpy.Resource`` of capacity 1), first come first served.

A component can scale a client's uplink rate while it sends (:meth:`rate_changed`, through
``core.set_uplink_rate_factor``): a timed upload's airtime left is re-timed (left · old / new), an
FDMA flow's rates are scaled and the band re-planned. Its energy is its airtime at its transmit power.
"""

from __future__ import annotations

import numpy as np
import simpy
import torch

from channel import (
    aircomp_airtime_s,
    aircomp_mean_noise_std,
    aircomp_receive_snr,
    aircomp_scheduled,
    aircomp_tx_power_w,
    fading_power_gain,
    noise_power_w,
)
from edgefl.sim.band import Flow, SharedBand
from edgefl.sim.component import Component
from edgefl.sim.physics import UPLOAD, Step

RETIME = object()  # the interrupt cause of a rate change in the middle of an activity


class DedicatedUplink(Component):
    """A component (edgefl.sim.component) like the others; the digital accesses use none of its hooks."""

    analog = False  # digital: the server receives each upload as sent (superpose returns it unchanged)
    # (a band of its own acts only inside the chain that sends; an access whose send differs shares a channel, and
    # its chains never run inline: edgefl.sim.chain.runs_inline)
    acts_during_phases = False

    def __init__(self, env: simpy.Environment, radio, coherence_s: float | None = None, link: str = "uplink"):
        self.env, self.radio, self.link = env, radio, link  # link: "uplink", or "downlink" (the core's downloads)
        self.rate_factor: dict[int, float] = {}  # client -> its uplink rate / the planned one (absent: 1)
        self._sending: dict[int, simpy.Process | None] = {}  # client -> its process, while a timed upload is on the air
        # Whether a component may change rates (Component.changes_uplink_rate): only then is a timed upload
        # watched for changes (a few bookkeeping steps per upload: the engine's overhead, benchmarks [3]).
        self.retimable = False

    def send(self, client: int, step: Step, log: list, doing: list):
        """Dedicated band: the upload (all its attempts) takes its airtime."""
        self.radio.start_transfer(log, client, doing, self.env.now)
        if not self.retimable:
            yield self.env.timeout(step.duration_s)
        else:
            yield from self._on_air(client, step.duration_s)
        return step.lost

    def _on_air(self, client: int, seconds: float):
        """A timed upload of ``seconds`` planned airtime, re-timed whenever the client's rate changes (only when
        a component may change rates: a generator of its own costs per upload, benchmarks [3])."""
        env = self.env
        seconds, factor = self._airtime(client, seconds)
        self._sending[client] = env.active_process
        try:
            while True:
                start = env.now
                try:
                    yield env.timeout(seconds)
                    break
                except simpy.Interrupt as change:
                    seconds, factor = self._retimed(client, change, seconds - (env.now - start), factor)
        finally:
            del self._sending[client]

    def _airtime(self, client: int, seconds: float) -> tuple[float, float]:
        """The planned airtime at the client's rate now, and its rate factor."""
        factor = self.rate_factor.get(client, 1.0)
        return (seconds, factor) if factor == 1.0 else (seconds / factor, factor)

    def _retimed(self, client: int, change: simpy.Interrupt, left_s: float, factor: float) -> tuple[float, float]:
        """The airtime left at the client's new rate (a rate change); any other interrupt goes on up."""
        if change.cause is not RETIME:
            raise change
        new = self.rate_factor.get(client, 1.0)
        return left_s * factor / new, new

    def superpose(self, updates: torch.Tensor, clients=None) -> torch.Tensor:
        """The arrived clients' update vectors [K, d] (``clients`` [K]: whose) as the server receives them (digital:
        as sent)."""
        return updates

    def rate_changed(self, client: int, factor: float) -> None:
        """The client's rate on this link is ``factor`` times the planned one from now on."""
        if not self.retimable:
            raise RuntimeError(
                f"an {self.link} rate changed, but no component declared changes_{self.link}_rate = True "
                "(edgefl.sim.component): set it on the component's class"
            )
        self.rate_factor[client] = factor
        proc = self._sending.get(client)
        if proc is not None and proc.is_alive:
            proc.interrupt(RETIME)


class TdmaUplink(DedicatedUplink):
    def __init__(self, env: simpy.Environment, radio, coherence_s: float | None = None):
        super().__init__(env, radio)
        self.channel = simpy.Resource(env, capacity=1)

    def send(self, client: int, step: Step, log: list, doing: list):
        """TDMA: wait for the channel (idle, or the radio's tail: not transmission), then send at the full
        band's rate, keeping the channel for every attempt."""
        with self.channel.request() as slot:
            yield slot
            return (yield from super().send(client, step, log, doing))  # then as on a band of its own


class FdmaUplink(DedicatedUplink):
    def __init__(self, env: simpy.Environment, radio, coherence_s: float | None = None):
        super().__init__(env, radio)
        self.band = SharedBand(env, coherence_s)

    def send(self, client: int, step: Step, log: list, doing: list):
        """FDMA: share the band with the uploads in progress. With retransmissions (or attempts that
        can fail), each attempt is a flow; whether it fails is decided on the share it holds when it
        starts. (Each flow waited for here, not in a generator of its own: one fewer per upload, benchmarks [3].)"""
        if step.rates_bps is None:  # a band share of its own (a controller's allocation): timed
            return (yield from super().send(client, step, log, doing))
        self.radio.start_transfer(log, client, doing, self.env.now)
        flow: Flow | None = None  # the flow sending (one starts before anything waits)
        try:
            if step.fdma_attempts is None:  # one attempt that gets through
                flow = self._flow(client, step.bits, step.rates_bps, step.block_rates)
                yield flow.done
                return False
            for ok_rates, failed_rates, fails in step.fdma_attempts:
                failed = fails[len(self.band.flows)]  # n - 1 with n = the others + this one
                flow = self._flow(client, step.bits, failed_rates if failed else ok_rates)
                yield flow.done
                if not failed:
                    return False
            return True
        except simpy.Interrupt:  # the flow sending stops (its share goes to the others)
            if flow is not None:
                self.band.cancel(flow)
            raise

    def rate_changed(self, client: int, factor: float) -> None:
        super().rate_changed(client, factor)
        self.band.rescale(client, factor)

    def _flow(self, client: int, bits: float, rates_bps: list[float], block_rates=None) -> Flow:
        return self.band.transmit(client, bits, rates_bps, block_rates, self.rate_factor.get(client, 1.0))


class AirCompUplink(DedicatedUplink):
    """Over-the-air computation (``network.uplink = "aircomp"``, channel/aircomp.py): a phase's uploaders send at
    once, in one slot that starts when every one of them still running is ready, for d / (B · symbols per Hz)
    seconds whatever their number; each at the power that inverts its channel. Which devices can take part is
    decided per round (truncation: ``restrict``), from this round's fading (its own stream); the server's
    estimate of the mean has the noise of :func:`channel.aircomp_mean_noise_std` (another stream)."""

    analog = True

    def __init__(self, env: simpy.Environment, radio, network, seed: int):
        super().__init__(env, radio)
        self.net = network
        self._gain_rng = np.random.default_rng(np.random.SeedSequence([seed, 0xA1C0]))
        self._noise_rng = np.random.default_rng(np.random.SeedSequence([seed, 0xA1C1]))
        self._round_snr: np.ndarray | None = None  # every device's SNR at full power this round (None: to draw)
        self._snr_per_w = np.zeros(0)  # ... and per W of transmit power
        self.receive_snr = float("nan")  # of the phase's senders (rho)
        self._senders: set[int] = set()  # the phase's uploaders still running, and those ready to send
        self._ready: set[int] = set()
        self._slot = env.event()

    def round_start(self) -> None:
        self._round_snr = None  # drawn when the server asks who can take part (after mobility moved devices)

    def _round_channel(self) -> np.ndarray:
        """Every device's SNR at full power this round (its fading drawn at the round's first ask)."""
        if self._round_snr is None:
            per_w = self.core.physics.mean_channel()[0]
            gain = fading_power_gain(self.net.fading, self._gain_rng, size=len(per_w), rician_k=self.net.rician_k)
            self._snr_per_w = per_w * gain
            self._round_snr = self.core.pop.tx_power_w * self._snr_per_w
        return self._round_snr

    def restrict(self, online: np.ndarray) -> np.ndarray:
        return online & aircomp_scheduled(self._round_channel(), self.net.aircomp_threshold_db)

    def phase_start(self, phase, clients, plans) -> set[int]:
        """The phase's uploads: their airtime (each sender's power is set when the slot opens)."""
        self._round_channel()  # (drawn here for a phase outside start_round: a re-priced trace)
        senders = [c for c in clients if any(step.kind == UPLOAD for step in plans[c])]
        self._senders, self._ready, self._slot = set(senders), set(), self.env.event()
        for client in senders:
            for step in plans[client]:
                if step.kind == UPLOAD:
                    values = max(step.bits - self.net.header_bits, 0.0) / self.net.bits_per_param
                    step.duration_s = aircomp_airtime_s(values, self.net.bandwidth_hz, self.net.aircomp_symbols_per_hz)
                    step.lost, step.rates_bps = False, None
        return set()

    def _sender_powers_w(self, senders: list[int], round_snr: np.ndarray) -> np.ndarray:
        """The phase's common receive SNR (``receive_snr``) and each sender's transmit power (W)."""
        self.receive_snr = aircomp_receive_snr(round_snr[senders])
        return aircomp_tx_power_w(self.receive_snr, self._snr_per_w[senders])

    def chains_started(self, clients, plans, procs) -> None:
        for client, proc in zip(clients, procs):
            if client in self._senders:
                proc.callbacks.append(lambda _, client=client: self._gone(client))

    def _gone(self, client: int) -> None:
        self._senders.discard(client)
        self._open_when_ready()

    def _open_when_ready(self) -> None:
        if not self._slot.triggered and self._senders <= self._ready:
            self._set_powers(sorted(self._senders))
            self._slot.succeed()

    def _set_powers(self, senders: list[int]) -> None:
        """The common receive SNR rho over the devices whose upload starts in the slot (not those planned whose
        chain ended before: a lost download, a failure, offline), and each one's power for it."""
        if not senders:
            return
        power_w = self._sender_powers_w(senders, self._round_channel())
        for client, watts in zip(senders, power_w.tolist()):
            self.core.set_tx_power_w(client, watts)

    def send(self, client: int, step: Step, log: list, doing: list):
        """Wait for the slot (every sender still running ready), then send with the others."""
        self._ready.add(client)
        self._open_when_ready()
        yield self._slot
        self.radio.start_transfer(log, client, doing, self.env.now)
        yield self.env.timeout(step.duration_s)
        return False

    def superpose(self, updates: torch.Tensor, clients=None) -> torch.Tensor:
        """Each arrived update plus the same noise vector: their mean is the server's noisy estimate of the mean."""
        rms = float(updates.double().pow(2).mean(dim=1).sqrt().max())
        std = aircomp_mean_noise_std(rms, len(updates), self.receive_snr)
        noise = self.core.analog_noise(updates.shape[1]) * std  # (through the core: journaled, edgefl.checkpoint)
        return updates + torch.as_tensor(noise, dtype=updates.dtype)

    def noise(self, values: int) -> np.ndarray:
        """``values`` standard normal draws of the aggregation noise's stream."""
        return self._noise_rng.standard_normal(values)


class _OnAirTap:
    """A radio seen through: its ``start_transfer`` also tells ``on_start(client)`` (the moment a transfer goes on the
    air, after any wait for the channel); every other attribute is the radio's."""

    def __init__(self, radio, on_start):
        self._radio, self._on_start = radio, on_start

    def start_transfer(self, log: list, client: int, doing: list, now: float) -> None:
        self._radio.start_transfer(log, client, doing, now)
        self._on_start(client)

    def __getattr__(self, name):
        return getattr(self._radio, name)


class CellAirCompUplink(AirCompUplink):
    """Over-the-air computation on several cells (docs/over-the-air.md, "On several cells"). Each base station receives
    the analog sum of its own cell's senders; the cells share one slot (their frames aligned: it opens when every
    sender of the phase, in every cell, is ready), so the senders of the other co-channel cells, each at the power that
    inverts its channel to its own base station, interfere during all of it. In cell c the senders invert their
    channels to the cell's receive SNR ρ_c (its weakest sender at full power, as in one cell); the interference adds
    to the aggregation noise: ρ_c,eff = ρ_c / (1 + INR_c), INR_c = Σ_{j in co-channel cells d ≠ c} p_j G_{j,c} / N
    (G the layout's mean gains: no fading on the cross links; N the noise over the band). Cell c's estimate of its
    mean has noise s_c / (K_c sqrt(ρ_c,eff)) per value (s_c the largest RMS of its vectors sent); the server's mean
    of all arrived updates is the K_c-weighted mean of the cells' estimates."""

    def attach(self, core) -> None:
        super().attach(core)
        self.layout = core.pop.cells
        self.cell_snr: dict[int, float] = {}  # each cell's effective receive SNR this phase (interference included) ...
        self.cell_clear_snr: dict[int, float] = {}  # ... and without the other cells (rho_c)

    def _round_channel(self) -> np.ndarray:
        """Every device's SNR at full power to its serving cell this round (mean gain x this round's fading), and
        every device's mean SNR per W to every cell (``_gain_over_noise`` [N, C]: the cross links)."""
        if self._round_snr is None:
            devices, layout = self.core.devices, self.layout
            gain = 10.0 ** (-layout.link_loss_db(devices.position_m) / 10.0)
            noise_w = float(noise_power_w(layout.uplink_bandwidth_hz, layout.up_noise_figure_db))
            self._gain_over_noise = gain / noise_w
            per_w = self._gain_over_noise[np.arange(len(gain)), devices.cell]
            fading = fading_power_gain(self.net.fading, self._gain_rng, size=len(per_w), rician_k=self.net.rician_k)
            self._snr_per_w = per_w * fading
            self._round_snr = self.core.pop.tx_power_w * self._snr_per_w
        return self._round_snr

    def _sender_powers_w(self, senders: list[int], round_snr: np.ndarray) -> np.ndarray:
        cell, band = self.core.devices.cell, self.layout.band
        members: dict[int, list[int]] = {}
        for client in senders:
            members.setdefault(int(cell[client]), []).append(client)
        power: dict[int, float] = {}
        rho: dict[int, float] = {}
        for c, group in members.items():
            rho[c] = aircomp_receive_snr(round_snr[group])
            power.update(zip(group, aircomp_tx_power_w(rho[c], self._snr_per_w[group]).tolist()))
        self.cell_snr = {}
        for c in members:
            inr = sum(
                power[j] * self._gain_over_noise[j, c]
                for d, group in members.items()
                if d != c and band[d] == band[c]
                for j in group
            )
            self.cell_snr[c] = rho[c] / (1.0 + inr)
        self.cell_clear_snr = rho
        self.receive_snr = min(self.cell_snr.values())
        return np.array([power[client] for client in senders])

    def superpose(self, updates: torch.Tensor, clients=None) -> torch.Tensor:
        """Each cell's arrived updates plus that cell's noise vector (cells in increasing order, one draw each)."""
        if clients is None:
            raise ValueError("over-the-air computation on several cells needs the arrived clients to superpose")
        cell = self.core.devices.cell[np.asarray(clients, dtype=np.int64)]
        received = updates.clone()
        for c in sorted(set(cell.tolist())):
            rows = torch.as_tensor(np.flatnonzero(cell == c), dtype=torch.long)
            part = updates[rows]
            rms = float(part.double().pow(2).mean(dim=1).sqrt().max())
            std = aircomp_mean_noise_std(rms, len(rows), self.cell_snr[c])
            noise = self.core.analog_noise(updates.shape[1]) * std  # (journaled, as in one cell)
            received[rows] = part + torch.as_tensor(noise, dtype=updates.dtype)
        return received


class CellUplinks(DedicatedUplink):
    """Several cells (``network.cells`` > 1): each cell has its own uplink access of the network's scheme (its own
    FDMA band or TDMA channel), and a device's uploads go through its serving cell's (``core.devices.cell``, which
    a handover changes between rounds). With ``watch_air`` (``network.interference = "events"``) it keeps the
    clients whose uploads are on the air (``on_air``) and calls ``air_changed()`` whenever one starts or ends."""

    def __init__(
        self, env: simpy.Environment, radio, access: str, coherence_s: float | None, cells: int, watch_air=False
    ):
        self.watch_air = watch_air
        self.on_air: set[int] = set()
        self.air_changed = lambda: None  # set by the component that follows the uploads (EventInterference)
        cell_radio = _OnAirTap(radio, self._started) if watch_air else radio
        self.per_cell = [UPLINKS[access](env, cell_radio, coherence_s) for _ in range(cells)]
        super().__init__(env, radio)

    def _started(self, client: int) -> None:
        self.on_air.add(client)
        self.air_changed()

    @property
    def retimable(self) -> bool:
        return self.per_cell[0].retimable

    @retimable.setter
    def retimable(self, value: bool) -> None:
        for uplink in self.per_cell:
            uplink.retimable = value

    def send(self, client: int, step: Step, log: list, doing: list):
        access = self.per_cell[self.core.devices.cell[client]]
        if not self.watch_air:
            return (yield from access.send(client, step, log, doing))
        try:
            return (yield from access.send(client, step, log, doing))
        finally:  # sent, lost or cut: off the air
            if client in self.on_air:
                self.on_air.discard(client)
                self.air_changed()

    def rate_changed(self, client: int, factor: float) -> None:
        self.per_cell[self.core.devices.cell[client]].rate_changed(client, factor)


UPLINKS = {"dedicated": DedicatedUplink, "fdma": FdmaUplink, "tdma": TdmaUplink, "aircomp": AirCompUplink}


def make_uplink(network, env: simpy.Environment, radio, seed: int) -> DedicatedUplink:
    """The uplink access of ``network`` (``NetworkParams.uplink_access``); with several cells, one per cell."""
    if network.cells > 1 and network.uplink_access == "aircomp":
        return CellAirCompUplink(env, radio, network, seed)
    if network.cells > 1:
        events = network.interference == "events"
        return CellUplinks(env, radio, network.uplink_access, network.coherence_s, network.cells, events)
    if network.uplink_access == "aircomp":
        return AirCompUplink(env, radio, network, seed)
    return UPLINKS[network.uplink_access](env, radio, network.coherence_s)
