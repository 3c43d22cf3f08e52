"""Runs that differ only in their seed, trained together on a seed axis.

The k runs of one training group (the same scenario but ``run.seed``: data partition, initial model, minibatches
and client sampling differ) go round by round in lock-step: each run in a thread of its own, with its own engine,
algorithm and random streams, exactly as when it runs alone; only its executor is replaced by a lane of a
:class:`SeedBatch`, where the Train ops of all runs meet. Once every run still going waits there, the ops that can
be trained together are: the clients of all runs stacked into one ``[sum C_s, d]`` batch, each run's minibatches
gathered from its own data (indices drawn from its own stream, as alone: :meth:`Executor.prepare`), one gradient
and one step per local step for all of them (:meth:`Executor._train_batched`), each run handed back its rows.
The evaluations of the global model meet there too, where the runs' models are linear and their evaluations read
the same images (:class:`SharedInputs`: MNIST-10k's seeds each cut the same 10,000 images 80/20 their own way):
the models are stacked into one product with those images, held once (edgefl.executor.LinearGrad.logits), and each
run gathers its own rows of it and computes its metrics in its own thread (edgefl.metrics, ``outputs``). That
product runs on one thread whatever torch's thread count, alone or stacked: there stacking leaves every run's
bits as they are alone, on the CPUs where the product's kernels round a model's rows and an input's column the same
whichever others share the call. Not every CPU's do (an Intel Xeon's MKL did not), so a seed group first checks it
on its own shapes (:meth:`SharedInputs.keeps_solo_bits`); where it fails, each run evaluates alone.
Everything else (the algorithm's server side, the engine) runs in the run's own thread on its own objects. So the
engine core is untouched: the seed axis is a hook on the executor. The stacking itself
(:func:`train_together`) also serves one run: the engine trains an asynchronous server's chains, dispatched one at a
time, together when one of them ends (edgefl.sim.engine, ``Engine.settle``).

Equality: the batched gradient is the same rows of the same ``bmm`` (the closed form for linear models) or of the
same vmapped forward, and the step function the same elementwise arithmetic (the server's model a step reads,
``shared``, given per row); an evaluation's logits the same rows and columns of the same ``addmm``.
tests/test_seed_axis.py checks each run's outputs against its solo run's: identical bytes for the Figure-4 study's
trainings and evaluations (MNIST, 784 inputs, batch 32) and a vmapped MLP; within 1e-6 (a few 1e-8
seen) where stacking moves a run's rows onto another kernel path of the CPU's small matrix products (60 inputs,
batch 8, 5 clients a run). Which runs share a call is fixed by the sweep (edgefl.sweeps.run.make_tasks), not by the
machine. On an Intel Xeon with AVX-512 (torch 2.11, 2026-11-28) the trainings' ``bmm`` gave the same bits stacked and
alone, but the evaluation's stacked product did not (the Figure-4 losses up to 8.6e-8 apart), hence the evaluation's
check below.

Cost (benchmarks/seed_axis.py, 10 seeds, CPU time): small models, where a step's call overhead is most of it, take
1.5-1.8x less CPU together; the Figure-4 trainings' local steps, mostly the bmm's arithmetic, take the same CPU
(within the loaded machine's 10 %), and less wall time where a second core is free (a run's torch kernels release
the GIL while another run's Python goes on). Their evaluations, 5 seeds together, about 1.5x less CPU than each
alone (benchmarks/evaluation.py; matching the images: about 0.1 s per seed group).

Ops that cannot be stacked train one after the other, as alone:
different step functions or step counts, a step mask (a controller's plan), scalars of ``shared`` that differ
between the runs, the per-client loop or threads (convolutional models on a CPU), or more clients than the memory
lets vmap train at once.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
import torch

from algorithms.ops import Train, TrainResult
from edgefl.executor import Executor, LinearGrad, PreparedTrain
from edgefl.memory import RUNTIME_BYTES, estimate_bytes
from edgefl.metrics import evaluation_inputs

if TYPE_CHECKING:
    from edgefl.scenario import Scenario

SEEDS_TOGETHER = 8  # at most this many runs of a seed group in one job (a 10-seed group: two jobs of 5)
SEEDS_MEMORY = 2 * 2**30  # bytes (edgefl.memory's estimate) that the runs of one job may take together


def seeds_at_once(scenario: Scenario) -> int:
    """How many runs of one seed group a job trains together: SEEDS_TOGETHER, fewer where their memory estimates
    (edgefl.memory) exceed SEEDS_MEMORY; at least 1. A constant of the scenario, not of the machine or the worker
    count: which runs share a batched call is the same everywhere (results.csv byte-identical whatever --workers)."""
    parts = estimate_bytes(scenario.data, scenario.model, scenario.algorithm)
    if parts is None:
        return 1
    per_run = sum(parts.values()) - RUNTIME_BYTES  # one torch runtime per process, not per run
    return max(1, min(SEEDS_TOGETHER, int(SEEDS_MEMORY // max(per_run, 1.0))))


STACKED = ("linear", "vmap")  # the strategies whose clients can be stacked across runs


class Cancelled(Exception):
    """Raised in a lane whose batch was cancelled (another lane, or the caller, stopped)."""


class SeedLane:
    """One run's executor inside a :class:`SeedBatch`: Train ops go to the batch, and so do a linear model's
    evaluations (their outputs computed with the other runs' where they read the same inputs:
    :meth:`SeedBatch.evaluation_outputs`); everything else to the run's own executor."""

    def __init__(self, batch: "SeedBatch", lane: int):
        self._batch, self._lane = batch, lane
        self._own = batch.executors[lane]
        linear = LinearGrad.of(self._own.model) is not None
        self.evaluation_outputs = self._evaluation_outputs if linear and len(batch.executors) > 1 else None

    def train(self, op: Train) -> TrainResult:
        return self._batch.train(self._lane, op)

    def _evaluation_outputs(self, w: torch.Tensor):
        return self._batch.evaluation_outputs(self._lane, w)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._own, name)


