"""Several cells (issue 23, docs/multi-cell.md): hexagonal layouts, association, SINR with interference by hand,
open-loop power control, handover with hysteresis, per-cell uplinks, outputs and key validation."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest

from channel.cells import (
    drop_in_hex_cells,
    handover,
    hex_reuse_bands,
    hex_sites_m,
    in_hex_cell,
    open_loop_tx_power_dbm,
    site_distances_m,
    strongest_cell,
)
from edgefl.cli import main
from edgefl.deployment import build_population
from edgefl.scenario import scenario_from_dict
from edgefl.sim.access import CellUplinks, FdmaUplink
from edgefl.sim.pricer import SimPyPricer
from energy import CATEGORIES

ROOT = Path(__file__).resolve().parents[1]
PHONES = ROOT / "scenarios" / "phones-in-a-cell.toml"
N0_W_PER_HZ = 10 ** ((-174 - 30) / 10)  # -174 dBm/Hz


def log_distance_db(d_m):
    return 128.1 + 37.6 * math.log10(d_m / 1000.0)  # 3GPP TR 36.814, the default model


def test_hexagonal_layout_distances_by_hand():
    sites = hex_sites_m(7, 500.0)
    assert sites.shape == (7, 2) and np.allclose(sites[0], 0.0)
    d = site_distances_m(sites, sites)
    assert np.allclose(d[0, 1:], 500.0)  # the first ring: ISD from the centre
    for i in range(1, 7):  # each ring site: the centre and its two ring neighbours at ISD
        assert np.sum(np.isclose(d[i], 500.0)) == 3
    assert np.allclose(sites[1], [500.0, 0.0]) and np.allclose(sites[2], [250.0, 250.0 * math.sqrt(3)])
    far = np.sort(site_distances_m(np.zeros((1, 2)), hex_sites_m(19, 500.0))[0])
    # the second ring: 6 corners at 2·ISD and 6 edge midpoints at sqrt(3)·ISD
    assert np.allclose(far[7:13], 500.0 * math.sqrt(3)) and np.allclose(far[13:], 1000.0)


@pytest.mark.parametrize("cells", [7, 19])
def test_reuse_3_gives_neighbours_different_bands(cells):
    sites, band = hex_sites_m(cells, 1.0), hex_reuse_bands(cells, 3)
    d = site_distances_m(sites, sites)
    neighbours = np.isclose(d, 1.0)
    assert neighbours.sum() > 0 and not (neighbours & (band[:, None] == band[None, :])).any()
    assert set(band.tolist()) == {0, 1, 2} and (hex_reuse_bands(cells, 1) == 0).all()


def test_drop_covers_the_cells_union_and_keeps_the_minimum_distance():
    rng = np.random.default_rng(0)
    sites = hex_sites_m(7, 866.0)
    points = drop_in_hex_cells(rng, 7000, sites, 866.0, 35.0)
    d = site_distances_m(points, sites)
    nearest = d.argmin(axis=1)
    assert d.min(axis=1).min() >= 35.0
    assert all(in_hex_cell(points[nearest == c] - sites[c], 866.0 + 1e-9).all() for c in range(7))
    counts = np.bincount(nearest, minlength=7)  # equal areas: about 1000 each
    assert counts.min() > 850 and counts.max() < 1150


def test_a_drop_where_no_point_can_be_far_enough_from_its_site_is_an_error_not_a_hang():
    """Issue 33: 7 cells 1 m apart with min_distance_m = 35 m looped for ever, rejecting every point."""
    with pytest.raises(ValueError, match="must be below half the inter-site distance"):
        drop_in_hex_cells(np.random.default_rng(0), 5, hex_sites_m(7, 1.0), 1.0, 35.0)
    assert drop_in_hex_cells(np.random.default_rng(0), 5, hex_sites_m(7, 71.0), 71.0, 35.0).shape == (5, 2)


def test_association_to_the_strongest_mean_link_by_hand():
    sites = np.array([[0.0, 0.0], [1000.0, 0.0]])
    points = np.array([[300.0, 0.0], [700.0, 0.0], [450.0, 0.0]])
    loss = np.vectorize(log_distance_db)(site_distances_m(points, sites))
    assert strongest_cell(loss).tolist() == [0, 1, 0]
    shadow = np.array([[0.0, 0.0], [0.0, 0.0], [10.0, 0.0]])  # 10 dB more towards site 0: 450 m goes to site 1
    # 128.1 + 37.6 log10(0.45) + 10 = 125.06 > 128.1 + 37.6 log10(0.55) = 118.34
    assert strongest_cell(loss + shadow).tolist() == [0, 1, 1]


def test_power_control_formula():
    # TS 38.213 open loop: min(P_max, P0 + alpha PL): -80 + 0.8 * 120 = 16 dBm; -80 + 0.8 * 140 = 32 -> 23
    assert open_loop_tx_power_dbm([23.0, 23.0], -80.0, 0.8, [120.0, 140.0]).tolist() == pytest.approx([16.0, 23.0])
    assert open_loop_tx_power_dbm(23.0, -100.0, 1.0, 110.0) == pytest.approx(10.0)
    with pytest.raises(ValueError, match="alpha"):
        open_loop_tx_power_dbm(23.0, -80.0, 1.5, 100.0)


def test_handover_hysteresis_on_a_hand_track():
    """A device walks from site 0 (x = 0) to site 1 (x = 1000 m), no shadowing: it changes cell where site 1's
    loss is 3 dB below site 0's, 37.6 log10(x / (1000 - x)) > 3, x > 1000 r / (1 + r), r = 10^(3/37.6)."""
    sites = np.array([[0.0, 0.0], [1000.0, 0.0]])
    ratio = 10 ** (3 / 37.6)
    switch_x = 1000 * ratio / (1 + ratio)  # 545.8 m (without hysteresis: 500 m)
    serving, changed_at = np.array([0]), []
    for x in np.arange(50.0, 951.0, 1.0):
        loss = np.vectorize(log_distance_db)(site_distances_m(np.array([[x, 0.0]]), sites))
        new = handover(serving, loss, 3.0)
        if new[0] != serving[0]:
            changed_at.append(x)
        serving = new
    assert len(changed_at) == 1 and switch_x < changed_at[0] <= switch_x + 1.0
    # and walking back, it returns to site 0 only past the mirror point 1000 - 545.8
    loss_back = np.vectorize(log_distance_db)(site_distances_m(np.array([[470.0, 0.0], [450.0, 0.0]]), sites))
    assert handover(np.array([1, 1]), loss_back, 3.0).tolist() == [1, 0]


