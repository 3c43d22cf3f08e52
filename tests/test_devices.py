"""Device availability (Markov on/off, traces), failures: closed forms and invariants."""

from __future__ import annotations

import numpy as np
import pytest
import simpy

import edgefl
from edgefl import deployment
from edgefl.cli import main
from edgefl.data import DataError
from edgefl.deployment import build_population, network_params
from edgefl.runner import Simulation
from edgefl.scenario import ScenarioError, load_scenario, scenario_from_dict
from edgefl.sim import Activity, PhaseRecord, SimPyPricer
from edgefl.sim.availability import Availability


def test_markov_duty_cycle_is_on_over_on_plus_off():
    env = simpy.Environment()
    availability = Availability(env, 400, np.random.default_rng(3), "markov", mean_on_s=3.0, mean_off_s=1.0)
    samples = []
    for t in np.arange(1.0, 500.0, 1.0):
        env.run(until=t)
        samples.append(availability.online.mean())
    assert np.mean(samples) == pytest.approx(0.75, rel=0.02)


def test_trace_intervals_are_followed_exactly():
    env = simpy.Environment()
    availability = Availability(
        env, 2, np.random.default_rng(0), "trace", intervals={0: [(1.0, 2.0), (3.0, 4.0)], 1: [(0.0, 10.0)]}
    )
    seen = {}
    for t in (0.5, 1.5, 2.5, 3.5, 4.5):
        env.run(until=t)
        seen[t] = availability.online.tolist()
    assert seen == {0.5: [False, True], 1.5: [True, True], 2.5: [False, True], 3.5: [True, True], 4.5: [False, True]}


def markov_simulation(tmp_path=None, **devices):
    return Simulation(
        scenario_from_dict(
            {
                "run": {"rounds": 8, "seed": 4},
                "data": {"name": "synthetic", "num_clients": 20, "samples_per_client": 30},
                "algorithm": {"name": "fedavg", "local_steps": 2, "clients_per_round": 5, "batch_size": 8},
                "network": {"snr_db": 10.0},
                "devices": {"availability": "markov", "mean_on_s": 0.5, "mean_off_s": 0.5, **devices},
            }
        )
    )


@pytest.mark.parametrize("algorithm", ["fedavg", "drdm"])
def test_an_unavailable_device_is_never_selected(algorithm):
    sim = markov_simulation()
    sim.scenario.algorithm.name = algorithm
    sim = Simulation(sim.scenario)
    seen = []
    run_round = sim.engine.run_round

    def recording(alg, r):
        record = run_round(alg, r)
        seen.append(alg.ctx.online.copy())
        return record

    sim.engine.run_round = recording
    result = sim.run(progress=False)
    assert len(seen) == 8 and not all(mask.all() for mask in seen)  # some devices were offline
    for e in result.events:
        if e.kind == "compute" and e.label == "train":
            assert seen[e.round][e.client], (e.round, e.client)


def test_a_device_going_offline_mid_phase_is_cut_and_its_upload_lost(tmp_path):
    s = scenario_from_dict(
        {
            "data": {"num_clients": 2},
            "algorithm": {"clients_per_round": 1},
            "network": {"snr_db": 20.0},
            "devices": {"cpu_ghz": 1.0, "cycles_per_sample": 1e6},
        }
    )
    population = build_population(s.network, s.devices, 2, 1.0, 1.0, seed=0)
    population.availability = "trace"
    population.availability_intervals = {0: [(0.0, 0.05)], 1: [(0.0, 100.0)]}
    pricer = SimPyPricer(network_params(s.network), population, 0)
    chains = {c: [Activity("compute", "train", samples=100.0), Activity("upload", "upload", bits=1e4)] for c in (0, 1)}
    assert pricer.start_round(1).tolist() == [True, True]
    completed = pricer.price_phase(PhaseRecord(0, 0, chains))
    assert completed == {0: False, 1: True}
    (cut,) = [e for e in pricer.events if e.client == 0]
    assert cut.status == "offline" and cut.end_s == pytest.approx(0.05)
    assert cut.cycles == pytest.approx(0.05 * 1e9)


