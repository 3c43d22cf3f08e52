"""FDMA uplink: the band is split equally among the uploads in progress (processor sharing).

Each of the n active uploads gets B/n Hz. Whenever an upload starts, ends or is cut off, the
remaining bits of every upload are advanced at the old rates and the rates are re-planned for
the new n; one pending SimPy timeout fires at the next completion (a superseded one is a no-op).
Rates are not computed here: each upload brings its rate at every possible number of sharers
(:class:`edgefl.sim.physics.PhasePhysics` computes them for a whole phase at once).

The uploads' numbers (bits left, block end, rate now, rate tables) are numpy arrays in the order the
uploads started, so that a re-plan costs a few array operations whatever the number of uploads (1,000
uploads of one phase: a Python loop over them at each of their 2,000 starts and ends was the
co-simulation's largest cost); each element is computed by the same float64 operations as one at a
time, so the times are the same numbers. Bits left and block ends live in buffers whose capacity
doubles (an upload's start writes one element; an end shifts the elements after it), padded beyond the
uploads so that an event works on whole buffers, and each event makes as few numpy calls as it can: with ~20 uploads a call costs about a microsecond whatever its
size, and these calls were about half of an FDMA + Rayleigh co-simulation's pricing (benchmarks [3]).
"""

from __future__ import annotations

import math

import numpy as np
import simpy

# A flow is finished within this share of its rate of zero bits left; a 0-d array, not a Python float, as is
# SharedBand._elapsed: numpy multiplies an array by a Python float in about twice the time it takes with an array, the
# same products (two of the few numpy calls of each start and end, benchmarks [3]).
_FINISHED = np.array(1e-9)


class Flow:
    __slots__ = ("client", "done", "block_rates", "block", "scale", "slot", "slow")

    def __init__(self, client: int, done: simpy.Event, block_rates, scale: float, slot: int):
        self.client = client
        self.done = done  # succeeds when the last bit is through
        self.block_rates = block_rates  # block fading: rates of block k (None: one draw)
        self.block = 0
        self.scale = scale  # its rates are the planned rates x scale (a component changed the link's rate)
        self.slot = slot  # its column of SharedBand's rate table
        self.slow = False  # whether a rate of its column may be below 1 bit/s (or NaN): SharedBand._slow


