"""The SimPy pricer and the engine against hand calculations."""

import math

import numpy as np
import pytest
import torch

from algorithms.fedavg import FedAvg
from edgefl.deployment import NetworkParams, build_population
from edgefl.runner import Simulation
from edgefl.scenario import DevicesSection, NetworkSection, scenario_from_dict
from edgefl.sim import Activity, PhaseRecord, SimPyPricer
from energy import drdm_total_energy_j

RATE_1MHZ_20DB = 1e6 * math.log2(1 + 100)  # 6.658 Mbit/s


def make_pricer(num_clients=2, access="dedicated", deadline_s=None, idle_power_w=0.0, **devices):
    network = NetworkSection(snr_db=20.0, bandwidth_mhz=1.0, access=access, deadline_s=deadline_s)
    devices = DevicesSection(
        idle_power_w=idle_power_w, rx_power_w=0.0, tx_power_dbm=23.0, cycles_per_sample=1e6, **devices
    )
    population = build_population(network, devices, num_clients, 1.0, 1.0, seed=0)
    params = NetworkParams(
        bandwidth_hz=1e6,
        downlink_bandwidth_hz=1e6,
        access=access,
        fading="none",
        rician_k=1.0,
        efficiency=1.0,
        snr_gap_db=0.0,
        outage_snr_db=None,
        deadline_s=deadline_s,
        header_bits=0.0,
    )
    return SimPyPricer(params, population, seed=0)


def upload_phase(bits_by_client):
    return PhaseRecord(0, 0, {c: [Activity("upload", "upload", bits=b)] for c, b in bits_by_client.items()})


def ends(pricer):
    return {e.client: e.end_s for e in pricer.events if e.kind == "upload"}


def test_dedicated_upload_takes_bits_over_shannon_rate_and_charges_p_times_t():
    pricer = make_pricer(num_clients=1)
    done = pricer.price_phase(upload_phase({0: RATE_1MHZ_20DB}))
    assert done == {0: True}
    assert pricer.now == pytest.approx(1.0, rel=1e-12)
    assert pricer.ledger.by_category()["uplink"] == pytest.approx(0.19953, rel=1e-4)  # 23 dBm for 1 s


def test_fdma_processor_sharing_matches_hand_timeline():
    # A: 1 Mbit, B: 2 Mbit, both start at 0, rate R at the full band.
    # Both at R/2 until A ends at 2/R (Mbit); B then alone at R: ends at 3/R.
    R = RATE_1MHZ_20DB / 1e6
    pricer = make_pricer(access="fdma")
    pricer.price_phase(upload_phase({0: 1e6, 1: 2e6}))
    assert ends(pricer)[0] == pytest.approx(2 / R, rel=1e-9)
    assert ends(pricer)[1] == pytest.approx(3 / R, rel=1e-9)


def test_tdma_queues_uploads_and_charges_the_wait_as_idle():
    R = RATE_1MHZ_20DB / 1e6
    pricer = make_pricer(access="tdma", idle_power_w=0.5)
    pricer.price_phase(upload_phase({0: 1e6, 1: 2e6}))
    assert ends(pricer) == pytest.approx({0: 1 / R, 1: 3 / R}, rel=1e-9)
    idle = [e for e in pricer.events if e.kind == "idle"]
    assert [e.client for e in idle] == [1]
    assert idle[0].energy_j == pytest.approx(0.5 * 1 / R, rel=1e-9)


def test_compute_time_and_energy_in_the_engine():
    # 1 sample at 1e6 cycles/sample... use 1000 samples -> 1e9 cycles at 1 GHz: 1 s and 0.1 J.
    pricer = make_pricer(num_clients=1, cpu_ghz=1.0, kappa=1e-28)
    pricer.price_phase(PhaseRecord(0, 0, {0: [Activity("compute", "train", samples=1000)]}))
    assert pricer.now == pytest.approx(1.0)
    assert pricer.ledger.by_category()["compute"] == pytest.approx(0.1)


