"""Numerics of client work: runs Train and Evaluate operations on real data.

Two interchangeable paths give the same numbers (tests check <= 1e-5):
- ``batched``: all selected clients at once, as ``[C, d]`` parameter matrices, so one
  local step of every client is a handful of large tensor ops;
- ``loop``: the reference, one client after another with the same step function and
  ``torch.func.grad`` of the model's loss.

How the batched path computes a step (docs/performance.md has the measurements), by model:
- ``linear``/``regression`` (flatten -> Linear, cross-entropy or MSE): loss and gradient in
  closed form, two ``bmm`` per step for all clients (:class:`LinearGrad`);
- other models without convolutions (``mlp``): the module's forward mapped over the clients
  with ``vmap``, one autograd backward into per-parameter leaves (:class:`VmapGrad`);
- convolutional models (``cnn``): vmap would turn the clients' convolutions into one grouped
  convolution, several times slower on CPU than one convolution per client; instead the
  clients run in parallel threads, each op single-threaded (:meth:`Executor._in_threads`);
- minibatches: one ``index_select`` per step for all clients;
- the algorithm's step function, written for ONE client: called once on the whole
  ``[C, d]`` batch when it only does elementwise arithmetic (checked on every call by
  :class:`_ElementwiseOnly`, which stops at the first other operation), else mapped
  with ``torch.func.vmap``. Both give the per-client result; the direct call saves
  vmap's per-op wrapping, which costs more than the arithmetic at these sizes.

Minibatch indices come from one random stream drawn in the same order whichever path
runs, so a seed gives identical results for both. Sampling is uniform with replacement
within a client's training set, a fresh batch per step.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from copy import deepcopy
from typing import Literal

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, grad, vmap
from torch.overrides import TorchFunctionMode

from algorithms.ops import Evaluate, Train, TrainResult
from edgefl.models import FlatModel, output_loss

ExecutorMode = Literal["batched", "loop"]


# -- the linear fast path ---------------------------------------------------------------
class LinearGrad:
    """Loss and gradient of flatten -> Linear(D, K) models for C clients at once, in closed form.

    Flat layout (as ``FlatModel``): ``w[:K*D]`` is the weight [K, D] row-major, ``w[K*D:]``
    the bias [K]. Cross-entropy: dlogits = (softmax - onehot) / B; MSE (K = 1, output
    squeezed): dout = 2 (out - y) / B. With logits kept as [C, K, B]: dW = dlogits x (one bmm)
    and db = sum over the batch of dlogits.
    """

    def __init__(self, num_out: int, num_in: int, loss: str):
        self.K, self.D, self.loss_name = num_out, num_in, loss
        self.dim = num_out * num_in + num_out

    @classmethod
    def of(cls, model: FlatModel) -> "LinearGrad | None":
        """The fast path for ``model`` if it is flatten -> Linear with CE or MSE, else None."""
        mod = model.module
        if not (
            isinstance(mod, nn.Sequential)
            and len(mod) == 2
            and isinstance(mod[0], nn.Flatten)
            and isinstance(mod[1], nn.Linear)
            and mod[1].bias is not None
        ):
            return None
        if model.names != ["1.weight", "1.bias"] or model.loss_name not in ("cross_entropy", "mse"):
            return None
        if model.loss_name == "mse" and mod[1].out_features != 1:
            return None
        return cls(mod[1].out_features, mod[1].in_features, model.loss_name)

    def outputs(self, w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Transposed logits [C, K, B] for parameters w [C, d] and flattened inputs x [C, B, D].

        Computed as W x^T (K rows): for K = 10 outputs this bmm runs about twice as fast on CPU
        as x W^T, and the gradient dW = dlogits^T x then needs no transpose either."""
        C, KD = w.shape[0], self.K * self.D
        weight = w[:, :KD].view(C, self.K, self.D)
        return torch.baddbmm(w[:, KD:].unsqueeze(2), weight, x.transpose(1, 2))

    def loss_grad(self, w, x, y, need_grad: bool = True):
        """(loss [C], grad [C, d] or None) of the mean minibatch loss of each client."""
        out = self.outputs(w, x)  # [C, K, B]
        C, B = x.shape[0], x.shape[1]
        if self.loss_name == "cross_entropy":
            logp = torch.log_softmax(out, dim=1)
            picked = logp.gather(1, y.unsqueeze(1))  # [C, 1, B]
            loss = -picked.squeeze(1).mean(dim=1)
            if not need_grad:
                return loss, None
            dout = logp.exp_()
            dout.scatter_add_(1, y.unsqueeze(1), torch.full_like(picked, -1.0))
        else:
            resid = out.squeeze(1) - y
            loss = (resid * resid).mean(dim=1)
            if not need_grad:
                return loss, None
            dout = resid.unsqueeze(1).mul_(2.0)
        dout.div_(B)
        g = torch.empty(C, self.dim, dtype=w.dtype)
        KD = self.K * self.D
        # (bmm's out= into this strided view gives wrong values: copy instead)
        g[:, :KD].view(C, self.K, self.D).copy_(torch.bmm(dout, x))
        torch.sum(dout, dim=2, out=g[:, KD:])
        return loss, g


