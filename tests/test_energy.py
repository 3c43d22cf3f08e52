"""Tests of energy/: every formula against a hand calculation."""

import math

import numpy as np
import pytest

from energy import (
    BatteryBank,
    EnergyLedger,
    compute_energy_j,
    compute_time_s,
    cycles_per_step,
    downlink_energy_j,
    drdm_total_energy_j,
    idle_energy_j,
    uplink_energy_j,
)

# ---------------------------------------------------------------- compute


def test_kappa_1e9_cycles_at_1ghz_is_0_1_j_and_1_s():
    assert compute_energy_j(1e9, 1e9, kappa=1e-28) == pytest.approx(0.1)
    assert compute_time_s(1e9, 1e9) == pytest.approx(1.0)


def test_compute_energy_by_hand():
    # κ·C·f² = 1e-28 · 2e8 · (2e9)² = 0.08 J; static 0.5 W over 2e8/2e9 = 0.1 s = 0.05 J
    assert compute_energy_j(2e8, 2e9) == pytest.approx(0.08)
    assert compute_energy_j(2e8, 2e9, static_power_w=0.5) == pytest.approx(0.13)
    assert compute_energy_j(0.0, 1e9) == 0.0
    np.testing.assert_allclose(compute_energy_j(np.array([1e9, 2e9]), 1e9), [0.1, 0.2])
    with pytest.raises(ValueError):
        compute_time_s(1e9, 0.0)


def test_worked_example_one_pass_500_samples():
    """500 samples at 2e4 cycles/sample and 1 GHz: 10 ms and 1 mJ."""
    c = cycles_per_step(500, cycles_per_sample=2e4)
    assert c == pytest.approx(1e7)
    assert compute_time_s(c, 1e9) == pytest.approx(0.010)
    assert compute_energy_j(c, 1e9) == pytest.approx(1e-3)


def test_worked_example_transmission_dominates_by_about_40x():
    # 43.4 mJ upload (tests/test_channel.py::test_worked_example_from_design) vs 1 mJ compute
    from channel import Link, dbm_to_w, log_distance_db, transmission_time_s

    p = dbm_to_w(10.0)
    t = transmission_time_s(32e6, Link.from_budget(p, log_distance_db(200.0)).rate_bps(1e6))
    e_up = uplink_energy_j(t, p)
    e_cmp = compute_energy_j(cycles_per_step(500, cycles_per_sample=2e4), 1e9)
    assert e_up == pytest.approx(0.0434, abs=5e-4)
    assert 40 <= e_up / e_cmp <= 45


def test_cycles_per_step():
    assert cycles_per_step(32, cycles_per_sample=1e4) == pytest.approx(3.2e5)
    assert cycles_per_step(32, flops_per_sample=1e6) == pytest.approx(3.2e7)
    assert cycles_per_step(32, flops_per_sample=1e6, cycles_per_flop=0.5) == pytest.approx(1.6e7)
    # cycles_per_sample wins when both are given
    assert cycles_per_step(10, flops_per_sample=1e6, cycles_per_sample=7.0) == pytest.approx(70.0)
    with pytest.raises(ValueError):
        cycles_per_step(32)
    with pytest.raises(TypeError):
        cycles_per_step(32, 1e6)  # keyword-only


# ---------------------------------------------------------------- radio / idle


def test_radio_and_idle_energy_by_hand():
    assert uplink_energy_j(2.0, 0.2) == pytest.approx(0.4)
    assert uplink_energy_j(2.0, 0.2, circuit_power_w=0.05) == pytest.approx(0.5)
    assert downlink_energy_j(3.0, 0.1) == pytest.approx(0.3)
    assert idle_energy_j(10.0, 0.01) == pytest.approx(0.1)
    np.testing.assert_allclose(uplink_energy_j(np.array([1.0, 2.0]), 0.1), [0.1, 0.2])
    assert uplink_energy_j(math.inf, 0.0) == 0.0
    assert uplink_energy_j(math.inf, 0.1) == math.inf
    with pytest.raises(ValueError):
        idle_energy_j(-1.0, 0.1)


def test_drdm_transmission_energy_composes_from_channel():
    # E^t of eq. 18 (DRDM paper, Sec. IV-B.2) as defined here, P·M / (B·log2(1+SNR)):
    # 0.2 W, M = 2·5130·32 bits, 1 MHz, 0 dB
    from channel import db_to_linear, shannon_rate_bps, transmission_time_s

    m_bits = 2 * 5130 * 32
    e_t = uplink_energy_j(transmission_time_s(m_bits, shannon_rate_bps(1e6, db_to_linear(0.0))), 0.2)
    assert e_t == pytest.approx(0.2 * m_bits / (1e6 * 1.0))


# ---------------------------------------------------------------- ledger


