"""Energy that means what it says (docs/model.md §8): the energy a run has committed at each round's end, radio
tails as their own category, batteries that equal the ledger, offline devices and transfers cut at the end of an
asynchronous run."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from edgefl.runner import Simulation, write_results
from edgefl.scenario import ScenarioError, load_scenario, scenario_from_dict
from edgefl.target import parse_target
from energy import CATEGORIES

ROOT = Path(__file__).resolve().parents[1]
R = 1e6 * math.log2(1 + 100)  # bit/s: Shannon at 20 dB over 1 MHz (6.658 Mbit/s)
P_TX = 10 ** (23 / 10) / 1e3  # W: 23 dBm, radiated (pa_efficiency 1, no circuit power: the defaults)
P_RX, P_TAIL, TAIL_S = 0.1, 1.0, 0.5  # W (rx_power_w's default), W, s


def two_devices(**run) -> dict:
    """2 devices, both every round (FedAvg), 20 dB and 1 MHz both ways, no fading, no access latency, a 0.5 s tail at
    1 W; device 0 computes at 1 GHz (a class), device 1 at 2 GHz."""
    return {
        "run": {"rounds": 3, "seed": 0, "eval_every": 1, **run},
        "data": {"name": "synthetic", "num_clients": 2, "samples_per_client": 200},
        "algorithm": {"clients_per_round": 2, "local_steps": 10, "batch_size": 32},
        "network": {"snr_db": 20.0, "bandwidth_mhz": 1.0},
        "devices": {
            "cpu_ghz": 2.0,
            "cycles_per_sample": 2e4,
            "tail_s": TAIL_S,
            "tail_power_w": P_TAIL,
            "classes": [{"name": "slow", "share": 0.5, "cpu_ghz": 1.0}],
        },
    }


def test_committed_energy_by_hand_and_a_run_stopped_there_ends_with_it():
    """The hand timeline of the issue's closing note. A round lasts T = 2 t_x + t_c0 (the slower device); in every
    round each device downloads (t_x at 0.1 W), computes (t_c at 1 GHz or 2 GHz) while its download's tail runs
    (cut by its upload), uploads (t_x at 0.2 W), and its upload's tail runs until the next round's download: 0 s for
    device 0 (its upload ends the round), t_c0 - t_c1 for device 1. At a round's end both radios are in a tail:
    device 0's began then, device 1's t_c0 - t_c1 before; committed = booked + what they still spend:
    P_tail (T_tail + T_tail - (t_c0 - t_c1)). run.stop_at = loss=1e9 is reached at round 1 and confirmed at round 3
    (two evaluations after it): the run stops there, and its final ledger is round 3's committed energy."""
    s = scenario_from_dict(two_devices(rounds=10, stop_at="loss=1e9"))
    sim = Simulation(s)
    result = sim.run(progress=False, targets=[parse_target("loss=1e9")])
    assert len(result.metrics) == 3 and result.summary["status"] == "stopped"
    assert sim.population.cpu_hz.tolist() == [1e9, 2e9]  # device 0 is the slow class
    bits = sim.model.dim * 32  # 19,520 bits each way
    t_x = bits / R  # 2.93 ms
    cycles = 10 * 32 * 2e4
    t_c = [cycles / 1e9, cycles / 2e9]  # 6.4 ms, 3.2 ms
    e_c = [1e-28 * cycles * 1e9**2, 1e-28 * cycles * 2e9**2]  # kappa C f^2: 0.64 mJ, 2.56 mJ
    gap = t_c[0] - t_c[1]  # device 1's upload tail at the round's end (cut by the next download): 3.2 ms
    per_round = sum(P_RX * t_x + e_c[i] + P_TAIL * t_c[i] + P_TX * t_x for i in (0, 1)) + P_TAIL * gap
    pending = P_TAIL * TAIL_S + P_TAIL * (TAIL_S - gap)  # the two tails still to run at a round's end: 0.9968 J
    booked = [per_round * (k + 1) for k in range(3)]
    committed = [b + pending for b in booked]
    rows = result.metrics
    assert [r["committed_energy_j"] for r in rows] == pytest.approx(committed, rel=1e-12)
    assert [r["energy_j"] for r in rows[:2]] == pytest.approx(booked[:2], rel=1e-12)
    # the run stopped at round 3: its ledger is round 3's committed energy (its last row, its summary, its clients)
    assert rows[-1]["energy_j"] == pytest.approx(committed[2], rel=1e-12)
    assert result.summary["energy_j"] == pytest.approx(committed[2], rel=1e-12)
    assert sum(c["energy_j"] for c in result.clients) == pytest.approx(committed[2], rel=1e-12)
    # energy to the target (reached at round 1): committed by default, booked beside it
    (target,) = result.summary["targets"]
    assert target["rounds"] == 1 and target["energy_j"] == pytest.approx(committed[0], rel=1e-12)
    assert target["booked_energy_j"] == pytest.approx(booked[0], rel=1e-12)
    assert "committed" in target["energy_definition"]
    # tails are their own category; uplink and downlink are the transfers only
    by_cat = result.summary["energy_by_category_j"]
    assert by_cat["uplink"] == pytest.approx(3 * 2 * P_TX * t_x, rel=1e-12)
    assert by_cat["downlink"] == pytest.approx(3 * 2 * P_RX * t_x, rel=1e-12)
    assert by_cat["tail"] == pytest.approx(3 * P_TAIL * (t_c[0] + t_c[1] + gap) + pending, rel=1e-12)
    assert all(e.category == "tail" for e in result.events if e.kind == "tail")


