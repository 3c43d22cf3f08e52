"""Seeds trained together (edgefl.seed_axis, issue 30 item 1): each run of a seed group trained on the seed axis
gives its solo run's numbers; sweeps train a seed group's trainings together."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest
import torch

import edgefl.seed_axis as seed_axis
from algorithms.ops import Train, sgd_step
from edgefl.runner import Simulation
from edgefl.seed_axis import SeedBatch, run_together, stack_groups
from edgefl.sweeps import run as sweep_run
from edgefl.sweeps.plan import COSIMULATED, REPRICED, plan_sweep

from conftest import make_scenario

torch.set_num_threads(1)

# Stacking the clients of several runs moves their rows in memory; for some shapes (the synthetic data's 60 inputs)
# the CPU's small-matrix kernels then round differently in the last bit (a few 1e-8 here). The Figure-4 shapes
# (784 inputs, batch 32) and the vmapped MLP give identical bytes.
TOLERANCE = 1e-6


def solo_and_together(scenarios):
    solo = [Simulation(s, record_trace=True).run(progress=False) for s in scenarios]
    sims = [Simulation(s, record_trace=True) for s in scenarios]
    batches = []
    real = SeedBatch

    def spy(executors):  # the batch run_together builds, kept to see how many stacked calls it made
        batches.append(real(executors))
        return batches[-1]

    seed_axis.SeedBatch = spy
    try:
        together = run_together(sims)
    finally:
        seed_axis.SeedBatch = real
    return solo, together, batches[0]


def differences(a, b) -> float:
    """The largest difference between two runs' metrics rows (inf when they differ in anything but floats)."""
    worst = 0.0
    assert len(a.metrics) == len(b.metrics)
    for row_a, row_b in zip(a.metrics, b.metrics):
        assert row_a.keys() == row_b.keys()
        for key, value in row_a.items():
            other = row_b[key]
            if isinstance(value, float) and isinstance(other, float):
                worst = max(worst, abs(value - other))
            elif value != other:
                return math.inf
    return worst


@pytest.mark.parametrize(
    "algorithm, model, exact",
    [
        ("fedavg", "linear", False),  # the closed form, a step of elementwise arithmetic
        ("drdm", "linear", False),  # the server's model in `shared` (per row), a snapshot step drawn per run
        ("scaffold", "linear", False),  # per-client control variates
        ("fedprox", "mlp", True),  # vmap's autograd path
    ],
)
def test_each_seed_equals_its_solo_run(algorithm, model, exact):
    scenarios = [make_scenario(algorithm, seed=seed, model=model, rounds=4) for seed in (1, 2, 3)]
    solo, together, batch = solo_and_together(scenarios)
    assert batch.stacked_calls == 4  # one batched training per round for the three runs
    for a, b in zip(solo, together):
        worst = differences(a, b)
        assert worst == 0.0 if exact else worst <= TOLERANCE, worst
        assert [(p.round, p.phase) for p in a.trace] == [(p.round, p.phase) for p in b.trace]
        assert torch.allclose(
            torch.tensor([r["loss"] for r in a.metrics]), torch.tensor([r["loss"] for r in b.metrics]), atol=TOLERANCE
        )
    assert differences(together[0], together[1]) > 0.01  # the seeds are different runs


def test_runs_that_cannot_be_stacked_train_one_after_the_other():
    """Different step counts are not stacked: each op trains alone and each run still equals its solo run."""
    scenarios = [make_scenario("fedavg", seed=1, local_steps=2), make_scenario("fedavg", seed=2, local_steps=3)]
    solo, together, batch = solo_and_together(scenarios)
    assert batch.stacked_calls == 0
    for a, b in zip(solo, together):
        assert differences(a, b) == 0.0


