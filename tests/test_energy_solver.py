"""The min_energy controller's solver against exhaustive grid search, and the rate model's inverse."""

from __future__ import annotations

import numpy as np
import pytest

from channel import link_rate_bps, snr_for_rate
from edgefl.control.energy_solver import RateModel, RoundProblem, device_energy_j, solve_min_energy


@pytest.mark.parametrize(
    "rate, kwargs",
    [
        ("shannon", {}),
        ("shannon", {"efficiency": 0.8, "snr_gap_db": 3.0}),
        ("shannon", {"max_spectral_efficiency": 4.0}),
        ("mcs", {}),
    ],
)
def test_snr_for_rate_is_the_least_snr_reaching_the_rate(rate, kwargs):
    bandwidth = 2e6
    rates = np.linspace(1e4, 9e6, 200)
    snr = snr_for_rate(rates, bandwidth, rate, **kwargs)
    reachable = np.isfinite(snr)
    assert reachable[:20].all()
    got = link_rate_bps(bandwidth, snr[reachable] * (1 + 1e-9), rate, **kwargs)
    assert (got >= rates[reachable] * (1 - 1e-9)).all()
    below = link_rate_bps(bandwidth, snr[reachable] * (1 - 1e-6), rate, **kwargs)
    assert (below < rates[reachable]).all()  # the least: a little less SNR does not reach it
    if (~reachable).any():  # above the cap or the table's top entry
        top = link_rate_bps(bandwidth, 1e12, rate, **kwargs)
        assert (rates[~reachable] > top).all()


def instance(rng: np.random.Generator, n: int, rate: str = "shannon") -> RoundProblem:
    """Realistic values: 0.1-10 Gcycles, 0.1-10 Mbit, 1-20 MHz, mean SNR -5..30 dB at p_max, budgets
    1.2-3 x the time at full resources with equal shares."""
    p_max = rng.uniform(0.05, 0.2, n)
    problem = RoundProblem(
        cycles=rng.uniform(1e8, 1e10, n),
        upload_bits=rng.uniform(1e5, 1e7, n),
        time_budget_s=np.ones(n),
        kappa=np.full(n, 1e-28),
        static_power_w=rng.uniform(0, 0.05, n),
        f_min_hz=np.full(n, 0.2e9),
        f_max_hz=np.full(n, 2.5e9),
        snr_per_w=10 ** (rng.uniform(-5, 30, n) / 10) / p_max,
        noise_scales_with_band=rng.random(n) < 0.8,
        p_min_w=np.full(n, 1e-3),
        p_max_w=p_max,
        circuit_power_w=rng.uniform(0, 0.05, n),
        rate_model=RateModel(rng.uniform(1e6, 20e6), rate=rate),
    )
    _, full = device_energy_j(problem, problem.f_max_hz, problem.p_max_w, np.full(n, 1 / n))
    return RoundProblem(**{**problem.__dict__, "time_budget_s": full * rng.uniform(1.2, 3.0, n)})


def one(problem: RoundProblem, i: int) -> RoundProblem:
    return RoundProblem(
        **{k: (v if k == "rate_model" or v is None else np.asarray(v)[[i]]) for k, v in problem.__dict__.items()}
    )


def compositions(total: int, parts: int):
    """Every way to write ``total`` units as ``parts`` positive integers."""
    if parts == 1:
        yield (total,)
        return
    for first in range(1, total - parts + 2):
        for rest in compositions(total - first, parts - 1):
            yield (first, *rest)


def grid_optimum(problem: RoundProblem, step: float) -> float:
    """Exhaustive search over f (60 values) x p (60 values, log) x b (the simplex in ``step``s): given b
    the problem separates by device, so each device's least feasible energy per b is tabulated first."""
    n, units = len(problem.cycles), int(round(1 / step))
    f = np.linspace(0.2e9, 2.5e9, 60)
    best = np.full((n, units + 1), np.inf)
    for i in range(n):
        dev = one(problem, i)
        p = np.geomspace(dev.p_min_w[0], dev.p_max_w[0], 60)
        F, P = (x.reshape(1, -1) for x in np.meshgrid(f, p, indexing="ij"))
        for k in range(1, units + 1):
            energy, time_s = device_energy_j(dev, F, P, np.full((1, 1), k * step))
            feasible = time_s <= dev.time_budget_s[0]
            best[i, k] = energy[feasible].min() if feasible.any() else np.inf
    return min(sum(best[i, k] for i, k in enumerate(combo)) for combo in compositions(units, n))


def check(problem: RoundProblem, solution) -> None:
    assert solution.feasible.all()
    assert (solution.time_s <= problem.time_budget_s * (1 + 1e-9)).all()
    assert (solution.cpu_hz >= problem.f_min_hz * (1 - 1e-12)).all() and (
        solution.cpu_hz <= problem.f_max_hz * (1 + 1e-12)
    ).all()
    assert (solution.tx_power_w >= problem.p_min_w * (1 - 1e-12)).all()
    assert (solution.tx_power_w <= problem.p_max_w * (1 + 1e-12)).all()
    assert solution.band_share.sum() <= 1 + 1e-12 and (solution.band_share > 0).all()


