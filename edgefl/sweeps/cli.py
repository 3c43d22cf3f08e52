"""Sub-commands for sweeps (registered by edgefl.cli):

edgefl sweep SCENARIO [--grid key=v1,v2,...]... [--seeds K] [--out DIR] [--set key=value]...
                      [--workers N] [--backend local|ray [--address ADDR]] [--force] [--quiet]
edgefl compare SCENARIO --algorithms A,B,... [--seeds K] [--target METRIC=VALUE] [--out DIR] [--no-plots]
edgefl optimal-tau DIR --target acc_worst=0.80 [--window 5] [--confidence 0.95] [--out DIR] [--no-plots]
edgefl plot DIR [--metric acc_worst] [--target acc_worst=0.80] [--window 5] [--at key=value]... [--out DIR]

compare, optimal-tau and plot draw their figures in --format png (default), pdf or svg (edgefl.figures).
"""

from __future__ import annotations

from pathlib import Path

from edgefl.errors import UserError
from edgefl.figures import add_format_argument
from edgefl.plugins import PluginError
from edgefl.results import atomic_write_csv, atomic_write_text, open_folder
from edgefl.sweeps import compare as comparison
from edgefl.sweeps.analysis import format_report, optimal_tau, per_channel_rows, per_tau_rows, read_results
from edgefl.sweeps.folder import read_sweep
from edgefl.sweeps.jobs import BACKENDS
from edgefl.sweeps.plan import SweepError, parse_grid, plan_sweep
from edgefl.sweeps.run import run_sweep, user_errors
from edgefl.sweeps.store import POINTS_DIR, load_manifest
from edgefl.target import DEFAULT_WINDOW, parse_target


def register_commands(sub) -> None:
    p = sub.add_parser(
        "sweep",
        help="run a scenario over a grid x seeds (resumable; channel points re-priced)",
        description="Run a scenario over a grid of keys x seeds. Points that differ only in the channel share "
        "one training (re-priced) where the channel cannot change who participates. Rerun the same "
        "command to resume.",
    )
    p.add_argument("scenario", type=Path, help="scenario TOML file")
    p.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2,...",
        help="values of one scenario key, e.g. --grid network.snr_db=0,10,20 (repeatable; adds to or "
        "replaces the file's [sweep.grid])",
    )
    p.add_argument(
        "--seeds",
        type=int,
        default=None,
        metavar="K",
        help="seeds per point: run.seed + 0..K-1 (default: [sweep] seeds, else 1)",
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a scenario key for every point (repeatable)",
    )
    p.add_argument("--out", type=Path, default=None, help="sweep folder (default: results/<scenario>-sweep)")
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="worker processes (default 1); with --backend ray and no --address, the CPUs of a local Ray",
    )
    p.add_argument(
        "--backend",
        "--executor",
        dest="backend",
        choices=BACKENDS,
        default="local",
        help="local: this process or a process pool; ray: one Ray task per learning run "
        "(pip install 'edgefl[ray]'; docs/scale.md)",
    )
    p.add_argument(
        "--address",
        default=None,
        metavar="ADDR",
        help="with --backend ray: a running Ray cluster, e.g. auto or ray://head:10001",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace a different sweep already in --out (values or seeds added to its grid need no "
        "--force), or a folder edgefl did not write (with everything in it)",
    )
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser(
        "compare",
        help="several algorithms on one scenario, K seeds: energy, time and rounds to a target",
        description="Run a scenario with each algorithm (a sweep over algorithm.name: resumable) and compare "
        "energy, simulated time and rounds to a target, with t-intervals over the seeds.",
    )
    p.add_argument("scenario", type=Path, help="scenario TOML file")
    p.add_argument("--algorithms", required=True, metavar="A,B,...", help="e.g. fedavg,fedprox,drdm")
    p.add_argument("--seeds", type=int, default=3, metavar="K", help="seeds per algorithm (default 3)")
    p.add_argument("--target", default=None, metavar="METRIC=VALUE", help="e.g. acc_worst=0.8")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a scenario key for every run (repeatable)",
    )
    p.add_argument("--out", type=Path, default=None, help="folder (default: results/<scenario>-compare)")
    p.add_argument("--workers", type=int, default=1, metavar="N", help="local worker processes (default 1)")
    p.add_argument(
        "--force",
        action="store_true",
        help="replace a different comparison already in --out, or a "
        "folder edgefl did not write (with everything in it)",
    )
    p.add_argument("--no-plots", action="store_true", help="tables only")
    add_format_argument(p)
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser(
        "optimal-tau",
        help="energy-optimal τ per channel point from a sweep",
        description="For each channel point of a sweep (grid keys other than algorithm.local_steps), the τ with "
        "the least energy to reach a target. Rounds-to-target = first evaluated round at which the "
        "metric and its centred moving average both reach the target.",
    )
    p.add_argument("dir", type=Path, help="a finished sweep folder (with results.csv)")
    p.add_argument("--target", required=True, metavar="METRIC=VALUE", help="e.g. acc_worst=0.80")
    p.add_argument(
        "--window",
        type=int,
        default=DEFAULT_WINDOW,
        help=f"moving-average window in rounds (default {DEFAULT_WINDOW}; 1 = raw)",
    )
    p.add_argument("--confidence", type=float, default=0.95, help="confidence of the t-intervals (default 0.95)")
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="where to write tables and figures (default: DIR/optimal-tau_METRIC=VALUE, plus _wN / _cX "
        "for a window or confidence other than the default)",
    )
    p.add_argument("--no-plots", action="store_true", help="tables only")
    add_format_argument(p)
    p.set_defaults(func=cmd_optimal_tau)

    p = sub.add_parser(
        "plot",
        help="accuracy versus energy per τ, and the Pareto front, of a sweep",
        description="Accuracy versus cumulative energy per τ (and per algorithm), and the Pareto front of energy "
        "versus rounds-to-target (needs --target).",
    )
    p.add_argument("dir", type=Path, help="a finished sweep folder (with results.csv)")
    p.add_argument(
        "--metric",
        default=None,
        help="metric on the y axis (default: the --target's metric, else acc_worst)",
    )
    p.add_argument("--target", default=None, metavar="METRIC=VALUE", help="for the Pareto front, e.g. acc_worst=0.8")
    p.add_argument(
        "--window",
        type=int,
        default=DEFAULT_WINDOW,
        help=f"moving-average window for rounds-to-target (default {DEFAULT_WINDOW})",
    )
    p.add_argument(
        "--at",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="only channel points with this grid value (repeatable), e.g. --at network.snr_db=0",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="where to write the figures (default: DIR, and tau-pareto beside optimal-tau's outputs "
        "for the target, DIR/optimal-tau_METRIC=VALUE)",
    )
    add_format_argument(p)
    p.set_defaults(func=cmd_plot)


