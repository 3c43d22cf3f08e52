"""Over-the-air computation (network.uplink = "aircomp"): timing, truncation, power, noise, learning."""

import subprocess
import sys

import numpy as np
import pytest
import torch

from channel import aircomp_mean_noise_std
from edgefl.deployment import build_population, network_params
from edgefl.runner import Simulation
from edgefl.scenario import ScenarioError, scenario_from_dict
from edgefl.sim import Activity, PhaseRecord, SimPyPricer
from tests.test_sim import small_scenario

VALUES = 10_000  # model values per upload (32 bits each)


def world(n, **network):
    s = scenario_from_dict(
        {
            "data": {"num_clients": n},
            "algorithm": {"clients_per_round": n, "fedavg": {"weighting": "uniform"}},
            "network": {"bandwidth_mhz": 1.0, "fading": "none", **network},
            "devices": {"cycles_per_sample": 1e6, "cpu_ghz": 1.0, "idle_power_w": 0.0, "rx_power_w": 0.0},
        }
    )
    return network_params(s.network), build_population(s.network, s.devices, n, 1.0, 1.0, seed=0)


def uploads(n, samples=None):
    return PhaseRecord(
        0,
        0,
        {
            c: ([Activity("compute", "train", samples=samples[c], work="train")] if samples else [])
            + [Activity("upload", "upload", bits=VALUES * 32.0)]
            for c in range(n)
        },
    )


def upload_seconds(n, **network):
    net, pop = world(n, snr_db=20.0, **network)
    pricer = SimPyPricer(net, pop, 0)
    pricer.start_round(n)
    pricer.price_phase(uploads(n))
    return pricer.now


def test_an_aircomp_upload_takes_the_same_time_for_10_and_100_devices_where_fdma_grows():
    air = [upload_seconds(n, uplink="aircomp", aircomp_threshold_db=-50.0) for n in (10, 100)]
    fdma = [upload_seconds(n, access="fdma") for n in (10, 100)]
    assert air[0] == air[1] == pytest.approx(VALUES / 1e6)  # d / (B · 1 symbol per Hz): 10 ms
    assert fdma[1] == pytest.approx(10 * fdma[0], rel=1e-9)  # the band split 10 times finer


def test_senders_wait_for_each_other_and_send_in_one_slot():
    net, pop = world(3, snr_db=20.0, uplink="aircomp", aircomp_threshold_db=-50.0)
    pricer = SimPyPricer(net, pop, 0)
    pricer.start_round(3)
    pricer.price_phase(uploads(3, samples=[100, 300, 200]))  # ready at 0.1, 0.3, 0.2 s
    sent = sorted((e.client, e.start_s, e.end_s) for e in pricer.events if e.kind == "upload")
    assert [s[1] for s in sent] == pytest.approx([0.3, 0.3, 0.3])
    assert [s[2] for s in sent] == pytest.approx([0.31, 0.31, 0.31])


def test_truncation_powers_and_noise_of_two_devices_by_hand():
    # A link budget: two devices at different distances; no fading, so each one's SNR at full power is its mean.
    net, pop = world(2, cell_radius_m=500.0, uplink="aircomp", aircomp_threshold_db=-50.0)
    pricer = SimPyPricer(net, pop, 0)
    per_w = pricer.channel_state()[0]
    full_power_snr = pop.tx_power_w * per_w
    rho = full_power_snr.min()  # the weakest device at full power sets the common receive SNR
    assert pricer.start_round(2).all()
    pricer.price_phase(uploads(2))
    assert pricer.uplink.receive_snr == pytest.approx(rho, rel=1e-12)
    weak, strong = int(np.argmin(full_power_snr)), int(np.argmax(full_power_snr))
    sent = {e.client: e for e in pricer.events if e.kind == "upload"}
    seconds = VALUES / 1e6
    # energy = airtime x (p / PA efficiency + circuit power); the weak device at P_max, the strong one at rho / g
    for client, watts in ((weak, pop.tx_power_w[weak]), (strong, rho / per_w[strong])):
        expected = seconds * (watts / pop.pa_efficiency[client] + pop.circuit_power_w[client])
        assert sent[client].energy_j == pytest.approx(expected, rel=1e-9)
    # the noise on the mean of the two updates: s / (2 sqrt(rho)), s the largest RMS of the two
    updates = torch.zeros(2, 200_000, dtype=torch.float64)
    updates[0] = 1.0  # RMS 1
    updates[1] = torch.linspace(-0.5, 0.5, 200_000, dtype=torch.float64)  # RMS ~0.29
    received = pricer.superpose(updates)
    noise = (received.mean(0) - updates.mean(0)).numpy()
    hand_std = 1.0 / (2 * np.sqrt(rho))
    assert aircomp_mean_noise_std(1.0, 2, rho) == pytest.approx(hand_std)
    assert noise.std() == pytest.approx(hand_std, rel=0.01)
    assert abs(noise.mean()) < 5 * hand_std / np.sqrt(len(noise))
    # truncation: at a threshold between the two, only the strong device can take part
    threshold_db = float(10 * np.log10(np.sqrt(full_power_snr.min() * full_power_snr.max())))
    net2, pop2 = world(2, cell_radius_m=500.0, uplink="aircomp", aircomp_threshold_db=threshold_db)
    assert SimPyPricer(net2, pop2, 0).start_round(1).tolist() == [c == strong for c in range(2)]


