"""FDMA uplink: the band is split equally among the uploads in progress (processor sharing).

Each of the n active uploads gets B/n Hz. Whenever an upload starts, ends or is cut off,
the remaining bits of every upload are advanced at the old rates and the rates are
recomputed for the new n. A single pending timer fires at the next completion.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import simpy

# rate_bps(client, bandwidth_hz, fading_gain) -> achievable rate at that bandwidth
RateFn = Callable[[int, float, float], float]


@dataclass
class Flow:
    client: int
    remaining_bits: float
    gain: float
    done: simpy.Event
    rate_bps: float = 0.0


class SharedBand:
    def __init__(self, env: simpy.Environment, bandwidth_hz: float, rate_bps: RateFn):
        self.env = env
        self.bandwidth_hz = bandwidth_hz
        self.rate_bps = rate_bps
        self.flows: list[Flow] = []
        self._last = env.now
        self._version = 0

    def transmit(self, client: int, bits: float, gain: float) -> Flow:
        """Start an upload; ``flow.done`` succeeds when its last bit is through."""
        self._advance()
        flow = Flow(client, float(bits), gain, self.env.event())
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
        if not self.flows:
            return
        share_hz = self.bandwidth_hz / len(self.flows)
        for flow in self.flows:
            flow.rate_bps = self.rate_bps(flow.client, share_hz, flow.gain)
        wait = min(max(f.remaining_bits, 0.0) / f.rate_bps for f in self.flows)
        timer = self.env.timeout(wait)
        version = self._version
        timer.callbacks.append(lambda _event: self._on_timer(version))

    def _on_timer(self, version: int) -> None:
        if version != self._version:
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