def _user_errors(fn):
    """Run ``fn`` turning sweep/scenario/data mistakes into UserError (exit 2, no traceback)."""
    try:
        return fn()
    except PluginError:
        raise  # a plug-in's fault keeps its own exit code (edgefl.plugins)
    except user_errors() as exc:
        raise UserError(str(exc)) from None


def cmd_sweep(args) -> int:
    out = args.out or Path("results") / f"{args.scenario.stem}-sweep"
    plan = _user_errors(lambda: plan_sweep(args.scenario, args.overrides, args.grid, args.seeds))
    args.on_interrupt = _kept_on_interrupt(out)
    summary = _user_errors(
        lambda: run_sweep(
            plan,
            out,
            workers=args.workers,
            backend=args.backend,
            address=args.address,
            force=args.force,
            progress=not args.quiet,
        )
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


def cmd_compare(args) -> int:
    out = args.out or Path("results") / f"{args.scenario.stem}-compare"
    names = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    if not names:
        raise UserError("--algorithms: expected a comma-separated list, e.g. --algorithms fedavg,fedprox")
    target = _user_errors(lambda: parse_target(args.target)) if args.target else None
    plan = _user_errors(
        lambda: plan_sweep(args.scenario, args.overrides, [f"algorithm.name={','.join(names)}"], args.seeds)
    )
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

    summary = _user_errors(
        lambda: run_sweep(plan, out, workers=args.workers, force=args.force, progress=not args.quiet, then=summarise)
    )
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
        keys, _, rows = read_sweep(args.dir)
        return optimal_tau(rows, keys, target, args.window, args.confidence)

    result = _user_errors(analyse)
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
        key, values = parse_grid(text, option="--at")
        if key not in keys:
            raise SweepError(f"--at {text!r}: {key} is not a grid key of this sweep ({', '.join(keys)})")
        wanted[key] = values
    return wanted


def cmd_plot(args) -> int:
    from edgefl.sweeps.plots import channel_panel_keys, plot_accuracy_energy, plot_pareto  # lazy: matplotlib

    def prepare():
        keys, header, rows = read_sweep(args.dir)
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
            result = optimal_tau(rows, keys, parse_target(args.target), args.window)
        return keys, rows, wanted, result

    keys, rows, wanted, result = _user_errors(prepare)
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


def _sweep_algorithm(folder: Path) -> str | None:
    """The algorithm of a sweep's scenario (sweep.json), None where the manifest does not say."""
    definition = load_manifest(folder).get("definition") or {}
    scenario = definition.get("scenario") if isinstance(definition, dict) else None
    algorithm = scenario.get("algorithm") if isinstance(scenario, dict) else None
    name = algorithm.get("name") if isinstance(algorithm, dict) else None
    return name if isinstance(name, str) else None
