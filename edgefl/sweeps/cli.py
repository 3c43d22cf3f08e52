"""The sweep sub-commands: ``edgefl sweep | compare | optimal-tau | plot``. Their arguments and usage are in
:mod:`edgefl.sweeps.arguments`; edgefl.cli imports this module only when one of them runs."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Callable

from edgefl.errors import UserError
from edgefl.results import atomic_write_csv, atomic_write_text, marker_kind, open_folder
from edgefl.sweeps import compare as comparison
from edgefl.sweeps import jobs
from edgefl.sweeps.analysis import format_report, optimal_tau, per_channel_rows, per_tau_rows, read_results
from edgefl.sweeps.common import SWEEP_WORKER_MODULES, SweepError
from edgefl.sweeps.folder import read_sweep
from edgefl.sweeps.store import POINTS_DIR, load_manifest
from edgefl.target import DEFAULT_WINDOW, parse_target


def _workers_started_early(command: Callable[[Any], int]) -> Callable[[Any], int]:
    """``command(args)`` (a sweep's) with its pool's workers made ready while it plans, and their fork server ended
    however the command ends (a refused plan, a failed or interrupted run): edgefl.sweeps.jobs.workers_started_early,
    for a local pool of 2 workers or more."""

    @functools.wraps(command)
    def run(args) -> int:
        with jobs.workers_started_early(args.workers, getattr(args, "backend", "local"), SWEEP_WORKER_MODULES):
            return command(args)

    return run


@_workers_started_early
def cmd_sweep(args) -> int:
    from edgefl.sweeps.plan import plan_sweep  # (here: optimal-tau and plot need none of planning's imports)

    out = args.out or Path("results") / f"{args.scenario.stem}-sweep"
    plan = plan_sweep(args.scenario, args.overrides, args.grid, args.seeds)
    from edgefl.sweeps.run import run_sweep  # after the plan: a scenario mistake is told before torch loads

    args.on_interrupt = _kept_on_interrupt(out)
    summary = run_sweep(
        plan,
        out,
        workers=args.workers,
        backend=args.backend,
        address=args.address,
        force=args.force,
        progress=not args.quiet,
    )
    shape = " x ".join(f"{len(v)} {k}" for k, v in plan.grid.items()) or "no grid"
    print(
        f"sweep: {summary.points} points ({shape}; {len(plan.seeds)} seed(s)): {summary.computed} computed now, "
        f"{summary.reused} already done; {summary.repriced} re-priced, {summary.cosimulated} co-simulated; "
        f"{summary.trainings} learning runs now, {plan.num_trainings} for the whole sweep; {summary.wall_s:.1f} s"
    )
    for note in summary.notes:
        print(note)
    print(f"results in {summary.results}")
    return 0


def _kept_on_interrupt(out: Path) -> str:
    """What `edgefl: interrupted` adds for a sweep (edgefl.cli.main)."""
    return (
        f"the finished sweep points are kept in {out / POINTS_DIR}; rerun the same command to compute the rest "
        "(nothing finished is computed again)"
    )


def _output_folder(out: Path, given: bool) -> Path:
    """The folder optimal-tau or plot writes into, made ready by the ownership rule (edgefl.results.claim): a folder
    edgefl wrote, or a new or empty one; ``given``: named by --out (else the command's default)."""
    open_folder(out, "analysis", option="--out" if given else "", force_option=False)
    return out


@_workers_started_early
def cmd_compare(args) -> int:
    from edgefl.sweeps.plan import plan_sweep

    out = args.out or Path("results") / f"{args.scenario.stem}-compare"
    names = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    if not names:
        raise UserError("--algorithms: expected a comma-separated list, e.g. --algorithms fedavg,fedprox")
    target = parse_target(args.target) if args.target else None
    plan = plan_sweep(args.scenario, args.overrides, [f"algorithm.name={','.join(names)}"], args.seeds)
    from edgefl.sweeps.run import run_sweep  # after the plan: a scenario mistake is told before torch loads

    settings = {name: comparison.own_settings(plan.base, name) for name in names}
    args.on_interrupt = _kept_on_interrupt(out)
    written: list[Path] = []
    reports: list[str] = []
    folder = comparison.report_folder(out, target)  # one per target, as optimal-tau's

    def summarise(summary) -> None:  # under the folder's lock, as the sweep (store.LOCKED_FILES)
        _, rows = read_results(summary.results)
        outcomes = comparison.compare(rows, target)
        reports.append(comparison.format_report(outcomes, target, DEFAULT_WINDOW, 0.95, settings))
        open_folder(folder, "analysis", force_option=False)  # the ownership rule (edgefl.results.claim)
        atomic_write_csv(folder / "compare.csv", *comparison.table_rows(outcomes, settings))
        atomic_write_text(folder / "compare.txt", reports[0])
        written.extend([folder / "compare.csv", folder / "compare.txt"])
        if target is not None and not args.no_plots:
            figure = folder / f"compare.{args.plot_format}"
            comparison.plot(outcomes, target, figure, scenario=plan.base)
            written.append(figure)

    summary = run_sweep(plan, out, workers=args.workers, force=args.force, progress=not args.quiet, then=summarise)
    print(reports[0], end="")
    for note in summary.notes:
        print(note)
    print("wrote " + ", ".join(map(str, written)))
    return 0


def target_folder(sweep_dir: Path, target: str, window: int | None, confidence: float = 0.95) -> Path:
    """Where an analysis for one target goes by default: ``<sweep>/optimal-tau_<metric>=<value>``,
    with ``_w<window>`` / ``_c<confidence>`` when not the defaults, so that a second target (or
    window) never overwrites the first."""
    name = f"optimal-tau_{parse_target(target)}"
    if window is not None and window != DEFAULT_WINDOW:
        name += f"_w{window}"
    if confidence != 0.95:
        name += f"_c{confidence:g}"
    return Path(sweep_dir) / name


def cmd_optimal_tau(args) -> int:
    def analyse():
        target = parse_target(args.target)
        keys, header, rows = read_sweep(args.dir, metrics=[target.metric])  # the rows: the columns it reads
        return optimal_tau(rows, keys, target, args.window, args.confidence, columns=header)

    result = analyse()
    report, channel_table, tau_table = format_report(result), per_channel_rows(result), per_tau_rows(result)
    out = _output_folder(
        args.out or target_folder(args.dir, args.target, args.window, args.confidence), args.out is not None
    )
    atomic_write_csv(out / "optimal_tau.csv", *channel_table)
    atomic_write_csv(out / "tau_energy.csv", *tau_table)
    atomic_write_text(out / "optimal_tau.txt", report)
    print(report, end="")
    written = [out / "optimal_tau.csv", out / "tau_energy.csv", out / "optimal_tau.txt"]
    if not args.no_plots:
        from edgefl.sweeps.plots import plot_energy_curves, plot_energy_split, plot_tau_heatmap  # lazy: matplotlib

        fmt = args.plot_format
        heatmap = plot_tau_heatmap(result, out / f"tau-heatmap.{fmt}")
        if heatmap is None:
            print(
                "(no heatmap: it needs two channel keys with two values or more in the grid besides "
                "algorithm.local_steps, e.g. network.snr_db and network.bandwidth_mhz)"
            )
        written += [
            p
            for p in (
                heatmap,
                plot_energy_curves(result, out / f"tau-energy-curves.{fmt}"),
                plot_energy_split(result, out / f"tau-energy-split.{fmt}"),
            )
            if p is not None
        ]
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


def _channel_filter(at: list[str], keys: list[str]):
    wanted = {}
    for text in at:
        from edgefl.sweeps.plan import parse_grid  # (only for --at: its key check needs the scenario schema)

        key, values = parse_grid(text, option="--at")
        if key not in keys:
            raise SweepError(f"--at {text!r}: {key} is not a grid key of this sweep ({', '.join(keys)})")
        wanted[key] = values
    return wanted


def cmd_plot(args) -> int:
    if marker_kind(args.dir) == "run":  # a run's results folder: the figures `edgefl run --plots` draws
        return _plot_run(args)

    def prepare():
        target_metric = args.target.partition("=")[0].strip() if args.target else ""  # parse_target's, later
        drawn = args.metric or target_metric or "acc_worst"
        keys, header, rows = read_sweep(args.dir, metrics=[drawn, target_metric])  # the rows: the columns it reads
        if args.metric is None:  # the target's metric: `--target acc_mean=0.8` draws acc_mean
            args.metric = parse_target(args.target).metric if args.target else "acc_worst"
        if args.metric not in header:
            raise SweepError(f"--metric {args.metric!r}: no such column in results.csv")
        wanted = _channel_filter(args.at, keys)
        rows = [r for r in rows if all(r[k] in v for k, v in wanted.items())]
        if not rows:
            raise SweepError("--at: no point of the sweep matches")
        result = None
        if args.target:
            result = optimal_tau(rows, keys, parse_target(args.target), args.window, columns=header)
        return keys, rows, wanted, result

    keys, rows, wanted, result = prepare()
    from edgefl.sweeps.plots import channel_panel_keys, plot_accuracy_energy, plot_pareto  # matplotlib now

    out = _output_folder(args.out or args.dir, args.out is not None)
    if result is not None:  # the Pareto front depends on the target: beside optimal-tau's outputs for it
        pareto_dir = _output_folder(args.out or target_folder(args.dir, args.target, args.window), args.out is not None)
    panels = None
    if wanted:  # every matching channel point, up to 6 panels
        panels = list(dict.fromkeys(tuple(r[k] for k in channel_panel_keys(keys)) for r in rows))[:6]
    fmt = args.plot_format
    written = [plot_accuracy_energy(rows, keys, args.metric, out / f"tau-accuracy-energy.{fmt}", panels)]
    if result is not None:
        written.append(plot_pareto(result, pareto_dir / f"tau-pareto.{fmt}", panels, _sweep_algorithm(args.dir)))
    else:
        print("(no Pareto front: pass --target METRIC=VALUE, e.g. --target acc_worst=0.8)")
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


RUN_FILES = ("metrics.csv", "clients.csv", "events.csv", "scenario.toml")  # what `edgefl plot RUN` needs


def _plot_run(args) -> int:
    """`edgefl plot RUN`: the figures of a finished run, drawn from its results folder (edgefl.plots)."""
    given = [f"--{name}" for name in ("metric", "target") if getattr(args, name) is not None] + (
        ["--at"] if args.at else []
    )
    if given:
        raise UserError(f"{', '.join(given)}: for a sweep folder; {args.dir} holds a run's results (edgefl run)")
    missing = [name for name in RUN_FILES if not (args.dir / name).is_file()]
    if missing:
        raise UserError(f"{args.dir}: no {', '.join(missing)}; expected the --out folder of a finished `edgefl run`")
    from edgefl.plots import plot_results_folder  # matplotlib now

    out = _output_folder(args.out or args.dir, args.out is not None)
    written = plot_results_folder(args.dir, out, args.plot_format)
    print(f"wrote {len(written)} figures in {out}/: " + ", ".join(p.name for p in written))
    return 0


def _sweep_algorithm(folder: Path) -> str | None:
    """The algorithm of a sweep's scenario (sweep.json), None where the manifest does not say."""
    definition = load_manifest(folder).get("definition") or {}
    scenario = definition.get("scenario") if isinstance(definition, dict) else None
    algorithm = scenario.get("algorithm") if isinstance(scenario, dict) else None
    name = algorithm.get("name") if isinstance(algorithm, dict) else None
    return name if isinstance(name, str) else None
