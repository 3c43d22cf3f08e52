"""Partial model averaging (Lee, Sahu, He, Avestimehr) and its periodic-averaging baseline.

Paper: "Partial Model Averaging in Federated Learning: Performance Guarantees and Benefits",
section "Partial Model Averaging Framework" (Algorithm 1).
The d model values are split once into tau disjoint subsets
S_0..S_{tau-1} (~d/tau values each). One round = tau iterations. Every iteration k:
    each active worker takes one local step on its own model and minibatch;
    j = k mod tau; each worker uploads x_k^i[S_j]; the server averages them and sends
    the average back; each worker sets x_k^i[S_j] to it (other values stay local).
So every value is averaged exactly once per round, in tau small messages each way.
``periodic_avg`` (the baseline, eq. 3): tau local steps, then one upload and one download of all
d values. Same compute and same volume per round; partial sends tau x more messages.
With tau = 1 both are the same algorithm (same ops, same trajectory).

Local optimiser: SGD with momentum and weight decay (w <- w - eta (m), m <- beta m + g + wd w);
momentum stays on the worker, is never transmitted, and is zeroed when a worker (re)joins or
receives a replica. Averages are uniform (1/m) over the uploads that arrived (or by data size).
The model evaluated each round is the virtual average u = mean_i x^i (not charged: the final full
average is one model upload per worker, which the cost ledger leaves out).

Partitions (``partition``; ``ctx.param_layout`` gives the tensors, else one tensor of d rows):
- channel (default): every tensor's dim-0 rows are split with tensor_split(arange(n0), tau);
  block b of the t-th tensor goes to subset (b + t) mod tau; a 0-dim tensor to t mod tau;
- layer: a unit is a module's tensors (names sharing the prefix before the last '.'); units,
  largest first (ties by order), go to the lightest of tau bins; while there are fewer units than
  tau or a unit exceeds 2 d / tau, the largest unit is split in two along dim 0 and the packing
  is redone.
``partition_imbalance`` = max_j d_j / (d / tau) is reported as a metric.

Partial participation (clients_per_round m < N; the paper's cross-edge scheme): the partial
method keeps m model replicas on an active set; every ``redistribute_every`` rounds (default
tau - 1: the paper's tau' = tau + 1 with re-distribution every tau rounds) a new active set is
drawn uniformly; each outgoing worker uploads its full model and each incoming worker downloads
one: 'replica' hands each un-averaged replica to a new worker by random permutation (design 2,
the paper's main results), 'average' gives all of them the replicas' average (design 1).
The periodic baseline draws a new active set every round and sends it the global model.
"""

from __future__ import annotations

from typing import Literal, Optional

import numpy as np
from pydantic import Field

from algorithms.base import Algorithm, HyperParams, weighted_mean
from algorithms.ops import Broadcast, Train, Upload


class PartialAvgParams(HyperParams):
    scheme: Literal["partial", "periodic"] = Field(
        "partial",
        description="partial: 1/tau of the values every iteration; periodic: all values every tau iterations.",
    )
    partition: Literal["channel", "layer"] = Field("channel", description="How the values are split into tau subsets.")
    momentum: float = Field(0.0, ge=0, lt=1, description="Local SGD momentum (kept local, never sent).")
    weight_decay: float = Field(0.0, ge=0, description="L2 weight decay added to the gradient.")
    weighting: Literal["uniform", "data_size"] = Field("uniform", description="Average weights: 1/m or n_i/n.")
    redistribution: Literal["replica", "average"] = Field(
        "replica", description="m < N: hand replicas over un-averaged (design 2) or averaged (design 1)."
    )
    redistribute_every: Optional[int] = Field(
        None, ge=1, description="m < N, partial: rounds between active-set changes (default tau - 1, at least 1)."
    )


class PeriodicAvgParams(PartialAvgParams):
    scheme: Literal["partial", "periodic"] = Field(
        "periodic",
        description="partial: 1/tau of the values every iteration; periodic: all values every tau iterations.",
    )


def momentum_step(w, grad, carry, client, shared, k):
    """Local SGD with momentum and weight decay (PyTorch convention)."""
    g = grad + shared["weight_decay"] * w
    m = shared["momentum"] * carry["m"] + g
    return w - shared["lr"] * m, {"m": m}


# -- partitions -----------------------------------------------------------------------------
def _layout(layout, dim):
    if not layout:
        return [("params", (dim,))]
    return [(name, tuple(shape)) for name, shape in layout]


def _row_ranges(offset: int, shape: tuple[int, ...], rows: np.ndarray) -> np.ndarray:
    """Flat coordinates of the given dim-0 rows of a tensor stored at ``offset``."""
    if len(shape) == 0:
        return np.array([offset], dtype=np.int64)
    row = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    if len(rows) == 0:
        return np.zeros(0, dtype=np.int64)
    return (offset + rows[:, None] * row + np.arange(row)[None, :]).reshape(-1)


