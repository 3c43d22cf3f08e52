"""The baselines of "Distributionally Robust Federated Learning with Client Drift Minimization"
(Sec. I-A and IV-A.1): SCAFFOLD, SCAFF-PD, FedDyn, FedProx, DRFA (and FedAvg).

Reductions between them, their state invariants, the traffic each is charged, and what
happens when nobody makes the deadline."""

import numpy as np
import pytest
import torch

import algorithms
from edgefl.runner import Simulation
from edgefl.scenario import ScenarioError

from conftest import make_scenario, run_rounds

N, M, TAU = 10, 5, 3  # the make_scenario defaults
ALL = ["fedavg", "fedprox", "feddyn", "scaffold", "scaff_pd", "drfa", "drdm"]


def test_all_registered():
    for name in ALL:
        assert algorithms.get(name).name == name


def test_scaffold_first_round_with_zero_control_variates_is_fedavg():
    scaffold = run_rounds(Simulation(make_scenario("scaffold", eta_g=1.0)), 2)
    fedavg = run_rounds(Simulation(make_scenario("fedavg", weighting="uniform")), 2)
    torch.testing.assert_close(scaffold[0], fedavg[0], rtol=0, atol=1e-6)
    assert not torch.allclose(scaffold[1], fedavg[1], atol=1e-4)  # control variates act from round 2


def test_scaffold_keeps_c_equal_to_the_mean_of_the_client_variates():
    sim = Simulation(make_scenario("scaffold"))
    for r in range(8):
        sim.engine.run_round(sim.algorithm, r)
        torch.testing.assert_close(sim.algorithm.c, sim.algorithm.c_i.mean(), rtol=0, atol=1e-5)
    assert torch.linalg.vector_norm(sim.algorithm.c) > 1e-3


def test_scaffold_option_ii_control_variate_by_hand():
    # One round, one client, tau steps: c_i^+ = c_i - c + (x - y)/(tau eta) = (x - y)/(tau eta) at start.
    sim = Simulation(make_scenario("scaffold", eta_g=1.0))
    x0 = sim.algorithm.model.clone()
    sim.engine.run_round(sim.algorithm, 0)
    x1 = sim.algorithm.model
    # With eta_g = 1: x1 = x0 + mean(dy), c = (1/N) sum c_i^+ = -(m/N) mean(dy)/(tau eta)
    expected_c = -(M / N) * (x1 - x0) / (TAU * 0.05)
    torch.testing.assert_close(sim.algorithm.c, expected_c, rtol=0, atol=1e-5)


def test_fedprox_with_mu_zero_is_fedavg():
    prox = run_rounds(Simulation(make_scenario("fedprox", mu_p=0.0)), 4)
    avg = run_rounds(Simulation(make_scenario("fedavg")), 4)
    for a, b in zip(prox, avg):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-7)


def test_fedprox_pulls_towards_the_server_model():
    x0 = Simulation(make_scenario("fedprox")).algorithm.model.clone()
    loose = run_rounds(Simulation(make_scenario("fedprox", mu_p=0.0)), 1)[0]
    tight = run_rounds(Simulation(make_scenario("fedprox", mu_p=5.0)), 1)[0]
    assert torch.linalg.vector_norm(tight - x0) < 0.9 * torch.linalg.vector_norm(loose - x0)


def test_feddyn_server_state_is_the_mean_of_the_client_states():
    sim = Simulation(make_scenario("feddyn", alpha=0.1))
    for r in range(8):
        sim.engine.run_round(sim.algorithm, r)
        torch.testing.assert_close(sim.algorithm.h, sim.algorithm.g.mean(), rtol=0, atol=1e-6)
    assert len(sim.algorithm.g) <= N


@pytest.mark.parametrize("name", ["scaffold", "scaff_pd", "feddyn", "fedprox", "drfa", "drdm"])
def test_batched_and_loop_executors_agree(name):
    a = run_rounds(Simulation(make_scenario(name, rounds=2)), 2)
    b = run_rounds(Simulation(make_scenario(name, rounds=2, executor="loop")), 2)
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y, rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", ALL)
def test_every_algorithm_learns(name):
    result = Simulation(make_scenario(name, rounds=12)).run(progress=False)
    losses = [row["loss"] for row in result.metrics]
    assert np.isfinite(losses).all()
    assert losses[-1] < 0.8 * losses[0], losses
    assert result.metrics[-1]["acc_mean"] > 0.3


