"""The 3GPP TR 38.901 system-level pieces (channel/tr38901.py, channel/large_scale.py): LOS probability, per-state
path loss and shadowing, correlated shadowing, the sector antenna, wraparound (issue 31 items 1-3)."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest

from channel.cells import uplink_interference_w
from channel.path_loss import rma_db, uma_db, umi_street_canyon_db
from channel.tr38901 import (
    CorrelatedField,
    element_gain_dbi,
    hex_wrap_shifts_m,
    los_probability,
    shadowing_std_by_state_db,
)
from edgefl.cli import main
from edgefl.deployment import build_population, large_scale_model, path_loss_function
from edgefl.scenario import scenario_from_dict

ROOT = Path(__file__).resolve().parents[1]
PHONES = ROOT / "scenarios" / "phones-in-a-cell.toml"


def network(**keys):
    base = {"cell_radius_m": 300.0, "path_loss": "umi_street_canyon", "line_of_sight": "random"}
    return scenario_from_dict({"network": base | keys}).network


def test_los_probability_by_hand():
    # Table 7.4.2-1. UMi at 50 m: 18/50 + exp(-50/36)(1 - 18/50) = 0.36 + 0.24935 * 0.64 = 0.519584
    assert float(los_probability("umi_street_canyon", 50.0)) == pytest.approx(0.36 + math.exp(-50 / 36) * 0.64)
    # UMa at 100 m, h_UT 1.5 m (C' = 0): 0.18 + exp(-100/63) * 0.82
    assert float(los_probability("uma", 100.0)) == pytest.approx(0.18 + math.exp(-100 / 63) * 0.82)
    # UMa at 100 m, h_UT 18 m: C' = (5/10)^1.5, times 1 + C' (5/4)(1)^3 exp(-100/150)
    c = 0.5**1.5
    hand = (0.18 + math.exp(-100 / 63) * 0.82) * (1 + c * 1.25 * math.exp(-100 / 150))
    assert float(los_probability("uma", 100.0, ue_height_m=18.0)) == pytest.approx(hand)
    # RMa at 510 m: exp(-500/1000)
    assert float(los_probability("rma", 510.0)) == pytest.approx(math.exp(-0.5))
    for scenario, near in (("umi_street_canyon", 18.0), ("uma", 18.0), ("rma", 10.0)):
        assert float(los_probability(scenario, near)) == 1.0


@pytest.mark.parametrize("model", ["umi_street_canyon", "uma", "rma"])
def test_los_states_of_10000_drops_match_the_table_within_2_standard_errors(model):
    """10,000 links at each of 6 distances through the model a run uses (edgefl.deployment.large_scale_model): the
    share in LOS is within 2 standard errors sqrt(p(1 - p)/n) of Table 7.4.2-1."""
    n, site = 10_000, np.zeros((1, 2))
    net = network(
        path_loss=model, cell_radius_m=2000.0, min_distance_m=10.0, bs_height_m=25.0 if model == "uma" else 10.0
    )
    for k, d in enumerate((20.0, 40.0, 80.0, 150.0, 300.0, 1000.0)):
        rng = np.random.default_rng(k)
        large = large_scale_model(net, site, float("nan"), path_loss_function(net), n, rng, seed=100 + k)
        angle = rng.uniform(0, 2 * np.pi, n)
        position = d * np.stack([np.cos(angle), np.sin(angle)], axis=1)
        share = float(large.los(position).mean())
        p = float(los_probability(model, d))
        se = math.sqrt(p * (1 - p) / n)
        assert abs(share - p) <= 2 * se, (model, d, share, p, se)


def test_each_links_state_gives_its_path_loss_and_sigma():
    net = network(path_loss="uma", bs_height_m=25.0, cell_radius_m=2000.0)
    n = 4000
    large = large_scale_model(
        net, np.zeros((1, 2)), float("nan"), path_loss_function(net), n, np.random.default_rng(1), 7
    )
    position = np.stack([np.linspace(20, 1500, n), np.zeros(n)], axis=1)
    loss, los = large.site_loss_db(position)
    d = np.maximum(position[:, 0], 35.0)  # the path loss is taken at least at min_distance_m
    shadow = large.site_shadowing_db(position)[:, 0]
    path = np.where(los[:, 0], uma_db(d, 3.5, 25.0, 1.5, True), uma_db(d, 3.5, 25.0, 1.5, False))
    assert np.allclose(loss[:, 0], path + shadow)
    assert los.any() and (~los).any()
    # the shadowing's spread by state: Table 7.4.1-1 UMa, 4 dB LOS, 6 dB NLOS (the z are standard normal)
    z = shadow / shadowing_std_by_state_db("uma", d, los[:, 0], 3.5, 25.0, 1.5)
    assert abs(float(z.std()) - 1.0) < 0.05
    assert np.allclose(shadowing_std_by_state_db("umi_street_canyon", d, los[:, 0], 3.5, 10.0, 1.5)[~los[:, 0]], 7.82)


def test_uma_and_rma_path_loss_by_hand():
    # UMa LOS at 100 m, 3.5 GHz, 25 m / 1.5 m: d'BP = 4 * 24 * 0.5 * 3.5e9 / c = 560.4 m > 100: PL1
    d3 = math.hypot(100, 23.5)
    assert float(uma_db(100.0, 3.5, 25.0, 1.5, True)) == pytest.approx(28 + 22 * math.log10(d3) + 20 * math.log10(3.5))
    nlos = 13.54 + 39.08 * math.log10(d3) + 20 * math.log10(3.5)
    assert float(uma_db(100.0, 3.5, 25.0, 1.5, False)) == pytest.approx(nlos)
    # RMa LOS at 1 km, 0.7 GHz, 35 m / 1.5 m, h = 5: d_BP = 2 pi 35 1.5 0.7e9 / c = 770 m < 1000: PL2
    d_bp = 2 * math.pi * 35 * 1.5 * 0.7e9 / 299_792_458.0

    def pl1(x):
        h = 5.0
        return (
            20 * math.log10(40 * math.pi * x * 0.7 / 3)
            + min(0.03 * h**1.72, 10) * math.log10(x)
            - min(0.044 * h**1.72, 14.77)
            + 0.002 * math.log10(h) * x
        )

    d3 = math.hypot(1000, 33.5)
    assert float(rma_db(1000.0, 0.7, 35.0, 1.5, True)) == pytest.approx(pl1(d_bp) + 40 * math.log10(d3 / d_bp))
    assert float(umi_street_canyon_db(100.0, 3.5)) >= float(umi_street_canyon_db(100.0, 3.5, line_of_sight=True))


def test_the_element_pattern_by_hand():
    """Table 7.3-1 on the horizon: A_H = -min(12 (phi / 65)^2, 30), G = 8 dBi + A."""
    assert float(element_gain_dbi(0.0)) == pytest.approx(8.0)  # boresight: G_max
    assert float(element_gain_dbi(32.5)) == pytest.approx(8.0 - 12 * 0.25)  # half the beam width: -3 dB -> 5 dBi
    assert float(element_gain_dbi(-32.5)) == pytest.approx(5.0)
    assert float(element_gain_dbi(180.0)) == pytest.approx(8.0 - 30.0)  # behind: A_max 30 dB -> -22 dBi
    assert float(element_gain_dbi(540.0)) == pytest.approx(-22.0)  # any angle, wrapped
    # vertical: 10 deg below the horizon, tilted 10 deg: on the beam; untilted: -12 (10/65)^2
    assert float(element_gain_dbi(0.0, 100.0, 10.0)) == pytest.approx(8.0)
    assert float(element_gain_dbi(0.0, 100.0, 0.0)) == pytest.approx(8.0 - 12 * (10 / 65) ** 2)


def test_spatial_correlation_of_the_field_matches_the_exponential_model():
    """Over 3,000 realisations, corr(z(x), z(x + delta)) = exp(-delta / d) at delta = d/2, d, 2d (within 3 standard
    errors of a correlation estimate, (1 - rho^2) / sqrt(n))."""
    n, d = 3000, 13.0
    deltas = np.array([d / 2, d, 2 * d])
    points = np.concatenate([[[0.0, 0.0]], np.stack([deltas, np.zeros(3)], axis=1)])  # x and x + delta
    values = np.empty((n, len(points)))
    for r in range(n):
        field = CorrelatedField(np.random.default_rng(r), np.array([d]))
        values[r] = field.values(points)[:, 0]
    assert abs(values.mean()) < 0.06 and abs(values.std() - 1) < 0.04
    for k, delta in enumerate(deltas):
        rho = math.exp(-delta / d)
        measured = float(np.corrcoef(values[:, 0], values[:, k + 1])[0, 1])
        assert abs(measured - rho) <= 3 * (1 - rho**2) / math.sqrt(n), (delta, measured, rho)


def test_shadowing_through_the_run_model_is_correlated_in_space_and_between_sites():
    """The run's model (large_scale_model, spatial shadowing, UMi NLOS): within a site the correlation at 13 m is
    1/e (Table 7.5-6: 13 m NLOS), and between two sites at one point it is network.shadowing_site_correlation."""
    net = network(line_of_sight=False, shadowing_std_db=7.82, shadowing_correlation="spatial", cells=7)
    sites = np.array([[0.0, 0.0], [500.0, 0.0]])
    n = 2000
    pairs = np.empty((n, 3))
    for r in range(n):
        large = large_scale_model(net, sites, 500.0, path_loss_function(net), 2, np.random.default_rng(r), seed=r)
        shadow = large.site_shadowing_db(np.array([[100.0, 50.0], [113.0, 50.0]]))
        pairs[r] = shadow[0, 0], shadow[1, 0], shadow[0, 1]
    assert abs(pairs[:, 0].std() - 7.82) < 0.4
    space = float(np.corrcoef(pairs[:, 0], pairs[:, 1])[0, 1])
    sites_corr = float(np.corrcoef(pairs[:, 0], pairs[:, 2])[0, 1])
    assert abs(space - math.exp(-1)) <= 3 * (1 - math.exp(-2)) / math.sqrt(n), space
    assert abs(sites_corr - 0.5) <= 3 * 0.75 / math.sqrt(n), sites_corr
    # another site correlation
    net0 = network(
        line_of_sight=False,
        shadowing_std_db=7.82,
        shadowing_correlation="spatial",
        cells=7,
        shadowing_site_correlation=0.0,
    )
    cross = []
    for r in range(n):
        large = large_scale_model(net0, sites, 500.0, path_loss_function(net0), 1, np.random.default_rng(r), seed=r)
        cross.append(large.site_shadowing_db(np.array([[100.0, 50.0]]))[0])
    cross_arr = np.array(cross)
    assert abs(float(np.corrcoef(cross_arr[:, 0], cross_arr[:, 1])[0, 1])) <= 3 / math.sqrt(n)


def test_wraparound_shifts_tile_the_plane():
    for sites, isd in ((7, 500.0), (19, 200.0)):
        shifts = hex_wrap_shifts_m(sites, isd)
        area = sites * (math.sqrt(3) / 2) * isd**2  # a hexagon of inradius isd/2 has area (sqrt 3 / 2) isd^2
        length = np.hypot(shifts[1:, 0], shifts[1:, 1])
        # |shift|^2 (sqrt 3 / 2) = the cluster's area: a lattice whose cell is the layout
        assert np.allclose(length**2 * math.sqrt(3) / 2, area)
        assert np.allclose(shifts[0], 0.0)


def mean_interference_db(wraparound: bool) -> tuple[float, float]:
    """The centre site's and the outer ring's mean uplink interference (dB) of a 19-site, 3-sector UMa NLOS layout
    (no shadowing: the geometry alone)."""
    keys = {
        "line_of_sight": False,
        "cells": 19,
        "sectors": 3,
        "inter_site_m": 500.0,
        "cell_radius_m": 290.0,
        "path_loss": "uma",
        "bs_height_m": 25.0,
        "wraparound": wraparound,
        "min_distance_m": 35.0,
        "bandwidth_mhz": 10.0,
    }
    s = scenario_from_dict({"network": network(**keys).model_dump()})
    pop = build_population(s.network, s.devices, 11_400, 1.0, 1.0, seed=3)
    layout = pop.cells
    assert layout is not None
    gain = 10 ** (-layout.link_loss_db(layout.position_m) / 10)
    interference = uplink_interference_w(pop.tx_power_w, gain, layout.serving, layout.band, 1.0)
    per_site = interference.reshape(19, 3).mean(axis=1)
    return 10 * math.log10(per_site[0]), 10 * math.log10(per_site[7:].mean())


def test_wraparound_makes_edge_and_centre_cells_see_the_same_interference():
    centre, edge = mean_interference_db(True)
    assert abs(centre - edge) <= 0.5, (centre, edge)
    centre_open, edge_open = mean_interference_db(False)
    # without it the outer ring sees less (measured: 0.93 dB less on this drop; its corner sites up to 2 dB)
    assert centre_open - edge_open > 0.5, (centre_open, edge_open)


def test_three_sectors_serve_by_the_antenna_and_reuse_3_gives_a_band_per_sector():
    s = scenario_from_dict(
        {"network": {"cells": 7, "sectors": 3, "reuse": 3, "cell_radius_m": 200.0, "shadowing_std_db": 0.0}}
    )
    pop = build_population(s.network, s.devices, 300, 1.0, 1.0, seed=0)
    layout = pop.cells
    assert layout is not None and layout.band.tolist() == [0, 1, 2] * 7
    offset = layout.position_m[:, None, :] - layout.site_m[None]
    site = layout.serving // 3
    nearest = np.argmin(np.hypot(offset[..., 0], offset[..., 1]), axis=1)
    assert (site == nearest).all()  # no shadowing: the nearest site ...
    bearing = np.degrees(np.arctan2(offset[np.arange(300), site, 1], offset[np.arange(300), site, 0])) % 360
    sector = np.argmin(np.abs((bearing[:, None] - np.array([30, 150, 270]) + 180) % 360 - 180), axis=1)
    assert (layout.serving % 3 == sector).all()  # ... and the sector whose boresight is closest


def read_clients(path: Path) -> list[dict]:
    with open(path / "clients.csv", newline="") as handle:
        return list(csv.DictReader(handle))


def test_a_run_with_random_los_reports_each_devices_state(tmp_path):
    sets = [
        "run.rounds=1",
        "data.num_clients=20",
        "algorithm.clients_per_round=4",
        "network.path_loss=umi_street_canyon",
        "network.line_of_sight=random",
        "network.shadowing_std_db=0",
        "network.shadowing_correlation=spatial",
        "network.cells=7",
        "network.wraparound=true",
        "network.sectors=3",
        "network.cell_radius_m=115",
        "devices.speed_mps=1.4",
    ]
    out = tmp_path / "run"
    code = main(["run", str(PHONES), "--out", str(out), "-q", "--plots", *[a for k in sets for a in ("--set", k)]])
    assert code == 0 and (out / "cell_map.png").exists()  # the map finds each sector's site
    rows = read_clients(out)
    assert {r["los"] for r in rows} <= {"0", "1"} and all(0 <= int(r["cell"]) < 21 for r in rows)
    assert all(math.isfinite(float(r["sinr_db"])) for r in rows)


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("network.line_of_sight", "maybe", "network.line_of_sight"),
        ("network.shadowing_decorrelation_m", "nan", "network.shadowing_decorrelation_m: Input should be a finite"),
        ("network.shadowing_decorrelation_m", "-5", "network.shadowing_decorrelation_m: Input should be greater"),
        ("network.shadowing_decorrelation_m", "1e300", "network.shadowing_decorrelation_m: Input should be less"),
        ("network.shadowing_site_correlation", "inf", "network.shadowing_site_correlation: Input should be a finite"),
        ("network.shadowing_site_correlation", "-0.5", "network.shadowing_site_correlation: Input should be greater"),
        ("network.shadowing_site_correlation", "nan", "network.shadowing_site_correlation: Input should be a finite"),
        ("network.downtilt_deg", "nan", "network.downtilt_deg: Input should be a finite number"),
        ("network.downtilt_deg", "-3", "network.downtilt_deg: Input should be greater than or equal to 0"),
        ("network.downtilt_deg", "1e9", "network.downtilt_deg: Input should be less than or equal to 90"),
        ("network.sectors", "2", "network.sectors"),
        ("network.wraparound", "yes", "network.wraparound"),
        ("network.shadowing_correlation", "nan", "network.shadowing_correlation"),
    ],
)
def test_bad_layout_values_exit_2_naming_the_key(key, value, message, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["run", str(PHONES), "--out", str(out), "--no-plots", "-q", "--set", f"{key}={value}"])
    err = capsys.readouterr().err
    assert code == 2 and message in err and not out.exists(), err


@pytest.mark.parametrize(
    "sets, message",
    [
        (["network.line_of_sight=random"], "set network.path_loss to one of umi_street_canyon, uma, rma"),
        (
            ["network.line_of_sight=random", "network.path_loss=uma", "network.shadowing_std_db=4"],
            "leave network.shadowing_std_db at 0",
        ),
        (["network.shadowing_correlation=spatial"], "needs network.shadowing_decorrelation_m"),
        (["network.wraparound=true"], "network.wraparound needs a hexagonal layout of 7 or 19 sites"),
    ],
)
def test_layout_keys_that_do_not_fit_exit_2(sets, message, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["run", str(PHONES), "--out", str(out), "--no-plots", "-q", *[a for k in sets for a in ("--set", k)]])
    err = capsys.readouterr().err
    assert code == 2 and message in err and not out.exists(), err


def test_a_device_moving_1_m_reads_the_same_field_nearby():
    """Mobility moves through the field: a step of 1 m changes a UMi NLOS link's shadowing by E|dX| =
    sigma sqrt(2 (1 - exp(-1/13))) sqrt(2/pi) (2.4 dB), not the 8.8 dB of a fresh draw."""
    net = network(line_of_sight=False, shadowing_std_db=7.82, shadowing_correlation="spatial", cells=7)
    n = 4000
    large = large_scale_model(net, np.zeros((1, 2)), 500.0, path_loss_function(net), n, np.random.default_rng(0), 4)
    rng = np.random.default_rng(1)
    position = rng.uniform(-2000, 2000, size=(n, 2))
    angle = rng.uniform(0, 2 * np.pi, n)
    moved = position + np.stack([np.cos(angle), np.sin(angle)], axis=1)
    step = np.abs(large.site_shadowing_db(moved) - large.site_shadowing_db(position))[:, 0]
    hand = 7.82 * math.sqrt(2 * (1 - math.exp(-1 / 13))) * math.sqrt(2 / math.pi)
    assert float(step.mean()) == pytest.approx(hand, rel=0.1)