def test_the_server_waits_until_enough_devices_are_online(tmp_path):
    """m = 2. At t = 0 only clients 0 and 2 are online (both selected); client 2 leaves at 1 ms, in
    the middle of round 0 (cut, status offline); round 1 waits until client 1 arrives at 7.5 s."""
    trace = tmp_path / "trace.csv"
    trace.write_text("client,start_s,end_s\n0,0,1000\n1,7.5,1000\n2,0,0.001\n")
    result = Simulation(load_scenario(_scenario_file(tmp_path, trace))).run(progress=False)
    round0 = [e for e in result.events if e.round == 0]
    assert {e.client for e in round0} == {0, 2}
    assert any(e.client == 2 and e.status == "offline" and e.end_s == pytest.approx(0.001) for e in round0)
    assert min(e.start_s for e in result.events if e.round == 1) == pytest.approx(7.5)
    assert result.metrics[0]["uploads_missed"] == 1


def _scenario_file(tmp_path, trace):
    path = tmp_path / "s.toml"
    path.write_text(
        "[run]\nrounds = 3\n[data]\nnum_clients = 3\nsamples_per_client = 30\n"
        "[algorithm]\nclients_per_round = 2\nlocal_steps = 2\n[network]\nsnr_db = 10.0\n"
        f'[devices]\navailability = "trace"\navailability_trace = "{trace.name}"\n'
    )
    return path


def test_a_bad_trace_line_is_a_clear_error_exit_2(tmp_path, capsys):
    trace = tmp_path / "trace.csv"
    trace.write_text("client,start_s,end_s\n0,0,10\n1,5,oops\n")
    path = _scenario_file(tmp_path, trace)
    scenario = load_scenario(path)  # validation checks the value's shape; the file is read when the run is built
    with pytest.raises(DataError, match=r"trace.csv: line 3: expected client,start_s,end_s"):
        Simulation(scenario)
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"{path}: {trace}: line 3: expected client,start_s,end_s" in err and not (tmp_path / "out").exists()
    with pytest.raises(ScenarioError, match="line 3"):  # the Python API: its one exception for a user mistake
        edgefl.run(path, progress=False)


def test_the_trace_is_read_once_when_the_run_is_built_not_by_validation(tmp_path, monkeypatch):
    path = _scenario_file(tmp_path, tmp_path / "absent.csv")
    scenario = load_scenario(path)  # no file yet: validation does not open it
    assert scenario.devices.availability_trace == str(tmp_path / "absent.csv")
    (tmp_path / "absent.csv").write_text("client,start_s,end_s\n0,0,100\n1,0,100\n2,0,100\n")
    reads = []
    read = deployment.read_availability_trace
    monkeypatch.setattr(deployment, "read_availability_trace", lambda *a: reads.append(a) or read(*a))
    Simulation(scenario).run(progress=False)
    assert len(reads) == 1


@pytest.mark.parametrize("value", ["", "  ", "a\0b.csv"])
def test_a_trace_path_that_cannot_name_a_file_is_a_scenario_error(value):
    with pytest.raises(ScenarioError, match="devices.availability_trace: expected the path of a CSV file"):
        scenario_from_dict({"devices": {"availability": "trace", "availability_trace": value}})


def test_failures_happen_at_the_configured_rate():
    s = scenario_from_dict(
        {
            "data": {"num_clients": 100},
            "network": {"snr_db": 20.0},
            "devices": {"cpu_ghz": 1.0, "cycles_per_sample": 1e6, "p_fail": 0.2},
        }
    )
    population = build_population(s.network, s.devices, 100, 1.0, 1.0, seed=0)
    pricer = SimPyPricer(network_params(s.network), population, 0)
    lost = []
    for r in range(50):  # 5,000 device-rounds, two phases each
        for p in range(2):
            chains = {
                c: [Activity("compute", "train", samples=10.0), Activity("upload", "upload", bits=1e3)]
                for c in range(100)
            }
            completed = pricer.price_phase(PhaseRecord(r, p, chains))
            if p == 1:
                lost.extend(not ok for ok in completed.values())
    assert np.mean(lost) == pytest.approx(0.2, abs=0.02)  # failed in phase 0, still out in phase 1
    assert {e.status for e in pricer.events} == {"ok", "failed"}


