"""FDMA uplink: the band is split equally among the uploads in progress (processor sharing).

Each of the n active uploads gets B/n Hz. Whenever an upload starts, ends or is cut off, the
remaining bits of every upload are advanced at the old rates and the rates are re-planned for
the new n; one pending SimPy timeout fires at the next completion (a superseded one is a no-op).
Rates are not computed here: each upload brings its rate at every possible number of sharers
(:class:`edgefl.sim.physics.PhasePhysics` computes them for a whole phase at once).

The uploads' numbers (bits left, rate now, block end, rate tables) are numpy arrays in the order the
uploads started, so that a re-plan costs a few array operations whatever the number of uploads (1,000
uploads of one phase: a Python loop over them at each of their 2,000 starts and ends was the
co-simulation's largest cost); each element is computed by the same float64 operations as one at a
time, so the times are the same numbers.
"""

from __future__ import annotations

import math

import numpy as np
import simpy


class Flow:
    __slots__ = ("client", "done", "block_rates", "block", "scale", "slot")

    def __init__(self, client: int, done: simpy.Event, block_rates, scale: float, slot: int):
        self.client = client
        self.done = done  # succeeds when the last bit is through
        self.block_rates = block_rates  # block fading: rates of block k (None: one draw)
        self.block = 0
        self.scale = scale  # its rates are the planned rates x scale (a component changed the link's rate)
        self.slot = slot  # its row of SharedBand's rate table


class SharedBand:
    def __init__(self, env: simpy.Environment, coherence_s: float | None = None):
        self.env = env
        self.coherence_s = math.inf if coherence_s is None else coherence_s  # None: one draw per message
        self.flows: list[Flow] = []  # the uploads in progress, in the order they started ...
        self._remaining = np.zeros(0)  # ... their bits left ...
        self._rate = np.zeros(0)  # ... their rate now (bit/s) ...
        self._block_end = np.zeros(0)  # ... when their fading block ends (inf: one draw) ...
        self._slots = np.zeros(0, dtype=np.int64)  # ... and their rows of the rate table
        self._table = np.zeros((0, 0))  # row of a flow: its rate with n sharers at [n - 1]
        self._free: list[int] = []  # rows of the table no flow holds
        self._last = env.now
        self._version = 0

    def transmit(self, client: int, bits: float, rates_bps, block_rates=None, scale: float = 1.0) -> Flow:
        """Start an upload; ``flow.done`` succeeds when its last bit is through. With
        ``block_rates`` (block fading), its rates change every ``coherence_s`` seconds; ``scale``: its
        rates times this (a component changed the link's rate)."""
        self._advance()
        block_end = math.inf if block_rates is None else self.env.now + self.coherence_s
        flow = Flow(client, self.env.event(), block_rates, scale, self._take_slot())
        self._set_rates(flow, rates_bps)
        self.flows.append(flow)
        self._remaining = np.append(self._remaining, float(bits))
        self._rate = np.append(self._rate, 0.0)
        self._block_end = np.append(self._block_end, block_end)
        self._slots = np.append(self._slots, flow.slot)
        self._reschedule()
        return flow

    def cancel(self, flow: Flow) -> None:
        """Stop an upload early (deadline); the others speed up."""
        if flow in self.flows:
            self._advance()
            keep = np.ones(len(self.flows), dtype=bool)
            keep[self.flows.index(flow)] = False
            self._drop(keep)
            self._reschedule()

    def rescale(self, client: int, scale: float) -> None:
        """The client's uploads in progress send at ``scale`` times their rates from now on: re-planned."""
        flows = [flow for flow in self.flows if flow.client == client]
        if flows:
            self._advance()
            for flow in flows:
                self._table[flow.slot] = self._table[flow.slot] * scale / flow.scale
                flow.scale = scale
            self._reschedule()

    def _take_slot(self) -> int:
        if not self._free:  # twice the rows: each flow a row of its own
            held = len(self._table)
            self._table = np.concatenate([self._table, np.full((max(held, 1), self._table.shape[1]), np.nan)])
            self._free = list(range(len(self._table) - 1, held - 1, -1))
        return self._free.pop()

    def _set_rates(self, flow: Flow, rates_bps) -> None:
        """The flow's rates with 1, 2, ... sharers (times its scale) into its row of the table."""
        rates = np.asarray(rates_bps, dtype=np.float64)
        if len(rates) > self._table.shape[1]:  # a longer table: every row widened (NaN: never read)
            wider = np.full((len(self._table), len(rates)), np.nan)
            wider[:, : self._table.shape[1]] = self._table
            self._table = wider
        row = self._table[flow.slot]
        row[:] = np.nan
        row[: len(rates)] = rates * flow.scale if flow.scale != 1.0 else rates

    def _drop(self, keep: np.ndarray) -> None:
        """Forget the flows where ``keep`` is False (their rows of the table are free again)."""
        gone = np.flatnonzero(~keep).tolist()  # a few of m flows: no Python pass over all m at each end
        self._free.extend(self._slots[gone].tolist())
        for k in reversed(gone):
            del self.flows[k]
        self._remaining, self._rate = self._remaining[keep], self._rate[keep]
        self._block_end, self._slots = self._block_end[keep], self._slots[keep]

    def _advance(self) -> None:
        elapsed = self.env.now - self._last
        if elapsed > 0 and self.flows:
            self._remaining -= self._rate * elapsed
        self._last = self.env.now

    def _reschedule(self) -> None:
        self._version += 1
        if not self.flows:
            return
        now = self.env.now
        self._rate = rate = self._table[self._slots, len(self.flows) - 1]
        remaining = np.where(self._remaining > 0.0, self._remaining, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(rate > 0, remaining / rate, math.inf)  # an outage block (rate 0): waits
        block_left = self._block_end - now
        t = np.where(block_left < t, block_left, t)  # its block ends first: re-plan then
        self.env.timeout(float(t.min()), self._version).callbacks.append(self._on_timer)

    def _on_timer(self, timer: simpy.Timeout) -> None:
        if timer.value != self._version:
            return  # superseded by a later start, end or cancel
        self._advance()
        # Finished: within a relative rounding tolerance of zero bits left.
        finished = self._remaining <= 1e-9 * np.maximum(1.0, self._rate)
        block_ended = ~finished & (self._block_end <= self.env.now + 1e-9)
        for k in np.flatnonzero(block_ended).tolist():  # block fading: the next block's draw
            flow = self.flows[k]
            flow.block += 1
            self._set_rates(flow, flow.block_rates(flow.block))
            self._block_end[k] += self.coherence_s
        if not finished.any() and not block_ended.any():  # rounding left a sliver: finish the closest one
            sending = np.flatnonzero(self._rate > 0)
            finished[sending[np.argmin(self._remaining[sending] / self._rate[sending])]] = True
        done = [self.flows[k] for k in np.flatnonzero(finished).tolist()]
        self._drop(~finished)
        for flow in done:
            flow.done.succeed()
        self._reschedule()
