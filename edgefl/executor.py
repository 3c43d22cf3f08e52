"""Numerics of client work: runs Train and Evaluate operations on real data.

Two interchangeable paths give the same numbers (tests check <= 1e-5):
- ``batched``: all selected clients at once, ``torch.func.vmap`` over the client axis of
  ``[C, d]`` parameter matrices, so one round is a handful of large tensor ops;
- ``loop``: the reference, one client after another with the same step function.

Minibatch indices come from one random stream drawn in the same order whichever path
runs, so a seed gives identical results for both. Sampling is uniform with replacement
within a client's training set, a fresh batch per step.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
from torch.func import grad, vmap

from algorithms.ops import Evaluate, Train, TrainResult
from edgefl.models import FlatModel

ExecutorMode = Literal["batched", "loop"]


class Executor:
    def __init__(self, model: FlatModel, data, batch_size: int, seed: int, mode: ExecutorMode = "batched"):
        if mode not in ("batched", "loop"):
            raise ValueError(f"unknown executor {mode!r}; use 'batched' or 'loop'")
        self.model = model
        self.data = data
        self.batch_size = batch_size
        self.mode = mode
        self.rng = np.random.default_rng(np.random.SeedSequence([seed, 0xBA7C4]))
        self._sizes = np.asarray(data.train_sizes, dtype=np.int64)
        self._offsets = np.asarray(data.train_offsets, dtype=np.int64)
        self._grad = grad(model.loss)
        self._batched_grad = vmap(self._grad)
        self._batched_loss = vmap(model.loss)

    # -- minibatches --------------------------------------------------------------------
    def sample_indices(self, clients: np.ndarray, steps: int, batch_size: int) -> torch.Tensor:
        """Global row indices [C, steps, B] into data.train_x: uniform within each client."""
        u = self.rng.random((len(clients), steps, batch_size))
        local = np.floor(u * self._sizes[clients][:, None, None]).astype(np.int64)
        return torch.from_numpy(self._offsets[clients][:, None, None] + local)

    # -- Train -------------------------------------------------------------------------
    def train(self, op: Train) -> TrainResult:
        clients = op.clients
        num = len(clients)
        batch = op.batch_size or self.batch_size
        idx = self.sample_indices(clients, op.steps, batch)
        start = op.start if op.start.dim() == 2 else op.start.expand(num, -1)
        mask = op.step_mask
        if mask is not None:
            mask = torch.as_tensor(mask, dtype=torch.bool)
            if mask.shape != (num, op.steps):
                raise ValueError(f"step_mask must be [clients, steps] = {(num, op.steps)}, got {tuple(mask.shape)}")
        if self.mode == "batched":
            params, carry, snapshot = self._train_batched(op, start, idx, mask)
        else:
            params, carry, snapshot = self._train_loop(op, start, idx, mask)
        steps_done = np.full(num, op.steps) if mask is None else mask.sum(dim=1).numpy()
        return TrainResult(params=params, carry=carry, snapshot=snapshot, steps_done=steps_done)

    def _train_batched(self, op: Train, start, idx, mask):
        x_all, y_all = self.data.train_x, self.data.train_y
        step = vmap(op.step, in_dims=(0, 0, 0, 0, None, None))
        w = start.clone()
        carry = {k: v.clone() for k, v in op.carry.items()}
        client_args = dict(op.client_args)
        shared = dict(op.shared)
        snapshot = None
        for k in range(op.steps):
            rows = idx[:, k]
            g = self._batched_grad(w, x_all[rows], y_all[rows])
            w_next, carry_next = step(w, g, carry, client_args, shared, k)
            if mask is not None:
                on = mask[:, k]
                w_next = torch.where(on[:, None], w_next, w)
                carry_next = {
                    name: torch.where(on.view(-1, *([1] * (v.dim() - 1))), v, carry[name])
                    for name, v in carry_next.items()
                }
            w, carry = w_next, carry_next
            if op.record_at == k + 1:
                snapshot = w.clone()
        return w, carry, snapshot

    def _train_loop(self, op: Train, start, idx, mask):
        x_all, y_all = self.data.train_x, self.data.train_y
        finals, snaps, carries = [], [], []
        for c in range(len(op.clients)):
            w = start[c].clone()
            carry = {k: v[c].clone() for k, v in op.carry.items()}
            client_args = {k: v[c] for k, v in op.client_args.items()}
            snap = None
            for k in range(op.steps):
                if mask is None or bool(mask[c, k]):
                    rows = idx[c, k]
                    g = self._grad(w, x_all[rows], y_all[rows])
                    w, carry = op.step(w, g, carry, client_args, dict(op.shared), k)
                if op.record_at == k + 1:
                    snap = w.clone()
            finals.append(w)
            snaps.append(snap)
            carries.append(carry)
        params = torch.stack(finals)
        snapshot = torch.stack(snaps) if op.record_at is not None else None
        carry = {k: torch.stack([cr[k] for cr in carries]) for k in op.carry}
        return params, carry, snapshot

    # -- Evaluate ----------------------------------------------------------------------
    def evaluate(self, op: Evaluate):
        clients = op.clients
        num = len(clients)
        params = op.params if op.params.dim() == 2 else op.params.expand(num, -1)
        if op.full:
            losses, grads = [], []
            for c, client in enumerate(clients):
                lo, hi = self._offsets[client], self._offsets[client + 1]
                x, y = self.data.train_x[lo:hi], self.data.train_y[lo:hi]
                losses.append(self.model.loss(params[c], x, y).detach())
                if op.what != "loss":
                    grads.append(self._grad(params[c], x, y))
            loss = torch.stack(losses)
            gradient = torch.stack(grads) if grads else None
        else:
            rows = self.sample_indices(clients, 1, op.batch_size or self.batch_size)[:, 0]
            x, y = self.data.train_x[rows], self.data.train_y[rows]
            if self.mode == "batched":
                loss = self._batched_loss(params, x, y).detach()
                gradient = self._batched_grad(params, x, y) if op.what != "loss" else None
            else:
                loss = torch.stack([self.model.loss(params[c], x[c], y[c]).detach() for c in range(num)])
                gradient = (
                    torch.stack([self._grad(params[c], x[c], y[c]) for c in range(num)])
                    if op.what != "loss"
                    else None
                )
        if op.what == "loss":
            return loss
        if op.what == "grad":
            return gradient
        return loss, gradient

    def samples_evaluated(self, op: Evaluate) -> np.ndarray:
        """How many samples each client processes for ``op`` (for pricing)."""
        if op.full:
            return self._sizes[op.clients].astype(float)
        return np.full(len(op.clients), float(op.batch_size or self.batch_size))