@pytest.mark.parametrize("algorithm", ["fedavg", "drdm"])
def test_over_selection_keeps_the_first_m_uploads_and_stops_the_rest(algorithm):
    sim = Simulation(
        scenario_from_dict(
            {
                "run": {"rounds": 4, "seed": 1},
                "data": {"name": "synthetic", "num_clients": 20, "samples_per_client": 30},
                "algorithm": {
                    "name": algorithm,
                    "local_steps": 2,
                    "clients_per_round": 5,
                    "batch_size": 8,
                    "over_selection": 0.6,
                },
                "network": {"snr_db": 10.0, "fading": "rayleigh", "access": "fdma"},
                "devices": {"classes": [{"name": "slow", "share": 0.5, "cpu_ghz": 0.3}]},
            }
        )
    )
    result = sim.run(progress=False)
    for r in range(4):
        uploads = [e for e in result.events if e.round == r and e.phase == 0 and e.kind == "upload"]
        stopped = [e for e in result.events if e.round == r and e.phase == 0 and e.status == "stopped"]
        arrived = sorted(e.end_s for e in uploads if e.status == "ok")
        assert len(arrived) == 5  # m
        selected = len({e.client for e in uploads} | {e.client for e in stopped})
        if algorithm == "fedavg":
            assert selected == 8  # ceil(5 * 1.6)
        else:  # DRDM draws ceil(5 * 1.6) = 8 times with replacement: at most 8 distinct clients
            assert 5 < selected <= 8
        assert stopped and all(e.end_s == pytest.approx(arrived[-1]) for e in stopped)
        assert all(e.energy_j >= 0 for e in stopped)
    assert [row["uploads_arrived"] for row in result.metrics][:1] and result.metrics[0]["uploads_missed"] >= 3


# -- batteries --------------------------------------------------------------------------------
def battery_simulation(rounds=30, **devices):
    return Simulation(
        scenario_from_dict(
            {
                "run": {"rounds": rounds, "seed": 2},
                "data": {"name": "synthetic", "num_clients": 12, "samples_per_client": 30},
                "algorithm": {"name": "fedavg", "local_steps": 5, "clients_per_round": 4, "batch_size": 8},
                "network": {"snr_db": 0.0, "bandwidth_mhz": 0.2},
                "devices": {"cpu_ghz": 1.0, "cycles_per_sample": 1e7, "kappa": 1e-27, **devices},
            }
        )
    )


def test_batteries_never_go_below_zero_and_drain_by_the_ledger():
    sim = battery_simulation(battery_j=3.0)
    result = sim.run(progress=False)
    levels = np.array([row["level_j"] for row in result.battery])
    assert levels.min() >= 0.0 and levels.max() <= 3.0
    last = max(row["round"] for row in result.battery)
    assert last < 30 and result.summary["stopped"].startswith(f"stopped before round {last + 1}: no device")
    final = {row["client"]: row["level_j"] for row in result.battery if row["round"] == last}
    for c, row in enumerate(result.clients):  # no harvesting: level = capacity - energy spent (floored)
        assert final[c] == pytest.approx(max(0.0, 3.0 - row["energy_j"]), abs=1e-9)
    assert any(e.status == "battery" for e in result.events)  # some device emptied mid-round
    emptied = {e.client for e in result.events if e.status == "battery"}
    for e in result.events:  # an empty device is never given work again
        if e.client in emptied and e.status == "battery":
            later = [x for x in result.events if x.client == e.client and x.round > e.round]
            assert not later


def test_a_device_under_its_reserve_is_not_selected_until_it_harvests_back():
    sim = battery_simulation(rounds=20, battery_j=3.0, battery_reserve_j=1.0, harvest_w=0.05)
    seen = []
    run_round = sim.engine.run_round

    def recording(alg, r):
        levels = sim.pricer.battery_levels()
        record = run_round(alg, r)
        seen.append((levels, alg.ctx.online.copy()))
        return record

    sim.engine.run_round = recording
    result = sim.run(progress=False)
    assert any(not online.all() for _, online in seen)  # someone was under the reserve at some point
    for e in result.events:
        if e.kind == "compute" and e.label == "train":
            assert seen[e.round][1][e.client]


def test_battery_output_files(tmp_path):
    from edgefl.runner import write_results

    result = battery_simulation(rounds=5, battery_j=3.0).run(progress=False)
    write_results(result, tmp_path / "out")
    lines = (tmp_path / "out" / "battery.csv").read_text().splitlines()
    assert lines[0] == "round,client,device_class,level_j,harvested_j" and len(lines) == 1 + 5 * 12
    assert (tmp_path / "out" / "battery.png").exists()
    assert "battery_min_j" in (tmp_path / "out" / "metrics.csv").read_text().splitlines()[0]


# -- mobility ---------------------------------------------------------------------------------
def test_random_waypoint_keeps_devices_in_the_cell_and_moves_at_their_speed():
    from edgefl.sim.mobility import RandomWaypoint

    rng = np.random.default_rng(0)
    distance = np.sqrt(rng.uniform(35.0**2, 500.0**2, size=300))
    walk = RandomWaypoint(distance, np.full(300, 10.0), 35.0, 500.0, np.random.default_rng(1))
    previous = walk.position_m.copy()
    for t in np.arange(1.0, 400.0, 1.0):
        walk.advance(t)
        assert walk.distance_m.max() <= 500.0 + 1e-9
        step = np.hypot(*(walk.position_m - previous).T)
        assert step.max() <= 10.0 + 1e-9  # never faster than 10 m/s
        previous = walk.position_m.copy()
    assert np.mean(step) > 5.0  # mostly walking straight (turns shorten the displacement)


