"""Re-pricing one recorded trace on several channel points at once, along an array axis (a sweep's points of one
training: the Figure-4 study re-prices each training on 35, benchmarks [5]).

Where the points' pricers differ only in their links' rates (a plain network: a dedicated band, no fading, no outage,
no deadline, no component that acts, no radio tail: :func:`stackable`), a phase is planned and its chains run once
for them all, with the same code as one pricer's own clocks (:meth:`edgefl.sim.pricer.SimPyPricer._on_own_clocks`):
the lead pricer's physics, each message's airtime an array [points] of every point's rate (:class:`PointsPhysics`),
its chains on array clocks (:class:`edgefl.sim.chain.OwnClocks`), and the rows booked into each point's own ledger
(``edgefl.sim.booking.energies_j`` over [points, rows]). Elementwise float operations give the same bits whatever the
array's shape, and each ledger receives the rows a one-point re-pricing would book, in the same order: every number
is :func:`edgefl.sim.engine.reprice_rounds`'s (tests/test_points.py). Elsewhere each point is re-priced on its own.
"""

from __future__ import annotations

from collections import deque
from operator import itemgetter

import numpy as np

from edgefl.sim.access import DedicatedUplink
from edgefl.sim.activities import PhaseRecord
from edgefl.sim.booking import LogRow, _column, energies_j
from edgefl.sim.chain import OwnClocks, chain
from edgefl.sim.components import Knobs, OverSelection
from edgefl.sim.engine import RoundCost, check_exact, reprice_rounds
from edgefl.sim.physics import PhasePhysics
from edgefl.sim.pricer import SimPyPricer
from edgefl.sim.radio import RadioStates

# The components of a plain network's pricer (edgefl.sim.components.default_components with nothing to add): none
# acts on a chain, and their phase_start, upload_arrived and round_end hooks change nothing in a re-pricing
_PLAIN = [RadioStates, DedicatedUplink, OverSelection, Knobs]
_AMOUNT = LogRow._fields.index("amount")
BOOK_ROWS = 4096  # rows (each with an array [points] or two) booked at a round's end once this many are logged


def stackable(pricers: list, trace: list[PhaseRecord]) -> bool:
    """Whether the pricers can re-price ``trace`` together: each on own clocks in every phase of a re-pricing (plain
    components, no deadline, every step inline), a dedicated band without fading or outage whose every rate (uplink
    and downlink) is > 0, broadcast downloads, no radio tail, fresh (nothing priced yet), and the same devices (every
    array but the links'); every message of the trace a finite number of bits >= 0 (so that every step's time is a
    finite number of seconds >= 0, as SimPy's timeouts check it one by one: :class:`edgefl.sim.chain.OwnClocks`)."""
    if len(pricers) < 2 or not all(isinstance(p, SimPyPricer) for p in pricers):
        return False
    if not all(0 <= a.bits < np.inf for phase in trace for chain_ in phase.chains.values() for a in chain_):
        return False
    lead = pricers[0]
    arrays = lead.pop.device_arrays()
    for p in pricers:
        net = p.net
        plain = (
            [type(c) for c in p.components] == _PLAIN
            and not p.radio.has_tails
            and p.now == 0
            and p._quiet
            and net.deadline_s is None
            and net.access == "dedicated"
            and net.fading == "none"
            and net.outage_snr_db is None
            and net.downlink == "broadcast"
            and p.physics.band_share is None
            and not p.can_change_participation
        )
        if not plain or not p._on_own_clocks(PhaseRecord(round=0, phase=0)):
            return False
        if any(not np.array_equal(a, b) for a, b in zip(arrays.values(), p.pop.device_arrays().values())):
            return False
        if p._cpu_hz != lead._cpu_hz or p._tx_power_w != lead._tx_power_w:  # (the devices now: the knobs)
            return False
        for link, band_hz in (("up", net.bandwidth_hz), ("down", net.downlink_bandwidth_hz)):
            if p.physics._rates_without_fading(link, band_hz, band_hz)[1] is None:  # a rate 0: a message lost
                return False
    return True


