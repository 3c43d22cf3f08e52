"""FedALIGN (algorithms/fedalign.py) and the priority data sets (edgefl/data/priority.py).

"Utilizing Free Clients in Federated Learning for Focused Model Enhancement", Sec. 3.1:
with eps = 0 FedALIGN is FedAvg on the priority clients, bit for
bit, and no other client is contacted; the warm-up rounds are identical for every eps; rejected
and declined clients pay one evaluation and never train; model uploads per round = |P_r| + |A_r|.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

import algorithms
from algorithms.base import Context
from edgefl.compression import Compressor
from edgefl.control.steering import FixedKnobs
from edgefl.data import build_federated_data
from edgefl.data.federated import FederatedData
from edgefl.data.priority import NON_PRIORITY, PRIORITY, noise_levels, shard_partition
from edgefl.executor import Executor
from edgefl.models import build_model
from edgefl.selection import NoPolicy
from edgefl.sim import Engine, IdealPricer

SEED = 11


def priority_data(num_clients=10, num_p=4, samples=None):
    return build_federated_data(
        "synthetic_priority", num_clients, SEED, priority_clients=num_p, samples_per_client=samples, noise_skew=1.5
    )


def subset(data: FederatedData, clients) -> FederatedData:
    """The same clients' data, in the same order, as a data set of its own."""

    def take(x, offsets):
        rows = np.concatenate([np.arange(offsets[c], offsets[c + 1]) for c in clients])
        sizes = [offsets[c + 1] - offsets[c] for c in clients]
        return x[torch.from_numpy(rows)], np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64), rows

    train_x, train_off, rows = take(data.train_x, data.train_offsets)
    test_x, test_off, test_rows = take(data.test_x, data.test_offsets)
    return FederatedData(
        name="priority-only",
        num_classes=data.num_classes,
        input_shape=data.input_shape,
        train_x=train_x,
        train_y=data.train_y[torch.from_numpy(rows)],
        train_offsets=train_off,
        test_x=test_x,
        test_y=data.test_y[torch.from_numpy(test_rows)],
        test_offsets=test_off,
    )


def build(data, name, hp, *, local_steps=3, m=None, batch=10, lr=0.1, pricer=None):
    model = build_model("linear", data.input_shape, data.num_classes, SEED)
    executor = Executor(model, data, batch, SEED)
    pricer = pricer or IdealPricer(data.num_clients)
    engine = Engine(
        executor,
        pricer,
        0.0,
        record_trace=True,
        compressor=Compressor(data.num_clients, SEED),
        steering=FixedKnobs(),
        selection=NoPolicy(),
    )
    cls = algorithms.get(name)
    ctx = Context(
        num_clients=data.num_clients,
        dim=model.dim,
        init_params=model.init_params(),
        train_sizes=np.asarray(data.train_sizes),
        local_steps=local_steps,
        clients_per_round=m or data.num_clients,
        lr=lr,
        batch_size=batch,
        bits_per_param=32,
        rng=np.random.default_rng(np.random.SeedSequence([SEED, 0xA160])),
        hp=cls.Params(**hp),
        client_roles=data.client_roles,
    )
    return engine, cls(ctx)


def trajectory(engine, alg, rounds):
    out = []
    for r in range(rounds):
        engine.run_round(alg, r)
        out.append(alg.model.clone())
    return out


def contacted(engine) -> set[int]:
    return {c for phase in engine.trace for c in phase.chains}


@pytest.mark.parametrize("participation", [None, 0.5])
def test_epsilon_zero_is_fedavg_on_the_priority_clients_bit_for_bit(participation):
    data = priority_data()
    p = np.flatnonzero(data.client_roles == PRIORITY)
    eng_a, align = build(data, "fedalign", {"epsilon": 0.0, "warmup_rounds": 2, "participation": participation})
    only_p = subset(data, p)
    m = None if participation is None else max(1, round(participation * len(p)))
    eng_f, fedavg = build(only_p, "fedavg", {}, m=m)
    ours, theirs = trajectory(eng_a, align, 8), trajectory(eng_f, fedavg, 8)
    for a, b in zip(ours, theirs):
        assert torch.equal(a, b)
    assert contacted(eng_a) <= set(p.tolist())  # no non-priority client is ever contacted
    q = np.flatnonzero(data.client_roles != PRIORITY)
    assert eng_a.selected_count[q].sum() == 0


def test_warmup_rounds_are_identical_for_every_epsilon():
    data = priority_data()
    runs = {
        eps: trajectory(*build(data, "fedalign", {"epsilon": eps, "warmup_rounds": 4}), 4)
        for eps in (0.0, 0.2, math.inf)
    }
    for r in range(4):
        assert torch.equal(runs[0.0][r], runs[0.2][r]) and torch.equal(runs[0.0][r], runs[math.inf][r])
    # and they part after the warm-up (eps = inf trains everyone)
    eng, alg = build(data, "fedalign", {"epsilon": math.inf, "warmup_rounds": 4})
    more = trajectory(eng, alg, 5)
    assert not torch.equal(more[4], trajectory(*build(data, "fedalign", {"epsilon": 0.0, "warmup_rounds": 4}), 5)[4])


