"""Speed and memory of the built-in benchmark models (issue 29; docs/performance.md, "Benchmark models").

    .venv/bin/python benchmarks/models.py                 # all, ~10 minutes on 2 idle cores
    .venv/bin/python benchmarks/models.py --only cifar    # one: cifar, resnet, lstm, memory, cosim
    .venv/bin/python benchmarks/models.py --smoke         # tiny sizes: checks that everything runs

- cifar: a CIFAR-CNN round (McMahan et al. 2017's CNN, m = 10, τ = 5, B = 32, 32x32x3): the batched executor
  (its measured strategy; the other path shown too) vs a lean per-client loop (:class:`LeanLoop`: one module,
  torch.optim.SGD, one client after another, every op on all threads); the sides interleaved (A B C, A B C, ...
  after a warm-up round each), medians compared;
- resnet, lstm: a ResNet-18-GN round (m = 2, τ = 1, B = 32) and a Shakespeare-LSTM round (m = 10, τ = 2,
  B = 10), batched vs the lean loop, and their peak memory;
- memory: each built-in model's training in a fresh process: the peak resident memory it adds (VmHWM) vs
  edgefl.memory's estimate of it (ratio, target within 25 %);
- cosim: phones-in-a-cell (50 phones, m = 10) with the CIFAR CNN on CIFAR-shaped data, co-simulated: wall
  time per round and for 60 rounds (target <= 5 min), measured on ``--cosim-rounds`` rounds.

Timings depend on the load: the script prints the load average before and after.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see docs/performance.md: spinning threads on shared cores

import numpy as np  # noqa: E402
import torch  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]

from shaped_data import Characters, Images  # noqa: E402

from algorithms.ops import Train  # noqa: E402
from edgefl.executor import Executor  # noqa: E402
from edgefl.memory import training_bytes  # noqa: E402
from edgefl.metrics import evaluate_global  # noqa: E402
from edgefl.models import build_model, saved_bytes  # noqa: E402

# name -> (model, data plug-in, its keys, B)
WORKLOADS = {
    "cifar": ("cifar_cnn", Images, dict(channels=3, side=32, classes=10), 32),
    "femnist": ("femnist_cnn", Images, dict(channels=1, side=28, classes=62), 32),
    "resnet": ("resnet18_gn", Images, dict(channels=3, side=32, classes=10), 32),
    "lstm": ("shakespeare_lstm", Characters, dict(length=80, classes=80), 10),
    "cnn": ("cnn", Images, dict(channels=1, side=28, classes=10), 32),
    "linear": ("linear", Images, dict(channels=1, side=28, classes=10), 32),
}


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def workload(name: str, clients: int, samples: int = 64):
    model_name, cls, keys, batch = WORKLOADS[name]
    data = cls(name="shaped", num_clients=clients, samples_per_client=samples, test_per_client=4, **keys).build(0)
    model = build_model(model_name, data.input_shape, data.num_classes, 0)
    return model, data, batch


def round_op(model, clients: int, tau: int) -> Train:
    return Train(clients=np.arange(clients), start=model.init_params(), steps=tau, shared={"lr": 0.01})


class LeanLoop:
    """What a careful user writes by hand (as benchmarks/run.py's): one nn.Module reused, torch.optim.SGD, one
    client after another, every op on all threads; the executor's minibatches (same seed, same draws)."""

    def __init__(self, model, data, batch: int, channels_last: bool = False):
        self.module = copy.deepcopy(model.module).train()
        self.layout = torch.channels_last if channels_last else torch.contiguous_format
        if channels_last:
            self.module.to(memory_format=torch.channels_last)
        self.params = list(self.module.parameters())
        self.x, self.y = data.train_x, data.train_y
        self.indices = Executor(model, data, batch, 0)  # its minibatch stream only
        self.batch = batch

    def train(self, op: Train):
        idx = self.indices.sample_indices(op.clients, op.steps, self.batch)
        opt = torch.optim.SGD(self.params, lr=op.shared["lr"])
        finals = []
        for c in range(len(op.clients)):
            with torch.no_grad():
                torch.nn.utils.vector_to_parameters(op.start.clone(), self.params)
            for k in range(op.steps):
                rows = idx[c, k]
                opt.zero_grad()
                x = self.x[rows].contiguous(memory_format=self.layout)
                torch.nn.functional.cross_entropy(self.module(x), self.y[rows]).backward()
                opt.step()
            finals.append(torch.nn.utils.parameters_to_vector(self.params).detach())
        return _Result(torch.stack(finals))


class _Result:
    def __init__(self, params):
        self.params = params


def compare_round(name: str, clients: int, tau: int, repeats: int, alternatives: bool = True) -> dict:
    """Seconds per round of each executor path, interleaved, medians; and the max |difference| of their results
    (each path's first round from a fresh executor: the same minibatches). ``alternatives``: also time the
    strategy the measurement did not choose."""
    model, data, batch = workload(name, clients)
    op = round_op(model, clients, tau)
    chooser = Executor(model, data, batch, 0, measure=True)
    first = {"batched": chooser.train(op).params}  # measures the strategy (not timed)
    sides = {"batched": Executor(model, data, batch, 0, strategy=chooser.strategy)}
    others = [s for s in ("vmap", "threads") if s != chooser.strategy and s in chooser.timings]
    for strategy in others if alternatives else []:  # the paths the model can take (an LSTM cannot be vmapped)
        sides[strategy] = Executor(model, data, batch, 0, strategy=strategy)
    sides["lean loop"] = LeanLoop(model, data, batch)
    if model.inputs(data.train_x[:1]).is_contiguous(memory_format=torch.channels_last) and data.train_x.shape[1] > 1:
        sides["lean loop, channels-last"] = LeanLoop(model, data, batch, channels_last=True)  # as a user could
    times: dict[str, list[float]] = {k: [] for k in sides}
    for side, ex in sides.items():  # warm-up: the first round of each, compared
        if side != "batched":
            first[side] = ex.train(op).params
    for r in range(repeats):
        order = list(sides)[r % len(sides) :] + list(sides)[: r % len(sides)]
        for side in order:
            began = time.perf_counter()
            sides[side].train(op)
            times[side].append(time.perf_counter() - began)
    medians = {k: statistics.median(v) for k, v in times.items()}
    diff = max(float((first[k] - first["lean loop"]).abs().max()) for k in first)
    return {
        "workload": name,
        "clients": clients,
        "tau": tau,
        "batch": batch,
        "strategy": chooser.strategy,
        "measured_s_per_client_step": chooser.timings,
        "round_s": medians,
        "speedup_vs_loop": medians["lean loop"] / medians["batched"],
        "speedup_vs_channels_last_loop": medians["lean loop, channels-last"] / medians["batched"]
        if "lean loop, channels-last" in medians
        else None,
        "max_abs_diff_vs_loop": diff,
        "gflop_per_round": model.train_flops_per_sample * batch * clients * tau / 1e9,
    }


def vm(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


def peak_child(name: str, clients: int, strategy: str, warm: bool = False) -> None:
    """In a fresh process: the resident memory a round of ``clients`` adds (VmHWM - VmRSS before) vs the estimate.
    ``warm``: after one client's step on the same path in the main thread (torch's one-time buffers and kernels,
    which the run's estimate counts in edgefl.memory.RUNTIME_BYTES, allocated before the baseline)."""
    model, data, batch = workload(name, clients)
    op = round_op(model, clients, 1)
    ex = Executor(model, data, batch, 0, strategy=strategy, chunk=clients)
    inputs = int(np.prod(model.input_shape))
    per_sample, fixed = saved_bytes(WORKLOADS[name][0], model.input_shape, data.num_classes)  # before the baseline
    torch.set_num_threads(1 if strategy != "threads" else 2)
    if warm:
        Executor(model, data, batch, 1, strategy=strategy, chunk=1).train(round_op(model, 1, 1))
    before = vm("VmRSS")
    ex.train(op)
    peak = vm("VmHWM") - before
    if ex.strategy in ("vmap", "linear"):  # the batched paths train a block of clients at a time
        at_once = ex.clients_per_block(clients, batch)
    else:
        at_once = torch.get_num_threads() if ex.strategy == "threads" else 1
    estimate = training_bytes(ex.strategy, clients, at_once, model.dim, per_sample, fixed, batch, inputs)
    print(json.dumps({"workload": name, "strategy": ex.strategy, "clients": clients, "at_once": at_once, "warm": warm,
                      "peak_bytes": peak, "estimate_bytes": estimate, "ratio": estimate / peak}))  # fmt: skip


def measure_peak(name: str, clients: int, strategy: str, warm: bool = False) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--peak-child", name, str(clients), strategy] + (["--warm"] if warm else []),
        capture_output=True,
        text=True,
    )
    if out.returncode:
        return {"workload": name, "strategy": strategy, "fails": out.stderr.strip().splitlines()[-1][:200]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def cosim(rounds: int, smoke: bool, eval_every: int | None = None) -> dict:
    """``eval_every``: the evaluation cadence (None: at the last round only); the time of training (the executor's
    Train ops), of evaluation (edgefl.metrics.evaluate_global, the test splits and the training loss) and of the
    rest (the engine, the algorithm, writing nothing: no outputs) are reported apart."""
    import edgefl.runner
    from edgefl.runner import Simulation
    from edgefl.scenario import load_scenario

    spent = {"train": 0.0, "evaluate": 0.0}
    calls = {"train": [], "evaluate": []}

    def timed(part, fn):
        def wrapper(*args, **kwargs):
            began = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[part] += time.perf_counter() - began
                calls[part].append(time.perf_counter() - began)

        return wrapper

    overrides = {
        "run.rounds": rounds,
        "run.eval_every": eval_every or rounds,
        "data.name": "shaped_data:Images",
        "data.samples_per_client": 8 if smoke else 100,
        "data.test_per_client": 4 if smoke else 20,
        "model.name": "cifar_cnn",
        "algorithm.local_steps": 5,
        # a phone's phase is ~45 s of compute (τ = 5 x B = 32 x 187 MFLOP x 3 cycles/FLOP at 2 GHz) and a 56 Mbit
        # upload: the scenario's 0.4 s deadline would cut everyone (the feasibility check refuses it)
        "network.deadline_s": 120.0,
    }
    raw_phones = (ROOT / "scenarios" / "phones-in-a-cell.toml").read_text()
    # the scenario's [data] keys that the shaped data set does not have
    raw = "\n".join(line for line in raw_phones.splitlines() if not line.startswith(("dir ", "dirichlet_alpha")))
    path = HERE / ".phones-cifar.toml"
    path.write_text(raw)
    try:
        os.chdir(HERE)
        began = time.perf_counter()
        sim = Simulation(load_scenario(path, overrides))
        built = time.perf_counter() - began
        sim.executor.train = timed("train", sim.executor.train)
        evaluate, edgefl.runner.evaluate_global = edgefl.runner.evaluate_global, timed("evaluate", evaluate_global)
        try:
            result = sim.run(progress=False)
        finally:
            edgefl.runner.evaluate_global = evaluate
        wall = time.perf_counter() - began
    finally:
        path.unlink()
    per_round = (wall - built) / rounds
    every = eval_every or rounds
    in_round = calls["evaluate"][:-1]  # the last call: the run's final evaluation (of the last round's model)
    per_evaluation = statistics.median(in_round) if in_round else 0.0
    train_and_rest_60 = built + 60 * (wall - built - spent["evaluate"]) / rounds

    def evaluations_60(k: int) -> int:  # every k rounds and at the last
        return len(range(k, 61, k)) + (60 % k != 0)

    return {
        "rounds": rounds,
        "eval_every": every,
        "evaluations": len(in_round),
        "s_per_evaluation": per_evaluation,
        "final_evaluation_s": calls["evaluate"][-1] if calls["evaluate"] else None,
        "train_s_per_round": spent["train"] / rounds,
        # 60 rounds: the measured rounds' training and rest, scaled, plus the evaluations of each cadence
        "projected_60_rounds_s": {
            f"eval_every {k}": train_and_rest_60 + evaluations_60(k) * per_evaluation for k in (1, 2, 60)
        },
        "train_s": spent["train"],
        "evaluate_s": spent["evaluate"],
        "rest_s": wall - built - spent["train"] - spent["evaluate"],
        "build_s": built,
        "wall_s": wall,
        "s_per_round": per_round,
        "strategy": sim.executor.strategy,
        "energy_j": result.summary["energy_j"] if hasattr(result, "summary") else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="cifar,resnet,lstm,memory,cosim")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cosim-rounds", type=int, default=6)
    parser.add_argument(
        "--cosim-eval-every", type=int, default=None, help="cosim: evaluate every k rounds (default: last)"
    )
    parser.add_argument("--peak-child", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--warm", action="store_true", help="memory: measure after a warm-up step (see peak_child)")
    args = parser.parse_args()
    if args.peak_child:
        name, clients, strategy = args.peak_child
        peak_child(name, int(clients), strategy, args.warm)
        return
    torch.set_num_threads(args.threads)
    only = args.only.split(",")
    small = args.smoke
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, load average {load()}", flush=True)
    report = {"load_before": load(), "threads": torch.get_num_threads()}
    if "cifar" in only:
        r = compare_round("cifar", 2 if small else 10, 1 if small else 5, 1 if small else args.repeats)
        report["cifar"] = r
        print(f"CIFAR CNN round: {json.dumps(r)}", flush=True)
    if "resnet" in only:
        r = compare_round("resnet", 2, 1, 1 if small else max(1, args.repeats - 1), alternatives=False)
        r["peak"] = measure_peak("resnet", 2, r["strategy"])
        report["resnet"] = r
        print(f"ResNet-18-GN round: {json.dumps(r)}", flush=True)
    if "lstm" in only:
        r = compare_round("lstm", 2 if small else 10, 1 if small else 2, 1 if small else args.repeats)
        r["peak"] = measure_peak("lstm", 2 if small else 10, r["strategy"])
        report["lstm"] = r
        print(f"Shakespeare LSTM round: {json.dumps(r)}", flush=True)
    if "memory" in only:
        rows = []
        for name in ("linear", "cnn", "cifar", "femnist", "resnet", "lstm"):
            for strategy in ("vmap", "threads"):
                # the linear model's op adds ~0.2 MB a client: 64 clients, above the allocator's slack
                clients = 2 if small or name == "resnet" else 64 if name == "linear" else 6
                row = measure_peak(name, clients, strategy, args.warm)
                rows.append(row)
                print(f"memory {json.dumps(row)}", flush=True)
        report["memory"] = rows
    if "cosim" in only:
        r = cosim(1 if small else args.cosim_rounds, small, args.cosim_eval_every)
        report["cosim"] = r
        print(f"co-simulated phones-in-a-cell, CIFAR CNN: {json.dumps(r)}", flush=True)
    report["load_after"] = load()
    print(f"load average after: {load()}")
    out = os.environ.get("BENCH_JSON")
    if out:
        Path(out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
