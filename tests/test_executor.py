"""Executor: the batched strategies (closed-form linear, vmap, client threads) against the loop.

Every comparison draws the same minibatches (one seeded stream, same order), so the paths
must agree to float32 rounding (<= 1e-5).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from algorithms.ops import Evaluate, Train, sgd_step
from edgefl.data import build_federated_data
from edgefl.executor import Executor, LinearGrad, StepApplier
from edgefl.models import build_model

TOL = 1e-5


@pytest.fixture(scope="module")
def tabular():
    return build_federated_data("synthetic", 8, 0, samples_per_client=30, synthetic_dim=12)


@pytest.fixture(scope="module")
def images():
    """A small image data set for the CNN (synthetic pixels; only shapes matter here)."""
    from edgefl.data import FederatedData

    gen = torch.Generator().manual_seed(0)
    sizes = np.array([12, 9, 15, 10])
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    x = torch.randn(int(offsets[-1]), 1, 8, 8, generator=gen)
    y = torch.randint(0, 3, (int(offsets[-1]),), generator=gen)
    return FederatedData("images", 3, (1, 8, 8), x, y, offsets, x[:4], y[:4], np.array([0, 1, 2, 3, 4]))


def executors(model, data, **kw):
    return {
        "fast": Executor(model, data, 5, 3, "batched", **kw),
        "generic": Executor(model, data, 5, 3, "batched", fast_linear=False, **kw),
        "loop": Executor(model, data, 5, 3, "loop", **kw),
    }


def assert_same(results: dict, key=lambda r: r):
    ref = key(results["loop"])
    for name, r in results.items():
        for a, b in zip(key(r), ref):
            if a is None:
                assert b is None
            else:
                assert torch.allclose(a.double(), b.double(), atol=TOL, rtol=0), name


def dyn_step(w, grad, carry, client, shared, k):
    """FedDyn/DRDM-style modified gradient step, with a per-client scalar and a carried counter."""
    d = grad - client["g"] + shared["mu"] * (w - shared["w_bar"])
    return w - shared["lr"] * client["scale"] * d, {"n": carry["n"] + 1, "m": 0.5 * carry["m"] + grad}


def norm_step(w, grad, carry, client, shared, k):
    """Not elementwise (a norm): must be mapped with vmap, per client."""
    w = w - shared["lr"] * grad
    return w * torch.clamp(2.0 / torch.linalg.vector_norm(w), max=1.0), carry


def shape_step(w, grad, carry, client, shared, k):
    """Reads the parameter count: under a direct [C, d] call w.shape[0] would be C."""
    return w - shared["lr"] * grad / w.shape[0], carry


def inplace_step(w, grad, carry, client, shared, k):
    return w.sub_(shared["lr"] * grad), carry


def train_op(model, clients, steps, step=dyn_step, lr=0.1, **kw):
    num = len(clients)
    gen = torch.Generator().manual_seed(5)
    w0 = model.init_params()
    return Train(
        clients,
        w0,
        steps,
        step,
        shared={"lr": lr, "mu": 0.01, "w_bar": w0},
        client_args={"g": 0.01 * torch.randn(num, model.dim, generator=gen), "scale": torch.linspace(0.5, 1.5, num)},
        carry={"n": torch.zeros(num), "m": torch.zeros(num, model.dim)},
        **kw,
    )


@pytest.mark.parametrize("model_name", ["linear", "mlp", "regression"])
def test_train_paths_agree_with_mask_and_snapshot(tabular, model_name):
    data = tabular
    if model_name == "regression":  # MSE on a real-valued target
        from dataclasses import replace

        data = replace(tabular, train_y=tabular.train_y.float(), test_y=tabular.test_y.float())
    model = build_model(model_name, data.input_shape, data.num_classes, 0, hidden=7)
    clients = np.array([0, 2, 3, 6, 7])
    mask = torch.rand(5, 6, generator=torch.Generator().manual_seed(2)) > 0.35
    mask[:, 2] = False  # a step nobody takes
    results = {}
    for name, ex in executors(model, data).items():
        lr = 0.002 if model_name == "regression" else 0.1  # MSE on labels 0..9: keep it from diverging
        r = ex.train(train_op(model, clients, 6, lr=lr, record_at=4, step_mask=mask))
        results[name] = (r.params, r.snapshot, r.carry["n"], r.carry["m"])
        np.testing.assert_array_equal(r.steps_done, mask.sum(dim=1).numpy())
        assert torch.equal(r.carry["n"], mask.sum(dim=1).float())
    assert_same(results)
    expected = "linear" if model_name != "mlp" else "vmap"
    fresh = Executor(model, data, 5, 3)
    assert (fresh.strategy or fresh.structural_guess()) == expected  # mlp: vmap unless measured slower


@pytest.mark.parametrize("model_name", ["linear", "regression"])
def test_a_linear_training_in_blocks_gives_each_client_the_bits_of_all_at_once(tabular, model_name, monkeypatch):
    """The linear path trains a CPU's clients a block at a time (Executor._train_batched, for the cache): blocks of
    2 of 7 clients give every client's parameters, snapshot and carry the same bits as all 7 at once, with a step
    mask that leaves a step to some blocks only."""
    import edgefl.executor as executor_module

    data = tabular
    if model_name == "regression":
        from dataclasses import replace

        data = replace(tabular, train_y=tabular.train_y.float(), test_y=tabular.test_y.float())
    model = build_model(model_name, data.input_shape, data.num_classes, 0)
    clients = np.array([0, 1, 2, 3, 5, 6, 7])
    mask = torch.rand(7, 5, generator=torch.Generator().manual_seed(3)) > 0.4
    mask[:, 1] = False  # a step nobody takes
    mask[:4, 3] = False  # a step the first two blocks skip
    lr = 0.002 if model_name == "regression" else 0.1
    results = {}
    for block in (2, 7):
        ex = Executor(model, data, 5, 3, "batched")
        monkeypatch.setattr(executor_module, "BLOCK_BYTES", block * 5 * ex.linear.D * 4)  # batch 5, float32 inputs
        assert ex.strategy == "linear" and ex.clients_per_block(7, 5) == block
        r = ex.train(train_op(model, clients, 5, lr=lr, record_at=3, step_mask=mask))
        results[block] = (r.params, r.snapshot, r.carry["n"], r.carry["m"])
    for blocked, whole in zip(results[2], results[7]):
        assert torch.equal(blocked, whole)


@pytest.mark.parametrize("step", [norm_step, shape_step, inplace_step, sgd_step])
def test_steps_that_are_not_elementwise_are_mapped(tabular, step):
    model = build_model("linear", tabular.input_shape, tabular.num_classes, 0)
    clients = np.arange(6)
    results = {
        name: (ex.train(train_op(model, clients, 3, step=step, record_at=1)).params,)
        for name, ex in executors(model, tabular).items()
    }
    assert_same(results)


def test_step_applier_calls_elementwise_steps_directly_and_maps_the_others():
    applier = StepApplier()
    C, d = 4, 6
    w, g = torch.randn(C, d), torch.randn(C, d)
    client = {"g": torch.randn(C, d), "scale": torch.rand(C)}
    carry = {"n": torch.zeros(C), "m": torch.zeros(C, d)}
    shared = {"lr": 0.1, "mu": 0.5, "w_bar": torch.randn(d)}
    direct = applier(dyn_step, w, g, carry, client, shared, 0)
    assert (applier.direct_calls, applier.vmap_calls) == (1, 0)
    mapped = torch.func.vmap(dyn_step, in_dims=(0, 0, 0, 0, None, None))(w, g, carry, client, shared, 0)
    assert torch.allclose(direct[0], mapped[0]) and direct[1]["n"].shape == (C,)
    for step in (norm_step, shape_step, inplace_step):
        before = w.clone()
        out = applier(step, w, g, {}, {}, {"lr": 0.1}, 0)
        reference = torch.stack([step(before[c].clone(), g[c], {}, {}, {"lr": 0.1}, 0)[0] for c in range(C)])
        assert torch.allclose(out[0], reference, atol=1e-6)
        w = before
    assert applier.direct_calls == 1 and applier.vmap_calls == 3
    # remembered: a second call of a mapped step goes straight to vmap
    applier(norm_step, w, g, {}, {}, {"lr": 0.1}, 0)
    assert applier.vmap_calls == 4


def inplace_temporaries_step(w, grad, carry, client, shared, k):
    """In place on its own temporaries only (DRDM's step is written so): elementwise row by row."""
    pull = shared["w_bar"] - w
    pull.mul_(shared["mu"])
    d = grad - client["g"]
    d -= pull
    d.mul_(client["scale"])
    return w - d, carry


def test_in_place_updates_of_the_steps_own_temporaries_are_called_directly_with_the_same_bits():
    applier = StepApplier()
    C, d = 4, 6
    w, g = torch.randn(C, d), torch.randn(C, d)
    client = {"g": torch.randn(C, d), "scale": torch.rand(C)}
    shared = {"mu": 0.5, "w_bar": torch.randn(d)}
    inputs = [t.clone() for t in (w, g, client["g"], client["scale"], shared["w_bar"])]
    out, _ = applier(inplace_temporaries_step, w, g, {}, client, shared, 0)
    assert (applier.direct_calls, applier.vmap_calls) == (1, 0)
    rows = [
        inplace_temporaries_step(w[c], g[c], {}, {"g": client["g"][c], "scale": client["scale"][c]}, shared, 0)[0]
        for c in range(C)
    ]
    assert torch.equal(out, torch.stack(rows))
    # the inputs are untouched; an in-place update of an input is still mapped (test above: inplace_step)
    for before, after in zip(inputs, (w, g, client["g"], client["scale"], shared["w_bar"])):
        assert torch.equal(before, after)


def previous_gradient_step(w, grad, carry, client, shared, k):
    """Carries the gradient itself (a view of the executor's gradient buffer) into the next step."""
    return w - shared["lr"] * (grad + carry["prev"]), {"prev": grad}


def test_a_step_that_keeps_the_gradient_gets_its_own_gradient_each_step(tabular):
    """The linear path reuses its gradient buffer only while the step keeps no view of it."""
    model = build_model("linear", tabular.input_shape, tabular.num_classes, 0)
    clients = np.arange(5)
    results = {}
    for name, ex in executors(model, tabular).items():
        op = Train(
            clients,
            model.init_params(),
            4,
            previous_gradient_step,
            shared={"lr": 0.1},
            carry={"prev": torch.zeros(len(clients), model.dim)},
        )
        r = ex.train(op)
        results[name] = (r.params, r.carry["prev"])
    assert_same(results)


def test_shared_tensor_of_another_shape_is_not_broadcast_wrongly():
    """A shared [C]-long vector must not be broadcast against [C, d] (it is not per-client)."""
    applier = StepApplier()

    def step(w, grad, carry, client, shared, k):
        return w - shared["v"].sum() * grad, carry

    w, g = torch.randn(3, 3), torch.randn(3, 3)
    out, _ = applier(step, w, g, {}, {}, {"v": torch.ones(3)}, 0)
    assert torch.allclose(out, w - 3 * g)


def test_linear_closed_form_matches_autograd(tabular):
    model = build_model("linear", tabular.input_shape, tabular.num_classes, 0)
    fast = LinearGrad.of(model)
    assert fast is not None and LinearGrad.of(build_model("mlp", tabular.input_shape, 3, 0)) is None
    w = model.init_params().expand(3, -1) + 0.1 * torch.randn(3, model.dim)
    x, y = tabular.train_x[:12].view(3, 4, -1), tabular.train_y[:12].view(3, 4)
    loss, g = fast.loss_grad(w, x, y)
    for c in range(3):
        wc = w[c].clone().requires_grad_(True)
        ref = model.loss(wc, x[c], y[c])
        (ref_g,) = torch.autograd.grad(ref, wc)
        assert loss[c].item() == pytest.approx(ref.item(), abs=1e-6)
        assert torch.allclose(g[c], ref_g, atol=1e-6)


@pytest.mark.parametrize("what", ["loss", "grad", "loss_grad"])
@pytest.mark.parametrize("full", [False, True])
@pytest.mark.parametrize("shared_params", [False, True])
def test_evaluate_paths_agree(tabular, what, full, shared_params):
    model = build_model("linear", tabular.input_shape, tabular.num_classes, 0)
    clients = np.array([1, 4, 5])
    params = model.init_params() if shared_params else model.init_params() + 0.1 * torch.randn(3, model.dim)
    results = {}
    for name, ex in executors(model, tabular).items():
        out = ex.evaluate(Evaluate(clients, params, what, full=full))
        results[name] = out if isinstance(out, tuple) else (out,)
        assert np.array_equal(
            ex.samples_evaluated(Evaluate(clients, params, what, full=full)),
            tabular.train_sizes[clients] if full else np.full(3, 5.0),
        )
    assert_same(results)


def test_convolutional_models_train_clients_in_threads(images):
    model = build_model("cnn", images.input_shape, images.num_classes, 0)
    clients = np.array([0, 1, 3])
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        mask = torch.tensor([[True, True, False], [True, False, True], [False, True, True]])
        results = {}
        for name in ("batched", "loop"):
            ex = Executor(model, images, 4, 1, name, strategy="threads" if name == "batched" else None)
            r = ex.train(train_op(model, clients, 3, record_at=2, step_mask=mask))
            results[name] = (r.params, r.snapshot, r.carry["m"])
            assert torch.get_num_threads() == 2  # restored after the threads ran
        assert Executor(model, images, 4, 1).structural_guess() == "threads"
        results["loop"], results["threads"] = results["loop"], results.pop("batched")
        assert_same(results)
    finally:
        torch.set_num_threads(threads)


def test_bad_step_mask_shape_is_an_error(tabular):
    model = build_model("linear", tabular.input_shape, tabular.num_classes, 0)
    with pytest.raises(ValueError, match="step_mask"):
        Executor(model, tabular, 5, 0).train(train_op(model, np.arange(3), 2, step_mask=torch.ones(3, 3, dtype=bool)))


@pytest.mark.parametrize("model_name", ["linear", "mlp", "cnn"])
def test_gradients_of_the_batched_strategies_match_torch_func_grad(tabular, images, model_name):
    from edgefl.executor import VmapGrad, leaf_grad

    data = images if model_name == "cnn" else tabular
    model = build_model(model_name, data.input_shape, data.num_classes, 0, hidden=7)
    w = model.init_params() + 0.05 * torch.randn(3, model.dim, generator=torch.Generator().manual_seed(1))
    x, y = data.train_x[:12].view(3, 4, *data.input_shape), data.train_y[:12].view(3, 4)
    reference = torch.stack([torch.func.grad(model.loss)(w[c], x[c], y[c]) for c in range(3)])
    loss, g, _ = VmapGrad(model).loss_grad(w, x, y)
    assert torch.allclose(g, reference, atol=1e-6)
    assert torch.allclose(loss, torch.stack([model.loss(w[c], x[c], y[c]) for c in range(3)]), atol=1e-6)
    assert torch.allclose(torch.stack([leaf_grad(model)(w[c], x[c], y[c]) for c in range(3)]), reference, atol=1e-6)
