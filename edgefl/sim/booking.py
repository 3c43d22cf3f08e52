"""Energy of a phase's activities, vectorised per category, into the ledger and the event log.

The processes log what happened (who, what, when, how many cycles or seconds); the joules are
computed here once per phase, one numpy call per category, with the formulas of ``energy/``.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate
from itertools import chain as chained
from math import inf
from operator import itemgetter
from types import SimpleNamespace
from typing import NamedTuple

import numpy as np

import energy
from edgefl.deployment import Population
from edgefl.sim.activities import Event
from edgefl.sim.physics import COMPUTE, DOWNLOAD, UPLOAD
from energy import CATEGORIES, EnergyLedger

# Charge codes of the log rows: the ledger's categories (energy.CATEGORIES), one code each; a radio tail's row
# names the message it follows in its label, a promotion's the message it precedes.
CAT_COMPUTE, CAT_UPLINK, CAT_DOWNLINK, CAT_IDLE, CAT_PROMOTION, CAT_TAIL = (
    CATEGORIES.index(name) for name in ("compute", "uplink", "downlink", "idle", "promotion", "tail")
)


class LogRow(NamedTuple):
    """What a chain's process logs of one activity (or one segment of it) as it happened; booked into
    joules and events.csv rows by :func:`book`, which reads the log's columns by these names. The chain's
    hot paths (an activity that completes, an idle wait) log a plain tuple of these fields in this order:
    a chain logs one per activity, and a tuple takes 0.03 µs where the named tuple's constructor takes
    0.3 µs, 3-5 % of the engine's time (benchmarks [3])."""

    client: int
    kind: str  # download | compute | upload | idle | promotion | tail
    label: str
    start_s: float
    end_s: float
    bits: float  # delivered
    code: int  # charge code (CAT_*)
    amount: float  # what is charged: cycles for compute, seconds otherwise
    cycles: float  # computed (events.csv)
    status: str
    cpu_hz: float = 0.0  # compute: the CPU frequency it ran at (its energy's f)
    tx_power_w: float = 0.0  # upload: the transmit power it was sent at


# What each code's log amount is (cycles for compute, seconds otherwise), and its energy in J; ``hz`` and
# ``tx_w``: the CPU frequency and transmit power each row ran at (a controller's knobs, a throttled CPU); ``f``: the
# formulas of ``energy/``, checked (arrays: :data:`_CHECKED`) or not (one row's plain floats: :data:`_UNCHECKED`).
_CHARGES = {
    CAT_COMPUTE: lambda f, pop, c, cycles, hz, tx_w: f.compute(cycles, hz, pop.kappa[c], pop.static_power_w[c]),
    CAT_UPLINK: lambda f, pop, c, seconds, hz, tx_w: f.uplink(
        seconds, tx_w, pop.circuit_power_w[c], pop.pa_efficiency[c]
    ),
    CAT_DOWNLINK: lambda f, pop, c, seconds, hz, tx_w: f.downlink(seconds, pop.rx_power_w[c]),
    CAT_IDLE: lambda f, pop, c, seconds, hz, tx_w: f.idle(seconds, pop.idle_power_w[c]),
    CAT_TAIL: lambda f, pop, c, seconds, hz, tx_w: f.tail(seconds, pop.tail_power_w[c]),
    CAT_PROMOTION: lambda f, pop, c, seconds, hz, tx_w: f.promotion(seconds, pop.promotion_power_w[c]),
}
_CHECKED, _UNCHECKED = (
    SimpleNamespace(**{name: getattr(energy, f"{name}_energy{suffix}_j") for name in CATEGORIES})
    for suffix in ("", "_unchecked")
)
FEW_ROWS = 16  # at most this many rows are priced one by one in floats (benchmarks [8]: 1-3 rows per battery ask)
# At most this many rows are booked one by one in floats, with their round ends' readings (:func:`_book_rows`): an
# asynchronous server's battery asks (1-3 rows) and update ends (~30 radio tails: benchmarks [8]); a synchronous
# round's ~120 rows (20 clients, 2 phases: benchmarks [3]) cost ~105 us both ways warm, but the arrays' ~40 numpy
# calls cost ~4x that after the round's training has cooled the caches, the rows' Python ~2.5x (~440 against ~260
# us); the arrays' cost grows ~0.4 us a row, the floats' ~0.8, so that bookings of 16 phases (re-pricing, benchmarks
# [5]: ~1,000 rows) stay on the arrays.
BOOK_FLOAT_ROWS = 160