class VmapGrad:
    """Loss and gradient of any FlatModel for C clients at once.

    The module's forward is mapped over the client axis with ``vmap`` (an MLP becomes bmm's),
    and one autograd backward of the summed per-client losses fills one leaf per parameter
    ([C, *shape]); about twice as fast as ``vmap(grad(loss))`` on the linear and MLP models.
    """

    def __init__(self, model: FlatModel):
        self.model = model
        self.forward = vmap(lambda params, x: functional_call(model.module, params, (x,)))

    def loss_grad(self, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor, need_grad: bool = True):
        """(loss [C], grad [C, d] or None) of the mean minibatch loss of each client."""
        model, C = self.model, w.shape[0]
        leaves = [
            w[:, lo:hi].reshape(C, *shape).detach().requires_grad_(need_grad)
            for lo, hi, shape in zip(model.offsets[:-1], model.offsets[1:], model.shapes)
        ]
        with torch.set_grad_enabled(need_grad):
            out = self.forward(dict(zip(model.names, leaves)), x)  # [C, B, outputs]
            loss = output_loss(out, y, model.loss_name, reduction="none").mean(dim=1)  # y [C, B]
        if not need_grad:
            return loss, None
        grads = torch.autograd.grad(loss.sum(), leaves)
        return loss.detach(), torch.cat([g.reshape(C, -1) for g in grads], dim=1)


def leaf_grad(model: FlatModel):
    """``grad(model.loss)`` for one client, through one leaf tensor per parameter.

    Differentiating the flat vector itself makes autograd build, for every parameter view, a
    zero tensor of the full length d to scatter that view's gradient into; for the CNN's
    794,310 parameters that doubles a step's time. Leaves (detached views of w, no copy) and
    one ``cat`` at the end avoid it. The loss is FlatModel.loss's, on the module's output.
    """

    def grad_fn(w: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        leaves = [t.detach().requires_grad_(True) for t in model.unflatten(w).values()]
        out = functional_call(model.module, dict(zip(model.names, leaves)), (x,))
        loss = output_loss(out, y, model.loss_name)
        return torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, leaves)])

    return grad_fn


# -- applying a one-client step function to a batch of clients ---------------------------
class _NotElementwise(Exception):
    pass


def _elementwise_names() -> frozenset:
    unary = """abs neg negative sign sgn exp exp2 expm1 log log2 log10 log1p sqrt rsqrt square
        reciprocal sigmoid tanh sin cos relu floor ceil round trunc frac logical_not bitwise_not
        isnan isfinite isinf nan_to_num clone detach contiguous zeros_like ones_like""".split()
    binary = """add sub subtract rsub mul multiply div divide true_divide pow float_power maximum minimum
        fmax fmin clamp clip clamp_min clamp_max where lerp addcmul addcdiv eq ne lt le gt ge
        greater greater_equal less less_equal not_equal logical_and logical_or logical_xor
        bitwise_and bitwise_or bitwise_xor copysign atan2 hypot remainder fmod full_like""".split()
    dunders = """__add__ __radd__ __sub__ __rsub__ __mul__ __rmul__ __truediv__ __rtruediv__ __div__
        __rdiv__ __pow__ __rpow__ __neg__ __pos__ __abs__ __eq__ __ne__ __lt__ __le__ __gt__ __ge__
        __and__ __rand__ __or__ __ror__ __xor__ __rxor__ __invert__""".split()
    return frozenset(unary + binary + dunders)


_ELEMENTWISE = _elementwise_names()
_TENSOR_PROPERTIES = frozenset({"dtype", "device", "is_floating_point", "layout"})


