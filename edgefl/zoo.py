"""The field's benchmark models, built in (``model.name``), each as its source describes it.

Each is a factory ``f(input_shape, num_classes, **keys) -> nn.Module``, as a user's model plug-in is
(docs/extending.md), with its own keys annotated (validated from the signature, edgefl.models). The parameter
counts are checked against the sources in tests/test_zoo.py.

- ``cifar_cnn``: McMahan et al., "Communication-Efficient Learning of Deep Networks from Decentralized Data",
  AISTATS 2017, §3 (CIFAR-10): "the model architecture was taken from the TensorFlow tutorial ... two
  convolutional layers followed by two fully connected layers and then a linear transformation layer ...
  about 10^6 parameters". The tutorial (tensorflow/models tutorials/image/cifar10/cifar10.py): conv 5x5 64,
  max-pool 3x3 stride 2 (SAME), conv 5x5 64, max-pool 3x3 stride 2, FC 384, FC 192, linear 10, on 24x24
  crops: 1,068,298 parameters (on uncropped 32x32 images: 1,756,426). The tutorial's local response
  normalisations (no parameters) are left out.
- ``femnist_cnn``: LEAF (Caldas et al. 2018), models/femnist/cnn.py: conv 5x5 32 (SAME), max-pool 2, conv
  5x5 64 (SAME), max-pool 2, dense 2048, dense 62: 6,603,710 parameters on 28x28 images, 62 classes.
- ``resnet18_gn``: ResNet-18 (He et al. 2016) in its CIFAR form (3x3 stem, no max-pool), every BatchNorm
  replaced by GroupNorm (Hsieh et al., "The Non-IID Data Quagmire of Decentralized Machine Learning", ICML
  2020), 2 groups per layer as in Reddi et al., "Adaptive Federated Optimization", ICLR 2021: 11,173,962
  parameters for 10 classes (torchvision's ImageNet ResNet-18, 11,689,512, less its 7x7 stem and 1000-class
  head); no buffers (GroupNorm keeps no running statistics).
- ``shakespeare_lstm``: LEAF, models/shakespeare/stacked_lstm.py: embedding 8 of the 80 characters, two LSTM
  layers of 256, dense 80 on the last step: 817,872 parameters in TensorFlow, 819,920 in PyTorch (whose
  LSTM keeps two bias vectors per gate, 4 x 256 more per layer). Inputs: 80 character indices (as floats).
"""

from __future__ import annotations

import math
from typing import Annotated

from pydantic import Field
from torch import nn


def _same_pool_side(side: int) -> int:
    """A side after a 3x3 stride-2 max-pool with TensorFlow's SAME padding: ceil(side / 2)."""
    return math.ceil(side / 2)


class CifarCNN(nn.Module):
    """McMahan et al. 2017's CIFAR-10 CNN (the TensorFlow tutorial's, without its response normalisations)."""

    def __init__(self, in_channels: int, side: int, num_classes: int):
        super().__init__()
        pooled = _same_pool_side(_same_pool_side(side))
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 64, 5, padding=2),
            nn.ReLU(),
            nn.MaxPool2d(3, 2, padding=1),
            nn.Conv2d(64, 64, 5, padding=2),
            nn.ReLU(),
            nn.MaxPool2d(3, 2, padding=1),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(64 * pooled * pooled, 384),
            nn.ReLU(),
            nn.Linear(384, 192),
            nn.ReLU(),
            nn.Linear(192, num_classes),
        )

    def forward(self, x):
        return self.classifier(self.features(x))


def cifar_cnn(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    _square_images("cifar_cnn", input_shape)
    return CifarCNN(input_shape[0], input_shape[1], num_classes)


def femnist_cnn(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """LEAF's FEMNIST CNN (padding 2 with 5x5 kernels: TensorFlow's SAME)."""
    _square_images("femnist_cnn", input_shape, multiple=4)
    channels, side = input_shape[0], input_shape[1]
    return nn.Sequential(
        nn.Conv2d(channels, 32, 5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(64 * (side // 4) ** 2, 2048),
        nn.ReLU(),
        nn.Linear(2048, num_classes),
    )


class _BasicBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int, groups: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.norm1 = nn.GroupNorm(groups, c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.norm2 = nn.GroupNorm(groups, c_out)
        self.shortcut = (
            nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.GroupNorm(groups, c_out))
            if stride != 1 or c_in != c_out
            else nn.Identity()
        )

    def forward(self, x):
        out = nn.functional.relu(self.norm1(self.conv1(x)))
        return nn.functional.relu(self.norm2(self.conv2(out)) + self.shortcut(x))


class ResNet18GN(nn.Module):
    def __init__(self, in_channels: int, num_classes: int, groups: int):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(in_channels, 64, 3, 1, 1, bias=False), nn.GroupNorm(groups, 64), nn.ReLU())
        layers, c_in = [], 64
        for c_out, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers += [_BasicBlock(c_in, c_out, stride, groups), _BasicBlock(c_out, c_out, 1, groups)]
            c_in = c_out
        self.layers = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, num_classes))

    def forward(self, x):
        return self.head(self.layers(self.stem(x)))


GroupCount = Annotated[int, Field(ge=1, le=64, description="GroupNorm groups per layer (divides 64).")]


def resnet18_gn(input_shape: tuple[int, ...], num_classes: int, groups: GroupCount = 2) -> nn.Module:
    if len(input_shape) != 3 or min(input_shape[1:]) < 8:
        raise ValueError(f"resnet18_gn needs images (channels, height, width) of 8 pixels or more, got {input_shape}")
    if 64 % groups:
        raise ValueError(f"model.resnet18_gn.groups = {groups} must divide 64 (the narrowest layer's channels)")
    return ResNet18GN(input_shape[0], num_classes, groups)


class CharLSTM(nn.Module):
    """LEAF's Shakespeare model: characters (indices, given as floats) -> embedding -> stacked LSTM -> the
    next character's logits from the last step."""

    def __init__(self, vocabulary: int, embedding: int, hidden: int, layers: int):
        super().__init__()
        self.embed = nn.Embedding(vocabulary, embedding)
        self.lstm = nn.LSTM(embedding, hidden, num_layers=layers, batch_first=True)
        self.out = nn.Linear(hidden, vocabulary)

    def forward(self, x):
        states, _ = self.lstm(self.embed(x.long()))
        return self.out(states[:, -1])


def shakespeare_lstm(
    input_shape: tuple[int, ...],
    num_classes: int,
    embedding: Annotated[int, Field(ge=1, le=4096, description="Embedding width (LEAF: 8).")] = 8,
    hidden: Annotated[int, Field(ge=1, le=8192, description="LSTM units per layer (LEAF: 256).")] = 256,
    layers: Annotated[int, Field(ge=1, le=16, description="Stacked LSTM layers (LEAF: 2).")] = 2,
) -> nn.Module:
    if len(input_shape) != 1:
        raise ValueError(f"shakespeare_lstm needs sequences of character indices (length,), got {input_shape}")
    return CharLSTM(num_classes, embedding, hidden, layers)


def _square_images(name: str, input_shape: tuple[int, ...], multiple: int = 1) -> None:
    if len(input_shape) != 3 or input_shape[1] != input_shape[2] or input_shape[1] % multiple:
        need = "square images (channels, side, side)" + (f" with side % {multiple} == 0" if multiple > 1 else "")
        raise ValueError(f"{name} needs {need}, got {input_shape}")