def test_the_receive_snr_is_over_the_senders_whose_upload_starts():
    """Issue 28: rho was taken over the planned senders, including one whose chain ended before its upload (a lost
    download), so no sender transmitted at P_max. Here the weak device does nothing in the phase: rho is the strong
    one's SNR at full power and it sends at P_max."""
    from edgefl.sim.component import Component

    net, pop = world(2, cell_radius_m=500.0, uplink="aircomp", aircomp_threshold_db=-50.0)
    pricer = SimPyPricer(net, pop, 0)
    full_power_snr = pop.tx_power_w * pricer.channel_state()[0]
    weak, strong = int(np.argmin(full_power_snr)), int(np.argmax(full_power_snr))
    assert full_power_snr[strong] > 1.1 * full_power_snr[weak]  # (the two differ: the check below can fail)

    class WeakStaysOut(Component):
        def chain_may_start(self, client: int) -> bool:
            return client != weak

    pricer.add_component(WeakStaysOut())
    assert pricer.start_round(2).all()
    pricer.price_phase(uploads(2))
    assert pricer.uplink.receive_snr == pytest.approx(full_power_snr[strong], rel=1e-12)
    sent = [e for e in pricer.events if e.kind == "upload"]
    assert [e.client for e in sent] == [strong]
    expected = VALUES / 1e6 * (pop.tx_power_w[strong] / pop.pa_efficiency[strong] + pop.circuit_power_w[strong])
    assert sent[0].energy_j == pytest.approx(expected, rel=1e-9)  # at P_max


def test_aircomp_at_a_very_high_snr_learns_as_uniform_fedavg_round_for_round():
    digital = Simulation(small_scenario(algorithm={"fedavg": {"weighting": "uniform"}}, run={"rounds": 6}))
    air = Simulation(
        small_scenario(
            algorithm={"fedavg": {"weighting": "uniform"}},
            run={"rounds": 6},
            network={"snr_db": 60.0, "uplink": "aircomp", "aircomp_threshold_db": -50.0},
        )
    )
    a, b = digital.run(progress=False).metrics, air.run(progress=False).metrics
    for row_a, row_b in zip(a, b):
        assert row_b["acc_mean"] == pytest.approx(row_a["acc_mean"], abs=1e-4)
        assert row_b["loss"] == pytest.approx(row_a["loss"], abs=1e-4)
    assert not torch.equal(digital.algorithm.w, air.algorithm.w)  # the noise is there, and small
    assert torch.allclose(digital.algorithm.w, air.algorithm.w, atol=1e-3)


def test_a_low_receive_snr_hurts_learning():
    runs = {
        snr: Simulation(
            small_scenario(
                algorithm={"fedavg": {"weighting": "uniform"}},
                run={"rounds": 6},
                network={"snr_db": snr, "uplink": "aircomp", "aircomp_threshold_db": -50.0},
            )
        ).run(progress=False)
        for snr in (60.0, -20.0)
    }
    assert runs[-20.0].metrics[-1]["loss"] > runs[60.0].metrics[-1]["loss"] + 0.05


@pytest.mark.parametrize(
    "sections, needle",
    [
        ({"network": {"uplink": "aircomp"}}, 'weighting = "uniform"'),
        ({"network": {"uplink": "aircomp"}, "algorithm": {"name": "scaffold"}}, "use fedavg or fedprox"),
        (
            {
                "network": {"uplink": "aircomp"},
                "algorithm": {"fedavg": {"weighting": "uniform"}},
                "run": {"engine": "ideal"},
            },
            "run.engine",
        ),
        (
            {
                "network": {"uplink": "aircomp"},
                "algorithm": {"fedavg": {"weighting": "uniform"}},
                "compression": {"name": "topk", "fraction": 0.1},
            },
            "compression.name",
        ),
        (
            {
                "network": {"uplink": "aircomp", "deadline_s": 1.0},
                "algorithm": {"fedavg": {"weighting": "uniform"}},
                "control": {"name": "deadline_fit"},
            },
            "control.name",
        ),
    ],
)
def test_aircomp_refuses_what_it_cannot_serve(sections, needle):
    with pytest.raises(ScenarioError, match="aircomp") as error:
        small_scenario(**sections)
    assert needle in str(error.value)


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "1e9"])
def test_aircomp_keys_are_checked_at_the_command_line(value, tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "edgefl",
            "run",
            "scenarios/quickstart.toml",
            "--set",
            "network.uplink=aircomp",
            "--set",
            f"network.aircomp_symbols_per_hz={value}",
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert "network.aircomp_symbols_per_hz" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()


def test_a_sweep_co_simulates_aircomp_points():
    # a channel that cannot change who takes part digitally (no fading, Shannon rates): its points re-price one
    # training, but over the air the channel decides who is scheduled and what noise the server learns from
    from edgefl.sim import can_change_participation

    digital, _ = world(4, snr_db=20.0)
    assert not can_change_participation(digital)
    air, _ = world(4, snr_db=20.0, uplink="aircomp")
    assert can_change_participation(air)
