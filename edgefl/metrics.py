"""Learning metrics of the global model, computed over ALL N clients' own test sets.

- acc_mean: unweighted mean of per-client test accuracy;
- acc_worst: minimum over clients;
- acc_std: population standard deviation across clients (same units as accuracy, 0..1);
- loss: average training loss over all training samples (the global empirical risk).
"""

from __future__ import annotations

import numpy as np
import torch

from edgefl.models import output_loss

CHUNK = 8192


@torch.no_grad()
def per_sample(model, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor):
    """(losses [n], correct [n] or None for regression), in chunks to bound memory."""
    losses, correct = [], []
    for lo in range(0, len(x), CHUNK):
        out = model.forward(w, x[lo : lo + CHUNK]).cpu()  # on the CPU, with the labels (a no-op there)
        yy = y[lo : lo + CHUNK]
        losses.append(output_loss(out, yy, model.loss_name, reduction="none"))
        if model.loss_name != "mse":
            correct.append((out.argmax(dim=1) == yy).to(torch.float64))
    loss = torch.cat(losses).to(torch.float64) if losses else torch.zeros(0, dtype=torch.float64)
    return loss, (torch.cat(correct) if correct else None)


def _per_client_mean(values: torch.Tensor, offsets: np.ndarray) -> np.ndarray:
    sizes = np.diff(offsets)
    owner = torch.from_numpy(np.repeat(np.arange(len(sizes)), sizes))
    sums = torch.zeros(len(sizes), dtype=torch.float64).index_add_(0, owner, values)
    return sums.numpy() / np.maximum(sizes, 1)


def evaluate_global(model, data, w: torch.Tensor) -> dict:
    """Per-client test accuracy/loss of the model ``w`` and the global training loss. The same ``w`` evaluated
    again on the same data (the run's final evaluation after its last round's) is not recomputed: the last
    result is kept on ``model`` (a CIFAR CNN's evaluation of 6,000 images costs as much as a round's training)."""
    last = getattr(model, "last_evaluation", None)
    if last is not None and last[0] is data and torch.equal(last[1], w):
        return {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in last[2].items()}
    result = _evaluate_global(model, data, w)
    model.last_evaluation = (data, w.detach().clone(), result)
    return {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in result.items()}


def test_per_sample(model, data, w: torch.Tensor):
    """:func:`per_sample` of the clients' test rows. Where they are drawn from a smaller held-out pool
    (``data.test_pool_rows``: MNIST-10k's 30 x 500 test images are 2,000 distinct ones), the model runs once per
    pool image and each row takes its image's values: the same numbers, bit for bit (a row's output and loss do not
    depend on the other rows evaluated with it; tests/test_metrics.py), for a fraction of the work."""
    rows = data.test_pool_rows
    if rows is None or data.global_test_x.shape[0] >= rows.shape[0]:
        return per_sample(model, w, data.test_x, data.test_y)
    loss, correct = per_sample(model, w, data.global_test_x, data.global_test_y)
    index = torch.from_numpy(rows)
    return loss[index], None if correct is None else correct[index]


def _evaluate_global(model, data, w: torch.Tensor) -> dict:
    test_loss, test_correct = test_per_sample(model, data, w)
    train_loss, _ = per_sample(model, w, data.train_x, data.train_y)
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
