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

import simpy

from edgefl.sim.band import SharedBand
from edgefl.sim.physics import Step

RETIME = object()  # the interrupt cause of a rate change in the middle of an activity


class DedicatedUplink:
    def __init__(self, env: simpy.Environment, radio, coherence_s: float | None = None, link: str = "uplink"):
        self.env, self.radio, self.link = env, radio, link  # link: "uplink", or "downlink" (the core's downloads)
        self.rate_factor: dict[int, float] = {}  # client -> its uplink rate / the planned one (absent: 1)
        self._sending: dict[int, simpy.Process | None] = {}  # client -> its process, while a timed upload is on the air
        # Whether a component may change rates (Component.changes_uplink_rate): only then is a timed upload
        # watched for changes (a few bookkeeping steps per upload: the engine's overhead, benchmarks [3]).
        self.retimable = False

    def send(self, client: int, step: Step, log: list, doing: list):
        """Dedicated band: the upload (all its attempts) takes its airtime."""
        self.radio.start_transfer(log, client, doing)
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
            self.radio.start_transfer(log, client, doing)
            if not self.retimable:
                yield self.env.timeout(step.duration_s)
            else:
                yield from self._on_air(client, step.duration_s)
        return step.lost


class FdmaUplink(DedicatedUplink):
    def __init__(self, env: simpy.Environment, radio, coherence_s: float | None = None):
        super().__init__(env, radio)
        self.band = SharedBand(env, coherence_s)

    def send(self, client: int, step: Step, log: list, doing: list):
        """FDMA: share the band with the uploads in progress. With retransmissions (or attempts that
        can fail), each attempt is a flow; whether it fails is decided on the share it holds when it
        starts."""
        if step.rates_bps is None:  # a band share of its own (a controller's allocation): timed
            return (yield from super().send(client, step, log, doing))
        self.radio.start_transfer(log, client, doing)
        if step.fdma_attempts is None:  # one attempt that gets through
            yield from self._flow(client, step.bits, step.rates_bps, step.block_rates)
            return False
        for ok_rates, failed_rates, fails in step.fdma_attempts:
            failed = fails[len(self.band.flows)]  # n - 1 with n = the others + this one
            yield from self._flow(client, step.bits, failed_rates if failed else ok_rates)
            if not failed:
                return False
        return True

    def rate_changed(self, client: int, factor: float) -> None:
        super().rate_changed(client, factor)
        self.band.rescale(client, factor)

    def _flow(self, client: int, bits: float, rates_bps: list[float], block_rates=None):
        flow = self.band.transmit(client, bits, rates_bps, block_rates, self.rate_factor.get(client, 1.0))
        try:
            yield flow.done
        except simpy.Interrupt:
            self.band.cancel(flow)
            raise


UPLINKS = {"dedicated": DedicatedUplink, "fdma": FdmaUplink, "tdma": TdmaUplink}