def energies_j(
    pop: Population,
    clients: np.ndarray,
    codes: np.ndarray,
    amounts: np.ndarray,
    cpu_hz: np.ndarray,
    tx_power_w: np.ndarray,
) -> np.ndarray:
    """Energy (J) of log rows given as arrays: charge code, and its amount (cycles for compute,
    seconds otherwise), at the rows' CPU frequencies and transmit powers; one vectorised call per code (a few
    rows: one by one, :func:`_few_energies_j`). ``amounts`` may be [points, rows] (edgefl.sim.points: the rows at
    several channel points), the energy then too (elementwise: each point's row the numbers of its own)."""
    if len(codes) <= FEW_ROWS and np.ndim(amounts) == 1:
        columns = (np.asarray(column).tolist() for column in (clients, codes, amounts, cpu_hz, tx_power_w))
        few = _few_energies_j(pop, *columns)
        if few is not None:
            return np.array(few, dtype=np.float64)
    energy = np.zeros(np.shape(amounts))
    present = np.bincount(codes, minlength=len(_CHARGES)) if len(codes) else ()
    # the formulas' checks of the rows at once (as _few_energies_j's of each row): then without the checks of each
    # call (a third of the arrays' time, benchmarks [3]); else checked, to say why
    formulas = _UNCHECKED if _rows_pass_checks(codes, amounts, cpu_hz, tx_power_w) else _CHECKED
    for charge_code, charge in _CHARGES.items():
        if present[charge_code]:  # (only the codes the rows have: a call per booking, benchmarks [5])
            sel = np.flatnonzero(codes == charge_code)
            energy[..., sel] = charge(formulas, pop, clients[sel], amounts[..., sel], cpu_hz[sel], tx_power_w[sel])
    return energy


def listed_energies_j(
    pop: Population, clients: list, codes: list, amounts: list, cpu_hz: list, tx_power_w: list
) -> list[float]:
    """:func:`energies_j` of rows given as lists (of ints and floats), as a list: a few rows priced from the lists as
    they are (a chain's steps at its start, Batteries.chains_started: no array made for 3 rows, benchmarks [8]), else
    with the arrays; the same numbers."""
    if len(codes) <= FEW_ROWS:
        few = _few_energies_j(pop, clients, codes, amounts, cpu_hz, tx_power_w)
        if few is not None:
            return few
    arrays = (np.array(column, dtype=np.float64) for column in (amounts, cpu_hz, tx_power_w))
    return energies_j(pop, np.array(clients, dtype=np.int64), np.array(codes, dtype=np.int64), *arrays).tolist()


def _rows_pass_checks(codes: np.ndarray, amounts: np.ndarray, cpu_hz: np.ndarray, tx_power_w: np.ndarray) -> bool:
    """Whether the formulas' checks would pass every log row (the checks :func:`_few_energies_j` makes of each): its
    amount, CPU frequency and transmit power finite and >= 0, a compute row's frequency > 0. (The population's
    values, the formulas' other arguments, are the scenario's, checked where it is built, as that path assumes.)"""
    columns = np.concatenate((np.ravel(amounts), cpu_hz, tx_power_w))  # (NaN: min and max are NaN, and fail)
    if columns.size and not (0.0 <= columns.min() and columns.max() < inf):
        return False
    return bool(np.min(cpu_hz, where=codes == CAT_COMPUTE, initial=inf) > 0)


def _few_energies_j(
    pop: Population, clients: Sequence, codes: Sequence, amounts: Sequence, cpu_hz: Sequence, tx_power_w: Sequence
) -> list[float] | None:
    """The energy (J) of each of a few log rows (:func:`energies_j`'s columns as lists), one row at a time in plain
    floats: the same formulas (the ``energy`` functions' unchecked parts), the same float operations as the arrays',
    so the same numbers, without the arrays' per-call cost (a booking of 1-3 rows at every battery ask of an
    asynchronous run, a chain's steps: benchmarks [8]). The checks are the formulas': a row they would refuse (an
    amount not finite or < 0, a CPU frequency not > 0, a negative transmit power) returns None, to be priced with
    the arrays, which say why."""
    return _few_priced_energies_j(pop, zip(clients, codes, amounts, cpu_hz, tx_power_w))