def test_every_energy_table_has_the_six_categories(tmp_path):
    s = scenario_from_dict(two_devices(rounds=2))
    result = Simulation(s).run(progress=False)
    write_results(result, tmp_path / "out")
    metrics = (tmp_path / "out" / "metrics.csv").read_text().splitlines()[0].split(",")
    clients = (tmp_path / "out" / "clients.csv").read_text().splitlines()[0].split(",")
    for c in CATEGORIES:
        assert f"{c}_energy_j" in metrics and f"{c}_energy_j" in clients
    assert "committed_energy_j" in metrics
    assert set(CATEGORIES) >= {"promotion", "tail"}


def battery_identity(result, population) -> np.ndarray:
    """Per device with a battery: initial - final + harvested - charged (J), from battery.csv's last round and
    clients.csv."""
    last = max(row["round"] for row in result.battery)
    final = {row["client"]: row for row in result.battery if row["round"] == last}
    charged = {c["client"]: c["energy_j"] for c in result.clients}
    return np.array(
        [population.battery_j[c] - row["level_j"] + row["harvested_j"] - charged[c] for c, row in sorted(final.items())]
    )


def committed_with_batteries() -> list[Path]:
    return [p for p in sorted((ROOT / "scenarios").glob("*.toml")) if "battery_j" in p.read_text()]


@pytest.mark.parametrize("algorithm", ["fedavg", "fedbuff"])
@pytest.mark.parametrize("path", committed_with_batteries(), ids=lambda p: p.stem)
def test_batteries_equal_the_ledger_on_every_committed_scenario_with_batteries(path, algorithm):
    """initial - final + harvested = charged for every device, to 1e-9 J, tails after the last round included (they
    are drawn too, and stop when the battery is empty). phones-in-a-cell's budget phones have 30 J: the issue's
    phone was charged 32.4 J while its battery ended at 10.3 J."""
    assert committed_with_batteries(), "no committed scenario has batteries any more: test one that does"
    sets = {"run.rounds": 30} if algorithm == "fedavg" else {"run.rounds": 60, "algorithm.name": "fedbuff"}
    sim = Simulation(load_scenario(path, sets))
    result = sim.run(progress=False)
    gap = battery_identity(result, sim.population)
    assert len(gap) and np.abs(gap).max() < 1e-9
    levels = [row["level_j"] for row in result.battery]
    assert min(levels) >= 0.0
    bank = next(c for c in sim.pricer.components if type(c).__name__ == "Batteries").bank
    assert float(bank.unpaid_j.max()) == 0.0  # never drawn below 0: no joule charged that the battery lacked
    small = [c for c in range(sim.population.num_clients) if sim.population.battery_j[c] == 30.0]
    harvested = {
        row["client"]: row["harvested_j"] for row in result.battery if row["round"] == result.metrics[-1]["round"]
    }
    for c in small:  # a 30 J phone never spends more than its battery and what it harvested
        assert result.clients[c]["energy_j"] <= 30.0 + harvested[c] + 1e-9


def test_a_tail_stops_when_the_battery_is_empty():
    """Device 0 has 0.3 J: after its first round (about 0.0116 J of transfers and computing, 0.0064 J of its
    download's tail) its upload's tail would draw 0.5 J; it stops when the battery is empty, which it is then."""
    raw = two_devices(rounds=1)
    raw["devices"]["battery_j"] = 1e6
    raw["devices"]["classes"][0]["battery_j"] = 0.3
    sim = Simulation(scenario_from_dict(raw))
    result = sim.run(progress=False)
    assert result.clients[0]["energy_j"] == pytest.approx(0.3, rel=1e-12)
    tail = [e for e in result.events if e.client == 0 and e.kind == "tail"][-1]
    assert tail.end_s - tail.start_s < TAIL_S
    assert result.battery[-1 - 1]["level_j"] == pytest.approx(0.0, abs=1e-12)
    assert np.abs(battery_identity(result, sim.population)).max() < 1e-9


