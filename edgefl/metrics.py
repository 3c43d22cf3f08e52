"""Learning metrics of the global model, computed over ALL N clients' own test sets.

- acc_mean: unweighted mean of per-client test accuracy;
- acc_worst: minimum over clients;
- acc_std: population standard deviation across clients (same units as accuracy, 0..1);
- loss: average training loss over all training samples (the global empirical risk).

How (docs/performance.md, "The evaluation of the global model"): the model runs on :func:`evaluation_inputs`, the
clients' test rows (or the smaller pool they are drawn from) and the training rows. A linear model (flatten ->
Linear, edgefl.executor.LinearGrad.of) runs in the transposed form W x^T + b (:meth:`LinearGrad.logits`), whichever
executor trains it, so one seed gives the same numbers on every path; other models run their module's forward, in
chunks. The loss and the accuracy are then the same per-sample cross-entropy (or squared error) and argmax on the
[n, K] outputs for every model (a row's numbers do not depend on the other rows evaluated with it:
tests/test_models.py). Runs that read the same inputs can have their linear models' outputs computed together, one
call for all (``outputs``: edgefl.seed_axis), each run's numbers its solo run's, bit for bit.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from edgefl.executor import LinearGrad
from edgefl.models import output_loss

CHUNK = 8192

# ``outputs(w)``: a linear model's outputs (:func:`outputs_of`) on :func:`evaluation_inputs`, (test, training),
# computed by the caller (edgefl.seed_axis: with other runs' models); None: computed here.
Outputs = Callable[[torch.Tensor], "tuple[torch.Tensor, torch.Tensor] | None"]


def evaluation_inputs(data) -> tuple[torch.Tensor, torch.Tensor]:
    """(test inputs, training inputs) an evaluation runs the model on: the clients' test rows, or where they are
    drawn from a smaller held-out pool (``data.test_pool_rows``: MNIST-10k's 30 x 500 test rows are 2,000 distinct
    images) the pool's images, each row then taking its image's values (:func:`test_per_sample`); the training
    rows."""
    return (data.global_test_x if _pooled(data) else data.test_x), data.train_x


def _pooled(data) -> bool:
    rows = data.test_pool_rows
    return rows is not None and data.global_test_x.shape[0] < rows.shape[0]


def outputs_of(model, logits: torch.Tensor, columns: torch.Tensor | None = None) -> torch.Tensor:
    """A linear model's outputs as ``model.forward`` gives them ([n, K] logits; a regression's [n]) from its
    transposed logits [K, m] (:meth:`LinearGrad.logits`): all m columns, or those ``columns`` [n] (of inputs
    evaluated together with other rows)."""
    out = (logits if columns is None else logits.index_select(1, columns)).t().contiguous()
    return out.squeeze(-1) if model.loss_name == "mse" else out


@torch.no_grad()
def linear_outputs(model, linear: LinearGrad, w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The outputs of the linear model ``w`` [d] on inputs ``x`` [n, ...] (:func:`outputs_of`), on the model's
    device."""
    flat = x.reshape(x.shape[0], -1).to(model.device)
    return outputs_of(model, linear.logits(w.to(model.device).unsqueeze(0), flat)[0])


@torch.no_grad()
def forward(model, w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The outputs of the model ``w`` on inputs ``x`` as the evaluation computes them: a linear model's by
    :func:`linear_outputs`, any other's by its module (``model.forward``)."""
    linear = LinearGrad.of(model)
    return model.forward(w, x) if linear is None else linear_outputs(model, linear, w, x)


def _scored(model, out: torch.Tensor, y: torch.Tensor, accuracy: bool):
    """(loss [n], correct [n] or None) of outputs ``out`` on labels ``y``, on the CPU."""
    out = out.cpu()  # (with the labels: a no-op there)
    loss = output_loss(out, y, model.loss_name, reduction="none")
    return loss, out.argmax(dim=1) == y if accuracy and model.loss_name != "mse" else None


@torch.no_grad()
def per_sample(
    model, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor, out: torch.Tensor | None = None, accuracy: bool = True
):
    """(losses [n], correct [n] or None for regression or without ``accuracy``) in float64. ``out``: the model's
    outputs on ``x`` where computed already (:data:`Outputs`); a linear model's are computed in one call
    (:func:`linear_outputs`), other models' in chunks to bound memory."""
    if out is None and LinearGrad.of(model) is not None:
        out = forward(model, w, x)
    if out is not None:
        loss, correct = _scored(model, out, y, accuracy)
    else:
        parts = [
            _scored(model, model.forward(w, x[lo : lo + CHUNK]), y[lo : lo + CHUNK], accuracy)
            for lo in range(0, len(x), CHUNK)
        ]
        if not parts:
            return torch.zeros(0, dtype=torch.float64), None
        loss = torch.cat([p[0] for p in parts])
        correct = None if parts[0][1] is None else torch.cat([p[1] for p in parts])
    return loss.to(torch.float64), None if correct is None else correct.to(torch.float64)


def _per_client_mean(values: torch.Tensor, offsets: np.ndarray) -> np.ndarray:
    sizes = np.diff(offsets)
    owner = torch.from_numpy(np.repeat(np.arange(len(sizes)), sizes))
    sums = torch.zeros(len(sizes), dtype=torch.float64).index_add_(0, owner, values)
    return sums.numpy() / np.maximum(sizes, 1)


def evaluate_global(model, data, w: torch.Tensor, outputs: Outputs | None = None) -> dict:
    """Per-client test accuracy/loss of the model ``w`` and the global training loss; ``outputs``: see
    :data:`Outputs`. The same ``w`` evaluated again on the same data (the run's final evaluation after its last
    round's) is not recomputed: the last result is kept on ``model`` (a CIFAR CNN's evaluation of 6,000 images
    costs as much as a round's training)."""
    last = getattr(model, "last_evaluation", None)
    if last is not None and last[0] is data and torch.equal(last[1], w):
        return {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in last[2].items()}
    result = _evaluate_global(model, data, w, outputs)
    model.last_evaluation = (data, w.detach().clone(), result)
    return {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in result.items()}


def test_per_sample(model, data, w: torch.Tensor, out: torch.Tensor | None = None):
    """:func:`per_sample` of the clients' test rows (``out``: the model's outputs on the test inputs of
    :func:`evaluation_inputs`, where computed already). Where they are drawn from a smaller held-out pool, the
    model runs once per pool image and each row takes its image's values: the same numbers, bit for bit (a row's
    output and loss do not depend on the other rows evaluated with it; tests/test_models.py), for a fraction of
    the work."""
    if not _pooled(data):
        return per_sample(model, w, data.test_x, data.test_y, out)
    loss, correct = per_sample(model, w, data.global_test_x, data.global_test_y, out)
    index = torch.from_numpy(data.test_pool_rows)
    return loss[index], None if correct is None else correct[index]


def _evaluate_global(model, data, w: torch.Tensor, outputs: Outputs | None = None) -> dict:
    given = outputs(w) if outputs is not None else None
    test_out, train_out = given if given is not None else (None, None)
    test_loss, test_correct = test_per_sample(model, data, w, test_out)
    train_loss, _ = per_sample(model, w, data.train_x, data.train_y, train_out, accuracy=False)
    result = {
        "client_test_loss": _per_client_mean(test_loss, data.test_offsets),
        "loss": float(train_loss.mean()),
    }
    if test_correct is not None:
        acc = _per_client_mean(test_correct, data.test_offsets)
        result.update(
            client_acc=acc,
            acc_mean=float(acc.mean()),
            acc_worst=float(acc.min()),
            acc_std=float(acc.std()),
        )
    return result
