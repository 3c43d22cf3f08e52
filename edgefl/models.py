"""Model zoo, seen through flat vectors.

Algorithms work on one flat vector ``w`` per client (easy state, easy averaging, easy batching as a ``[C, d]``
matrix). :class:`FlatModel` maps a flat vector back to the module's named tensors (views, no copies) and
evaluates the module functionally with ``torch.func.functional_call``. ``w`` holds the module's parameters,
then its floating-point buffers (e.g. BatchNorm's running statistics): buffers are part of the model that is
sent, averaged and counted in a message's bits like parameters, but not trained by gradient: after each local
step their slots hold what the training forward pass wrote into them (docs/extending.md, "Models").

Models (``model.name``): the built-ins below and in :mod:`edgefl.zoo` (the field's benchmark models), an
installed entry point of the group ``edgefl.models``, or ``"package.module:factory"``, where
``factory(input_shape, num_classes, **keys)`` returns an ``nn.Module``; its keys come from the scenario's
``[model."package.module:factory"]`` table, validated against the factory's signature (:func:`keys_model`).
- ``linear``: flatten -> Linear(in, classes)  (MNIST: 784*10 + 10 = 7,850 parameters, DRDM paper)
- ``mlp``:    flatten -> Linear(in, hidden) -> ReLU -> Linear(hidden, classes)
- ``cnn``:    the DRDM paper's KMNIST CNN: conv3x3 1->16, ReLU, maxpool2, conv3x3 16->32,
              ReLU, maxpool2, FC 1568->500, ReLU, FC 500->10 (padding 1; 794,310 parameters)
- ``regression``: flatten -> Linear(in, 1) with mean squared error (composite-objective papers)
- ``cifar_cnn``, ``femnist_cnn``, ``resnet18_gn``, ``shakespeare_lstm``: :mod:`edgefl.zoo`.
"""

from __future__ import annotations

import math
import warnings
from copy import deepcopy
from typing import Literal

import torch
from torch import nn
from torch.func import functional_call
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

from edgefl.model_catalogue import BUILTINS, REGISTRY, LossName, fits_cnn, loss_of
from edgefl.plugins import PluginError, faults_named


class _FlopCounter(TorchDispatchMode):
    """Total FLOPs of the aten ops run under it, with torch.utils.flop_counter's formulas.

    ``FlopCounterMode`` counts the same (tests/test_flops.py checks equality for every model
    of the zoo), but each call of its dispatch handler, like that of any
    ``TorchDispatchMode`` subclass by default, is wrapped in ``torch._disable_dynamo``,
    whose first call imports ``torch._dynamo`` (1.5 s or so, once per process). This mode
    opts out of that wrapping (``_should_skip_dynamo``): it is never traced by
    ``torch.compile``. It keeps only the global total (no per-module table, no module hooks).
    """

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False

    def __init__(self):
        super().__init__()
        self.total = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        # as FlopCounterMode: count through a decomposition where there is one ...
        with self:
            out = func.decompose(*args, **kwargs)
        if out is not NotImplemented:
            return out
        # ... else run the op and count it if it has a formula (matmuls, convolutions)
        out = func(*args, **kwargs)
        formula = flop_registry.get(func._overloadpacket)
        if formula is not None:
            self.total += formula(*args, **kwargs, out_val=out)
        return out


def output_loss(out: torch.Tensor, y: torch.Tensor, loss: LossName, reduction: Literal["mean", "none"] = "mean"):
    """The training loss of a model's outputs on labels ``y`` (the one home of the loss): cross-entropy
    on logits ``out`` [..., classes], or the squared error of a regression's ``out`` [..., 1] (or [...]).
    ``reduction`` "mean": one number, the mean over every sample; "none": per sample, ``y``'s shape."""
    if loss == "mse":
        squared = (out.squeeze(-1) - y) ** 2
        return torch.mean(squared) if reduction == "mean" else squared
    per_sample = nn.functional.cross_entropy(out.flatten(0, -2), y.flatten(), reduction=reduction)
    return per_sample if reduction == "mean" else per_sample.view(y.shape)


