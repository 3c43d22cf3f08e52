"""The built-in benchmark models (edgefl/zoo.py): parameter counts as their sources give them."""

from __future__ import annotations

import pytest
import torch

from edgefl.models import build_model, parameter_count


def lstm_layer_tf(inputs: int, units: int) -> int:
    """A TensorFlow LSTM layer's parameters: 4 gates x (inputs + units + one bias) x units."""
    return 4 * (inputs + units + 1) * units


def test_cifar_cnn_is_the_tensorflow_tutorials_about_a_million_parameters():
    # McMahan et al. 2017: "about 10^6 parameters"; the tutorial's layers on 24x24 crops (cifar10.py):
    conv1, conv2 = 5 * 5 * 3 * 64 + 64, 5 * 5 * 64 * 64 + 64
    local3 = (6 * 6 * 64) * 384 + 384  # 24 -> 12 -> 6 after two 3x3 stride-2 SAME poolings
    local4, softmax = 384 * 192 + 192, 192 * 10 + 10
    assert conv1 + conv2 + local3 + local4 + softmax == 1_068_298
    assert build_model("cifar_cnn", (3, 24, 24), 10, 0).dim == 1_068_298
    assert parameter_count("cifar_cnn", (3, 32, 32), 10) == 1_068_298 + (8 * 8 - 6 * 6) * 64 * 384


def test_femnist_cnn_is_leafs():
    # LEAF models/femnist/cnn.py: conv 5x5 32, conv 5x5 64, dense 2048, dense 62 on 28x28
    expected = (5 * 5 * 32 + 32) + (5 * 5 * 32 * 64 + 64) + (7 * 7 * 64 * 2048 + 2048) + (2048 * 62 + 62)
    assert expected == 6_603_710
    assert build_model("femnist_cnn", (1, 28, 28), 62, 0).dim == 6_603_710


def test_resnet18_gn_is_the_cifar_resnet18():
    # torchvision's ResNet-18 has 11,689,512 parameters (ImageNet: 7x7 stem, 1000 classes); the CIFAR form
    # has a 3x3 stem and a 10-class head; GroupNorm has BatchNorm's affine parameters and no buffers
    cifar = 11_689_512 - 7 * 7 * 3 * 64 + 3 * 3 * 3 * 64 - (512 * 1000 + 1000) + (512 * 10 + 10)
    assert cifar == 11_173_962
    assert parameter_count("resnet18_gn", (3, 32, 32), 10) == 11_173_962
    model = build_model("resnet18_gn", (3, 32, 32), 10, 0)
    assert model.buffers == 0 and all(m.num_groups == 2 for m in model.module.modules() if hasattr(m, "num_groups"))
    assert parameter_count("resnet18_gn", (3, 32, 32), 10, keys={"groups": 32}) == 11_173_962


def test_shakespeare_lstm_is_leafs():
    # LEAF models/shakespeare/stacked_lstm.py: embedding 80 x 8, two LSTM layers of 256, dense 80
    tensorflow = 80 * 8 + lstm_layer_tf(8, 256) + lstm_layer_tf(256, 256) + 256 * 80 + 80
    assert tensorflow == 817_872
    # PyTorch's LSTM keeps two bias vectors (b_ih, b_hh): 4 x 256 more per layer
    assert build_model("shakespeare_lstm", (80,), 80, 0).dim == tensorflow + 2 * 4 * 256


def test_the_lstm_reads_character_indices_and_predicts_the_next():
    model = build_model("shakespeare_lstm", (80,), 80, 0, keys={"hidden": 16})
    x = torch.randint(0, 80, (3, 80)).float()
    assert model.forward(model.init_params(), x).shape == (3, 80)


@pytest.mark.parametrize(
    "name, shape, why",
    [
        ("cifar_cnn", (784,), "square images"),
        ("resnet18_gn", (3, 32, 32), "must divide 64"),
        ("shakespeare_lstm", (1, 28, 28), "sequences of character indices"),
    ],
)
def test_a_shape_a_model_cannot_take_is_refused(name, shape, why):
    keys = {"groups": 3} if name == "resnet18_gn" else None
    with pytest.raises(ValueError, match=why):
        parameter_count(name, shape, 10, keys=keys)
