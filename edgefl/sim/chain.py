"""One client's chain of activities in a phase, as a SimPy process of the core (edgefl.sim.pricer).

The steps run one after another: a computation takes its cycles at the CPU's speed, re-timed whenever
a component changes the frequency (``core.set_cpu_hz``), each segment logged at the frequency it ran
at; a message first promotes an idle radio, then goes over its link (``core.downlink`` or
``core.uplink``, edgefl.sim.access), which may re-time it when a rate changes. The chain ends at its
first step that does not complete (a lost message, or an interrupt: deadline, offline, failure,
battery, stopped): the steps after it are neither run nor logged (docs/model.md §6).

Each activity is logged as it happened, a row of :class:`~edgefl.sim.booking.LogRow`'s fields (a plain
tuple where a row is logged once per activity: it is the engine's hot path, benchmarks [3]).
"""

from __future__ import annotations

import math

import simpy

from edgefl.sim.access import RETIME, DedicatedUplink
from edgefl.sim.booking import CAT_COMPUTE, CAT_DOWNLINK, CAT_PROMOTION, CAT_UPLINK, LogRow
from edgefl.sim.physics import COMPUTE, DOWNLOAD, UPLOAD, Step
from edgefl.sim.radio import PROMOTION, WAIT, WORK

_CATEGORY = {DOWNLOAD: CAT_DOWNLINK, UPLOAD: CAT_UPLINK}  # charge codes of a message (transmission only)


class OwnClock:
    """The clock of a chain that nothing else can see or act on while it runs (no interrupt, no shared channel, no
    hook that waits or re-times: :func:`runs_inline` and edgefl.sim.pricer's ``_on_own_clocks``): the chain then runs
    at once on it instead of as a SimPy process, and ``timeout(seconds)`` moves ``now`` as SimPy's clock would (the
    same float sum, now + seconds) and keeps the waits, for the core's clock to pass them again after (benchmarks
    [5]: 5 SimPy events a chain were a third of re-pricing's time)."""

    __slots__ = ("now", "waits")

    def __init__(self, now: float):
        self.now = now
        self.waits: list[float] = []

    def timeout(self, seconds: float) -> None:
        if seconds < 0:  # (as simpy.Timeout)
            raise ValueError(f"Negative delay {seconds}")
        self.waits.append(seconds)
        self.now += seconds


class OwnClocks(OwnClock):
    """An :class:`OwnClock` of several channel points at once (edgefl.sim.points): ``now`` an array [points], each
    timeout's seconds one number or an array [points]; ``now + seconds`` elementwise, the same float sums as each
    point's own clock. Its caller makes sure that every step's time is finite and >= 0, as a timeout checks it (a
    check per step and point cost a third of the re-pricing, benchmarks [5]). (It keeps no waits: nothing passes
    them again.)"""

    __slots__ = ()

    def __init__(self, now) -> None:
        super().__init__(now)

    def timeout(self, seconds) -> None:
        self.now = self.now + seconds  # (a new array: the chain keeps the one before as a step's start)


def in_end_order(log: list, spans: list[tuple[int, int]]) -> list:
    """The rows of chains run one after another on own clocks (``log[first:end]`` for each chain's span, in the
    order the chains started), in the order SimPy would have ended them as processes started together. SimPy ends
    its timeouts by time, ties in the order they were scheduled; a chain's first step is scheduled as it starts
    (before every other step), each next step when the one before it ends. So a row sorts by its end time, then by
    its predecessor's place, and so on back to the chain's start: the key (end times, newest first, then -inf and
    the chain's order), compared element by element. On the inline path (:func:`runs_inline`) a row ends each step,
    at its timeout. Where every chain's rows end at the same times (a network without fading, the same work: benchmarks
    [3]), those keys order them step by step, each step's rows in the chains' order: taken so, without a sort."""
    if spans:
        ends = [row[4] for row in log]
        first_ends = ends[spans[0][0] : spans[0][1]]
        if all(ends[first:end] == first_ends for first, end in spans):
            return [log[first + step] for step in range(len(first_ends)) for first, _ in spans]
    keys = []
    for order, (first, end) in enumerate(spans):
        key: tuple = (-math.inf, order)
        for at in range(first, end):
            key = (log[at][4], *key)
            keys.append((key, at))
    keys.sort()  # (the keys differ: their chain's order ends each)
    return [log[at] for _, at in keys]


