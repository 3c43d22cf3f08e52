"""Tests of channel/: every formula against a hand calculation."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from channel import (
    Link,
    db_to_linear,
    dbm_to_w,
    draw_shadowing_db,
    fading_gain_exceeded,
    fading_power_gain,
    fdma_bandwidth_hz,
    is_outage,
    linear_to_db,
    log_distance_db,
    noise_power_w,
    payload_bits,
    rayleigh_outage_probability,
    shannon_rate_bps,
    snr_from_link,
    transmission_time_s,
    w_to_dbm,
)

# ---------------------------------------------------------------- units


def test_db_conversions_by_hand():
    assert db_to_linear(20.0) == pytest.approx(100.0)
    assert db_to_linear(-3.0) == pytest.approx(0.501187, rel=1e-5)
    assert linear_to_db(1000.0) == pytest.approx(30.0)
    assert dbm_to_w(30.0) == pytest.approx(1.0)
    assert dbm_to_w(10.0) == pytest.approx(0.01)
    assert dbm_to_w(23.0) == pytest.approx(0.19953, rel=1e-4)
    assert w_to_dbm(1e-3) == pytest.approx(0.0)
    assert linear_to_db(0.0) == -math.inf


def test_conversions_are_vectorised_and_return_floats_for_scalars():
    assert isinstance(db_to_linear(3), float)
    out = dbm_to_w(np.array([0.0, 10.0, 20.0]))
    np.testing.assert_allclose(out, [1e-3, 1e-2, 1e-1])


@given(st.floats(min_value=-200, max_value=200))
def test_db_round_trip(x):
    assert linear_to_db(db_to_linear(x)) == pytest.approx(x, abs=1e-9)
    assert w_to_dbm(dbm_to_w(x)) == pytest.approx(x, abs=1e-9)


# ---------------------------------------------------------------- link budget


def test_noise_minus_174_dbm_per_hz_over_1_mhz_is_minus_114_dbm():
    assert w_to_dbm(noise_power_w(1e6)) == pytest.approx(-114.0)
    # by hand: 10^(-20.4) W/Hz * 1e6 Hz = 10^(-14.4) W
    assert noise_power_w(1e6) == pytest.approx(10**-14.4)
    # noise figure adds in dB
    assert w_to_dbm(noise_power_w(1e6, noise_figure_db=7.0)) == pytest.approx(-107.0)
    assert w_to_dbm(noise_power_w(20e6)) == pytest.approx(-174 + 10 * math.log10(20e6))


def test_path_loss_3gpp_macro_by_hand():
    assert log_distance_db(1000.0) == pytest.approx(128.1)
    assert log_distance_db(100.0) == pytest.approx(128.1 - 37.6)
    assert log_distance_db(200.0) == pytest.approx(128.1 + 37.6 * math.log10(0.2))
    np.testing.assert_allclose(log_distance_db(np.array([1000.0, 10000.0])), [128.1, 165.7])
    with pytest.raises(ValueError):
        log_distance_db(0.0)


def test_snr_from_link_by_hand():
    # 0 dBm, 100 dB loss, 1 MHz: SNR = 0 - 100 - (-114) = 14 dB
    snr = snr_from_link(dbm_to_w(0.0), 100.0, 1e6)
    assert linear_to_db(snr) == pytest.approx(14.0)
    # noise figure and shadowing each subtract their dB
    snr = snr_from_link(dbm_to_w(0.0), 100.0, 1e6, noise_figure_db=5.0, shadowing_db=3.0)
    assert linear_to_db(snr) == pytest.approx(6.0)


def test_worked_example_from_design():
    """d = 200 m, 10 dBm, 1 MHz, NF 0 -> 101.8 dB, 22.2 dB, 7.38 Mbit/s; 32e6 bits -> 4.34 s, 43 mJ."""
    pl = log_distance_db(200.0)
    assert pl == pytest.approx(101.8, abs=0.05)
    p_tx = dbm_to_w(10.0)
    link = Link.from_budget(p_tx, pl)
    snr = link.snr_linear(1e6)
    assert linear_to_db(snr) == pytest.approx(22.2, abs=0.05)
    rate = link.rate_bps(1e6)
    assert rate == pytest.approx(7.38e6, rel=1e-3)
    bits = payload_bits(1_000_000, 32)
    assert bits == 32e6
    t = transmission_time_s(bits, rate)
    assert t == pytest.approx(4.34, abs=0.005)
    assert p_tx * t == pytest.approx(0.043, abs=0.0005)


def test_link_from_snr_db_ignores_bandwidth():
    link = Link.from_snr_db(10.0)
    assert link.mode == "snr"
    assert link.snr_linear(1e6) == pytest.approx(10.0)
    assert link.snr_linear(0.25e6) == pytest.approx(10.0)
    assert link.snr_linear(1e6, fading_gain=0.5) == pytest.approx(5.0)
    # rate scales linearly with bandwidth in this mode
    assert link.rate_bps(2e6) == pytest.approx(2 * link.rate_bps(1e6))
    assert link.rate_bps(1e6) == pytest.approx(1e6 * math.log2(11.0))


@pytest.mark.parametrize("n", [1, 2, 4, 10])
def test_fdma_split_and_link_modes(n):
    total = 20e6
    b = fdma_bandwidth_hz(total, n)
    budget = Link.from_budget(dbm_to_w(23.0), log_distance_db(500.0), noise_figure_db=9.0)
    # noise = N0·B: splitting the band n ways raises the SNR n-fold
    assert budget.snr_linear(b) == pytest.approx(n * budget.snr_linear(total))
    configured = Link.from_snr_db(15.0)
    assert configured.snr_linear(b) == pytest.approx(configured.snr_linear(total))


def test_fdma_vectorised_and_invalid():
    np.testing.assert_allclose(fdma_bandwidth_hz(10e6, np.array([1, 2, 5])), [10e6, 5e6, 2e6])
    with pytest.raises(ValueError):
        fdma_bandwidth_hz(10e6, 0)


def test_link_validation_and_shadowing():
    with pytest.raises(ValueError):
        Link(mode="snr")
    with pytest.raises(ValueError):
        Link(mode="budget", tx_power_w=0.1)
    with pytest.raises(ValueError):
        Link(mode="radio", snr_db=3.0)
    link = Link.from_budget(0.1, 100.0)
    shadowed = link.with_shadowing(8.0)
    assert linear_to_db(shadowed.snr_linear(1e6)) == pytest.approx(linear_to_db(link.snr_linear(1e6)) - 8.0)
    with pytest.raises(ValueError):
        Link.from_snr_db(3.0).with_shadowing(8.0)
    with pytest.raises(Exception):
        link.tx_power_w = 1.0  # frozen


def test_moved_link_is_the_link_from_budget_of_its_fields():
    link = Link.from_budget(0.1, 100.0, 9.0, -3.5, -170.0, interference_w_per_hz=1e-20)
    moved = link.moved(np.float64(0.2), np.float64(107.25))
    assert moved == Link.from_budget(0.2, 107.25, 9.0, -3.5, -170.0)  # (its interference is gone, as from_budget's)
    assert type(moved.tx_power_w) is float and type(moved.path_loss_db) is float
    assert link.path_loss_db == 100.0 and hash(moved) == hash(Link.from_budget(0.2, 107.25, 9.0, -3.5, -170.0))
    with pytest.raises(Exception):
        moved.path_loss_db = 1.0  # frozen
    with pytest.raises(ValueError, match="budget link"):
        Link.from_snr_db(3.0).moved(0.1, 100.0)
    with pytest.raises(ValueError, match="tx_power_w >= 0"):
        link.moved(-1.0, 100.0)


def test_link_vectorised_and_zero_bandwidth():
    link = Link.from_budget(0.1, 110.0)
    b = np.array([1e6, 2e6, 0.0])
    g = np.array([1.0, 0.5, 1.0])
    snr = link.snr_linear(b, g)
    assert snr[1] == pytest.approx(snr[0] / 4)
    assert snr[2] == math.inf
    rate = link.rate_bps(b, g)
    assert rate[2] == 0.0 and np.all(np.isfinite(rate))


def test_draw_shadowing():
    rng = np.random.default_rng(0)
    x = draw_shadowing_db(rng, 8.0, size=200_000)
    assert abs(x.mean()) < 0.1 and x.std() == pytest.approx(8.0, rel=0.01)
    assert draw_shadowing_db(rng, 0.0) == 0.0


# ---------------------------------------------------------------- rate, time, outage


def test_shannon_1mhz_20db_is_6_658_mbps():
    assert shannon_rate_bps(1e6, db_to_linear(20.0)) == pytest.approx(6.658e6, rel=1e-4)
    assert shannon_rate_bps(1e6, 100.0) == pytest.approx(1e6 * math.log2(101.0))


def test_shannon_band_as_a_number_is_checked_and_priced_as_an_array():
    """One band given as a number (checked without arrays) gives the numbers and errors of the same band as an array."""
    snr = np.array([[0.0, 1.0, 100.0, np.inf]])
    for band in (0, 0.0, 1e6, 2.5e5, np.float64(1e6)):
        got = shannon_rate_bps(band, snr)
        want = shannon_rate_bps(np.array(band, dtype=np.float64), snr)
        np.testing.assert_array_equal(got, want)
        assert shannon_rate_bps(band, 100.0) == shannon_rate_bps(np.array(float(band)), 100.0)
    assert shannon_rate_bps(0.0, np.inf) == 0.0  # a link budget over no band: nothing gets through
    for bad in (-1.0, float("nan"), -1):
        with pytest.raises(ValueError, match="bandwidth_hz must be >= 0"):
            shannon_rate_bps(bad, 10.0)


def test_shannon_efficiency_and_gap_by_hand():
    # efficiency scales the rate; the gap divides the SNR
    assert shannon_rate_bps(1e6, 100.0, efficiency=0.8) == pytest.approx(0.8e6 * math.log2(101.0))
    gap_db = 10 * math.log10(2.0)
    assert shannon_rate_bps(1e6, 100.0, snr_gap_db=gap_db) == pytest.approx(1e6 * math.log2(51.0))
    assert shannon_rate_bps(0.0, 100.0) == 0.0
    assert shannon_rate_bps(1e6, 0.0) == 0.0
    with pytest.raises(ValueError):
        shannon_rate_bps(1e6, 10.0, efficiency=1.5)


@given(
    st.floats(min_value=1e3, max_value=1e8),
    st.floats(min_value=0, max_value=1e6),
    st.floats(min_value=0, max_value=1e6),
)
def test_shannon_monotone_in_snr(b, s1, s2):
    lo, hi = sorted((s1, s2))
    assert shannon_rate_bps(b, lo) <= shannon_rate_bps(b, hi)


def test_transmission_time():
    assert transmission_time_s(8e6, 2e6) == pytest.approx(4.0)
    assert transmission_time_s(8e6, 0.0) == math.inf
    assert transmission_time_s(0.0, 0.0) == 0.0
    np.testing.assert_allclose(transmission_time_s(1e6, np.array([1e6, 4e6])), [1.0, 0.25])


def test_payload_bits():
    assert payload_bits(5130) == 5130 * 32
    assert payload_bits(100, bits_per_param=16, header_bits=320) == 1920


def test_outage():
    assert is_outage(db_to_linear(4.9), 5.0) is True
    assert is_outage(db_to_linear(5.1), 5.0) is False
    assert is_outage(1e-9, None) is False
    np.testing.assert_array_equal(is_outage(np.array([1.0, 10.0]), 5.0), [True, False])
    np.testing.assert_array_equal(is_outage(np.array([1.0, 10.0]), None), [False, False])


def test_rayleigh_outage_probability_matches_simulation():
    rng = np.random.default_rng(1)
    mean_snr = db_to_linear(10.0)
    snr = mean_snr * fading_power_gain("rayleigh", rng, size=400_000)
    p_sim = np.mean(is_outage(snr, 5.0))
    p = rayleigh_outage_probability(mean_snr, 5.0)
    # by hand: 1 - exp(-10^0.5 / 10) = 1 - exp(-0.316228) = 0.271107
    assert p == pytest.approx(0.271107, rel=1e-5)
    assert p_sim == pytest.approx(p, abs=3e-3)


# ---------------------------------------------------------------- fading


def test_fading_none():
    rng = np.random.default_rng(0)
    assert fading_power_gain("none", rng) == 1.0
    np.testing.assert_array_equal(fading_power_gain("none", rng, size=3), np.ones(3))


@pytest.mark.parametrize("kind,k", [("rayleigh", 1.0), ("rician", 0.0), ("rician", 1.0), ("rician", 10.0)])
def test_fading_unit_mean(kind, k):
    rng = np.random.default_rng(2)
    g = fading_power_gain(kind, rng, size=400_000, rician_k=k)
    assert np.all(g >= 0)
    assert g.mean() == pytest.approx(1.0, abs=0.01)


def test_rayleigh_is_exp1():
    rng = np.random.default_rng(3)
    g = fading_power_gain("rayleigh", rng, size=20_000)
    assert stats.kstest(g, stats.expon().cdf).pvalue > 0.01
    assert isinstance(fading_power_gain("rayleigh", rng), float)


def test_rician_k0_is_rayleigh_in_distribution():
    rng = np.random.default_rng(4)
    ric = fading_power_gain("rician", rng, size=20_000, rician_k=0.0)
    ray = fading_power_gain("rayleigh", rng, size=20_000)
    assert stats.kstest(ric, stats.expon().cdf).pvalue > 0.01
    assert stats.ks_2samp(ric, ray).pvalue > 0.01


def test_rician_matches_noncentral_chi2():
    # 2(K+1)|h|² ~ noncentral chi² with 2 degrees of freedom and noncentrality 2K
    rng = np.random.default_rng(5)
    k = 3.0
    g = fading_power_gain("rician", rng, size=20_000, rician_k=k)
    assert stats.kstest(2 * (k + 1) * g, stats.ncx2(df=2, nc=2 * k).cdf).pvalue > 0.01


@pytest.mark.parametrize("k", [0.0, 0.1, 1.0, 10.0, 1000.0])
def test_the_gain_one_draw_exceeds_is_the_noncentral_chi2_quantile(k):
    """fading_gain_exceeded (the feasibility check's best link): scipy.stats' ncx2.isf within 1e-6 relative down to
    a probability of 1e-9 (it computes it with scipy.special, a lighter import), -ln p at K = 0; and about that share
    of draws exceed it."""
    for p in (1e-9, 1e-6, 1e-3, 0.1, 0.5):
        expected = -math.log(p) if k == 0 else stats.ncx2.isf(p, 2, 2 * k) / (2 * (k + 1))
        assert fading_gain_exceeded("rician", p, k) == pytest.approx(expected, rel=1e-6)
    draws = fading_power_gain("rician", np.random.default_rng(8), size=200_000, rician_k=k)
    assert np.mean(draws > fading_gain_exceeded("rician", 0.01, k)) == pytest.approx(0.01, abs=0.0015)


def test_rician_large_k_concentrates_near_one():
    rng = np.random.default_rng(6)
    g = fading_power_gain("rician", rng, size=100_000, rician_k=1000.0)
    assert g.mean() == pytest.approx(1.0, abs=0.005)
    assert g.std() < 0.05  # var = (2K+1)/(K+1)² ≈ 2/K
    assert np.quantile(np.abs(g - 1), 0.999) < 0.2


def test_fading_errors_and_reproducibility():
    with pytest.raises(ValueError):
        fading_power_gain("nakagami", np.random.default_rng(0))
    with pytest.raises(ValueError):
        fading_power_gain("rician", np.random.default_rng(0), rician_k=-1.0)
    a = fading_power_gain("rician", np.random.default_rng(7), size=5, rician_k=2.0)
    b = fading_power_gain("rician", np.random.default_rng(7), size=5, rician_k=2.0)
    np.testing.assert_array_equal(a, b)
