"""A booking of a few log rows (edgefl.sim.booking, energy.EnergyLedger.add_rows): priced and added one row at a time
in plain floats, the same numbers, to the byte, as the arrays' path that books many rows."""

from __future__ import annotations

import numpy as np
import pytest

from edgefl.deployment import build_population
from edgefl.scenario import scenario_from_dict
from edgefl.sim import booking
from edgefl.sim.booking import CAT_COMPUTE, FEW_ROWS, LogRow, _few_energies_j, energies_j, rows_energies_j
from energy import CATEGORIES, EnergyLedger


def _population(num_clients: int):
    s = scenario_from_dict(
        {
            "data": {"name": "synthetic", "num_clients": num_clients, "samples_per_client": 20},
            "algorithm": {"clients_per_round": 1},
            "devices": {
                "cpu_ghz": 1.3,
                "kappa": 2.7e-28,
                "static_power_w": 0.07,
                "pa_efficiency": 0.31,
                "circuit_power_w": 1.29,
                "rx_power_w": 1.3,
                "idle_power_w": 0.02,
                "promotion_power_w": 1.2,
                "tail_s": 11.6,
                "tail_power_w": 1.06,
                "classes": [{"name": "slow", "share": 0.5, "cpu_ghz": 0.7, "tail_power_w": 0.4}],
            },
        }
    )
    return build_population(s.network, s.devices, num_clients, 1.0, 1.0, seed=0)


def _rows(rng: np.random.Generator, n: int, num_clients: int) -> list[tuple]:
    """Log rows of every charge code with amounts over many magnitudes (cycles, seconds), CPU frequencies and
    transmit powers drawn too (a controller's knobs): every float path of the formulas."""
    rows = []
    for _ in range(n):
        code = int(rng.integers(len(CATEGORIES)))
        amount = float(rng.uniform(1e6, 1e10) if code == CAT_COMPUTE else 10.0 ** rng.uniform(-9, 2))
        hz, tx_w = float(10.0 ** rng.uniform(8.5, 9.5)), float(rng.uniform(0.0, 0.4))
        rows.append((int(rng.integers(num_clients)), "k", "l", 0.0, 1.0, 0.0, code, amount, 0.0, "ok", hz, tx_w))
    return rows


def _columns(rows: list[tuple]) -> tuple[np.ndarray, ...]:
    col = list(zip(*rows))
    return np.array(col[0]), np.array(col[6]), np.array(col[7]), np.array(col[10]), np.array(col[11])


def test_a_few_rows_priced_in_floats_are_the_arrays_numbers():
    pop, rng = _population(7), np.random.default_rng(3)
    batches = [_rows(rng, int(rng.integers(1, FEW_ROWS + 1)), 7) for _ in range(300)]
    every = [row for rows in batches for row in rows]
    arrays = energies_j(pop, *_columns(every))  # (more than FEW_ROWS rows: the arrays' path)
    start = 0
    for rows in batches:
        few = energies_j(pop, *_columns(rows))
        assert _few_energies_j(pop, *(column.tolist() for column in _columns(rows))) is not None  # (priced in floats)
        assert few.tobytes() == arrays[start : start + len(rows)].tobytes()
        start += len(rows)


def test_rows_priced_from_their_columns_are_the_arrays_numbers():
    """rows_energies_j (the committed energy's cut rows, a battery's ask) prices a few rows from their columns as
    they are: the bytes of the arrays' path, and the same columns."""
    pop, rng = _population(7), np.random.default_rng(4)
    batches = [_rows(rng, int(rng.integers(1, FEW_ROWS + 1)), 7) for _ in range(300)] + [_rows(rng, 40, 7)]
    every = [row for rows in batches for row in rows]
    arrays = energies_j(pop, *_columns(every))
    start = 0
    for rows in batches:
        columns, joules = rows_energies_j(pop, rows)
        assert columns == LogRow._make(zip(*rows))
        assert joules.dtype == np.float64 and joules.tobytes() == arrays[start : start + len(rows)].tobytes()
        start += len(rows)


@pytest.mark.parametrize(
    "bad, refused",
    [((7, float("nan")), True), ((7, -1.0), True), ((10, 0.0), True), ((7, float("inf")), False), ((11, -0.1), False)],
)
def test_a_row_out_of_the_float_path_goes_to_the_arrays_path(bad, refused):
    """An amount NaN, negative or infinite, a CPU frequency 0 for a compute row, a negative transmit power: not priced
    in floats; the checked formulas then say what is wrong (or price it: an infinite amount, a compute row's transmit
    power, which it does not use)."""
    pop = _population(3)
    row = [1, "compute", "train", 0.0, 1.0, 0.0, CAT_COMPUTE, 1e8, 0.0, "ok", 1e9, 0.2]
    row[bad[0]] = bad[1]
    args = pop, np.array([1]), np.array([CAT_COMPUTE]), np.array([row[7]]), np.array([row[10]]), np.array([row[11]])
    assert _few_energies_j(pop, *(column.tolist() for column in args[1:])) is None
    if refused:
        with pytest.raises(ValueError):
            energies_j(*args)
    else:
        assert energies_j(*args)[0] > 0


