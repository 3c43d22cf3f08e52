"""DRDM ("Distributionally Robust Federated Learning with Client Drift Minimization", Sec. II,
Algorithms 1-3): the dual player's pieces, the reductions to FedDyn and DRFA, the invariants
c = mean(g) and lambda in the simplex, and the traffic of Algorithm 1."""

import functools
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import scipy.optimize
import scipy.stats
import torch

from algorithms.base import uniform_sample
from algorithms.ops import Evaluate
from algorithms.simplex import dual_variable_update, project_simplex, sample_by_lambda
from edgefl.runner import Simulation
from edgefl.scenario import load_scenario

from conftest import load_experiment, make_scenario

REPO = Path(__file__).resolve().parents[1]
N, M, TAU = 10, 5, 3  # the make_scenario defaults
scenario = functools.partial(make_scenario, seed=3)


def trajectory(sim, rounds):
    """Global model (and lambda, when there is one) after every round."""
    out = []
    for r in range(rounds):
        sim.engine.run_round(sim.algorithm, r)
        lam = getattr(sim.algorithm, "lam", None)
        out.append((sim.algorithm.model.clone(), None if lam is None else lam.copy()))
    return out


# -- the simplex ------------------------------------------------------------------------
def enumerate_projection(y):
    """Exact brute force: over every support set S, x_S = y_S - (sum y_S - 1)/|S| (the KKT point
    on that face); keep the feasible one closest to y."""
    n, best = len(y), None
    for mask in range(1, 2**n):
        support = np.array([(mask >> i) & 1 for i in range(n)], dtype=bool)
        x = np.zeros(n)
        x[support] = y[support] - (y[support].sum() - 1) / support.sum()
        if x.min() >= -1e-12 and (best is None or np.sum((x - y) ** 2) < np.sum((best - y) ** 2)):
            best = x
    return best


def slsqp_projection(y):
    n = len(y)
    res = scipy.optimize.minimize(
        lambda x: 0.5 * np.sum((x - y) ** 2),
        np.full(n, 1.0 / n),
        jac=lambda x: x - y,
        method="SLSQP",
        bounds=[(0, None)] * n,
        constraints=[{"type": "eq", "fun": lambda x: x.sum() - 1, "jac": lambda x: np.ones(n)}],
        options={"ftol": 1e-12, "maxiter": 1000},
    )
    return res.x


def test_simplex_projection_matches_brute_force_solvers():
    rng = np.random.default_rng(0)
    for trial in range(60):
        n = int(rng.integers(1, 11))
        y = rng.normal(0, [0.1, 1.0, 5.0][trial % 3], n) + (1.0 / n if trial % 2 else 0.0)
        x = project_simplex(y)
        assert x.min() >= 0 and x.sum() == pytest.approx(1.0, abs=1e-12)
        np.testing.assert_allclose(x, enumerate_projection(y), atol=1e-10)
    for trial in range(20):  # larger instances against a generic QP solver
        y = rng.normal(0, 0.3, 40)
        x, ref = project_simplex(y), slsqp_projection(y)
        assert ref.min() >= -1e-8 and ref.sum() == pytest.approx(1.0, abs=1e-8)
        np.testing.assert_allclose(x, ref, atol=1e-5)
        assert np.sum((x - y) ** 2) <= np.sum((np.maximum(ref, 0) / np.maximum(ref, 0).sum() - y) ** 2) + 1e-12


def test_projection_keeps_simplex_points_and_shifts_uniformly():
    lam = np.random.default_rng(1).dirichlet(np.ones(7))
    np.testing.assert_allclose(project_simplex(lam), lam, atol=1e-15)
    np.testing.assert_allclose(project_simplex(lam + 0.3), lam, atol=1e-12)  # a constant shift cancels
    assert np.array_equal(project_simplex(np.array([5.0, 0.0, -1.0])), [1.0, 0.0, 0.0])


