"""The radio of each device as a state machine (docs/model.md §8): idle -> promotion -> connected -> tail ->
idle, across phases and rounds, against timelines computed by hand: every activity's start, end and energy."""

from __future__ import annotations

import math

import pytest

from edgefl.deployment import build_population, network_params
from edgefl.runner import Simulation
from edgefl.scenario import scenario_from_dict
from edgefl.sim import Activity, PhaseRecord, SimPyPricer

B = 1e6  # Hz
R = B * math.log2(1 + 100)  # bit/s: Shannon at 20 dB over 1 MHz, 6.658 Mbit/s
P_TX = 10 ** (23 / 10) / 1e3  # W: 23 dBm
LATENCY, P_PROMOTION, P_IDLE, P_RX, P_TAIL = 0.05, 1.2, 0.5, 0.1, 1.0


def pricer(num_clients: int = 1, tail_s: float = 0.5, **network) -> SimPyPricer:
    s = scenario_from_dict(
        {
            "data": {"num_clients": max(num_clients, 2)},
            "algorithm": {"clients_per_round": 1},
            "network": {"snr_db": 20.0, "bandwidth_mhz": B / 1e6, "access_latency_s": LATENCY, **network},
            "devices": {
                "cpu_ghz": 1.0,
                "cycles_per_sample": 1e6,
                "kappa": 1e-28,
                "rx_power_w": P_RX,
                "idle_power_w": P_IDLE,
                "promotion_power_w": P_PROMOTION,
                "tail_s": tail_s,
                "tail_power_w": P_TAIL,
            },
        }
    )
    population = build_population(s.network, s.devices, max(num_clients, 2), 1.0, 1.0, seed=0)
    return SimPyPricer(network_params(s.network), population, 0)


def timeline(events) -> list[tuple]:
    """(round, phase, client, kind, status, start s, end s, energy J) of every event, in time order."""
    return [
        (e.round, e.phase, e.client, e.kind, e.status, e.start_s, e.end_s, e.energy_j)
        for e in sorted(events, key=lambda e: (e.start_s, e.client, e.end_s, e.kind))
    ]


def expect(events, rows: list[tuple]) -> None:
    """``events`` are exactly ``rows`` (as :func:`timeline` gives them, in time order), times and energies to 1e-9."""
    got = timeline(events)
    want = sorted(rows, key=lambda r: (r[5], r[2], r[6], r[3]))
    assert [g[:5] for g in got] == [w[:5] for w in want]
    for g, w in zip(got, want):
        assert g[5:] == pytest.approx(w[5:], rel=1e-9, abs=1e-12), (g, w)


def upload(bits: float) -> Activity:
    return Activity("upload", "upload", bits=bits)