class SeedBatch:
    """Where the Train ops of k runs, each running in its own thread, meet and are trained together."""

    def __init__(self, executors: Sequence[Executor]):
        self.executors = list(executors)
        self._cond = threading.Condition()
        self._running = len(self.executors)  # lanes neither waiting here nor finished
        self._waiting: dict[int, Train | _Evaluation] = {}
        self._results: dict[int, Any] = {}
        self._cancelled = False
        self.stacked_calls = 0  # batched trainings of several runs' ops (for tests and benchmarks)
        self._inputs: SharedInputs | None | bool = False  # (False: not looked for yet)
        self.stacked_evaluations = 0  # evaluations of several runs' models in one call (for tests and benchmarks)

    def lane(self, lane: int) -> SeedLane:
        return SeedLane(self, lane)

    def train(self, lane: int, op: Train) -> TrainResult:
        return self._meet(lane, op)

    @property
    def inputs(self) -> "SharedInputs | None":
        """The inputs the runs' evaluations share (:class:`SharedInputs`; None: each run evaluates alone), looked for
        at the first evaluation."""
        if self._inputs is not False:  # (found: read without the lock, which a meeting's training may hold)
            return self._inputs  # type: ignore[return-value]
        with self._cond:
            if self._inputs is False:
                self._inputs = SharedInputs.of(self.executors)
            return self._inputs  # type: ignore[return-value]

    def evaluation_outputs(self, lane: int, w: torch.Tensor):
        """Lane ``lane``'s model ``w`` [d] evaluated with the other lanes' models (edgefl.metrics.Outputs): its
        transposed logits on the shared inputs and which of their columns its test and training inputs are (each
        column the same bits as alone: edgefl.executor.LinearGrad.logits); None where the runs share no inputs (each
        run then evaluates alone)."""
        inputs = self.inputs
        if inputs is None:
            return None
        return self._meet(lane, _Evaluation(w)), inputs.columns[lane]  # ([K, U], its test and training columns)

    def _meet(self, lane: int, request: "Train | _Evaluation") -> Any:
        """Wait until every lane still running waits here, then do what they asked together; lane's result."""
        with self._cond:
            if self._cancelled:
                raise Cancelled()
            self._waiting[lane] = request
            self._running -= 1
            if self._running == 0:
                self._flush()
            while lane not in self._results:
                self._cond.wait()
            result = self._results.pop(lane)
        if isinstance(result, BaseException):
            raise result
        return result

    def leave(self, lane: int) -> None:
        """Lane ``lane`` has finished (its run returned or raised): the others no longer wait for it."""
        with self._cond:
            self._running -= 1
            if self._running == 0 and self._waiting:
                self._flush()

    def cancel(self) -> None:
        with self._cond:
            self._cancelled = True
            for lane in self._waiting:
                self._results[lane] = Cancelled()
            self._running += len(self._waiting)
            self._waiting.clear()
            self._cond.notify_all()

    def _flush(self) -> None:
        """Do what the waiting lanes asked (all lanes still running are waiting: nothing else runs now), then wake
        them: the waiting evaluations, together, where there are any (the lanes waiting on a Train op wait on: the
        evaluated runs' next ops may then train with theirs, as without the evaluations' meeting); else every
        waiting Train op."""
        evaluations = {lane: r.w for lane, r in self._waiting.items() if isinstance(r, _Evaluation)}
        if evaluations:
            for lane in evaluations:
                del self._waiting[lane]
            self._evaluate(evaluations)
            self._running += len(evaluations)
            self._cond.notify_all()
            return
        ops: dict[int, Train] = self._waiting  # type: ignore[assignment]  # (no evaluation waits)
        self._waiting = {}
        prepared: dict[int, PreparedTrain] = {}
        for lane, op in sorted(ops.items()):
            try:
                prepared[lane] = self.executors[lane].prepare(op)
            except Exception as exc:  # noqa: BLE001 - the lane's own error, raised in its own thread
                self._results[lane] = exc
        lanes = list(prepared)
        results, stacked = train_together([(self.executors[lane], prepared[lane]) for lane in lanes])
        self._results.update(zip(lanes, results))  # (an error: raised in the lane's thread)
        self.stacked_calls += stacked
        self._running += len(ops)
        self._cond.notify_all()

    def _evaluate(self, models: dict[int, torch.Tensor]) -> None:
        """The transposed logits [K, U] of each lane's model on the shared inputs, all models in one call."""
        inputs = self.inputs
        assert inputs is not None
        lanes = sorted(models)
        stack = torch.stack([models[lane] for lane in lanes])
        if len(lanes) < len(self.executors):  # (runs that ended: zeros in their place, so that every call has the
            # shape SharedInputs.keeps_solo_bits checked; with fewer models the kernels might round otherwise)
            stack = torch.cat([stack, stack.new_zeros(len(self.executors) - len(lanes), stack.shape[1])])
        try:
            logits = inputs.linear.logits(stack, inputs.x)
        except Exception as exc:  # noqa: BLE001 - raised in each lane's thread
            self._results.update(dict.fromkeys(lanes, exc))
            return
        self._results.update((lane, logits[i]) for i, lane in enumerate(lanes))
        self.stacked_evaluations += len(lanes) > 1