def paths(core) -> tuple[bool, object, object, bool]:
    """The chain's hot paths (benchmarks [3], [5]; the core keeps them as ``chain_paths``, set again whenever a
    component is attached): whether a computation runs inline (nobody re-times or watches
    it), the uplink's and downlink's ``send`` (None: inline, a band of its own that nobody re-times, as
    DedicatedUplink.send), and whether the radio must be asked whether it is connected (a promotion or a tail can
    follow from it)."""
    plain_compute = not (core._watch_cpu or core._on_compute_start or core._on_compute_end)
    uplink, downlink = core.uplink, core.downlink
    upload = None if type(uplink).send is DedicatedUplink.send and not uplink.retimable else uplink.send
    download = None if not downlink.retimable else downlink.send
    return plain_compute, upload, download, core.net.access_latency_s > 0 or core.radio.has_tails


def runs_inline(core) -> bool:
    """Whether every step of every chain takes its inline path: no wait before a step, no watched computation, no
    message through a channel's own process, no promotion or tail (a chain then only waits out its steps' times)."""
    plain_compute, upload, download, ask_radio = core.chain_paths
    return plain_compute and upload is None and download is None and not ask_radio and not core._before_step


def chain(core, client: int, steps: list[Step], completed: dict, log, skipped: bool = False, clock=None):
    """The client's chain (a SimPy process, or run at once on its own ``clock``, an :class:`OwnClock`, where
    :func:`runs_inline` and nothing else can act on it); ``completed[client]``: whether every step got through."""
    env, radio = core.env if clock is None else clock, core.radio
    for may_start in core._may_start:
        skipped = skipped or not may_start(client)
    if skipped:
        completed[client] = False  # failed earlier in this round, empty, or offline: does nothing
        return
    before_step, latency_s, cpu_hz, tx_power_w = (
        core._before_step,
        core.net.access_latency_s,
        core._cpu_hz,
        core._tx_power_w,
    )
    # The hot paths inline (paths): a computation nobody re-times or watches, a message on a band of its own that
    # nobody re-times (DedicatedUplink.send: the transfer starts, its airtime passes); the radio asked whether it
    # is connected only where a promotion or a tail can follow from it, the wait before a step logged only where a
    # step can wait (an idle wait that is 0 s long logs nothing).
    plain_compute, upload, download, ask_radio = core.chain_paths
    # What cutting the chain now would log (SimPyPricer.committed_energy_j, an interrupt): kept per step, except on
    # an own clock, where nothing can cut or read the chain while it runs. The radio hears of a transfer where a
    # tail can follow it or a wait before it can have passed (start_transfer logs the wait); else the client only
    # starts working (no wait, no tail: what start_transfer and transfer_ended would do; benchmarks [5]).
    ok, states = True, core.chain_states if clock is None else None
    tell_radio = radio.has_tails or bool(before_step)
    for step in steps:
        kind, label = step.kind, step.activity.label
        doing = [WAIT, env.now]  # what the client is doing (waiting, promoting its radio, working) since when
        if states is not None:
            states[client] = (step, doing)
        try:
            for wait in before_step:
                yield from wait(client, step)
            if kind == COMPUTE:
                if plain_compute:  # at the planned speed (a straggler computes slower than its clock)
                    if before_step:
                        radio.log_wait(log, client, doing[1], env.now)
                    doing[:] = [WORK, env.now, step.cycles_per_s or cpu_hz[client], cpu_hz[client]]
                    yield env.timeout(step.duration_s)
                    cycles = step.cycles
                else:
                    cycles = yield from _compute(core, client, step, log, doing)
                log.append(
                    (client, "compute", label, doing[1], env.now, 0.0, CAT_COMPUTE, cycles, cycles, "ok", doing[3], 0.0)
                )
                continue
            if ask_radio and not radio.connected(client, env.now) and latency_s > 0:  # an idle radio: promotion first
                radio.log_wait(log, client, doing[1], env.now)
                doing[:] = [PROMOTION, env.now]
                yield env.timeout(latency_s)
                log.append(
                    (client, "promotion", label, doing[1], env.now, 0.0, CAT_PROMOTION, latency_s, 0.0, "ok", 0.0, 0.0)
                )
                doing[:] = [WAIT, env.now]
            send = upload if kind == UPLOAD else download
            if send is None:
                if tell_radio:
                    radio.start_transfer(log, client, doing, env.now)
                else:
                    doing[0] = WORK
                yield env.timeout(step.duration_s)
                lost = step.lost
            else:
                lost = yield from send(client, step, log, doing)
            log.append(_message_row(client, step, doing[1], env.now, step.bits, "lost" if lost else "ok", tx_power_w))
            if tell_radio:
                radio.transfer_ended(client, label)
            if lost:  # the chain ends here: what follows would be wasted (docs/model.md §6)
                ok = False
                break
            if kind == UPLOAD:
                for hook in core._on_upload:
                    hook(client)
        except simpy.Interrupt as stop:  # the deadline, the device going offline, failing, empty, or stopped
            ok = False
            _log_cut(core, client, step, log, doing, "cut" if stop.cause == "deadline" else str(stop.cause))
            break
    if states is not None:  # (its last step would stay alive, an FDMA upload's rate table with it: 10^4-10^6 devices)
        states.pop(client, None)
    completed[client] = ok