def two_cell_scenario(reuse=1, p0=None, extra=None):
    network = {
        "cells": 2,
        "site_positions_m": [[0.0, 0.0], [1000.0, 0.0]],
        "cell_radius_m": 400.0,
        "reuse": reuse,
        "bandwidth_mhz": 1.0,
        "bs_noise_figure_db": 5.0,
        "device_noise_figure_db": 9.0,
        "bs_tx_power_dbm": 40.0,
    }
    if p0 is not None:
        network |= {"power_control_p0_dbm": p0, "power_control_alpha": 0.8}
    return scenario_from_dict({"network": network | (extra or {}), "devices": {"tx_power_dbm": 23.0}})


@pytest.mark.parametrize("reuse", [1, 3])
def test_sinr_with_one_interferer_by_hand(reuse):
    """Two cells, one device each, both transmitting: SINR = P g_11 / (N0 NF B + P g_21) by hand; with reuse 3
    (listed sites: cell i on band i mod 3, so the two differ) it is the SNR."""
    s = two_cell_scenario(reuse)
    pop = build_population(s.network, s.devices, 2, 100.0, 30.0, seed=0)
    layout = pop.cells
    assert layout is not None
    position = np.array([[200.0, 0.0], [1000.0, 300.0]])  # device 0 in cell 0, device 1 in cell 1
    power_w, uplink, downlink = layout.links(position, np.array([0, 1]))
    p = 10 ** ((23 - 30) / 10)
    noise_up = N0_W_PER_HZ * 1e6 * 10**0.5
    g00 = 10 ** (-(log_distance_db(200.0) + layout.shadowing_db[0, 0]) / 10)
    g10 = 10 ** (-(log_distance_db(math.hypot(1000.0, 300.0)) + layout.shadowing_db[1, 0]) / 10)
    interference = p * g10 if reuse == 1 else 0.0
    assert power_w.tolist() == pytest.approx([p, p])
    assert uplink[0].snr_linear(1e6) == pytest.approx(p * g00 / (noise_up + interference), rel=1e-9)
    # downlink: base station 1 interferes at device 0 (reuse 1)
    bs_w = 10 ** ((40 - 30) / 10)
    noise_down = N0_W_PER_HZ * 1e6 * 10**0.9
    g01 = 10 ** (-(log_distance_db(800.0) + layout.shadowing_db[0, 1]) / 10)
    down_i = bs_w * g01 if reuse == 1 else 0.0
    assert downlink[0].snr_linear(1e6) == pytest.approx(bs_w * g00 / (noise_down + down_i), rel=1e-9)
    # the interference is spread over the band: on half the band, half the noise and half the interference
    assert uplink[0].snr_linear(0.5e6) == pytest.approx(2 * uplink[0].snr_linear(1e6), rel=1e-9)