def test_random_waypoint_steps_without_an_arrival_are_the_general_steps():
    """A walk in which nobody reaches a waypoint (most server updates of an asynchronous run) moves each device as
    the general step does (the share walked of the way to go, 1 on arrival), bit for bit, and draws nothing."""
    from edgefl.sim.mobility import RandomWaypoint

    rng = np.random.default_rng(4)
    speed = np.where(rng.random(40) < 0.2, 0.0, rng.uniform(0.5, 2.0, size=40))  # (some standing still)
    walk = RandomWaypoint(np.sqrt(rng.uniform(35.0**2, 500.0**2, size=40)), speed, 35.0, 500.0, rng)
    now, arrivals = 0.0, 0
    for dt in rng.uniform(0.0, 0.05, size=300):
        position, waypoint, state = walk.position_m.copy(), walk.waypoint_m.copy(), walk.rng.bit_generator.state
        left = speed * max(0.0, (now + dt) - walk.time_s)  # (the metres each walks, as advance takes them)
        to_go = waypoint - position
        gap = np.hypot(to_go[:, 0], to_go[:, 1])
        arrive = gap <= left
        step = np.where(arrive, 1.0, left / np.where(gap > 0, gap, 1.0))
        now += dt
        walk.advance(now)
        if arrive[left > 0].any():
            arrivals += 1
            continue
        np.testing.assert_array_equal(walk.position_m, position + step[:, None] * to_go)
        assert walk.rng.bit_generator.state == state and np.array_equal(walk.waypoint_m, waypoint)
    assert arrivals < 30  # (mostly steps without an arrival)


def test_moved_links_are_the_links_moved_one_after_another_built_when_read():
    from channel import Link
    from edgefl.sim.mobility import MovedLinks

    links = [Link.from_budget(0.2, 90.0, 9.0, 3.5, interference_w_per_hz=1e-20), Link.from_snr_db(12.0)]
    first, second = [101.5, 88.25], [97.0, 120.0]
    once = MovedLinks(links, first)
    twice = MovedLinks(once, second)
    down = MovedLinks(MovedLinks(links, first, 40.0), second)  # (a power given once holds when moved again)
    assert not once._built  # nothing built before it is read
    by_hand = links[0].moved(links[0].tx_power_w, first[0]).moved(links[0].tx_power_w, second[0])
    assert twice[0] == by_hand and twice[-2] is twice[0] and twice[1] is links[1]
    assert down[0] == links[0].moved(40.0, 90.0).moved(40.0, second[0]) and down[0].tx_power_w == 40.0
    assert list(twice) == [by_hand, links[1]] and twice[0:1] == [by_hand] and len(twice) == 2
    with pytest.raises(IndexError):
        twice[2]
    with pytest.raises(IndexError):
        twice[-3]


def test_moving_devices_get_the_path_loss_of_their_new_distance(tmp_path):
    from edgefl.runner import write_results

    sim = Simulation(
        scenario_from_dict(
            {
                "run": {"rounds": 5, "seed": 0},
                "data": {"name": "synthetic", "num_clients": 10, "samples_per_client": 30},
                "algorithm": {"name": "fedavg", "local_steps": 2, "clients_per_round": 10, "batch_size": 8},
                "network": {"cell_radius_m": 500.0, "bandwidth_mhz": 1.0},
                "devices": {"speed_mps": 100.0, "cycles_per_sample": 1e3},
            }
        )
    )
    result = sim.run(progress=False)
    positions = {(row["round"], row["client"]): row["distance_m"] for row in result.positions}
    assert len({positions[(r, 0)] for r in range(1, 6)}) == 5  # client 0 moved every round
    assert max(positions.values()) <= 500.0
    from channel import Link, log_distance_db

    for e in result.events:
        if e.kind == "upload":
            d = max(positions[(e.round + 1, e.client)], 35.0)
            link = sim.population.uplink[e.client]
            snr = Link.from_budget(
                link.tx_power_w, log_distance_db(d), link.noise_figure_db, link.shadowing_db
            ).snr_linear(1e6)
            assert e.end_s - e.start_s == pytest.approx(e.bits / (1e6 * np.log2(1 + snr)), rel=1e-9)
    write_results(result, tmp_path / "out", plots=False)
    assert (tmp_path / "out" / "positions.csv").read_text().startswith("round,client,x_m,y_m,distance_m")