def test_a_few_rows_added_to_the_ledger_one_by_one_are_np_add_at():
    rng = np.random.default_rng(5)
    one_by_one, at_once = EnergyLedger(4), EnergyLedger(4)
    for _ in range(300):
        n = int(rng.integers(1, 9))
        clients, codes = rng.integers(4, size=n), rng.integers(len(CATEGORIES), size=n)
        joules = 10.0 ** rng.uniform(-12, 3, size=n)
        one_by_one.add_rows(clients, codes, joules)
        np.add.at(at_once._j, (clients, codes), joules)  # (the arrays' path)
    assert one_by_one.per_client().tobytes() == at_once.per_client().tobytes()
    assert one_by_one.changes == 300


@pytest.mark.parametrize(
    "clients, codes, joules, error",
    [
        ([0, 4], [0, 0], [1.0, 1.0], IndexError),
        ([0, -1], [0, 0], [1.0, 1.0], IndexError),
        ([0, 1], [0, 6], [1.0, 1.0], IndexError),
        ([0, 1], [0, 0], [1.0, float("nan")], ValueError),
        ([0, 1], [0, 0], [1.0, -1e-9], ValueError),
        ([0, 1], [0, 0], [1.0, float("inf")], ValueError),
        ([0, 1], [0], [1.0, 1.0], ValueError),
    ],
)
def test_a_few_bad_rows_are_refused_and_nothing_is_added(clients, codes, joules, error):
    ledger = EnergyLedger(4)
    with pytest.raises(error):
        ledger.add_rows(clients, codes, joules)
    assert ledger.total() == 0.0 and ledger.changes == 0


def test_a_single_row_given_as_scalars_is_added_as_before():
    ledger = EnergyLedger(3)
    ledger.add_rows(2, 5, 0.25)  # (scalars: one row)
    ledger.add_rows([1], [0], [3])  # (an int amount: as a float)
    assert ledger.per_client()[2, 5] == 0.25 and ledger.per_client()[1, 0] == 3.0 and ledger.changes == 2


def test_a_few_rows_booked_in_floats_are_the_arrays_ledger_and_events(monkeypatch):
    """book() of a few rows without readings (a battery ask's 1-3, an update's ~30 radio tails) prices and adds them in
    floats: the ledger's bytes and the events of booking the same batches through the arrays."""
    import edgefl.sim.booking as booking

    pop, rng = _population(7), np.random.default_rng(6)
    batches = [
        [(r, p, _rows(rng, int(rng.integers(1, 12)), 7)) for r, p in ((0, 0), (1, 2))][: int(rng.integers(1, 3))]
        for _ in range(200)
    ]
    assert max(sum(len(rows) for _, _, rows in phases) for phases in batches) <= booking.BOOK_FLOAT_ROWS
    results = []
    for float_rows in (booking.BOOK_FLOAT_ROWS, 0):  # (0: every booking through the arrays)
        monkeypatch.setattr(booking, "BOOK_FLOAT_ROWS", float_rows)
        ledger, events = EnergyLedger(7), []
        for phases in batches:
            booking.book(pop, ledger, events, phases)
        results.append((ledger.per_client().tobytes(), ledger.changes, events))
    (floats, floats_changes, floats_events), (arrays, arrays_changes, arrays_events) = results
    assert floats == arrays and floats_changes == arrays_changes == 200
    assert floats_events == arrays_events and len(floats_events) > 1000
    assert all(type(e.energy_j) is float for e in floats_events)


def test_many_rows_that_pass_the_checks_are_priced_unchecked_to_the_same_bytes(monkeypatch):
    """Rows whose columns pass the formulas' checks at once (booking._rows_pass_checks) are priced by the unchecked
    formulas: the checked ones' bytes."""
    pop, rng = _population(7), np.random.default_rng(5)
    columns = _columns(_rows(rng, 400, 7))
    assert booking._rows_pass_checks(columns[1], *columns[2:])
    unchecked = energies_j(pop, *columns)
    monkeypatch.setattr(booking, "_rows_pass_checks", lambda *_: False)
    assert unchecked.tobytes() == energies_j(pop, *columns).tobytes()


@pytest.mark.parametrize(
    "bad, refused",
    [((7, float("nan")), True), ((7, -1.0), True), ((10, 0.0), True), ((7, float("inf")), False), ((11, -0.1), False)],
)
def test_a_bad_row_among_many_goes_to_the_checked_formulas(bad, refused):
    """Among more rows than the float path takes, a row the checks would refuse (or an infinite amount) sends the
    booking to the checked formulas, which say what is wrong, or price it as before."""
    pop, rng = _population(7), np.random.default_rng(6)
    rows = _rows(rng, 40, 7)
    row = [1, "compute", "train", 0.0, 1.0, 0.0, CAT_COMPUTE, 1e8, 0.0, "ok", 1e9, 0.2]
    row[bad[0]] = bad[1]
    rows[17] = tuple(row)
    columns = _columns(rows)
    assert not booking._rows_pass_checks(columns[1], *columns[2:])
    if refused:
        with pytest.raises(ValueError):
            energies_j(pop, *columns)
    else:
        assert energies_j(pop, *columns)[17] > 0


