import pytest
import torch

from edgefl.models import build_model, parameter_count


def test_parameter_counts_match_the_drdm_paper():
    assert build_model("linear", (1, 28, 28), 10, seed=0).dim == 7_850
    assert build_model("cnn", (1, 28, 28), 10, seed=0).dim == 794_310


@pytest.mark.parametrize("name", ["linear", "mlp", "cnn"])
def test_flat_forward_equals_the_module_forward(name):
    model = build_model(name, (1, 28, 28), 10, seed=0, hidden=16)
    x = torch.randn(5, 1, 28, 28)
    assert torch.allclose(model.forward(model.init_params(), x), model.module(x), atol=1e-6)


def test_seeded_init_is_reproducible_and_does_not_touch_the_global_rng():
    state = torch.random.get_rng_state()
    a = build_model("mlp", (60,), 10, seed=4).init_params()
    b = build_model("mlp", (60,), 10, seed=4).init_params()
    c = build_model("mlp", (60,), 10, seed=5).init_params()
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert torch.equal(state, torch.random.get_rng_state())


def test_measured_flops_of_the_linear_model():
    model = build_model("linear", (1, 28, 28), 10, seed=0)
    # forward: one 784x10 matmul = 2*784*10 FLOPs per sample; backward adds the weight gradient
    # (the input gradient is not needed): 2 * forward in total.
    assert model.eval_flops_per_sample == pytest.approx(2 * 784 * 10)
    assert model.train_flops_per_sample == pytest.approx(2 * 2 * 784 * 10)


def test_cnn_training_flops_are_about_three_times_the_forward():
    model = build_model("cnn", (1, 28, 28), 10, seed=0)
    ratio = model.train_flops_per_sample / model.eval_flops_per_sample
    assert 2.0 < ratio < 3.1


def test_regression_model_uses_mse():
    model = build_model("regression", (5,), 1, seed=0)
    w = torch.zeros(model.dim)
    x, y = torch.randn(4, 5), torch.ones(4)
    assert model.loss(w, x, y).item() == pytest.approx(1.0)


@pytest.mark.parametrize(
    "name, shape, classes",
    [("linear", (60,), 10), ("mlp", (784,), 10), ("cnn", (1, 28, 28), 10), ("regression", (1024,), 1)],
)
def test_parameter_count_is_the_built_models_dimension(name, shape, classes):
    """The memory check counts d before any allocation (meta device); it is the model's d."""
    assert parameter_count(name, shape, classes, hidden=50) == build_model(name, shape, classes, 0, hidden=50).dim