@dataclass
class _Evaluation:
    """A lane's request at the meeting: its model ``w`` [d] evaluated with the others'."""

    w: torch.Tensor


# Shared inputs are evaluated together only when their union is at most this many times a run's own inputs (the
# stacked call costs about half a solo one per model and input on the CPU); a matter of speed only: the numbers are
# the same either way.
SHARED_SHARE = 1.5
# ... and every run's inputs are at least this many rows (a column's logits depend on the others computed with it
# below 12 columns on an AVX-512 CPU's MKL: LinearGrad.logits).
SHARED_MIN_ROWS = 256


@dataclass
class SharedInputs:
    """The inputs of several runs' evaluations (edgefl.metrics.evaluation_inputs), each distinct row once: ``x``
    [U, D]; ``columns[lane]``: (test, training) the rows of x that lane's inputs are, in order. MNIST-10k: each seed
    cuts the 10,000 images 80/20 its own way, and evaluates all of them (2,000 test-pool and 8,000 training rows):
    U = 10,000 for any number of seeds."""

    linear: LinearGrad
    x: torch.Tensor
    columns: list[tuple[torch.Tensor, torch.Tensor]]

    @classmethod
    def of(cls, executors: Sequence[Executor]) -> "SharedInputs | None":
        """The runs' shared inputs where their models are linear (the same LinearGrad shape, on the CPU), their
        inputs overlap enough (SHARED_SHARE, SHARED_MIN_ROWS) and this machine's products keep each run's solo bits
        (:meth:`keeps_solo_bits`), else None. Rows are matched by their bytes: a key of
        each row groups them, and each row is then compared bit for bit with the row it was matched to (MNIST-10k,
        5 seeds: about 0.1 s CPU, once per seed group)."""
        linears = [LinearGrad.of(executor.model) for executor in executors]
        first = linears[0]
        if len(executors) < 2 or first is None:
            return None
        shape = (first.K, first.D, first.loss_name)
        if any(g is None or (g.K, g.D, g.loss_name) != shape for g in linears):
            return None
        if any(executor.model.device.type != "cpu" for executor in executors):
            return None
        parts = [x.reshape(x.shape[0], -1).contiguous() for e in executors for x in evaluation_inputs(e.data)]
        sizes = [x.shape[0] for x in parts]
        if min(sizes) < SHARED_MIN_ROWS or any(x.dtype != torch.float32 for x in parts):
            return None
        own = max(a + b for a, b in zip(sizes[::2], sizes[1::2]))  # (test, training) of each run
        keys = np.concatenate([_row_keys(x) for x in parts])
        _, picked, where = np.unique(keys, return_index=True, return_inverse=True)
        if len(picked) > SHARED_SHARE * own:
            return None
        starts = np.concatenate([[0], np.cumsum(sizes)])
        x = torch.empty(len(picked), first.D)
        part_of = np.searchsorted(starts, picked, side="right") - 1
        for j, part in enumerate(parts):
            at = np.flatnonzero(part_of == j)
            if at.size:
                x.index_copy_(0, torch.from_numpy(at), part.index_select(0, torch.from_numpy(picked[at] - starts[j])))
        where = where.reshape(-1).astype(np.int64)
        for j, part in enumerate(parts):  # each row that x holds another run's copy of: the same bytes?
            lo, hi = starts[j], starts[j + 1]
            other = np.flatnonzero(picked[where[lo:hi]] != np.arange(lo, hi))
            rows = None if other.size == hi - lo else torch.from_numpy(other)
            if not _same_rows(x, torch.from_numpy(where[lo:hi][other]), part, rows):
                return None  # distinct rows with equal keys (never seen): each run then evaluates alone
        columns = [torch.from_numpy(where[lo:hi]) for lo, hi in zip(starts[:-1], starts[1:])]
        shared = cls(first, x, list(zip(columns[::2], columns[1::2])))
        return shared if shared.keeps_solo_bits(parts) else None  # (else each run evaluates alone)

    def keeps_solo_bits(self, parts: Sequence[torch.Tensor]) -> bool:
        """Whether each run's columns of the stacked product are, on this machine, the bits of its solo evaluation
        (LinearGrad.logits of its model alone on its own inputs ``parts``: test, training of each run), probed once
        with random models of the runs' shape (the rounding follows the products' shapes and the CPU's kernels, not
        the values). True on the machines the suite runs on here (torch 2.13's MKL; AMD EPYC, AVX2); false on an Intel
        Xeon with AVX-512 and torch 2.11 (stacked and solo logits up to 2.6e-6 apart: docs/performance.md).
        Costs one stacked and one solo evaluation per run, once per seed group."""
        generator = torch.Generator().manual_seed(0x5EED)
        models = 0.05 * torch.randn(len(self.columns), self.linear.dim, generator=generator)
        stacked = self.linear.logits(models, self.x)
        for lane, columns in enumerate(self.columns):
            for own, at in zip(parts[2 * lane : 2 * lane + 2], columns):
                alone = self.linear.logits(models[lane : lane + 1], own)[0]
                if not torch.equal(stacked[lane].index_select(1, at), alone):
                    return False
        return True