def test_a_compute_row_priced_in_floats_is_the_arrays_number_at_every_frequency():
    """f² is f · f in floats as in the arrays: a float's ``f**2`` (C's pow) differs from numpy's square in the last bit
    for about 1 frequency in 1,000, and a compute row booked in floats then differed from the arrays' number."""
    pop = _population(3)
    frequencies = np.random.default_rng(7).uniform(1e8, 5e9, 4000).tolist()
    assert any(hz**2 != hz * hz for hz in frequencies)  # (such frequencies are among them)
    n = len(frequencies)
    columns = np.ones(n, dtype=np.int64), np.full(n, CAT_COMPUTE), np.full(n, 3.7e8), np.array(frequencies)
    arrays = energies_j(pop, *columns, np.zeros(n))
    floats = [_few_energies_j(pop, [1], [CAT_COMPUTE], [3.7e8], [hz], [0.0]) for hz in frequencies]
    assert np.array(floats).ravel().tobytes() == arrays.tobytes()


@pytest.mark.parametrize("num_clients", [7, 2000])  # (2,000: more than 8 per row, the population's arrays read)
def test_a_rounds_rows_booked_in_floats_are_the_arrays_ledger_readings_and_events(monkeypatch, num_clients):
    """book() of up to BOOK_FLOAT_ROWS rows with round ends' readings (a synchronous round's ~120: benchmarks [3])
    prices, adds and reads them in floats: the ledger's bytes, the readings and the events of the arrays' path."""
    pop, rng = _population(num_clients), np.random.default_rng(8)
    batches = []
    for _ in range(40):
        phases = [(r, p, _rows(rng, int(rng.integers(1, 41)), num_clients)) for r in range(2) for p in range(2)]
        batches.append((phases, sorted({int(k) for k in rng.integers(0, len(phases) + 1, size=2)})))
    counts = [sum(len(rows) for _, _, rows in phases) for phases, _ in batches]
    assert max(counts) <= booking.BOOK_FLOAT_ROWS and sum(count > 100 for count in counts) > 5
    results = []
    for float_rows in (booking.BOOK_FLOAT_ROWS, 0):  # (0: every booking through the arrays)
        monkeypatch.setattr(booking, "BOOK_FLOAT_ROWS", float_rows)
        ledger, events, readings = EnergyLedger(num_clients), [], []
        for phases, read_after in batches:
            readings.append(booking.book(pop, ledger, events, phases, read_after))
        results.append((ledger.per_client().tobytes(), ledger.changes, readings, events))
    assert results[0] == results[1] and results[0][1] == 40 and sum(map(len, results[0][2])) > 40
    assert all(type(e.energy_j) is float for e in results[0][3])


def test_a_bad_row_among_a_rounds_rows_is_refused_by_the_arrays_and_nothing_is_booked():
    pop, rng = _population(7), np.random.default_rng(9)
    rows = _rows(rng, 100, 7)
    rows[60] = (1, "compute", "train", 0.0, 1.0, 0.0, CAT_COMPUTE, 1e8, 0.0, "ok", 0.0, 0.2)  # (a CPU at 0 Hz)
    ledger, events = EnergyLedger(7), []
    with pytest.raises(ValueError):
        booking.book(pop, ledger, events, [(0, 0, rows)], [1])
    assert ledger.total() == 0.0 and ledger.changes == 0 and not events


def test_bookings_with_the_population_lists_kept_are_the_arrays_ledger_and_events(monkeypatch):
    """A pricer keeps its population's lists (booking.PopulationLists) for every booking in floats, and prices cut
    rows from them (listed_rows_energies_j): the ledger's bytes, the events and the energies of the arrays."""
    pop, rng = _population(7), np.random.default_rng(7)
    lists = booking.PopulationLists(pop)
    batches = [[(1, 0, _rows(rng, int(rng.integers(1, 12)), 7))] for _ in range(100)]
    results = []
    for float_rows, kept in ((booking.BOOK_FLOAT_ROWS, lists), (0, None)):  # (0: every booking through the arrays)
        monkeypatch.setattr(booking, "BOOK_FLOAT_ROWS", float_rows)
        ledger, events = EnergyLedger(7), []
        for phases in batches:
            booking.book(pop, ledger, events, phases, (), kept)
        results.append((ledger.per_client().tobytes(), events))
    assert results[0] == results[1] and len(results[0][1]) > 300
    assert "tail_power_w" in vars(lists)  # (its lists were read)
    rows = batches[0][0][2]
    assert booking.listed_rows_energies_j(pop, rows, lists) == rows_energies_j(pop, rows)[1].tolist()