def channel_partition(layout, dim: int, tau: int) -> list[np.ndarray]:
    subsets: list[list[np.ndarray]] = [[] for _ in range(tau)]
    offset = 0
    for t, (_, shape) in enumerate(_layout(layout, dim)):
        size = int(np.prod(shape)) if shape else 1
        if len(shape) == 0:
            subsets[t % tau].append(np.array([offset], dtype=np.int64))
        else:
            for b, rows in enumerate(np.array_split(np.arange(shape[0]), tau)):
                subsets[(b + t) % tau].append(_row_ranges(offset, shape, rows))
        offset += size
    return [np.sort(np.concatenate(s)) if s else np.zeros(0, dtype=np.int64) for s in subsets]


def layer_partition(layout, dim: int, tau: int) -> list[np.ndarray]:
    # units: (order, [(offset, shape, rows)]) grouped by module prefix
    units: dict[str, list] = {}
    offset = 0
    for name, shape in _layout(layout, dim):
        prefix = name.rsplit(".", 1)[0] if "." in name else name
        rows = np.arange(shape[0]) if shape else np.zeros(0, dtype=np.int64)
        units.setdefault(prefix, []).append((offset, shape, rows))
        offset += int(np.prod(shape)) if shape else 1
    unit_list: list[tuple[tuple[int, ...], list]] = [((i,), parts) for i, parts in enumerate(units.values())]

    def coords(parts):
        out = [_row_ranges(o, sh, r) if sh else np.array([o], dtype=np.int64) for o, sh, r in parts]
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)

    def splittable(parts):
        return any(sh and len(r) > 1 for _, sh, r in parts)

    while True:
        sizes = [len(coords(p)) for _, p in unit_list]
        largest = int(np.argmax(sizes))
        need = len(unit_list) < tau or sizes[largest] > 2 * dim / tau
        if not need or not splittable(unit_list[largest][1]):
            break
        order, parts = unit_list.pop(largest)
        first, second = [], []
        for o, sh, r in parts:
            if sh and len(r) > 1:
                half = len(r) // 2
                first.append((o, sh, r[:half]))
                second.append((o, sh, r[half:]))
            else:
                first.append((o, sh, r))
        unit_list[largest:largest] = [(order + (0,), first), (order + (1,), second)]
        unit_list.sort(key=lambda u: u[0])
    # greedy packing: largest first (ties by order), into the lightest bin (ties: lowest index)
    ranked = sorted(unit_list, key=lambda u: (-len(coords(u[1])), u[0]))
    bins: list[list[np.ndarray]] = [[] for _ in range(tau)]
    loads = np.zeros(tau, dtype=np.int64)
    for _, parts in ranked:
        c = coords(parts)
        j = int(np.argmin(loads))
        bins[j].append(c)
        loads[j] += len(c)
    return [np.sort(np.concatenate(b)) if b else np.zeros(0, dtype=np.int64) for b in bins]


def build_partition(kind: str, layout, dim: int, tau: int) -> list[np.ndarray]:
    parts = channel_partition(layout, dim, tau) if kind == "channel" else layer_partition(layout, dim, tau)
    allc = np.concatenate(parts)
    if len(allc) != dim or not np.array_equal(np.sort(allc), np.arange(dim)):
        raise AssertionError("partition is not an exact cover of the model's values")
    return parts