def test_lambda_sampling_frequencies_match_lambda():
    rng = np.random.default_rng(12345)
    lam = rng.dirichlet(np.full(12, 0.7))
    totals = np.zeros(12)
    for _ in range(3000):
        clients, counts = sample_by_lambda(rng, lam, 20, replace=True)
        assert len(np.unique(clients)) == len(clients) and counts.sum() == 20  # duplicates merged
        totals[clients] += counts
    assert scipy.stats.chisquare(totals, lam * totals.sum()).pvalue > 1e-3
    # The same test has power: uniform frequencies are firmly rejected.
    assert scipy.stats.chisquare(totals, np.full(12, totals.sum() / 12)).pvalue < 1e-12


def test_sampling_without_replacement_uses_the_floor():
    rng = np.random.default_rng(7)
    lam = np.zeros(30)
    lam[:3] = [0.5, 0.3, 0.2]  # fewer than m positive entries
    seen = Counter()
    for _ in range(200):
        clients, counts = sample_by_lambda(rng, lam, 20, replace=False)
        assert len(np.unique(clients)) == 20 and np.all(counts == 1)
        seen.update(clients.tolist())
    assert all(seen[i] == 200 for i in range(3))  # the heavy clients are always in
    assert lam[3:].sum() == 0  # lambda itself untouched


def test_dual_step_is_projected_ascent_with_n_over_m_scaling():
    class Ctx:
        num_clients, clients_per_round, model_bits, scalar_bits = 6, 3, 320.0, 32.0

        @staticmethod
        def sample(m, rng):  # everyone online: Context.sample
            return uniform_sample(rng, 6, m)

    lam = np.full(6, 1 / 6)
    gen = dual_variable_update(Ctx, lam, torch.zeros(10), step=0.01, rng=np.random.default_rng(0))
    query = next(gen)
    assert len(query.clients) == 3 and query.down_bits == 320.0 and query.up_bits == 32.0
    losses = torch.tensor([1.0, 2.0, 0.5])
    with pytest.raises(StopIteration) as stop:
        gen.send((losses, np.array([True, True, True])))
    # By hand: v_i = (N/m) L_i = 2 L_i on the queried clients, so lam + 0.01 v adds [0.02, 0.04, 0.01]
    # there; every entry stays positive after the projection, which then subtracts the excess
    # mass 0.07 evenly: 1/6 - 0.07/6 everywhere, plus [0.02, 0.04, 0.01] on the queried clients.
    expected = np.full(6, (1 - 0.07) / 6)
    expected[query.clients] += [0.02, 0.04, 0.01]
    np.testing.assert_allclose(stop.value.value, expected, rtol=0, atol=1e-15)


def drive_round(alg, r, arrived, make_params):
    """Run DRDM's round r with the engine's answers made up: each Train's params and snapshot from
    ``make_params(start, clients)``, ``arrived`` (a function of the clients) for the upload, every loss 1."""
    from algorithms.ops import Query, Train, TrainResult, Upload

    gen, answer, seen = alg.round(r), None, {}
    try:
        while True:
            op = gen.send(answer)
            answer = None
            if isinstance(op, Train):
                seen["D"], seen["g"] = op.clients, op.client_args["g"].clone()
                answer = TrainResult(*make_params(op.start, op.clients))
            elif isinstance(op, Upload):
                answer = arrived(op.clients)
            elif isinstance(op, Query):
                answer = (torch.ones(len(op.clients)), np.ones(len(op.clients), dtype=bool))
    except StopIteration:
        pass
    return seen


