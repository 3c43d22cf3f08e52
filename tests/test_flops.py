"""The models' FLOP counts equal torch.utils.flop_counter's, without importing torch._dynamo."""

import subprocess
import sys
import warnings

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from edgefl.model_catalogue import MODEL_NAMES
from edgefl.models import build_model

CASES = [
    ("linear", (1, 28, 28), 10),
    ("linear", (60,), 10),
    ("mlp", (1, 28, 28), 10),
    ("mlp", (60,), 7),
    ("cnn", (1, 28, 28), 10),
    ("cnn", (3, 32, 32), 10),
    ("regression", (60,), 1),
    ("regression", (5,), 1),
    ("cifar_cnn", (3, 24, 24), 10),
    ("femnist_cnn", (1, 28, 28), 62),
    ("resnet18_gn", (3, 16, 16), 10),
    ("shakespeare_lstm", (10,), 80),
]


def test_every_model_of_the_zoo_is_covered():
    assert {name for name, _, _ in CASES} == set(MODEL_NAMES)


def reference_flops(model, batch=8):
    """(train, eval) FLOPs per sample as FlopCounterMode counts them."""
    x = torch.zeros((batch, *model.input_shape))
    y = torch.zeros(batch) if model.loss_name == "mse" else torch.zeros(batch, dtype=torch.long)
    w = model.init_params()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # oneDNN's flags about TF32 on Intel GPUs
        with torch.backends.mkldnn.flags(enabled=False):  # as edgefl counts: an LSTM as its matmuls
            with FlopCounterMode(display=False) as counter:
                with torch.no_grad():
                    model.loss(w, x, y)
            eval_flops = counter.get_total_flops() / batch
            with FlopCounterMode(display=False) as counter:
                model.train_loss(w.clone().requires_grad_(True), x, y).backward()
    return counter.get_total_flops() / batch, eval_flops


@pytest.mark.parametrize("name,input_shape,classes", CASES)
def test_flops_equal_flop_counter_mode(name, input_shape, classes):
    model = build_model(name, input_shape, classes, seed=0, hidden=50)
    train, evaluation = reference_flops(model)
    assert evaluation > 0 and train > evaluation
    assert model.train_flops_per_sample == train
    assert model.eval_flops_per_sample == evaluation


def test_hand_counts():
    # linear 60 -> 10: forward one 60x10 matmul; backward only the weight gradient
    linear = build_model("linear", (60,), 10, seed=0)
    assert (linear.eval_flops_per_sample, linear.train_flops_per_sample) == (1200.0, 2400.0)
    # mlp 60 -> 50 -> 10: forward 2*(3000 + 500); backward weight grads of both layers and
    # the input gradient of the second
    mlp = build_model("mlp", (60,), 10, seed=0, hidden=50)
    assert (mlp.eval_flops_per_sample, mlp.train_flops_per_sample) == (7000.0, 15000.0)


def test_measuring_flops_does_not_import_dynamo():
    code = (
        "import sys\n"
        "from edgefl.model_catalogue import MODEL_NAMES\n"
        "from edgefl.models import build_model\n"
        "for name in MODEL_NAMES:\n"
        "    shape = (12,) if name in ('linear', 'mlp', 'regression', 'shakespeare_lstm') else (1, 8, 8)\n"
        "    m = build_model(name, shape, 3, seed=0, hidden=4)\n"
        "    assert m.train_flops_per_sample > m.eval_flops_per_sample > 0\n"
        "assert 'torch._dynamo' not in sys.modules, 'torch._dynamo was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