class FlatModel:
    """A module evaluated from a flat vector ``w`` of length ``dim``: its parameters (the first ``trained``
    values), then its floating-point buffers. Integer buffers (BatchNorm's ``num_batches_tracked``) stay in
    the module: they are neither sent nor averaged."""

    def __init__(self, module: nn.Module, input_shape: tuple[int, ...], loss: LossName = "cross_entropy"):
        self.module = module
        self.input_shape = tuple(input_shape)
        self.loss_name = loss
        self.names: list[str] = []
        self.shapes: list[torch.Size] = []
        self.offsets: list[int] = [0]
        for name, p in module.named_parameters():
            self._add(name, p)
        self.trained = self.offsets[-1]  # parameters; the buffers follow
        self._param_count = len(self.names)
        for name, b in module.named_buffers():
            if b.is_floating_point():
                self._add(name, b)
        self.dim = self.offsets[-1]
        self.buffers = self.dim - self.trained
        # modules whose training and evaluation differ (BatchNorm, dropout): their mode is set per call
        self._modal = any(
            isinstance(m, (nn.modules.batchnorm._NormBase, nn.modules.dropout._DropoutNd)) for m in module.modules()
        )
        # Images go through a model with 2-D max-pooling in channels-last layout on the CPU: torch's max-pool
        # kernel for the default layout measured ~10x slower there (docs/performance.md, "Benchmark models":
        # the CIFAR CNN's training step 1.14x, its evaluation 1.75x faster). A no-op for one-channel images.
        self._channels_last = len(self.input_shape) == 3 and any(isinstance(m, nn.MaxPool2d) for m in module.modules())
        self.device = torch.device("cpu")
        self.last_evaluation: tuple | None = None  # (data, w, result) of edgefl.metrics.evaluate_global's last call
        self.evaluation_rows: tuple | None = None  # (data, columns, widths, rows) edgefl.metrics' evaluations read
        self._flops_train: float | None = None
        self._flops_eval: float | None = None

    def _add(self, name: str, tensor: torch.Tensor) -> None:
        self.names.append(name)
        self.shapes.append(tensor.shape)
        self.offsets.append(self.offsets[-1] + tensor.numel())

    def to(self, device: torch.device) -> "FlatModel":
        """The module on ``device`` (edgefl.device chose it): inputs and ``w`` are moved there by the callers."""
        self.module.to(device)
        self.device = torch.device(device)
        return self

    def copy(self) -> "FlatModel":
        """An independent copy (its own module: ``functional_call`` swaps a module's tensors while it runs)."""
        twin = FlatModel(deepcopy(self.module), self.input_shape, self.loss_name)
        twin.device = self.device
        return twin

    def init_params(self) -> torch.Tensor:
        """The module's current (seeded) parameters and float buffers as one flat float32 vector [d] (on the CPU)."""
        tensors = [p for p in self.module.parameters()] + [b for b in self.module.buffers() if b.is_floating_point()]
        return torch.cat([t.detach().reshape(-1).cpu() for t in tensors]).to(torch.float32)

    def unflatten(self, w: torch.Tensor) -> dict[str, torch.Tensor]:
        return {
            name: w[start:end].view(shape)
            for name, shape, start, end in zip(self.names, self.shapes, self.offsets[:-1], self.offsets[1:])
        }

    def mode(self, train: bool) -> None:
        """Training or evaluation behaviour of the module's layers (BatchNorm's batch statistics, dropout)."""
        if self._modal and self.module.training != train:
            self.module.train(train)

    def inputs(self, x: torch.Tensor) -> torch.Tensor:
        """A minibatch ``x`` on the model's device, in the memory layout its layers run fastest with."""
        x = x.to(self.device)
        if self._channels_last and self.device.type == "cpu" and x.dim() == 4:
            return x.contiguous(memory_format=torch.channels_last)
        return x

    def forward(self, w: torch.Tensor, x: torch.Tensor, train: bool = False) -> torch.Tensor:
        """The module's outputs at ``w`` (evaluation behaviour unless ``train``; buffers then are written in
        place into ``w``'s buffer slots: pass a copy)."""
        self.mode(train)
        out = functional_call(self.module, self.unflatten(w.to(self.device)), (self.inputs(x),))
        return out.squeeze(-1) if self.loss_name == "mse" else out

    def loss(self, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Mean minibatch loss (cross-entropy on logits, or mean squared error: :func:`output_loss`), evaluation
        behaviour."""
        return output_loss(self.forward(w, x), y.to(self.device), self.loss_name)

    def train_loss(self, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Mean minibatch loss with the training behaviour of the layers (for models without buffers)."""
        return output_loss(self.forward(w, x, train=True), y.to(self.device), self.loss_name)

    def per_sample_loss(self, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return output_loss(self.forward(w, x), y.to(self.device), self.loss_name, reduction="none")

    def train_grad(self, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor):
        """One client's training gradient at ``w`` [d] on a minibatch: (loss, gradient [d] with zeros in the
        buffer slots, the buffers [d - trained] the forward pass wrote, or None without buffers).

        Autograd through one leaf tensor per parameter (detached views of ``w``, no copy) and one ``cat`` at
        the end: differentiating the flat vector itself makes autograd build, for every parameter view, a zero
        tensor of the full length d to scatter that view's gradient into (for the CNN's 794,310 parameters
        that doubles a step's time). Buffers go in as a copy, so ``w`` is not written."""
        self.mode(True)
        w = w.to(self.device)
        tensors = self.unflatten(w)
        leaves = [tensors[name].detach().requires_grad_(True) for name in self.names[: self._param_count]]
        buffers = w[self.trained :].detach().clone() if self.buffers else None
        named = dict(zip(self.names, leaves))
        if buffers is not None:
            named.update(
                (name, buffers[lo - self.trained : hi - self.trained].view(shape))
                for name, shape, lo, hi in self._buffer_slots()
            )
        out = functional_call(self.module, named, (self.inputs(x),))
        loss = output_loss(out.squeeze(-1) if self.loss_name == "mse" else out, y.to(self.device), self.loss_name)
        grads = torch.autograd.grad(loss, leaves)
        flat = torch.cat([g.reshape(-1) for g in grads] + ([torch.zeros_like(buffers)] if buffers is not None else []))
        return loss.detach(), flat, buffers

    def _buffer_slots(self):
        """(name, shape, start, end) of each buffer in ``w``."""
        k = self._param_count
        return list(zip(self.names[k:], self.shapes[k:], self.offsets[k:-1], self.offsets[k + 1 :]))

    # -- compute cost, measured once (torch.utils.flop_counter's formulas) ---------------
    def _measure_flops(self, batch: int = 8) -> None:
        # oneDNN off: its fused LSTM kernel has no FLOP formula; without it an LSTM runs (and is counted) as
        # its matmuls (2 x 4 x hidden x (inputs + hidden) per step and layer forward)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            with torch.backends.mkldnn.flags(enabled=False):
                self._count_flops(batch)

    def _count_flops(self, batch: int) -> None:
        x = example_inputs(self.input_shape, batch)
        y = torch.zeros(batch) if self.loss_name == "mse" else torch.zeros(batch, dtype=torch.long)
        w = self.init_params()
        with _FlopCounter() as counter:
            with torch.no_grad():
                self.loss(w, x, y)
        self._flops_eval = counter.total / batch
        with _FlopCounter() as counter:
            self.train_grad(w, x, y)
        self._flops_train = counter.total / batch

    @property
    def train_flops_per_sample(self) -> float:
        """Forward + backward FLOPs for one training sample (matmuls and convolutions)."""
        if self._flops_train is None:
            self._measure_flops()
        return float(self._flops_train)

    @property
    def eval_flops_per_sample(self) -> float:
        """Forward-only FLOPs for one sample."""
        if self._flops_eval is None:
            self._measure_flops()
        return float(self._flops_eval)


class DRDMCNN(nn.Module):
    """The DRDM paper's Kuzushiji-MNIST CNN (padding, pooling and ReLUs as in its spec)."""

    def __init__(self, in_channels: int = 1, num_classes: int = 10, side: int = 28):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 16, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(32 * (side // 4) ** 2, 500), nn.ReLU(), nn.Linear(500, num_classes)
        )

    def forward(self, x):
        return self.classifier(self.features(x))


# -- the built-in models, as factories f(input_shape, num_classes, **keys) like a plug-in's ----------------
def linear(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), num_classes))


def mlp(input_shape: tuple[int, ...], num_classes: int, hidden: int = 200) -> nn.Module:
    in_features = math.prod(input_shape)
    return nn.Sequential(nn.Flatten(), nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, num_classes))


