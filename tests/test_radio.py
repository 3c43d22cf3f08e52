"""Rate adaptation, block fading, packet errors and ARQ, access latency and radio tails, against
closed forms (numerical integration over the Rayleigh law with scipy, geometric ARQ) and hand
timelines."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import integrate

from channel import CQI_EFFICIENCY, CQI_SNR_DB, link_rate_bps, mcs_spectral_efficiency
from edgefl.deployment import build_population, network_params
from edgefl.scenario import ScenarioError, scenario_from_dict
from edgefl.sim import Activity, PhaseRecord, SimPyPricer
from edgefl.sim.components import Stragglers
from edgefl.sim.devices import DeviceState
from edgefl.sim.physics import PhasePhysics

B = 1e6  # Hz


def world(num_clients=1, devices=None, **network):
    s = scenario_from_dict(
        {
            "data": {"num_clients": max(num_clients, 2)},
            "algorithm": {"clients_per_round": 1},
            "network": {"bandwidth_mhz": B / 1e6, **network},
            "devices": {
                "cpu_ghz": 1.0,
                "cycles_per_sample": 1e6,
                "idle_power_w": 0.0,
                "rx_power_w": 0.0,
                **(devices or {}),
            },
        }
    )
    return network_params(s.network), build_population(s.network, s.devices, max(num_clients, 2), 1.0, 1.0, seed=0)


def uploads(network, population, clients, bits, phases, seed=0):
    """Plans ``phases`` phases of one upload per client; returns the steps, all phases together."""
    physics = PhasePhysics(network, population, np.random.default_rng(seed))
    chains = {c: [Activity("upload", "upload", bits=bits)] for c in clients}
    steps = []
    for _ in range(phases):
        plans = physics.plan(PhaseRecord(0, 0, chains), sorted(chains))
        steps.extend(plans[c][0] for c in sorted(chains))
    return steps


# -- rate adaptation ---------------------------------------------------------------------------
def test_cqi_table_lookup_by_hand():
    snr_db = np.array([-10.0, -6.7, 0.0, 0.2, 22.69, 22.7, 40.0])
    got = mcs_spectral_efficiency(10 ** (snr_db / 10))
    np.testing.assert_array_equal(got, [0.0, 0.1523, 0.3770, 0.6016, 5.1152, 5.5547, 5.5547])
    assert len(CQI_EFFICIENCY) == len(CQI_SNR_DB) == 15


def test_cqi_table_lookup_is_the_highest_entry_reached_at_every_snr():
    """One look-up in the table after a 0 (channel.mcs) gives the entry that the count of thresholds reached names:
    below, at, between and above the thresholds, 0 and inf, arrays of any shape, a scalar, a table given as lists."""
    thresholds = 10 ** (np.array(CQI_SNR_DB) / 10)
    rng = np.random.default_rng(3)
    snr = np.concatenate([[0.0, np.inf], thresholds, np.nextafter(thresholds, 0), 10 ** rng.uniform(-2, 3, 500)])
    reached = np.searchsorted(thresholds, snr, side="right")  # thresholds at or below each SNR
    expected = np.where(reached > 0, np.array(CQI_EFFICIENCY)[np.maximum(reached - 1, 0)], 0.0)
    np.testing.assert_array_equal(mcs_spectral_efficiency(snr), expected)
    np.testing.assert_array_equal(mcs_spectral_efficiency(snr.reshape(-1, 2)), expected.reshape(-1, 2))
    np.testing.assert_array_equal(
        mcs_spectral_efficiency(snr, list(CQI_SNR_DB), [float(e) for e in CQI_EFFICIENCY]), expected
    )
    assert mcs_spectral_efficiency(float(thresholds[4])) == CQI_EFFICIENCY[4]
    assert mcs_spectral_efficiency(0.0) == 0.0 and isinstance(mcs_spectral_efficiency(0.0), float)


def test_shannon_cap_and_mcs_rate_by_hand():
    # 20 dB over 1 MHz: log2(101) = 6.658 bit/s/Hz, capped at 5.55; the CQI table gives 4.5234 (18.7 dB)
    assert link_rate_bps(B, 100.0, "shannon") == pytest.approx(6.658e6, rel=1e-4)
    assert link_rate_bps(B, 100.0, "shannon", max_spectral_efficiency=5.55) == pytest.approx(5.55e6)
    assert link_rate_bps(B, 100.0, "mcs") == pytest.approx(4.5234e6)


def test_mcs_table_errors_name_the_field():
    with pytest.raises(ScenarioError, match="network.mcs_table"):
        scenario_from_dict({"network": {"rate": "mcs", "mcs_table": [[5.0, 2.0], [3.0, 1.0]]}})
    with pytest.raises(ScenarioError, match="mcs_table is used only with"):
        scenario_from_dict({"network": {"mcs_table": [[5.0, 2.0]]}})


def expected_mcs_airtime(bits, mean_snr, nominal_rate):
    """E[airtime] of one attempt under Rayleigh (SNR ~ Exp(mean)) with the CQI table: b / (B se_k)
    over each CQI interval, and the nominal airtime b / R(mean SNR) in outage. scipy.integrate over
    the exponential density."""
    thresholds = [10 ** (t / 10) for t in CQI_SNR_DB] + [math.inf]
    density = lambda x: math.exp(-x / mean_snr) / mean_snr  # noqa: E731
    total = integrate.quad(density, 0, thresholds[0])[0] * bits / nominal_rate  # outage
    for k, eff in enumerate(CQI_EFFICIENCY):
        p = integrate.quad(density, thresholds[k], thresholds[k + 1])[0]
        total += p * bits / (B * eff)
    return total


@pytest.mark.parametrize("snr_db", [5.0, 15.0])
def test_mcs_rayleigh_mean_upload_energy_matches_the_integral(snr_db):
    network, population = world(num_clients=1000, snr_db=snr_db, rate="mcs", fading="rayleigh")
    steps = uploads(network, population, range(1000), bits=1e5, phases=100)  # 1e5 draws
    airtime = np.array([s.duration_s for s in steps])
    assert np.isfinite(airtime).all()
    mean_snr = 10 ** (snr_db / 10)
    nominal = link_rate_bps(B, mean_snr, "mcs")
    want = expected_mcs_airtime(1e5, mean_snr, nominal)
    tx_power_w = population.tx_power_w[0]
    assert tx_power_w * airtime.mean() == pytest.approx(tx_power_w * want, rel=0.02)


def test_block_fading_makes_the_shannon_rayleigh_mean_finite_and_renewal_exact():
    """A message of many coherence blocks sends at the mean rate E[R(g)]: airtime ≈ b / E[R]."""
    snr = 100.0
    network, population = world(num_clients=500, snr_db=20.0, fading="rayleigh", coherence_s=1e-3)
    mean_rate = integrate.quad(lambda g: B * math.log2(1 + snr * g) * math.exp(-g), 0, math.inf)[0]
    bits = 300 * mean_rate * 1e-3  # ~300 blocks per message
    steps = uploads(network, population, range(500), bits=bits, phases=4)
    airtime = np.array([s.duration_s for s in steps])
    assert airtime.mean() == pytest.approx(bits / mean_rate, rel=0.02)
    assert airtime.max() < 2 * bits / mean_rate  # no heavy tail


# -- packet errors and ARQ ---------------------------------------------------------------------
def test_rayleigh_packet_error_rate_matches_the_closed_form():
    network, population = world(num_clients=1000, snr_db=10.0, fading="rayleigh", outage_snr_db=5.0)
    steps = uploads(network, population, range(1000), bits=1e4, phases=200)  # 2e5 attempts
    lost = np.mean([s.lost for s in steps])
    q = 1 - math.exp(-(10**0.5) / 10.0)  # 1 - exp(-theta / mean SNR) = 0.2711
    assert lost == pytest.approx(q, rel=0.01)
    rate = B * math.log2(1 + 10.0)  # fixed rate of the mean SNR, lost or not
    assert {round(s.duration_s * rate / 1e4, 9) for s in steps} == {1.0}


def test_arq_mean_attempts_is_the_truncated_geometric_mean():
    retransmissions = 3
    network, population = world(
        num_clients=1000, snr_db=10.0, fading="rayleigh", outage_snr_db=8.0, max_retransmissions=retransmissions
    )
    steps = uploads(network, population, range(1000), bits=1e4, phases=100)
    q = 1 - math.exp(-(10**0.8) / 10.0)
    attempts = 1 + retransmissions
    mean_attempts = (1 - q**attempts) / (1 - q)
    assert np.mean([s.attempts for s in steps]) == pytest.approx(mean_attempts, rel=0.02)
    assert np.mean([s.lost for s in steps]) == pytest.approx(q**attempts, rel=0.05)
    per_attempt = 1e4 / (B * math.log2(1 + 10.0))
    assert all(s.duration_s == pytest.approx(s.attempts * per_attempt, rel=1e-12) for s in steps)


def test_a_lost_upload_is_charged_every_attempt_and_does_not_arrive():
    # no fading, mean SNR 10 dB below a 12 dB threshold: every attempt fails
    network, population = world(snr_db=10.0, outage_snr_db=12.0, max_retransmissions=2)
    pricer = SimPyPricer(network, population, 0)
    completed = pricer.price_phase(PhaseRecord(0, 0, {0: [Activity("upload", "upload", bits=1e4)]}))
    assert completed == {0: False}
    (event,) = pricer.events
    assert event.status == "lost"
    assert event.end_s == pytest.approx(3 * 1e4 / (B * math.log2(11.0)), rel=1e-12)


def test_fdma_packet_errors_are_judged_on_the_share_the_client_holds():
    """Link budget: the SNR over B/2 is 3 dB above the SNR over B. With the threshold between them,
    the first of two simultaneous uploads (alone on the band when it starts) fails, the second
    (starting on a half band) gets through."""
    _, population = world(num_clients=2, distance_m=400.0, access="fdma")
    threshold_db = 10 * math.log10(population.uplink[0].snr_linear(B)) + 1.5  # B/2 is +3.01 dB
    network, population = world(num_clients=2, distance_m=400.0, access="fdma", outage_snr_db=threshold_db)
    threshold = 10 ** (threshold_db / 10)
    assert population.uplink[0].snr_linear(B) < threshold < population.uplink[0].snr_linear(B / 2)
    pricer = SimPyPricer(network, population, 0)
    completed = pricer.price_phase(PhaseRecord(0, 0, {c: [Activity("upload", "upload", bits=1e4)] for c in (0, 1)}))
    assert completed == {0: False, 1: True}


def test_a_download_lost_in_outage_ends_the_chain():
    network, population = world(snr_db=-10.0, rate="mcs")  # below the lowest CQI entry: outage
    pricer = SimPyPricer(network, population, 0)
    completed = pricer.price_phase(
        PhaseRecord(
            0,
            0,
            {
                0: [
                    Activity("download", "broadcast", bits=1e4),
                    Activity("compute", "train", samples=10.0),
                    Activity("upload", "upload", bits=1e4),
                ]
            },
        )
    )
    assert completed == {0: False}
    # the compute and the upload after the lost download are not run, not logged, not charged
    assert [(e.kind, e.status) for e in pricer.events] == [("download", "lost")]
    assert pricer.ledger.by_category()["compute"] == pricer.ledger.by_category()["uplink"] == 0.0


# -- per-message overhead --------------------------------------------------------------------
def test_access_latency_is_a_promotion_before_every_message_from_an_idle_radio():
    """No tail: the radio is idle before each message, which waits the access latency first, charged at the
    promotion power (by default the idle power), in its own category (promotion)."""
    network, population = world(snr_db=20.0, access_latency_s=0.05, devices={"idle_power_w": 0.2})
    pricer = SimPyPricer(network, population, 0)
    chain = [
        Activity("download", "broadcast", bits=1e4),
        Activity("compute", "train", samples=10.0),
        Activity("upload", "upload", bits=1e4),
    ]
    pricer.price_phase(PhaseRecord(0, 0, {0: chain}))
    rate = B * math.log2(101.0)
    end = 0.05 + 1e4 / rate + 0.01 + 0.05 + 1e4 / rate  # 10 samples x 1e6 cycles at 1 GHz = 10 ms
    assert pricer.now == pytest.approx(end, rel=1e-12)
    promotions = [e for e in pricer.events if e.kind == "promotion"]
    assert [(e.label, e.category, e.energy_j) for e in promotions] == [
        ("broadcast", "promotion", pytest.approx(0.2 * 0.05, rel=1e-12)),
        ("upload", "promotion", pytest.approx(0.2 * 0.05, rel=1e-12)),
    ]
    assert pricer.ledger.by_category()["idle"] == 0.0
    network, population = world(
        snr_db=20.0, access_latency_s=0.05, devices={"idle_power_w": 0.2, "promotion_power_w": 1.2}
    )
    pricer = SimPyPricer(network, population, 0)
    pricer.price_phase(PhaseRecord(0, 0, {0: chain}))
    assert sum(e.energy_j for e in pricer.events if e.kind == "promotion") == pytest.approx(2 * 1.2 * 0.05, rel=1e-12)


def test_radio_tail_after_each_message_until_the_next_one_starts():
    network, population = world(snr_db=20.0, devices={"tail_s": 0.5, "tail_power_w": 1.0})
    pricer = SimPyPricer(network, population, 0)
    chain = [
        Activity("download", "broadcast", bits=1e4),
        Activity("compute", "train", samples=100.0),
        Activity("upload", "upload", bits=1e4),
    ]
    pricer.price_phase(PhaseRecord(0, 0, {0: chain}))
    pricer.finish()  # the run ends: the upload's tail, still running, is charged in full
    tails = [e for e in pricer.events if e.kind == "tail"]
    # the download's tail is cut after the 0.1 s computation by the upload; the upload's runs out
    assert [round(e.end_s - e.start_s, 12) for e in tails] == [0.1, 0.5]
    # a tail is its own category, its label the message it follows; uplink is the transmission only
    assert [(e.category, e.label) for e in tails] == [("tail", "broadcast"), ("tail", "upload")]
    radio_s = 1e4 / (B * math.log2(101.0))
    tx_power_w = population.tx_power_w[0]  # 23 dBm
    assert pricer.ledger.by_category()["uplink"] == pytest.approx(tx_power_w * radio_s, rel=1e-9)
    assert pricer.ledger.by_category()["tail"] == pytest.approx(1.0 * (0.1 + 0.5), rel=1e-9)


def test_who_can_lose_a_message_decides_whether_repricing_is_exact():
    from edgefl.sim import can_change_participation

    def network(**keys):
        return world(**keys)[0]

    assert not can_change_participation(network(fading="rayleigh", max_retransmissions=3, access_latency_s=0.1))
    assert can_change_participation(network(outage_snr_db=3.0))
    assert can_change_participation(network(rate="mcs"))  # an outage attempt can be lost
    assert not can_change_participation(network(rate="mcs", fading="rayleigh", coherence_s=0.01))  # waited out


# -- downlink modes ----------------------------------------------------------------------------
def downloads(network, population, bits_by_client):
    pricer = SimPyPricer(network, population, 0)
    pricer.price_phase(
        PhaseRecord(0, 0, {c: [Activity("download", "broadcast", bits=b)] for c, b in bits_by_client.items()})
    )
    return {e.client: e.end_s for e in pricer.events}


def test_downlink_modes_by_hand():
    """Two receivers at 100 m and 400 m (link budget): broadcast, each at its own rate; multicast, both
    at the far one's; unicast, each gets B/2 at P/2, the same SNR on half the band."""
    keys = dict(num_clients=2, cell_radius_m=500.0, min_distance_m=50.0)
    _, population = world(**keys)
    rate = [B * math.log2(1 + population.downlink[c].snr_linear(B)) for c in (0, 1)]
    bits = 1e5
    got = downloads(*world(**keys), {0: bits, 1: bits})
    assert got == pytest.approx({c: bits / rate[c] for c in (0, 1)}, rel=1e-12)
    got = downloads(*world(downlink="multicast", **keys), {0: bits, 1: bits})
    assert got == pytest.approx({c: bits / min(rate) for c in (0, 1)}, rel=1e-12)
    got = downloads(*world(downlink="unicast", **keys), {0: bits, 1: bits})
    assert got == pytest.approx({c: bits / (rate[c] / 2) for c in (0, 1)}, rel=1e-12)


