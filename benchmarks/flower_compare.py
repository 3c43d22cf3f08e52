"""edgefl against Flower on the same FedAvg workloads, side by side on this machine (issue 30, item 4).

    python benchmarks/flower_compare.py [--workloads a b] [--repeats 3] [--rounds-b 100] [--flower-paths ray loop]
    python benchmarks/flower_compare.py --no-flower --rounds-a 2 --workloads a     # edgefl side only (smoke)

Flower is never an edgefl dependency: it is installed into its own virtual environment,
``benchmarks/out/flower-venv`` (git-ignored; created on first use, reused after), with ``torch==2.13.0``
installed first (the CPU wheel this machine's pip constraints pin, so that pip never resolves a plain
torch with GBs of CUDA) and ``flwr[simulation]`` (Ray) after it. Flower's side runs there as
``benchmarks/flower_side.py``, which imports no edgefl.

Workloads (the MNIST test split, ../shared/datasets/mnist, cut 80/20 by edgefl; linear model 784 -> 10;
FedAvg with equal weights; SGD on batches of 32 drawn with replacement, lr 0.05, 10 local steps):
  (a) 30 clients with a Dirichlet(0.5) class mix, 20 clients per round, 20 rounds;
  (b) FLUTE's comparison: 1,000 clients (Dirichlet(0.5); about 8 images each: only the 10k split
      ships), 10 clients per round, 100 rounds (``--rounds-b`` for fewer).
torch runs on ``--threads`` threads (default 1) on both sides and in every Ray actor.
Both frameworks get edgefl's partition, initial model and global test pool (an .npz beside the venv);
each samples its own clients per round (uniformly, m of N). edgefl runs twice per repeat: the ideal
engine (learning only, as Flower has no network) and the SimPy co-simulation (default network). Flower
runs two ways: its simulation engine (``flwr.simulation.run_simulation``, Ray, one actor per core) and
its NumPyClient and FedAvg strategy objects in a plain in-process loop (no Ray, no gRPC). The
runs interleave (edgefl ideal, edgefl simpy, Flower with Ray, Flower in a loop; repeated); medians are printed with the ratios
and both final accuracies (on the same global test pool), which must be comparable for the workloads
to be the same. Times: edgefl's ``Simulation.run`` (scenario, data and model built before it) divided
by the rounds; Flower's whole ``run_simulation`` call (Ray's start-up included) divided by the rounds
and its steady per-round time (between the first and the last round's aggregation).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

# idle OpenMP threads wait passively, before torch loads OpenMP (as benchmarks/run.py: spinning ones stall
# on a shared machine); Flower's side inherits it
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgefl.runner import Simulation  # noqa: E402
from edgefl.scenario import load_scenario  # noqa: E402

OUT = ROOT / "benchmarks" / "out"
VENV = OUT / "flower-venv"
MNIST_DIR = Path(os.environ.get("EDGEFL_MNIST_DIR", ROOT.parent / "shared" / "datasets" / "mnist"))
TORCH_PIN = "torch==2.13.0"  # as edgefl's own venv: the CPU wheel of this machine
WORKLOADS = {  # name: (clients N, per round m, rounds)
    "a": (30, 20, 20),
    "b": (1000, 10, 100),
}
STEPS, BATCH, LR, ALPHA = 10, 32, 0.05, 0.5
THREADS = [1]  # torch threads of either side (--threads); Ray's actors get one each (Ray's default)


def scenario_text(num_clients: int, per_round: int, rounds: int, engine: str) -> str:
    return f"""[run]
seed = 0
rounds = {rounds}
eval_every = {rounds}
engine = "{engine}"
threads = {THREADS[0]}

[data]
name = "mnist"
dir = "{MNIST_DIR.resolve()}"
num_clients = {num_clients}
dirichlet_alpha = {ALPHA}

[model]
name = "linear"

[algorithm]
name = "fedavg"
local_steps = {STEPS}
clients_per_round = {per_round}
lr = {LR}
batch_size = {BATCH}