def cnn(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    if not fits_cnn(input_shape):
        raise ValueError(f"the cnn model needs square images (C, H, W) with H % 4 == 0, got {input_shape}")
    return DRDMCNN(input_shape[0], num_classes, input_shape[1])


def regression(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), 1))


def example_inputs(input_shape: tuple[int, ...], batch: int, device=None) -> torch.Tensor:
    """Zeros of the model's input shape (valid inputs for every model: image pixels, or character index 0)."""
    return torch.zeros((batch, *input_shape), device=device)


def _module(
    name: str, input_shape: tuple[int, ...], num_classes: int, hidden: int, keys: dict | None = None
) -> nn.Module:
    """The named model's layers (initialised by its factory, PyTorch's defaults for the built-ins, on the
    current default device). A plug-in's exception, or a result that is not an nn.Module, is a PluginError."""
    factory = REGISTRY.get(name)  # UnknownPlugin (a ValueError) for an unknown name
    keys = dict(keys or {})
    if name == "mlp":
        keys.setdefault("hidden", hidden)
    if name in BUILTINS:
        return factory(tuple(input_shape), num_classes, **keys)
    with faults_named():
        module = factory(tuple(input_shape), num_classes, **keys)
    if not isinstance(module, nn.Module):
        raise PluginError(
            f"the plug-in model.name = {name!r} returned a {type(module).__name__}, expected a torch.nn.Module "
            "(docs/extending.md, Models)"
        )
    return module