def test_power_control_sets_the_transmit_power_from_the_serving_path_loss():
    s = two_cell_scenario(p0=-90.0)
    pop = build_population(s.network, s.devices, 6, 100.0, 30.0, seed=3)
    layout = pop.cells
    assert layout is not None
    loss = layout.link_loss_db(layout.position_m)[np.arange(6), layout.serving]
    expected_dbm = np.minimum(23.0, -90.0 + 0.8 * loss)
    assert 10 * np.log10(pop.tx_power_w) + 30 == pytest.approx(expected_dbm)
    assert (expected_dbm < 23.0).any()  # some devices near their site send below P_max
    assert [lk.tx_power_w for lk in pop.uplink] == pytest.approx(pop.tx_power_w.tolist())


def test_each_cell_has_its_own_uplink_access_and_uploads_go_through_the_serving_cell():
    s = two_cell_scenario(extra={"access": "fdma"})
    pop = build_population(s.network, s.devices, 6, 100.0, 30.0, seed=1)
    from edgefl.deployment import network_params

    pricer = SimPyPricer(network_params(s.network), pop, seed=0)
    uplink = pricer.uplink
    assert isinstance(uplink, CellUplinks) and len(uplink.per_cell) == 2
    assert all(isinstance(u, FdmaUplink) for u in uplink.per_cell)
    assert uplink.per_cell[0].band is not uplink.per_cell[1].band
    assert pricer.devices.cell is not None and pricer.devices.cell.tolist() == pop.cells.serving.tolist()


def read_clients(path: Path) -> list[dict]:
    with open(path / "clients.csv", newline="") as handle:
        return list(csv.DictReader(handle))


def test_a_run_reports_cells_and_sinr_matching_the_hand_formula(tmp_path):
    """`--set network.cells=...` on the link-budget phones scenario: clients.csv has each device's cell and the
    SINR computed by hand from its position (no shadowing), the co-channel cell's mean device interfering."""
    out = tmp_path / "run"
    sets = [
        "run.rounds=1",
        "data.num_clients=12",
        "algorithm.clients_per_round=4",
        "network.cells=2",
        "network.site_positions_m=[[0.0, 0.0], [900.0, 0.0]]",
        "network.cell_radius_m=400",
        "network.shadowing_std_db=0",
        "devices.speed_mps=0",
    ]
    code = main(["run", str(PHONES), "--out", str(out), "--no-plots", "-q", *[a for k in sets for a in ("--set", k)]])
    assert code == 0
    rows = read_clients(out)
    sites = np.array([[0.0, 0.0], [900.0, 0.0]])
    xy = np.array([[float(r["x_m"]), float(r["y_m"])] for r in rows])
    cell = np.array([int(r["cell"]) for r in rows])
    p_w = np.array([10 ** (((23 if r["device_class"] == "base" else 20) - 30) / 10) for r in rows])
    gain = 10 ** (-np.vectorize(log_distance_db)(np.maximum(site_distances_m(xy, sites), 35.0)) / 10)
    assert (cell == gain.argmax(axis=1)).all() and set(cell.tolist()) == {0, 1}
    noise_w = N0_W_PER_HZ * 10e6 * 10**0.5  # 10 MHz, bs_noise_figure_db = 5
    for i in range(len(rows)):
        other = 1 - cell[i]
        interference = np.mean(p_w[cell == other] * gain[cell == other, cell[i]])
        hand = 10 * np.log10(p_w[i] * gain[i, cell[i]] / (noise_w + interference))
        assert float(rows[i]["sinr_db"]) == pytest.approx(hand, abs=1e-9)
        snr = 10 * np.log10(p_w[i] * gain[i, cell[i]] / noise_w)
        assert float(rows[i]["uplink_snr_db"]) == pytest.approx(snr, abs=1e-9)


