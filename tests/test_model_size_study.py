"""The model-size study (experiments/model_size.py, docs/model-size.md): the network and energy model see the
target model's message bits and cycles per sample while the linear model trains; the verdict against Wang et
al.'s expectation (τ* never falls as the communication-to-computation cost ratio grows) finds a fall."""

from __future__ import annotations

import pytest

from conftest import load_experiment

LINEAR = {"parameters": 7_850, "train_flops_per_sample": 31_360.0}
BIG = {"parameters": 1_000_000, "train_flops_per_sample": 1e8}


@pytest.fixture(scope="module")
def study():
    return load_experiment("model_size")


def test_the_stand_in_sends_the_models_bits_and_computes_its_cycles(study):
    raw = study.study_raw()
    keys = study.overrides(BIG, LINEAR, raw, tau=5)
    s = study.study_scenario("7 cells", keys, seed=3, rounds=4)
    # every message: the linear model's 7,850 x 32 bits plus the padding = the big model's d x 32 plus the header
    assert 7_850 * s.network.bits_per_param + s.network.header_bits == 1_000_000 * 32 + 800
    assert s.devices.cycles_per_sample == pytest.approx(3.0 * 1e8)  # phones-in-a-cell's 3 cycles per FLOP
    compute_s = 5 * 32 * 3.0 * 1e8 / 1e9  # τ steps of 32 samples on the slowest class (1 GHz)
    assert s.network.deadline_s == pytest.approx(0.4 * 1_000_000 / 7_850 + 2 * compute_s)
    assert s.model.name == "linear" and s.algorithm.local_steps == 5 and s.network.cells == 7
    assert s.devices.availability == "always" and s.devices.battery_j is None
    assert all(c.battery_j is None for c in s.devices.classes)
    assert s.run.seed == 3 and s.run.stop_at == "acc_mean=0.85"
    same = study.study_scenario("one cell", study.overrides(LINEAR, LINEAR, raw, tau=5), seed=3, rounds=4)
    assert same.network.header_bits == 800 and same.network.cells == 1  # the linear model: phones-in-a-cell's


def _model(ratio: float, tau_star: int, members: list[int]) -> dict:
    return {"ratio": ratio, "tau_star": tau_star, "tau_members": members}


def test_the_verdict_orders_by_ratio_and_finds_a_fall(study):
    holds = study.against_expectation({"a": _model(100.0, 40, [20, 40]), "b": _model(3.0, 5, [2, 5])})
    assert holds["order"] == ["b", "a"] and holds["falls"] == [] and holds["spearman"] == pytest.approx(1.0)
    noisy = study.against_expectation(
        {"a": _model(100.0, 10, [10, 20]), "b": _model(3.0, 20, [20, 40]), "c": _model(1.0, 2, [1, 2])}
    )
    assert noisy["order"] == ["c", "b", "a"]
    assert noisy["falls"] == [{"lower_ratio": "b", "higher_ratio": "a", "sets_overlap": [20]}]
    apart = study.against_expectation({"a": _model(100.0, 2, [1, 2]), "b": _model(3.0, 40, [40])})
    assert apart["falls"] == [{"lower_ratio": "b", "higher_ratio": "a", "sets_overlap": []}]


def test_a_fall_across_networks_needs_a_rising_ratio_and_a_lower_tau(study):
    one = {"a": _model(2.0, 10, [10]), "b": _model(2.0, 10, [10])}
    seven = {"a": _model(3.0, 5, [5]), "b": _model(1.5, 5, [5])}
    assert study.falls_between("a", one, seven)  # the ratio rose, τ* fell
    assert not study.falls_between("b", one, seven)  # the ratio fell: a lower τ* is what is expected
    assert not study.falls_between("a", one, one)