def _few_priced_energies_j(pop: Population | PopulationLists, priced) -> list[float] | None:
    """:func:`_few_energies_j` of rows given as (client, code, amount, cpu_hz, tx_power_w) tuples (log rows' priced
    fields: :data:`_PRICED`)."""
    out = []
    charges, formulas = _CHARGES, _UNCHECKED
    for c, code, amount, hz, tx_w in priced:
        amount, hz, tx_w = float(amount), float(hz), float(tx_w)
        if not (0.0 <= amount < inf and 0.0 <= hz < inf and 0.0 <= tx_w < inf):  # (finite and >= 0; NaN fails)
            return None
        if code == CAT_COMPUTE and not hz > 0:
            return None
        out.append(float(charges[code](formulas, pop, int(c), amount, hz, tx_w)))
    return out


_PRICED_FIELDS = tuple(LogRow._fields.index(f) for f in ("client", "code", "amount", "cpu_hz", "tx_power_w"))
_PRICED = itemgetter(*_PRICED_FIELDS)  # a log row's priced fields, in _few_energies_j's order


def rows_energies_j(pop: Population, rows: list) -> tuple[LogRow, np.ndarray]:
    """The columns of log rows (a :class:`LogRow` of tuples, by field name) and each row's energy (J). A few rows (the
    chains of an asynchronous server cut at each update's end: benchmarks [8]) are priced from their columns as they
    are, without arrays (:func:`energies_j`'s path for them)."""
    by_field = list(zip(*rows))
    columns = LogRow._make(by_field)
    if len(rows) <= FEW_ROWS:
        few = _few_energies_j(pop, *(by_field[k] for k in _PRICED_FIELDS))
        if few is not None:
            return columns, np.array(few, dtype=np.float64)
    energy, _, _ = _priced(pop, rows)
    return columns, energy


def listed_rows_energies_j(pop: Population, rows: list, lists: PopulationLists | None = None) -> list[float]:
    """Each log row's energy (J), :func:`rows_energies_j`'s numbers as a list: a few rows (the chains of an
    asynchronous server that an update's end would cut, ~10 at each: benchmarks [8]) priced as they are, without
    their columns or arrays (``pop``'s values read from ``lists`` where given: floats, not numpy scalars)."""
    if len(rows) <= FEW_ROWS:
        few = _few_priced_energies_j(pop if lists is None else lists, map(_PRICED, rows))
        if few is not None:
            return few
    return _priced(pop, rows)[0].tolist()


def _column(rows: list, field: str, dtype) -> np.ndarray:
    """One field of log rows as an array (read row by row: ``zip(*rows)`` makes an iterator per row, and a booking of
    16 phases' rows then set off the garbage collector a few times: 5 % of benchmarks [5])."""
    return np.fromiter(map(itemgetter(LogRow._fields.index(field)), rows), dtype=dtype, count=len(rows))