GAPS: list[float] = []


@pytest.mark.parametrize("k", range(25))
def test_within_one_percent_of_the_grid_optimum(k):
    rng = np.random.default_rng(1000 + k)
    n = (3, 4, 5)[k % 3]
    problem = instance(rng, n, "mcs" if k >= 20 else "shannon")  # 20 Shannon instances, 5 MCS
    solution = solve_min_energy(problem)
    check(problem, solution)
    grid = grid_optimum(problem, 0.02 if n == 3 else 0.05)
    assert np.isfinite(grid)
    assert solution.energy_j.sum() <= 1.01 * grid
    # and the energy reported is the objective at the solution
    energy, _ = device_energy_j(problem, solution.cpu_hz, solution.tx_power_w, solution.band_share)
    assert np.allclose(energy, solution.energy_j)


def test_a_budget_equal_to_the_fastest_time_needs_everything_and_an_impossible_one_is_flagged():
    rng = np.random.default_rng(7)
    problem = instance(rng, 3)
    _, fastest = device_energy_j(problem, problem.f_max_hz, problem.p_max_w, np.ones(3))
    alone = RoundProblem(**{**problem.__dict__, "time_budget_s": fastest * (1 + 1e-6)})
    tight = solve_min_energy(alone, fixed_share=1.0)  # a band of its own each: only f_max, p_max fit
    assert tight.feasible.all()
    assert np.allclose(tight.cpu_hz, problem.f_max_hz, rtol=1e-3)
    budgets = problem.time_budget_s.copy()
    budgets[1] = fastest[1] * 0.5  # faster than possible even with the whole band
    impossible = solve_min_energy(RoundProblem(**{**problem.__dict__, "time_budget_s": budgets}))
    assert impossible.feasible.tolist() == [True, False, True]
    assert impossible.cpu_hz[1] == problem.f_max_hz[1] and impossible.tx_power_w[1] == problem.p_max_w[1]
    assert impossible.band_share.sum() <= 1 + 1e-12


def test_more_time_never_costs_more_energy():
    rng = np.random.default_rng(11)
    problem = instance(rng, 4)
    energies = [
        solve_min_energy(
            RoundProblem(**{**problem.__dict__, "time_budget_s": problem.time_budget_s * s})
        ).energy_j.sum()
        for s in (1.0, 1.5, 2.0, 4.0)
    ]
    assert all(b <= a * (1 + 1e-6) for a, b in zip(energies, energies[1:]))
    assert energies[-1] < energies[0]


def test_without_circuit_power_the_upload_uses_all_the_time_left():
    """With no circuit power, sending slower is cheaper: the solution's time equals the budget."""
    rng = np.random.default_rng(3)
    problem = instance(rng, 3)
    problem = RoundProblem(**{**problem.__dict__, "circuit_power_w": np.zeros(3), "static_power_w": np.zeros(3)})
    solution = solve_min_energy(problem)
    interior = (solution.tx_power_w > problem.p_min_w * 1.01) & (solution.cpu_hz > problem.f_min_hz * 1.01)
    assert np.allclose(solution.time_s[interior], problem.time_budget_s[interior], rtol=1e-3)


def test_a_budget_equal_to_the_fastest_time_with_equal_shares_is_met_by_sharing_the_band_equally():
    """FDMA: each budget is the time at f_max, p_max and an equal share: the only feasible point (a
    grid of shares must not lose it)."""
    for n in (3, 7, 30):
        problem = instance(np.random.default_rng(70 + n), n)
        _, fastest = device_energy_j(problem, problem.f_max_hz, problem.p_max_w, np.full(n, 1 / n))
        solution = solve_min_energy(RoundProblem(**{**problem.__dict__, "time_budget_s": fastest * (1 + 1e-6)}))
        assert solution.feasible.all()
        assert np.allclose(solution.band_share, 1 / n, rtol=1e-3)
        assert np.allclose(solution.cpu_hz, problem.f_max_hz, rtol=1e-2)
        assert np.allclose(solution.tx_power_w, problem.p_max_w, rtol=1e-2)


@pytest.mark.parametrize("rate", ["shannon", "mcs"])
def test_many_devices_solve_and_the_lagrangian_matches_the_dynamic_programme(rate, monkeypatch):
    from edgefl.control import energy_solver

    problem = instance(np.random.default_rng(5), 100, rate)
    check(problem, solve_min_energy(problem))  # timings: docs/control.md (not a unit test's business)
    assert energy_solver.DP_MAX_DEVICES < 24
    problem = instance(np.random.default_rng(6), 24, rate)
    lagrangian = solve_min_energy(problem)  # more than DP_MAX_DEVICES: the Lagrangian
    monkeypatch.setattr(energy_solver, "DP_MAX_DEVICES", 10**6)
    exact = solve_min_energy(problem, units=600)
    check(problem, lagrangian)
    assert lagrangian.energy_j.sum() <= 1.001 * exact.energy_j.sum()