def test_a_device_that_goes_offline_releases_its_connection(tmp_path):
    """Round 2 (from 12.3 ms): device 0 goes offline at 15 ms while it downloads (the download is cut, status
    offline, and no tail follows it); device 1 finishes round 2 at 21.3 ms, its upload's tail runs until it goes
    offline at 0.1 s (no tail while offline). Round 3 waits for both to be back (0.3 s)."""
    trace = tmp_path / "trace.csv"
    trace.write_text("client,start_s,end_s\n0,0,0.015\n0,0.3,1000\n1,0,0.1\n1,0.2,1000\n")
    raw = two_devices(rounds=3)
    raw["devices"].update(availability="trace", availability_trace=str(trace))
    result = Simulation(scenario_from_dict(raw)).run(progress=False)
    (cut,) = [e for e in result.events if e.status == "offline"]
    assert (cut.client, cut.kind, cut.end_s) == (0, "download", pytest.approx(0.015, abs=1e-12))
    offline = [e for e in result.events if e.kind == "tail" and 0.015 <= e.start_s < 0.3 and e.end_s > 0.02]
    assert [(e.client, e.end_s) for e in offline] == [(1, pytest.approx(0.1, abs=1e-12))]
    assert result.metrics[2]["sim_time_s"] > 0.3  # round 3 waited for device 0


def test_an_upload_cut_at_the_end_of_an_asynchronous_run_is_followed_by_its_tail():
    """FedBuff with 4 chains in flight and a buffer of 1: the run ends with the slow devices' uploads running. They are cut then
    (status aborted: what they did is charged) and a transfer cut mid-way is followed by its tail, as any cut
    transfer; the run's ledger is then its last round's committed energy."""
    raw = two_devices(rounds=5)
    raw["data"]["num_clients"] = 4
    raw["algorithm"].update(name="fedbuff", clients_per_round=4)
    raw["algorithm"]["fedbuff"] = {"buffer_size": 1, "concurrency": 4}
    raw["devices"]["classes"] = [{"name": "slow", "share": 0.5, "cpu_ghz": 0.05}]
    raw["network"]["bandwidth_mhz"] = 0.01  # messages of 0.29 s: the slow devices are uploading at the end
    result = Simulation(scenario_from_dict(raw)).run(progress=False)
    aborted = [e for e in result.events if e.status == "aborted"]
    assert aborted, "no chain was running at the end of the run"
    end = result.metrics[-1]["sim_time_s"]
    assert all(e.end_s == pytest.approx(end, abs=1e-12) and e.round == 4 for e in aborted)
    cut_transfers = [e for e in aborted if e.kind in ("upload", "download")]
    assert cut_transfers, "no transfer was cut: make the chains longer"
    for e in cut_transfers:
        tail = [t for t in result.events if t.client == e.client and t.kind == "tail" and t.start_s == e.end_s]
        assert tail and tail[0].end_s - tail[0].start_s == pytest.approx(TAIL_S, rel=1e-12)
    last = result.metrics[-1]
    assert last["energy_j"] == pytest.approx(last["committed_energy_j"], rel=1e-12)


def test_radio_profiles_are_named_sets_of_the_radio_keys():
    from edgefl.scenario.sections import RADIO_PROFILES

    base = {
        "data": {"name": "synthetic", "num_clients": 2, "samples_per_client": 20},
        "algorithm": {"clients_per_round": 1},
    }
    for name, values in RADIO_PROFILES.items():
        s = scenario_from_dict({**base, "devices": {"radio_profile": name}})
        assert s.network.access_latency_s == values["access_latency_s"]
        assert (s.devices.tail_s, s.devices.tail_power_w) == (values["tail_s"], values["tail_power_w"])
        assert s.devices.promotion_power_w == values["promotion_power_w"]
    own = scenario_from_dict(
        {**base, "devices": {"radio_profile": "lte", "tail_s": 3.0}, "network": {"access_latency_s": 0.1}}
    )
    assert (own.devices.tail_s, own.network.access_latency_s, own.devices.tail_power_w) == (3.0, 0.1, 1.06)
    assert RADIO_PROFILES["lte_fast_dormancy"]["tail_s"] < RADIO_PROFILES["lte"]["tail_s"]
    with pytest.raises(ScenarioError, match="devices.radio_profile"):
        scenario_from_dict({**base, "devices": {"radio_profile": "5g"}})