class PointsPhysics(PhasePhysics):
    """The lead point's physics (its devices, compute times and caches), a message's airtime an array [points]: the
    rate of each client over its band without fading (``_rates_without_fading``) is the row [points] of every point's
    own physics' rate, so that ``bits / rate`` (PhasePhysics._plan_timed) is each point's airtime."""

    def __init__(self, points: list[PhasePhysics]):
        self.__dict__.update(points[0].__dict__)  # (the lead's state: its compute cache is shared)
        self._points = points
        self._rates_at_mean = {}

    def _rates_without_fading(self, link: str, bandwidth_hz: float, snr_bandwidth_hz: float):
        key = (link, bandwidth_hz, snr_bandwidth_hz)
        if key not in self._rates_at_mean:
            band = "bandwidth_hz" if link == "up" else "downlink_bandwidth_hz"
            if not bandwidth_hz == snr_bandwidth_hz == getattr(self.net, band):  # (stackable: nothing else asks)
                raise AssertionError(f"PointsPhysics: a {link}link rate over {bandwidth_hz} Hz")
            rates = np.stack(
                [p._rates_without_fading(link, *[getattr(p.net, band)] * 2)[0] for p in self._points], axis=1
            )  # [N, points]
            self._rates_at_mean[key] = (rates, list(rates))  # (every rate > 0: stackable)
        return self._rates_at_mean[key]


def reprice_points(trace: list[PhaseRecord], pricers: list) -> list[list[RoundCost]]:
    """:func:`edgefl.sim.engine.reprice_rounds` of the trace with each pricer (fresh ones): the same numbers, priced
    together where :func:`stackable`, each point's rows booked into its pricer's ledger (the pricers' clocks do not
    move: read the returned costs)."""
    if not stackable(pricers, trace):
        return [reprice_rounds(trace, pricer) for pricer in pricers]
    check_exact(trace, pricers[0])
    lead, physics = pricers[0], PointsPhysics([p.physics for p in pricers])
    assert isinstance(lead, SimPyPricer)  # (stackable)
    now = np.array([float(p.now) for p in pricers])  # [points]: every point's clock
    log: list = []  # the rows logged and not booked yet
    ends: list[tuple[int, np.ndarray]] = []  # (round, each point's clock at its end)
    readings: list[list[dict[str, float]]] = [[] for _ in pricers]  # each point's energy by category at those ends
    read_after: list[int] = []  # the rows of ``log`` logged by each round's end not read yet
    run = deque[None](maxlen=0).extend  # runs a chain to its end
    completed: dict[int, bool] = {}
    for k, phase in enumerate(trace):
        clients, plans, skip = lead._planned(phase, physics)
        end = now
        for c in clients:  # each chain on its clocks from the phase's start; the phase ends where the last ends
            clock = OwnClocks(now)
            run(chain(lead, c, plans[c], completed, log, c in skip, clock))
            end = np.maximum(end, clock.now)
        now = end
        if k + 1 == len(trace) or trace[k + 1].round != phase.round:  # the round's last phase
            ends.append((phase.round, now))
            read_after.append(len(log))
            if len(log) >= BOOK_ROWS or k + 1 == len(trace):  # (the rows of a few rounds held at once)
                for point, read in zip(readings, _book(lead.pop, pricers, log, read_after)):
                    point += read
                log, read_after = [], []
    spent_j, pending_j = lead._committed_beyond_ledger_j()  # (nothing runs on: no chain in flight, no radio tail)
    costs = []
    for p, pricer in enumerate(pricers):
        by_round = {r: (at, by_category) for (r, at), by_category in zip(ends, readings[p])}  # (a round's last end)
        point_costs = []
        for r in sorted(by_round):
            at, by_category = by_round[r]
            if r == trace[-1].round:  # (as reprice_rounds: the ledger once the run is finished)
                by_category = pricer.ledger.by_category()
            by_category, committed_j = pricer._energy_at([by_category, spent_j, pending_j])
            point_costs.append(RoundCost(r, at[p], by_category, committed_j))
        costs.append(point_costs)
    return costs


def _book(pop, pricers: list[SimPyPricer], log: list, read_after: list[int]) -> list[list[dict[str, float]]]:
    """Book the rows of ``log`` logged at every point into each point's ledger, in log order (as its pricer books
    them), each row's energy priced at every point at once [points, rows]; return each point's energy by category
    read after ``read_after`` rows (ascending)."""
    if not log:  # (chains that did nothing)
        return [[pricer.ledger.by_category() for _ in read_after] for pricer in pricers]
    points, client, codes = len(pricers), _column(log, "client", np.int64), _column(log, "code", np.int64)
    # cycles for compute (the same at every point), seconds otherwise (an array [points])
    amounts = [a if type(a) is np.ndarray else [a] * points for a in map(itemgetter(_AMOUNT), log)]
    energy = energies_j(
        pop,
        client,
        codes,
        np.ascontiguousarray(np.array(amounts, dtype=np.float64).T),
        _column(log, "cpu_hz", np.float64),
        _column(log, "tx_power_w", np.float64),
    )
    return [pricer.ledger.add_rows(client, codes, energy[p], read_after) for p, pricer in enumerate(pricers)]
