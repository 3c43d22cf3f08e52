"""The thermal component and its physics (energy/thermal.py) against closed forms: T(t) under a constant
load (and a numerical solution of the ODE); the time to throttle, −R·C·ln(1 − (T_th − T_amb)/(P·R)); a
throttled computation's time and energy equal the sum of its segments, each at its own frequency."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from edgefl.deployment import build_population, network_params
from edgefl.scenario import scenario_from_dict
from edgefl.sim import Activity, PhaseRecord, SimPyPricer
from edgefl.sim.components import default_components
from edgefl.sim.thermal import Thermal
from energy.thermal import compute_power_w, temperature_c, time_to_temperature_s

AMB, R, C = 25.0, 10.0, 5.0  # °C, K/W, J/K: tau = 50 s
KAPPA, F = 1e-28, 2e9  # computing at 2 GHz: P = kappa f^3 = 0.8 W, steady state 25 + 8 = 33 °C
N = 2


def test_temperature_under_a_constant_load_solves_the_rc_equation():
    p = 0.8
    t = np.array([0.0, 5.0, 50.0, 200.0])
    ode = solve_ivp(lambda _, T: [(p - (T[0] - AMB) / R) / C], (0, 200), [30.0], t_eval=t, rtol=1e-10, atol=1e-10)
    assert temperature_c(t, 30.0, AMB, p, R, C) == pytest.approx(ode.y[0], abs=1e-7)
    assert temperature_c(1e6, 30.0, AMB, p, R, C) == pytest.approx(AMB + p * R)  # the steady state
    assert temperature_c(50.0, 30.0, AMB, 0.0, R, C) == pytest.approx(AMB + 5 / math.e)  # cooling: one tau


def test_time_to_throttle_is_the_closed_form_and_infinite_when_the_steady_state_stays_below():
    p = compute_power_w(F, KAPPA)
    assert p == pytest.approx(0.8)
    t = time_to_temperature_s(30.0, AMB, AMB, p, R, C)
    assert t == pytest.approx(-R * C * math.log(1 - (30.0 - AMB) / (p * R)))
    assert temperature_c(t, AMB, AMB, p, R, C) == pytest.approx(30.0)
    assert time_to_temperature_s(34.0, AMB, AMB, p, R, C) == math.inf  # the steady state is 33 °C
    cool = time_to_temperature_s(28.0, 30.0, AMB, 0.1, R, C)  # cooling from 30 to 28 towards 26
    assert cool == pytest.approx(R * C * math.log(2)) and temperature_c(cool, 30.0, AMB, 0.1, R, C) == pytest.approx(
        28.0
    )
    assert time_to_temperature_s(30.0, 30.0, AMB, p, R, C) == 0.0
    assert time_to_temperature_s(27.0, 30.0, AMB, p, R, C) == math.inf  # heating does not cool


def pricer_with_thermal(**thermal):
    s = scenario_from_dict(
        {
            "data": {"num_clients": N},
            "algorithm": {"clients_per_round": N},
            "network": {"snr_db": 10.0, "access": "dedicated"},
            "devices": {"cpu_ghz": F / 1e9, "kappa": KAPPA, "static_power_w": 0.0, "cycles_per_sample": 1e6},
        }
    )
    network, population = network_params(s.network), build_population(s.network, s.devices, N, 1e5, 3e4, seed=0)
    component = Thermal(
        population, ambient_c=AMB, thermal_resistance_k_per_w=R, thermal_capacitance_j_per_k=C, **thermal
    )
    return SimPyPricer(
        network, population, 0, components=[*default_components(network, population, 0), component]
    ), component


def compute(cycles: float) -> PhaseRecord:
    return PhaseRecord(0, 0, {c: [Activity("compute", "train", samples=cycles / 1e6)] for c in range(N)})


def test_a_computation_that_throttles_once_takes_and_costs_the_sum_of_its_two_segments():
    # throttled at 1 GHz: 0.1 W, steady state 26 °C, above resume_c = 25.5: it never resumes
    pricer, thermal = pricer_with_thermal(throttle_c=30.0, resume_c=25.5, throttle_factor=0.5)
    cycles = 4e11  # 200 s at 2 GHz
    pricer.price_phase(compute(cycles))
    t_th = -R * C * math.log(1 - (30.0 - AMB) / (0.8 * R))  # 49.04 s
    done = F * t_th
    end = t_th + (cycles - done) / (0.5 * F)
    assert pricer.now == pytest.approx(end, rel=1e-12)
    rows = [e for e in pricer.events if e.client == 0]
    assert [(e.start_s, e.end_s) for e in rows] == [(0, pytest.approx(t_th)), (pytest.approx(t_th), pytest.approx(end))]
    expected = [KAPPA * done * F**2, KAPPA * (cycles - done) * (0.5 * F) ** 2]
    assert [e.energy_j for e in rows] == [pytest.approx(j, rel=1e-9) for j in expected]
    assert pricer.ledger.per_client()[0].sum() == pytest.approx(sum(expected), rel=1e-9)
    assert thermal.throttled[0] and thermal.throttled_s[0] == pytest.approx(end - t_th)


def test_a_computation_that_throttles_and_resumes_follows_the_closed_form_schedule():
    # throttled: steady state 26 °C < resume_c = 28: it cools back to 28 and resumes, heats to 30, ...
    pricer, _ = pricer_with_thermal(throttle_c=30.0, resume_c=28.0, throttle_factor=0.5)
    cycles = 3e11
    pricer.price_phase(compute(cycles))
    # the schedule by hand: alternate phases at full and half speed, each until its threshold crossing
    t, temp, left, throttled, segments = 0.0, AMB, cycles, False, []
    while left > 0:
        hz = 0.5 * F if throttled else F
        p = KAPPA * hz**3
        target = 28.0 if throttled else 30.0
        span = time_to_temperature_s(target, temp, AMB, p, R, C)
        run = min(span, left / hz)
        segments.append((t, t + run, hz * run, KAPPA * hz * run * hz**2))
        t, left = t + run, left - hz * run
        temp, throttled = target, not throttled
    rows = [e for e in pricer.events if e.client == 0]
    assert len(rows) == len(segments) >= 4
    for row, (start, end, done, joules) in zip(rows, segments):
        assert (row.start_s, row.end_s) == (pytest.approx(start, abs=1e-9), pytest.approx(end, rel=1e-9))
        assert row.cycles == pytest.approx(done, rel=1e-9) and row.energy_j == pytest.approx(joules, rel=1e-9)
    assert pricer.now == pytest.approx(segments[-1][1], rel=1e-9)
    assert sum(e.cycles for e in rows) == pytest.approx(cycles, rel=1e-12)


def test_thermal_rejects_thresholds_in_the_wrong_order():
    with pytest.raises(ValueError, match="resume_c < throttle_c"):
        pricer_with_thermal(throttle_c=30.0, resume_c=31.0)