def test_seven_cells_with_mobility_run_and_a_single_cell_keeps_its_columns(tmp_path):
    sets = ["run.rounds=3", "data.num_clients=30", "network.cells=7", "devices.speed_mps=30"]
    out = tmp_path / "seven"
    code = main(["run", str(PHONES), "--out", str(out), "--no-plots", "-q", *[a for k in sets for a in ("--set", k)]])
    assert code == 0
    rows = read_clients(out)
    assert {int(r["cell"]) for r in rows} <= set(range(7)) and len({int(r["cell"]) for r in rows}) > 3
    assert all(math.isfinite(float(r["sinr_db"])) for r in rows)
    one = tmp_path / "one"
    assert main(["run", str(PHONES), "--out", str(one), "--no-plots", "-q", "--set", "run.rounds=1"]) == 0
    assert "cell" not in read_clients(one)[0] and "sinr_db" not in read_clients(one)[0]


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("network.cells", "5", "a hexagonal layout has 1, 7 or 19 cells"),
        ("network.cells", "40", "network.cells: Input should be less than or equal to 19"),
        ("network.cells", "-7", "network.cells: Input should be greater than 0"),
        ("network.inter_site_m", "nan", "network.inter_site_m: Input should be a finite number"),
        ("network.inter_site_m", "-500", "network.inter_site_m: Input should be greater than or equal to 1"),
        ("network.reuse", "2", "network.reuse"),
        ("network.interference_load", "inf", "network.interference_load: Input should be a finite number"),
        ("network.interference_load", "1.5", "network.interference_load: Input should be less than or equal to 1"),
        ("network.handover_margin_db", "nan", "network.handover_margin_db: Input should be a finite number"),
        ("network.handover_margin_db", "-3", "network.handover_margin_db: Input should be greater than or equal"),
        ("network.handover_interruption_s", "1e300", "network.handover_interruption_s: Input should be less than"),
        ("network.handover_interruption_s", "-0.1", "network.handover_interruption_s: Input should be greater"),
        ("network.power_control_p0_dbm", "inf", "network.power_control_p0_dbm: Input should be a finite number"),
        ("network.power_control_p0_dbm", "1e9", "network.power_control_p0_dbm: Input should be less than or equal"),
        ("network.power_control_alpha", "-0.5", "network.power_control_alpha: Input should be greater than or equal"),
        ("network.power_control_alpha", "nan", "network.power_control_alpha: Input should be a finite number"),
        ("network.site_positions_m", "[[0, 0], [1e9, 0]]", "network.site_positions_m"),
    ],
)
def test_bad_multicell_values_exit_2_naming_the_key(key, value, message, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["run", str(PHONES), "--out", str(out), "--no-plots", "-q", "--set", f"{key}={value}"])
    err = capsys.readouterr().err
    assert code == 2 and message in err and not out.exists(), err


def test_several_cells_need_a_link_budget(tmp_path, capsys):
    quick = ROOT / "scenarios" / "quickstart.toml"  # a configured SNR
    code = main(["run", str(quick), "--out", str(tmp_path / "o"), "--no-plots", "-q", "--set", "network.cells=7"])
    assert code == 2 and "network.cells > 1 needs a link budget" in capsys.readouterr().err
    code = main(
        [
            "run",
            str(PHONES),
            "--out",
            str(tmp_path / "p"),
            "--no-plots",
            "-q",
            "--set",
            "network.site_positions_m=[[0, 0]]",
        ]
    )
    assert code == 2 and "at least 2" in capsys.readouterr().err
    two = "network.site_positions_m=[[0, 0], [900, 0]]"
    code = main(["run", str(PHONES), "--out", str(tmp_path / "q"), "--no-plots", "-q", "--set", two])
    assert code == 2 and "set network.cells = 2" in capsys.readouterr().err


