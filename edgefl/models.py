"""Model zoo, seen through flat parameter vectors.

Algorithms work on one flat vector ``w`` of all d parameters per client (easy state,
easy averaging, easy batching as a ``[C, d]`` matrix). :class:`FlatModel` maps a flat
vector back to the module's named parameters (views, no copies) and evaluates the
module functionally with ``torch.func.functional_call``.

Models:
- ``linear``: flatten -> Linear(in, classes)  (MNIST: 784*10 + 10 = 7,850 parameters, DRDM paper)
- ``mlp``:    flatten -> Linear(in, hidden) -> ReLU -> Linear(hidden, classes)
- ``cnn``:    the DRDM paper's KMNIST CNN: conv3x3 1->16, ReLU, maxpool2, conv3x3 16->32,
              ReLU, maxpool2, FC 1568->500, ReLU, FC 500->10 (padding 1; 794,310 parameters)
- ``regression``: flatten -> Linear(in, 1) with mean squared error (composite-objective papers)
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import nn
from torch.func import functional_call
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

MODEL_NAMES = ("linear", "mlp", "cnn", "regression")
LossName = Literal["cross_entropy", "mse"]


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
    """A module evaluated from a flat parameter vector ``w`` of length ``dim``."""

    def __init__(self, module: nn.Module, input_shape: tuple[int, ...], loss: LossName = "cross_entropy"):
        self.module = module
        self.input_shape = tuple(input_shape)
        self.loss_name = loss
        self.names: list[str] = []
        self.shapes: list[torch.Size] = []
        self.offsets: list[int] = [0]
        for name, p in module.named_parameters():
            self.names.append(name)
            self.shapes.append(p.shape)
            self.offsets.append(self.offsets[-1] + p.numel())
        self.dim = self.offsets[-1]
        self._flops_train: float | None = None
        self._flops_eval: float | None = None

    def init_params(self) -> torch.Tensor:
        """The module's current (seeded) parameters as one flat float32 vector [d]."""
        return torch.cat([p.detach().reshape(-1) for p in self.module.parameters()]).to(torch.float32)

    def unflatten(self, w: torch.Tensor) -> dict[str, torch.Tensor]:
        return {
            name: w[start:end].view(shape)
            for name, shape, start, end in zip(self.names, self.shapes, self.offsets[:-1], self.offsets[1:])
        }

    def forward(self, w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        out = functional_call(self.module, self.unflatten(w), (x,))
        return out.squeeze(-1) if self.loss_name == "mse" else out

    def loss(self, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Mean minibatch loss (cross-entropy on logits, or mean squared error: :func:`output_loss`)."""
        return output_loss(self.forward(w, x), y, self.loss_name)

    def per_sample_loss(self, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return output_loss(self.forward(w, x), y, self.loss_name, reduction="none")

    # -- compute cost, measured once (torch.utils.flop_counter's formulas) ---------------
    def _measure_flops(self, batch: int = 8) -> None:
        x = torch.zeros((batch, *self.input_shape))
        y = torch.zeros(batch) if self.loss_name == "mse" else torch.zeros(batch, dtype=torch.long)
        w = self.init_params()
        with _FlopCounter() as counter:
            with torch.no_grad():
                self.loss(w, x, y)
        self._flops_eval = counter.total / batch
        w_req = w.clone().requires_grad_(True)
        with _FlopCounter() as counter:
            self.loss(w_req, x, y).backward()
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


def fits_cnn(input_shape: tuple[int, ...]) -> bool:
    """Whether the cnn takes inputs of this shape: square images (C, H, W) with H % 4 == 0 (two 2x2 poolings)."""
    return len(input_shape) == 3 and input_shape[1] == input_shape[2] and input_shape[1] % 4 == 0


def _module(name: str, input_shape: tuple[int, ...], num_classes: int, hidden: int) -> nn.Module:
    """The named model's layers (initialised by PyTorch's defaults, on the current default device)."""
    if name not in MODEL_NAMES:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(MODEL_NAMES)}")
    in_features = math.prod(input_shape)
    if name == "linear":
        return nn.Sequential(nn.Flatten(), nn.Linear(in_features, num_classes))
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, num_classes))
    if name == "cnn":
        if not fits_cnn(input_shape):
            raise ValueError(f"the cnn model needs square images (C, H, W) with H % 4 == 0, got {input_shape}")
        return DRDMCNN(input_shape[0], num_classes, input_shape[1])
    return nn.Sequential(nn.Flatten(), nn.Linear(in_features, 1))  # regression


def parameter_count(name: str, input_shape: tuple[int, ...], num_classes: int, hidden: int = 200) -> int:
    """d, the model's number of parameters, without allocating them (the layers built on PyTorch's meta
    device): for checks before a run, e.g. of its memory."""
    with torch.device("meta"):
        return sum(p.numel() for p in _module(name, input_shape, num_classes, hidden).parameters())


def build_model(
    name: str,
    input_shape: tuple[int, ...],
    num_classes: int,
    seed: int,
    *,
    hidden: int = 200,
) -> FlatModel:
    """Build a model with seeded PyTorch default initialisation."""
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        module = _module(name, input_shape, num_classes, hidden)
    finally:
        torch.random.set_rng_state(generator_state)
    return FlatModel(module, input_shape, loss="mse" if name == "regression" else "cross_entropy")