def test_rounds_back_to_back_one_device():
    """The audit's case: 1 device, 3 rounds of FedAvg (download, compute, upload), tail_s = 0.5 s at 1 W, 20 dB,
    1 MHz, no fading, no access latency. Each round's download tail is cut by its upload (after the 6.4 ms of
    computing); the upload tails of rounds 1 and 2 are cut at once by the next round's download (0 s, no row);
    the last one runs out after the run: 3 x 6.4 mJ + 0.5 J = 0.5192 J of tails (1.5192 J were charged, the
    upload tails of rounds 1 and 2 in full, while the device received the next model)."""
    s = scenario_from_dict(
        {
            "run": {"rounds": 3, "seed": 0},
            "data": {"name": "synthetic", "num_clients": 1, "samples_per_client": 200},
            "algorithm": {"clients_per_round": 1, "local_steps": 10, "batch_size": 32},
            "network": {"snr_db": 20.0, "bandwidth_mhz": 1.0},
            "devices": {"cpu_ghz": 1.0, "cycles_per_sample": 2e4, "tail_s": 0.5, "tail_power_w": 1.0},
        }
    )
    sim = Simulation(s)
    result = sim.run(progress=False)
    bits = sim.model.dim * 32  # 610 parameters (60 features x 10 classes + 10) in fp32: 19,520 bits each way
    assert bits == 19_520
    t_x = bits / R  # 2.93 ms, download and upload alike (20 dB both ways, 1 MHz both ways)
    t_c = 10 * 32 * 2e4 / 1e9  # 10 steps of 32 samples at 2e4 cycles/sample, 1 GHz: 6.4 ms
    e_c = 1e-28 * (10 * 32 * 2e4) * 1e9**2  # kappa C f^2: 0.64 mJ
    T = 2 * t_x + t_c  # a round
    rows = []
    for k in range(3):
        t0 = k * T
        rows += [
            (k, 0, 0, "download", "ok", t0, t0 + t_x, 0.1 * t_x),  # rx_power_w 0.1 W (default)
            (k, 0, 0, "compute", "ok", t0 + t_x, t0 + t_x + t_c, e_c),
            (k, 0, 0, "tail", "ok", t0 + t_x, t0 + t_x + t_c, 1.0 * t_c),  # cut by the upload
            (k, 0, 0, "upload", "ok", t0 + t_x + t_c, t0 + T, P_TX * t_x),
        ]
    rows.append((2, 0, 0, "tail", "ok", 3 * T, 3 * T + 0.5, 0.5))  # the last upload's, in full
    expect(result.events, rows)
    tails = sum(e.energy_j for e in result.events if e.kind == "tail")
    assert tails == pytest.approx(3 * t_c + 0.5, rel=1e-12)  # 0.5192 J
    assert result.summary["energy_j"] == pytest.approx(sum(r[7] for r in rows), rel=1e-12)
    # metrics.csv: each round's energy is what it spent (the last tail in the last round)
    per_round = [sum(r[7] for r in rows if r[0] == k) for k in range(3)]
    assert [m["energy_j"] for m in result.metrics] == pytest.approx(
        [sum(per_round[: k + 1]) for k in range(3)], rel=1e-12
    )


def test_a_gap_longer_than_the_tail():
    """A download in one phase; in the next, 1 s of computing, then an upload. The download's tail (0.5 s) runs
    out during the computation: charged in full; the radio is idle again, so the upload pays a promotion."""
    p = pricer()
    t = 1e4 / R
    p.price_phase(PhaseRecord(0, 0, {0: [Activity("download", "broadcast", bits=1e4)]}))
    p.price_phase(PhaseRecord(0, 1, {0: [Activity("compute", "train", samples=1000.0), upload(1e4)]}))
    p.finish()
    s = LATENCY + t  # the second phase starts when the download ends
    expect(
        p.events,
        [
            (0, 0, 0, "promotion", "ok", 0.0, LATENCY, P_PROMOTION * LATENCY),
            (0, 0, 0, "download", "ok", LATENCY, s, P_RX * t),
            (0, 1, 0, "compute", "ok", s, s + 1.0, 1e-28 * 1e9 * 1e18),
            (0, 1, 0, "tail", "ok", s, s + 0.5, P_TAIL * 0.5),  # ran out: charged when the upload found it over
            (0, 1, 0, "promotion", "ok", s + 1.0, s + 1.0 + LATENCY, P_PROMOTION * LATENCY),
            (0, 1, 0, "upload", "ok", s + 1.0 + LATENCY, s + 1.0 + LATENCY + t, P_TX * t),
            (0, 1, 0, "tail", "ok", s + 1.0 + LATENCY + t, s + 1.5 + LATENCY + t, P_TAIL * 0.5),  # finish(): in full
        ],
    )