def test_a_handover_changes_the_cell_and_holds_the_devices_messages_for_the_interruption():
    """Hand track: device 0 is put next to site 1 while served by cell 0; at the next round's start it changes
    cell (beyond the 3 dB margin), its links are rebuilt, and its next message waits handover_interruption_s."""
    from types import SimpleNamespace

    from edgefl.deployment import network_params
    from edgefl.sim.components import CellMobility
    from edgefl.sim.physics import COMPUTE, UPLOAD

    s = two_cell_scenario(extra={"handover_interruption_s": 0.05, "shadowing_std_db": 0.0})
    s = scenario_from_dict({**s.to_dict(), "devices": {"tx_power_dbm": 23.0, "speed_mps": 1e-9}})
    pop = build_population(s.network, s.devices, 4, 100.0, 30.0, seed=2)
    pricer = SimPyPricer(network_params(s.network), pop, seed=0)
    mobility = next(c for c in pricer.components if isinstance(c, CellMobility))
    devices = pricer.devices
    devices.cell[:] = 0  # everyone served by cell 0 ...
    mobility.walk.position_m[0] = [950.0, 0.0]  # ... device 0 next to site 1, device 1 at the middle
    mobility.walk.position_m[1] = [500.0, 10.0]
    pricer.env.run(until=1.0)
    pricer.start_round(1)
    assert devices.cell[0] == 1 and devices.handovers[0] == 1
    assert devices.cell[1] == 0 and devices.handovers[1] == 0  # within the margin: stays
    assert devices.distance_m[0] == pytest.approx(50.0, abs=1e-6)
    assert devices.uplink[0].path_loss_db == pytest.approx(log_distance_db(50.0))
    waited = {}

    def message(kind):
        start = pricer.env.now
        yield from mobility.before_step(0, SimpleNamespace(kind=kind))
        waited[kind] = pricer.env.now - start

    pricer.env.process(message(COMPUTE))
    pricer.env.run()
    pricer.env.process(message(UPLOAD))
    pricer.env.run()
    assert waited[COMPUTE] == 0.0 and waited[UPLOAD] == pytest.approx(0.05)


def run_files(tmp_path: Path, name: str, scenario: Path, sets: list[str]) -> Path:
    out = tmp_path / name
    assert (
        main(["run", str(scenario), "--out", str(out), "--no-plots", "-q", *[a for k in sets for a in ("--set", k)]])
        == 0
    )
    return out


def test_hierfavg_in_one_cell_with_one_edge_round_is_fedavg_round_for_round(tmp_path):
    quick = ROOT / "scenarios" / "quickstart.toml"
    fedavg = run_files(tmp_path, "fedavg", quick, ["run.rounds=4", "run.eval_every=1"])
    hier = run_files(tmp_path, "hier", quick, ["run.rounds=4", "run.eval_every=1", "algorithm.name=hierfavg"])
    for name in ("metrics.csv", "events.csv", "clients.csv"):
        assert (fedavg / name).read_bytes() == (hier / name).read_bytes(), name


def test_hierfavg_aggregates_at_the_edges_edge_rounds_times_per_cloud_round(tmp_path):
    common = ["run.rounds=2", "run.eval_every=1", "data.num_clients=30", "network.cells=7", "devices.speed_mps=0"]
    one = run_files(tmp_path, "one", PHONES, [*common, "algorithm.name=hierfavg"])
    flat = run_files(tmp_path, "flat", PHONES, common)
    three = run_files(
        tmp_path, "three", PHONES, [*common, "algorithm.name=hierfavg", "algorithm.hierfavg.edge_rounds=3"]
    )
    rows = {
        name: list(csv.DictReader(open(path / "metrics.csv")))
        for name, path in [("one", one), ("flat", flat), ("three", three)]
    }
    for r1, rf in zip(rows["one"], rows["flat"]):  # one edge round: the cloud's average is FedAvg's (as floats go)
        assert float(r1["loss"]) == pytest.approx(float(rf["loss"]), rel=1e-5)
        assert r1["uploads_arrived"] == rf["uploads_arrived"]
    m = 10  # phones-in-a-cell: algorithm.clients_per_round
    for row in rows["three"]:
        assert int(row["uploads_arrived"]) + int(row["uploads_missed"]) == 3 * m
    assert float(rows["three"][-1]["sim_time_s"]) > 2 * float(rows["one"][-1]["sim_time_s"])
    # metrics.csv counts the edge aggregations so far; a flat algorithm has none
    assert [int(r["edge_rounds"]) for r in rows["three"]] == [3, 6]
    assert [int(r["edge_rounds"]) for r in rows["one"]] == [1, 2]
    assert "edge_rounds" not in rows["flat"][0]
    # events.csv marks each phase: edge aggregations only, then the round's last, closed by the cloud
    events = list(csv.DictReader(open(three / "events.csv")))
    marks = {(e["round"], e["phase"], e["aggregation"]) for e in events}
    assert marks == {(r, p, "edge") for r in "12" for p in "01"} | {(r, "2", "cloud") for r in "12"}
    assert "aggregation" not in next(csv.DictReader(open(flat / "events.csv")))