class PartialAvg(Algorithm):
    name = "partial_avg"
    no_compression = (
        "its workers upload coordinates of the models they keep training (no update relative to "
        "a model the server knows)"
    )
    Params = PartialAvgParams

    @classmethod
    def check_scenario(cls, scenario) -> None:
        if scenario.algorithm.over_selection > 0:  # its m workers keep their models across rounds ([m, d])
            raise ValueError(
                f"algorithm.over_selection = {scenario.algorithm.over_selection:g}: {cls.name}'s m workers keep "
                "training their own models across rounds, so it cannot select more than m and drop the late ones; "
                "set algorithm.over_selection = 0"
            )

    def __init__(self, ctx):
        import torch

        super().__init__(ctx)
        hp = self.hp
        self.tau = ctx.local_steps
        self.subsets = [torch.from_numpy(s) for s in build_partition(hp.partition, ctx.param_layout, ctx.dim, self.tau)]
        self.subset_bits = [len(s) * ctx.bits_per_param for s in self.subsets]
        self.imbalance = max(len(s) for s in self.subsets) / (ctx.dim / self.tau)
        self.full = ctx.clients_per_round >= ctx.num_clients
        self.m = ctx.num_clients if self.full else ctx.clients_per_round
        self.active = np.arange(ctx.num_clients) if self.full else ctx.sample(self.m)
        self.x = ctx.init_params.expand(self.m, -1).clone()  # [m, d] the workers' models
        self.global_w = ctx.init_params.clone()  # periodic with m < N: the last average
        self.mom = torch.zeros_like(self.x)
        self.iteration = 0  # k, iterations done
        self.avg_counts = torch.zeros(ctx.dim, dtype=torch.int64)  # how often each value was averaged
        every = hp.redistribute_every if hp.redistribute_every is not None else max(1, self.tau - 1)
        self.redistribute_every = every
        self.peak = 0.0  # largest discrepancy of the last round, measured before each averaging

    # -- helpers ----------------------------------------------------------------------------
    def _weights(self, clients):
        return self.ctx.train_sizes[clients] if self.hp.weighting == "data_size" else None

    def _shared(self):
        return {"lr": self.ctx.lr, "momentum": self.hp.momentum, "weight_decay": self.hp.weight_decay}

    def _train(self, steps):
        result = yield Train(
            self.active, self.x, steps, momentum_step, shared=self._shared(), carry={"m": self.mom}, uploads=()
        )  # the workers keep their models
        self.x, self.mom = result.params, result.carry["m"]

    def _discrepancy(self) -> float:
        """(1/m) sum_i ||u - x^i||^2 of the workers' current models."""
        u = weighted_mean(self.x, self._weights(self.active))
        return float(((self.x - u) ** 2).sum(dim=1).mean())

    def _average(self, coords, arrived):
        """Set coords of every active model to the average over the arrived uploads."""
        if not arrived.any():
            return
        avg = weighted_mean(self.x[arrived][:, coords], self._weights(self.active[arrived]))
        x = self.x.clone()
        x[:, coords] = avg
        self.x = x
        self.avg_counts[coords] += 1

    # -- rounds -----------------------------------------------------------------------------
    def round(self, r):
        if self.hp.scheme == "periodic":
            yield from self._periodic_round(r)
        else:
            yield from self._partial_round(r)

    def _partial_round(self, r):
        ctx = self.ctx
        if r == 0:
            yield Broadcast(self.active, ctx.model_bits)  # w_0 to every worker
        elif not self.full and r % self.redistribute_every == 0:
            yield from self._redistribute()
        self.peak = 0.0
        for _ in range(self.tau):
            yield from self._train(1)
            self.peak = max(self.peak, self._discrepancy())
            self.iteration += 1
            j = self.iteration % self.tau
            arrived = yield Upload(self.active, self.subset_bits[j])
            self._average(self.subsets[j], arrived)
            yield Broadcast(self.active, self.subset_bits[j])

    def _redistribute(self):
        import torch

        ctx = self.ctx
        arrived = yield Upload(self.active, ctx.model_bits)  # outgoing workers hand their replicas in
        new = ctx.sample(self.m)
        if self.hp.redistribution == "average":
            if arrived.any():
                avg = weighted_mean(self.x[arrived], self._weights(self.active[arrived]))
                self.x = avg.expand(self.m, -1).clone()
        else:
            self.x = self.x[torch.from_numpy(ctx.rng.permutation(self.m))]
        self.active = new
        self.mom = torch.zeros_like(self.x)
        yield Broadcast(self.active, ctx.model_bits)

    def _periodic_round(self, r):
        import torch

        ctx = self.ctx
        if not self.full:  # a new active set every round, starting from the global model
            if r > 0:
                self.active = ctx.sample(self.m)
                self.x = self.global_w.expand(self.m, -1).clone()
            self.mom = torch.zeros_like(self.x)
            yield Broadcast(self.active, ctx.model_bits)
        elif r == 0:
            yield Broadcast(self.active, ctx.model_bits)
        yield from self._train(self.tau)
        self.peak = self._discrepancy()  # the top of periodic averaging's sawtooth
        self.iteration += self.tau
        arrived = yield Upload(self.active, ctx.model_bits)
        self._average(torch.arange(ctx.dim), arrived)
        if arrived.any():
            self.global_w = self.x[0].clone()
        if self.full:
            yield Broadcast(self.active, ctx.model_bits)

    # -- what is evaluated ------------------------------------------------------------------
    @property
    def model(self):
        return weighted_mean(self.x, self._weights(self.active))

    def metrics(self):
        """discrepancy: at the end of the round (periodic: right after averaging, 0); discrepancy_peak:
        the largest value in the round, measured after the local steps and before averaging."""
        return {
            "discrepancy": self._discrepancy(),
            "discrepancy_peak": self.peak,
            "partition_imbalance": self.imbalance,
            "iterations": self.iteration,
        }


class PeriodicAvg(PartialAvg):
    name = "periodic_avg"
    Params = PeriodicAvgParams