def _allowed(func) -> bool:
    owner = getattr(func, "__self__", None)
    if type(owner).__name__ == "getset_descriptor":  # a property read: only the batch-invariant ones
        return owner.__name__ in _TENSOR_PROPERTIES
    name = getattr(func, "__name__", "")
    if name not in _ELEMENTWISE:
        return False
    return (
        func is getattr(torch, name, None)
        or func is getattr(torch.Tensor, name, None)
        or func is getattr(torch._C.TensorBase, name, None)
    )


class _ElementwiseOnly(TorchFunctionMode):
    """Lets through only elementwise torch operations without ``out=``; raises before any other.

    A step built only of such operations computes, on ``[C, d]`` inputs, exactly what it
    computes row by row: no reduction, indexing, shape read (``w.shape[0]`` would be C, not d),
    in-place update or ``.item()`` slips through, because each of those raises before it runs.
    """

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if "out" in kwargs or not _allowed(func):
            raise _NotElementwise(getattr(func, "__name__", repr(func)))
        return func(*args, **kwargs)


def _code_of(fn):
    fn = getattr(fn, "func", fn)  # functools.partial
    fn = getattr(fn, "__func__", fn)  # bound method
    return getattr(fn, "__code__", fn)


class StepApplier:
    """Runs a one-client :data:`~algorithms.ops.StepFn` on C clients at once.

    Direct call under :class:`_ElementwiseOnly` when the inputs allow it (per-client tensors
    shaped like w or scalars, shared tensors scalars or shaped like w), else ``vmap``. A
    function that once needed vmap is remembered (by its code object) and mapped directly.
    """

    def __init__(self):
        self._needs_vmap: set = set()
        self.direct_calls = 0
        self.vmap_calls = 0

    @staticmethod
    def _padded(batch: dict, per_client_shape, dtype):
        """[C] per-client scalars as [C, 1] so they broadcast against [C, d]; None if not eligible."""
        out = {}
        for name, v in batch.items():
            if not isinstance(v, torch.Tensor):
                return None
            if v.shape[1:] == per_client_shape:
                out[name] = v
            elif v.dim() == 1 and v.dtype == dtype:
                out[name] = v.unsqueeze(1)
            else:
                return None
        return out

    def _try_direct(self, step, w, g, carry, client, shared, k):
        per_client = w.shape[1:]
        for v in shared.values():
            if isinstance(v, torch.Tensor):
                if v.dim() != 0 and v.shape != per_client:
                    return None
            elif not isinstance(v, (int, float, bool)):
                return None
        carry_p = self._padded(carry, per_client, w.dtype)
        client_p = self._padded(client, per_client, w.dtype)
        if carry_p is None or client_p is None:
            return None
        try:
            with _ElementwiseOnly():
                w_new, carry_new = step(w, g, carry_p, client_p, shared, k)
        except _NotElementwise:
            self._needs_vmap.add(_code_of(step))
            return None
        if not isinstance(w_new, torch.Tensor) or w_new.shape != w.shape or w_new.dtype != w.dtype:
            return None
        if not isinstance(carry_new, dict) or carry_new.keys() != carry.keys():
            return None
        unpadded = {}
        for name, v in carry_new.items():
            if not isinstance(v, torch.Tensor) or v.shape != carry_p[name].shape or v.dtype != carry[name].dtype:
                return None
            unpadded[name] = v.view(carry[name].shape)
        self.direct_calls += 1
        return w_new, unpadded

    def __call__(self, step, w, g, carry, client, shared, k):
        if _code_of(step) not in self._needs_vmap:
            result = self._try_direct(step, w, g, carry, client, shared, k)
            if result is not None:
                return result
        self.vmap_calls += 1
        return vmap(step, in_dims=(0, 0, 0, 0, None, None))(w, g, carry, client, shared, k)