def test_a_tdma_queue_wait_inside_a_tail():
    """TDMA, 3 devices, tail_s = 0.7 s. Phase 1: every radio is idle: 3 promotions, then the queue (idle waits).
    Phase 2 (at 0.95 s): every radio is still in its tail: no promotion; the queue wait is charged as the tail
    while the tail lasts, as idle after it ran out, never both; each tail ends when its device's transfer starts
    (device 1's ran out first, at 1.35 s, while it waited)."""
    p = pricer(num_clients=3, tail_s=0.7, access="tdma")
    p.price_phase(PhaseRecord(0, 0, {c: [upload(0.3 * R)] for c in range(3)}))  # 0.3 s each
    p.price_phase(PhaseRecord(0, 1, {0: [upload(0.6 * R)], 1: [upload(0.3 * R)], 2: [upload(0.3 * R)]}))
    p.finish()
    idle, tail, tx = P_IDLE, P_TAIL, P_TX
    expect(
        p.events,
        [
            # phase 1: promotions [0, 0.05]; the channel in turn: 0 [0.05, 0.35], 1 [0.35, 0.65], 2 [0.65, 0.95]
            *[(0, 0, c, "promotion", "ok", 0.0, LATENCY, P_PROMOTION * LATENCY) for c in range(3)],
            (0, 0, 0, "upload", "ok", 0.05, 0.35, tx * 0.3),
            (0, 0, 1, "idle", "ok", 0.05, 0.35, idle * 0.3),
            (0, 0, 1, "upload", "ok", 0.35, 0.65, tx * 0.3),
            (0, 0, 2, "idle", "ok", 0.05, 0.65, idle * 0.6),
            (0, 0, 2, "upload", "ok", 0.65, 0.95, tx * 0.3),
            # phase 2, from 0.95 s: all in their tails (since 0.35, 0.65, 0.95); queue 0, 1, 2
            (0, 1, 0, "tail", "ok", 0.35, 0.95, tail * 0.6),  # cut by its transfer at 0.95
            (0, 1, 0, "upload", "ok", 0.95, 1.55, tx * 0.6),
            (0, 1, 1, "tail", "ok", 0.65, 1.35, tail * 0.7),  # ran out while it waited ...
            (0, 1, 1, "idle", "ok", 1.35, 1.55, idle * 0.2),  # ... the rest of the wait is idle
            (0, 1, 1, "upload", "ok", 1.55, 1.85, tx * 0.3),
            (0, 1, 2, "tail", "ok", 0.95, 1.65, tail * 0.7),
            (0, 1, 2, "idle", "ok", 1.65, 1.85, idle * 0.2),
            (0, 1, 2, "upload", "ok", 1.85, 2.15, tx * 0.3),
            # finish(): the last tails in full
            (0, 1, 0, "tail", "ok", 1.55, 2.25, tail * 0.7),
            (0, 1, 1, "tail", "ok", 1.85, 2.55, tail * 0.7),
            (0, 1, 2, "tail", "ok", 2.15, 2.85, tail * 0.7),
        ],
    )


def test_a_deadline_cut_inside_a_tail():
    """Deadline 1 s, tail_s = 5 s. Round 1: a download, then 2 s of computing, cut at 1 s while the download's
    tail runs; round 2's download (at 1 s) finds the radio connected: no promotion, and the tail ends there.
    Round 3: an upload too long for the deadline is cut mid-transfer; its tail starts at the cut."""
    p = pricer(tail_s=5.0, deadline_s=1.0)
    t = 1e4 / R
    assert p.price_phase(
        PhaseRecord(
            0, 0, {0: [Activity("download", "broadcast", bits=1e4), Activity("compute", "train", samples=2000.0)]}
        )
    ) == {0: False}
    p.price_phase(PhaseRecord(1, 0, {0: [Activity("download", "broadcast", bits=1e4)]}))
    p.price_phase(PhaseRecord(2, 0, {0: [upload(1.5 * R)]}))  # 1.5 s of airtime: cut after 1 s
    p.finish()
    cycles = (1.0 - LATENCY - t) * 1e9
    s2 = 1.0 + t  # round 3 starts when round 2's download ends
    expect(
        p.events,
        [
            (0, 0, 0, "promotion", "ok", 0.0, LATENCY, P_PROMOTION * LATENCY),
            (0, 0, 0, "download", "ok", LATENCY, LATENCY + t, P_RX * t),
            (0, 0, 0, "compute", "cut", LATENCY + t, 1.0, 1e-28 * cycles * 1e18),
            (1, 0, 0, "tail", "ok", LATENCY + t, 1.0, P_TAIL * (1.0 - LATENCY - t)),  # cut by round 2's download
            (1, 0, 0, "download", "ok", 1.0, s2, P_RX * t),
            (2, 0, 0, "upload", "cut", s2, s2 + 1.0, P_TX * 1.0),  # round 2's tail: 0 s (no row)
            (2, 0, 0, "tail", "ok", s2 + 1.0, s2 + 6.0, P_TAIL * 5.0),
        ],
    )


