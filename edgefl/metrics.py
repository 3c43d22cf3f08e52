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
tests/test_models.py); a linear classifier's are computed on its transposed logits [K, n] where that gives the same
bits (:func:`columns_are_exact`; docs/performance.md, "The evaluation after the product"), each test row then reading
its image's column, with the row indices kept per run. Runs that read the same inputs can have their linear models'
outputs computed together, one call for all (``outputs``: edgefl.seed_axis), each run's numbers its solo run's, bit
for bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from edgefl.executor import LinearGrad
from edgefl.models import output_loss

CHUNK = 8192

# ``outputs(w)``: a linear model's transposed logits [K, U] (:meth:`LinearGrad.logits`) on inputs that hold those of
# :func:`evaluation_inputs`, and which of their U columns the (test, training) inputs are, in order, computed by the
# caller (edgefl.seed_axis: with other runs' models); None: computed here.
Outputs = Callable[[torch.Tensor], "tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]] | None"]


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
    return outputs_of(model, _transposed_logits(model, linear, w, x))


def _transposed_logits(model, linear: LinearGrad, w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The linear model ``w``'s transposed logits [K, n] on inputs ``x`` [n, ...] (:meth:`LinearGrad.logits`)."""
    flat = x.reshape(x.shape[0], -1).to(model.device)
    return linear.logits(w.to(model.device).unsqueeze(0), flat)[0]


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
    model,
    w: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    logits: "tuple[torch.Tensor, torch.Tensor | None] | None" = None,
    accuracy: bool = True,
):
    """(losses [n], correct [n] or None for regression or without ``accuracy``) in float64, scored CHUNK rows at a
    time (:func:`_scored_in_chunks`). ``logits``: a linear model's transposed logits on ``x`` where computed already,
    (z [K, U], which of its U columns each row of ``x`` is, or None: the first n in order; :data:`Outputs`); a linear
    model's are otherwise computed in one call (:func:`_transposed_logits`), other models' outputs a chunk at a
    time."""
    linear = LinearGrad.of(model)
    if logits is None and linear is not None:
        logits = (_transposed_logits(model, linear, w, x), None)
    if logits is not None:
        z, columns = logits
        return _scored_in_chunks(
            model,
            lambda lo, hi: outputs_of(model, z[:, lo:hi]) if columns is None else outputs_of(model, z, columns[lo:hi]),
            y,
            accuracy,
        )
    if len(x) == 0:
        return torch.zeros(0, dtype=torch.float64), None
    return _scored_in_chunks(model, lambda lo, hi: model.forward(w, x[lo:hi]), y, accuracy)


def _scored_in_chunks(model, outputs: Callable[[int, int], torch.Tensor], y: torch.Tensor, accuracy: bool):
    """(losses [n], correct [n] or None) in float64 of the rows of labels ``y`` [n], whose outputs ``outputs(lo, hi)``
    gives for rows lo .. hi - 1, CHUNK rows at a time: an evaluation's temporaries (the [n, K] outputs and
    cross_entropy's log-probabilities) are a chunk's, not the data's (10^6 devices' 18 million training rows: 0.7 GB
    each, benchmarks [4]); a row's numbers do not depend on the rows scored with it (tests/test_models.py)."""
    n = len(y)
    loss = torch.empty(n, dtype=torch.float64)
    correct = torch.empty(n, dtype=torch.float64) if accuracy and model.loss_name != "mse" else None
    for lo in range(0, n, CHUNK):
        hi = min(n, lo + CHUNK)
        part_loss, part_correct = _scored(model, outputs(lo, hi), y[lo:hi], accuracy)
        loss[lo:hi] = part_loss
        if correct is not None:
            correct[lo:hi] = part_correct
    return loss, correct


def _owner(offsets: np.ndarray) -> torch.Tensor:
    """The client [n] of each row of clients concatenated at ``offsets`` [N + 1]."""
    sizes = np.diff(offsets)
    return torch.from_numpy(np.repeat(np.arange(len(sizes)), sizes))


def _per_client_mean(values: torch.Tensor, offsets: np.ndarray, owner: torch.Tensor | None = None) -> np.ndarray:
    """Each client's mean of ``values`` [n] (rows at ``offsets``; ``owner``: :func:`_owner`, where kept), summed
    row after row (index_add_)."""
    sizes = np.diff(offsets)
    owner = _owner(offsets) if owner is None else owner
    sums = torch.zeros(len(sizes), dtype=torch.float64).index_add_(0, owner, values)
    return sums.numpy() / np.maximum(sizes, 1)


