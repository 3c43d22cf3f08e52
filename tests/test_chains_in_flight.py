"""Chains that run while the server works (SimPyPricer.start_chains / next_arrival), by hand."""

import pytest

from edgefl.sim import Activity, PhaseRecord
from tests.test_sim import RATE_1MHZ_20DB, make_pricer


def train_and_upload(samples_by_client, bits=RATE_1MHZ_20DB, round_=0, phase=0):
    """Each client computes ``samples`` (1e6 cycles each at 1 GHz: samples ms) then uploads 1 s of bits."""
    return PhaseRecord(
        round_,
        phase,
        {
            c: [Activity("compute", "train", samples=n, work="train"), Activity("upload", "upload", bits=bits)]
            for c, n in samples_by_client.items()
        },
    )


def test_arrivals_come_in_time_order_and_chains_overlap_with_later_starts():
    pricer = make_pricer(num_clients=3, cpu_ghz=1.0)
    pricer.start_chains(train_and_upload({0: 3000, 1: 1000}))  # ends at 4 s and 2 s
    assert pricer.now == 0.0  # nothing waited
    assert pricer.next_arrival() == (1, True)
    assert pricer.now == pytest.approx(2.0)
    pricer.start_chains(train_and_upload({2: 500}, phase=1))  # starts at 2 s, ends at 3.5 s
    with pytest.raises(ValueError, match="already have a chain"):
        pricer.start_chains(train_and_upload({0: 1}))
    assert pricer.next_arrival() == (2, True)
    assert pricer.now == pytest.approx(3.5)
    assert pricer.next_arrival() == (0, True)
    assert pricer.now == pytest.approx(4.0)
    assert pricer.next_arrival() is None
    pricer.end_round(0)
    uploads = [(e.client, round(e.start_s, 9), round(e.end_s, 9), e.round) for e in pricer.events if e.kind == "upload"]
    assert uploads == [(1, 1.0, 2.0, 0), (2, 2.5, 3.5, 0), (0, 3.0, 4.0, 0)]


def test_simultaneous_ends_come_in_client_order_and_rows_go_under_the_round_they_end_in():
    pricer = make_pricer(num_clients=3, cpu_ghz=1.0)
    pricer.start_chains(train_and_upload({2: 1000, 1: 1000, 0: 3000}))
    assert pricer.next_arrival() == (1, True)
    pricer.end_round(0)  # client 2's upload ended at 2 s too: round 0
    assert pricer.next_arrival() == (2, True)
    assert pricer.now == pytest.approx(2.0)
    assert pricer.next_arrival() == (0, True)
    pricer.end_round(1)
    rounds = {e.client: e.round for e in pricer.events if e.kind == "upload"}
    assert rounds == {1: 0, 2: 0, 0: 1}
    assert pricer.ledger.by_category()["uplink"] == pytest.approx(3 * 0.19953, rel=1e-4)  # 23 dBm, 1 s each


def test_each_chain_is_cut_its_deadline_after_it_starts():
    pricer = make_pricer(num_clients=2, cpu_ghz=1.0, deadline_s=2.5)
    pricer.start_chains(train_and_upload({0: 1000}))  # 2 s: within its 2.5 s
    assert pricer.next_arrival() == (0, True)
    pricer.start_chains(train_and_upload({1: 2000}))  # starts at 2 s, needs 3 s: cut at 2 + 2.5 s
    assert pricer.next_arrival() == (1, False)
    assert pricer.now == pytest.approx(4.5)
    pricer.end_round(0)
    statuses = {(e.client, e.kind): e.status for e in pricer.events if e.kind in ("compute", "upload")}
    assert statuses == {(0, "compute"): "ok", (0, "upload"): "ok", (1, "compute"): "ok", (1, "upload"): "cut"}


def test_a_step_ending_exactly_at_its_chains_deadline_completes():
    """A chain's deadline is set after the chains started with it have scheduled their first steps (as a process per
    deadline set it): a computation ending exactly at the deadline completes, and the upload after it is cut at once;
    two chains started together end in client order."""
    pricer = make_pricer(num_clients=2, cpu_ghz=1.0, deadline_s=1.0)
    pricer.start_chains(train_and_upload({0: 1000, 1: 1000}))  # 1e9 cycles at 1 GHz: 1 s, the deadline
    assert pricer.next_arrival() == (0, False)
    assert pricer.next_arrival() == (1, False)
    assert pricer.now == 1.0
    pricer.end_round(0)
    rows = [(e.client, e.kind, e.status, e.end_s) for e in pricer.events if e.kind in ("compute", "upload")]
    assert rows == [
        (0, "compute", "ok", 1.0),
        (1, "compute", "ok", 1.0),
        (0, "upload", "cut", 1.0),
        (1, "upload", "cut", 1.0),
    ]
