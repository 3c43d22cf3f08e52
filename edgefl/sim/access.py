"""Uplink access: how a client's upload gets the channel. Each ``send`` is a generator run inside the
client's chain process; it starts the transfer (``radio.start_transfer``) when the channel is the
client's, and returns whether the message was lost.

- dedicated: a band of its own; the upload (all its attempts) takes its airtime (a timeout).
- fdma: processor sharing of one band (:class:`~edgefl.sim.band.SharedBand`, re-planned when an
  upload starts or ends).
- tdma: one channel (a ``simpy.Resource`` of capacity 1), first come first served.
"""

from __future__ import annotations

import simpy

from edgefl.sim.band import SharedBand
from edgefl.sim.physics import Step


class DedicatedUplink:
    def __init__(self, env: simpy.Environment, radio, coherence_s: float | None = None):
        self.env, self.radio = env, radio

    def send(self, client: int, step: Step, log: list, doing: list):
        """Dedicated band: the upload (all its attempts) takes its airtime."""
        self.radio.start_transfer(log, client, doing)
        yield self.env.timeout(step.duration_s)
        return step.lost


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
            yield self.env.timeout(step.duration_s)
        return step.lost


class FdmaUplink(DedicatedUplink):
    def __init__(self, env: simpy.Environment, radio, coherence_s: float | None = None):
        super().__init__(env, radio)
        self.band = SharedBand(env, coherence_s)

    def send(self, client: int, step: Step, log: list, doing: list):
        """FDMA: share the band with the uploads in progress. With retransmissions (or attempts that
        can fail), each attempt is a flow; whether it fails is decided on the share it holds when it
        starts."""
        self.radio.start_transfer(log, client, doing)
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


UPLINKS = {"dedicated": DedicatedUplink, "fdma": FdmaUplink, "tdma": TdmaUplink}