@pytest.mark.parametrize("everyone", [True, False])
def test_drdm_server_step_is_algorithm_1_lines_10_to_20(everyone):
    """The server's update from the uploads of those that arrived (all of them, or some), against Alg. 1
    l.10-20 written out: g_i, c, and w_bar = sum_i (k_i/m) w_i^+ - c/mu over the arrived clients only."""
    sim = Simulation(scenario("drdm", gamma=0.05, mu=0.1))
    alg, gen = sim.algorithm, torch.Generator().manual_seed(0)
    N_, mu = alg.ctx.num_clients, alg.hp.mu

    def make_params(start, clients):
        rows = start + 0.1 * torch.randn(len(clients), start.shape[-1], generator=gen)
        return rows, {}, rows - 0.01

    def arrived(clients):
        return np.ones(len(clients), dtype=bool) if everyone else np.arange(len(clients)) % 3 != 1

    for r in range(6):
        w, c, lam = alg.w.clone(), alg.c.clone(), alg.lam.copy()
        state = alg.ctx.rng.bit_generator.state
        _, k = alg.sample()  # the draw counts k_i the round will draw (the same stream state)
        alg.ctx.rng.bit_generator.state = state
        g_all = alg.g.get(np.arange(N_))
        params = []
        seen = drive_round(alg, r, arrived, lambda s, cl: params.append(make_params(s, cl)) or params[-1])
        ok = arrived(seen["D"])
        assert alg.distinct == ok.sum()
        plus = params[0][0][torch.as_tensor(ok)]
        D, k = seen["D"][ok], torch.as_tensor(k[ok], dtype=torch.float32)
        g_expected = g_all.clone()
        g_expected[D] = seen["g"][torch.as_tensor(ok)] - mu * (plus - w)  # l.10
        c_expected = c - (mu / N_) * (plus - w).sum(dim=0)  # l.18
        w_expected = (k[:, None] * plus).sum(dim=0) / k.sum() - c_expected / mu  # l.20
        assert torch.equal(alg.g.get(np.arange(N_)), g_expected)
        assert torch.equal(alg.c, c_expected) and torch.equal(alg.w, w_expected)
        assert not np.array_equal(alg.lam, lam)  # the dual step ran
    assert len(alg.g) > 0


# -- reductions ----------------------------------------------------------------------------
def test_drdm_with_gamma_zero_and_uniform_sampling_is_feddyn():
    rounds = 6
    drdm = trajectory(Simulation(scenario("drdm", mu=0.1, gamma=0.0, sampling="uniform")), rounds)
    feddyn = trajectory(Simulation(scenario("feddyn", alpha=0.1)), rounds)
    for (w_drdm, lam), (w_dyn, _) in zip(drdm, feddyn):
        torch.testing.assert_close(w_drdm, w_dyn, rtol=0, atol=1e-6)
        np.testing.assert_allclose(lam, np.full(N, 1 / N), rtol=0, atol=1e-15)  # gamma = 0: stays uniform
    assert not torch.allclose(drdm[0][0], drdm[-1][0])  # it did move


def test_evaluate_does_not_consume_the_training_minibatch_stream():
    # What the FedDyn reduction relies on: DRDM's dual query must not shift the training batches.
    sim = Simulation(scenario("drdm"))
    state = sim.executor.rng.bit_generator.state
    sim.executor.evaluate(Evaluate(np.arange(3), sim.algorithm.model, "loss"))
    assert sim.executor.rng.bit_generator.state == state


def test_drdm_without_the_feddyn_terms_is_drfa_exactly():
    rounds = 6
    drdm = trajectory(Simulation(scenario("drdm", gamma=0.05, dynamic=False)), rounds)
    drfa = trajectory(Simulation(scenario("drfa", gamma=0.05)), rounds)
    for (w1, lam1), (w2, lam2) in zip(drdm, drfa):
        assert torch.equal(w1, w2)
        assert np.array_equal(lam1, lam2)
    assert np.abs(drdm[-1][1] - 1 / N).max() > 1e-3  # lambda moved away from uniform


def test_mu_to_zero_alone_does_not_give_drfa():
    # c/mu stays finite as mu -> 0, so a tiny mu is not DRFA.
    drdm = trajectory(Simulation(scenario("drdm", gamma=0.05, mu=1e-6)), 3)
    drfa = trajectory(Simulation(scenario("drfa", gamma=0.05)), 3)
    assert not torch.allclose(drdm[-1][0], drfa[-1][0], atol=1e-4)


