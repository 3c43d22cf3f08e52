"""network.interference = "events" (issue 31 item 6): a co-channel upload starting or ending in another cell re-times
the uploads it interferes with (edgefl.sim.components.EventInterference)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from edgefl.cli import main
from edgefl.deployment import build_population, network_params
from edgefl.scenario import scenario_from_dict
from edgefl.sim.activities import Activity, PhaseRecord
from edgefl.sim.components import EventInterference
from edgefl.sim.pricer import SimPyPricer

ROOT = Path(__file__).resolve().parents[1]
PHONES = ROOT / "scenarios" / "phones-in-a-cell.toml"
N0_W_PER_HZ = 10 ** ((-174 - 30) / 10)  # -174 dBm/Hz


def two_devices(interference: str, access: str = "dedicated"):
    """Two cells 1 km apart, co-channel; device 0 at (300, 0) in cell 0, device 1 at (700, 0) in cell 1; 1 MHz,
    Shannon, no fading, no shadowing, 23 dBm, BS noise figure 5 dB."""
    s = scenario_from_dict(
        {
            "data": {"num_clients": 2},
            "algorithm": {"clients_per_round": 2},
            "network": {
                "cells": 2,
                "site_positions_m": [[0.0, 0.0], [1000.0, 0.0]],
                "cell_radius_m": 450.0,
                "bandwidth_mhz": 1.0,
                "bs_noise_figure_db": 5.0,
                "access": access,
                "interference": interference,
            },
            "devices": {"tx_power_dbm": 23.0, "idle_power_w": 0.0},
        }
    )
    pop = build_population(s.network, s.devices, 2, 1.0, 1.0, seed=0)
    layout = pop.cells
    assert layout is not None
    position, serving = np.array([[300.0, 0.0], [700.0, 0.0]]), np.array([0, 1])
    layout = replace(layout, position_m=position, serving=serving)
    power, uplink, downlink = layout.links(position, serving)
    pop = replace(pop, cells=layout, uplink=uplink, downlink=downlink, tx_power_w=power)
    return network_params(s.network), pop


def log_distance_db(d_m):
    return 128.1 + 37.6 * math.log10(d_m / 1000.0)


def test_two_co_channel_uploads_one_ending_first_by_hand():
    """Both start at 0. While both are on the air, each sees the other's power: R_I = B log2(1 + S / (N + I)). Device 1
    (0.5 Mbit) ends at t1 = 0.5e6 / R_I; device 0 (2 Mbit) then has 2e6 - R_I t1 bits left at R_0 = B log2(1 + S/N):
    it ends at t1 + (2e6 - R_I t1) / R_0."""
    network, pop = two_devices("events")
    pricer = SimPyPricer(network, pop, 0)
    assert any(isinstance(c, EventInterference) for c in pricer.components)
    chains = {0: [Activity("upload", "model", bits=2e6)], 1: [Activity("upload", "model", bits=0.5e6)]}
    pricer.price_phase(PhaseRecord(0, 0, chains))
    ends = {e.client: e.end_s for e in pricer.events if e.kind == "upload"}
    p_w, b_hz = 10 ** ((23 - 30) / 10), 1e6
    noise = N0_W_PER_HZ * b_hz * 10**0.5
    signal = p_w * 10 ** (-log_distance_db(300.0) / 10)  # each device to its own site, 300 m (symmetric)
    interference = p_w * 10 ** (-log_distance_db(700.0) / 10)  # the other device, 700 m from the site
    rate_i = b_hz * math.log2(1 + signal / (noise + interference))
    rate_0 = b_hz * math.log2(1 + signal / noise)
    t1 = 0.5e6 / rate_i
    t0 = t1 + (2e6 - rate_i * t1) / rate_0
    assert ends[1] == pytest.approx(t1, rel=1e-9)
    assert ends[0] == pytest.approx(t0, rel=1e-9)
    # against the expected-load model (the other cell's device interfering all the time): device 0 ends later
    network_l, pop_l = two_devices("expected_load")
    pricer_l = SimPyPricer(network_l, pop_l, 0)
    pricer_l.price_phase(PhaseRecord(0, 0, chains))
    ends_l = {e.client: e.end_s for e in pricer_l.events if e.kind == "upload"}
    assert ends_l[0] == pytest.approx(2e6 / rate_i, rel=1e-9) and ends_l[0] > ends[0]
    # the energy of device 0's upload is its airtime at its power
    (row,) = [e for e in pricer.events if e.kind == "upload" and e.client == 0]
    assert row.energy_j == pytest.approx(p_w * t0, rel=1e-9)


def test_an_upload_alone_on_the_air_is_not_slowed():
    network, pop = two_devices("events")
    pricer = SimPyPricer(network, pop, 0)
    pricer.price_phase(PhaseRecord(0, 0, {0: [Activity("upload", "model", bits=1e6)]}))
    (row,) = [e for e in pricer.events if e.kind == "upload"]
    assert row.end_s - row.start_s == pytest.approx(1e6 / pop.uplink[0].rate_bps(1e6), rel=1e-12)


def test_fdma_cells_re_plan_their_bands_on_the_other_cells_uploads():
    network, pop = two_devices("events", access="fdma")
    pricer = SimPyPricer(network, pop, 0)
    chains = {0: [Activity("upload", "model", bits=2e6)], 1: [Activity("upload", "model", bits=0.5e6)]}
    pricer.price_phase(PhaseRecord(0, 0, chains))
    ends = {e.client: e.end_s for e in pricer.events if e.kind == "upload"}
    plain, _ = two_devices("events")  # the same numbers as the dedicated bands: one upload per cell's band
    ded = SimPyPricer(plain, pop, 0)
    ded.price_phase(PhaseRecord(0, 0, chains))
    ends_d = {e.client: e.end_s for e in ded.events if e.kind == "upload"}
    assert ends[0] == pytest.approx(ends_d[0], rel=1e-9) and ends[1] == pytest.approx(ends_d[1], rel=1e-9)


def test_a_seven_cell_run_with_event_interference(tmp_path):
    sets = ["run.rounds=2", "network.cells=7", "network.interference=events", "devices.speed_mps=1.4"]
    out = tmp_path / "ev"
    code = main(["run", str(PHONES), "--out", str(out), "--no-plots", "-q", *[a for k in sets for a in ("--set", k)]])
    assert code == 0


def test_bad_interference_value_exits_2(tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["run", str(PHONES), "--out", str(out), "--no-plots", "-q", "--set", "network.interference=nan"])
    assert code == 2 and "network.interference" in capsys.readouterr().err and not out.exists()