def _row_keys(x: torch.Tensor) -> np.ndarray:
    """A key [n] int64 of each row: the bits of two random projections (float32). Equal rows get equal keys
    wherever they are (were it otherwise somewhere, such rows would only be held twice); rows with equal keys are
    compared bit for bit after."""
    probe = torch.randn(x.shape[1], 2, generator=torch.Generator().manual_seed(0x5EED))
    return torch.mm(x, probe).view(torch.int64).reshape(-1).numpy()


def _same_rows(x: torch.Tensor, columns: torch.Tensor, part: torch.Tensor, rows: torch.Tensor | None, chunk=1024):
    """Whether ``part``'s rows ``rows`` (None: all) are, bit for bit, the rows ``columns`` of ``x``."""
    bits, mine = x.view(torch.int32), part.view(torch.int32)
    for lo in range(0, columns.shape[0], chunk):
        theirs = bits.index_select(0, columns[lo : lo + chunk])
        if not torch.equal(
            theirs, mine[lo : lo + chunk] if rows is None else mine.index_select(0, rows[lo : lo + chunk])
        ):
            return False
    return True


Job = tuple[Executor, PreparedTrain]  # a prepared op and the executor it was prepared by (its data, its device)


def train_together(jobs: Sequence[Job]) -> tuple[list[TrainResult | BaseException], int]:
    """Train the prepared ops, those that can be stacked (:func:`stack_groups`) in one batched call, the others one
    after another as alone; each op's result (or the exception training it alone raised), and the number of
    stacked calls. A SeedBatch trains several runs' ops so; an engine, the chains an asynchronous server
    dispatched one at a time (edgefl.sim.engine)."""
    results: list[TrainResult | BaseException | None] = [None] * len(jobs)
    stacked = 0
    for group in stack_groups(jobs):
        if len(group) > 1:
            try:
                results_of = _train_stacked([jobs[i] for i in group])
            except Exception:  # noqa: BLE001 - each op alone then: its own error, if any, from its own run
                pass
            else:
                for i, result in zip(group, results_of):
                    results[i] = result
                stacked += 1
                continue
        for i in group:
            executor, p = jobs[i]
            try:
                results[i] = executor.result_of(p, *executor.run_prepared(p))
            except Exception as exc:  # noqa: BLE001 - the op's own error, for its caller to raise
                results[i] = exc
    return results, stacked  # type: ignore[return-value]  # (every job has its result)