def _compute(core, client: int, step: Step, log, doing: list):
    """A computation: its cycles at the CPU's speed, re-timed whenever the frequency changes (``core.set_cpu_hz``;
    each segment before a change is logged at its own frequency). Returns the cycles of the last segment;
    ``doing`` ends as [WORK, since, cycles per s, Hz] of that segment."""
    env, label = core.env, step.activity.label
    core.radio.log_wait(log, client, doing[1], env.now)
    hz, planned_hz = core._cpu_hz[client], core._knob_hz[client]
    if hz == planned_hz:  # as planned (a straggler computes slower than its clock)
        speed, seconds = step.cycles_per_s or hz, step.duration_s
    else:  # the CPU runs at another frequency than the plan's (a component set it)
        speed = (step.cycles_per_s or planned_hz) * hz / planned_hz
        seconds = step.cycles / speed
    doing[:] = [WORK, env.now, speed, hz]  # the segment running: since, cycles per s, Hz
    cycles = step.cycles
    if core._watch_cpu:
        core._computing[client] = env.active_process
    for hook in core._on_compute_start:
        hook(client)
    if core._cpu_hz[client] != hz:  # a hook set the frequency: the computation starts at it
        cycles, seconds = _retime(core, client, label, cycles, log, doing)
    try:
        while True:
            try:
                yield env.timeout(seconds)
                break
            except simpy.Interrupt as change:
                if change.cause is not RETIME:
                    raise
                cycles, seconds = _retime(core, client, label, cycles, log, doing)
    finally:
        core._computing.pop(client, None)
        for hook in core._on_compute_end:
            hook(client)
    return cycles


def _retime(core, client: int, label: str, cycles: float, log, doing: list) -> tuple[float, float]:
    """The CPU's frequency changed in the middle of a computation: log the segment so far at the frequency it
    ran at, and return the cycles left and their time at the new speed (``doing`` updated to the new segment)."""
    now = core.env.now
    _, since, speed, hz = doing
    if now > since:
        done = (now - since) * speed
        log.append(LogRow(client, "compute", label, since, now, 0.0, CAT_COMPUTE, done, done, "ok", hz))
        cycles -= done
    new_hz = core._cpu_hz[client]
    speed = speed * new_hz / hz
    doing[:] = [WORK, now, speed, new_hz]
    return cycles, max(cycles, 0.0) / speed


def _log_cut(core, client: int, step: Step, log, doing: list, status: str) -> None:
    """Log what an interrupted step did until now (:func:`cut_rows`); a message cut mid-way is followed by the
    radio's tail."""
    rows, tail_follows = cut_rows(core, client, step, doing, status)
    for row in rows:  # (a list, or the LiveLog of chains started while the server works)
        log.append(row)
    if tail_follows:
        core.radio.transfer_ended(client, step.activity.label)


def cut_rows(core, client: int, step: Step, doing: list, status: str) -> tuple[list, bool]:
    """What interrupting the client's step now would log, and whether the radio's tail follows (changes nothing):
    a wait, a promotion (the radio falls back to idle), the cycles computed, or a message that did not get
    through (no bits delivered; its tail follows)."""
    now, kind, label = core.env.now, step.kind, step.activity.label
    what, since = doing[0], doing[1]
    rows: list = []
    # (LogRow's fields as plain tuples, as a message's row: the chains in flight are cut at every server update's end
    # to count the energy committed, ~10 at each of benchmarks [8], where a LogRow cost 30 times a tuple)
    if what == WAIT:  # in a plug-in's wait or the TDMA queue
        core.radio.log_wait(rows, client, since, now)
    elif what == PROMOTION:
        rows.append((client, "promotion", label, since, now, 0.0, CAT_PROMOTION, now - since, 0.0, status, 0.0, 0.0))
    elif kind == COMPUTE:  # the cycles done at the speed it ran at
        done = (now - since) * doing[2]
        rows.append((client, "compute", label, since, now, 0.0, CAT_COMPUTE, done, done, status, doing[3], 0.0))
    else:
        rows.append(_message_row(client, step, since, now, 0.0, status, core._tx_power_w))
        return rows, True
    return rows, False


def _message_row(client: int, step: Step, since: float, now: float, bits: float, status: str, tx_power_w) -> tuple:
    """A message's log row (:class:`LogRow`'s fields, a plain tuple: the hot path): ``bits`` delivered, charged its
    airtime at the client's transmit power now (``tx_power_w``: every client's)."""
    code = _CATEGORY[step.kind]
    return (
        client,
        step.activity.kind,
        step.activity.label,
        since,
        now,
        bits,
        code,
        now - since,
        0.0,
        status,
        0.0,
        tx_power_w[client],
    )
