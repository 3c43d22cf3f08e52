"""The radio of each device: a state machine that lives across phases and rounds (a component).

idle --(a message: promotion, network.access_latency_s at promotion_power_w)--> connected (transfer)
--(transfer ends)--> tail (tail_s at tail_power_w) --(tail_s without a transfer)--> idle;
a transfer asked for in the tail needs no promotion, and the tail ends when it starts (docs/model.md §8).
A wait inside a chain is idle time, except the part inside the radio's tail, which the tail pays for.
"""

from __future__ import annotations

import numpy as np

from edgefl.sim.booking import CAT_IDLE, LogRow
from edgefl.sim.component import Component

# What a client is doing within a step (for what an interrupt cuts): waiting, its radio promoting, working.
WAIT, PROMOTION, WORK = range(3)


class RadioStates(Component):
    def __init__(self, population):
        self._tail_s, self._tail_power_w = population.tail_s.tolist(), population.tail_power_w.tolist()
        self._idle_power_w = population.idle_power_w.tolist()
        # Every device's radio tail still running: client -> [start s, charged until s, charge code, label of the
        # message it follows]; charged when it ends (the next transfer starts, it runs out, run_end()) and up to
        # the end of every round (round_end).
        self._tails: dict[int, list] = {}
        self._at = (0, 0)  # the round and phase being priced (or the last priced): where tails are logged

    def attach(self, core) -> None:
        super().attach(core)
        self.env = core.env

    def phase_start(self, phase, clients, plans) -> set[int]:
        self._at = (phase.round, phase.phase)
        self.expire_tails()
        return set()

    def connected_until_s(self) -> np.ndarray:
        """When each device's radio tail runs out (s; -inf: its radio is idle): a message asked for before then
        needs no promotion. What a base station knows of its devices' RRC states; changes nothing."""
        until = np.full(len(self._tail_s), -np.inf)
        for client, tail in self._tails.items():
            until[client] = tail[0] + self._tail_s[client]
        return until

    def connected(self, client: int, now: float) -> bool:
        """Whether the client's radio is still connected (in the tail of its last transfer) at ``now``; a tail
        that ran out before is charged in full."""
        tail = self._tails.get(client)
        if tail is None:
            return False
        if now < tail[0] + self._tail_s[client]:
            return True
        self._end_tail(client, None)
        return False

    def start_transfer(self, log: list, client: int, doing: list) -> None:
        """A transfer starts now: the wait before it is logged (idle where no tail covers it), the radio's tail
        ends (charged until now, at most tail_s)."""
        now = self.env.now
        if doing[0] == WAIT:
            self.log_wait(log, client, doing[1], now)
        if client in self._tails:
            self._end_tail(client, now)
        doing[:] = [WORK, now]

    def transfer_ended(self, client: int, code: int, label: str) -> None:
        """A transfer ended now: the radio's tail starts (no tail if ``tail_s`` is 0: the radio is idle)."""
        if self._tail_s[client] > 0:
            now = self.env.now
            self._tails[client] = [now, now, code, label]

    def _charge_tail(self, client: int, until: float) -> None:
        """Log the client's tail from where it was last charged until ``until`` (at most tail_s after it began),
        under the round and phase being priced (at a round's end: its last phase)."""
        tail = self._tails[client]
        end = min(until, tail[0] + self._tail_s[client])
        seconds = end - tail[1]
        if seconds > 0 and self._tail_power_w[client] > 0:
            self.core.log_row(self._at, LogRow(client, "tail", tail[3], tail[1], end, 0.0, tail[2], seconds, 0.0, "ok"))
        tail[1] = max(tail[1], end)

    def _end_tail(self, client: int, cut_at: float | None) -> None:
        """The client's tail ends: cut by a transfer starting at ``cut_at``, or run out in full (None)."""
        self._charge_tail(client, float("inf") if cut_at is None else cut_at)
        del self._tails[client]

    def expire_tails(self) -> None:
        """Charge in full every tail that has run out by now (called at the start of every phase and wherever
        batteries are read: journaled calls only, so a replayed pricer books the same rows in the same order)."""
        now = self.env.now
        tail_s = self._tail_s
        for client in [c for c, tail in self._tails.items() if tail[0] + tail_s[c] <= now]:
            self._end_tail(client, None)

    def round_end(self, round_: int) -> None:
        """The round ends (its metrics are read next): the tails still running are charged up to now, and go on
        (the rest is charged in the rounds they run in), so that a round's energy is what it spent."""
        self._at = (round_, self._at[1] if self._at[0] == round_ else 0)
        self.expire_tails()
        for client in self._tails:
            self._charge_tail(client, self.env.now)

    def run_end(self) -> None:
        """The run ends: every radio tail still running is charged in full (it runs out after the last
        message, as it would on the device), under the last round."""
        for client in list(self._tails):
            self._end_tail(client, None)

    def log_wait(self, log: list, client: int, start: float, end: float) -> None:
        """A wait inside the chain (a plug-in's before_step, the TDMA queue, before a promotion): idle power,
        except the part inside the radio's tail, which the tail pays for (never both)."""
        tail = self._tails.get(client)
        if tail is not None:
            start = max(start, tail[0] + self._tail_s[client])
        if end - start > 1e-12 and self._idle_power_w[client] > 0:
            log.append((client, "idle", "wait", start, end, 0.0, CAT_IDLE, end - start, 0.0, "ok", 0.0, 0.0))