class SharedBand:
    def __init__(self, env: simpy.Environment, coherence_s: float | None = None):
        self.env = env
        self.coherence_s = math.inf if coherence_s is None else coherence_s  # None: one draw per message
        self.flows: list[Flow] = []  # the uploads in progress, in the order they started; their numbers in
        # The flows' numbers, the first len(flows) elements of buffers whose other elements are padding that no
        # operation can pick or change (bits left and block end inf, the rate table's column 0 of rates 1: never the
        # first end, never finished, lowest rate > 0 and >= 1 exactly when the flows' are), so that each event reads
        # and writes whole buffers, not slices of its own: bits left ...
        self._remaining = np.full(8, math.inf)
        self._block_end = np.full(8, math.inf)  # ... their block ends (inf: one draw) ...
        self._slots = np.zeros(8, dtype=np.int64)  # ... and their columns of the rate table
        self._rate = np.zeros(0)  # their rate now (bit/s), re-planned at every start, end or cut ...
        self._lowest = 0.0  # ... and the lowest of them, found where a flow is slow (else it is >= 1: not looked for)
        # The flows whose rates may be below 1 bit/s (0 in an outage, NaN): none is the usual case, where every rate of
        # every flow is >= 1, and so is the lowest rate now (the padding's rates are 1): the re-plan at each start and
        # end then takes the first end at once, without finding the lowest rate (benchmarks [3])
        self._slow = 0
        self._table = np.zeros((0, 1))  # [n - 1, slot]: the rate of the flow in that slot with n sharers (slot 0: 1)
        self._free: list[int] = []  # columns of the table no flow holds
        self._faded = 0  # flows with block fading (none: no block ends to watch)
        self._last = env.now
        self._elapsed = np.zeros(())  # the time since then as a 0-d array (see _FINISHED)
        self._version = 0

    def transmit(self, client: int, bits: float, rates_bps, block_rates=None, scale: float = 1.0) -> Flow:
        """Start an upload; ``flow.done`` succeeds when its last bit is through. With
        ``block_rates`` (block fading), its rates change every ``coherence_s`` seconds; ``scale``: its
        rates times this (a component changed the link's rate)."""
        self._advance()
        n = len(self.flows)
        if n + 1 == len(self._slots):  # full but the last padding element (an end's shift reads it): twice the capacity
            self._remaining = np.concatenate([self._remaining, np.full(n, math.inf)])
            self._block_end = np.concatenate([self._block_end, np.full(n, math.inf)])
            self._slots = np.concatenate([self._slots, np.zeros(n, dtype=np.int64)])
        flow = Flow(client, self.env.event(), block_rates, scale, self._take_slot())
        self._set_rates(flow, rates_bps)
        self.flows.append(flow)
        self._remaining[n] = float(bits)
        if block_rates is not None:  # (else inf, as the padding)
            self._block_end[n] = self.env.now + self.coherence_s
            self._faded += 1
        self._slots[n] = flow.slot
        self._reschedule()
        return flow

    def cancel(self, flow: Flow) -> None:
        """Stop an upload early (deadline); the others speed up."""
        if flow in self.flows:
            self._advance()
            self._drop([self.flows.index(flow)])
            self._reschedule()

    def rescale(self, client: int, scale: float) -> None:
        """The client's uploads in progress send at ``scale`` times their rates from now on: re-planned."""
        flows = [flow for flow in self.flows if flow.client == client]
        if flows:
            self._advance()
            for flow in flows:
                self._table[:, flow.slot] = self._table[:, flow.slot] * scale / flow.scale
                flow.scale = scale
                self._slow += not flow.slow  # (its column, scaled: taken as slow from now on)
                flow.slow = True
            self._reschedule()

    def _take_slot(self) -> int:
        if not self._free:  # twice the columns: each flow a column of its own
            held = self._table.shape[1]
            self._table = np.concatenate([self._table, np.full((len(self._table), max(held, 1)), np.nan)], axis=1)
            self._free = list(range(self._table.shape[1] - 1, held - 1, -1))
        return self._free.pop()

    def _set_rates(self, flow: Flow, rates_bps) -> None:
        """The flow's rates with 1, 2, ... sharers (times its scale) into its column of the table."""
        rates = np.asarray(rates_bps, dtype=np.float64)
        if len(rates) > len(self._table):  # a longer table: every column lengthened (NaN: never read)
            longer = np.full((len(rates), self._table.shape[1]), np.nan)
            longer[: len(self._table)] = self._table
            longer[:, 0] = 1.0  # (the padding's column)
            self._table = longer
        if flow.scale != 1.0:
            rates = rates * flow.scale
        slow = not rates[rates.argmin()] >= 1.0  # (a NaN is picked, and is slow)
        self._slow += slow - flow.slow
        flow.slow = slow
        if len(rates) == len(self._table):  # (the usual case: one assignment)
            self._table[:, flow.slot] = rates
            return
        column = self._table[:, flow.slot]
        column[len(rates) :] = np.nan
        column[: len(rates)] = rates

    def _drop(self, gone: list[int]) -> None:
        """Forget the flows at the positions ``gone`` (ascending; their columns of the table are free again);
        the flows after them move up, in order, and padding fills the places they leave."""
        n, slots = len(self.flows), self._slots
        # without block fading every block end is inf (and stays so): only the bits left move
        moved: list[tuple[np.ndarray, float]] = [(self._remaining, math.inf), (slots, 0)]
        if self._faded:
            moved.append((self._block_end, math.inf))
        for k in reversed(gone):
            flow = self.flows.pop(k)
            self._faded -= flow.block_rates is not None
            self._slow -= flow.slow
        if len(gone) == 1:  # the usual end: one flow (a few of m: no pass over all m in Python)
            k = gone[0]
            self._free.append(flow.slot)  # (its column: slots[k], without reading a numpy scalar)
            for buffer, _ in moved:  # (one copy: the element after the flows is padding, moved in at n - 1)
                buffer[k:n] = buffer[k + 1 : n + 1]
        else:
            self._free.extend(slots[gone].tolist())
            keep = np.ones(n, dtype=bool)
            keep[gone] = False
            for buffer, padding in moved:
                buffer[: n - len(gone)] = buffer[:n][keep]
                buffer[n - len(gone) : n] = padding

    def _advance(self) -> None:
        elapsed = self.env.now - self._last
        if elapsed > 0 and self.flows:
            self._elapsed[()] = elapsed
            self._remaining -= self._rate * self._elapsed
        self._last = self.env.now

    def _reschedule(self) -> None:
        self._version += 1
        if not self.flows:
            return
        # the flows' rates with n sharers: row n - 1 of the table at their columns (take: a third of fancy indexing's
        # cost, the same numbers)
        self._rate = rate = self._table[len(self.flows) - 1].take(self._slots)
        positive = not self._slow  # (every rate >= 1, the padding's 1 too: the lowest too, not looked for)
        if not positive:
            self._lowest = rate[rate.argmin()]  # (argmin: a fraction of min's cost; a NaN, never read, is picked)
            positive = self._lowest > 0
        if positive and not self._faded:  # the usual case: the first end, each flow's bits left / its rate
            t = self._remaining / rate
            first = float(t[t.argmin()])
            # (bits left below 0 by rounding are none: the same number as the first of max(bits left, 0) / rate)
            self.env.timeout(first if first >= 0 else 0.0, self._version).callbacks.append(self._on_timer)
            return
        t = np.maximum(self._remaining, 0.0)  # bits left below 0 (rounding) are none
        if positive:
            t /= rate
        else:  # an outage block (rate 0) waits
            t = np.divide(t, rate, out=np.full(len(rate), math.inf), where=rate > 0)
        if self._faded:
            block_left = self._block_end - self.env.now
            t = np.where(block_left < t, block_left, t)  # its block ends first: re-plan then
        self.env.timeout(float(t[t.argmin()]), self._version).callbacks.append(self._on_timer)

    def _on_timer(self, timer: simpy.Timeout) -> None:
        if timer.value != self._version:
            return  # superseded by a later start, end or cancel
        self._advance()
        # Finished: within a relative rounding tolerance of zero bits left (max(1, rate) is the rate when none is below 1).
        floor = self._rate if not self._slow or self._lowest >= 1.0 else np.maximum(1.0, self._rate)
        finished = self._remaining <= _FINISHED * floor
        block_ended: list[int] = []
        if self._faded:
            block_ended = (~finished & (self._block_end <= self.env.now + 1e-9)).nonzero()[0].tolist()
        for k in block_ended:  # block fading: the next block's draw
            flow = self.flows[k]
            flow.block += 1
            self._set_rates(flow, flow.block_rates(flow.block))
            self._block_end[k] += self.coherence_s
        gone = finished.nonzero()[0].tolist()
        if not gone and not block_ended:  # rounding left a sliver: finish the closest one
            sending = np.flatnonzero(self._rate > 0)
            gone = [int(sending[np.argmin(self._remaining[sending] / self._rate[sending])])]
        done = [self.flows[k] for k in gone]
        if gone:
            self._drop(gone)
        for flow in done:
            flow.done.succeed()
        self._reschedule()
