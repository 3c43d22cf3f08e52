"""The evaluation of the global model (edgefl.metrics.evaluate_global) in the Figure-4 study's shapes: the seeds of
one seed group of scenarios/energy-tau-sweep.toml (MNIST-10k, linear 784 -> 10; each seed's 2,000 test-pool and
8,000 training images, all 10,000 of the MNIST test split cut its own way), on one torch thread as a sweep's worker
runs them, CPU time per evaluation of one run's model, three ways interleaved in one process:

- module: the outputs by the module's forward (F.linear, x W^T + b), as before (main 4fca975);
- solo: the transposed form (LinearGrad.logits, W x^T + b), each run alone;
- together: the runs' models in one call on their shared inputs (edgefl.seed_axis.SeedBatch, each run in its thread).

and whether each run's numbers together are its solo run's, bit for bit. ``--base DIR``: another checkout's
``edgefl/metrics.py`` (e.g. an archive of main) loaded beside this one and measured in the same loop, solo and
together (a base whose SeedBatch handed [n, K] outputs, as fd825a8's, gets them split as it did: ``outputs_of`` of
each column set), and the work after the product alone (each run's logits computed beforehand); every metric of the
base compared with this tree's.

    .venv/bin/python benchmarks/evaluation.py --seeds 5 --evaluations 20 --repeats 3 [--base /tmp/base]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgefl import metrics  # noqa: E402
from edgefl.runner import Simulation  # noqa: E402
from edgefl.seed_axis import SeedBatch  # noqa: E402
from edgefl.sweeps.plan import plan_sweep  # noqa: E402
from edgefl.sweeps.run import trainer  # noqa: E402


def simulations(seeds: int, scenario: Path) -> list[Simulation]:
    grid = ["network.snr_db=10", "network.bandwidth_mhz=1", "algorithm.local_steps=10"]
    plan = plan_sweep(scenario, ["run.rounds=1"], grid, seeds)
    return [Simulation(trainer(p.scenario)) for p in plan.points]


def module_outputs(sim: Simulation):
    """The outputs as the module's forward gives them (the evaluation before the transposed form), handed to the
    evaluation as edgefl.metrics.Outputs: transposed, the test inputs' columns first."""
    test_x, train_x = metrics.evaluation_inputs(sim.data)
    n = test_x.shape[0]
    columns = (torch.arange(n), torch.arange(n, n + train_x.shape[0]))
    return lambda w: (torch.cat([sim.model.forward(w, test_x), sim.model.forward(w, train_x)]).t(), columns)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--evaluations", type=int, default=20, help="evaluations of each run's model per timing")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scenario", type=Path, default=ROOT / "scenarios" / "energy-tau-sweep.toml")
    parser.add_argument("--base", type=Path, help="a checkout whose edgefl/metrics.py is measured beside this one")
    args = parser.parse_args(argv)
    base = None
    if args.base is not None:
        spec = importlib.util.spec_from_file_location("base_metrics", args.base / "edgefl" / "metrics.py")
        assert spec is not None and spec.loader is not None
        base = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(base)
    torch.set_num_threads(1)
    sims = simulations(args.seeds, args.scenario)
    g = torch.Generator().manual_seed(0)
    models = [
        [s.algorithm.model + 0.01 * torch.randn(s.model.dim, generator=g) for _ in range(args.evaluations)]
        for s in sims
    ]
    began = time.process_time()
    batch = SeedBatch([s.executor for s in sims])
    batch.inputs  # (looked for at the first evaluation: here, to time it apart)
    matching = time.process_time() - began
    rows = "no shared inputs" if batch.inputs is None else f"{batch.inputs.x.shape[0]:,} shared rows"
    print(
        f"{args.seeds} seeds of the Figure-4 study, 1 thread: {rows} (matched by bytes in {matching * 1e3:.0f} ms "
        f"CPU, once per seed group); CPU ms per evaluation of one run's model"
    )

    hooks = [module_outputs(s) for s in sims]

    def module(_):
        return [
            [metrics._evaluate_global(s.model, s.data, w, hook) for w in ws] for s, ws, hook in zip(sims, models, hooks)
        ]

    def solo(_, mod=metrics):
        return [[mod._evaluate_global(s.model, s.data, w) for w in ws] for s, ws in zip(sims, models)]

    def together(batch, mod=metrics):
        lanes = [batch.lane(i) for i in range(len(sims))]
        results: list = [None] * len(sims)

        def go(i: int) -> None:
            hook = lanes[i].evaluation_outputs
            if mod is not metrics:
                hook = base_outputs(mod, sims[i].model, hook)
            try:
                results[i] = [mod._evaluate_global(sims[i].model, sims[i].data, w, hook) for w in models[i]]
            finally:
                batch.leave(i)

        threads = [threading.Thread(target=go, args=(i,)) for i in range(len(sims))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return results

    ways = {"module": module, "solo": solo, "together": together}
    if base is not None:
        inputs = batch.inputs
        assert inputs is not None
        logits = [inputs.linear.logits(torch.stack(ws), inputs.x) for ws in zip(*models)]  # [S, K, U] each

        def after(mod):  # the work after the product, the logits handed (as a SeedBatch hands them)
            results = []
            for lane, s in enumerate(sims):
                columns = inputs.columns[lane]
                hook = {id(w): (z[lane], columns) for w, z in zip(models[lane], logits)}.__getitem__
                s.model.evaluation_rows = None  # (the rows kept per run: built once per timing)
                outputs = (lambda w, hook=hook: hook(id(w))) if mod is metrics else None
                if mod is not metrics:
                    outputs = base_outputs(mod, s.model, lambda w, hook=hook: hook(id(w)))
                results.append([mod._evaluate_global(s.model, s.data, w, outputs) for w in models[lane]])
            return results

        ways.update(
            {
                "base solo": lambda _: solo(_, base),
                "base together": lambda b: together(b, base),
                "after the product": lambda _: after(metrics),
                "base after the product": lambda _: after(base),
            }
        )
    n = args.seeds * args.evaluations
    times: dict[str, list[float]] = {name: [] for name in ways}
    identical = base_identical = True
    base_out: dict[str, list] = {}
    alone = solo(None)  # (each way's numbers compared with these)
    for repeat in range(args.repeats + 1):  # a warm-up, then interleaved: the machine's load varies
        spent = {}
        for name in ways if repeat % 2 else reversed(ways):
            batch = SeedBatch([s.executor for s in sims]) if "together" in name else None
            if batch is not None:
                batch.inputs  # (the matching of rows, timed above: once per seed group)
            for s in sims:
                s.model.evaluation_rows = None  # (built once per run: here once per timing)
            began = time.process_time()
            out = ways[name](batch)
            spent[name] = (time.process_time() - began) / n * 1e3
            if name != "module":
                if name.startswith("base"):
                    base_out[name] = out
                else:
                    identical &= all(_same(a, b) for run_a, run_b in zip(alone, out) for a, b in zip(run_a, run_b))
            if batch is not None:
                identical &= batch.stacked_evaluations == args.evaluations
        for out in base_out.values():
            base_identical &= all(_same(a, b) for run_a, run_b in zip(alone, out) for a, b in zip(run_a, run_b))
        if repeat:
            for name, value in spent.items():
                times[name].append(value)
            print("  " + ", ".join(f"{name} {value:.2f}" for name, value in spent.items()))
    med = {name: statistics.median(values) for name, values in times.items()}
    print(
        f"median: module {med['module']:.2f} ms, solo {med['solo']:.2f} ms ({med['module'] / med['solo']:.2f}x), "
        f"together {med['together']:.2f} ms ({med['module'] / med['together']:.2f}x); "
        f"each run together identical to its solo run: {identical}"
    )
    if base is not None:
        print(
            f"base {args.base}: solo {med['base solo']:.2f} ms ({med['base solo'] / med['solo']:.2f}x this), "
            f"together {med['base together']:.2f} ms ({med['base together'] / med['together']:.2f}x), after the "
            f"product {med['base after the product']:.2f} ms against {med['after the product']:.2f} ms "
            f"({med['base after the product'] / med['after the product']:.2f}x); every metric the same as this "
            f"tree's: {base_identical}"
        )


def base_outputs(base, model, hook):
    """``hook`` (this tree's edgefl.metrics.Outputs) as a base's evaluation takes it: a base whose metrics predate
    the transposed scoring (no ``columns_are_exact``) took [n, K] outputs of its test and training inputs."""
    if hook is None or hasattr(base, "columns_are_exact"):
        return hook

    def outputs(w):
        given = hook(w)
        return None if given is None else tuple(metrics.outputs_of(model, given[0], c) for c in given[1])

    return outputs


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        np.array_equal(a[k], b[k]) if isinstance(a[k], np.ndarray) else a[k] == b[k] for k in a
    )


if __name__ == "__main__":
    main()