def stack_groups(jobs: Sequence[Job]) -> list[list[int]]:
    """The jobs (by index) whose ops train together, in order; a vmap group holds at most as many clients as vmap
    trains at once (Executor.clients_at_once: the memory)."""
    groups: list[list[int]] = []
    keys: list[tuple | None] = []
    clients: list[int] = []
    for j, (executor, p) in enumerate(jobs):
        key, size = _stack_key(p), len(p.op.clients)
        limit = executor.clients_at_once() if p.strategy == "vmap" else None
        for i, group in enumerate(groups):
            fits = limit is None or clients[i] + size <= limit
            if key is not None and keys[i] == key and fits and _same_scalars(jobs[group[0]][1], p):
                group.append(j)
                clients[i] += size
                break
        else:
            groups.append([j])
            keys.append(key)
            clients.append(size)
    return groups


def _train_stacked(jobs: Sequence[Job]) -> list[TrainResult]:
    """The ops' clients stacked into one batch, trained in one call; each op's result."""
    lead, first = jobs[0]
    sizes = [len(p.op.clients) for _, p in jobs]
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    spans = [slice(int(lo), int(hi)) for lo, hi in zip(bounds[:-1], bounds[1:])]
    total = int(bounds[-1])
    cat = lambda values: torch.cat(list(values))  # noqa: E731
    shared, per_row = {}, set()
    for name, value in first.op.shared.items():
        if isinstance(value, torch.Tensor) and value.dim() > 0:  # e.g. the server's model: one per op
            per_row.add(name)
            shared[name] = cat(p.op.shared[name].expand(size, *value.shape) for (_, p), size in zip(jobs, sizes))
        else:  # a scalar, the same in every op (_same_scalars)
            shared[name] = value
    op = Train(
        clients=np.arange(total),
        start=cat(p.start for _, p in jobs),
        steps=first.op.steps,
        step=first.op.step,
        carry={k: cat(p.op.carry[k] for _, p in jobs) for k in first.op.carry},
        client_args={k: cat(p.op.client_args[k] for _, p in jobs) for k in first.op.client_args},
        shared=shared,
        batch_size=first.op.batch_size,
    )
    record = [p.op.record_at for _, p in jobs]
    record_at = None
    if any(r is not None for r in record):
        record_at = torch.from_numpy(np.repeat([r or 0 for r in record], sizes))
    idx = cat(p.idx for _, p in jobs)
    gather = _stacked_gather([executor for executor, _ in jobs], spans, lead)
    params, carry, snapshot = lead._train_batched(
        op, op.start, idx, None, gather=gather, record_at=record_at, per_row=frozenset(per_row)
    )
    results = []
    for (executor, p), span, at in zip(jobs, spans, record):
        kept = None if snapshot is None or at is None or at > p.op.steps else snapshot[span]
        results.append(executor.result_of(p, params[span], {k: v[span] for k, v in carry.items()}, kept))
    return results


