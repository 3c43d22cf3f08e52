"""Whether this CPU's matrix products give a run's numbers the same bits stacked with other runs' as alone, at the
Figure-4 study's shapes (MNIST's 784 inputs, 10 classes, batch 32, 20 clients a run, 5 runs; one thread):

- the evaluation's product (edgefl.executor.LinearGrad.logits): five models stacked against each model alone, on
  10,000 inputs. Where it differs, a seed group evaluates each run alone (edgefl.seed_axis.SharedInputs.keeps_solo_bits);
- the linear training's two batched products (``torch.bmm``), 100 clients against five blocks of 20.

    .venv/bin/python benchmarks/stacking_bits.py

Prints the largest |difference| of each (0.0: the same bits). Measured on 2026-11-28 (docs/performance.md,
fourteenth pass): all 0.0 on the 2-core AMD EPYC (AVX2, torch 2.13); on an Intel Xeon (AVX-512, torch 2.11) the
evaluation's product 2.6e-6 (1.4e-6 with MKL_ENABLE_INSTRUCTIONS=AVX2), the training's products 0.0 (the same
products, measured with a first version of this script).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edgefl.executor import LinearGrad  # noqa: E402

RUNS, CLIENTS, BATCH, INPUTS, CLASSES, IMAGES = 5, 20, 32, 784, 10, 10_000


def largest(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


def main() -> None:
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    linear = LinearGrad(CLASSES, INPUTS, "cross_entropy")
    images = torch.rand(IMAGES, INPUTS, generator=g) * (torch.rand(IMAGES, INPUTS, generator=g) > 0.7)
    models = 0.05 * torch.randn(RUNS, linear.dim, generator=g)
    stacked = linear.logits(models, images)
    alone = torch.stack([linear.logits(models[i : i + 1], images)[0] for i in range(RUNS)])
    print(f"evaluation, {RUNS} models stacked vs each alone: largest |difference| {largest(stacked, alone):.1e}")

    x = torch.rand(RUNS * CLIENTS, BATCH, INPUTS, generator=g)
    dlogits = torch.randn(RUNS * CLIENTS, CLASSES, BATCH, generator=g)
    weights = 0.05 * torch.randn(RUNS * CLIENTS, CLASSES, INPUTS, generator=g)
    for name, a, b in (
        ("training gradient dlogits x", dlogits, x),
        ("training logits W x^T", weights, x.transpose(1, 2)),
    ):
        whole = torch.bmm(a, b)
        blocks = torch.cat([torch.bmm(a[i : i + CLIENTS], b[i : i + CLIENTS]) for i in range(0, len(a), CLIENTS)])
        print(
            f"{name}, {RUNS * CLIENTS} clients vs blocks of {CLIENTS}: largest |difference| {largest(whole, blocks):.1e}"
        )


if __name__ == "__main__":
    main()