def test_fdma_uploads_in_their_tails_share_the_band_without_promotion():
    """FDMA, 2 devices uploading 1 and 2 Mbit in two phases back to back, tail_s = 0.5 s. Phase 1: both promote,
    share the band (device 0 done at 0.05 + 2/R, device 1 at 0.05 + 3/R, R in Mbit/s). Phase 2 starts at once:
    both still in their tails, no promotion; device 0's tail is charged 1/R s, device 1's 0 s."""
    p = pricer(num_clients=2, access="fdma")
    for phase in (0, 1):
        p.price_phase(PhaseRecord(0, phase, {0: [upload(1e6)], 1: [upload(2e6)]}))
    p.finish()
    a, b = 2e6 / R, 3e6 / R  # when each finishes after it started (processor sharing)
    s = LATENCY + b
    expect(
        p.events,
        [
            (0, 0, 0, "promotion", "ok", 0.0, LATENCY, P_PROMOTION * LATENCY),
            (0, 0, 1, "promotion", "ok", 0.0, LATENCY, P_PROMOTION * LATENCY),
            (0, 0, 0, "upload", "ok", LATENCY, LATENCY + a, P_TX * a),
            (0, 0, 1, "upload", "ok", LATENCY, s, P_TX * b),
            (0, 1, 0, "tail", "ok", LATENCY + a, s, P_TAIL * (b - a)),
            (0, 1, 0, "upload", "ok", s, s + a, P_TX * a),
            (0, 1, 1, "upload", "ok", s, s + b, P_TX * b),
            (0, 1, 0, "tail", "ok", s + a, s + a + 0.5, P_TAIL * 0.5),
            (0, 1, 1, "tail", "ok", s + b, s + b + 0.5, P_TAIL * 0.5),
        ],
    )


def test_without_a_tail_every_message_pays_its_promotion_at_the_idle_power_by_default():
    """tail_s = 0 (the default): the radio is idle after every message; promotion_power_w unset is the idle
    power, so a scenario without tails costs what it cost when the access latency was idle time."""
    s = scenario_from_dict({"network": {"snr_db": 20.0, "access_latency_s": 0.1}, "devices": {"idle_power_w": 0.3}})
    population = build_population(s.network, s.devices, 2, 1.0, 1.0, seed=0)
    assert population.promotion_power_w.tolist() == [0.3, 0.3]
    p = SimPyPricer(network_params(s.network), population, 0)
    for phase in (0, 1):
        p.price_phase(PhaseRecord(0, phase, {0: [upload(1e4)]}))
    p.finish()
    assert [e.energy_j for e in p.events if e.kind == "promotion"] == [pytest.approx(0.3 * 0.1, rel=1e-12)] * 2
    assert not [e for e in p.events if e.kind == "tail"]


def _low_battery_outputs(server: str, battery_j: float = 0.5, tail_s: float = 0.3) -> tuple:
    """metrics, events and battery rows of the quickstart with short radio tails and batteries that run low (with
    ``battery_j`` 0.5 J, ``tail_s`` 0.3 s; with larger batteries and shorter tails, tails run out on their timers)."""
    from pathlib import Path

    from edgefl.scenario import load_scenario

    sets = [
        "run.rounds=6" if server == "fedavg" else "run.rounds=40",
        "data.num_clients=12",
        "algorithm.clients_per_round=6",
        f"algorithm.name={server}",
        f"devices.tail_s={tail_s}",
        "devices.tail_power_w=1.0",
        f"devices.battery_j={battery_j}",
        "devices.battery_reserve_j=0.01",
        "devices.harvest_w=0.01",
        "network.access_latency_s=0.01",
    ]
    if server == "fedasync":
        sets.append("algorithm.fedasync.concurrency=4")
    quickstart = Path(__file__).resolve().parents[1] / "scenarios" / "quickstart.toml"
    result = Simulation(load_scenario(quickstart, sets)).run(progress=False)
    return result.metrics, [tuple(e) for e in result.events], result.battery