def parameter_count(
    name: str, input_shape: tuple[int, ...], num_classes: int, hidden: int = 200, keys: dict | None = None
) -> int:
    """d, the length of the model's flat vector (parameters and float buffers), without allocating them (the
    layers built on PyTorch's meta device): for checks before a run, e.g. of its memory. A built-in's is
    remembered per shape and keys (a sweep validates each of its grid points: 210 for the Figure-4 study)."""
    memo = (name, tuple(input_shape), num_classes, hidden, repr(sorted((keys or {}).items())))
    if name in BUILTINS and memo in _COUNTED:
        return _COUNTED[memo]
    with torch.device("meta"):
        module = _module(name, input_shape, num_classes, hidden, keys)
    count = sum(p.numel() for p in module.parameters()) + sum(
        b.numel() for b in module.buffers() if b.is_floating_point()
    )
    if name in BUILTINS:  # (a plug-in's factory is called every time: its faults are its own)
        _COUNTED[memo] = count
    return count


_COUNTED: dict[tuple, int] = {}


def saved_bytes(
    name: str, input_shape: tuple[int, ...], num_classes: int, hidden: int = 200, keys: dict | None = None
) -> tuple[float, float]:
    """(bytes per sample, bytes per minibatch) that a training step keeps for its backward pass (the tensors
    autograd saves, other than the model's own), measured on a real forward pass with 2 and 4 samples (the
    slope and the rest): edgefl.memory's estimate of the activations. Remembered per model and shape."""
    memo = (name, tuple(input_shape), num_classes, hidden, repr(sorted((keys or {}).items())))
    if memo not in _SAVED:
        _SAVED[memo] = _measure_saved(build_model(name, input_shape, num_classes, 0, hidden=hidden, keys=keys))
    return _SAVED[memo]


_SAVED: dict[tuple, tuple[float, float]] = {}


def _measure_saved(model: FlatModel) -> tuple[float, float]:
    w = model.init_params().to(model.device)
    own = w.untyped_storage().data_ptr()
    sizes = []
    for batch in (2, 4):  # not 1: BatchNorm1d refuses a batch of one sample in training
        seen: dict[int, int] = {}

        def pack(t: torch.Tensor, seen=seen):
            storage = t.untyped_storage()
            if storage.data_ptr() != own:
                seen[storage.data_ptr()] = storage.nbytes()
            return t

        x = example_inputs(model.input_shape, batch)
        y = torch.zeros(batch) if model.loss_name == "mse" else torch.zeros(batch, dtype=torch.long)
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            model.train_grad(w, x, y)
        sizes.append(sum(seen.values()))
    per_sample = max(0.0, (sizes[1] - sizes[0]) / 2)
    return per_sample, max(0.0, sizes[0] - 2 * per_sample)


def build_model(
    name: str,
    input_shape: tuple[int, ...],
    num_classes: int,
    seed: int,
    *,
    hidden: int = 200,
    keys: dict | None = None,
) -> FlatModel:
    """Build a model with seeded initialisation (on the CPU; :meth:`FlatModel.to` moves it). A plug-in model
    is checked on a minibatch of 2 zeros: its output must be [2, num_classes] (a regression's: [2] or [2, 1])."""
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        module = _module(name, input_shape, num_classes, hidden, keys)
    finally:
        torch.random.set_rng_state(generator_state)
    model = FlatModel(module, input_shape, loss=loss_of(name, num_classes))
    if name not in BUILTINS:
        _check_plugin_output(name, model, num_classes)
    return model


def _check_plugin_output(name: str, model: FlatModel, num_classes: int) -> None:
    with faults_named(), torch.no_grad():
        out = model.module.eval()(example_inputs(model.input_shape, 2))
    model.module.train()
    expected = [(2,), (2, 1)] if num_classes == 1 else [(2, num_classes)]
    shape = tuple(out.shape) if isinstance(out, torch.Tensor) else None
    if shape not in expected:
        got = f"outputs of shape {shape}" if shape is not None else f"a {type(out).__name__}"
        raise PluginError(
            f"the plug-in model.name = {name!r} gives {got} for a minibatch of 2 inputs of shape "
            f"{model.input_shape}; expected {' or '.join(str(e) for e in expected)} (one "
            + ("prediction" if num_classes == 1 else f"logit per class, {num_classes} classes")
            + " per sample)"
        )
