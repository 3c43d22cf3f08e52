import numpy as np
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


def test_images_go_channels_last_only_to_models_with_max_pooling_and_several_channels():
    """FlatModel.inputs (docs/performance.md, "Benchmark models": torch's default-layout max-pool is ~10x slower
    on the CPU): the CIFAR CNN gets channels-last minibatches; the one-channel CNN's are the same memory either
    way, and a model without max-pooling (ResNet-18-GN) or of flat inputs keeps the default layout."""
    rgb, grey = torch.randn(4, 3, 32, 32), torch.randn(4, 1, 28, 28)
    cifar = build_model("cifar_cnn", (3, 32, 32), 10, seed=0)
    assert cifar.inputs(rgb).is_contiguous(memory_format=torch.channels_last)
    assert cifar.inputs(rgb).stride() != rgb.stride()
    assert build_model("cnn", (1, 28, 28), 10, seed=0).inputs(grey).stride() == grey.stride()
    resnet = build_model("resnet18_gn", (3, 32, 32), 10, seed=0)
    assert resnet.inputs(rgb).stride() == rgb.stride()


def test_the_channels_last_step_gives_the_default_layouts_numbers_up_to_rounding():
    """On a fixed input: for 3 in 40 random inputs (seeds 29, 33, 35 of 0-39, on an AVX2 CPU) two values of one window of
    the second max-pool lie within rounding of each other, the layouts pick different ones (one index), and some 5,700
    gradient entries then differ by up to 3e-4. Drawn from the global generator, the input depended on the tests run
    before it in the same process (a failure under xdist on 2026-11-28)."""
    model = build_model("cifar_cnn", (3, 32, 32), 10, seed=0)
    x = torch.randn(8, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    w, y = model.init_params(), torch.arange(8) % 10
    loss, g, _ = model.train_grad(w, x, y)
    module = model.module.train()  # the module itself, in the default layout: plain autograd
    reference = torch.nn.functional.cross_entropy(module(x), y)
    module.zero_grad()
    reference.backward()
    expected = torch.cat([p.grad.reshape(-1) for p in module.parameters()])
    assert torch.allclose(loss, reference.detach(), atol=1e-6)
    assert torch.allclose(g, expected, atol=1e-6)
    with torch.no_grad():
        assert torch.allclose(model.forward(w, x), module(x), atol=1e-5)


def test_an_evaluation_of_the_same_model_is_not_recomputed(monkeypatch):
    from edgefl import metrics
    from edgefl.data.registry import build_federated_data

    data = build_federated_data("synthetic", 3, seed=0)
    model = build_model("linear", data.input_shape, data.num_classes, seed=0)
    calls = []
    computed = metrics._evaluate_global
    monkeypatch.setattr(metrics, "_evaluate_global", lambda *a, **k: calls.append(1) or computed(*a, **k))
    w = model.init_params()
    first = metrics.evaluate_global(model, data, w)
    again = metrics.evaluate_global(model, data, w.clone())
    assert len(calls) == 1 and again.keys() == first.keys()  # evaluated once
    assert all(np.array_equal(again[k], first[k]) for k in first)
    again["client_acc"][0] = -1.0  # a caller's change does not reach the kept result
    assert metrics.evaluate_global(model, data, w)["client_acc"][0] == first["client_acc"][0]
    metrics.evaluate_global(model, data, w + 0.1)
    assert len(calls) == 2


@pytest.mark.parametrize("name", ["linear", "mlp", "cnn"])
def test_test_rows_drawn_from_a_pool_are_evaluated_once_per_pool_image(name, monkeypatch):
    """Clients' test rows drawn with replacement from a held-out pool (data.test_pool_rows): the evaluation runs the
    model on the pool's images only, and every number is the one the rows evaluated one by one give, bit for bit."""
    import dataclasses

    from edgefl import metrics
    from edgefl.data.federated import FederatedData, client_offsets
    from edgefl.executor import LinearGrad

    g = torch.Generator().manual_seed(3)
    pool_x, pool_y = torch.randn(300, 1, 28, 28, generator=g), torch.randint(0, 10, (300,), generator=g)
    rows = torch.randint(0, 300, (4 * 250,), generator=g).numpy()  # 4 clients x 250 rows, images repeated
    data = FederatedData(
        name="pooled",
        num_classes=10,
        input_shape=(1, 28, 28),
        train_x=torch.randn(400, 1, 28, 28, generator=g),
        train_y=torch.randint(0, 10, (400,), generator=g),
        train_offsets=client_offsets([100] * 4),
        test_x=pool_x[rows],
        test_y=pool_y[rows],
        test_offsets=client_offsets([250] * 4),
        global_test_x=pool_x,
        global_test_y=pool_y,
        test_pool_rows=rows,
    )
    model = build_model(name, data.input_shape, 10, seed=0, hidden=32)
    evaluated = []  # the number of inputs each model call is given
    computed, transposed = metrics.per_sample, metrics._transposed_logits

    def per_sample(m, w, x, *rest, **k):  # (a linear model: counted at its transposed logits)
        if LinearGrad.of(m) is None:
            evaluated.append(len(x))
        return computed(m, w, x, *rest, **k)

    monkeypatch.setattr(metrics, "per_sample", per_sample)
    monkeypatch.setattr(
        metrics, "_transposed_logits", lambda m, lin, w, x: evaluated.append(len(x)) or transposed(m, lin, w, x)
    )
    w = model.init_params() + 0.05 * torch.randn(model.dim, generator=g)
    pooled = metrics._evaluate_global(model, data, w)
    assert evaluated == [300, 400]  # the pool's images, then the training samples
    plain = metrics._evaluate_global(model, dataclasses.replace(data, test_pool_rows=None), w)
    assert evaluated[2:] == [1000, 400]
    assert pooled.keys() == plain.keys()
    for key, value in plain.items():
        assert np.array_equal(pooled[key], value) if isinstance(value, np.ndarray) else pooled[key] == value, key


@pytest.mark.parametrize("classes", [3, 10, 20])
def test_cross_entropy_on_transposed_logits_is_used_only_where_it_gives_the_same_bits(classes):
    """A linear classifier's loss is computed on its transposed logits [K, n] (edgefl.metrics._log_probabilities)
    only where edgefl.metrics.columns_are_exact finds there the bits of cross_entropy on [n, K]; where it does, they
    hold beyond its probe: every width (without the columns' padding, the kernel's scalar tail gave other bits in 76
    of 6,000 losses of these 400 matrices of 15 columns, K = 10, AVX-512), and the argmax's first index of ties."""
    import torch.nn.functional as F

    from edgefl import metrics

    g = torch.Generator().manual_seed(5)
    scales = torch.logspace(-2, 1.5, 400).view(-1, 1, 1)
    x = (torch.randn(400, 15, classes, generator=g) * scales).view(-1, 15, classes)
    x[::4] = x[::4].round()  # ties
    y = torch.randint(0, classes, (400, 15), generator=g)
    wide = torch.randn(1, 1013, classes, generator=g) * 4
    wide_y = torch.randint(0, classes, (1, 1013), generator=g)
    if not metrics.columns_are_exact(classes):
        return  # (the evaluation then uses [n, K]: test_the_evaluation_on_transposed_logits_is_the_row_layouts)
    for logits, labels in [*zip(x, y), (wide[0], wide_y[0])]:
        n = logits.shape[0]
        z = logits.t().contiguous()
        loss = metrics._log_probabilities(z).take(labels * metrics._padded(n) + torch.arange(n)).neg()
        expected = F.cross_entropy(logits, labels, reduction="none")
        assert torch.equal(loss.view(torch.int32), expected.view(torch.int32))
        assert torch.equal(z.argmax(dim=0), logits.argmax(dim=1))


@pytest.mark.parametrize("classes", [3, 10, 20])
def test_the_evaluation_on_transposed_logits_is_the_row_layouts(classes, monkeypatch):
    """evaluate_global of a linear classifier (its transposed logits, alone or handed by edgefl.metrics.Outputs in
    another column order) gives the bits of the [n, K] path (per_sample), on test rows drawn from a pool and images
    that are both in the pool and in the training set under other labels, evaluation after evaluation (the rows it
    keeps per run)."""
    import dataclasses

    from edgefl import metrics
    from edgefl.data.federated import FederatedData, client_offsets
    from edgefl.executor import LinearGrad

    g = torch.Generator().manual_seed(7)
    pool_x, pool_y = torch.randn(301, 1, 28, 28, generator=g), torch.randint(0, classes, (301,), generator=g)
    train_x, train_y = torch.randn(203, 1, 28, 28, generator=g), torch.randint(0, classes, (203,), generator=g)
    train_x[:20] = pool_x[:20]  # the same images, other labels
    train_y[:20] = (pool_y[:20] + 1) % classes
    train_x[20:30] = train_x[:10]
    rows = torch.randint(0, 301, (3 * 170,), generator=g).numpy()
    data = FederatedData(
        name="pooled",
        num_classes=classes,
        input_shape=(1, 28, 28),  # (MNIST's: an input's logits the same bits whichever inputs share the product)
        train_x=train_x,
        train_y=train_y,
        train_offsets=client_offsets([70, 70, 63]),
        test_x=pool_x[rows],
        test_y=pool_y[rows],
        test_offsets=client_offsets([150, 200, 160]),
        global_test_x=pool_x,
        global_test_y=pool_y,
        test_pool_rows=rows,
    )
    model = build_model("linear", data.input_shape, classes, seed=0)
    linear = LinearGrad.of(model)
    order = torch.randperm(504, generator=g)  # the pool's and the training images, shuffled: as a SeedBatch holds them
    inputs = torch.cat([pool_x, train_x]).reshape(504, -1)[order]
    where = torch.empty(504, dtype=torch.int64)
    where[order] = torch.arange(504)
    columns = (where[:301], where[301:])

    def outputs(w):
        return metrics._transposed_logits(model, linear, w, inputs), columns

    plain = dataclasses.replace(data, test_pool_rows=None)  # (each row its own column)
    for step in range(3):
        w = model.init_params() + (step + 1) * 0.05 * torch.randn(model.dim, generator=g)
        evaluations = [(data, None), (data, outputs), (plain, None)]
        transposed = [metrics._evaluate_global(model, d, w, o) for d, o in evaluations]
        with monkeypatch.context() as m:
            m.setitem(metrics._EXACT, classes, False)  # the [n, K] path
            rows = [metrics._evaluate_global(model, d, w, o) for d, o in evaluations]
        with monkeypatch.context() as m:
            m.setattr(metrics, "KEEP_ROWS", 100)  # (more rows than kept: built again at each evaluation)
            model.evaluation_rows = None
            transposed.append(metrics._evaluate_global(model, data, w, outputs))
            assert model.evaluation_rows is None
        for got, expected in zip(transposed, [*rows, rows[1]]):
            assert got.keys() == expected.keys()
            for key, value in expected.items():
                assert np.array_equal(got[key], value) if isinstance(value, np.ndarray) else got[key] == value, key


def test_a_label_out_of_the_classes_is_an_error_on_transposed_logits_too():
    """The gathered log-probability of a label outside 0..K-1 would be another class's (take wraps -1): the
    evaluation says what cross_entropy says."""
    from edgefl import metrics
    from edgefl.data.registry import build_federated_data

    data = build_federated_data("synthetic", 3, seed=0)
    model = build_model("linear", data.input_shape, data.num_classes, seed=0)
    for label in (-1, data.num_classes):
        data.train_y[5] = label
        with pytest.raises(IndexError, match=f"Target {label} is out of bounds"):
            metrics._evaluate_global(model, data, model.init_params())


def test_test_pool_rows_must_index_the_pool():
    from edgefl.data.federated import FederatedData, client_offsets

    x = torch.zeros(4, 3)
    common = dict(name="d", num_classes=2, input_shape=(3,), train_x=x, train_y=torch.zeros(4, dtype=torch.int64))
    common.update(train_offsets=client_offsets([2, 2]), test_x=x, test_y=torch.zeros(4, dtype=torch.int64))
    common.update(test_offsets=client_offsets([2, 2]), global_test_x=x[:2], global_test_y=torch.zeros(2))
    FederatedData(**common, test_pool_rows=np.array([0, 1, 1, 0]))
    for bad in (np.array([0, 1, 2, 0]), np.array([0, 1, -1, 0]), np.array([0, 1, 1])):
        with pytest.raises(ValueError, match="test_pool_rows"):
            FederatedData(**common, test_pool_rows=bad)
    with pytest.raises(ValueError, match="test_pool_rows"):  # rows of no pool
        FederatedData(**{**common, "global_test_x": None}, test_pool_rows=np.array([0, 1, 1, 0]))


@pytest.mark.parametrize("name, classes", [("linear", 10), ("regression", 1)])
def test_the_evaluation_runs_a_linear_model_in_the_transposed_form(name, classes, monkeypatch):
    """A linear model's evaluation computes W x^T + b (edgefl.executor.LinearGrad.logits), not the module's x W^T:
    the same outputs up to the products' rounding (the kernel change: up to about 1.5e-6 on MNIST-sized logits),
    in the module's layout; other models run their module."""
    from edgefl import metrics

    g = torch.Generator().manual_seed(2)
    model = build_model(name, (1, 28, 28), classes, seed=0)
    w = model.init_params() + 0.05 * torch.randn(model.dim, generator=g)
    x = torch.rand(2000, 1, 28, 28, generator=g)
    module = model.forward(w, x)
    monkeypatch.setattr(model, "forward", None)  # (not called)
    out = metrics.forward(model, w, x)
    assert out.shape == module.shape and torch.allclose(out, module, rtol=0, atol=1e-5)
    monkeypatch.undo()
    mlp = build_model("mlp", (1, 28, 28), 10, seed=0, hidden=16)
    assert torch.equal(metrics.forward(mlp, mlp.init_params(), x), mlp.forward(mlp.init_params(), x))


@pytest.mark.parametrize("name, classes", [("linear", 10), ("regression", 1), ("mlp", 10)])
def test_rows_scored_a_chunk_at_a_time_are_scored_as_all_at_once(name, classes, monkeypatch):
    """edgefl.metrics.per_sample scores CHUNK rows at a time (the [n, K] outputs and cross_entropy's temporaries of 10^6
    devices' 18 million rows would be 0.7 GB each): the same bits as one chunk of all, with given transposed logits
    and their columns too, uneven last chunk included."""
    from edgefl import metrics

    g = torch.Generator().manual_seed(3)
    shape = (1, 28, 28) if name == "mlp" else (20,)
    model = build_model(name, shape, classes, seed=0, hidden=16)
    w = model.init_params() + 0.05 * torch.randn(model.dim, generator=g)
    x = torch.rand(1000, *shape, generator=g)
    y = torch.randn(1000, generator=g) if classes == 1 else torch.randint(0, classes, (1000,), generator=g)
    whole = metrics.per_sample(model, w, x, y)
    monkeypatch.setattr(metrics, "CHUNK", 77)
    chunked = metrics.per_sample(model, w, x, y)
    assert torch.equal(chunked[0], whole[0]) and chunked[0].dtype == torch.float64
    assert (chunked[1] is None) == (whole[1] is None) == (classes == 1)
    assert chunked[1] is None or torch.equal(chunked[1], whole[1])
    linear = metrics.LinearGrad.of(model)
    if linear is not None:  # transposed logits given, with the columns of the rows among more inputs
        columns = torch.randperm(1300, generator=g)[:1000]
        inputs = torch.empty(1300, *shape)
        inputs[columns] = x
        z = metrics._transposed_logits(model, linear, w, inputs)
        given = metrics.per_sample(model, w, x, y, (z, columns))
        assert torch.allclose(given[0], whole[0], rtol=0, atol=1e-6)  # (another product's chunks: rounding)
        monkeypatch.setattr(metrics, "CHUNK", 1 << 20)
        assert all(
            torch.equal(a, b) for a, b in zip(given, metrics.per_sample(model, w, x, y, (z, columns))) if a is not None
        )


@pytest.mark.parametrize("n", [0, 1, 11, 12, 1023, 1025, 1537, 5000])
def test_the_transposed_logits_are_those_of_their_chunks_concatenated(n):
    """LinearGrad.logits writes each chunk's product in place: the bits of the chunks computed apart and then
    concatenated (as before), for several models stacked."""
    from edgefl.executor import LinearGrad, one_thread

    g = torch.Generator().manual_seed(4)
    linear = LinearGrad(10, 784, "cross_entropy")
    w = torch.randn(3, linear.dim, generator=g) * 0.05
    x = torch.rand(n, 784, generator=g)
    weight, bias = w[:, : 10 * 784].reshape(30, 784), w[:, 10 * 784 :].reshape(30, 1)
    size = max(1, -(-n // max(1, round(n / 1024))))
    with one_thread():
        parts = [torch.addmm(bias, weight, x[lo : lo + size].t()) for lo in range(0, max(n, 1), size)]
    assert torch.equal(linear.logits(w, x), torch.cat(parts, dim=1).view(3, 10, n))