def test_hierfavgs_edges_follow_handovers():
    """A client's edge is its serving cell at the round's start: after handovers, not the cell of the drop."""
    from edgefl.runner import Simulation
    from edgefl.scenario import load_scenario

    overrides = {
        "run.rounds": 8,
        "data.num_clients": 30,
        "network.cells": 7,
        "devices.speed_mps": 100.0,
        "algorithm.name": "hierfavg",
        "algorithm.hierfavg.edge_rounds": 2,
    }
    sim = Simulation(load_scenario(PHONES, overrides))
    dropped = sim.context.client_cells.copy()
    seen = []  # (the algorithm's cells, the devices' serving cells) as each round starts
    round_ = sim.algorithm.round

    def spy(r):
        seen.append((sim.algorithm.ctx.client_cells.copy(), sim.pricer.devices.cell.copy()))
        return round_(r)

    sim.algorithm.round = spy
    sim.run(progress=False)
    assert len(seen) == 8
    for edges, serving in seen:
        np.testing.assert_array_equal(edges, serving)
    assert int(sim.pricer.devices.handovers.sum()) > 0
    assert not np.array_equal(seen[-1][0], dropped)  # some client changed edge


BACKHAUL = [  # hierfavg on seven cells of static phones, a backhaul
    "run.rounds=3",
    "data.num_clients=30",
    "network.cells=7",
    "devices.speed_mps=0",
    "algorithm.name=hierfavg",
    "backhaul.rate_mbps=100",
    "backhaul.energy_j_per_bit=1e-8",
]


def test_the_backhaul_charges_time_and_energy_by_hand(tmp_path):
    """[backhaul]: each round, every edge with uploads sends one aggregate (the largest upload message) to the
    cloud and gets the model back: 2 (latency + bits / rate) of time, 2 bits x edges x J/bit of energy."""
    out = run_files(
        tmp_path, "backhaul", PHONES, [*BACKHAUL, "algorithm.hierfavg.edge_rounds=2", "backhaul.latency_ms=20"]
    )
    dim = json.loads((out / "summary.json").read_text())["model_parameters"]
    bits = dim * 32 + 800  # fp32 model + phones-in-a-cell's header_bits
    cell = {int(r["client"]): int(r["cell"]) for r in read_clients(out)}
    events = list(csv.DictReader(open(out / "events.csv")))
    rows = list(csv.DictReader(open(out / "metrics.csv")))
    energy = 0.0
    for r, row in enumerate(rows, start=1):
        edges = {
            cell[int(e["client"])]
            for e in events
            if e["kind"] == "upload" and e["status"] == "ok" and int(e["round"]) == r
        }
        energy += 2 * bits * len(edges) * 1e-8
        assert int(row["cloud_rounds"]) == r
        assert float(row["backhaul_s"]) == pytest.approx(r * 2 * (0.020 + bits / 100e6))
        assert float(row["backhaul_energy_j"]) == pytest.approx(energy)
    devices_j = sum(float(rows[-1][f"{c}_energy_j"]) for c in CATEGORIES)
    assert float(rows[-1]["energy_j"]) == pytest.approx(devices_j)  # the backhaul's energy is reported apart