def test_multicast_with_block_fading_is_refused_with_a_clear_error():
    with pytest.raises(ScenarioError, match="multicast"):
        world(downlink="multicast", fading="rayleigh", coherence_s=0.01)


# -- stragglers --------------------------------------------------------------------------------
def compute_times(slowdown, rounds=400, **keys):
    network, population = world(num_clients=50, snr_db=20.0, devices={"slowdown": slowdown, **keys})
    physics = PhasePhysics(network, population, np.random.default_rng(0))
    stragglers = Stragglers(population, seed=1)  # the component stretches the planned compute steps
    stragglers.attach(SimpleNamespace(devices=DeviceState.of(population)))  # (what it reads of the core)
    chains = {c: [Activity("compute", "train", samples=100.0)] for c in range(50)}
    times = []
    for r in range(rounds):
        phase = PhaseRecord(r, 0, chains)
        plans = physics.plan(phase, list(range(50)))
        assert stragglers.phase_start(phase, list(range(50)), plans) == set()
        times.extend(plans[c][0].duration_s for c in range(50))
    return np.array(times) / 0.1  # nominal: 100 samples x 1e6 cycles at 1 GHz


def test_shifted_exponential_straggling_has_the_right_mean_and_floor():
    factor = compute_times("exponential", slowdown_mean=0.5)  # 2e4 draws
    assert factor.min() >= 1.0
    assert factor.mean() == pytest.approx(1.5, rel=0.02)