[algorithm.fedavg]
weighting = "uniform"
"""


def build(workload: str, rounds: int, engine: str) -> Simulation:
    n, m, _ = WORKLOADS[workload]
    path = OUT / f"flower-compare-{workload}-{engine}.toml"
    path.write_text(scenario_text(n, m, rounds, engine))
    return Simulation(load_scenario(path))


def accuracy(sim: Simulation, w: torch.Tensor) -> float:
    data = sim.data
    with torch.no_grad():
        predicted = sim.model.forward(w, data.global_test_x).argmax(dim=1)
    return float((predicted == data.global_test_y).float().mean())


def edgefl_run(workload: str, rounds: int, engine: str) -> tuple[float, float]:
    """(seconds per round of Simulation.run, final accuracy on the global test pool)."""
    sim = build(workload, rounds, engine)
    start = time.perf_counter()
    sim.run(progress=False)
    seconds = time.perf_counter() - start
    return seconds / rounds, accuracy(sim, sim.algorithm.w)


def export(workload: str, rounds: int) -> Path:
    """edgefl's partition, initial linear model and global test pool, for Flower's side."""
    sim = build(workload, rounds, "ideal")
    data, layers = sim.data, sim.model.unflatten(sim.algorithm.w)
    weight, bias = (t.detach().numpy() for t in layers.values())
    assert weight.shape == (10, 784) and bias.shape == (10,), {k: tuple(v.shape) for k, v in layers.items()}
    path = OUT / f"flower-data-{workload}.npz"
    np.savez(
        path,
        train_x=data.train_x.numpy(),
        train_y=data.train_y.numpy(),
        train_offsets=data.train_offsets,
        test_x=data.global_test_x.numpy(),
        test_y=data.global_test_y.numpy(),
        init_weight=weight,
        init_bias=bias,
    )
    return path


def flower_python() -> Path:
    """The Flower venv's python, created (torch pinned first, then flwr[simulation]) if missing."""
    python = VENV / "bin" / "python"
    if (
        python.is_file()
        and subprocess.run([python, "-c", "import flwr, ray, torch"], capture_output=True).returncode == 0
    ):
        return python
    print(f"creating {VENV} (torch first, then flwr[simulation]); minutes ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
    pip = [python, "-m", "pip", "install", "-q"]
    subprocess.run([*pip, TORCH_PIN], check=True)
    subprocess.run([*pip, "flwr[simulation]", "numpy"], check=True)
    return python


def flower_run(python: Path, data: Path, workload: str, rounds: int, path: str) -> dict:
    _, m, _ = WORKLOADS[workload]
    command = [python, ROOT / "benchmarks" / "flower_side.py", data, "--rounds", str(rounds), "--per-round", str(m)]
    command += ["--steps", str(STEPS), "--batch", str(BATCH), "--lr", str(LR), "--path", path]
    command += ["--threads", str(THREADS[0])]
    done = subprocess.run(command, capture_output=True, text=True)
    line = [x for x in done.stdout.splitlines() if x.startswith("FLOWER ")]
    if done.returncode or not line:
        raise SystemExit(f"Flower's side failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    result = json.loads(line[0][len("FLOWER ") :])
    ends = result["round_ends"]
    result["per_round_s"] = result["wall_s"] / rounds
    result["steady_s"] = (ends[-1] - ends[0]) / (len(ends) - 1) if len(ends) > 1 else float("nan")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", nargs="+", choices=sorted(WORKLOADS), default=sorted(WORKLOADS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds-a", type=int, default=WORKLOADS["a"][2])
    parser.add_argument("--rounds-b", type=int, default=WORKLOADS["b"][2])
    parser.add_argument("--flower-paths", nargs="+", choices=("ray", "loop"), default=["ray", "loop"])
    parser.add_argument("--threads", type=int, default=1, help="torch threads of both sides (default 1)")
    parser.add_argument("--no-flower", action="store_true", help="edgefl's side only (no Flower venv)")
    args = parser.parse_args()
    if args.repeats < 1 or args.rounds_a < 2 or args.rounds_b < 2 or args.threads < 1:
        parser.error("--repeats and --threads must be >= 1 and the rounds >= 2")
    THREADS[0] = args.threads
    print(
        f"torch threads {args.threads} on both sides; {os.cpu_count()} cores; load {os.getloadavg()[0]:.1f}", flush=True
    )
    OUT.mkdir(parents=True, exist_ok=True)
    python = None if args.no_flower else flower_python()
    rounds = {"a": args.rounds_a, "b": args.rounds_b}
    for workload in args.workloads:
        n, m, _ = WORKLOADS[workload]
        r = rounds[workload]
        data = None if python is None else export(workload, r)
        times: dict[str, list[float]] = {"ideal": [], "simpy": []}
        acc: dict[str, float | str] = {}
        for rep in range(args.repeats):
            for engine in ("ideal", "simpy"):
                seconds, acc[engine] = edgefl_run(workload, r, engine)
                times[engine].append(seconds)
            for path in args.flower_paths if python is not None else ():
                result = flower_run(python, data, workload, r, path)
                times.setdefault(f"flower-{path}", []).append(result["per_round_s"])
                times.setdefault(f"flower-{path}-steady", []).append(result["steady_s"])
                acc[f"flower-{path}"] = result["accuracy"]
                acc["flwr"] = result["flwr"]
            print(
                f"  ({workload}) repeat {rep + 1}: "
                + ", ".join(f"{k} {v[-1] * 1e3:.1f} ms/round" for k, v in times.items() if v),
                flush=True,
            )
        med = {k: float(np.median(v)) for k, v in times.items() if v}
        print(
            f"({workload}) N={n} m={m} rounds={r} tau={STEPS} batch={BATCH} lr={LR}; medians of {args.repeats}: "
            f"edgefl ideal {med['ideal'] * 1e3:.1f} ms/round (acc {acc['ideal']:.4f}), "
            f"edgefl simpy {med['simpy'] * 1e3:.1f} ms/round (acc {acc['simpy']:.4f})",
            flush=True,
        )
        for path in args.flower_paths if python is not None else ():
            whole, steady = med[f"flower-{path}"], med[f"flower-{path}-steady"]
            print(
                f"({workload}) Flower {acc['flwr']} {path}: {whole * 1e3:.1f} ms/round whole run, "
                f"{steady * 1e3:.1f} ms/round steady (acc {acc[f'flower-{path}']:.4f}); ratios Flower / edgefl: "
                f"whole {whole / med['ideal']:.2f}x ideal, {whole / med['simpy']:.2f}x simpy; "
                f"steady {steady / med['ideal']:.2f}x ideal, {steady / med['simpy']:.2f}x simpy",
                flush=True,
            )


if __name__ == "__main__":
    main()
