"""FDMA uplink: the band is split equally among the uploads in progress (processor sharing).

Each of the n active uploads gets B/n Hz. Whenever an upload starts, ends or is cut off, the
remaining bits of every upload are advanced at the old rates and the rates are re-planned for
the new n; one pending SimPy timeout fires at the next completion (a superseded one is a no-op).
Rates are not computed here: each upload brings its rate at every possible number of sharers
(:class:`edgefl.sim.physics.PhasePhysics` computes them for a whole phase at once).
"""

from __future__ import annotations

import math

import simpy


class Flow:
    __slots__ = (
        "client",
        "remaining_bits",
        "rates_bps",
        "rate_bps",
        "done",
        "block_rates",
        "block",
        "block_end",
        "scale",
    )

    def __init__(
        self,
        client: int,
        bits: float,
        rates_bps: list[float],
        done: simpy.Event,
        block_rates=None,
        block_end: float = math.inf,
        scale: float = 1.0,
    ):
        self.client = client
        self.remaining_bits = bits
        self.rates_bps = rates_bps  # rate with n sharers at rates_bps[n - 1]
        self.rate_bps = 0.0
        self.done = done  # succeeds when the last bit is through
        self.block_rates = block_rates  # block fading: rates of block k (None: one draw)
        self.block, self.block_end = 0, block_end
        self.scale = scale  # rates_bps are the planned rates x scale (a component changed the link's rate)
        if scale != 1.0:
            self.rates_bps = [rate * scale for rate in rates_bps]


class SharedBand:
    def __init__(self, env: simpy.Environment, coherence_s: float | None = None):
        self.env = env
        self.coherence_s = math.inf if coherence_s is None else coherence_s  # None: one draw per message
        self.flows: list[Flow] = []
        self._last = env.now
        self._version = 0

    def transmit(self, client: int, bits: float, rates_bps: list[float], block_rates=None, scale: float = 1.0) -> Flow:
        """Start an upload; ``flow.done`` succeeds when its last bit is through. With
        ``block_rates`` (block fading), its rates change every ``coherence_s`` seconds; ``scale``: its
        rates times this (a component changed the link's rate)."""
        self._advance()
        block_end = math.inf if block_rates is None else self.env.now + self.coherence_s
        flow = Flow(client, float(bits), rates_bps, self.env.event(), block_rates, block_end, scale)
        self.flows.append(flow)
        self._reschedule()
        return flow

    def cancel(self, flow: Flow) -> None:
        """Stop an upload early (deadline); the others speed up."""
        if flow in self.flows:
            self._advance()
            self.flows.remove(flow)
            self._reschedule()

    def rescale(self, client: int, scale: float) -> None:
        """The client's uploads in progress send at ``scale`` times their rates from now on: re-planned."""
        flows = [flow for flow in self.flows if flow.client == client]
        if flows:
            self._advance()
            for flow in flows:
                flow.rates_bps = [rate * scale / flow.scale for rate in flow.rates_bps]
                flow.scale = scale
            self._reschedule()

    def _advance(self) -> None:
        elapsed = self.env.now - self._last
        if elapsed > 0:
            for flow in self.flows:
                flow.remaining_bits -= flow.rate_bps * elapsed
        self._last = self.env.now

    def _reschedule(self) -> None:
        self._version += 1
        flows = self.flows
        if not flows:
            return
        n = len(flows)
        wait = float("inf")
        now = self.env.now
        for flow in flows:
            flow.rate_bps = rate = flow.rates_bps[n - 1]
            remaining = flow.remaining_bits
            t = (remaining if remaining > 0.0 else 0.0) / rate if rate > 0 else math.inf  # outage block: waits
            if flow.block_end - now < t:  # its block ends first: re-plan then
                t = flow.block_end - now
            if t < wait:
                wait = t
        self.env.timeout(wait, self._version).callbacks.append(self._on_timer)

    def _on_timer(self, timer: simpy.Timeout) -> None:
        if timer.value != self._version:
            return  # superseded by a later start, end or cancel
        self._advance()
        # Finished: within a relative rounding tolerance of zero bits left.
        finished = [f for f in self.flows if f.remaining_bits <= 1e-9 * max(1.0, f.rate_bps)]
        block_ended = [f for f in self.flows if f not in finished and f.block_end <= self.env.now + 1e-9]
        for flow in block_ended:  # block fading: the next block's draw
            flow.block += 1
            flow.rates_bps = flow.block_rates(flow.block)
            if flow.scale != 1.0:
                flow.rates_bps = [rate * flow.scale for rate in flow.rates_bps]
            flow.block_end += self.coherence_s
        if not finished and not block_ended:  # rounding left a sliver: finish the closest one
            finished = [min((f for f in self.flows if f.rate_bps > 0), key=lambda f: f.remaining_bits / f.rate_bps)]
        for flow in finished:
            self.flows.remove(flow)
            flow.done.succeed()
        self._reschedule()