@pytest.mark.parametrize("server", ["fedavg", "fedasync"])
def test_tails_charged_together_as_one_after_another(monkeypatch, server):
    """The radio charges the tails of a round's end (and those that ran out) together, asking the batteries once
    (benchmarks [8]); with batteries that run low, every output equals charging them one after another, each
    tail asking its own battery (as before issue 30)."""
    from edgefl.sim.radio import RadioStates

    together = _low_battery_outputs(server)
    batched = RadioStates._charge_tails
    monkeypatch.setattr(
        RadioStates,
        "_charge_tails",
        lambda self, clients, until, ends=None: [c for client in clients for c in batched(self, [client], until)],
    )
    one_by_one = _low_battery_outputs(server)
    assert any(e[3] == "tail" for e in together[1])  # tails were charged ...
    assert min(row["level_j"] for row in together[2]) < 0.3  # ... from batteries that ran low
    assert together == one_by_one


def _state(radio) -> tuple:
    """What an expire_tails could change: the tails (copied), what the core logged and booked, the batteries."""
    batteries = next(c for c in radio.core.components if hasattr(c, "bank"))
    tails = {c: list(tail) for c, tail in radio._tails.items()}
    return tails, radio.core.logged(), batteries.bank.level_j.tobytes(), batteries._drawn_at


@pytest.mark.parametrize("server", ["fedavg", "fedasync"])
def test_tails_expired_again_when_settled_skip_and_change_nothing(monkeypatch, server):
    """expire_tails called with the tails settled and nothing changed since (no tail started, charged or ended, nothing
    logged or booked, the same clock) returns at once (benchmarks [8]): there, a call in full ends no tail, logs and
    draws nothing; and with batteries that run low, every output equals running every call in full."""
    from edgefl.sim.radio import RadioStates

    expire, calls = RadioStates.expire_tails, {"all": 0, "skipped": 0}

    def checked(self):
        calls["all"] += 1
        if self._tails and self._settled_at == self._now_key():
            calls["skipped"] += 1
            before = _state(self)
            self._settled_at = None
            expire(self)  # (in full)
            assert _state(self) == before and self._settled_at == self._now_key()
        expire(self)

    monkeypatch.setattr(RadioStates, "expire_tails", checked)
    skipping = _low_battery_outputs(server)
    assert calls["skipped"] > calls["all"] / 4  # (it did skip)

    def in_full(self):
        self._settled_at = None
        expire(self)

    monkeypatch.setattr(RadioStates, "expire_tails", in_full)
    full = _low_battery_outputs(server)
    assert any(e[3] == "tail" for e in skipping[1]) and min(row["level_j"] for row in skipping[2]) < 0.3
    assert skipping == full


@pytest.mark.parametrize("server", ["fedavg", "fedasync"])
def test_a_round_end_charges_settled_tails_until_now_without_finding_their_ends(monkeypatch, server):
    """A round's end with the tails settled (expire_tails has just found none run out or unpaid, nothing changed
    since) charges each until now, the ends :meth:`_tail_ends` would find, without another pass over every tail
    (benchmarks [8]); with batteries that run low, every output equals finding the ends again."""
    from edgefl.sim.radio import RadioStates

    charge, reused = RadioStates._charge_tails, [0, 0]

    def counted(self, clients, until, ends=None):
        if ends is not None:
            reused[0] += 1
            assert ends == self._tail_ends(clients, until)  # (the same budgets: asking draws nothing more)
        reused[1] += 1
        return charge(self, clients, until, ends)

    monkeypatch.setattr(RadioStates, "_charge_tails", counted)
    reusing = _low_battery_outputs(server)
    assert reused[0] > 0  # (it did reuse them)
    # every charge finds the ends again
    monkeypatch.setattr(
        RadioStates, "_charge_tails", lambda self, clients, until, ends=None: charge(self, clients, until)
    )
    again = _low_battery_outputs(server)
    assert any(e[3] == "tail" for e in reusing[1]) and min(row["level_j"] for row in reusing[2]) < 0.3
    assert reusing == again