class Executor:
    def __init__(
        self,
        model: FlatModel,
        data,
        batch_size: int,
        seed: int,
        mode: ExecutorMode = "batched",
        fast_linear: bool = True,
    ):
        if mode not in ("batched", "loop"):
            raise ValueError(f"unknown executor {mode!r}; use 'batched' or 'loop'")
        self.model = model
        self.data = data
        self.batch_size = batch_size
        self.mode = mode
        self.rng = np.random.default_rng(np.random.SeedSequence([seed, 0xBA7C4]))
        # Evaluate ops draw their minibatches from a stream of their own, so that an algorithm
        # that adds a query (DRDM's dual step) does not shift the training minibatches.
        self.eval_rng = np.random.default_rng(np.random.SeedSequence([seed, 0xE7A1]))
        self._sizes = np.asarray(data.train_sizes, dtype=np.int64)
        self._offsets = np.asarray(data.train_offsets, dtype=np.int64)
        self._grad = grad(model.loss)  # the loop's (reference) gradient
        self._vmap = VmapGrad(model)
        self.linear = LinearGrad.of(model) if fast_linear else None
        n = data.train_x.shape[0]
        # Inputs as the batched gradient wants them: flattened rows for the linear path.
        self._x = data.train_x.reshape(n, -1) if self.linear is not None else data.train_x
        self._y = data.train_y
        self.steps = StepApplier()
        # How the batched mode trains: closed form for linear models; clients in parallel threads
        # for convolutional ones (vmap turns a batch of convolutions into one grouped
        # convolution, several times slower on CPU than the convolutions one by one); vmap else.
        convolutional = any(isinstance(m, nn.modules.conv._ConvNd) for m in model.module.modules())
        self.strategy = "linear" if self.linear is not None else ("threads" if convolutional else "vmap")
        self._pool: ThreadPoolExecutor | None = None
        self._pool_size = 0
        self._thread_local = threading.local()

    # -- minibatches --------------------------------------------------------------------
    def sample_indices(self, clients: np.ndarray, steps: int, batch_size: int, rng=None) -> torch.Tensor:
        """Global row indices [C, steps, B] into data.train_x: uniform within each client."""
        u = (self.rng if rng is None else rng).random((len(clients), steps, batch_size))
        local = np.floor(u * self._sizes[clients][:, None, None]).astype(np.int64)
        return torch.from_numpy(self._offsets[clients][:, None, None] + local)

    def _gather(self, rows: torch.Tensor):
        """Inputs and labels of the rows [C, B] (batched-path layout)."""
        flat = rows.reshape(-1)
        x = self._x.index_select(0, flat)
        return x.view(*rows.shape, *self._x.shape[1:]), self._y.index_select(0, flat).view(rows.shape)

    def loss_grad(self, params: torch.Tensor, x, y, need_grad: bool = True):
        """Batched (loss [C], grad [C, d] or None) at params [C, d] on minibatches x [C, B, ...]."""
        return (self.linear or self._vmap).loss_grad(params, x, y, need_grad)

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
        if self.mode == "loop":
            params, carry, snapshot = self._train_loop(op, start, idx, mask)
        elif self.strategy == "threads":
            params, carry, snapshot = self._train_loop(op, start, idx, mask, workers=min(torch.get_num_threads(), num))
        else:
            params, carry, snapshot = self._train_batched(op, start, idx, mask)
        steps_done = np.full(num, op.steps) if mask is None else mask.sum(dim=1).numpy()
        return TrainResult(params=params, carry=carry, snapshot=snapshot, steps_done=steps_done)

    def _train_batched(self, op: Train, start, idx, mask):
        w = start.clone()
        carry = {k: v.clone() for k, v in op.carry.items()}
        client_args = dict(op.client_args)
        shared = dict(op.shared)
        # One index_select per step for all clients (gathering all steps' minibatches ahead
        # measured slower: the step's inputs are then no longer in cache when used).
        rows_by_step = idx.transpose(0, 1).contiguous()  # [steps, C, B]
        active = None if mask is None else mask.any(dim=0).tolist()
        snapshot = None
        for k in range(op.steps):
            if active is None or active[k]:
                x, y = self._gather(rows_by_step[k])
                _, g = self.loss_grad(w, x, y)
                w_next, carry_next = self.steps(op.step, w, g, carry, client_args, shared, k)
                if mask is not None and not bool(mask[:, k].all()):
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

    def _train_loop(self, op: Train, start, idx, mask, workers: int = 0):
        """One client after another with ``torch.func.grad`` (the reference); ``workers`` >= 1:
        the "threads" strategy, that many clients at a time with :func:`leaf_grad`."""
        if workers == 0:
            results = [self._train_client(self._grad, op, c, start, idx, mask) for c in range(len(op.clients))]
        elif workers == 1:
            grad_fn = leaf_grad(self.model)
            results = [self._train_client(grad_fn, op, c, start, idx, mask) for c in range(len(op.clients))]
        else:
            results = self._in_threads(op, start, idx, mask, workers)
        params = torch.stack([r[0] for r in results])
        snapshot = torch.stack([r[1] for r in results]) if op.record_at is not None else None
        carry = {k: torch.stack([r[2][k] for r in results]) for k in op.carry}
        return params, carry, snapshot

    def _train_client(self, grad_fn, op: Train, c: int, start, idx, mask):
        """Client c's ``op.steps`` steps: (final w, snapshot or None, final carry)."""
        x_all, y_all = self.data.train_x, self.data.train_y
        w = start[c].clone()
        carry = {k: v[c].clone() for k, v in op.carry.items()}
        client_args = {k: v[c] for k, v in op.client_args.items()}
        snap = None
        for k in range(op.steps):
            if mask is None or bool(mask[c, k]):
                rows = idx[c, k]
                g = grad_fn(w, x_all[rows], y_all[rows])
                w, carry = op.step(w, g, carry, client_args, dict(op.shared), k)
            if op.record_at == k + 1:
                snap = w.clone()
        return w, snap, carry

    def _in_threads(self, op: Train, start, idx, mask, workers: int):
        """Clients in parallel threads, each op single-threaded (torch releases the GIL in its kernels).

        Each thread evaluates its own copy of the module: ``functional_call`` swaps a module's
        parameters while it runs, so two threads must not share one.
        """
        if self._pool is None or self._pool_size != workers:
            self._pool, self._pool_size = ThreadPoolExecutor(workers, thread_name_prefix="edgefl-client"), workers
        local = self._thread_local

        def run(c):
            grad_fn = getattr(local, "grad", None)
            if grad_fn is None:
                copy = FlatModel(deepcopy(self.model.module), self.model.input_shape, self.model.loss_name)
                grad_fn = local.grad = leaf_grad(copy)
            return self._train_client(grad_fn, op, c, start, idx, mask)

        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return list(self._pool.map(run, range(len(op.clients))))
        finally:
            torch.set_num_threads(threads)

    # -- Evaluate ----------------------------------------------------------------------
    def evaluate(self, op: Evaluate):
        clients = op.clients
        num = len(clients)
        params = op.params if op.params.dim() == 2 else op.params.expand(num, -1)
        need_grad = op.what != "loss"
        if op.full:
            if self.mode == "batched" and op.params.dim() == 1 and not need_grad:
                loss, gradient = self._full_loss_shared(op.params, clients), None
            else:
                losses, grads = [], []
                for c, client in enumerate(clients):
                    lo, hi = self._offsets[client], self._offsets[client + 1]
                    x, y = self.data.train_x[lo:hi], self.data.train_y[lo:hi]
                    losses.append(self.model.loss(params[c], x, y).detach())
                    if need_grad:
                        grads.append(self._grad(params[c], x, y))
                loss = torch.stack(losses)
                gradient = torch.stack(grads) if grads else None
        else:
            rows = self.sample_indices(clients, 1, op.batch_size or self.batch_size, self.eval_rng)[:, 0]
            if self.mode == "batched":
                x, y = self._gather(rows)
                loss, gradient = self.loss_grad(params, x, y, need_grad)
            else:
                x, y = self.data.train_x[rows], self.data.train_y[rows]
                loss = torch.stack([self.model.loss(params[c], x[c], y[c]).detach() for c in range(num)])
                gradient = torch.stack([self._grad(params[c], x[c], y[c]) for c in range(num)]) if need_grad else None
        if op.what == "loss":
            return loss
        if op.what == "grad":
            return gradient
        return loss, gradient

    @torch.no_grad()
    def _full_loss_shared(self, w: torch.Tensor, clients: np.ndarray) -> torch.Tensor:
        """Mean loss of one model over each client's whole training set: one pass, per-client means."""
        sizes = self._sizes[clients]
        # rows = concat(range(start_c, start_c + size_c)): each row's client start plus its rank
        first = np.cumsum(sizes) - sizes  # position of each client's first row in the result
        rows = torch.from_numpy(np.repeat(self._offsets[clients] - first, sizes) + np.arange(sizes.sum()))
        per_sample = self.model.per_sample_loss(w, self.data.train_x[rows], self.data.train_y[rows])
        owner = torch.from_numpy(np.repeat(np.arange(len(clients)), sizes))
        sums = torch.zeros(len(clients), dtype=per_sample.dtype).index_add_(0, owner, per_sample)
        return sums / torch.from_numpy(sizes).to(per_sample.dtype)

    def samples_evaluated(self, op: Evaluate) -> np.ndarray:
        """How many samples each client processes for ``op`` (for pricing)."""
        if op.full:
            return self._sizes[op.clients].astype(float)
        return np.full(len(op.clients), float(op.batch_size or self.batch_size))