# A linear classifier's cross-entropy and accuracy are computed on its transposed logits [K, n] as they come out of
# the product (no [n, K] copy): log-softmax over dim 0, each row's label then gathered (the rows of the test pool and
# of the training set, each image's column however many rows read it; an argmax over dim 0 likewise), where this
# gives the bits of cross_entropy on [n, K] (edgefl.models.output_loss; :func:`columns_are_exact`). torch's CPU
# kernels (aten LogSoftmaxKernelImpl.h): over the last dimension, with K below its vector width (16 floats with
# AVX-512; the Figure-4 study's K = 10), each row's max and sum of exponentials are taken one class after the other,
# the exponential and the logarithm by the vectorised functions; over dim 0 each column likewise, in the vector loop
# for columns up to the last multiple of the width, the rest by the scalar std::exp (other bits: hence the columns
# padded with zeros to a multiple of COLUMN_PAD, which no CPU's vector width exceeds). 15x faster on the Figure-4
# study's 10,000 columns (docs/performance.md, "The evaluation after the product").
COLUMN_PAD = 64
# The rows' indices are kept per run up to this many rows (about 24 bytes a row; a million devices' 20 million
# samples: built again at each evaluation, as the [n, K] copy they replace was)
KEEP_ROWS = 2**22
_EXACT: dict[int, bool] = {}  # K -> columns_are_exact(K), once per process


def columns_are_exact(classes: int) -> bool:
    """Whether :func:`_log_probabilities`' cross-entropy and the argmax over dim 0 give, on this CPU and torch, the
    bits of cross_entropy and argmax on [n, K] logits: checked once per K on 4,096 random rows of three scales. A K
    at or above the vector width (the last dimension's sum then a tree) differs in about 1 row of 5 (K = 16 with
    AVX-512, K = 10 with AVX2): the evaluation then uses the [n, K] layout (:func:`per_sample`)."""
    exact = _EXACT.get(classes)
    if exact is None:
        g = torch.Generator().manual_seed(0xE7A1)
        n = 4096
        logits = torch.randn(3, n, classes, generator=g) * torch.tensor([0.01, 1.0, 30.0]).view(3, 1, 1)
        logits[:, ::3] = logits[:, ::3].round()  # ties for the argmax (small integers)
        y = torch.randint(0, classes, (n,), generator=g)
        exact = True
        for out in logits:
            z = out.t().contiguous()
            loss = _log_probabilities(z).take(y * _padded(n) + torch.arange(n)).neg()
            expected = output_loss(out, y, "cross_entropy", reduction="none")
            exact &= torch.equal(loss.view(torch.int32), expected.view(torch.int32))
            exact &= torch.equal(z.argmax(dim=0), out.argmax(dim=1))
        _EXACT[classes] = exact
    return exact