def test_ledger_add_and_sums():
    led = EnergyLedger(3)
    led.add(0, "compute", 1.0)
    led.add(0, "uplink", 2.0)
    led.add(1, "uplink", 0.5)
    led.add(2, "idle", 0.25)
    led.add(2, "downlink", 0.125)
    led.add(0, "compute", 1.0)
    led.add(1, "tail", 3.0)
    led.add(1, "promotion", 0.5)
    assert led.by_category() == {
        "compute": 2.0,
        "uplink": 2.5,
        "downlink": 0.125,
        "idle": 0.25,
        "promotion": 0.5,
        "tail": 3.0,
    }
    pc = led.per_client()
    assert pc.shape == (3, 6) and pc.dtype == np.float64
    np.testing.assert_array_equal(pc[0], [2.0, 2.0, 0.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(pc[1], [0.0, 0.5, 0.0, 0.0, 0.5, 3.0])
    np.testing.assert_array_equal(led.client_totals(), [4.0, 4.0, 0.375])
    assert led.total() == pytest.approx(8.375)
    assert led.total() == pytest.approx(sum(led.by_category().values()))
    assert led.total() == pytest.approx(led.client_totals().sum())


def test_ledger_errors():
    led = EnergyLedger(2)
    with pytest.raises(ValueError):
        led.add(0, "radio", 1.0)
    with pytest.raises(ValueError):
        led.add(0, "compute", -1e-9)
    with pytest.raises(ValueError):
        led.add(0, "compute", math.nan)
    with pytest.raises(ValueError):
        led.add(0, "compute", math.inf)
    with pytest.raises(IndexError):
        led.add(2, "compute", 1.0)
    with pytest.raises(IndexError):
        led.add(-1, "compute", 1.0)
    assert led.total() == 0.0


def test_ledger_copy_is_independent_and_per_client_is_a_copy():
    led = EnergyLedger(2)
    led.add(1, "compute", 1.0)
    snap = led.copy()
    led.add(1, "compute", 1.0)
    assert snap.total() == 1.0 and led.total() == 2.0
    led.per_client()[:] = 99.0
    assert led.total() == 2.0


def test_ledger_add_many_and_merge():
    led = EnergyLedger(4)
    led.add_many([0, 2, 2], "uplink", [1.0, 2.0, 3.0])
    led.add_many(np.arange(4), "compute", 0.5)
    np.testing.assert_array_equal(led.per_client()[:, 1], [1.0, 0.0, 5.0, 0.0])
    np.testing.assert_array_equal(led.per_client()[:, 0], [0.5] * 4)
    with pytest.raises(IndexError):
        led.add_many([4], "uplink", 1.0)
    with pytest.raises(ValueError):
        led.add_many([0], "uplink", -1.0)
    other = EnergyLedger(4)
    other.add(3, "idle", 1.0)
    led.merge(other)
    assert led.by_category()["idle"] == 1.0
    with pytest.raises(ValueError):
        led.merge(EnergyLedger(3))


# ---------------------------------------------------------------- DRDM eq. 18


def test_drdm_total_energy_against_hand_sum():
    # S = 10 rounds, τ = 5, participants' E_p = [0.1, 0.2], E_t = [1, 3]
    # E = 10·5·0.3 + 10·4 = 15 + 40 = 55 J
    assert drdm_total_energy_j(10, 5, [0.1, 0.2], [1.0, 3.0]) == pytest.approx(55.0)
    # scalars are the sums ...
    assert drdm_total_energy_j(10, 5, 0.3, 4.0) == pytest.approx(55.0)
    # ... or one participant's value with num_participants
    assert drdm_total_energy_j(10, 5, 0.15, 2.0, num_participants=2) == pytest.approx(55.0)
    # vectorised over a τ grid with its S(τ)
    taus = np.array([5, 10, 20])
    rounds = np.array([100, 60, 40])
    # by hand: 100·5·0.1 + 100 = 150, 60·10·0.1 + 60 = 120, 40·20·0.1 + 40 = 120
    np.testing.assert_allclose(drdm_total_energy_j(rounds, taus, 0.1, 1.0), [150.0, 120.0, 120.0])


def test_ledger_reduces_to_drdm_eq18():
    """Identical clients, fixed SNR, no fading, compute + uplink only: ledger total == eq. 18."""
    from channel import Link, transmission_time_s

    n, m, rounds, tau = 10, 4, 7, 15
    cycles = cycles_per_step(32, cycles_per_sample=2e4)
    e_step = compute_energy_j(cycles, 2e9)
    link = Link.from_snr_db(5.0)
    bits = 2 * 5130 * 32
    e_up = uplink_energy_j(transmission_time_s(bits, link.rate_bps(1e6)), 0.2)

    rng = np.random.default_rng(0)
    led = EnergyLedger(n)
    for _ in range(rounds):
        for c in rng.choice(n, size=m, replace=False):
            for _ in range(tau):
                led.add(c, "compute", e_step)
            led.add(c, "uplink", e_up)
    expected = drdm_total_energy_j(rounds, tau, np.full(m, e_step), np.full(m, e_up))
    assert led.total() == pytest.approx(expected, rel=1e-12)
    assert led.by_category()["compute"] == pytest.approx(rounds * tau * m * e_step)
    assert led.by_category()["uplink"] == pytest.approx(rounds * m * e_up)


# ---------------------------------------------------------------- battery


def test_battery_bank_by_hand():
    bank = BatteryBank([10.0, 10.0, math.inf], reserve_j=[2.0, 2.0, 0.0], harvest_w=[0.5, 0.0, 0.0])
    bank.draw([9.0, 9.0, 1e9])
    np.testing.assert_allclose(bank.level_j, [1.0, 1.0, math.inf])
    assert bank.available().tolist() == [False, False, True]
    assert not BatteryBank([1.0]).empty().any() and BatteryBank([1.0], harvest_w=0.0).available().all()
    np.testing.assert_allclose(bank.seconds_to_reserve(), [2.0, math.inf, 0.0])  # (2 - 1) / 0.5 W
    bank.harvest(4.0)
    np.testing.assert_allclose(bank.level_j, [3.0, 1.0, math.inf])
    bank.harvest(100.0)  # capped at the capacity
    bank.draw([20.0, 0.0, 0.0])  # never below 0
    np.testing.assert_allclose(bank.level_j, [0.0, 1.0, math.inf])
    with pytest.raises(ValueError):
        BatteryBank([1.0], reserve_j=2.0)


def test_a_battery_a_rounding_error_below_its_reserve_is_available_after_its_wait():
    """A level an ulp under the reserve (what drawing and harvesting leave): the wait seconds_to_reserve gives is
    long enough to make the device available. It was (R − L) / h, a few 1e-14 s: below the clock's resolution
    at t = 259 s, so the server's wait for enough devices never moved the clock (a 300-round
    phones-in-a-cell run hung in round 221)."""
    bank = BatteryBank([60.0, 30.0], reserve_j=[6.0, 3.0], harvest_w=[0.02, 0.001])
    bank.level_j = np.nextafter(bank.reserve_j, 0.0)
    assert not bank.available().any()
    wait_s = bank.seconds_to_reserve()
    assert (259.0 + wait_s > 259.0).all()  # moves a clock at 259 s
    bank.harvest(float(wait_s.max()))
    assert bank.available().all()


def test_ledger_changes_counts_every_write_and_no_read():
    """A reader (the Batteries component) draws from the ledger only when ``changes`` moved since it last read."""
    ledger = EnergyLedger(3)
    assert ledger.changes == 0
    ledger.add(0, "compute", 1.0)
    ledger.add_many([1, 2], "uplink", 0.5)
    ledger.add_rows([0, 1], [0, 1], [0.25, 0.25])
    assert ledger.changes == 3
    ledger.client_totals(), ledger.by_category(), ledger.per_client(), ledger.total()
    assert ledger.changes == 3  # reading changes nothing
    other = ledger.copy()
    assert other.changes == 3
    ledger.merge(other)
    ledger.restore(other.per_client())
    assert ledger.changes == 5


def test_ledger_add_rows_reads_by_category_as_after_each_part():
    """add_rows(..., read_after): the readings and the cells equal charging the parts one after another with a
    reading after each (the float sums in the same order: 0.1 + 0.2 then 0.3 differs from 0.1 + (0.2 + 0.3))."""
    clients, codes = [0, 1, 0, 2, 0, 1, 2], [0, 1, 0, 3, 0, 1, 3]
    joules = [0.1, 1e16, 0.2, 0.7, 0.3, 1.0, 1e-3]
    together, parts = EnergyLedger(3), EnergyLedger(3)
    readings = together.add_rows(clients, codes, joules, read_after=[0, 2, 5, 5])
    expected = []
    for start, end in ((0, 0), (0, 2), (2, 5), (5, 5), (5, 7)):
        if end > start:
            parts.add_rows(clients[start:end], codes[start:end], joules[start:end])
        expected.append(parts.by_category())
    assert readings == expected[:4]
    assert together.per_client().tobytes() == parts.per_client().tobytes()
    assert together.add_rows([1], [2], [0.5]) == []  # nothing read


@pytest.mark.parametrize("bad", [float("nan"), -1e-9, [1.0, float("nan")], [0.0, -2.0]])
def test_formulas_refuse_nan_and_negative_inputs(bad):
    with pytest.raises(ValueError, match="must be >= 0"):
        compute_energy_j(bad, 1e9)
    with pytest.raises(ValueError, match="must be >= 0"):
        uplink_energy_j(bad, 0.2)
    with pytest.raises(ValueError, match="must be > 0"):
        compute_energy_j(1e6, np.negative(np.abs(np.asarray(bad, dtype=float))))  # cpu_hz <= 0 or NaN


@pytest.mark.parametrize("efficiency", [0.0, 1.5, float("nan"), [0.5, 0.0]])
def test_uplink_refuses_a_power_amplifier_efficiency_outside_0_1(efficiency):
    with pytest.raises(ValueError, match="pa_efficiency"):
        uplink_energy_j(1.0, 0.2, 1.0, efficiency)


def test_zero_power_for_an_unbounded_time_is_zero_joules_and_inf_passes_the_checks():
    assert uplink_energy_j(float("inf"), 0.0) == 0.0
    assert compute_energy_j(0.0, 1e9) == 0.0


def test_finite_batteries_harvest_and_draw_as_with_the_inf_masks():
    """Every capacity finite: harvest and draw skip the masks for infinite levels, the same numbers as a bank with a
    mains-powered device beside them (which takes the masked path)."""
    rng = np.random.default_rng(7)
    finite = BatteryBank([30.0, 60.0, 5.0], [3.0, 6.0, 0.5], [0.02, 0.0, 0.04])
    masked = BatteryBank([30.0, 60.0, 5.0, math.inf], [3.0, 6.0, 0.5, 0.0], [0.02, 0.0, 0.04, 0.0])
    assert finite._finite and not masked._finite
    for _ in range(500):
        seconds, joules = float(rng.exponential(20.0)), rng.exponential(0.5, size=3) * (rng.random(3) < 0.7)
        finite.harvest(seconds)
        masked.harvest(seconds)
        finite.draw(joules)
        masked.draw(np.append(joules, 1.0))
    for name in ("level_j", "harvested_j", "unpaid_j"):
        assert getattr(finite, name).tobytes() == getattr(masked, name)[:3].tobytes()
    assert finite.unpaid_j.max() > 0 and finite.harvested_j.max() > 0  # (emptied and harvested back)


def test_a_few_devices_drawn_in_floats_as_with_the_arrays(monkeypatch):
    """A draw where only a few devices draw anything (1-3 of 50 at most draws of an asynchronous run) takes each one's
    level in plain floats: the same bytes as the arrays' path (levels, unpaid, harvested), batteries emptied too; a
    negative draw is still refused."""
    import energy.battery as battery

    rng = np.random.default_rng(11)
    capacity = rng.uniform(5.0, 60.0, 50)
    floats, arrays = BatteryBank(capacity, 1.0, 0.01), BatteryBank(capacity, 1.0, 0.01)
    for _ in range(400):
        joules = np.zeros(50)
        drawn = rng.choice(50, size=int(rng.integers(1, battery.FEW_DRAWN + 1)), replace=False)
        joules[drawn] = rng.exponential(2.0, size=len(drawn))
        seconds = float(rng.exponential(5.0))
        floats.harvest(seconds)
        arrays.harvest(seconds)
        floats.draw(joules)
        with monkeypatch.context() as patched:
            patched.setattr(battery, "FEW_DRAWN", -1)  # (every draw through the arrays)
            arrays.draw(joules)
    for name in ("level_j", "harvested_j", "unpaid_j"):
        assert getattr(floats, name).tobytes() == getattr(arrays, name).tobytes()
    assert floats.unpaid_j.max() > 0 and (floats.level_j == 0).any()  # (some emptied on the way)
    joules = np.zeros(50)
    joules[3] = -1.0
    with pytest.raises(ValueError, match=">= 0"):
        floats.draw(joules)


def test_ledger_add_cells_equals_the_arrays_add_at_byte_for_byte():
    """add_cells (a booking's rows in plain floats, each cell read as a float and written back) leaves the same cells
    and readings, bit for bit, as add_rows's arrays (np.add.at): repeated cells accumulate in row order."""
    rng = np.random.default_rng(5)
    n = 300
    clients = rng.integers(0, 4, n).tolist()  # (few clients and categories: many repeated cells)
    codes = rng.integers(0, 3, n).tolist()
    joules = (rng.random(n) * 10.0 ** rng.integers(-9, 4, n)).tolist()
    by_cells, by_arrays = EnergyLedger(4), EnergyLedger(4)
    by_cells.add_cells([(0, 0, 0.1)]), by_arrays.add_rows([0], [0], [0.1])
    read = by_cells.add_cells(list(zip(clients, codes, joules)), [7, 100, 100, 250])
    assert read == by_arrays.add_rows(clients, codes, joules, [7, 100, 100, 250])
    assert by_cells.per_client().tobytes() == by_arrays.per_client().tobytes()
