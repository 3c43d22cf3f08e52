"""Flower's side of benchmarks/flower_compare.py: run in the Flower virtual environment (flwr + torch, no edgefl).

    benchmarks/out/flower-venv/bin/python benchmarks/flower_side.py DATA.npz --rounds 20 --per-round 20 \
        --steps 10 --batch 32 --lr 0.05 --seed 0 [--path ray|loop]

DATA.npz is written by flower_compare.py from edgefl's own partition: the clients' training pools
(``train_x``, ``train_y``, ``train_offsets``), the global held-out pool (``test_x``, ``test_y``) and
edgefl's initial linear model (``init_weight`` [10, 784], ``init_bias`` [10]), so both frameworks train
the same model from the same start on the same clients' data. Each client takes ``steps`` SGD steps
on batches drawn uniformly with replacement from its pool (as edgefl's executor); the server is
Flower's FedAvg with every client reporting one example (equal weights, as edgefl's
``weighting = "uniform"``); no per-round evaluation (edgefl evaluates the last round only here): the
final model is evaluated once on the global test pool after the run.

Prints one JSON line: the path used, the whole run's wall time, the round end instants (for the
per-round time without start-up) and the final accuracy.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
import torch
from torch import nn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data")
    parser.add_argument("--rounds", type=int, required=True)
    parser.add_argument("--per-round", type=int, required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--path", choices=("ray", "loop"), default="ray")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (and of each Ray actor)")
    parser.add_argument("--actors", type=int, default=os.cpu_count(), help="Ray: clients trained at once (1 CPU each)")
    args = parser.parse_args()

    import flwr
    from flwr.client import NumPyClient
    from flwr.common import ndarrays_to_parameters, parameters_to_ndarrays
    from flwr.server.strategy import FedAvg

    torch.set_num_threads(args.threads)
    d = np.load(args.data)
    x = torch.as_tensor(d["train_x"]).reshape(len(d["train_x"]), -1)
    y = torch.as_tensor(d["train_y"]).long()
    offsets = d["train_offsets"]
    num_clients = len(offsets) - 1
    init = [d["init_weight"], d["init_bias"]]
    round_ends: list[float] = []

    class LinearClient(NumPyClient):
        def __init__(self, cid: int):
            self.cid = cid
            self.x, self.y = x[offsets[cid] : offsets[cid + 1]], y[offsets[cid] : offsets[cid + 1]]
            self.model = nn.Linear(self.x.shape[1], 10)
            self.rng = torch.Generator().manual_seed(args.seed * 1_000_003 + cid)

        def fit(self, parameters, config):
            with torch.no_grad():
                self.model.weight.copy_(torch.as_tensor(parameters[0]))
                self.model.bias.copy_(torch.as_tensor(parameters[1]))
            opt = torch.optim.SGD(self.model.parameters(), lr=args.lr)
            for _ in range(args.steps):
                idx = torch.randint(len(self.y), (args.batch,), generator=self.rng)  # with replacement
                opt.zero_grad()
                nn.functional.cross_entropy(self.model(self.x[idx]), self.y[idx]).backward()
                opt.step()
            return [p.detach().numpy().copy() for p in (self.model.weight, self.model.bias)], 1, {}  # equal weights

    class TimedFedAvg(FedAvg):
        def aggregate_fit(self, server_round, results, failures):
            out = super().aggregate_fit(server_round, results, failures)
            round_ends.append(time.perf_counter())
            final[0] = out[0]
            return out

    final: list = [None]
    fraction = args.per_round / num_clients
    strategy = TimedFedAvg(
        fraction_fit=fraction,
        min_fit_clients=args.per_round,
        min_available_clients=num_clients,
        fraction_evaluate=0.0,
        min_evaluate_clients=0,
        initial_parameters=ndarrays_to_parameters(init),
    )
    start = time.perf_counter()
    if args.path == "ray":
        from flwr.client import ClientApp
        from flwr.common import Context
        from flwr.server import ServerApp, ServerAppComponents, ServerConfig
        from flwr.simulation import run_simulation

        def client_fn(context: Context):
            torch.set_num_threads(args.threads)  # in the Ray actor's process
            return LinearClient(int(context.node_config["partition-id"])).to_client()

        def server_fn(context: Context):
            return ServerAppComponents(strategy=strategy, config=ServerConfig(num_rounds=args.rounds))

        run_simulation(
            server_app=ServerApp(server_fn=server_fn),
            client_app=ClientApp(client_fn=client_fn),
            num_supernodes=num_clients,
            backend_config={
                "client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                "init_args": {"num_cpus": args.actors},
            },
        )
        # the strategy lives in this process (ServerApp runs in-process), so round_ends and final are set
    else:  # Flower's NumPyClient and FedAvg objects in a plain in-process loop (no Ray, no gRPC)
        from flwr.common import Code, FitIns, FitRes, Status
        from flwr.server.client_proxy import ClientProxy

        class Proxy(ClientProxy):
            def get_properties(self, ins, timeout, group_id):  # pragma: no cover - unused
                raise NotImplementedError

            def get_parameters(self, ins, timeout, group_id):  # pragma: no cover - unused
                raise NotImplementedError

            def fit(self, ins: FitIns, timeout, group_id):
                params, n, metrics = LinearClient(int(self.cid)).fit(parameters_to_ndarrays(ins.parameters), ins.config)
                return FitRes(Status(Code.OK, ""), ndarrays_to_parameters(params), n, metrics)

            def evaluate(self, ins, timeout, group_id):  # pragma: no cover - unused
                raise NotImplementedError

            def reconnect(self, ins, timeout, group_id):  # pragma: no cover - unused
                raise NotImplementedError

        from flwr.server.client_manager import SimpleClientManager

        manager = SimpleClientManager()
        for cid in range(num_clients):
            manager.register(Proxy(str(cid)))
        parameters = strategy.initialize_parameters(manager)
        for r in range(1, args.rounds + 1):
            instructions = strategy.configure_fit(r, parameters, manager)
            results = [(proxy, proxy.fit(ins, None, None)) for proxy, ins in instructions]
            parameters, _ = strategy.aggregate_fit(r, results, [])
    wall = time.perf_counter() - start
    weight, bias = parameters_to_ndarrays(final[0])
    test_x = d["test_x"].reshape(len(d["test_x"]), -1)
    accuracy = float(np.mean(np.argmax(test_x @ weight.T + bias, axis=1) == d["test_y"]))
    print(
        "FLOWER "
        + json.dumps(
            {
                "path": args.path,
                "flwr": flwr.__version__,
                "wall_s": wall,
                "round_ends": [t - start for t in round_ends],
                "accuracy": accuracy,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