@pytest.mark.parametrize("server", ["fedavg", "fedasync"])
@pytest.mark.parametrize("battery_j, tail_s", [(0.5, 0.3), (3.0, 0.01)])
def test_expire_tails_ends_every_tail_whose_timer_ran_out(monkeypatch, server, battery_j, tail_s):
    """After every expire_tails no tail whose timer has run out (tail_s after it began) is left running, and a tail
    ended by its timer is charged until its timer's end: with batteries that run low, or last so that tails run out
    on their timers (as a round's end and the batteries' reads rely on)."""
    from edgefl.sim.radio import RadioStates

    expire, ended = RadioStates.expire_tails, [0]

    def checked(self):
        now, tails = self.env.now, {c: tail[0] + self._tail_s[c] for c, tail in self._tails.items()}
        expire(self)
        assert all(tail[0] + self._tail_s[c] > now for c, tail in self._tails.items())
        ended[0] += sum(1 for c, end in tails.items() if end <= now and c not in self._tails)

    monkeypatch.setattr(RadioStates, "expire_tails", checked)
    metrics, events, battery = _low_battery_outputs(server, battery_j, tail_s)
    assert any(e[3] == "tail" for e in events)
    if battery_j > 1:  # (tails found run out on their timers ...)
        assert ended[0] > 0
    else:  # (... or batteries that ran low)
        assert min(row["level_j"] for row in battery) < 0.3


@pytest.mark.parametrize("server", ["fedavg", "fedasync"])
def test_tails_logged_as_one_entry_as_one_row_after_another(monkeypatch, server):
    """A round's end logs its radio tails' rows as one entry of the log (SimPyPricer.log_rows, benchmarks [8]); with
    batteries that run low, every output equals logging each row as its own entry."""
    from edgefl.sim.pricer import SimPyPricer

    log_rows, entries = SimPyPricer.log_rows, []

    def counted(self, at, rows):
        entries.append(len(rows))
        log_rows(self, at, rows)

    monkeypatch.setattr(SimPyPricer, "log_rows", counted)
    together = _low_battery_outputs(server)
    assert max(entries) > 1  # (several rows in one entry)
    monkeypatch.setattr(SimPyPricer, "log_rows", lambda self, at, rows: [log_rows(self, at, [row]) for row in rows])
    one_by_one = _low_battery_outputs(server)
    assert any(e[3] == "tail" for e in together[1]) and min(row["level_j"] for row in together[2]) < 0.3
    assert together == one_by_one


@pytest.mark.parametrize("server", ["fedavg", "fedasync"])
def test_a_round_end_skips_the_expire_that_would_change_nothing(monkeypatch, server):
    """A round's end that leaves every tail charged until now, with nothing logged since the batteries were last asked,
    marks the tails settled (the batteries read after every server update skip that call, benchmarks [8]): there,
    expire_tails in full ends no tail, logs and draws nothing; and every output equals never skipping it."""
    from edgefl.sim.radio import RadioStates

    round_end, marked = RadioStates.round_end, [0]

    def checked(self, round_):
        round_end(self, round_)
        if self._tails and self._settled_at == self._now_key():
            marked[0] += 1
            before = _state(self)
            self._settled_at = None
            self.expire_tails()  # (in full)
            assert _state(self) == before

    monkeypatch.setattr(RadioStates, "round_end", checked)
    marking = _low_battery_outputs(server, 3.0, 0.01)
    assert marked[0] > 0
    monkeypatch.setattr(
        RadioStates, "round_end", lambda self, r: (round_end(self, r), setattr(self, "_settled_at", None))
    )
    never = _low_battery_outputs(server, 3.0, 0.01)
    assert any(e[3] == "tail" for e in marking[1]) and marking == never