@pytest.mark.parametrize("report", ["query", "opt_in"])
def test_selection_and_cost_of_rejected_and_accepted_clients(report):
    """After the warm-up: every non-priority client evaluates once; only accepted ones train and
    upload a model; per round the model uploads are |P| + |A_r| (SimPy event log)."""
    from edgefl.deployment import build_population, network_params
    from edgefl.scenario import DevicesSection, NetworkSection
    from edgefl.sim import SimPyPricer

    data = priority_data(num_clients=12, num_p=4)
    model = build_model("linear", data.input_shape, data.num_classes, SEED)
    net = NetworkSection(snr_db=20.0)
    population = build_population(
        net, DevicesSection(), data.num_clients, model.train_flops_per_sample, model.eval_flops_per_sample, SEED
    )
    pricer = SimPyPricer(network_params(net), population, SEED)
    eng, alg = build(
        data, "fedalign", {"epsilon": 0.6, "warmup_rounds": 2, "report": report}, pricer=pricer, local_steps=4
    )
    rounds = 8
    trajectory(eng, alg, rounds)
    model_bits = alg.ctx.model_bits
    p = set(np.flatnonzero(data.client_roles == PRIORITY).tolist())
    q = sorted(set(range(data.num_clients)) - p)
    accepted_any = 0
    for r in range(rounds):
        ev = [e for e in pricer.events if e.round == r]
        model_up = {e.client for e in ev if e.kind == "upload" and e.bits == model_bits}
        trained = {e.client for e in ev if e.kind == "compute" and e.label == "train"}
        evaluated = {e.client for e in ev if e.kind == "compute" and e.label == "evaluate"}
        accepted = set(alg.accept_log[r].tolist())
        accepted_any += len(accepted)
        assert model_up == p | accepted  # |P| + |A_r| model uploads
        assert trained == p | accepted  # rejected / declined clients never train
        if r < 2:
            assert evaluated == set() and accepted == set()  # warm-up: priority only
        else:
            assert evaluated == p | set(q)  # one evaluation each
            for c in set(q) - accepted:  # rejected: one download, one evaluation, at most a loss scalar up
                mine = [e for e in ev if e.client == c]
                assert [e.kind for e in mine if e.kind == "compute"] == ["compute"]
                assert sum(e.kind == "download" for e in mine) == 1
                ups = [e.bits for e in mine if e.kind == "upload"]
                if report == "query":
                    assert ups == [alg.ctx.scalar_bits]
                else:
                    assert ups in ([], [alg.ctx.scalar_bits])
    assert 0 < accepted_any < rounds * len(q)  # some accepted, some rejected
    assert all(alg.accept_log[r].size == 0 for r in range(2))


def test_query_and_opt_in_reports_accept_the_same_clients():
    data = priority_data()
    runs = {}
    for report in ("query", "opt_in"):
        eng, alg = build(data, "fedalign", {"epsilon": 0.3, "warmup_rounds": 1, "report": report})
        runs[report] = (trajectory(eng, alg, 6), alg.accept_log)
    for a, b in zip(runs["query"][0], runs["opt_in"][0]):
        assert torch.equal(a, b)
    assert all(np.array_equal(a, b) for a, b in zip(runs["query"][1], runs["opt_in"][1]))


def test_acceptance_rule_is_two_sided():
    """Accepted iff |F_r - L_j| <= eps: loss far below F_r is rejected too (opted in, not accepted)."""
    data = priority_data()
    eng, alg = build(data, "fedalign", {"epsilon": 0.05, "warmup_rounds": 0})
    for r in range(6):
        eng.run_round(alg, r)
        assert alg.metrics()["accepted"] <= alg.metrics()["opted_in"] <= alg.metrics()["evaluated"]


def test_local_epochs_use_per_client_step_masks():
    data = priority_data(samples=None)
    eng, alg = build(data, "fedalign", {"epsilon": 0.0, "local_epochs": 2.0, "warmup_rounds": 0}, batch=10)
    eng.run_round(alg, 0)
    p = np.flatnonzero(data.client_roles == PRIORITY)
    expected = np.ceil(2.0 * data.train_sizes[p] / 10)
    computed = [sum(a.samples for a in eng.trace[0].chains[int(c)] if a.kind == "compute") for c in p]
    assert np.array_equal(np.asarray(computed), expected * 10)


def test_synthetic_priority_noise_levels_and_roles():
    assert noise_levels(10, 1.5)[0] == 0 and noise_levels(10, 1.5)[-1] == 1
    assert np.all(np.diff(noise_levels(10, 0.5)) > 0)
    data = build_federated_data("synthetic_priority", 20, 0, priority_clients=10, samples_per_client=200)
    assert list(data.client_roles[:10]) == [PRIORITY] * 10 and list(data.client_roles[10:]) == [NON_PRIORITY] * 10
    sizes = data.train_sizes + data.test_sizes
    # clean client 0 of Q has 200 points; the noisiest has as many irrelevant as clean points
    assert sizes[10] == 200 and sizes[19] == 400
    again = build_federated_data("synthetic_priority", 20, 0, priority_clients=10, samples_per_client=200)
    assert torch.equal(data.train_x, again.train_x)


def test_shards_and_priority_classes():
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(10), 60)
    parts = shard_partition(labels, 30, 2, rng)
    assert all(len(p) == 20 for p in parts)
    assert all(len(np.unique(labels[p])) <= 2 for p in parts)
    data = build_federated_data(
        "image_priority",
        30,
        0,
        dir=str(Path(__file__).resolve().parents[2] / "shared" / "datasets" / "mnist"),
        priority_clients=2,
        priority_classes=4,
    )
    p = np.flatnonzero(data.client_roles == PRIORITY)
    assert len(p) == 2
    classes = set()
    for c in p:
        classes |= set(data.client_train(c)[1].tolist())
    assert len(classes) == 4