def _stack_key(p: PreparedTrain) -> tuple | None:
    """What ops must share to be stacked (None: this op trains alone)."""
    op = p.op
    if p.strategy not in STACKED or p.mask is not None:
        return None
    tensors = lambda d: tuple((k, tuple(v.shape[1:]), v.dtype) for k, v in sorted(d.items()))  # noqa: E731
    shared = []
    for k, v in sorted(op.shared.items()):
        if isinstance(v, torch.Tensor):
            shared.append((k, tuple(v.shape), v.dtype))
        elif isinstance(v, (bool, int, float)):
            shared.append((k, type(v)))
        else:
            return None
    return (
        p.strategy,
        op.step,
        op.steps,
        tuple(p.idx.shape[1:]),
        tuple(p.start.shape[1:]),
        p.start.dtype,
        tensors(op.carry),
        tensors(op.client_args),
        tuple(shared),
    )


def _same_scalars(a: PreparedTrain, b: PreparedTrain) -> bool:
    """Whether the scalars of the two ops' ``shared`` are equal (a step reads one value for all its rows)."""
    for name, value in a.op.shared.items():
        other = b.op.shared[name]
        if isinstance(value, torch.Tensor):
            if value.dim() == 0 and not torch.equal(value, other):
                return False
        elif value != other:
            return False
    return True


def _stacked_gather(executors: list[Executor], spans: list[slice], lead: Executor) -> Callable:
    """The minibatches of stacked clients (``rows`` [n, B] of the clients first .. first + n - 1 of the [sum C_s]
    stacked, each run's rows into its own data), gathered into one buffer, ``out`` when given (the ops of one
    executor: its own gather, one index_select)."""
    if all(executor is lead for executor in executors):
        return lead._gather

    def gather(rows: torch.Tensor, out: tuple[torch.Tensor, torch.Tensor] | None = None, first: int = 0):
        x, y = lead._batch_buffers(rows.shape) if out is None else out
        last = first + rows.shape[0]
        for executor, span in zip(executors, spans):
            lo, hi = max(span.start, first) - first, min(span.stop, last) - first  # the run's rows among them
            if lo >= hi:
                continue
            part = rows[lo:hi].reshape(-1).to(executor.device)
            n = part.shape[0]
            torch.index_select(executor._x, 0, part, out=x[lo:hi].view(n, *lead._x.shape[1:]))
            torch.index_select(executor._y, 0, part, out=y[lo:hi].view(n))
        return x, y

    return gather