def test_lognormal_straggling_has_the_right_median_and_spread():
    factor = compute_times("lognormal", slowdown_sigma=0.4)
    assert np.median(factor) == pytest.approx(1.0, rel=0.02)
    assert np.log(factor).std() == pytest.approx(0.4, rel=0.02)


def test_a_straggler_factor_is_drawn_once_per_round_and_a_deadline_cuts_a_changing_subset():
    network, population = world(
        num_clients=20, snr_db=20.0, deadline_s=0.15, devices={"slowdown": "exponential", "slowdown_mean": 0.5}
    )
    pricer = SimPyPricer(network, population, 0)
    cut_sets = []
    for r in range(5):
        chains = {
            c: [Activity("compute", "train", samples=50.0), Activity("compute", "train", samples=50.0)]
            for c in range(20)
        }
        completed = pricer.price_phase(PhaseRecord(r, 0, chains))
        cut_sets.append(frozenset(c for c, ok in completed.items() if not ok))
    assert len(set(cut_sets)) > 1 and all(cut_sets)
    # within a round both computations of a client took the same stretched time
    by_client = {}
    for e in pricer.events:
        if e.round == 0 and e.status == "ok":
            by_client.setdefault(e.client, []).append(e.end_s - e.start_s)
    assert any(len(v) == 2 for v in by_client.values())
    assert all(v[0] == pytest.approx(v[1], rel=1e-12) for v in by_client.values() if len(v) == 2)
    cut = [e for e in pricer.events if e.status == "cut" and e.kind == "compute"]
    for e in cut:  # cycles done at the slowed speed: fewer than at f
        assert e.cycles < (e.end_s - e.start_s) * population.cpu_hz[e.client]


