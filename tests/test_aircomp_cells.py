"""Over-the-air computation on several cells (issue 31 item 7; edgefl.sim.access.CellAirCompUplink): each cell's own
receive SNR, the other co-channel cells' senders as interference added to its aggregation noise, by hand."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from edgefl.cli import main
from edgefl.deployment import build_population, network_params
from edgefl.scenario import scenario_from_dict
from edgefl.sim import Activity, PhaseRecord, SimPyPricer
from edgefl.sim.access import CellAirCompUplink

ROOT = Path(__file__).resolve().parents[1]
PHONES = ROOT / "scenarios" / "phones-in-a-cell.toml"
N0_W_PER_HZ = 10 ** ((-174 - 30) / 10)
VALUES = 10_000


def log_distance_db(d_m):
    return 128.1 + 37.6 * math.log10(d_m / 1000.0)


def three_devices(reuse: int):
    """Two cells 1 km apart; devices 0 (200 m) and 1 (400 m) from site 0, device 2 at 300 m from site 1; 1 MHz, no
    fading, no shadowing, 23 dBm, BS noise figure 5 dB."""
    s = scenario_from_dict(
        {
            "data": {"num_clients": 3},
            "algorithm": {"clients_per_round": 3, "fedavg": {"weighting": "uniform"}},
            "network": {
                "cells": 2,
                "site_positions_m": [[0.0, 0.0], [1000.0, 0.0]],
                "cell_radius_m": 450.0,
                "reuse": reuse,
                "bandwidth_mhz": 1.0,
                "bs_noise_figure_db": 5.0,
                "uplink": "aircomp",
                "aircomp_threshold_db": -50.0,
            },
            "devices": {"tx_power_dbm": 23.0, "idle_power_w": 0.0, "rx_power_w": 0.0},
        }
    )
    pop = build_population(s.network, s.devices, 3, 1.0, 1.0, seed=0)
    layout = pop.cells
    assert layout is not None
    position, serving = np.array([[200.0, 0.0], [-400.0, 0.0], [1300.0, 0.0]]), np.array([0, 0, 1])
    layout = replace(layout, position_m=position, serving=serving)
    power, uplink, downlink = layout.links(position, serving)
    pop = replace(pop, cells=layout, uplink=uplink, downlink=downlink, tx_power_w=power)
    return network_params(s.network), pop


def uploads():
    return PhaseRecord(0, 0, {c: [Activity("upload", "upload", bits=VALUES * 32.0)] for c in range(3)})


def test_each_cell_inverts_to_its_own_snr_and_the_other_cell_interferes_by_hand():
    net, pop = three_devices(reuse=1)
    pricer = SimPyPricer(net, pop, 0)
    assert isinstance(pricer.uplink, CellAirCompUplink)
    assert pricer.start_round(3).all()
    pricer.price_phase(uploads())
    p_max, noise = 10 ** ((23 - 30) / 10), N0_W_PER_HZ * 1e6 * 10**0.5
    g = {  # (device, site) -> mean gain
        (k, s): 10 ** (-log_distance_db(d) / 10)
        for (k, s), d in {(0, 0): 200, (1, 0): 400, (2, 0): 1300, (0, 1): 800, (1, 1): 1400, (2, 1): 300}.items()
    }
    rho0 = p_max * g[1, 0] / noise  # cell 0's weakest sender (400 m) at full power
    rho1 = p_max * g[2, 1] / noise  # cell 1's only sender
    p = {0: rho0 * noise / g[0, 0], 1: p_max, 2: p_max}  # channel inversion to each device's own site
    inr0 = p[2] * g[2, 0] / noise  # device 2 (cell 1) heard at site 0
    inr1 = (p[0] * g[0, 1] + p[1] * g[1, 1]) / noise  # cell 0's senders heard at site 1
    uplink = pricer.uplink
    assert uplink.cell_clear_snr[0] == pytest.approx(rho0, rel=1e-9)
    assert uplink.cell_snr[0] == pytest.approx(rho0 / (1 + inr0), rel=1e-9)
    assert uplink.cell_snr[1] == pytest.approx(rho1 / (1 + inr1), rel=1e-9)
    sent = {e.client: e for e in pricer.events if e.kind == "upload"}
    seconds = VALUES / 1e6
    assert sent[0].energy_j == pytest.approx(seconds * p[0] / pop.pa_efficiency[0], rel=1e-9)
    # the noise: cell 0's two rows get one vector of std s0 / (2 sqrt(rho0_eff)), cell 1's row s1 / sqrt(rho1_eff)
    updates = torch.zeros(3, 200_000, dtype=torch.float64)
    updates[0], updates[1], updates[2] = 1.0, 0.5, 2.0
    received = pricer.superpose(updates, np.array([0, 1, 2]))
    noise0 = (received[0] - updates[0]).numpy()
    assert np.allclose(received[1] - updates[1], noise0)  # the same vector for a cell's rows
    assert noise0.std() == pytest.approx(1.0 / (2 * math.sqrt(uplink.cell_snr[0])), rel=0.01)
    noise1 = (received[2] - updates[2]).numpy()
    assert noise1.std() == pytest.approx(2.0 / math.sqrt(uplink.cell_snr[1]), rel=0.01)


def test_at_reuse_3_the_cells_do_not_interfere():
    net, pop = three_devices(reuse=3)
    pricer = SimPyPricer(net, pop, 0)
    pricer.start_round(3)
    pricer.price_phase(uploads())
    p_max, noise = 10 ** ((23 - 30) / 10), N0_W_PER_HZ * 1e6 * 10**0.5
    assert pricer.uplink.cell_snr[0] == pytest.approx(p_max * 10 ** (-log_distance_db(400) / 10) / noise, rel=1e-9)


def test_a_seven_cell_aircomp_run(tmp_path):
    sets = [
        "run.rounds=3",
        "network.cells=7",
        "network.uplink=aircomp",
        "network.aircomp_threshold_db=-10",
        "algorithm.over_selection=0",
        "network.deadline_s=5",
        "algorithm.fedavg.weighting=uniform",
    ]
    out = tmp_path / "air"
    code = main(["run", str(PHONES), "--out", str(out), "--no-plots", "-q", *[a for k in sets for a in ("--set", k)]])
    assert code == 0
    rows = (out / "metrics.csv").read_text().splitlines()
    assert len(rows) == 4


def test_events_interference_with_aircomp_exits_2(tmp_path, capsys):
    sets = ["network.cells=7", "network.uplink=aircomp", "network.interference=events"]
    out = tmp_path / "out"
    code = main(["run", str(PHONES), "--out", str(out), "--no-plots", "-q", *[a for k in sets for a in ("--set", k)]])
    assert code == 2 and "interfere in their shared slot" in capsys.readouterr().err