# -- invariants --------------------------------------------------------------------------
@pytest.mark.parametrize("sampling", ["with_replacement", "without_replacement"])
def test_c_is_mean_of_g_and_lambda_stays_on_the_simplex(sampling):
    sim = Simulation(scenario("drdm", gamma=0.05, mu=0.1, sampling=sampling))
    alg = sim.algorithm
    duplicates = 0
    for r in range(12):
        sim.engine.run_round(alg, r)
        torch.testing.assert_close(alg.c, alg.g.mean(), rtol=0, atol=1e-6)
        assert alg.lam.min() >= 0 and alg.lam.sum() == pytest.approx(1.0, abs=1e-12)
        duplicates += M - alg.distinct
    assert torch.linalg.vector_norm(alg.c) > 1e-3  # non-trivial
    assert np.abs(alg.lam - 1 / N).max() > 1e-3
    if sampling == "without_replacement":
        assert duplicates == 0
    else:
        assert duplicates > 0  # the with-replacement path (k_i > 1) was exercised


def test_batched_and_loop_executors_agree_for_drdm():
    a = trajectory(Simulation(scenario("drdm", gamma=0.05, mu=0.1, radius=2.0)), 4)
    b = trajectory(Simulation(scenario("drdm", gamma=0.05, mu=0.1, radius=2.0, executor="loop")), 4)
    for (w1, lam1), (w2, lam2) in zip(a, b):
        torch.testing.assert_close(w1, w2, rtol=0, atol=1e-5)
        np.testing.assert_allclose(lam1, lam2, atol=1e-6)
    # The l2-ball option holds every local iterate in W; DRFA's model, an average of them, too.
    sim = Simulation(scenario("drfa", gamma=0.05, radius=0.5))
    for w, _ in trajectory(sim, 3):
        assert torch.linalg.vector_norm(w) <= 0.5 + 1e-5


# -- traffic (Algorithm 1, l.3, l.7, l.21) ------------------------------------------------
@pytest.mark.parametrize("sampling", ["with_replacement", "without_replacement"])
def test_drdm_charges_every_transmission_of_section_2_5(sampling):
    rounds = 3
    sim = Simulation(scenario("drdm", rounds=rounds, engine="simpy", gamma=0.05, mu=0.1, sampling=sampling))
    model_bits = sim.model.dim * 32
    distinct, result_rounds = [], []
    for r in range(rounds):
        sim.engine.run_round(sim.algorithm, r)
        distinct.append(sim.algorithm.distinct)
    events = sim.pricer.events
    for r in range(rounds):
        ev = [e for e in events if e.round == r and e.kind in ("download", "upload")]
        down_d = [e for e in ev if e.kind == "download" and e.bits == model_bits + 32]  # w_bar + k'
        down_u = [e for e in ev if e.kind == "download" and e.bits == model_bits]  # w_snap to U
        up_models = [e for e in ev if e.kind == "upload" and e.bits == 2 * model_bits]  # w+ and w_snap
        up_scalar = [e for e in ev if e.kind == "upload" and e.bits == 32]  # L_i
        assert len(down_d) + len(down_u) + len(up_models) + len(up_scalar) == len(ev)  # nothing else
        assert len(down_d) == len(up_models) == distinct[r]
        assert {e.client for e in down_d} == {e.client for e in up_models}
        assert len(down_u) == len(up_scalar) == M and len({e.client for e in down_u}) == M
        assert {e.phase for e in down_d} != {e.phase for e in down_u}  # the query is its own phase
        result_rounds.append(len(down_d))
        if sampling == "without_replacement":
            assert len(down_d) + len(down_u) == 2 * M  # 2m model downloads, m 2-model uploads
            assert len(up_models) == M
        total_bits = sum(e.bits for e in ev)
        assert total_bits == distinct[r] * (3 * model_bits + 32) + M * (model_bits + 32)
    if sampling == "with_replacement":
        assert min(result_rounds) <= M


def test_a_deadline_nobody_meets_leaves_drdm_unchanged():
    # the messages fit 5 ms alone (a shorter deadline is refused before the run), a whole chain does not
    sim = Simulation(scenario("drdm", rounds=2, engine="simpy", network={"deadline_s": 0.005}))
    w0, lam0 = sim.algorithm.model.clone(), sim.algorithm.lam.copy()
    for r in range(2):
        record = sim.engine.run_round(sim.algorithm, r)
        assert record.uploads_arrived == 0
    assert torch.equal(sim.algorithm.model, w0) and np.array_equal(sim.algorithm.lam, lam0)
    assert len(sim.algorithm.g) == 0