def test_mcs_outage_probability_under_rayleigh_matches_the_closed_form():
    """An attempt is in outage when SNR·g is below the lowest CQI threshold (-6.7 dB):
    P = 1 - exp(-theta / mean SNR); 1e5 single-attempt uploads, lost = in outage."""
    network, population = world(num_clients=1000, snr_db=0.0, rate="mcs", fading="rayleigh")
    steps = uploads(network, population, range(1000), bits=1e4, phases=100)
    p_outage = 1 - math.exp(-(10 ** (-0.67)) / 1.0)  # 0.1936
    assert np.mean([s.lost for s in steps]) == pytest.approx(p_outage, rel=0.01)


def test_fdma_block_fading_sends_at_the_mean_rate_of_its_share():
    """FDMA with coherence blocks: a lone upload of ~300 blocks takes bits / E[R(B)]; two starting
    together share the band, each at E[R(B/2)] = E[R(B)]/2 (configured SNR: the same per Hz)."""
    snr = 100.0
    mean_rate = integrate.quad(lambda g: B * math.log2(1 + snr * g) * math.exp(-g), 0, math.inf)[0]
    bits = 300 * mean_rate * 1e-3
    network, population = world(num_clients=400, snr_db=20.0, fading="rayleigh", access="fdma", coherence_s=1e-3)
    alone, pair = [], []
    for k in range(40):
        pricer = SimPyPricer(network, population, k)
        pricer.price_phase(PhaseRecord(0, 0, {4 * k: [Activity("upload", "upload", bits=bits)]}))
        alone.append(pricer.now)
        pricer = SimPyPricer(network, population, 1000 + k)
        pricer.price_phase(
            PhaseRecord(0, 0, {c: [Activity("upload", "upload", bits=bits)] for c in (4 * k + 1, 4 * k + 2)})
        )
        pair.extend(e.end_s for e in pricer.events)
    assert np.mean(alone) == pytest.approx(bits / mean_rate, rel=0.02)
    assert np.mean(pair) == pytest.approx(2 * bits / mean_rate, rel=0.03)
