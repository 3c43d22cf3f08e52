"""FDMA uplink: the band is split equally among the uploads in progress (processor sharing).

Each of the n active uploads gets B/n Hz. Whenever an upload starts, ends or is cut off, the
remaining bits of every upload are advanced at the old rates and the rates are re-planned for
the new n; one pending SimPy timeout fires at the next completion (a superseded one is a no-op).
Rates are not computed here: each upload brings its rate at every possible number of sharers
(:class:`edgefl.sim.physics.PhasePhysics` computes them for a whole phase at once).
"""

from __future__ import annotations

import simpy


class Flow:
    __slots__ = ("client", "remaining_bits", "rates_bps", "rate_bps", "done")

    def __init__(self, client: int, bits: float, rates_bps: list[float], done: simpy.Event):
        self.client = client
        self.remaining_bits = bits
        self.rates_bps = rates_bps  # rate with n sharers at rates_bps[n - 1]
        self.rate_bps = 0.0
        self.done = done  # succeeds when the last bit is through


class SharedBand:
    def __init__(self, env: simpy.Environment):
        self.env = env
        self.flows: list[Flow] = []
        self._last = env.now
        self._version = 0

    def transmit(self, client: int, bits: float, rates_bps: list[float]) -> Flow:
        """Start an upload; ``flow.done`` succeeds when its last bit is through."""
        self._advance()
        flow = Flow(client, float(bits), rates_bps, self.env.event())
        self.flows.append(flow)
        self._reschedule()
        return flow

    def cancel(self, flow: Flow) -> None:
        """Stop an upload early (deadline); the others speed up."""
        if flow in self.flows:
            self._advance()
            self.flows.remove(flow)
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
        for flow in flows:
            flow.rate_bps = rate = flow.rates_bps[n - 1]
            remaining = flow.remaining_bits
            t = (remaining if remaining > 0.0 else 0.0) / rate
            if t < wait:
                wait = t
        self.env.timeout(wait, self._version).callbacks.append(self._on_timer)

    def _on_timer(self, timer: simpy.Timeout) -> None:
        if timer.value != self._version:
            return  # superseded by a later start, end or cancel
        self._advance()
        # Finished: within a relative rounding tolerance of zero bits left.
        finished = [f for f in self.flows if f.remaining_bits <= 1e-9 * max(1.0, f.rate_bps)]
        if not finished:  # rounding left a sliver: finish the closest one
            finished = [min(self.flows, key=lambda f: f.remaining_bits / f.rate_bps)]
        for flow in finished:
            self.flows.remove(flow)
            flow.done.succeed()
        self._reschedule()