def test_deadline_cuts_a_late_client_and_charges_the_energy_it_spent():
    # Client 0 computes 0.5 s, client 1 would need 2 s; deadline 1 s.
    pricer = make_pricer(num_clients=2, deadline_s=1.0, cpu_ghz=1.0, kappa=1e-28)
    chains = {0: [Activity("compute", "train", samples=500)], 1: [Activity("compute", "train", samples=2000)]}
    for chain in chains.values():
        chain.append(Activity("upload", "upload", bits=1e3))
    done = pricer.price_phase(PhaseRecord(0, 0, chains))
    assert done == {0: True, 1: False}
    cut = [e for e in pricer.events if e.status == "cut"]
    assert [(e.client, e.kind) for e in cut] == [(1, "compute")]
    # It computed for exactly 1 s (until the deadline): 1e9 cycles -> 0.1 J.
    assert cut[0].energy_j == pytest.approx(0.1, rel=1e-9)
    assert pricer.now == pytest.approx(1.0)


# -- whole runs ------------------------------------------------------------------------
def small_scenario(**sections):
    raw = {
        "run": {"seed": 3, "rounds": 4},
        "data": {"name": "synthetic", "num_clients": 8, "samples_per_client": 40},
        "algorithm": {"name": "fedavg", "local_steps": 3, "clients_per_round": 4, "lr": 0.05, "batch_size": 8},
        "network": {"snr_db": 10.0, "bandwidth_mhz": 2.0},
        "devices": {"cycles_per_sample": 2e4},
    }
    for name, values in sections.items():
        raw.setdefault(name, {}).update(values)
    return scenario_from_dict(raw)


@pytest.mark.parametrize("access", ["dedicated", "fdma", "tdma"])
@pytest.mark.parametrize("fading", ["none", "rayleigh"])
def test_ledger_totals_equal_event_log_sums(access, fading):
    scenario = small_scenario(network={"access": access, "fading": fading}, devices={"idle_power_w": 0.05})
    sim = Simulation(scenario)
    result = sim.run(progress=False)
    ledger = sim.pricer.ledger.by_category()
    for category, total in ledger.items():
        from_events = sum(e.energy_j for e in result.events if e.category == category)
        assert total == pytest.approx(from_events, rel=1e-12, abs=1e-15)
    assert result.metrics[-1]["energy_j"] == pytest.approx(sum(ledger.values()), rel=1e-12)
    per_client = sum(row["energy_j"] for row in result.clients)
    assert per_client == pytest.approx(sum(ledger.values()), rel=1e-12)


def test_total_energy_equals_the_drdm_paper_formula_for_identical_clients():
    """E = S*tau*sum_i E_p + S*sum_i E_t (DRDM eq. 18), fixed SNR, no fading, same devices."""
    S, tau, m, batch = 5, 4, 3, 8
    snr_db, bandwidth_hz, cycles_per_sample, f, kappa = 7.0, 2e6, 3e4, 1.5e9, 1e-28
    scenario = small_scenario(
        run={"rounds": S},
        algorithm={"local_steps": tau, "clients_per_round": m, "batch_size": batch},
        network={"snr_db": snr_db, "bandwidth_mhz": bandwidth_hz / 1e6, "access": "dedicated", "fading": "none"},
        devices={
            "cycles_per_sample": cycles_per_sample,
            "cpu_ghz": f / 1e9,
            "kappa": kappa,
            "rx_power_w": 0.0,
            "idle_power_w": 0.0,
            "tx_power_dbm": 23.0,
        },
    )
    sim = Simulation(scenario)
    sim.run(progress=False)
    processing_per_step = kappa * (cycles_per_sample * batch) * f**2  # E_p
    model_bits = sim.model.dim * 32
    transmission_per_round = 10 ** (23 / 10) / 1e3 * model_bits / (bandwidth_hz * math.log2(1 + 10 ** (snr_db / 10)))
    expected = drdm_total_energy_j(S, tau, np.full(m, processing_per_step), np.full(m, transmission_per_round))
    assert sim.pricer.ledger.total() == pytest.approx(expected, rel=1e-12)


class RecordingFedAvg(FedAvg):
    """FedAvg that remembers what each round's upload reported."""

    def round(self, r):
        self.trace = []
        rounds = super().round(r)
        reply = None
        while True:
            try:
                op = rounds.send(reply)
            except StopIteration:
                return
            reply = yield op
            self.trace.append((op, reply))


