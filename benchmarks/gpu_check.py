"""A round of the CIFAR CNN and of ResNet-18-GN on the CPU and on the GPU: times and the difference of the results.

    .venv/bin/python benchmarks/gpu_check.py            # ~2-4 minutes on one H100 machine (16 cores)
    OUT=folder .venv/bin/python benchmarks/gpu_check.py # also writes folder/gpu.json

Each workload: m clients, τ local SGD steps of batch B on CIFAR-shaped synthetic images (benchmarks/shaped_data.py),
through edgefl's executor (edgefl/executor.py: the strategy it measures, vmap chunked by memory on the GPU) with
run.device's device handling (edgefl/device.py); then the loss of the averaged model on the clients' minibatches
(an Evaluate op). The same seed gives the same minibatches on both devices; the results differ by float32
rounding only (TF32 is off, edgefl.device). Printed and saved: seconds per round on each device (median of 3
after a warm-up), the speed-up, the max |difference| of the clients' parameters and of the losses, and the
relative difference (max |diff| / max |value|). Without a GPU it says so and exits 0 after the CPU side.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

import numpy as np  # noqa: E402
import torch  # noqa: E402
from shaped_data import Images  # noqa: E402

from algorithms.ops import Evaluate, Train  # noqa: E402
from edgefl.device import resolve_device  # noqa: E402
from edgefl.executor import Executor  # noqa: E402
from edgefl.models import build_model  # noqa: E402

# name -> model, clients m, local steps τ, batch B
WORKLOADS = {"cifar_cnn": ("cifar_cnn", 10, 5, 32), "resnet18_gn": ("resnet18_gn", 4, 1, 32)}
REPEATS = 3


def timed(device: torch.device, fn):
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    began = time.perf_counter()
    out = fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - began, out


def one_device(name: str, device: torch.device) -> dict:
    model_name, clients, tau, batch = WORKLOADS[name]
    data = Images(name="cifar-shaped", num_clients=clients, samples_per_client=256, test_per_client=8).build(0)
    model = build_model(model_name, data.input_shape, data.num_classes, 0)
    op = Train(clients=np.arange(clients), start=model.init_params(), steps=tau, shared={"lr": 0.05})
    seconds, result = [], None
    for attempt in range(REPEATS + 1):  # the first: warm-up (and the strategy's measurement)
        executor = Executor(model, data, batch, seed=0, device=device, measure=True)  # fresh: the same minibatches
        if attempt == 0:
            executor.train(op)
            strategy = executor.strategy
            continue
        executor.strategy = strategy
        spent, result = timed(device, lambda ex=executor: ex.train(op))
        seconds.append(spent)
    average = result.params.mean(dim=0)
    loss = executor.evaluate(Evaluate(np.arange(clients), average, "loss"))
    return {
        "device": str(device),
        "strategy": strategy,
        "round_s": statistics.median(seconds),
        "params": result.params,
        "loss": loss,
        "gflop_per_round": model.train_flops_per_sample * batch * clients * tau / 1e9,
    }


def main() -> int:
    began = time.perf_counter()
    cuda = torch.cuda.is_available()
    report = {
        "torch": torch.__version__,
        "cpu": platform.processor() or platform.machine(),
        "cpu_threads": torch.get_num_threads(),
        "gpu": torch.cuda.get_device_name(0) if cuda else None,
        "workloads": {},
    }
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads, GPU: {report['gpu']}", flush=True)
    for name, (_, clients, tau, batch) in WORKLOADS.items():
        cpu = one_device(name, resolve_device("cpu"))
        row = {"clients": clients, "tau": tau, "batch": batch, "gflop_per_round": cpu["gflop_per_round"]}
        row.update(cpu_s=cpu["round_s"], cpu_strategy=cpu["strategy"])
        if cuda:
            gpu = one_device(name, resolve_device("cuda"))
            diff = float((gpu["params"] - cpu["params"]).abs().max())
            loss_diff = float((gpu["loss"] - cpu["loss"]).abs().max())
            row.update(
                cuda_s=gpu["round_s"],
                cuda_strategy=gpu["strategy"],
                speedup=cpu["round_s"] / gpu["round_s"],
                max_abs_diff_params=diff,
                max_rel_diff_params=diff / float(cpu["params"].abs().max()),
                max_abs_diff_loss=loss_diff,
            )
        report["workloads"][name] = row
        print(f"{name}: {json.dumps(row)}", flush=True)
    report["total_s"] = time.perf_counter() - began
    if not cuda:
        print("no CUDA GPU seen by PyTorch: CPU side only")
    out = os.environ.get("OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "gpu.json").write_text(json.dumps(report, indent=1))
        print(f"written: {Path(out) / 'gpu.json'}")
    print(f"total {report['total_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
