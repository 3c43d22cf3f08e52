"""The radio of each device: a state machine that lives across phases and rounds (a component).

idle --(a message: promotion, network.access_latency_s at promotion_power_w)--> connected (transfer)
--(transfer ends)--> tail (tail_s at tail_power_w) --(tail_s without a transfer)--> idle;
a transfer asked for in the tail needs no promotion, and the tail ends when it starts (docs/model.md §8).
A wait inside a chain is idle time, except the part inside the radio's tail, which the tail pays for.
A device that becomes unreachable (offline) releases its connection: its tail ends then, and a transfer cut by
it is followed by none. A device with a battery stops its tail when the battery is empty (``budget_j``).

The one place a tail's energy is computed: :meth:`RadioStates._tail_ends` says until when a tail runs (its
timer, the next transfer, the battery), booked as ``tail`` rows (edgefl.sim.booking) and, for the tails still
running at a round's end, counted in the energy the run has committed (:meth:`RadioStates.pending_j`).

One memo spares the radio work it would redo (benchmarks [8]): the tails are marked settled (``_settled_at``) when
a pass finds every tail's timer running past now and its battery paying it until now, with the batteries asked then
(or none drawing). The mark holds until something changes: the clock moves, a row is logged or booked
(``core.logged()``, both in :meth:`RadioStates._now_key`), or a tail starts, is charged or ends (which clears it).
While it holds, expire_tails has nothing to do, a round's end charges every tail until now without finding its end
again, and asking the batteries again would draw nothing (they draw only when the clock or the ledger moves).
"""

from __future__ import annotations

from itertools import repeat
from math import inf

import numpy as np

from edgefl.sim.booking import CAT_IDLE, CAT_TAIL
from edgefl.sim.component import Component
from energy import tail_energy_unchecked_j

# What a client is doing within a step (for what an interrupt cuts): waiting, its radio promoting, working.
WAIT, PROMOTION, WORK = range(3)


