"""Options for a CIFAR-CNN round on the CPU, side by side (issue 29 item 4; docs/performance.md, "Benchmark models").

    .venv/bin/python benchmarks/cifar_options.py                 # every option, 3 interleaved repeats, medians
    .venv/bin/python benchmarks/cifar_options.py --only lean2,lean2_cl --repeats 5
    .venv/bin/python benchmarks/cifar_options.py --profile       # torch's profiler on one client's steps

One round of McMahan et al.'s CIFAR CNN (edgefl.zoo.CifarCNN): m = 10 clients, τ = 5 steps, B = 32, 3x32x32
random images, written by hand (no executor): a lean per-client loop (one module, torch.optim.SGD) in the default
(NCHW) or channels-last layout, with 2 or 1 torch threads; and the m clients stacked on the channel axis as one
grouped convolution (groups = m, what vmap turns the clients' convolutions into), channels-last, the fully
connected layers as baddbmm.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see docs/performance.md: spinning threads on shared cores

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edgefl.zoo import CifarCNN  # noqa: E402

M, TAU, B = 10, 5, 32
CL = torch.channels_last


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="lean2,lean1,lean2_cl,lean1_cl,grouped_cl")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    x_all, y_all = torch.randn(M, TAU, B, 3, 32, 32), torch.randint(0, 10, (M, TAU, B))
    base = CifarCNN(3, 32, 10)
    base_cl = copy.deepcopy(base).to(memory_format=CL)

    def lean(threads: int, channels_last: bool = False) -> None:
        torch.set_num_threads(threads)
        module = base_cl if channels_last else base
        opt = torch.optim.SGD(module.parameters(), lr=0.01)
        for c in range(M):
            for k in range(TAU):
                x = x_all[c, k].contiguous(memory_format=CL if channels_last else torch.contiguous_format)
                opt.zero_grad()
                F.cross_entropy(module(x), y_all[c, k]).backward()
                opt.step()
        torch.set_num_threads(2)

    params = [p.detach() for p in base.parameters()]

    def grouped() -> None:
        w = [p.unsqueeze(0).repeat(M, *([1] * p.dim())).requires_grad_(True) for p in params]
        for k in range(TAU):
            x = x_all[:, k].transpose(0, 1).reshape(B, M * 3, 32, 32).contiguous(memory_format=CL)
            h = F.conv2d(x, w[0].reshape(M * 64, 3, 5, 5), w[1].reshape(-1), padding=2, groups=M)
            h = F.max_pool2d(F.relu(h), 3, 2, 1)
            h = F.conv2d(h, w[2].reshape(M * 64, 64, 5, 5), w[3].reshape(-1), padding=2, groups=M)
            h = F.max_pool2d(F.relu(h), 3, 2, 1).contiguous()  # [B, M * 64, 8, 8]
            h = h.reshape(B, M, 64 * 64).transpose(0, 1)  # [M, B, 4096]
            h = F.relu(torch.baddbmm(w[5].unsqueeze(1), h, w[4].transpose(1, 2)))
            h = F.relu(torch.baddbmm(w[7].unsqueeze(1), h, w[6].transpose(1, 2)))
            out = torch.baddbmm(w[9].unsqueeze(1), h, w[8].transpose(1, 2))
            loss = F.cross_entropy(out.reshape(M * B, 10), y_all[:, k].reshape(-1), reduction="sum") / B
            grads = torch.autograd.grad(loss, w)
            with torch.no_grad():
                w = [(a - 0.01 * g).requires_grad_(True) for a, g in zip(w, grads)]

    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        torch.set_num_threads(1)
        lean(1)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            lean(1)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))
        return
    options = {
        "lean2": lambda: lean(2),
        "lean1": lambda: lean(1),
        "lean2_cl": lambda: lean(2, True),
        "lean1_cl": lambda: lean(1, True),
        "grouped_cl": grouped,
    }
    sides = {k: options[k] for k in args.only.split(",")}
    print(f"torch {torch.__version__}, load average {os.getloadavg()}", flush=True)
    for run in sides.values():  # warm-up
        run()
    times: dict[str, list[float]] = {k: [] for k in sides}
    for r in range(args.repeats):
        order = list(sides)[r % len(sides) :] + list(sides)[: r % len(sides)]
        for name in order:
            began = time.perf_counter()
            sides[name]()
            times[name].append(time.perf_counter() - began)
    first = statistics.median(times[next(iter(sides))])
    for name, spent in times.items():
        median = statistics.median(spent)
        print(f"{name:10s} {median:7.2f} s a round  ({first / median:.2f}x the first)  {[round(t, 2) for t in spent]}")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