def _padded(n: int) -> int:
    return -(-n // COLUMN_PAD) * COLUMN_PAD


def _log_probabilities(z: torch.Tensor) -> torch.Tensor:
    """log-softmax of transposed logits z [K, n] over the classes, flattened [K * _padded(n)] (COLUMN_PAD)."""
    n = z.shape[1]
    if _padded(n) != n or not z.is_contiguous():
        z = torch.nn.functional.pad(z, (0, _padded(n) - n))
    return torch.log_softmax(z, dim=0).view(-1)


@dataclass
class _Rows:
    """Rows of an evaluation in transposed logits [K, n]: ``column`` [r] each row's column, ``label`` [r] its
    label, ``flat`` [r] its label's log-probability in :func:`_log_probabilities`' [K * _padded(n)]."""

    column: torch.Tensor
    label: torch.Tensor
    flat: torch.Tensor

    @classmethod
    def of(cls, column: torch.Tensor, label: torch.Tensor, n: int, classes: int) -> "_Rows":
        label = label.to(torch.int64).cpu()
        bad = label[(label < 0) | (label >= classes)]
        if bad.numel():  # (as cross_entropy says it: a gathered index would read another class's column)
            raise IndexError(f"Target {int(bad[0])} is out of bounds.")
        return cls(column, label, label * _padded(n) + column)


@dataclass
class _RowPlan:
    """What a run's evaluations read that depends only on its data and its columns (edgefl.metrics.Outputs): the
    clients' test rows (``test``; pooled: each row its pool image's column), the training rows (``train``), the
    columns of the test inputs (``images``: the pool's images where pooled) and which of them each test row is
    (``image``; None: the i-th), and each test row's client (``owner``). Kept on the model (``model.evaluation_rows``)
    as long as the data and the columns are the same objects."""

    test: _Rows
    train: _Rows
    images: torch.Tensor
    image: torch.Tensor | None
    owner: torch.Tensor

    @classmethod
    def of(
        cls, data, columns: "tuple[torch.Tensor, torch.Tensor] | None", widths: tuple[int, int], classes: int
    ) -> "_RowPlan":
        images, train_at = columns if columns is not None else (torch.arange(widths[0]), torch.arange(widths[1]))
        test_at, test_y, image = images, data.test_y, None
        if _pooled(data):
            image = torch.from_numpy(data.test_pool_rows)
            test_at, test_y = images[image], data.global_test_y[image]
        test = _Rows.of(test_at, test_y, widths[0], classes)
        train = _Rows.of(train_at, data.train_y, widths[1], classes)
        return cls(test, train, images, image, _owner(data.test_offsets))


@torch.no_grad()
def _column_scores(model, linear: LinearGrad, data, w: torch.Tensor, outputs: Outputs | None):
    """(test losses, test correct, training losses) [float64] of a linear classifier, from its transposed logits
    (module comment above :data:`COLUMN_PAD`): ``outputs``'s, else its own on :func:`evaluation_inputs`."""
    given = outputs(w) if outputs is not None else None
    if given is None:
        test_z, train_z = (_transposed_logits(model, linear, w, x).cpu() for x in evaluation_inputs(data))
        columns = None
    else:
        test_z = train_z = given[0].cpu()
        columns = given[1]
    widths = (test_z.shape[1], train_z.shape[1])
    kept = getattr(model, "evaluation_rows", None)
    if kept is not None and kept[0] is data and kept[1] is columns and kept[2] == widths:
        plan = kept[3]
    else:
        plan = _RowPlan.of(data, columns, widths, linear.K)
        if len(plan.test.flat) + len(plan.train.flat) <= KEEP_ROWS:
            model.evaluation_rows = (data, columns, widths, plan)
    test_logp = _log_probabilities(test_z)
    train_logp = test_logp if train_z is test_z else _log_probabilities(train_z)
    test_loss = test_logp.take(plan.test.flat).to(torch.float64).neg_()
    train_loss = train_logp.take(plan.train.flat).to(torch.float64).neg_()
    # (argmax over dim 0 costs 10x more than over the rows of the test images' [n, K] copy)
    images = test_z if columns is None else test_z.index_select(1, plan.images)
    predicted = images.t().contiguous().argmax(dim=1)
    if plan.image is not None:
        predicted = predicted[plan.image]
    correct = (predicted == plan.test.label).to(torch.float64)
    return test_loss, correct, train_loss, plan.owner


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


def test_per_sample(model, data, w: torch.Tensor, logits: "tuple[torch.Tensor, torch.Tensor | None] | None" = None):
    """:func:`per_sample` of the clients' test rows (``logits``: a linear model's transposed logits on the test inputs
    of :func:`evaluation_inputs`, where computed already, as :func:`per_sample` reads them). Where they are drawn from
    a smaller held-out pool, the model runs once per pool image and each row takes its image's values: the same
    numbers, bit for bit (a row's output and loss do not depend on the other rows evaluated with it;
    tests/test_models.py), for a fraction of the work."""
    if not _pooled(data):
        return per_sample(model, w, data.test_x, data.test_y, logits)
    loss, correct = per_sample(model, w, data.global_test_x, data.global_test_y, logits)
    index = torch.from_numpy(data.test_pool_rows)
    return loss[index], None if correct is None else correct[index]


def _evaluate_global(model, data, w: torch.Tensor, outputs: Outputs | None = None) -> dict:
    linear = LinearGrad.of(model)
    owner = None
    if linear is not None and linear.loss_name == "cross_entropy" and columns_are_exact(linear.K):
        test_loss, test_correct, train_loss, owner = _column_scores(model, linear, data, w, outputs)
    else:
        given = outputs(w) if outputs is not None else None
        test_logits, train_logits = ((given[0], c) for c in given[1]) if given is not None else (None, None)
        test_loss, test_correct = test_per_sample(model, data, w, test_logits)
        train_loss, _ = per_sample(model, w, data.train_x, data.train_y, train_logits, accuracy=False)
    result = {
        "client_test_loss": _per_client_mean(test_loss, data.test_offsets, owner),
        "loss": float(train_loss.mean()),
    }
    if test_correct is not None:
        acc = _per_client_mean(test_correct, data.test_offsets, owner)
        result.update(
            client_acc=acc,
            acc_mean=float(acc.mean()),
            acc_worst=float(acc.min()),
            acc_std=float(acc.std()),
        )
    return result
