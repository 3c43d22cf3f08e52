"""battery.csv's and positions.csv's rows kept as each round's columns (edgefl.runner.RoundRows): the same rows, in the
same order, as the list of dicts a run kept before, and the same files."""

import pickle

import numpy as np
import pytest

from edgefl.results import BATTERY_COLUMNS, POSITION_COLUMNS, write_csv
from edgefl.runner import RoundRows, _table


def _rounds(seed: int = 0):
    """A few rounds of battery rows: (round, clients, classes, levels, harvested), clients differing per round."""
    rng = np.random.default_rng(seed)
    rounds = []
    for n in range(1, 6):
        clients = sorted(rng.choice(20, size=int(rng.integers(1, 8)), replace=False).tolist())
        classes = [f"class{c % 3}" for c in clients]
        rounds.append((n, clients, classes, rng.random(len(clients)).tolist(), rng.random(len(clients)).tolist()))
    return rounds


def _as_dicts(rounds) -> list[dict]:
    """The rows as the run made them before: a dict per client and round, keys in BATTERY_COLUMNS' order."""
    return [
        {"round": n, "client": c, "device_class": k, "level_j": level, "harvested_j": harvested}
        for n, clients, classes, levels, harvests in rounds
        for c, k, level, harvested in zip(clients, classes, levels, harvests)
    ]


def _kept(rounds) -> RoundRows:
    rows = RoundRows(BATTERY_COLUMNS)
    for n, *columns in rounds:
        rows.add(n, *columns)
    return rows


def test_rows_equal_the_dicts_in_order_by_index_and_slice():
    rounds = _rounds()
    rows, dicts = _kept(rounds), _as_dicts(rounds)
    assert len(rows) == len(dicts) and rows == dicts and list(rows) == dicts
    assert [list(row) for row in rows] == [list(BATTERY_COLUMNS)] * len(dicts)  # the keys in the file's order
    for i in [0, 1, len(dicts) - 1, -1, -2, -len(dicts)]:
        assert rows[i] == dicts[i]
    assert rows[2:7] == dicts[2:7] and rows[::-3] == dicts[::-3]
    for i in [len(dicts), -len(dicts) - 1]:
        with pytest.raises(IndexError):
            rows[i]
    assert rows != dicts[:-1] and rows != [*dicts[:-1], {**dicts[-1], "level_j": -1.0}]


def test_every_row_by_index_with_rounds_that_added_none():
    """Row i is found among the rounds by their row counts (a bisection), rounds of no device included."""
    rounds = _rounds(3)
    rounds.insert(2, (99, [], [], [], []))
    rounds.insert(0, (98, [], [], [], []))
    rounds.append((97, [], [], [], []))
    rows, dicts = _kept(rounds), _as_dicts(rounds)
    assert [rows[i] for i in range(len(dicts))] == dicts
    assert [rows[i] for i in range(-1, -len(dicts) - 1, -1)] == dicts[::-1]
    rows.drop_last_round()
    rows.drop_last_round()
    assert [rows[i] for i in range(len(rows))] == _as_dicts(rounds[:-2])


def test_dropping_the_last_round_and_adding_it_again():
    rounds = _rounds(1)
    rows = _kept(rounds)
    rows.drop_last_round()
    assert rows == _as_dicts(rounds[:-1])
    rows.add(*rounds[-1])
    assert rows == _as_dicts(rounds)


def test_table_and_file_equal_the_dicts_read_by_column(tmp_path):
    rounds = _rounds(2)
    rows, dicts = _kept(rounds), _as_dicts(rounds)
    assert list(_table(rows, BATTERY_COLUMNS)) == list(_table(dicts, BATTERY_COLUMNS))
    assert list(_table(dicts, BATTERY_COLUMNS)) == [[row[c] for c in BATTERY_COLUMNS] for row in dicts]
    # a RoundRows of other columns is read by column, as dicts are
    other = RoundRows(("round", "client", "x_m"))
    other.add(1, [0, 1], [0.5, 1.5])
    assert list(_table(other, ("client", "x_m"))) == [[0, 0.5], [1, 1.5]]
    write_csv(tmp_path / "a.csv", list(BATTERY_COLUMNS), _table(rows, BATTERY_COLUMNS))
    write_csv(tmp_path / "b.csv", list(BATTERY_COLUMNS), ([row[c] for c in BATTERY_COLUMNS] for row in dicts))
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()


def test_pickled_rows_are_the_same_rows():
    rows = RoundRows(POSITION_COLUMNS)
    every = [0, 1, 2]
    rows.add(1, every, [0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [3.0, 4.1, 5.3])
    rows.add(2, every, [0.1, 1.1, 2.1], [3.1, 4.1, 5.1], [3.1, 4.2, 5.4])
    again = pickle.loads(pickle.dumps(rows))
    assert again == rows and again.columns == POSITION_COLUMNS and len(again) == 6