def test_run_seeds_trains_each_seed_group_together_and_the_rest_alone(monkeypatch):
    """The experiment scripts' way (edgefl.seed_axis.run_seeds): scenarios that differ only in run.seed train
    together, in order of their groups; each result is its solo run's, in the order given."""
    scenarios = [
        make_scenario("fedavg", seed=1, model="mlp", rounds=3),
        make_scenario("fedavg", seed=1, model="mlp", rounds=3, local_steps=2),  # another group (a lone run)
        make_scenario("fedavg", seed=2, model="mlp", rounds=3),
        make_scenario("fedavg", seed=3, model="mlp", rounds=3),
    ]
    calls = []
    real = seed_axis.run_together

    def spy(sims, run):
        calls.append([sim.parts.run.seed for sim in sims])
        return real(sims, run)

    monkeypatch.setattr(seed_axis, "run_together", spy)
    got = seed_axis.run_seeds(scenarios)
    assert calls == [[1, 2, 3], [1]]
    for scenario, result in zip(scenarios, got):
        assert differences(Simulation(scenario).run(progress=False), result) == 0.0  # vmapped mlp: exact
    monkeypatch.setattr(seed_axis, "SEEDS_TOGETHER", 2)
    calls.clear()
    seed_axis.run_seeds(scenarios, run=lambda sim: None)
    assert calls == [[1, 2], [3], [1]]  # at most seeds_at_once together


def test_a_failing_run_is_raised_and_the_others_stop():
    scenarios = [make_scenario("fedavg", seed=seed) for seed in (1, 2)]
    sims = [Simulation(s) for s in scenarios]

    def boom(*args, **kwargs):
        raise RuntimeError("the second run's data went away")

    sims[1].executor.prepare = boom
    with pytest.raises(RuntimeError, match="went away"):
        run_together(sims)
    assert sims[0].engine.executor is sims[0].executor  # the lanes are gone again


def test_each_run_thread_sets_the_callers_torch_thread_count(monkeypatch):
    """torch.set_num_threads holds for the thread that calls it (OpenMP's count is per thread): each run's thread sets
    the caller's count before its run, else its products ran on every core whatever run.threads said (measured on 2
    cores: a Figure-4 seed group's CPU 68-78 s with 2 threads per product, 59-66 s with the caller's 1)."""
    import threading

    calls = []
    real = torch.set_num_threads

    def spy(n):
        calls.append((threading.current_thread().name, n))
        real(n)

    before = torch.get_num_threads()
    real(1)
    try:
        monkeypatch.setattr(torch, "set_num_threads", spy)
        run_together([Simulation(make_scenario("fedavg", seed=seed)) for seed in (1, 2)])
    finally:
        real(before)
    lanes = sorted(name for name, _ in calls if name.startswith("edgefl-seed-"))
    assert lanes[:2] == ["edgefl-seed-0", "edgefl-seed-1"]
    assert all(n == 1 for name, n in calls if name.startswith("edgefl-seed-"))


def test_stacked_ops_with_different_scalars_are_not_stacked():
    """A step reads one learning rate for all its rows: ops whose shared scalars differ train apart."""
    sims = [Simulation(make_scenario("fedavg", seed=seed)) for seed in (1, 2)]
    jobs = [
        (
            sims[lane].executor,
            sims[lane].executor.prepare(
                Train(np.arange(4), sims[lane].algorithm.model, 2, sgd_step, shared={"lr": lr})
            ),
        )
        for lane, lr in enumerate((0.05, 0.1))
    ]
    assert stack_groups(jobs) == [[0], [1]]
    jobs[1][1].op.shared["lr"] = 0.05
    assert stack_groups(jobs) == [[0, 1]]


SWEEP = """
[run]
seed = 3
rounds = 3

[data]
name = "synthetic"
num_clients = 6
samples_per_client = 30

[algorithm]
name = "drdm"
local_steps = 2
clients_per_round = 4
lr = 0.05

[network]
snr_db = 10.0
bandwidth_mhz = 1.0

[sweep]
seeds = 3

[sweep.grid]
"network.snr_db" = [0, 20]
"algorithm.local_steps" = [2, 3]
"""