def quietly(sim):
    """A run without its progress bar (run_together's and run_seeds' default)."""
    return sim.run(progress=False)


def run_together(simulations: Sequence, run: Callable[[Any], Any] = quietly) -> list:
    """``[run(sim) for sim in simulations]``, the simulations' Train ops trained together (see the module's
    docstring): each run in a thread of its own, its executor a lane of one :class:`SeedBatch`. The first error of
    a run is raised once every run has ended (the others are cancelled at their next Train op)."""
    sims = list(simulations)
    if len(sims) <= 1:
        return [run(sim) for sim in sims]
    batch = SeedBatch([sim.engine.executor for sim in sims])
    results: list = [None] * len(sims)
    errors: list[BaseException | None] = [None] * len(sims)
    threads_each = torch.get_num_threads()

    def go(lane: int) -> None:
        # torch's thread count is the caller's (run.threads) in this thread too: set_num_threads holds for the thread
        # that calls it (OpenMP's count is per thread), and a new thread's products otherwise ran on every core (half
        # the Figure-4 study in one process on 2 cores: 68-78 s of CPU, 59-66 s so; the bits the same either way;
        # docs/performance.md, "Issue 30, twelfth pass")
        torch.set_num_threads(threads_each)
        try:
            results[lane] = run(sims[lane])
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            errors[lane] = exc
            batch.cancel()
        finally:
            batch.leave(lane)

    for lane, sim in enumerate(sims):
        sim.engine.executor = batch.lane(lane)
    threads = [
        threading.Thread(target=go, args=(lane,), name=f"edgefl-seed-{lane}", daemon=True) for lane in range(len(sims))
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    except BaseException:
        batch.cancel()
        raise
    finally:
        for sim, executor in zip(sims, batch.executors):
            sim.engine.executor = executor
    first = next((e for e in errors if e is not None and not isinstance(e, Cancelled)), None)
    if first is None:
        first = next((e for e in errors if e is not None), None)
    if first is not None:
        raise first
    return results


def seedless(scenario: Scenario | dict) -> str:
    """What a run depends on but its seed (a scenario, or a scenario's dict as a file holds it): runs with equal
    values differ only in ``run.seed`` (a seed group)."""
    raw = scenario.model_dump(mode="json") if not isinstance(scenario, dict) else scenario
    return json.dumps({**raw, "run": {k: v for k, v in raw.get("run", {}).items() if k != "seed"}}, sort_keys=True)


def run_seeds(scenarios: Sequence[Scenario], run: Callable[[Any], Any] = quietly) -> list:
    """``[run(Simulation(s)) for s in scenarios]``, the runs of each seed group among them (scenarios that differ
    only in ``run.seed``) trained together (:func:`run_together`), at most :func:`seeds_at_once` at a time; a
    scenario alone in its group runs alone. Each run's results are its solo run's (the module's docstring)."""
    from edgefl.runner import Simulation  # (the runner imports the engine, which this module's users may not need)

    groups: dict[str, list[int]] = {}
    for i, scenario in enumerate(scenarios):
        groups.setdefault(seedless(scenario), []).append(i)
    results: list = [None] * len(scenarios)
    for members in groups.values():
        size = seeds_at_once(scenarios[members[0]])
        for lo in range(0, len(members), size):
            chunk = members[lo : lo + size]
            for i, result in zip(chunk, run_together([Simulation(scenarios[i]) for i in chunk], run)):
                results[i] = result
    return results
