"""Models of one's own (model.name = "package.module:factory", docs/extending.md "Models"), buffers, the
executor's paths on them, and run.device.

The plug-in is examples/own-model/small_resnet.py (a small ResNet with BatchNorm), run from its scenario."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from algorithms.ops import Train
from edgefl.cli import main
from edgefl.data.federated import FederatedData
from edgefl.executor import Executor
from edgefl.models import build_model

from conftest import HANG_S

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "own-model"
NAME = "small_resnet:small_resnet"
FAST = ["run.rounds=4", "run.eval_every=4", "data.num_clients=10", "algorithm.clients_per_round=3"]


@pytest.fixture
def own_model(tmp_path, monkeypatch):
    """A copy of the example folder as the current folder (with its scenario's data path still valid)."""
    for name in ("small_resnet.py", "small-resnet.toml"):
        shutil.copy(EXAMPLE / name, tmp_path / name)
    text = (tmp_path / "small-resnet.toml").read_text()
    (tmp_path / "small-resnet.toml").write_text(text.replace("../../../shared", str(ROOT.parent / "shared")))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("small_resnet", None)


def cli(capsys, *args):
    code = main([str(a) for a in args])
    return code, capsys.readouterr().err


def sets(values):
    return sum((["--set", v] for v in values), [])


def test_a_model_of_ones_own_runs_with_its_bits_and_flops_in_the_outputs(own_model, capsys):
    code, err = cli(capsys, "run", "small-resnet.toml", "--out", "out", "--no-plots", "-q", *sets(FAST))
    assert code == 0, err
    summary = json.loads((own_model / "out" / "summary.json").read_text())
    import small_resnet

    module = small_resnet.small_resnet((1, 28, 28), 10, width=8, blocks=2)
    params = sum(p.numel() for p in module.parameters())
    running = sum(b.numel() for b in module.buffers() if b.is_floating_point())  # BatchNorm's means, variances
    assert summary["model"] == NAME and summary["model_buffers"] == running == 2 * 8 * 5
    assert summary["model_parameters"] == params + running
    assert summary["message_bits"] == 32 * (params + running)  # buffers are sent: their bits count
    assert summary["train_flops_per_sample"] > 2 * summary["eval_flops_per_sample"] > 0
    events = (own_model / "out" / "events.csv").read_text()
    assert str(32 * (params + running) + 800) in events or "upload" in events  # the payload, priced


def test_the_models_keys_are_validated(own_model, capsys):
    table = 'model."small_resnet:small_resnet"'
    for value, why in [
        (f"{table}.widht=4", "unknown key"),
        (f"{table}.width=-nan", "width"),
        (f"{table}.width=inf", "width"),
        (f"{table}.width=2.5", "width"),
    ]:
        code, err = cli(capsys, "run", "small-resnet.toml", "--out", "bad", "--no-plots", "-q", "--set", value)
        assert code == 2 and why in err and "Traceback" not in err, (value, err)
        assert not (own_model / "bad").exists()
    code, err = cli(capsys, "run", "small-resnet.toml", "--out", "bad", "-q", "--set", "model.name=no_such:model")
    assert code == 2 and "model.name" in err and "cannot import 'no_such'" in err


@pytest.mark.parametrize(
    "body, says",
    [
        ("def broken(input_shape, num_classes):\n    raise RuntimeError('no layers')\n", "RuntimeError: no layers"),
        ("def broken(input_shape, num_classes):\n    return 3\n", "returned a int, expected a torch.nn.Module"),
        (
            "from torch import nn\ndef broken(input_shape, num_classes):\n    return nn.Flatten()\n",
            "gives outputs of shape (2, 784)",
        ),
    ],
)
def test_a_model_that_fails_is_exit_4_naming_it(own_model, capsys, body, says):
    (own_model / "bad_model.py").write_text(body)
    code, err = cli(
        capsys, "run", "small-resnet.toml", "--out", "out", "-q", "--no-plots", "--set", "model.name=bad_model:broken"
    )
    assert code == 4 and "model.name = 'bad_model:broken'" in err and says in err, err
    assert not (own_model / "out").exists()
    sys.modules.pop("bad_model", None)


@pytest.mark.e2e  # several whole edgefl processes: CI's second stage (make test-e2e)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGKILL")
def test_kill_9_then_resume_is_byte_identical_with_a_batchnorm_model(own_model):
    args = ["--no-plots", *sets([*FAST, "run.rounds=6", "run.checkpoint_every=2"])]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    command = ["-v", "run", "small-resnet.toml", *args]

    from test_checkpoint import killed_then_resumed

    reference = subprocess.run(
        [sys.executable, "-m", "edgefl", *command, "--out", "reference"],
        env=env,
        cwd=own_model,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=HANG_S,
    )
    assert reference.returncode == 0, reference.stderr.decode()[-2000:]
    assert "resuming" in killed_then_resumed(command, own_model / "res", env=env, cwd=own_model)
    for name in ("metrics.csv", "clients.csv", "events.csv", "scenario.toml"):
        assert (own_model / "res" / name).read_bytes() == (own_model / "reference" / name).read_bytes(), name
    reference = json.loads((own_model / "reference" / "summary.json").read_text())
    resumed_summary = json.loads((own_model / "res" / "summary.json").read_text())
    for key in ("final", "energy_j", "executor_strategy", "message_bits"):
        assert resumed_summary[key] == reference[key], key


# -- buffers and the executor's paths -------------------------------------------------------------------
def images(clients=4, per_client=12, seed=0) -> FederatedData:
    g = torch.Generator().manual_seed(seed)
    n = clients * per_client
    offsets = np.arange(0, n + 1, per_client)
    return FederatedData(
        name="images",
        num_classes=3,
        input_shape=(1, 8, 8),
        train_x=torch.randn(n, 1, 8, 8, generator=g),
        train_y=torch.randint(0, 3, (n,), generator=g),
        train_offsets=offsets,
        test_x=torch.randn(n, 1, 8, 8, generator=g),
        test_y=torch.randint(0, 3, (n,), generator=g),
        test_offsets=offsets,
    )


def prox_step(w, g, carry, client, shared, k):
    """SGD with a proximal pull towards 0: it changes every slot of w, the buffers' too."""
    return w - 0.1 * (g + 0.5 * w), carry


@pytest.mark.parametrize("strategy", ["vmap", "threads"])
def test_buffers_are_what_the_forward_pass_wrote_on_every_path(own_model, strategy):
    data = images()
    model = build_model(NAME, data.input_shape, data.num_classes, 0, keys={"width": 4, "blocks": 1})
    assert model.buffers == 4 * 2 * 3 and model.dim == model.trained + model.buffers
    clients = np.array([0, 2, 3])
    op = Train(clients=clients, start=model.init_params(), steps=3, step=prox_step, record_at=2)
    reference = Executor(model, data, 5, 7, "loop").train(op)
    result = Executor(model, data, 5, 7, strategy=strategy).train(op)
    assert torch.allclose(result.params, reference.params, atol=1e-5)
    assert torch.allclose(result.snapshot, reference.snapshot, atol=1e-5)
    means = result.params[:, model.trained : model.trained + 4]  # the first BatchNorm's running means
    assert not torch.equal(means, torch.zeros_like(means))  # written by the forward pass (they start at 0)
    # the step's proximal pull did not touch them: one client's means are the running average of its batch means
    variances = result.params[:, model.trained + 4 : model.trained + 8]
    assert (variances > 0).all()


def test_vmap_chunked_by_memory_gives_the_same_numbers(own_model):
    data = images(clients=5)
    model = build_model(NAME, data.input_shape, data.num_classes, 0, keys={"width": 4, "blocks": 1})
    op = Train(clients=np.arange(5), start=model.init_params(), steps=2, shared={"lr": 0.1})
    whole = Executor(model, data, 4, 3, strategy="vmap", chunk=100).train(op)
    chunked = Executor(model, data, 4, 3, strategy="vmap", chunk=2).train(op)
    assert torch.allclose(whole.params, chunked.params, atol=1e-6)  # a batch of 2 convolutions, not 5: rounding


def test_a_path_the_model_cannot_take_is_left_with_the_rule_or_the_measurement():
    data = images()

    class NoVmap(torch.nn.Module):  # .item() inside forward: vmap cannot map it
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(64, 3)

        def forward(self, x):
            scale = float(x.abs().max().item()) + 1.0
            return self.fc(x.flatten(1)) / scale

    from edgefl.models import FlatModel

    model = FlatModel(NoVmap(), (1, 8, 8))
    op = Train(clients=np.arange(3), start=model.init_params(), steps=1, shared={"lr": 0.1})
    executor = Executor(model, data, 4, 0)  # the rule: vmap for a model without convolutions ...
    assert executor.structural_guess() == "vmap"
    fallen_back = executor.train(op)
    assert executor.strategy == "threads"  # ... which cannot map it: threads, the same on every run
    measured = Executor(model, data, 4, 0, measure=True)  # run.executor = "fastest"
    assert torch.equal(measured.train(op).params, fallen_back.params)
    assert "vmap" not in measured.timings and measured.strategy in ("threads", "loop")


# -- run.device ---------------------------------------------------------------------------------------------
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without a GPU")
def test_cuda_without_a_gpu_is_exit_2_and_auto_falls_back_to_the_cpu(tmp_path, capsys):
    quick = ROOT / "scenarios" / "quickstart.toml"
    code, err = cli(capsys, "run", quick, "--out", tmp_path / "gpu", "-q", "--set", "run.device=cuda")
    assert code == 2 and 'run.device = "cuda"' in err and "no CUDA GPU" in err and "Traceback" not in err
    assert not (tmp_path / "gpu").exists()
    code, err = cli(capsys, "run", quick, "--out", tmp_path / "auto", "-q", "--no-plots", "--set", "run.device=auto")
    assert code == 0, err
    assert json.loads((tmp_path / "auto" / "summary.json").read_text())["device"] == "cpu"
    code, err = cli(capsys, "run", quick, "--out", tmp_path / "tpu", "-q", "--set", "run.device=tpu")
    assert code == 2 and "run.device" in err


def test_a_model_that_fails_while_training_is_exit_4_naming_it(own_model, capsys):
    (own_model / "late_fault.py").write_text(
        "from torch import nn\n\n\nclass Picky(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.fc = nn.Linear(784, 10)\n\n    def forward(self, x):\n        if x.shape[0] > 2:\n"
        "            raise ValueError('batches of 3 or more are not for me')\n        return self.fc(x.flatten(1))\n\n\n"
        "def picky(input_shape, num_classes):\n    return Picky()\n"
    )
    code, err = cli(
        capsys, "run", "small-resnet.toml", "--out", "out", "-q", "--no-plots", "--set", "model.name=late_fault:picky"
    )
    assert code == 4 and "model.name = 'late_fault:picky'" in err and "batches of 3 or more" in err, err
    sys.modules.pop("late_fault", None)