@pytest.mark.parametrize("mode", [REPRICED, COSIMULATED])
def test_a_sweep_trains_each_seed_group_together_with_the_solo_numbers(tmp_path, monkeypatch, mode):
    path = tmp_path / "sweep.toml"
    path.write_text(SWEEP + ("\n[devices]\np_fail = 0.2\n" if mode == COSIMULATED else ""))  # failures: co-simulated
    plan = plan_sweep(path)
    assert {p.mode for p in plan.points} == {mode}
    tasks = sweep_run.make_tasks(plan.points)
    runs = 2 if mode == REPRICED else 4  # per tau: one training re-priced for both SNRs, or a run per point
    assert [t.runs for t in tasks] == [3] * runs  # a task per seed group, its 3 seeds
    assert all(t.mode == mode for t in tasks)
    heaviest_first = [3] * (runs // 2) + [2] * (runs // 2)  # local steps (edgefl.sweeps.run.work)
    assert [t.scenario.algorithm.local_steps for t in tasks] == heaviest_first
    assert sum(len(t.points) for t in tasks) == 12
    monkeypatch.setattr(seed_axis, "SEEDS_TOGETHER", 2)
    assert [t.runs for t in sweep_run.make_tasks(plan.points)] == [2] * runs + [1] * runs  # at most 2 a job
    monkeypatch.undo()
    together = sweep_run.run_sweep(plan, tmp_path / "together", progress=False)
    monkeypatch.setattr(sweep_run, "run_together", lambda sims: [sim.run(progress=False) for sim in sims])
    solo = sweep_run.run_sweep(plan, tmp_path / "solo", progress=False)
    assert together.trainings == solo.trainings == 3 * runs
    rows = [list(csv.DictReader(open(summary.results))) for summary in (together, solo)]
    assert len(rows[0]) == len(rows[1]) == 12 * 3
    for a, b in zip(*rows):
        assert a.keys() == b.keys()
        for key in a:
            try:
                assert abs(float(a[key]) - float(b[key])) <= TOLERANCE * max(1.0, abs(float(b[key]))), key
            except ValueError:
                assert a[key] == b[key], key


FIGURE_4 = Path(__file__).resolve().parents[1] / "scenarios" / "energy-tau-sweep.toml"
MNIST = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "mnist"


@pytest.mark.skipif(not MNIST.is_dir(), reason="the MNIST test split is not in ../shared/datasets/mnist")
@pytest.mark.parametrize("block", [None, 7])
def test_the_figure_4_trainings_are_byte_identical_together(block, monkeypatch):
    """The Figure-4 study's shapes (MNIST, 784 inputs, batch 32, 20 clients a round, DRDM): each seed's numbers
    together are its solo run's, bit for bit; also where the stacked clients train in blocks of 7 (the linear
    path's cache blocks, Executor._train_batched), which cut across the runs' clients."""
    if block is not None:
        import edgefl.executor as executor_module

        monkeypatch.setattr(executor_module, "BLOCK_BYTES", block * 32 * 784 * 4)
    grid = ["network.snr_db=10", "network.bandwidth_mhz=1", "algorithm.local_steps=5"]
    plan = plan_sweep(FIGURE_4, ["run.rounds=3"], grid, seeds=3)
    solo, together, batch = solo_and_together([sweep_run.trainer(p.scenario) for p in plan.points])
    assert batch.stacked_calls == 3
    if batch.inputs is not None:  # (None on a CPU whose products round otherwise stacked: each run evaluates alone)
        assert batch.inputs.x.shape[0] == 10_000  # each seed's 80/20 cut of the same images
    # each round's evaluation of the three models in one call (the final: kept)
    assert batch.stacked_evaluations == (3 if batch.inputs is not None else 0)
    for a, b in zip(solo, together):
        assert a.metrics == b.metrics
        assert torch.equal(torch.tensor([r["loss"] for r in a.metrics]), torch.tensor([r["loss"] for r in b.metrics]))


# -- evaluations together (SeedBatch.evaluation_outputs) ------------------------------------------------------------


def _cut(pool_x, pool_y, seed: int, clients: int = 4, test_pool: int = 300):
    """One run's data as MNIST-10k's: the images cut its own way into a test pool and training rows (shuffled), each
    client's 250 test rows drawn from the pool."""
    from edgefl.data.federated import FederatedData, client_offsets

    g = torch.Generator().manual_seed(seed)
    order = torch.randperm(pool_x.shape[0], generator=g)
    test, train = order[:test_pool], order[test_pool:]
    rows = torch.randint(0, test_pool, (clients * 250,), generator=g).numpy()
    per_client = len(train) // clients
    return FederatedData(
        name="cut",
        num_classes=10,
        input_shape=(1, 28, 28),
        train_x=pool_x[train],
        train_y=pool_y[train],
        train_offsets=client_offsets([per_client] * (clients - 1) + [len(train) - per_client * (clients - 1)]),
        test_x=pool_x[test][rows],
        test_y=pool_y[test][rows],
        test_offsets=client_offsets([250] * clients),
        global_test_x=pool_x[test],
        global_test_y=pool_y[test],
        test_pool_rows=rows,
    )


def _runs_reading_one_pool(count: int = 3, model: str = "linear", pool: int = 7):
    from edgefl.executor import Executor
    from edgefl.models import build_model

    g = torch.Generator().manual_seed(pool)
    pool_x = torch.rand(1200, 1, 28, 28, generator=g) * (torch.rand(1200, 1, 28, 28, generator=g) > 0.7)
    pool_y = torch.randint(0, 10, (1200,), generator=g)
    runs = []
    for seed in range(count):
        data = _cut(pool_x, pool_y, seed)
        net = build_model(model, data.input_shape, 10, seed=seed, hidden=16)
        runs.append((net, data, Executor(net, data, batch_size=8, seed=seed)))
    models = [[net.init_params() + 0.1 * torch.randn(net.dim, generator=g) for _ in range(2)] for net, _, _ in runs]
    return runs, models


def _evaluated_in_lanes(batch: SeedBatch, runs, models):
    """Each run's evaluations of its models (edgefl.metrics), each run in its own thread as in run_together: (the
    outputs each lane was handed, the metrics) per run."""
    import threading

    from edgefl import metrics

    got: list = [None] * len(runs)

    def go(lane: int) -> None:
        net, data, _ = runs[lane]
        hook = batch.lane(lane).evaluation_outputs
        try:
            got[lane] = [
                (hook(w) if hook is not None else None, metrics._evaluate_global(net, data, w, hook))
                for w in models[lane]
            ]
        finally:
            batch.leave(lane)

    threads = [threading.Thread(target=go, args=(lane,)) for lane in range(len(runs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return got


def _same_metrics(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        np.array_equal(a[k], b[k]) if isinstance(a[k], np.ndarray) else a[k] == b[k] for k in a
    )


def _stacking_keeps_solo_bits(runs, models) -> bool:
    """Whether this machine's evaluation product gives each run's logits the same bits stacked on the union of the
    runs' inputs as alone on its own inputs (computed here apart from SharedInputs.keeps_solo_bits)."""
    from edgefl import metrics
    from edgefl.executor import LinearGrad

    linear = LinearGrad.of(runs[0][0])
    inputs = [[x.reshape(x.shape[0], -1) for x in metrics.evaluation_inputs(data)] for _, data, _ in runs]
    union = torch.unique(torch.cat([x for pair in inputs for x in pair]), dim=0)
    stacked = linear.logits(torch.stack(models), union)
    for model, pair, logits in zip(models, inputs, stacked):
        for x in pair:
            at = torch.cdist(x, union).argmin(dim=1)  # (the rows are distinct images: the nearest is the same)
            if not torch.equal(logits[:, at], linear.logits(model.unsqueeze(0), x)[0]):
                return False
    return True


def test_runs_are_evaluated_together_exactly_where_this_machine_keeps_each_runs_solo_bits():
    """What evaluating runs together rests on (LinearGrad.logits on one thread): a model's logits are the same bits
    stacked with other models or alone, and an input's whichever other inputs are computed with it. Most CPUs' MKL
    keeps them (the machines the suite runs on here); an Intel Xeon's did not, and a seed group then evaluates each
    run alone (SharedInputs.keeps_solo_bits): the batch's choice is this machine's property, computed apart."""
    runs, _ = _runs_reading_one_pool()
    g = torch.Generator().manual_seed(11)
    models = [0.05 * torch.randn(net.dim, generator=g) for net, _, _ in runs]
    batch = SeedBatch([executor for _, _, executor in runs])
    assert (batch.inputs is not None) == _stacking_keeps_solo_bits(runs, models)


def _round_otherwise(monkeypatch, counts) -> None:
    """Make the evaluation's product round otherwise (one ulp up) for a call of ``counts(models stacked)`` models, as
    another CPU's kernels might."""
    from edgefl.executor import LinearGrad

    product = LinearGrad.logits

    def rounding_otherwise(self, w, x, columns=1024):
        out = product(self, w, x, columns)
        return torch.nextafter(out, torch.full_like(out, math.inf)) if counts(w.shape[0]) else out

    monkeypatch.setattr(LinearGrad, "logits", rounding_otherwise)


def test_a_machine_whose_stacked_product_rounds_otherwise_evaluates_each_run_alone(monkeypatch):
    """Where the stacked product's bits differ from a model's alone (here: one ulp added to every stacked call),
    the seed group evaluates each run alone, and every run's metrics are its solo evaluation's."""
    from edgefl import metrics

    runs, models = _runs_reading_one_pool()
    solo = [[metrics._evaluate_global(net, data, w) for w in ws] for (net, data, _), ws in zip(runs, models)]
    _round_otherwise(monkeypatch, lambda count: count > 1)
    batch = SeedBatch([executor for _, _, executor in runs])
    assert batch.inputs is None
    got = _evaluated_in_lanes(batch, runs, models)
    assert batch.stacked_evaluations == 0
    for lane, alone in zip(got, solo):
        assert all(outputs is None and _same_metrics(m, one) for (outputs, m), one in zip(lane, alone))


def test_an_evaluation_of_fewer_runs_than_the_group_has_the_checked_shape(monkeypatch):
    """Runs of a group that ended leave fewer models to evaluate together: the call still stacks as many models as
    the group has (the shape the check probed), so a CPU whose product rounds otherwise for other shapes (here: one
    ulp added to any call of another count) still gives each run its solo bits."""
    from edgefl import metrics

    runs, models = _runs_reading_one_pool(3)
    solo = [[metrics._evaluate_global(net, data, w) for w in ws] for (net, data, _), ws in zip(runs, models)]
    _round_otherwise(monkeypatch, lambda count: count not in (1, 3))
    batch = SeedBatch([executor for _, _, executor in runs])
    assert batch.inputs is not None
    got = _evaluated_in_lanes(batch, runs, [models[0], models[1], []])  # (the third run has ended)
    assert batch.stacked_evaluations == 2 * 2
    for lane, alone in zip(got[:2], solo[:2]):
        assert all(_same_metrics(m, one) for (_, m), one in zip(lane, alone))


def test_runs_reading_the_same_images_are_evaluated_together_bit_for_bit():
    """Runs whose evaluations read the same images, each cut its own way (MNIST-10k's seeds): their linear models
    are evaluated in one call on the images held once (where this machine's product keeps each run's bits: above),
    and every run's outputs and metrics are its solo evaluation's, bit for bit."""
    from edgefl import metrics
    from edgefl.executor import LinearGrad

    runs, models = _runs_reading_one_pool()
    batch = SeedBatch([executor for _, _, executor in runs])
    together = batch.inputs is not None
    assert not together or batch.inputs.x.shape[0] == 1200  # the pool's images, once
    got = _evaluated_in_lanes(batch, runs, models)
    # each of the two rounds: once for the outputs, once in the metrics
    assert batch.stacked_evaluations == (2 * 2 if together else 0)
    for (net, data, _), ws, lane in zip(runs, models, got):
        linear = LinearGrad.of(net)
        for w, (outputs, evaluated) in zip(ws, lane):
            alone = [metrics.linear_outputs(net, linear, w, x) for x in metrics.evaluation_inputs(data)]
            if together:
                logits, columns = outputs
                assert all(torch.equal(a, metrics.outputs_of(net, logits, c)) for a, c in zip(alone, columns))
            assert _same_metrics(evaluated, metrics._evaluate_global(net, data, w))
    assert not _same_metrics(got[0][0][1], got[1][0][1])  # (different runs)


def test_the_evaluation_gives_the_same_bits_on_two_threads_alone_or_together():
    """The evaluation's product runs on one thread whatever torch's count (on two, MKL splits a 10-row product
    otherwise, and a stacked one otherwise again): on two threads each run's numbers, alone or evaluated with the
    other runs, are the ones of one thread; the process's thread count is left as it was."""
    from edgefl import metrics

    runs, models = _runs_reading_one_pool()
    torch.set_num_threads(1)
    alone = [[metrics._evaluate_global(net, data, w) for w in ws] for (net, data, _), ws in zip(runs, models)]
    torch.set_num_threads(2)  # (the autouse fixture restores the count)
    batch = SeedBatch([executor for _, _, executor in runs])
    got = _evaluated_in_lanes(batch, runs, models)
    assert batch.stacked_evaluations == (2 * 2 if batch.inputs is not None else 0) and torch.get_num_threads() == 2
    for (net, data, _), ws, lane, solo in zip(runs, models, got, alone):
        for w, (_, together), one in zip(ws, lane, solo):
            assert _same_metrics(together, one) and _same_metrics(metrics._evaluate_global(net, data, w), one)


def test_runs_that_read_other_images_or_are_not_linear_are_never_evaluated_together():
    mlps, _ = _runs_reading_one_pool(2, model="mlp")
    batch = SeedBatch([executor for _, _, executor in mlps])
    assert batch.inputs is None and batch.lane(0).evaluation_outputs is None
    other = [_runs_reading_one_pool(1, pool=pool)[0][0] for pool in (7, 8)]  # other images
    batch = SeedBatch([executor for _, _, executor in other])
    assert batch.inputs is None and batch.evaluation_outputs(0, other[0][0].init_params()) is None


def test_an_evaluation_does_not_keep_the_other_runs_train_ops_apart():
    """A run evaluating while another waits on its Train op (evaluations at other rounds): the evaluation is done
    first and the waiting op waits on, so the two runs' next ops still train together."""
    import threading

    from edgefl import metrics

    runs, models = _runs_reading_one_pool(2)
    batch = SeedBatch([executor for _, _, executor in runs])

    def go(lane: int) -> None:
        net, data, _ = runs[lane]
        try:
            if lane == 0:
                metrics._evaluate_global(net, data, models[0][0], batch.lane(0).evaluation_outputs)
            batch.lane(lane).train(Train(np.arange(4), models[lane][0], 2, sgd_step, shared={"lr": 0.05}))
        finally:
            batch.leave(lane)

    threads = [threading.Thread(target=go, args=(lane,)) for lane in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert batch.stacked_evaluations == 0 and batch.stacked_calls == 1