def test_drdm_metrics_columns():
    result = Simulation(scenario("drdm", rounds=2, gamma=0.05)).run(progress=False)
    row = result.metrics[-1]
    assert {"lambda_max", "lambda_entropy", "lambda_min", "clients_distinct"} <= set(row)
    assert row["lambda_entropy"] <= np.log(N) + 1e-12


# -- scenario files ----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["drdm-mnist10k", "drdm-mnist-linear", "drdm-kmnist-cnn"])
def test_drdm_scenarios_parse(name):
    # The full-data scenarios point at folders that may not exist here; override data.dir.
    s = load_scenario(REPO / "scenarios" / f"{name}.toml", ["data.dir=/work/shared/datasets/mnist"])
    assert s.algorithm.name == "drdm"
    assert (s.data.num_clients, s.algorithm.clients_per_round, s.algorithm.local_steps) == (30, 20, 10)
    assert s.algorithm.batch_size == 32


def test_mnist10k_scenario_resolves_the_shared_dataset():
    s = load_scenario(REPO / "scenarios" / "drdm-mnist10k.toml")
    assert Path(s.data.dir) == Path("/work/shared/datasets/mnist").resolve() or Path(s.data.dir).name == "mnist"
    assert s.data.name == "mnist" and s.model.name == "linear" and s.data.dirichlet_alpha == 0.1


# -- the reproduction report (docs/reproduce-drdm.md) --------------------------------------
def reproduce_module():
    return load_experiment("reproduce_drdm")


def test_the_report_is_rendered_from_its_raw_runs():
    mod = reproduce_module()
    doc = (REPO / "docs" / "reproduce-drdm.md").read_text()
    bundle = mod.load_bundle(REPO / "docs" / "data" / mod.BUNDLE)
    assert mod.render(bundle) == doc  # no hand edits: the page is exactly what its runs give
    assert ".venv/bin/python experiments/reproduce_drdm.py" in doc
    for name in ("drdm-results.csv", "drdm-tuning.csv", "drdm-curves.csv"):
        assert (REPO / "docs" / "data" / name).is_file()
    for png in ("drdm-rounds-to-target.png", "drdm-curves-alpha0.1-sigma0.0.png"):
        assert (REPO / "docs" / "figures" / png).is_file()
    # Every method, every setting, at least 5 seeds; the selection is the tuning table's best.
    for alpha, sigma in mod.SETTINGS:
        for alg in mod.ALGORITHMS:
            seeds = {
                r["seed"] for r in bundle["main"] if (r["algorithm"], r["alpha"], r["sigma"]) == (alg, alpha, sigma)
            }
            assert len(seeds) >= 5 and not seeds & set(mod.TUNE_SEEDS)
    chosen, _ = mod.select(bundle["tuning"])
    for r in bundle["main"]:
        assert r["hp"] == chosen[r["algorithm"]]


def test_a_reported_run_reproduces():
    mod = reproduce_module()
    bundle = mod.load_bundle(REPO / "docs" / "data" / mod.BUNDLE)
    stored = next(
        r
        for r in bundle["main"]
        if r["algorithm"] == "drdm" and r["seed"] == 0 and (r["alpha"], r["sigma"]) == (0.1, 0.0)
    )
    job = {k: stored[k] for k in ("phase", "algorithm", "hp", "alpha", "sigma", "seed", "tau", "rounds")}
    threads = torch.get_num_threads()
    try:
        fresh = mod.run_job(job)
    finally:
        torch.set_num_threads(threads)
    np.testing.assert_allclose(fresh["acc_mean"], stored["acc_mean"], atol=5e-3)
    np.testing.assert_allclose(fresh["acc_worst"][-10:], stored["acc_worst"][-10:], atol=0.031)  # <= 2 test images
    np.testing.assert_allclose(fresh["lambda_max"], stored["lambda_max"], rtol=1e-3)