def _priced(pop: Population, rows: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The energy (J) of each log row, and the rows' clients and charge codes as the arrays it priced them with."""
    client, code = _column(rows, "client", np.int64), _column(rows, "code", np.int64)
    energy = energies_j(
        pop,
        client,
        code,
        _column(rows, "amount", np.float64),  # cycles for compute, seconds otherwise
        _column(rows, "cpu_hz", np.float64),
        _column(rows, "tx_power_w", np.float64),
    )
    return energy, client, code


def step_codes(steps, seconds: list[float]) -> tuple[list[int], list[float]]:
    """Charge code and amount of steps with nominal ``seconds`` of airtime (transmissions)."""
    kinds = {COMPUTE: CAT_COMPUTE, DOWNLOAD: CAT_DOWNLINK, UPLOAD: CAT_UPLINK}
    codes = [kinds[step.kind] for step in steps]
    return codes, [step.cycles if code == CAT_COMPUTE else s for step, code, s in zip(steps, codes, seconds)]


def book(
    pop: Population,
    ledger: EnergyLedger,
    events: list[Event] | None,
    phases: list[tuple[int, int, list[LogRow]]],
    read_after: list[int] | tuple = (),
    lists: PopulationLists | None = None,
) -> list[dict[str, float]]:
    """Charge phases' :class:`LogRow` s, given as (round, phase, rows) in the order simulated, to
    ``ledger`` (repeated cells accumulate in log order) and append them to ``events``. ``read_after``: how many of
    ``phases`` (ascending) are charged when the ledger's energy by category is read (a round's end): returned in that
    order, as many readings, the same numbers, as booking the phases in parts with a reading after each. ``lists``:
    ``pop``'s values as lists, where the caller keeps them from one booking to the next (made here otherwise)."""
    count = sum(len(rows) for _, _, rows in phases)
    if 0 < count <= BOOK_FLOAT_ROWS:
        totals = _book_rows(pop, ledger, events, phases, read_after, count, lists)
        if totals is not None:
            return totals
    log = list(chained.from_iterable(rows for _, _, rows in phases))
    energy, client, code = _priced(pop, log)
    rows_before = list(accumulate((len(rows) for _, _, rows in phases), initial=0))
    totals = ledger.add_rows(client, code, energy, [rows_before[k] for k in read_after])
    if events is not None:
        events.extend(_events(phases, energy.tolist()))
    return totals


def _book_rows(
    pop: Population,
    ledger: EnergyLedger,
    events: list[Event] | None,
    phases: list[tuple[int, int, list[LogRow]]],
    read_after: list[int] | tuple,
    count: int,
    lists: PopulationLists | None = None,
) -> list[dict[str, float]] | None:
    """:func:`book` of up to BOOK_FLOAT_ROWS rows (``count``), round ends' readings included, row by row in plain
    floats: each row priced as :func:`_few_priced_energies_j` prices it (a small population's values read from lists:
    :class:`PopulationLists`, ``lists`` where given) and its event made in the same pass, the cells added in log order
    (``EnergyLedger.add_cells``); the same numbers as the arrays'. None (nothing booked) for a row the formulas' checks
    would refuse: the arrays then say why."""
    values: Population | PopulationLists = pop
    if pop.num_clients <= 8 * count:  # (lists of N values: for N up to 8 per row)
        values = PopulationLists(pop) if lists is None else lists
    charges, formulas, categories, new, event = _CHARGES, _UNCHECKED, CATEGORIES, tuple.__new__, Event
    cells: list[tuple[int, int, float]] = []
    made, rows_before = [], [0]
    for r, p, rows in phases:
        for c, kind, label, start, end, bits, code, amount, cycles, status, hz, tx_w in rows:
            seconds, f, w = float(amount), float(hz), float(tx_w)  # (cycles for compute: _few_priced_energies_j)
            if not (0.0 <= seconds < inf and 0.0 <= f < inf and 0.0 <= w < inf) or code == CAT_COMPUTE and not f > 0:
                return None
            j = float(charges[code](formulas, values, c, seconds, f, w))
            cells.append((int(c), code, j))
            made.append(  # (an Event made as _events makes it)
                new(event, (r, p, c, kind, label, start, end, bits, cycles, j, categories[code], status, hz, tx_w))
            )
        rows_before.append(len(cells))
    totals = ledger.add_cells(cells, [rows_before[k] for k in read_after])
    if events is not None:
        events.extend(made)
    return totals


class PopulationLists:
    """A population's per-device values as Python lists, each made when first read (a booking in floats reads a few of
    them per row: a list's element is a float, an array's a numpy scalar, whose arithmetic costs several times more).
    A pricer keeps one for its bookings (the population never changes): ~3 per server update of benchmarks [8], each
    of which made its lists again."""

    def __init__(self, pop: Population):
        self._pop = pop

    def __getattr__(self, name: str) -> list:
        values = getattr(self._pop, name).tolist()
        setattr(self, name, values)
        return values


def _events(phases: list[tuple[int, int, list[LogRow]]], energy_j: list[float]):
    """The events.csv rows of phases' log rows, each with its energy (J, in log order) and its category's name: each
    row's fields unpacked and put in the event's order, the event made by ``tuple.__new__`` (as ``Event._make``). (Row
    by row: a radio tail charged outside a phase is a phase entry of one row, ~30 at every server update's end, where
    taking each entry apart into columns and back cost 5 times more: benchmarks [8].)"""
    energies, categories, new, event = iter(energy_j), CATEGORIES, tuple.__new__, Event
    for r, p, rows in phases:
        for c, kind, label, start, end, bits, code, _, cycles, status, hz, tx_w in rows:
            energy = next(energies)  # (tuple.__new__ called as it is: half the cost of a partial of it, per event)
            yield new(
                event, (r, p, c, kind, label, start, end, bits, cycles, energy, categories[code], status, hz, tx_w)
            )


class LiveLog:
    """Where chains started by :meth:`edgefl.sim.pricer.SimPyPricer.start_chains` log their rows: the round in progress's."""

    def __init__(self) -> None:
        self.rows: list = []
        self.round = 0

    def append(self, row) -> None:
        self.rows.append(row)

    def flush(self, unbooked: list) -> None:
        """Hand the rows logged so far to booking, under the round in progress (phase 0)."""
        if self.rows:
            unbooked.append((self.round, 0, self.rows))
            self.rows = []

    def close_round(self, unbooked: list, round_: int) -> None:
        self.round = round_
        self.flush(unbooked)
        self.round = round_ + 1