class RadioStates(Component):
    acts_during_phases = False  # (only through the chains' own calls; a tail makes every chain ask it: never inline)

    def __init__(self, population):
        self._tail_s, self._tail_power_w = population.tail_s.tolist(), population.tail_power_w.tolist()
        self.has_tails = any(t > 0 for t in self._tail_s)  # whether any device's radio has a tail after a transfer
        self._idle_power_w = population.idle_power_w.tolist()
        # whether every device's tail draws power (then every tail's battery is asked about, no list of those that do)
        self._all_tails_draw = all(w > 0 for w in self._tail_power_w)
        # Every device's radio tail still running: client -> [start s, charged until s, label of the message it
        # follows]; charged when it ends (the next transfer starts, it runs out, run_end()) and up to the end of
        # every round (round_end).
        self._tails: dict[int, list] = {}
        self._released: set[int] = set()  # devices unreachable (offline) since their last transfer: no tail
        self._at = (0, 0)  # the round and phase being priced (or the last priced): where tails are logged
        # The joules the devices' batteries still have for a tail (a list of clients -> a list of J, asking brings
        # the batteries to now, also for no client; None: no batteries): the Batteries component sets it; a tail
        # stops when they are spent.
        self.budget_j = None
        # the key (:meth:`_now_key`) at which the tails were marked settled (module docstring); None: not settled
        self._settled_at: tuple | None = None
        # the key at which the radio last asked the batteries (:meth:`_ask`): while it holds, asking them again would
        # draw nothing, so a round's end can mark the tails settled (:meth:`round_end`)
        self._asked_at: tuple | None = None

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

    def start_transfer(self, log: list, client: int, doing: list, now: float) -> None:
        """A transfer starts ``now`` (the time on the chain's clock): the wait before it is logged (idle where no tail
        covers it), the radio's tail ends (charged until now, at most tail_s)."""
        if doing[0] == WAIT and doing[1] < now:  # (a wait of 0 s logs nothing)
            self.log_wait(log, client, doing[1], now)
        if client in self._tails:
            self._end_tail(client, now)
        self._released.discard(client)
        doing[:] = [WORK, now]

    def transfer_ended(self, client: int, label: str) -> None:
        """A transfer ended now: the radio's tail starts (no tail if ``tail_s`` is 0, or if the device has become
        unreachable: the radio is idle)."""
        if self._tail_s[client] > 0 and client not in self._released:
            now = self.env.now
            self._tails[client] = [now, now, label]
            self._settled_at = None

    def release(self, client: int) -> None:
        """The device becomes unreachable now (offline): it releases its connection, so its tail ends now (charged
        until now) and a transfer it was making is followed by none (docs/model.md §8)."""
        if client in self._tails:
            self._end_tail(client, self.env.now)
        self._released.add(client)

    def _tail_ends(
        self,
        clients: list[int],
        until: float,
        tails: list[list] | None = None,
        spent_j: list[float] | None = None,
        budgets: list[float | None] | None = None,
    ) -> list[tuple[float, bool]]:
        """Until when each client's tail (``tails``, default its running one), charged until ``tail[1]``, runs if
        nothing cuts it before ``until``: its timer (tail_s after it began), or its battery (the joules left once
        ``spent_j`` more are drawn, at tail_power_w; harvesting during the tail does not count; ``budgets``: the
        joules the batteries have left now, default asked for once for all, :meth:`_budgets`). Returns (end s,
        whether the battery ends it) per client. (One loop, no call per tail: it runs for every tail at every
        expire_tails, benchmarks [8].)"""
        tail_s, power_w = self._tail_s, self._tail_power_w
        if tails is None:
            tails = [self._tails[client] for client in clients]
        if budgets is None:
            budgets = self._budgets(clients)
        ends: list[tuple[float, bool]] = []
        append = ends.append
        for client, tail, budget_j, spent in zip(clients, tails, budgets, repeat(0.0) if spent_j is None else spent_j):
            end = tail[0] + tail_s[client]  # (min(until, its timer's end), as ``min`` picks)
            if not end < until:
                end = until
            if budget_j is not None:  # (a battery, and a tail that draws power)
                left_j = budget_j - spent
                if 0.0 > left_j:  # (max(left_j, 0.0), as ``max`` picks)
                    left_j = 0.0
                battery_end = tail[1] + left_j / power_w[client]
                if battery_end < end:
                    append((battery_end, True))
                    continue
            append((end, False))
        return ends

    def _budgets(self, clients: list[int]) -> list[float | None]:
        """The joules left for a tail in each client's battery (None where no battery limits it: no batteries, or a
        tail drawing no power). Asking brings the batteries to now (what was charged so far is drawn); none is
        asked for when no client needs it, as one tail after another would ask."""
        power_w = self._tail_power_w
        if self.budget_j is None:
            asked = []
        else:
            asked = clients if self._all_tails_draw else [c for c in clients if power_w[c] > 0]
        if not asked:
            return [None] * len(clients)
        budgets = self._ask(asked)
        return budgets if asked is clients else [dict(zip(asked, budgets)).get(c) for c in clients]

    def _ask(self, clients: list[int]) -> list:
        """The joules the clients' batteries have left for a tail (``budget_j``: asking brings them to now, also for no
        client); when it was asked is kept (``_asked_at``)."""
        budgets = self.budget_j(clients)
        self._asked_at = self._now_key()
        return budgets

    def _charge_tails(
        self, clients: list[int], until: float, ends: list[tuple[float, bool]] | None = None
    ) -> list[int]:
        """Log the clients' tails from where each was last charged until ``until`` (each at most to
        :meth:`_tail_ends`), under the round and phase being priced (at a round's end: its last phase). Returns those
        that are over (their battery is empty). Charged together, as one after another would charge them: a
        battery's budget depends on its own device's rows only (each device has one tail), so every end is found
        first; and as each tail's budget, asked for, would have drawn the rows logged before it, those of all
        but the last tail asked for are drawn before that one's row is logged (one booking for them all instead of
        one per tail: benchmarks [8]). ``ends``: the tails' :meth:`_tail_ends` until ``until``, where known."""
        if not clients:
            return []
        self._settled_at = None
        if ends is None:
            ends = self._tail_ends(clients, until)
        power_w, tails, log_rows, at = self._tail_power_w, self._tails, self.core.log_rows, self._at
        last_asked = -1  # the position of the last tail whose battery is asked for (the first from the end)
        if self.budget_j is not None:
            for k in range(len(clients) - 1, -1, -1):
                if power_w[clients[k]] > 0:
                    last_asked = k
                    break
        empty: list[int] = []
        rows: list[tuple] = []
        for k, (client, (end, battery_empty)) in enumerate(zip(clients, ends)):
            if k == last_asked and k > 0:
                log_rows(at, rows)  # the rows so far logged (handed over) and drawn, as its own ask would
                rows = []
                self._ask([])
            tail = tails[client]
            seconds = end - tail[1]
            if seconds > 0 and power_w[client] > 0:  # (LogRow's fields as a plain tuple, as the chains' hot rows)
                rows.append((client, "tail", tail[2], tail[1], end, 0.0, CAT_TAIL, seconds, 0.0, "ok", 0.0, 0.0))
            tail[1] = max(tail[1], end)
            if battery_empty:
                empty.append(client)
        log_rows(at, rows)  # (one entry for the rows of all, or of all after the last asked: ~30 per update, [8])
        return empty

    def _end_tail(self, client: int, cut_at: float | None) -> None:
        """The client's tail ends: cut by a transfer starting at ``cut_at``, or run out in full (None)."""
        self._end_tails([client], cut_at)

    def _end_tails(self, clients: list[int], cut_at: float | None) -> None:
        """The clients' tails end (:meth:`_end_tail`), charged together (:meth:`_charge_tails`)."""
        self._charge_tails(clients, inf if cut_at is None else cut_at)
        for client in clients:
            del self._tails[client]

    def pending_j(self, spent_j: dict[int, float] | None = None, cut_now: set[int] | None = None) -> float:
        """The energy (J) the radio tails will still spend if no further message comes: every tail running, from
        where it was charged to its end (:meth:`_tail_ends`), and a tail from now for each client in ``cut_now``
        (a transfer that would be cut now); ``spent_j``: joules clients would spend now, before their tails, that
        their batteries have not paid yet. What the run has committed beyond its ledger (docs/model.md §8)."""
        now = self.env.now
        clients, tails = list(self._tails), list(self._tails.values())
        for c in sorted(cut_now or ()):
            if self._tail_s[c] > 0 and c not in self._released:
                clients.append(c)
                tails.append([now, now, ""])
        if not tails:
            return 0.0
        spent = None if not spent_j else [spent_j.get(client, 0.0) for client in clients]
        total, power_w = 0.0, self._tail_power_w
        for client, tail, (end, _) in zip(clients, tails, self._tail_ends(clients, inf, tails, spent)):
            if end > tail[1]:  # (seconds > 0 and a power >= 0, as the population checked it: the formula alone)
                total += tail_energy_unchecked_j(float(end - tail[1]), power_w[client])  # (summed in tail order)
        return total

    def expire_tails(self) -> None:
        """Charge in full every tail that has run out by now, or that its battery cannot pay until now (called at the
        start of every phase and wherever batteries are read: journaled calls only, so a replayed pricer books the
        same rows in the same order). With no such tail, the tails are settled (``_settled_at``): another call with
        nothing changed since returns at once (3 of its 5 calls per update, benchmarks [8])."""
        if not self._tails or self._settled_at == self._now_key():  # (none to charge: every phase's start, [5])
            return
        now, tail_s = self.env.now, self._tail_s
        self._end_tails([c for c, tail in self._tails.items() if tail[0] + tail_s[c] <= now], None)  # (timer run out)
        if self.budget_j is not None:  # and every tail its battery could not pay until now
            # (a tail charged up to now has nothing more to pay now: only the others are asked about, and the
            # batteries drawn as asking about every tail would draw them)
            owing = [c for c, tail in self._tails.items() if tail[1] < now]
            emptied = [c for c, (_, empty) in zip(owing, self._tail_ends(owing, now)) if empty]
            if emptied:
                self._end_tails(emptied, now)
                return
            power_w = self._tail_power_w
            if not any(power_w[c] > 0 for c in owing) and any(power_w[c] > 0 for c in self._tails):
                self._ask([])
        self._settled_at = self._now_key()

    def _now_key(self) -> tuple:
        """(now, what the core logged and booked): the key of the settled mark and of the last ask to the batteries; the
        same key, nothing logged, booked or drawn since (module docstring)."""
        return self.env.now, self.core.logged()

    def round_end(self, round_: int) -> None:
        """The round ends (its metrics are read next): the tails still running are charged up to now, and go on
        (the rest is charged in the rounds they run in), so that a round's energy is what it spent."""
        self._at = (round_, self._at[1] if self._at[0] == round_ else 0)
        if not self._tails:  # (none to charge)
            return
        self.expire_tails()
        now, clients = self.env.now, list(self._tails)
        # settled: each tail ends now, (now, False) as _tail_ends finds, without a pass over the ~31 tails and an ask
        ends = [(now, False)] * len(clients) if self._settled_at == self._now_key() else None
        for client in self._charge_tails(clients, now, ends):
            del self._tails[client]
        # Every tail left is charged until now and its timer runs on: settled, where asking the batteries now would
        # draw nothing (asked at this key, or none); the batteries read after every update of [8] then skip a pass
        key = self._now_key()
        if self._tails and (self.budget_j is None or self._asked_at == key):
            self._settled_at = key

    def run_end(self) -> None:
        """The run ends: every radio tail still running is charged in full (it runs out after the last
        message, as it would on the device), under the last round."""
        self._end_tails(list(self._tails), None)

    def log_wait(self, log: list, client: int, start: float, end: float) -> None:
        """A wait inside the chain (a plug-in's before_step, the TDMA queue, before a promotion): idle power,
        except the part inside the radio's tail, which the tail pays for (never both)."""
        tail = self._tails.get(client)
        if tail is not None:
            start = max(start, tail[0] + self._tail_s[client])
        if end - start > 1e-12 and self._idle_power_w[client] > 0:
            log.append((client, "idle", "wait", start, end, 0.0, CAT_IDLE, end - start, 0.0, "ok", 0.0, 0.0))