@pytest.mark.parametrize("name", ALL)
def test_nobody_meets_the_deadline_model_unchanged(name):
    # the messages fit the deadline alone (a shorter one is refused before the run: edgefl.feasibility), a
    # download + compute + upload chain does not (the fastest device needs about 6 ms)
    sim = Simulation(make_scenario(name, rounds=2, engine="simpy", network={"deadline_s": 0.005}))
    w0 = sim.algorithm.model.clone()
    for r in range(2):
        sim.engine.run_round(sim.algorithm, r)
    assert torch.equal(sim.algorithm.model, w0)


def traffic(name, rounds=2, **hp):
    sim = Simulation(make_scenario(name, rounds=rounds, engine="simpy", **hp))
    for r in range(rounds):
        sim.engine.run_round(sim.algorithm, r)
    bits = sim.model.dim * 32
    per_round = []
    for r in range(rounds):
        ev = [e for e in sim.pricer.events if e.round == r and e.kind in ("download", "upload")]
        per_round.append(
            {
                "down": sorted(e.bits / bits for e in ev if e.kind == "download"),
                "up": sorted(e.bits / bits for e in ev if e.kind == "upload"),
                "clients": {e.client for e in ev},
            }
        )
    return per_round, 32 / bits


@pytest.mark.parametrize(
    "name,down,up",
    [
        ("fedavg", 1, 1),
        ("fedprox", 1, 1),
        ("feddyn", 1, 1),
        ("scaffold", 2, 2),
    ],
)
def test_one_message_each_way_with_the_right_size(name, down, up):
    for rnd in traffic(name)[0]:
        assert rnd["down"] == [down] * M and rnd["up"] == [up] * M


def test_scaff_pd_traffic_and_initial_loss_table():
    rounds, s = traffic("scaff_pd", rounds=2)
    # Round 0 also fills the loss table at x^0: every client gets x and sends back a scalar.
    first, second = rounds
    init_down, init_up = [1.0] * N, [s] * N
    per_participant_down = [1.0] * M + [1.0 + s] * M  # x, then (lambda_i, c)
    per_participant_up = [1.0 + s] * M + [1.0] * M  # (L_i, c_i), then du_i
    assert first["down"] == sorted(init_down + per_participant_down)
    assert first["up"] == sorted(init_up + per_participant_up)
    assert second["down"] == sorted(per_participant_down) and second["up"] == sorted(per_participant_up)
    assert first["clients"] == set(range(N))


def test_scaff_pd_lambda_stays_on_the_simplex_and_moves_towards_high_loss():
    sim = Simulation(make_scenario("scaff_pd", gamma=0.02))
    for r in range(8):
        sim.engine.run_round(sim.algorithm, r)
        lam = sim.algorithm.lam
        assert lam.min() >= 0 and lam.sum() == pytest.approx(1.0, abs=1e-12)
    table = sim.algorithm.table
    assert np.corrcoef(lam, table)[0, 1] > 0  # more weight where the loss is higher
    frozen = Simulation(make_scenario("scaff_pd", gamma=0.0))
    run_rounds(frozen, 3)
    np.testing.assert_allclose(frozen.algorithm.lam, 1 / N, atol=1e-15)


def test_drfa_traffic_matches_drdm():
    rounds, s = traffic("drfa", gamma=0.05, sampling="without_replacement")
    for rnd in rounds:
        assert rnd["down"] == sorted([1.0 + s] * M + [1.0] * M)
        assert rnd["up"] == sorted([2.0] * M + [s] * M)


def test_hyperparameters_are_validated():
    with pytest.raises(ScenarioError, match="mu"):
        make_scenario("fedavg", mu=0.1)  # not a FedAvg key
    with pytest.raises(ScenarioError, match="gamma"):
        make_scenario("drdm", gamma=-1.0)
    with pytest.raises(ScenarioError, match="sampling"):
        make_scenario("drdm", sampling="sometimes")
    assert make_scenario("scaffold", eta_g=0.5).algorithm.hyperparams().eta_g == 0.5
