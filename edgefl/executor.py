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
- minibatches: one ``index_select`` per step for all clients (on the linear path into a buffer
  of the training, as its gradient: no allocation per step);
- the algorithm's step function, written for ONE client: called once on the whole
  ``[C, d]`` batch when it only does elementwise arithmetic, in-place updates of its own
  temporaries included (checked on every call by :class:`_ElementwiseOnly`, which stops
  at the first other operation), else mapped
  with ``torch.func.vmap``. Both give the per-client result; the direct call saves
  vmap's per-op wrapping, which costs more than the arithmetic at these sizes.

Minibatch indices come from one random stream drawn in the same order whichever path
runs, so a seed gives identical results for both. Sampling is uniform with replacement
within a client's training set, a fresh batch per step.
"""

from __future__ import annotations

import functools
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Callable, Literal

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, grad, vmap
from torch.overrides import TorchFunctionMode

from algorithms.ops import Evaluate, Train, TrainResult
from edgefl.device import free_bytes
from edgefl.memory import step_bytes
from edgefl.models import FlatModel, _measure_saved, output_loss

ExecutorMode = Literal["batched", "loop"]


# -- the linear fast path ---------------------------------------------------------------
_ONE_THREAD = threading.Lock()


@contextmanager
def one_thread():
    """torch's operations on one thread inside, the process's thread count restored after (one such section at a
    time: two could otherwise restore each other's count)."""
    with _ONE_THREAD:
        threads = torch.get_num_threads()
        if threads != 1:
            torch.set_num_threads(1)
        try:
            yield
        finally:
            if threads != 1:
                torch.set_num_threads(threads)


# The minibatch inputs of the clients the linear path trains together on a CPU, in bytes (LinearGrad.clients_per_block)
BLOCK_BYTES = 2 << 20


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

    def logits(self, w: torch.Tensor, x: torch.Tensor, columns: int = 1024) -> torch.Tensor:
        """Transposed logits [S, K, n] of S models w [S, d] on the same flattened inputs x [n, D]: W x^T + b, an
        ``addmm`` of the models' weights stacked into [S K, D] with x's transpose (a view: no copy), in chunks of
        about ``columns`` inputs (equal chunks: they stay in the cache), on one thread (:func:`one_thread`). The
        evaluation's forward (edgefl.metrics). On one CPU thread, 10,000 MNIST images, K = 10
        (benchmarks/evaluation.py): about 6 ms per model alone against 10 ms for x W^T (F.linear), 3 ms per model
        with 5 stacked. Measured (tests/test_seed_axis.py): a model's rows are the same bits whichever models are
        stacked with it, and an input's column the same whichever inputs are computed with it (chunks of at least
        12 here: MKL's small products round otherwise). Neither holds for x W^T; nor for this product on two
        threads, where MKL splits a 10-row product otherwise than on one (F.linear's bits did not depend on the
        thread count: one thread keeps it so)."""
        S, KD, n = w.shape[0], self.K * self.D, x.shape[0]
        weight = w[:, :KD].reshape(S * self.K, self.D)
        bias = w[:, KD:].reshape(S * self.K, 1)
        size = max(1, -(-n // max(1, round(n / columns))))
        # each chunk written in place (the same bits as apart, then concatenated: one copy of the logits at the peak,
        # not two; 0.7 GB each for 10^6 devices' 18 million training rows, benchmarks [4])
        out = torch.empty(S * self.K, n, dtype=weight.dtype, device=weight.device)
        with one_thread():
            for lo in range(0, n, size):
                torch.addmm(bias, weight, x[lo : lo + size].t(), out=out[:, lo : lo + size])
        return out.view(S, self.K, n)

    def clients_per_block(self, batch_size: int, inputs: torch.Tensor) -> int:
        """How many clients a CPU trains together (edgefl.executor.Executor._train_batched): as many as have their
        minibatches ([B, D] of ``inputs``' dtype) in BLOCK_BYTES, about 20 of MNIST's at B = 32 (2 MiB).
        Measured on one core, 30 local steps of 100 clients (five runs' data): about 12 ms a step for all 100 at
        once, 6-7 ms for blocks of 10 to 25, 10 ms for blocks of 50 (docs/performance.md)."""
        return max(1, BLOCK_BYTES // (batch_size * self.D * inputs.element_size()))

    def loss_grad(self, w, x, y, need_grad: bool = True):
        """(loss [C], grad [C, d] or None) of the mean minibatch loss of each client."""
        return self._loss_grad(w, x, y, need_loss=True, need_grad=need_grad, out=None)

    def grad(self, w, x, y, out: torch.Tensor | None = None) -> torch.Tensor:
        """The gradient [C, d] alone (a local step needs no loss), the same bits as :meth:`loss_grad`'s; written
        into ``out`` [C, d] when given (a training's buffer, reused step after step)."""
        return self._loss_grad(w, x, y, need_loss=False, need_grad=True, out=out)[1]

    def _loss_grad(self, w, x, y, need_loss: bool, need_grad: bool, out: torch.Tensor | None):
        logits = self.outputs(w, x)  # [C, K, B]
        C, B = x.shape[0], x.shape[1]
        loss = None
        if self.loss_name == "cross_entropy":
            logp = torch.log_softmax(logits, dim=1)
            if need_loss:
                loss = -logp.gather(1, y.unsqueeze(1)).squeeze(1).mean(dim=1)
            if not need_grad:
                return loss, None
            dout = logp.exp_()
            dout.scatter_add_(1, y.unsqueeze(1), torch.full((C, 1, B), -1.0, dtype=dout.dtype, device=dout.device))
        else:
            resid = logits.squeeze(1) - y
            if need_loss:
                loss = (resid * resid).mean(dim=1)
            if not need_grad:
                return loss, None
            dout = resid.unsqueeze(1).mul_(2.0)
        dout.div_(B)
        g = torch.empty(C, self.dim, dtype=w.dtype, device=w.device) if out is None else out
        KD = self.K * self.D
        # (bmm's out= into this strided view computes into a contiguous buffer and copies it anyway)
        g[:, :KD].view(C, self.K, self.D).copy_(torch.bmm(dout, x))
        torch.sum(dout, dim=2, out=g[:, KD:])
        return loss, g


class VmapGrad:
    """Loss and gradient of any FlatModel for C clients at once.

    The module's forward is mapped over the client axis with ``vmap`` (an MLP becomes bmm's),
    and one autograd backward of the summed per-client losses fills one leaf per parameter
    ([C, *shape]); about twice as fast as ``vmap(grad(loss))`` on the linear and MLP models.
    Buffers (BatchNorm's running statistics) go in as per-client copies, which a training forward
    pass updates in place; :meth:`loss_grad` returns them.
    """

    def __init__(self, model: FlatModel):
        self.model = model
        self.forward = vmap(lambda params, x: functional_call(model.module, params, (x,)))

    def loss_grad(self, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor, need_grad: bool = True, train=False):
        """(loss [C], grad [C, d] or None, buffers [C, d - trained] or None) of each client's mean minibatch
        loss; ``train``: the layers' training behaviour, the buffers it writes returned."""
        model, C = self.model, w.shape[0]
        tensors = [
            w[:, lo:hi].reshape(C, *shape).detach()
            for lo, hi, shape in zip(model.offsets[:-1], model.offsets[1:], model.shapes)
        ]
        k = model._param_count
        leaves = [t.requires_grad_(need_grad) for t in tensors[:k]]
        buffers = [t.clone() for t in tensors[k:]] if train else tensors[k:]
        model.mode(train)
        with torch.set_grad_enabled(need_grad):
            out = self.forward(dict(zip(model.names, leaves + buffers)), x)  # [C, B, outputs]
            loss = output_loss(out, y, model.loss_name, reduction="none").mean(dim=1)  # y [C, B]
        written = torch.cat([b.reshape(C, -1) for b in buffers], dim=1) if train and buffers else None
        if not need_grad:
            return loss, None, written
        grads = torch.autograd.grad(loss.sum(), leaves)
        flat = [g.reshape(C, -1) for g in grads] + ([torch.zeros_like(written)] if written is not None else [])
        if written is None and buffers:
            flat.append(torch.zeros(C, model.buffers, dtype=w.dtype, device=w.device))
        return loss.detach(), torch.cat(flat, dim=1), written


def leaf_grad(model: FlatModel):
    """One client's training gradient [d] (:meth:`FlatModel.train_grad`, buffers left out)."""

    def grad_fn(w: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return model.train_grad(w, x, y)[1]

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


def _in_place(func) -> bool:
    """Whether ``func`` is the in-place form of an elementwise operation (``d.mul_(lr)``; ``d -= x`` arrives as
    ``sub_``)."""
    name = getattr(func, "__name__", "")
    if not (name.endswith("_") and not name.endswith("__") and name[:-1] in _ELEMENTWISE):
        return False
    return func is getattr(torch.Tensor, name, None) or func is getattr(torch._C.TensorBase, name, None)


class _ElementwiseOnly(TorchFunctionMode):
    """Lets through only elementwise torch operations without ``out=``, and their in-place forms on the step's
    own temporaries; raises before any other.

    A step built only of such operations computes, on ``[C, d]`` inputs, exactly what it
    computes row by row: no reduction, indexing, shape read (``w.shape[0]`` would be C, not d),
    in-place update of an input (``inputs``: the tensors the step was given, whose storage it must not write)
    or ``.item()`` slips through, because each of those raises before it runs. An in-place update of a
    tensor the step computed itself (not sharing an input's storage), of the shape all its operands broadcast
    to, is row by row too: the same arithmetic without a new buffer.
    """

    def __init__(self, inputs=()):
        super().__init__()
        self._inputs = {t.untyped_storage().data_ptr() for t in inputs if isinstance(t, torch.Tensor)}

    def _own(self, args, kwargs) -> bool:
        """Whether an in-place operation on ``args[0]`` writes a temporary of the step's, of the operands' shape."""
        target = args[0] if args else None
        if not isinstance(target, torch.Tensor) or target.untyped_storage().data_ptr() in self._inputs:
            return False
        shape = target.shape  # (every operand broadcasts to it: else the step's own error, raised where it is mapped)
        return all(
            a.dim() <= len(shape) and all(n in (1, m) for n, m in zip(reversed(a.shape), reversed(shape)))
            for a in (*args[1:], *kwargs.values())
            if isinstance(a, torch.Tensor)
        )

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        kind = _kind_of(func)
        if "out" in kwargs or not (kind == "elementwise" or (kind == "in place" and self._own(args, kwargs))):
            raise _NotElementwise(getattr(func, "__name__", repr(func)))
        return func(*args, **kwargs)


@functools.cache
def _kind_of(func) -> str | None:
    """The kind of a torch function: "elementwise" (:func:`_allowed`), "in place" (:func:`_in_place`) or None, decided
    once per function as a step's operations pass through :class:`_ElementwiseOnly` (a DRDM step's eight: about 30 of
    its 150 µs of checks)."""
    return "elementwise" if _allowed(func) else "in place" if _in_place(func) else None


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

    def _try_direct(self, step, w, g, carry, client, shared, k, per_row=frozenset()):
        per_client = w.shape[1:]
        rows = self._padded({name: shared[name] for name in per_row}, per_client, w.dtype)
        if rows is None:
            return None
        for name, v in shared.items():
            if name in per_row:
                continue
            if isinstance(v, torch.Tensor):
                if v.dim() != 0 and v.shape != per_client:
                    return None
            elif not isinstance(v, (int, float, bool)):
                return None
        carry_p = self._padded(carry, per_client, w.dtype)
        client_p = self._padded(client, per_client, w.dtype)
        if carry_p is None or client_p is None:
            return None
        inputs = [w, g, *carry_p.values(), *client_p.values(), *shared.values()]
        try:
            with _ElementwiseOnly(inputs):
                w_new, carry_new = step(w, g, carry_p, client_p, {**shared, **rows}, k)
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

    def __call__(self, step, w, g, carry, client, shared, k, per_row=frozenset()):
        """``step`` on every row; ``per_row``: the keys of ``shared`` that hold one value per row ([C, ...], the
        clients of several runs trained at once: edgefl.seed_axis), each row seeing its own."""
        if _code_of(step) not in self._needs_vmap:
            result = self._try_direct(step, w, g, carry, client, shared, k, per_row)
            if result is not None:
                return result
        self.vmap_calls += 1
        shared_dims = {name: 0 if name in per_row else None for name in shared} if per_row else None
        return vmap(step, in_dims=(0, 0, 0, 0, shared_dims, None))(w, g, carry, client, shared, k)


@dataclass
class PreparedTrain:
    """A Train op ready to train (:meth:`Executor.prepare`): its start rows [C, d], minibatch indices [C, steps,
    B], step mask (or None) and the strategy that trains it."""

    op: Train
    start: torch.Tensor
    idx: torch.Tensor
    mask: torch.Tensor | None
    strategy: str

    @property
    def steps_done(self) -> np.ndarray:
        """[C] the steps each client computes (those its mask leaves on): known before it trains."""
        return np.full(len(self.op.clients), self.op.steps) if self.mask is None else self.mask.sum(dim=1).numpy()


STRATEGIES = ("linear", "vmap", "threads", "loop")
# The measured strategy replaces the structural guess only when this much faster (a margin against timing
# noise: one machine picks the same path run after run).
SWITCH_MARGIN = 1.25
# The share of free memory that clients trained at once may take (the rest: the data, the run, the OS)
MEMORY_SHARE = 0.5


class Executor:
    """Runs Train and Evaluate ops on ``data`` with ``model`` (see the module's docstring).

    ``device``: where the numerics run (edgefl.device); ``strategy``: how the batched mode trains ("linear",
    "vmap", "threads" or "loop"); None: the closed form for linear models, else :meth:`structural_guess` (the
    rule the benchmarks' measurements chose, the same on every machine: a seed gives the same numbers), a
    model vmap cannot map falling back to threads; ``measure``: instead, the faster path on this machine,
    timed on the first Train op (:meth:`choose_strategy`; ``run.executor = "fastest"``). ``chunk``: clients
    trained at once by vmap (None: as many as the memory allows, :meth:`clients_at_once`)."""

    # How the run's evaluation gets its linear model's outputs (edgefl.metrics.Outputs): None, computed there; a
    # lane of edgefl.seed_axis.SeedBatch: with the other runs' models
    evaluation_outputs: (
        Callable[[torch.Tensor], tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]] | None] | None
    ) = None

    def __init__(
        self,
        model: FlatModel,
        data,
        batch_size: int,
        seed: int,
        mode: ExecutorMode = "batched",
        fast_linear: bool = True,
        device: torch.device | None = None,
        strategy: str | None = None,
        chunk: int | None = None,
        measure: bool = False,
    ):
        if mode not in ("batched", "loop"):
            raise ValueError(f"unknown executor {mode!r}; use 'batched' or 'loop'")
        if strategy is not None and strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {strategy!r}; one of {', '.join(STRATEGIES)}")
        self.device = torch.device("cpu") if device is None else torch.device(device)
        self.model = model.to(self.device)
        self.data = data
        self.batch_size = batch_size
        self.mode = mode
        self.rng = np.random.default_rng(np.random.SeedSequence([seed, 0xBA7C4]))
        # Evaluate ops draw their minibatches from a stream of their own, so that an algorithm
        # that adds a query (DRDM's dual step) does not shift the training minibatches.
        self.eval_rng = np.random.default_rng(np.random.SeedSequence([seed, 0xE7A1]))
        self._sizes = np.asarray(data.train_sizes, dtype=np.int64)
        self._offsets = np.asarray(data.train_offsets, dtype=np.int64)
        # the loop's (reference) gradient; models with buffers: FlatModel.train_grad, which returns them
        self._grad = grad(model.loss)
        self._train_grad = grad(model.train_loss) if not model.buffers else leaf_grad(model)
        self._vmap = VmapGrad(model)
        self.linear = LinearGrad.of(model) if fast_linear and self.device.type == "cpu" else None
        n = data.train_x.shape[0]
        self._train_x = data.train_x.to(self.device)  # the per-client paths' layout
        # Inputs as the batched gradient wants them: flattened rows for the linear path.
        self._x = self._train_x.reshape(n, -1) if self.linear is not None else self._train_x
        self._y = data.train_y.to(self.device)
        self.steps = StepApplier()
        self.strategy = "linear" if self.linear is not None else strategy
        self.measure = measure
        self.chunk = chunk
        self.timings: dict[str, float] = {}  # seconds per client-step of each strategy measured
        self._pool: ThreadPoolExecutor | None = None
        self._pool_size = 0
        self._thread_local = threading.local()

    # -- how the batched mode trains -----------------------------------------------------------
    def structural_guess(self) -> str:
        """The strategy kept unless another measures SWITCH_MARGIN x faster: on a CPU, clients in threads for
        convolutional and recurrent models (vmap turns a batch of convolutions into one grouped convolution,
        several times slower on CPU than the convolutions one by one), vmap else; on a GPU, vmap."""
        if self.device.type != "cpu":
            return "vmap"
        heavy = (nn.modules.conv._ConvNd, nn.RNNBase)
        return "threads" if any(isinstance(m, heavy) for m in self.model.module.modules()) else "vmap"

    def candidates(self) -> list[str]:
        if self.device.type != "cpu":
            return ["vmap", "threads"]  # on a GPU, "threads" is one client after another (its kernels queue anyway)
        return ["vmap", "threads" if torch.get_num_threads() > 1 else "loop"]

    def choose_strategy(self, op: Train, start, idx) -> str:
        """The faster strategy on this machine for this model, timed on the op's first minibatches (one warm-up
        and one timed step each, on up to 4 of its clients; results discarded: no random stream moves). A
        strategy that fails on the model (vmap cannot map every module) is not a candidate."""
        guess = self.structural_guess()
        clients = min(len(op.clients), 4)
        probe = Train(
            clients=op.clients[:clients],
            start=start[:clients],
            steps=1,
            step=op.step,
            carry={k: v[:clients] for k, v in op.carry.items()},
            client_args={k: v[:clients] for k, v in op.client_args.items()},
            shared=op.shared,
        )
        timings: dict[str, float] = {}
        failed: dict[str, Exception] = {}
        for attempt in range(4):  # a warm-up, then the best of 3, interleaved (the load varies)
            for name in self.candidates():
                if name in failed:
                    continue
                try:
                    began = time.perf_counter()
                    self._train_with(name, probe, probe.start, idx[:clients, :1], None)
                    if self.device.type == "cuda":
                        torch.cuda.synchronize(self.device)
                except Exception as exc:  # noqa: BLE001 - a path the model does not support is no candidate
                    failed[name] = exc
                    continue
                if attempt:
                    spent = (time.perf_counter() - began) / clients
                    timings[name] = min(timings.get(name, spent), spent)
        if not timings:  # the model fails on every path: its own exception (a plug-in's: exit 4 naming it)
            raise failed[guess if guess in failed else next(iter(failed))]
        self.timings = timings
        fastest = min(timings, key=timings.get)
        if guess in timings and timings[guess] <= SWITCH_MARGIN * timings[fastest]:
            return guess
        return fastest

    def clients_at_once(self) -> int:
        """Clients vmap trains at once: as many as MEMORY_SHARE of the free memory holds at
        edgefl.memory.step_bytes each (at least 1)."""
        if self.chunk is not None:
            return self.chunk
        model, inputs = self.model, int(np.prod(self.model.input_shape))
        per_sample, fixed = _measure_saved(model)
        need = step_bytes(model.dim, per_sample, fixed, self.batch_size, inputs)
        free = free_bytes(self.device)
        self.chunk = max(1, int(MEMORY_SHARE * free // need)) if free else 1 << 30
        return self.chunk

    # -- minibatches --------------------------------------------------------------------
    def sample_indices(self, clients: np.ndarray, steps: int, batch_size: int, rng=None) -> torch.Tensor:
        """Global row indices [C, steps, B] into data.train_x: uniform within each client."""
        u = (self.rng if rng is None else rng).random((len(clients), steps, batch_size))
        local = np.floor(u * self._sizes[clients][:, None, None]).astype(np.int64)
        return torch.from_numpy(self._offsets[clients][:, None, None] + local)

    def _gather(self, rows: torch.Tensor, out: tuple[torch.Tensor, torch.Tensor] | None = None, first: int = 0):
        """Inputs and labels of the rows [C, B] (batched-path layout); ``out``: the (inputs, labels) buffers to
        write them into (:meth:`_batch_buffers`), else new ones. (``first``: where the rows' clients stand in a
        training, for a gather over several runs' data, edgefl.seed_axis; one data set here.)"""
        flat = rows.reshape(-1).to(self.device)
        if out is None:
            x, y = self._x.index_select(0, flat), self._y.index_select(0, flat)
        else:
            n = flat.shape[0]
            x = torch.index_select(self._x, 0, flat, out=out[0].view(n, *self._x.shape[1:]))
            y = torch.index_select(self._y, 0, flat, out=out[1].view(n))
        return x.view(*rows.shape, *self._x.shape[1:]), y.view(rows.shape)

    def _batch_buffers(self, rows_shape) -> tuple[torch.Tensor, torch.Tensor]:
        """Buffers for the inputs and labels of minibatch rows [C, B] (a gather's ``out``)."""
        x = torch.empty(*rows_shape, *self._x.shape[1:], dtype=self._x.dtype, device=self.device)
        return x, torch.empty(*rows_shape, dtype=self._y.dtype, device=self.device)

    def loss_grad(self, params: torch.Tensor, x, y, need_grad: bool = True):
        """Batched (loss [C], grad [C, d] or None) at params [C, d] on minibatches x [C, B, ...] (evaluation
        behaviour of the layers)."""
        if self.linear is not None:
            return self.linear.loss_grad(params, x, y, need_grad)
        return self._vmap.loss_grad(params, x, y, need_grad)[:2]

    # -- Train -------------------------------------------------------------------------
    def train(self, op: Train) -> TrainResult:
        prepared = self.prepare(op)
        return self.result_of(prepared, *self.run_prepared(prepared))

    def prepare(self, op: Train) -> PreparedTrain:
        """``op`` ready to train: its minibatch indices drawn (the executor's stream moves here, whether the op is
        then trained alone or beside other runs' ops: edgefl.seed_axis), its start rows and mask checked, the
        strategy that trains it chosen."""
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
        if self.device.type != "cpu":
            start = start.to(self.device)
            op = _moved(op, self.device)
        if self.mode == "loop":
            name = "loop"
        else:
            if self.strategy is None:
                self.strategy = self.choose_strategy(op, start, idx) if self.measure else self.structural_guess()
            name = self.strategy
        return PreparedTrain(op, start, idx, mask, name)

    def run_prepared(self, p: PreparedTrain):
        """(params, carry, snapshot) of a prepared op, on the device."""
        try:
            return self._train_with(p.strategy, p.op, p.start, p.idx, p.mask)
        except Exception:
            if p.strategy != "vmap" or self.measure:
                raise
            # a model vmap cannot map (a module calling .item(), an RNN): the clients in threads, from now on
            # (the same on every run: the failure is the model's, not the machine's); nothing was written
            self.strategy = p.strategy = "threads"
            return self._train_with(p.strategy, p.op, p.start, p.idx, p.mask)

    def result_of(self, p: PreparedTrain, params, carry, snapshot) -> TrainResult:
        """The TrainResult of a prepared op from what training it gave (moved back to the CPU)."""
        if self.device.type != "cpu":
            params, snapshot = params.cpu(), None if snapshot is None else snapshot.cpu()
            carry = {k: v.cpu() for k, v in carry.items()}
        return TrainResult(params=params, carry=carry, snapshot=snapshot, steps_done=p.steps_done)

    def _train_with(self, name: str, op: Train, start, idx, mask):
        if name == "loop":
            return self._train_loop(op, start, idx, mask)
        if name == "threads":
            workers = 1 if self.device.type != "cpu" else min(torch.get_num_threads(), len(op.clients))
            return self._train_loop(op, start, idx, mask, workers=workers)
        return self._train_batched(op, start, idx, mask)

    def clients_per_block(self, clients: int, batch_size: int) -> int:
        """How many of a batched training's ``clients`` train together (:meth:`_train_batched`) at minibatches of
        ``batch_size``: the linear path's cache block on a CPU (:meth:`LinearGrad.clients_per_block`), all of them
        on another device; vmap's, as many as the memory holds (:meth:`clients_at_once`)."""
        if self.linear is None:
            return min(clients, self.clients_at_once())
        if self.device.type != "cpu":
            return clients
        return min(clients, self.linear.clients_per_block(batch_size, self._x))

    def _train_batched(self, op: Train, start, idx, mask, gather=None, record_at=None, per_row=frozenset()):
        """Every client's ``op.steps`` steps, a block of clients at a time (:meth:`clients_per_block`): a block computes
        each client's rows from its own alone, as all at once would (the same bits: tests/test_executor.py,
        tests/test_seed_axis.py, benchmarks/run.py [1]). ``gather(rows [n, B], out,
        first)``: the minibatches of the op's clients first .. first + n - 1 (default: this executor's data),
        written into ``out`` when not None; ``record_at``: the step after which each client's row is kept ([C]
        ints, 0 for none; default ``op.record_at`` for all); ``per_row``: the keys of ``op.shared`` given per client
        ([C, ...] rows). The last two are for clients of several runs trained at once (edgefl.seed_axis)."""
        gather = self._gather if gather is None else gather
        clients = len(op.clients)
        block = self.clients_per_block(clients, idx.shape[2])
        if clients <= block:
            return self._train_block(op, start, idx, mask, gather, 0, record_at, per_row)
        parts = []
        for part in (slice(lo, min(clients, lo + block)) for lo in range(0, clients, block)):
            parts.append(
                self._train_block(
                    _clients_of(op, part, per_row),
                    start[part],
                    idx[part],
                    None if mask is None else mask[part],
                    gather,
                    part.start,
                    None if record_at is None else record_at[part],
                    per_row,
                )
            )
        params = torch.cat([p[0] for p in parts])
        carry = {k: torch.cat([p[1][k] for p in parts]) for k in op.carry}
        snapshot = None  # (a block that keeps no row has none: its rows are never read, as a kept-nothing row)
        if any(p[2] is not None for p in parts):
            snapshot = torch.cat([torch.empty_like(p[0]) if p[2] is None else p[2] for p in parts])
        return params, carry, snapshot

    def _train_block(self, op: Train, start, idx, mask, gather, first: int, record_at, per_row):
        """A block of clients' ``op.steps`` steps at once (:meth:`_train_batched`: ``first``, the position of the
        block's first client among the training's, for ``gather``).

        The linear path writes each step's minibatch and gradient into buffers of the block, reused step after
        step (the gradient's only while the step function keeps no view of it): the same arithmetic without a new
        allocation per step, whose pages the allocator may hand back to the system and fault in again. A block's
        minibatches, parameters and data stay in the cache from one step to the next; all 100 clients of five
        Figure-4 runs at once do not (docs/performance.md, "a block of clients at a time")."""
        w = start.clone()
        carry = {k: v.clone() for k, v in op.carry.items()}
        client_args = dict(op.client_args)
        shared = dict(op.shared)
        trained = self.model.trained if self.model.buffers else None
        # One index_select per step for all the block's clients (gathering all steps' minibatches ahead
        # measured slower: the step's inputs are then no longer in cache when used).
        rows_by_step = idx.transpose(0, 1).contiguous()  # [steps, C, B]
        active = None if mask is None else mask.any(dim=0).tolist()
        recorded = None if record_at is None else set(record_at.tolist())  # the steps after which rows are kept
        batch = self._batch_buffers(rows_by_step.shape[1:]) if self.linear is not None else None
        g_buffer = None
        snapshot = None
        for k in range(op.steps):
            if active is None or active[k]:
                x, y = gather(rows_by_step[k], batch, first)
                if self.linear is not None:
                    g = self.linear.grad(w, x, y, out=g_buffer)
                    written = None
                else:
                    _, g, written = self._vmap.loss_grad(w, x, y, train=True)
                w_next, carry_next = self.steps(op.step, w, g, carry, client_args, shared, k, per_row)
                if written is not None:  # the buffers: what the forward pass wrote, whatever the step did
                    w_next = torch.cat([w_next[:, :trained], written], dim=1)
                if mask is not None and not bool(mask[:, k].all()):
                    on = mask[:, k].to(w.device)
                    w_next = torch.where(on[:, None], w_next, w)
                    carry_next = {
                        name: torch.where(on.view(-1, *([1] * (v.dim() - 1))), v, carry[name])
                        for name, v in carry_next.items()
                    }
                w, carry = w_next, carry_next
                if self.linear is not None:
                    g_buffer = None if _shares_storage(g, w, *carry.values()) else g
            if record_at is None:
                if op.record_at == k + 1:
                    snapshot = w.clone()
            elif k + 1 in recorded:
                kept = record_at == k + 1
                snapshot = torch.empty_like(w) if snapshot is None else snapshot
                snapshot[kept] = w[kept]
        return w, carry, snapshot

    def _train_loop(self, op: Train, start, idx, mask, workers: int = 0):
        """One client after another (the reference: ``torch.func.grad``); ``workers`` >= 1: the "threads"
        strategy, that many clients at a time with :meth:`FlatModel.train_grad`."""
        if workers == 0:
            results = [self._train_client(self._train_grad, op, c, start, idx, mask) for c in range(len(op.clients))]
        elif workers == 1:
            grad_fn = leaf_grad(self.model)
            results = [self._train_client(grad_fn, op, c, start, idx, mask) for c in range(len(op.clients))]
        else:
            results = self._in_threads(op, start, idx, mask, workers)
        params = torch.stack([r[0] for r in results])
        snapshot = torch.stack([r[1] for r in results]) if op.record_at is not None else None
        carry = {k: torch.stack([r[2][k] for r in results]) for k in op.carry}
        return params, carry, snapshot

    def _train_client(self, grad_fn, op: Train, c: int, start, idx, mask, model: FlatModel | None = None):
        """Client c's ``op.steps`` steps: (final w, snapshot or None, final carry)."""
        model = model or self.model
        x_all, y_all = self._train_x, self._y
        w = start[c].clone()
        carry = {k: v[c].clone() for k, v in op.carry.items()}
        client_args = {k: v[c] for k, v in op.client_args.items()}
        snap = None
        for k in range(op.steps):
            if mask is None or bool(mask[c, k]):
                rows = idx[c, k].to(self.device)
                x, y = x_all[rows], y_all[rows]
                if model.buffers:
                    _, g, written = model.train_grad(w, x, y)
                    w, carry = op.step(w, g, carry, client_args, dict(op.shared), k)
                    w = torch.cat([w[: model.trained], written])
                else:
                    w, carry = op.step(w, grad_fn(w, x, y), carry, client_args, dict(op.shared), k)
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
            copy = getattr(local, "model", None)
            if copy is None:
                copy = local.model = self.model.copy()
                local.grad = leaf_grad(copy)
            return self._train_client(local.grad, op, c, start, idx, mask, copy)

        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return list(self._pool.map(run, range(len(op.clients))))
        finally:
            torch.set_num_threads(threads)

    # -- Evaluate ----------------------------------------------------------------------
    def evaluate(self, op: Evaluate):
        out = self._evaluate(op)
        if self.device.type == "cpu":
            return out
        return tuple(t.cpu() for t in out) if isinstance(out, tuple) else out.cpu()

    def _evaluate(self, op: Evaluate):
        clients = op.clients
        num = len(clients)
        params = op.params.to(self.device)
        params = params if params.dim() == 2 else params.expand(num, -1)
        need_grad = op.what != "loss"
        if op.full:
            if self.mode == "batched" and op.params.dim() == 1 and not need_grad:
                loss, gradient = self._full_loss_shared(params[0], clients), None
            else:
                losses, grads = [], []
                for c, client in enumerate(clients):
                    lo, hi = self._offsets[client], self._offsets[client + 1]
                    x, y = self._train_x[lo:hi], self._y[lo:hi]
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
                rows = rows.to(self.device)
                x, y = self._train_x[rows], self._y[rows]
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
        rows = rows.to(self.device)
        per_sample = self.model.per_sample_loss(w, self._train_x[rows], self._y[rows])
        owner = torch.from_numpy(np.repeat(np.arange(len(clients)), sizes)).to(self.device)
        sums = torch.zeros(len(clients), dtype=per_sample.dtype, device=self.device).index_add_(0, owner, per_sample)
        return sums / torch.from_numpy(sizes).to(per_sample.dtype).to(self.device)

    def samples_evaluated(self, op: Evaluate) -> np.ndarray:
        """How many samples each client processes for ``op`` (for pricing)."""
        if op.full:
            return self._sizes[op.clients].astype(float)
        return np.full(len(op.clients), float(op.batch_size or self.batch_size))


def _shares_storage(t: torch.Tensor, *others) -> bool:
    """Whether any of ``others`` is a view of ``t``'s memory (then ``t`` cannot be written again)."""
    ptr = t.untyped_storage().data_ptr()
    return any(isinstance(o, torch.Tensor) and o.untyped_storage().data_ptr() == ptr for o in others)


def _moved(op: Train, device: torch.device) -> Train:
    """``op`` with its tensors on ``device``."""
    move = lambda v: v.to(device) if isinstance(v, torch.Tensor) else v  # noqa: E731
    return replace(
        op,
        carry={k: move(v) for k, v in op.carry.items()},
        client_args={k: move(v) for k, v in op.client_args.items()},
        shared={k: move(v) for k, v in op.shared.items()},
    )


def _clients_of(op: Train, part: slice, per_row: frozenset = frozenset()) -> Train:
    """``op`` for the clients ``part`` of its clients (``per_row``: the keys of ``op.shared`` given per client)."""
    return replace(
        op,
        clients=op.clients[part],
        carry={k: v[part] for k, v in op.carry.items()},
        client_args={k: v[part] for k, v in op.client_args.items()},
        shared={k: v[part] if k in per_row else v for k, v in op.shared.items()},
    )
