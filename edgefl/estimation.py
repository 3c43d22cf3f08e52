"""Extra per-round metrics: estimation errors against a known truth, and role-based metrics.

Called by the runner for every evaluated round; returns the same keys (None-valued) for rounds
that are not evaluated, so metrics.csv keeps its columns whatever ``run.eval_every`` is.

Statistical recovery (``FederatedData.true_params`` set; "Fast Composite Optimization and
Statistical Recovery in Federated Learning", Sec. 3.1 and 4). The estimate is
the first ``true_params.numel()`` coordinates of the flat model (the ``regression``
model's weight; its bias is left out), reshaped like the truth:
- vector truth w*: ``l2_error`` ||w - w*||_2, ``l1_error`` ||w - w*||_1, ``support_f1`` (support
  = exact nonzeros), ``support_f1_001`` (support = |w_j| > 0.01, the reference code's rule),
  ``nonzeros``;
- matrix truth W*: ``fro_error`` ||W - W*||_F, ``op_error`` ||W - W*||_2 (largest singular
  value), ``rank`` (numpy ``matrix_rank`` with its default tolerance, as MATLAB ``rank``).

Prioritized FL (``FederatedData.client_roles`` set; "Utilizing Free Clients in Federated
Learning for Focused Model Enhancement", Sec. 2 and 4):
``priority_loss`` = F(w) = sum_{k in P} p_k F_k(w), p_k = D_k / sum_P D (the pooled mean training
loss over the priority clients); ``priority_acc`` = pooled accuracy over the priority clients'
test splits; ``non_priority_acc`` likewise over the other clients (classification only).
"""

from __future__ import annotations

import numpy as np
import torch

CHUNK = 8192
VECTOR_KEYS = ("l2_error", "l1_error", "support_f1", "support_f1_001", "nonzeros")
MATRIX_KEYS = ("fro_error", "op_error", "rank")
ROLE_KEYS = ("priority_loss", "priority_acc", "non_priority_acc")


def metric_names(data) -> list[str]:
    names: list[str] = []
    truth = getattr(data, "true_params", None)
    if truth is not None:
        names += list(MATRIX_KEYS if truth.dim() == 2 else VECTOR_KEYS)
    if getattr(data, "client_roles", None) is not None:
        names += list(ROLE_KEYS)
    return names


def support_f1(estimate: np.ndarray, truth: np.ndarray, threshold: float = 0.0) -> float:
    """F1 of the estimated support {|w_j| > threshold} against the true support {w*_j != 0}."""
    est = np.abs(estimate) > threshold
    true = truth != 0
    hits = np.sum(est & true)
    if hits == 0:
        return 0.0
    precision, recall = hits / est.sum(), hits / true.sum()
    return float(2 * precision * recall / (precision + recall))


def recovery_metrics(w: torch.Tensor, truth: torch.Tensor) -> dict[str, float]:
    t = truth.detach().to(torch.float64).numpy()
    native = w.detach()[: t.size].numpy().reshape(t.shape)  # the model's own precision (float32)
    est = native.astype(np.float64)
    diff = est - t
    if t.ndim == 2:
        return {
            "fro_error": float(np.linalg.norm(diff, "fro")),
            "op_error": float(np.linalg.norm(diff, 2)),
            # numpy's default tolerance S.max() * max(M, N) * eps in the model's precision (MATLAB's
            # rank rule); in float64 it would count the float32 rounding of exact zeros as rank
            "rank": int(np.linalg.matrix_rank(native)),
        }
    return {
        "l2_error": float(np.linalg.norm(diff)),
        "l1_error": float(np.abs(diff).sum()),
        "support_f1": support_f1(est, t, 0.0),
        "support_f1_001": support_f1(est, t, 0.01),
        "nonzeros": int(np.count_nonzero(est)),
    }


@torch.no_grad()
def _pooled(model, w, x, y, offsets, clients) -> tuple[float, float | None]:
    """(mean loss, accuracy or None) over the rows of ``clients`` (pooled)."""
    rows = np.concatenate([np.arange(offsets[c], offsets[c + 1]) for c in clients]) if len(clients) else []
    if len(rows) == 0:
        return float("nan"), None
    from edgefl.metrics import forward  # the global evaluation's outputs (a linear model's: its transposed form)
    from edgefl.models import output_loss

    rows = torch.from_numpy(np.asarray(rows, dtype=np.int64))
    loss_sum, correct = 0.0, 0.0
    for lo in range(0, len(rows), CHUNK):
        idx = rows[lo : lo + CHUNK]
        xb, yb = x[idx], y[idx]
        out = forward(model, w, xb).cpu()
        loss_sum += float(output_loss(out, yb, model.loss_name, reduction="none").sum())
        if model.loss_name != "mse":
            correct += float((out.argmax(dim=1) == yb).sum())
    n = len(rows)
    return loss_sum / n, (None if model.loss_name == "mse" else correct / n)


def role_metrics(model, data, w: torch.Tensor) -> dict[str, float | None]:
    roles = np.asarray(data.client_roles)
    priority = np.flatnonzero(roles == "priority")
    others = np.flatnonzero(roles != "priority")
    loss, _ = _pooled(model, w, data.train_x, data.train_y, data.train_offsets, priority)
    _, acc = _pooled(model, w, data.test_x, data.test_y, data.test_offsets, priority)
    _, acc_q = _pooled(model, w, data.test_x, data.test_y, data.test_offsets, others)
    return {"priority_loss": loss, "priority_acc": acc, "non_priority_acc": acc_q}


def estimation_metrics(model, data, w: torch.Tensor | None) -> dict:
    """The extra metrics of ``w`` (None: the same keys, all None, for rounds not evaluated)."""
    names = metric_names(data)
    if w is None or not names:
        return dict.fromkeys(names)
    out: dict = {}
    if data.true_params is not None:
        out.update(recovery_metrics(w, data.true_params))
    if data.client_roles is not None:
        out.update(role_metrics(model, data, w))
    return out
