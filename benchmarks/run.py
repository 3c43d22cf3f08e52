"""edgefl performance benchmarks: one line per benchmark, the two sides measured in one process.

    .venv/bin/python benchmarks/run.py            # full (a few minutes)
    .venv/bin/python benchmarks/run.py --quick    # under 2 minutes
    .venv/bin/python benchmarks/run.py --smoke    # under a minute: every benchmark (fig4 too) on tiny sizes,
                                                  # to show they still run (tests/test_benchmarks.py); no measurement
    .venv/bin/python benchmarks/run.py --only linear,engine --threads 2

1. linear: one DRDM round of local work (the real ``drdm`` Train op: m = 20 clients x tau = 10
   steps, batch 32, MNIST-10k linear 784->10), Executor batched vs a lean per-client PyTorch
   loop (data already tensors, one nn.Module reused, torch.optim.SGD, the same minibatches).
2. cnn: the same with the DRDM paper's CNN; achieved GFLOP/s against a matmul peak measured
   in the same loop.
3. engine: a whole DRDM run (MNIST-10k linear, evaluation every round) on the default network
   and with FDMA + Rayleigh fading: the SimPy co-simulation vs the ideal engine (time spent in
   the engine over the rest of the same run; CPU time; wall-clock ratio of separate runs).
4. scale: N = 10^4, 10^5 and 10^6 devices (--quick: 10^4 and 10^5; --scale-sizes), m = 1,000 per
   round, linear model (Synthetic(1, 1), 20 samples per client), 20 rounds of DRDM co-simulated (FDMA +
   Rayleigh), the global model evaluated after the last round, each N in a fresh process: setup time
   (data set included), per-round times, total, peak memory (max RSS). Targets at 10^6: <= 60 s, <= 8 GiB.
   --scale-base DIR: the second size also on an edgefl checkout from before (DIR), for the ratio.
5. reprice: the 60-round DRDM trace of scenarios/energy-tau-sweep.toml re-priced on its 35
   SNR x bandwidth points (the same SimPy model, no training), one core, as a sweep prices them (together along an
   array axis: edgefl.sim.points; a --tree without it: point by point): channel points per minute; the engine's
   SimPy events/s next to a bare SimPy timeout loop (the ceiling).
8. async: an asynchronous server (FedAsync, concurrency 10, 600 server updates, evaluation only at the
   end) on scenarios/phones-in-a-cell.toml, SimPy co-simulation vs the ideal engine: the engine's cost per
   dispatched chain (CPU time of separate runs, interleaved; docs/asynchronous.md, "Engine overhead"): the
   difference of the two engines' medians, and paired (the median of each repeat's difference).
6. fig4 (only when named, or with --smoke): the Figure-4 study of scenarios/energy-tau-sweep.toml with 10 seeds
   (2,100 points) end to end: ``edgefl sweep`` (2 workers), ``optimal-tau``, ``plot``.
7. quickstart: whole-process wall time of ``edgefl run scenarios/quickstart.toml``, and whether
   torch._dynamo is imported on the way.

Timings: warm-up runs, then the candidates interleaved (A B A B ...) so that load from other
processes hits both alike; medians. The machine's load is printed with the results, and its speed (``host speed``:
a bare SimPy loop and a small torch product, which the timings scale with; machines here differed up to 2.8x).
OpenMP threads wait passively (``OMP_WAIT_POLICY=PASSIVE`` unless set otherwise): on a machine
whose cores other processes also use, spinning threads make every parallel op wait for a
descheduled peer, which slows a loop of many small ops (the per-client loop) by up to 10x and
would inflate the ratios.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads OpenMP (see above)

import numpy as np  # noqa: E402
import simpy  # noqa: E402
import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# --tree DIR: the code measured is DIR's (another checkout, e.g. `git archive REV | tar -x -C DIR`), the benchmarks
# this file's: a base measured with the same benchmark code, in runs interleaved with this checkout's
# (benchmarks/engine_base.py). Read before edgefl is imported.
TREE = Path(sys.argv[sys.argv.index("--tree") + 1]).resolve() if "--tree" in sys.argv[:-1] else ROOT
if str(TREE) not in sys.path:
    sys.path.insert(0, str(TREE))

from edgefl.deployment import build_population, network_params  # noqa: E402
from edgefl.executor import Executor  # noqa: E402
from edgefl.runner import Simulation  # noqa: E402
from edgefl.scenario import load_scenario, scenario_from_dict  # noqa: E402
from edgefl.sim import SimPyPricer, reprice_rounds  # noqa: E402
from edgefl.sweeps.store import load_manifest  # noqa: E402

try:  # the channel points of a trace priced together (a tree from before has no edgefl.sim.points)
    from edgefl.sim.points import reprice_points  # noqa: E402
except ImportError:
    reprice_points = None

MNIST_DIR = Path(
    os.environ.get("EDGEFL_MNIST_DIR", Path(__file__).resolve().parents[2] / "shared" / "datasets" / "mnist")
)


# -- timing ------------------------------------------------------------------------------
def interleaved(candidates: dict, repeats: int, warmup: int = 1) -> dict[str, float]:
    """Median wall time (s) of each callable, runs interleaved and the order rotated per repeat."""
    names = list(candidates)
    for _ in range(warmup):
        for name in names:
            candidates[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeats):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            t = time.perf_counter()
            candidates[name]()
            times[name].append(time.perf_counter() - t)
    return {name: float(np.median(v)) for name, v in times.items()}


def load_average() -> str:
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def host_speed() -> str:
    """How fast this machine runs what the benchmarks are made of, measured now (medians of 5): Python (a bare SimPy
    timeout loop's events/s) and one small torch op (a minibatch's product in the MNIST linear model, [32, 784] x
    [784, 10], one thread). Timings taken on different machines compare only beside these (2026-11-28: one machine
    ran the loop at 1,040k events/s, another at 360k, and the same code's [8] and Figure-4 accordingly)."""
    events = float(np.median([bare_simpy_events_per_s() for _ in range(5)]))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        x, w = torch.randn(32, 784), torch.randn(784, 10)
        for _ in range(100):
            x @ w
        times = []
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(200):
                x @ w
            times.append((time.perf_counter() - t) / 200)
    finally:
        torch.set_num_threads(threads)
    return f"bare SimPy timeout loop {events / 1e3:.0f}k events/s, torch [32,784]x[784,10] product {np.median(times) * 1e6:.1f} µs"


def mark(ok: bool) -> str:
    return "OK" if ok else "MISS"


# -- scenarios ---------------------------------------------------------------------------
# -- sizes --------------------------------------------------------------------------------
# Each mode's sizes: full (the measurements), quick (fewer repeats and rounds), smoke (tiny: the benchmarks
# still run, in well under a minute; its numbers measure nothing). Set by main() before any benchmark runs.
SIZES = {
    #            repeats of linear/cnn/engine/quickstart, rounds of engine, DRDM round (clients, tau),
    #            matmul side, scale ((N, ...), m, rounds), reprice (rounds, every k-th channel point, repeats)
    "full": dict(
        linear=41,
        cnn=7,
        engine=7,
        quickstart=5,
        engine_rounds=30,
        clients=20,
        tau=10,
        matmul=2048,
        scale=((10_000, 100_000, 1_000_000), 1_000, 20),
        reprice=(None, 1, 3),
        async_=(600, 5),
    ),
    "quick": dict(
        linear=15,
        cnn=3,
        engine=3,
        quickstart=3,
        engine_rounds=10,
        clients=20,
        tau=10,
        matmul=2048,
        scale=((10_000, 100_000), 1_000, 20),
        reprice=(None, 5, 2),
        async_=(600, 3),
    ),
    "smoke": dict(
        linear=1,
        cnn=1,
        engine=1,
        quickstart=1,
        engine_rounds=2,
        clients=4,
        tau=2,
        matmul=256,
        scale=((300,), 10, 2),
        reprice=(2, 17, 1),
        async_=(6, 1),
        quickstart_set=["--set", "run.rounds=2"],
    ),
}
SIZE = SIZES["full"]


def drdm_scenario(
    model: str = "linear", engine: str = "ideal", rounds: int = 1, lr: float = 0.1, seed: int = 0, **network
):
    return scenario_from_dict(
        {
            "run": {"seed": seed, "rounds": rounds, "engine": engine, "eval_every": 1},
            "data": {"name": "mnist", "dir": str(MNIST_DIR), "num_clients": 30},
            "model": {"name": model},
            # sampling = uniform: exactly m = 20 distinct clients train (with replacement: ~14)
            "algorithm": {
                "name": "drdm",
                "local_steps": SIZE["tau"],
                "clients_per_round": SIZE["clients"],
                "lr": lr,
                "batch_size": 32,
                "drdm": {"mu": 0.01, "sampling": "uniform"},
            },
            "network": {"snr_db": 10.0, "bandwidth_mhz": 1.0, **network},
            "devices": {"cpu_ghz": 1.0, "cycles_per_sample": 2e4},
        }
    )


def everything_scenario(engine: str, rounds: int):
    s = drdm_scenario(engine=engine, rounds=rounds).to_dict()
    s["network"] = {k: v for k, v in EVERYTHING.items() if v is not None}
    s["devices"] = {**s["devices"], **EVERYTHING_DEVICES}
    return scenario_from_dict(s)


def captured_train_op(sim: Simulation, rounds: int = 2):
    """The Train op the algorithm yields in round ``rounds`` (earlier rounds make g_i nonzero)."""
    seen = []
    train = sim.executor.train

    def record(op):
        seen.append(op)
        return train(op)

    sim.executor.train = record
    try:
        for r in range(rounds + 1):
            sim.engine.run_round(sim.algorithm, r)
    finally:
        sim.executor.train = train
    return seen[-1]


class LeanLoop:
    """What a careful user writes by hand: one nn.Module reused, torch.optim.SGD, data as tensors.

    Implements DRDM's local step (Alg. 2): grad <- grad - g_i + mu (w - w_bar), w <- w - lr grad,
    with the snapshot after ``record_at`` steps.
    """

    def __init__(self, sim: Simulation):
        self.module = copy.deepcopy(sim.model.module)
        self.params = list(self.module.parameters())
        self.x, self.y = sim.data.train_x, sim.data.train_y
        self.opt = torch.optim.SGD(self.params, lr=1.0)

    def split(self, flat: torch.Tensor) -> list[torch.Tensor]:
        out, start = [], 0
        for p in self.params:
            out.append(flat[start : start + p.numel()].view_as(p))
            start += p.numel()
        return out

    def __call__(self, op, idx: torch.Tensor):
        shared = op.shared
        mu, w_bar = shared["mu"], self.split(shared["w_bar"])
        for group in self.opt.param_groups:
            group["lr"] = shared["lr"]
        start = op.start if op.start.dim() == 2 else op.start.expand(len(op.clients), -1)
        finals, snaps = [], []
        for c in range(len(op.clients)):
            with torch.no_grad():  # copy_ (vector_to_parameters would alias p.data to start[c])
                for p, value in zip(self.params, self.split(start[c])):
                    p.copy_(value)
            g_i = self.split(op.client_args["g"][c])
            for k in range(op.steps):
                rows = idx[c, k]
                self.opt.zero_grad()
                torch.nn.functional.cross_entropy(self.module(self.x[rows]), self.y[rows]).backward()
                with torch.no_grad():
                    for p, g, wb in zip(self.params, g_i, w_bar):
                        p.grad.sub_(g).add_(p - wb, alpha=mu)
                self.opt.step()
                if op.record_at == k + 1:
                    snaps.append(torch.nn.utils.parameters_to_vector(self.params).detach().clone())
            finals.append(torch.nn.utils.parameters_to_vector(self.params).detach().clone())
        return torch.stack(finals), (torch.stack(snaps) if snaps else None)


def local_work_candidates(sim: Simulation, op):
    """batched (Executor.train) and lean loop on the same minibatches; also their max difference."""
    ex = sim.executor
    state = copy.deepcopy(ex.rng.bit_generator.state)
    batch = op.batch_size or ex.batch_size
    lean = LeanLoop(sim)

    def batched():
        ex.rng.bit_generator.state = state
        return ex.train(op)

    def loop():
        ex.rng.bit_generator.state = state
        return lean(op, ex.sample_indices(op.clients, op.steps, batch))

    result, (params, snaps) = batched(), loop()
    diff = max(float((result.params - params).abs().max()), float((result.snapshot - snaps).abs().max()))
    return {"batched": batched, "lean loop": loop}, diff


# -- 1. linear ---------------------------------------------------------------------------
def bench_linear() -> None:
    sim = Simulation(drdm_scenario("linear"))
    op = captured_train_op(sim)
    candidates, diff = local_work_candidates(sim, op)
    # the generic path: vmap(grad) of the model's loss instead of the closed form
    generic = Executor(sim.model, sim.data, 32, sim.scenario.run.seed, "batched", fast_linear=False)
    state = copy.deepcopy(sim.executor.rng.bit_generator.state)

    def vmapped():
        generic.rng.bit_generator.state = state
        return generic.train(op)

    candidates["generic vmap"] = vmapped
    t = interleaved(candidates, repeats=SIZE["linear"], warmup=min(3, SIZE["linear"]))
    ratio = t["lean loop"] / t["batched"]
    stacked = stacked_in_blocks(seeds=5, repeats=max(1, SIZE["linear"] // 4))
    print(
        f"[1] linear  DRDM round (C={len(op.clients)}, tau={op.steps}, B=32, MNIST 784->10): "
        f"batched {t['batched'] * 1e3:.2f} ms | lean loop {t['lean loop'] * 1e3:.2f} ms | "
        f"{ratio:.1f}x (target >= 6x) {mark(ratio >= 6)}   "
        f"[generic vmap path {t['generic vmap'] * 1e3:.2f} ms; max|dw| batched vs loop {diff:.1e}] | {stacked}",
        flush=True,
    )


def stacked_in_blocks(seeds: int, repeats: int) -> str:
    """[1]'s seed group: the DRDM round's Train ops of ``seeds`` runs stacked (edgefl.seed_axis.train_together, as a
    sweep trains a seed group), in the linear path's cache blocks (edgefl.executor.BLOCK_BYTES) against all clients
    at once; the same bits, checked."""
    import edgefl.executor as executor_module
    from edgefl.seed_axis import train_together

    jobs = []
    for seed in range(seeds):
        sim = Simulation(drdm_scenario("linear", seed=seed))
        jobs.append((sim.executor, sim.executor.prepare(captured_train_op(sim))))
    blocks = executor_module.BLOCK_BYTES
    results = {}

    def trained(block_bytes: int, name: str):
        def train():
            executor_module.BLOCK_BYTES = block_bytes
            try:
                results[name] = train_together(jobs)[0]
            finally:
                executor_module.BLOCK_BYTES = blocks

        return train

    t = interleaved({"blocks": trained(blocks, "blocks"), "all": trained(1 << 62, "all")}, repeats, warmup=1)
    same = all(torch.equal(a.params, b.params) for a, b in zip(results["blocks"], results["all"]))
    clients = sum(len(p.op.clients) for _, p in jobs)
    per_block = jobs[0][0].clients_per_block(clients, 32)
    return (
        f"{seeds} runs stacked (C={clients}): blocks of {per_block} {t['blocks'] * 1e3:.1f} ms, all at once "
        f"{t['all'] * 1e3:.1f} ms, {t['all'] / t['blocks']:.2f}x ({'the same bits' if same else 'BITS DIFFER'})"
    )


# -- 2. cnn ------------------------------------------------------------------------------
def matmul_peak(n: int = 2048):
    a, b = torch.randn(n, n), torch.randn(n, n)
    return (lambda: torch.mm(a, b)), 2.0 * n**3


def bench_cnn() -> None:
    sim = Simulation(drdm_scenario("cnn", lr=0.05))
    op = captured_train_op(sim, rounds=0)
    candidates, diff = local_work_candidates(sim, op)
    peak_fn, peak_flops = matmul_peak(SIZE["matmul"])
    candidates["matmul"] = lambda: [peak_fn() for _ in range(8)]
    t = interleaved(candidates, repeats=SIZE["cnn"], warmup=1)
    flops = sim.model.train_flops_per_sample * 32 * op.steps * len(op.clients)
    peak = 8 * peak_flops / t["matmul"] / 1e9
    achieved = flops / t["batched"] / 1e9
    loop_rate = flops / t["lean loop"] / 1e9
    ratio = t["lean loop"] / t["batched"]
    share = achieved / peak
    print(
        f"[2] cnn     DRDM round (C={len(op.clients)}, tau={op.steps}, B=32, {flops / 1e9:.1f} GFLOP): "
        f"batched {t['batched']:.2f} s | lean loop {t['lean loop']:.2f} s | {ratio:.2f}x (target >= 1.5x) "
        f"{mark(ratio >= 1.5)} | {achieved:.1f} GFLOP/s = {100 * share:.0f}% of matmul peak {peak:.1f} "
        f"(target >= 30%) {mark(share >= 0.3)}   [lean loop {loop_rate:.1f} GFLOP/s; strategy "
        f"{sim.executor.strategy}; max|dw| {diff:.1e}]",
        flush=True,
    )


# -- 3. engine overhead --------------------------------------------------------------------
class Timed:
    """Adds up the wall and CPU time a pricer spends pricing phases: ``price_phase`` (physics and
    SimPy events) and ``_book`` (energies, booked when the ledger or the events are next read)."""

    def __init__(self, pricer, methods=("price_phase", "_book")):
        self.wall = self.cpu = 0.0
        self.depth = 0
        for name in methods:
            if hasattr(pricer, name):
                setattr(pricer, name, self.timed(getattr(pricer, name)))

    def timed(self, method):
        def wrapper(*args):
            self.depth += 1
            t, c = time.perf_counter(), time.process_time()
            try:
                return method(*args)
            finally:
                self.depth -= 1
                if self.depth == 0:  # _book may run inside price_phase: count it once
                    self.wall += time.perf_counter() - t
                    self.cpu += time.process_time() - c

        return wrapper


# Every effect of the realistic radio and device model at once (as scenarios/phones-in-a-cell.toml,
# on the benchmark's DRDM MNIST run): for the engine's overhead with everything on.
EVERYTHING = {
    "cell_radius_m": 500.0,
    "shadowing_std_db": 8.0,
    "noise_figure_db": 9.0,
    "bandwidth_mhz": 10.0,
    "access": "fdma",
    "fading": "rayleigh",
    "rate": "mcs",
    "max_retransmissions": 3,
    "access_latency_s": 0.05,
    "deadline_s": 2.0,
    "header_bits": 800,
    "snr_db": None,
}
EVERYTHING_DEVICES = {
    "tail_s": 1.0,
    "tail_power_w": 1.0,
    "battery_j": 1e4,
    "battery_reserve_j": 10.0,
    "harvest_w": 0.02,
    "availability": "markov",
    "mean_on_s": 30.0,
    "mean_off_s": 15.0,
    "speed_mps": 1.4,
    "slowdown": "exponential",
    "slowdown_mean": 0.5,
}


def bench_engine() -> None:
    rounds = SIZE["engine_rounds"]
    networks = {"fdma": {"access": "fdma", "fading": "rayleigh"}, "default": {}, "everything": EVERYTHING}
    runs: dict[tuple[str, str], list[tuple[float, float, float, float]]] = {}
    events_per_round: dict[str, float] = {}

    def one(network: str, kind: str, warm_up: bool = False) -> None:
        engine = "ideal" if kind == "ideal" else "simpy"
        sim = Simulation(
            drdm_scenario(engine=engine, rounds=rounds, **networks[network])
            if network != "everything"
            else everything_scenario(engine, rounds)
        )
        timer = Timed(sim.pricer)
        t, c = time.perf_counter(), time.process_time()
        sim.run(progress=False)
        if kind == "simpy":
            events_per_round[network] = next(sim.pricer.env._eid) / rounds  # SimPy numbers every event it schedules
        if not warm_up:
            runs.setdefault((network, kind), []).append(
                (time.perf_counter() - t, time.process_time() - c, timer.wall, timer.cpu)
            )

    repeats = SIZE["engine"]
    for network in networks:
        one(network, "ideal", warm_up=True), one(network, "simpy", warm_up=True)
        for r in range(repeats):
            for kind in ("ideal", "simpy") if r % 2 == 0 else ("simpy", "ideal"):
                one(network, kind)

    def median(network, kind, field):
        return float(np.median([run[field] for run in runs[(network, kind)]]))

    def share(network, kind, wall=True):  # pricing time / the rest of the same run
        spent, total = (2, 0) if wall else (3, 1)
        return float(np.median([run[spent] / (run[total] - run[spent]) for run in runs[(network, kind)]]))

    for network, label, target in (
        ("default", "default network (dedicated band, no fading)", 0.05),
        ("fdma", "FDMA + Rayleigh", 0.10),
        ("everything", "every radio and device effect on (see EVERYTHING)", None),
    ):
        ideal, cosim = median(network, "ideal", 0), median(network, "simpy", 0)
        headline = share(network, "simpy")
        print(
            f"[3] engine  DRDM MNIST linear run ({rounds} rounds, N=30, m={SIZE['clients']}, eval every round), {label}: "
            f"ideal {ideal / rounds * 1e3:.1f} ms/round | SimPy co-simulation {cosim / rounds * 1e3:.1f} ms/round | "
            f"co-simulation = +{100 * headline:.1f}% over the ideal engine's work "
            + (f"(target <= {100 * target:.0f}%) {mark(headline <= target)} " if target else "(no target) ")
            + f"[CPU time +{100 * share(network, 'simpy', wall=False):.1f}%; wall-clock "
            f"ratio of separate runs {100 * (cosim / ideal - 1):+.1f}%; {events_per_round[network]:.0f} SimPy "
            f"events/round]",
            flush=True,
        )


# -- 5. re-pricing -----------------------------------------------------------------------
SWEEP_SCENARIO = ROOT / "scenarios" / "energy-tau-sweep.toml"


def bare_simpy_events_per_s(processes: int = 20, timeouts: int = 3 * 60) -> float:
    """The ceiling: SimPy alone, ``processes`` processes each waiting on ``timeouts`` timeouts. (The machine's Python
    speed as [5], [8] and the header's ``host speed`` read it: one loop, so that their readings compare.)"""
    env = simpy.Environment()

    def chain(k):
        for i in range(timeouts):
            yield env.timeout(1.0 + 0.001 * k + i)

    for k in range(processes):
        env.process(chain(k))
    t = time.perf_counter()
    env.run()
    elapsed = time.perf_counter() - t
    return next(env._eid) / elapsed  # SimPy numbers every event it schedules


def bench_reprice() -> None:
    """Re-pricing the 60-round DRDM trace of scenarios/energy-tau-sweep.toml (tau = 10, seed 0) on
    the study's SNR x bandwidth grid, one core, as a sweep prices a training's points (together along an array axis
    where they can be, edgefl.sim.points: no SimPy event then): channel points per minute, of wall time and of CPU
    time (steadier on a loaded machine); the SimPy events per point (a phase's chains run on their own clocks where nothing else
    can act on them: edgefl.sim.pricer, _on_own_clocks) and a bare SimPy timeout loop's rate, interleaved."""
    rounds, every, repeats = SIZE["reprice"]
    scenario = load_scenario(SWEEP_SCENARIO, [f"data.dir={MNIST_DIR}"] + ([f"run.rounds={rounds}"] if rounds else []))
    sim = Simulation(scenario, record_trace=True)
    sim.run(progress=False)
    trace = sim.engine.trace
    grid = scenario.sweep.grid
    channels = [(snr, bw) for snr in grid["network.snr_db"] for bw in grid["network.bandwidth_mhz"]]
    channels = channels[::every]
    pricers = []
    for snr, bw in channels:
        s = scenario.model_copy(deep=True)
        s.network.snr_db, s.network.bandwidth_mhz = float(snr), float(bw)
        population = build_population(
            s.network,
            s.devices,
            s.data.num_clients,
            sim.model.train_flops_per_sample,
            sim.model.eval_flops_per_sample,
            s.run.seed,
        )
        pricers.append((network_params(s.network), population))
    activities = sum(len(chain) for phase in trace for chain in phase.chains.values())
    engine_times, cpu_times, engine_events, bare_rates = [], [], [], []
    for rep in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        events = 0
        priced = [
            SimPyPricer(network, population, scenario.run.seed, record_events=False) for network, population in pricers
        ]
        if reprice_points is None:  # (a tree without edgefl.sim.points: point by point)
            for pricer in priced:
                reprice_rounds(trace, pricer)
        else:
            reprice_points(trace, priced)  # together where they can be, as a sweep prices a training's points
        events += sum(next(pricer.env._eid) for pricer in priced)
        engine_times.append(time.perf_counter() - t)
        cpu_times.append(time.process_time() - c)
        engine_events.append(events)
        bare_rates.append(bare_simpy_events_per_s())
    best = int(np.argmin(engine_times))
    per_point, cpu_per_point = engine_times[best] / len(pricers), min(cpu_times) / len(pricers)
    points_per_min = 60.0 / per_point
    chains = sum(len(phase.chains) for phase in trace)
    bare = float(np.median(bare_rates))
    print(
        f"[5] reprice {scenario.run.rounds}-round DRDM trace of energy-tau-sweep.toml ({len(trace)} phases, {chains} chains, "
        f"{activities} activities) on {len(pricers)} channel points, 1 core: {per_point * 1e3:.1f} ms/point = "
        f"{points_per_min:,.0f} channel points/min (target >= 3,000) {mark(points_per_min >= 3000)}; CPU time "
        f"{cpu_per_point * 1e3:.1f} ms/point = {60.0 / cpu_per_point:,.0f}/min | "
        f"{engine_events[best] / len(pricers):.0f} SimPy events/point (bare SimPy timeout loop: "
        f"{bare / 1e3:.0f}k events/s)",
        flush=True,
    )


# -- 8. an asynchronous server's engine cost per chain ---------------------------------------
PHONES_SCENARIO = ROOT / "scenarios" / "phones-in-a-cell.toml"


def bench_async() -> None:
    """FedAsync (concurrency 10, one upload per server update) on phones-in-a-cell, evaluated only at the end:
    (CPU time of the SimPy co-simulation - that of the ideal engine) / chains dispatched, separate runs
    interleaved, medians (docs/asynchronous.md: 4 ms per chain before issue 30)."""
    updates, repeats = SIZE["async_"]
    times: dict[str, list[float]] = {"ideal": [], "simpy": []}
    # the CPU time of the local steps (Executor._train_batched, both engines' one path) in each run, with the
    # calls and clients: the co-simulation trains every chain dispatched, also those cut before their upload
    trained: dict[str, list[tuple[float, int, int]]] = {"ideal": [], "simpy": []}
    chains = 0
    inner = Executor._train_batched
    spent = [0.0, 0, 0]  # CPU s, calls, clients

    def counted(self, op, start, *args, **kwargs):
        c = time.process_time()
        try:
            return inner(self, op, start, *args, **kwargs)
        finally:
            spent[0] += time.process_time() - c
            spent[1] += 1
            spent[2] += len(start)

    def one(engine: str) -> float:
        nonlocal chains
        sim = Simulation(
            load_scenario(
                PHONES_SCENARIO,
                [
                    f"data.dir={MNIST_DIR}",
                    "algorithm.name=fedasync",
                    "algorithm.fedasync.concurrency=10",
                    f"run.rounds={updates}",
                    f"run.eval_every={updates}",
                    f"run.engine={engine}",
                ],
            )
        )
        spent[:] = [0.0, 0, 0]
        c = time.process_time()
        sim.run(progress=False)
        chains = int(sim.engine.selected_count.sum())  # one client per Dispatch: one chain each
        trained[engine].append((spent[0], spent[1], spent[2]))
        return time.process_time() - c

    bare_rates = []  # the machine's Python speed during the runs (a bare SimPy loop's events/s, after each repeat)
    Executor._train_batched = counted  # type: ignore[method-assign]
    try:
        one("ideal"), one("simpy")  # warm-up
        for r in range(repeats):
            for engine in ("ideal", "simpy") if r % 2 == 0 else ("simpy", "ideal"):
                times[engine].append(one(engine))
            bare_rates.append(bare_simpy_events_per_s())
    finally:
        Executor._train_batched = inner  # type: ignore[method-assign]
    ideal, cosim = float(np.median(times["ideal"])), float(np.median(times["simpy"]))
    per_chain = (cosim - ideal) / chains
    # the same without the local steps' CPU in each run (medians of the differences, run by run)
    without = {e: float(np.median([t - s[0] for t, s in zip(times[e], trained[e][1:])])) for e in times}
    steps = {e: trained[e][-1] for e in trained}
    # Paired: each repeat's co-simulation minus the ideal run beside it (the two ran one after the other), the
    # median of these differences: the machine's drift between repeats cancels (the line's figure above is the
    # difference of the two medians, as measured since issue 30 was filed; both estimate the same cost).
    paired_ms = [(s - i) / chains * 1e3 for s, i in zip(times["simpy"], times["ideal"])]
    # The engine cost is Python's CPU time: on a machine (or at a moment) whose Python runs slower, it is longer. In
    # the time of a bare SimPy loop's events it reads alike on machines whose speeds differ 2x (docs/performance.md).
    bare = float(np.median(bare_rates))
    print(
        f"[8] async   FedAsync (C=10, {updates} updates, {chains} chains, eval at the end) on phones-in-a-cell: "
        f"ideal {ideal:.2f} s | SimPy co-simulation {cosim:.2f} s CPU | engine {per_chain * 1e3:.2f} ms per chain "
        f"(target <= 1 ms) {mark(per_chain <= 1e-3)}   [medians of {repeats}, interleaved] | of which local "
        f"steps: ideal {steps['ideal'][2]} clients in {steps['ideal'][1]} calls, co-simulation {steps['simpy'][2]} in "
        f"{steps['simpy'][1]}; without them {(without['simpy'] - without['ideal']) / chains * 1e3:.2f} ms per chain "
        f"| paired (each repeat's co-simulation minus its ideal run): median {float(np.median(paired_ms)):.2f} ms "
        f"per chain, repeats {' / '.join(f'{d:.2f}' for d in paired_ms)} | machine: bare SimPy timeout loop "
        f"{bare / 1e3:.0f}k events/s between the repeats, so the engine's cost per chain = "
        f"{per_chain * bare:,.0f} of its events",
        flush=True,
    )


# -- 6. the Figure-4 study end to end ---------------------------------------------------
def bench_figure4(seeds: int, workers: int, smoke: bool = False, overrides: tuple[str, ...] = ()) -> None:
    """``edgefl sweep`` of scenarios/energy-tau-sweep.toml with ``seeds`` seeds, then
    ``edgefl optimal-tau`` and ``edgefl plot``, each timed as a whole process (the code of ``--tree`` where given:
    ``python -m edgefl.cli`` run in it). ``smoke``: 2 rounds on 2 SNR x 1 bandwidth x 2 tau. ``overrides``: the
    sweep's further ``--set`` keys (e.g. run.device=cuda)."""
    import tempfile

    cli = [sys.executable, "-m", "edgefl.cli"]
    tiny = (
        [
            "--set",
            "run.rounds=2",
            "--grid",
            "network.snr_db=0,20",
            "--grid",
            "network.bandwidth_mhz=1",
            "--grid",
            "algorithm.local_steps=2,4",
        ]
        if smoke
        else []
    )
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "sweep"
        steps = {
            "sweep": [
                *cli,
                "sweep",
                str(TREE / "scenarios" / "energy-tau-sweep.toml"),
                "--seeds",
                str(seeds),
                "--out",
                str(out),
                "--workers",
                str(workers),
                "--quiet",
                "--set",
                f"data.dir={MNIST_DIR}",
                *(arg for key in overrides for arg in ("--set", key)),
                *tiny,
            ],
            "optimal-tau": [*cli, "optimal-tau", str(out), "--target", "acc_worst=0.70"],
            "plot": [*cli, "plot", str(out), "--target", "acc_worst=0.70"],
        }
        times, cpu = {}, {}
        for name, command in steps.items():
            t, c = time.perf_counter(), children_cpu_s()
            subprocess.run(command, check=True, capture_output=True, text=True, cwd=TREE)  # (-m: the tree's edgefl)
            times[name], cpu[name] = time.perf_counter() - t, children_cpu_s() - c
        points = len(load_manifest(out)["points"])
    total = sum(times.values())
    print(
        f"[6] fig4    Figure-4 study, energy-tau-sweep.toml x {seeds} seeds ({points} points, {workers} workers"
        + "".join(f", {key}" for key in overrides)
        + "), "
        f"end to end: {total:.0f} s = {total / 60:.1f} min (target < 1 min) {mark(total < 60)} "
        f"[sweep {times['sweep']:.0f} s, optimal-tau {times['optimal-tau']:.1f} s, plot {times['plot']:.1f} s; "
        f"CPU time (the sweep's with its workers') {cpu['sweep']:.0f} s, {cpu['optimal-tau']:.1f} s, {cpu['plot']:.1f} s]",
        flush=True,
    )


def children_cpu_s() -> float:
    """CPU seconds (user + system) of this process's finished children and theirs (a sweep's workers): on a
    machine shared with other work, what a step cost whatever the load."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


# -- 7. quickstart process ----------------------------------------------------------------
def bench_quickstart() -> None:
    """Whole-process wall time of ``edgefl run scenarios/quickstart.toml`` (imports included)."""
    import tempfile

    times = []
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(SIZE["quickstart"]):
            t = time.perf_counter()
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "edgefl.cli",
                    "run",
                    str(ROOT / "scenarios" / "quickstart.toml"),
                    "--out",
                    str(Path(tmp) / f"q{k}"),
                    "--quiet",
                    *SIZE.get("quickstart_set", []),
                ],
                check=True,
                capture_output=True,
                cwd=ROOT,
            )
            times.append(time.perf_counter() - t)
        imports = subprocess.run(
            [
                sys.executable,
                "-X",
                "importtime",
                "-c",
                "import edgefl.cli, edgefl.runner; from edgefl.runner import Simulation",
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
    dynamo = "torch._dynamo" in imports.stderr
    print(
        f"[7] quick   edgefl run scenarios/quickstart.toml, whole process: median {np.median(times):.2f} s "
        f"(min {min(times):.2f} s) | torch._dynamo imported: {'yes' if dynamo else 'no'}",
        flush=True,
    )


# -- 4. scale ----------------------------------------------------------------------------
SAMPLES_PER_CLIENT = 20


def peak_rss_bytes() -> int:
    """This process's peak resident memory. Linux: VmHWM of /proc/self/status (getrusage's
    ru_maxrss of a child started by fork + exec keeps the parent's peak if that was larger)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux units: KiB


def scale_child(num_clients: int, clients_per_round: int, rounds: int) -> None:
    """Runs in a fresh process (the code of --tree, else this checkout's); prints one JSON line."""
    t0, cpu0 = time.perf_counter(), time.process_time()
    scenario = scenario_from_dict(
        {
            # the global model evaluated after the last round only: an evaluation computes every sample's loss
            # (18M training samples at 10^6 devices), a cost of the data, not of the devices' co-simulation
            "run": {"seed": 0, "rounds": rounds, "engine": "simpy", "eval_every": rounds},
            "data": {"name": "synthetic", "num_clients": num_clients, "samples_per_client": SAMPLES_PER_CLIENT},
            "model": {"name": "linear"},
            # uniform sampling: the m clients change every round, so ~N(1 - (1 - m/N)^rounds) of them
            # get a g_i row (lambda-driven sampling soon concentrates on a few clients)
            "algorithm": {
                "name": "drdm",
                "local_steps": 10,
                "clients_per_round": clients_per_round,
                "lr": 0.05,
                "batch_size": 32,
                "drdm": {"sampling": "uniform"},
            },
            "network": {"snr_db": 10.0, "bandwidth_mhz": 1.0, "access": "fdma", "fading": "rayleigh"},
            "devices": {"cycles_per_sample": 2e4},
        }
    )
    sim = Simulation(scenario)
    built, built_cpu = time.perf_counter() - t0, time.process_time() - cpu0
    build_rss_gib = peak_rss_bytes() / 2**30
    ends: list[float] = []
    cpu_ends: list[float] = []
    result = sim.run(
        progress=False, on_round=lambda row: (ends.append(time.perf_counter()), cpu_ends.append(time.process_time()))
    )
    total = time.perf_counter() - t0
    starts = [t0 + built] + ends[:-1]
    cpu_starts = [cpu0 + built_cpu] + cpu_ends[:-1]
    print(
        json.dumps(
            {
                "code": str(TREE),
                "build_s": built,
                "round_s": [end - start for start, end in zip(starts, ends)],
                "round_cpu_s": [end - start for start, end in zip(cpu_starts, cpu_ends)],
                "total_s": total,
                "build_cpu_s": built_cpu,
                "cpu_s": time.process_time() - cpu0,  # this process's CPU time (the machine may be loaded)
                "build_rss_gib": build_rss_gib,
                "rss_gib": peak_rss_bytes() / 2**30,
                "rounds": rounds,
                "store_rows": len(sim.algorithm.g),
                "store_mib": sim.algorithm.g.nbytes() / 2**20,
                "acc_mean": result.metrics[-1]["acc_mean"],
            }
        )
    )


def run_scale_child(num_clients: int, clients_per_round: int, rounds: int, threads: int, code: str | None = None):
    """:func:`scale_child` in a fresh process (``code``: another checkout's edgefl, as --tree); its JSON, or None if
    it failed."""
    tree = code or (str(TREE) if TREE != ROOT else None)
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--scale-child",
            f"{num_clients},{clients_per_round},{rounds}",
            "--threads",
            str(threads),
            *(["--tree", tree] if tree else []),
        ],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        print(
            f"    (N={num_clients:,}{' base ' + code if code else ''}: exit {out.returncode}: {out.stderr.strip()[-300:]})"
        )
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def scale_line(num_clients: int, clients_per_round: int, r: dict, label: str = "") -> str:
    rounds = sorted(r["round_s"])
    median = rounds[len(rounds) // 2]
    big = num_clients >= 1_000_000
    # the process's CPU time: the honest measure when other processes share the cores (wall time counts their turns)
    cpu_mark = f" (target <= 60 s) {mark(r['cpu_s'] <= 60)}" if big and "cpu_s" in r else ""
    return (
        f"[4] scale{label}  DRDM, N={num_clients:,}, m={clients_per_round:,}, {r['rounds']} rounds, linear, "
        f"FDMA + Rayleigh co-simulated: total {r['total_s']:.1f} s"
        + (f" (target <= 60 s) {mark(r['total_s'] <= 60)}" if big else "")
        + f" = setup {r['build_s']:.1f} s + rounds {sum(r['round_s']):.1f} s "
        + (f"[CPU {r['cpu_s']:.1f} s{cpu_mark}, setup {r['build_cpu_s']:.1f} s] " if "cpu_s" in r else "")
        + f"(per round: median {median:.2f} s, max {rounds[-1]:.2f} s"
        + (f"; CPU median {sorted(r['round_cpu_s'])[len(rounds) // 2]:.2f} s" if "round_cpu_s" in r else "")
        + "; the last evaluates) | "
        + f"peak RSS {r['rss_gib']:.2f} GiB (after setup {r['build_rss_gib']:.2f})"
        + (f" (target <= 8 GiB) {mark(r['rss_gib'] <= 8)}" if big else "")
        + f"   [g_i rows stored {r['store_rows']} = {r['store_mib']:.0f} MiB]"
    )


def bench_scale(threads: int, base: str | None = None) -> None:
    """Each N in a fresh process, smallest first; with ``base`` (a checkout of edgefl before), the second size
    is also run on it, interleaved (base, this, base, this would double the cost: one pair), for the ratio."""
    sizes, clients_per_round, rounds = SIZE["scale"]
    for num_clients in sizes:
        m = min(clients_per_round, num_clients)
        if base is not None and num_clients == sizes[min(1, len(sizes) - 1)]:
            before = run_scale_child(num_clients, m, rounds, threads, base)
            after = run_scale_child(num_clients, m, rounds, threads)
            if before is not None:
                print(scale_line(num_clients, m, before, f" (base {base})"), flush=True)
            if after is not None:
                print(scale_line(num_clients, m, after), flush=True)
            if before is not None and after is not None:
                print(
                    f"    ratio base / this at N={num_clients:,}: total {before['total_s'] / after['total_s']:.1f}x, "
                    f"setup {before['build_s'] / after['build_s']:.1f}x, rounds "
                    f"{sum(before['round_s']) / sum(after['round_s']):.1f}x, peak RSS "
                    f"{before['rss_gib'] / after['rss_gib']:.2f}x",
                    flush=True,
                )
            continue
        r = run_scale_child(num_clients, m, rounds, threads)
        if r is not None:
            print(scale_line(num_clients, m, r), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sizes = parser.add_mutually_exclusive_group()
    sizes.add_argument("--quick", action="store_true", help="fewer repeats and rounds (under 2 minutes)")
    sizes.add_argument(
        "--smoke",
        action="store_true",
        help="every benchmark, fig4 included, on tiny sizes (under a minute): checks that they run; "
        "the numbers measure nothing",
    )
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads (default 2)")
    parser.add_argument(
        "--only",
        default=None,
        help="comma-separated subset of linear,cnn,engine,async,scale,reprice,fig4,quickstart "
        "(fig4, about 2 minutes, runs only when named, or with --smoke)",
    )
    parser.add_argument("--fig4-seeds", type=int, default=10, help="seeds of the Figure-4 study (default 10)")
    parser.add_argument("--workers", type=int, default=2, help="sweep workers of the Figure-4 study (default 2)")
    parser.add_argument(
        "--fig4-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a further scenario key for the Figure-4 study's sweep, e.g. run.device=cuda (repeatable)",
    )
    parser.add_argument(
        "--scale-sizes", default=None, help="the scale benchmark's devices N, comma-separated (default by mode)"
    )
    parser.add_argument(
        "--scale-base",
        default=None,
        help="a checkout of edgefl before (e.g. `git worktree add /tmp/base 516fd55`): the scale benchmark's "
        "second size also runs on it, for the ratio",
    )
    parser.add_argument("--scale-child", default=None, help=argparse.SUPPRESS)  # N,m,rounds
    parser.add_argument(
        "--tree", default=None, help="measure the code of this folder (another checkout) with these benchmarks"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.scale_child is not None:
        scale_child(*(int(v) for v in args.scale_child.split(",")))
        return
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    SIZE.update(SIZES[mode])
    if args.scale_sizes:
        SIZE["scale"] = (tuple(int(float(v)) for v in args.scale_sizes.split(",")), *SIZE["scale"][1:])
    started = time.perf_counter()
    print(
        f"edgefl benchmarks{'' if mode == 'full' else f' ({mode})'}: torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads (OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}), "
        f"{os.cpu_count()} cores, {platform.processor() or platform.machine()}, load average {load_average()}"
        + (f", code of {TREE}" if TREE != ROOT else ""),
        flush=True,
    )
    print(f"host speed: {host_speed()}", flush=True)
    if mode == "smoke":
        print(
            "smoke mode: tiny sizes, to check that every benchmark runs; the numbers and OK/MISS measure nothing",
            flush=True,
        )
    wanted = (
        args.only or "linear,cnn,engine,async,scale,reprice,quickstart" + (",fig4" if mode == "smoke" else "")
    ).split(",")
    if "linear" in wanted:
        bench_linear()
    if "cnn" in wanted:
        bench_cnn()
    if "engine" in wanted:
        bench_engine()
    if "async" in wanted:
        bench_async()
    if "scale" in wanted:
        bench_scale(args.threads, args.scale_base)
    if "reprice" in wanted:
        bench_reprice()
    if "fig4" in wanted:
        bench_figure4(
            1 if mode == "smoke" else args.fig4_seeds,
            1 if mode == "smoke" else args.workers,
            smoke=mode == "smoke",
            overrides=tuple(args.fig4_set),
        )
    if "quickstart" in wanted:
        bench_quickstart()
    print(f"done in {time.perf_counter() - started:.0f} s; load average {load_average()}", flush=True)


if __name__ == "__main__":
    main()