def test_speed_without_a_cell_is_a_clear_error():
    with pytest.raises(ScenarioError, match="cell_radius_m"):
        scenario_from_dict({"devices": {"speed_mps": 1.0}})


@pytest.mark.parametrize("algorithm", ["fedavg", "drdm"])
def test_phones_in_a_cell_runs_fedavg_and_drdm(algorithm):
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scenarios" / "phones-in-a-cell.toml"
    scenario = load_scenario(path, ["run.rounds=4", f"algorithm.name={algorithm}"])
    assert scenario.data.num_clients == 50 and len(scenario.devices.classes) == 1
    result = Simulation(scenario).run(progress=False)
    assert len(result.metrics) == 4 and result.battery and result.positions
    assert result.summary["energy_j"] > 0


def test_failures_and_batteries_with_fdma_block_fading_in_outage():
    """An FDMA upload whose first coherence block is in outage has no nominal airtime alone on the
    band; failures and battery depletion are still scheduled (not a division by zero)."""
    sim = Simulation(
        scenario_from_dict(
            {
                "run": {"rounds": 3, "seed": 0},
                "data": {"name": "synthetic", "num_clients": 10, "samples_per_client": 30},
                "algorithm": {"name": "fedavg", "local_steps": 2, "clients_per_round": 10, "batch_size": 8},
                "network": {"snr_db": -8.0, "access": "fdma", "fading": "rayleigh", "rate": "mcs", "coherence_s": 0.01},
                "devices": {"p_fail": 0.3, "battery_j": 5.0},
            }
        )
    )
    result = sim.run(progress=False)
    assert len(result.metrics) == 3 and {"failed", "ok"} <= {e.status for e in result.events}


NEW_KEYS = [
    ("network", "max_spectral_efficiency"),
    ("network", "coherence_s"),
    ("network", "access_latency_s"),
    ("network", "outage_snr_db"),
    ("network", "max_retransmissions"),
    ("algorithm", "over_selection"),
    ("devices", "tail_s"),
    ("devices", "tail_power_w"),
    ("devices", "slowdown_mean"),
    ("devices", "slowdown_sigma"),
    ("devices", "battery_j"),
    ("devices", "battery_reserve_j"),
    ("devices", "harvest_w"),
    ("devices", "speed_mps"),
    ("devices", "mean_on_s"),
    ("devices", "mean_off_s"),
    ("devices", "p_fail"),
    ("devices", "promotion_power_w"),
    ("devices", "pa_efficiency"),
    ("network", "bs_noise_figure_db"),
    ("network", "device_noise_figure_db"),
    ("network", "uplink_max_bits_per_hz"),
    ("network", "overhead_fraction"),
]


@pytest.mark.parametrize("section,key", NEW_KEYS)
@pytest.mark.parametrize("value", [float("nan"), float("inf"), 1e300, -1e300])
def test_new_keys_reject_nan_inf_and_out_of_range_values_naming_the_field(section, key, value):
    with pytest.raises(ScenarioError, match=f"{section}.{key}"):
        scenario_from_dict({section: {key: value}})


@pytest.mark.parametrize("end", ["inf", "nan", "1e400"])
def test_a_trace_interval_must_be_finite(tmp_path, end):
    trace = tmp_path / "trace.csv"
    trace.write_text(f"client,start_s,end_s\n0,0,{end}\n")
    with pytest.raises(DataError, match="line 2: expected 0 <= start_s < end_s, both finite"):
        Simulation(load_scenario(_scenario_file(tmp_path, trace)))


def test_battery_outputs_hold_only_devices_with_a_battery_and_no_inf(tmp_path):
    """A class with batteries beside mains-powered devices: battery.csv lists the battery devices only."""
    from edgefl.runner import write_results

    sim = battery_simulation(rounds=3, classes=[{"name": "phone", "share": 0.5, "battery_j": 3.0}])
    result = sim.run(progress=False)
    write_results(result, tmp_path / "out")
    text = (tmp_path / "out" / "battery.csv").read_text()
    assert "inf" not in text and "nan" not in text
    rows = text.splitlines()[1:]
    assert len(rows) == 3 * 6 and all(",phone," in row for row in rows)
    metrics = (tmp_path / "out" / "metrics.csv").read_text()
    assert "inf" not in metrics.lower().replace("info", "")