def test_deadline_late_clients_are_not_aggregated_but_their_energy_counts():
    # Half the clients are slow (100 kHz CPU): 2 steps x 4 samples x 1e4 cycles = 0.8 s > 0.5 s.
    scenario = small_scenario(
        run={"rounds": 1},
        data={"num_clients": 6},
        algorithm={"clients_per_round": 6, "local_steps": 2, "batch_size": 4, "fedavg": {"weighting": "uniform"}},
        network={"deadline_s": 0.5},
        devices={
            "cpu_ghz": 1.0,
            "cycles_per_sample": 1e4,
            "classes": [{"name": "slow", "share": 0.5, "cpu_ghz": 0.0001}],
        },
    )
    sim = Simulation(scenario)
    sim.algorithm = RecordingFedAvg(sim.context)
    start = sim.algorithm.w.clone()
    result = sim.run(progress=False)
    slow = np.array([c == "slow" for c in sim.population.device_class])
    train = next(reply for op, reply in sim.algorithm.trace if type(op).__name__ == "Train")
    arrived = next(reply for op, reply in sim.algorithm.trace if type(op).__name__ == "Upload")
    assert slow.sum() == 3
    np.testing.assert_array_equal(arrived, ~slow)  # clients are 0..5 in order
    expected = train.params[arrived].mean(dim=0)
    assert torch.allclose(sim.algorithm.w, expected)
    assert not torch.allclose(sim.algorithm.w, start)
    ledger = sim.pricer.ledger.per_client()
    assert np.all(ledger[slow, 0] > 0)  # slow clients spent compute energy until the cut
    cut_clients = {e.client for e in result.events if e.status == "cut"}
    assert cut_clients == set(np.flatnonzero(slow))
    assert result.metrics[0]["uploads_missed"] == 3
    assert result.metrics[0]["sim_time_s"] == pytest.approx(0.5)


def test_ideal_engine_is_free_and_learns_the_same_as_simpy_without_deadline():
    simpy_run = Simulation(small_scenario()).run(progress=False)
    ideal_run = Simulation(small_scenario(run={"engine": "ideal"})).run(progress=False)
    assert ideal_run.metrics[-1]["energy_j"] == 0.0 and ideal_run.metrics[-1]["sim_time_s"] == 0.0
    assert simpy_run.metrics[-1]["energy_j"] > 0
    for a, b in zip(simpy_run.metrics, ideal_run.metrics):
        assert a["acc_mean"] == b["acc_mean"] and a["loss"] == b["loss"]


def test_outage_loses_uploads_below_the_threshold():
    scenario = small_scenario(run={"rounds": 3}, network={"fading": "rayleigh", "outage_snr_db": 10.0})
    result = Simulation(scenario).run(progress=False)
    lost = [e for e in result.events if e.status == "lost"]
    assert lost, "with mean SNR = threshold, about 63% of Rayleigh uploads are in outage"
    assert sum(r["uploads_missed"] for r in result.metrics) == len(lost)
    assert all(e.energy_j > 0 for e in lost)


def test_link_budget_mode_worked_example():
    """DESIGN.md: 200 m, 10 dBm, 1 MHz -> 7.38 Mbit/s; 1 M-parameter fp32 update: 4.34 s."""
    network = NetworkSection(distance_m=200.0, bandwidth_mhz=1.0)
    devices = DevicesSection(tx_power_dbm=10.0, cycles_per_sample=1.0)
    population = build_population(network, devices, 1, 1.0, 1.0, seed=0)
    assert population.uplink[0].rate_bps(1e6) == pytest.approx(7.38e6, rel=2e-3)
    params = NetworkParams(1e6, 1e6, "dedicated", "none", 1.0, 1.0, 0.0, None, None, 0.0)
    pricer = SimPyPricer(params, population, seed=0)
    pricer.price_phase(upload_phase({0: 32e6}))
    assert pricer.now == pytest.approx(4.34, rel=2e-3)
    assert pricer.ledger.total() == pytest.approx(0.0434, rel=3e-3)