def test_the_backhaul_bills_only_the_edges_that_received_an_upload(tmp_path):
    """Issue 28: the backhaul billed every cell with a planned upload: a run in which no upload arrived reported
    cloud_rounds 1, 2, 3 and backhaul energy. Every device fails before its upload ends here: no exchange with the
    cloud, 0 J; with half of them failing, only the cells whose uploads got through are billed (the hand test
    above, on the rows of status ok)."""
    out = run_files(tmp_path, "none", PHONES, [*BACKHAUL, "devices.p_fail=0.999999"])
    events = list(csv.DictReader(open(out / "events.csv")))
    assert events and all(e["status"] != "ok" for e in events)  # work was planned and charged, none went through
    assert not any(e["kind"] == "upload" and e["status"] == "ok" for e in events)
    for row in csv.DictReader(open(out / "metrics.csv")):
        assert int(row["cloud_rounds"]) == 0
        assert float(row["backhaul_s"]) == 0.0 and float(row["backhaul_energy_j"]) == 0.0
    half = run_files(tmp_path, "half", PHONES, [*BACKHAUL, "devices.p_fail=0.5"])
    cell = {int(r["client"]): int(r["cell"]) for r in read_clients(half)}
    events = list(csv.DictReader(open(half / "events.csv")))
    billed = planned = 0
    for r in (1, 2, 3):
        in_round = [e for e in events if int(e["round"]) == r]
        cells_planned = {cell[int(e["client"])] for e in in_round}  # (a promotion, a download ...: it took part)
        got = {cell[int(e["client"])] for e in in_round if e["kind"] == "upload" and e["status"] == "ok"}
        assert got <= cells_planned
        billed, planned = billed + len(got), planned + len(cells_planned)
    assert billed < planned  # some cell worked but received nothing: the test can tell the two rules apart
    dim = json.loads((half / "summary.json").read_text())["model_parameters"]
    last = list(csv.DictReader(open(half / "metrics.csv")))[-1]
    assert float(last["backhaul_energy_j"]) == pytest.approx(2 * (dim * 32 + 800) * billed * 1e-8)


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("backhaul.rate_mbps", "0", "backhaul.rate_mbps: Input should be greater than 0"),
        ("backhaul.rate_mbps", "inf", "backhaul.rate_mbps: Input should be a finite number"),
        ("backhaul.latency_ms", "-1", "backhaul.latency_ms: Input should be greater than or equal to 0"),
        ("backhaul.latency_ms", "nan", "backhaul.latency_ms: Input should be a finite number"),
        ("backhaul.energy_j_per_bit", "1e300", "backhaul.energy_j_per_bit: Input should be less than or equal"),
        ("algorithm.hierfavg.edge_rounds", "0", "edge_rounds"),
    ],
)
def test_bad_backhaul_and_hierfavg_values_exit_2(key, value, message, tmp_path, capsys):
    out = tmp_path / "out"
    sets = ["--set", "algorithm.name=hierfavg", "--set", f"{key}={value}"]
    code = main(["run", str(PHONES), "--out", str(out), "--no-plots", "-q", *sets])
    err = capsys.readouterr().err
    assert code == 2 and message in err and not out.exists(), err


def test_the_cell_map_draws_every_base_station_and_each_devices_association(tmp_path):
    import matplotlib
    import matplotlib.collections

    matplotlib.use("Agg")
    from edgefl import run_plots
    from edgefl.deployment import cell_sites_m

    sets = ["run.rounds=1", "data.num_clients=20", "network.cells=7", "devices.speed_mps=0"]
    out = run_files(tmp_path, "map", PHONES, sets)
    clients = [
        {k: (None if v == "" else v if k == "device_class" else float(v)) for k, v in row.items()}
        for row in read_clients(out)
    ]
    s = scenario_from_dict({"network": {"cells": 7, "cell_radius_m": 500.0}})
    sites = cell_sites_m(s.network)[0]
    fig = run_plots.draw_cell_map(clients, None, 500.0, "t", sites_m=sites)
    ax = fig.axes[0]
    (lines,) = [c for c in ax.collections if isinstance(c, matplotlib.collections.LineCollection)]  # device -> site
    assert len(lines.get_segments()) == 20
    for (start, end), c in zip(lines.get_segments(), clients):
        assert start[0] == c["x_m"] and end[0] == pytest.approx(sites[int(c["cell"]), 0])
    markers = [line for line in ax.get_lines() if line.get_label() == "base station (site number)"]
    assert len(markers) == 1 and len(markers[0].get_xdata()) == 7
