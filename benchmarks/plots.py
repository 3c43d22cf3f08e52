"""What the plots cost in a 10,000-client run (issue 13, item 6: plotting under 10 % of the run).

    .venv/bin/python benchmarks/plots.py              # ~1.5 minutes on 2 cores (the run: 25-35 s idle)
    .venv/bin/python benchmarks/plots.py --repeat 9   # more repeats of the writing (medians)
    .venv/bin/python benchmarks/plots.py --smoke      # 100 clients, 3 rounds, one repeat: checks that it runs
                                                      # (tests/test_benchmarks.py); the numbers measure nothing

Runs scenarios/quickstart.toml with ``data.num_clients=10000, algorithm.clients_per_round=100,
run.rounds=50`` once (edgefl.runner.Simulation, progress off), then, in the same process:

- imports edgefl.plots (matplotlib, pyplot): ``edgefl run`` imports it only to draw, so every run that
  plots pays it once;
- the first plot_run (cold: fonts loaded, first figure);
- write_results without plots and with plots, alternately (``--repeat`` times each), and plot_run alone
  (its wall and CPU time, and per figure): medians.

Plotting = the import + the median plot_run; the share is plotting over the whole run (simulation +
writing without plots + plotting). The machine is shared: the writes are interleaved so that load from
other processes hits both alike; the load average is printed with the results.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as benchmarks/run.py

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from edgefl.runner import Simulation, write_results  # noqa: E402
from edgefl.scenario import load_scenario  # noqa: E402

OVERRIDES = ["data.num_clients=10000", "algorithm.clients_per_round=100", "run.rounds=50"]
SMOKE_OVERRIDES = ["data.num_clients=100", "algorithm.clients_per_round=10", "run.rounds=3"]
TARGET = 0.10


def load_average() -> str:
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def median(values) -> float:
    return float(statistics.median(values))


def per_figure(plot_run, result, out: Path) -> dict[str, float]:
    """CPU time of each figure of one plot_run (less sensitive than wall time to other processes): from the
    end of the previous savefig (or the start) to the end of its own (building, layout, drawing, PNG)."""
    from matplotlib.figure import Figure

    times: dict[str, float] = {}
    savefig = Figure.savefig
    last = [time.process_time()]

    def timed(fig, fname, *args, **kwargs):
        out_ = savefig(fig, fname, *args, **kwargs)
        now = time.process_time()
        times[Path(str(fname)).name] = now - last[0]
        last[0] = now
        return out_

    Figure.savefig = timed
    try:
        plot(plot_run, result, out)
    finally:
        Figure.savefig = savefig
    return times


def plot(plot_run, result, out: Path) -> None:
    plot_run(
        out,
        result.metrics,
        result.clients,
        title=result.scenario.title(),
        battery=result.battery,
        events=result.events,
        positions=result.positions,
        scenario=result.scenario,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="writes with and without plots, each (default 5)")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help=f"{', '.join(SMOKE_OVERRIDES)} and one repeat: checks that it runs; measures nothing",
    )
    args = parser.parse_args()
    overrides = SMOKE_OVERRIDES if args.smoke else OVERRIDES
    if args.smoke:
        args.repeat = 1
    matplotlib_loaded = "matplotlib" in sys.modules
    print(f"edgefl plots benchmark: {os.cpu_count()} cores, load average {load_average()}", flush=True)
    if args.smoke:
        print("smoke mode: a tiny run, to check that the benchmark runs; the numbers and OK/MISS measure nothing")

    scenario = load_scenario(ROOT / "scenarios" / "quickstart.toml", overrides)
    started, cpu = time.perf_counter(), time.process_time()
    result = Simulation(scenario).run(progress=False)
    run_s, run_cpu = time.perf_counter() - started, time.process_time() - cpu
    print(
        f"run      quickstart, {', '.join(overrides)}: {run_s:.2f} s (CPU {run_cpu:.2f} s, all threads) "
        f"({len(result.events):,} events, {len(result.clients):,} clients)",
        flush=True,
    )

    started, cpu = time.perf_counter(), time.process_time()
    from edgefl.plots import plot_run

    import_s, import_cpu = time.perf_counter() - started, time.process_time() - cpu
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "cold").mkdir()
        started = time.perf_counter()
        plot(plot_run, result, tmp / "cold")
        cold_s = time.perf_counter() - started

        write = {False: [], True: []}
        alone, alone_cpu = [], []
        figures = defaultdict(list)
        for i in range(args.repeat):
            for plots in (False, True) if i % 2 == 0 else (True, False):
                started = time.perf_counter()
                write_results(result, tmp / f"out-{plots}", plots=plots, force=True)
                write[plots].append(time.perf_counter() - started)
            out = tmp / f"plots-{i}"
            out.mkdir()
            started, cpu = time.perf_counter(), time.process_time()
            plot(plot_run, result, out)
            alone.append(time.perf_counter() - started)
            alone_cpu.append(time.process_time() - cpu)
            out = tmp / f"figures-{i}"
            out.mkdir()
            for name, seconds in per_figure(plot_run, result, out).items():
                figures[name].append(seconds)

    without, with_ = median(write[False]), median(write[True])
    plot_s = median(alone)
    plotting = import_s + plot_s
    whole = run_s + without + plotting
    share = plotting / whole
    print(
        f"import   edgefl.plots (matplotlib, pyplot): {import_s:.2f} s (CPU {import_cpu:.2f} s)"
        + (" (matplotlib was already imported)" if matplotlib_loaded else "")
    )
    print(
        f"plot     first plot_run (cold) {cold_s:.2f} s | plot_run median {plot_s:.2f} s "
        f"(CPU {median(alone_cpu):.2f} s) over {args.repeat}"
    )
    print("figures  CPU s, medians: " + ", ".join(f"{name} {median(v):.3f}" for name, v in figures.items()))
    print(
        f"write    write_results without plots {without:.2f} s | with plots {with_:.2f} s "
        f"(plots add {with_ - without:.2f} s)"
    )
    print(
        f"share    plotting (import + plot_run) {plotting:.2f} s of the whole run {whole:.2f} s "
        f"(run {run_s:.2f} + writing {without:.2f} + plotting {plotting:.2f}): {100 * share:.1f} % "
        f"(target < {100 * TARGET:.0f} %) {'OK' if share < TARGET else 'MISS'}"
    )
    print(f"done; load average {load_average()}", flush=True)


if __name__ == "__main__":
    main()
