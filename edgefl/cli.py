"""The ``edgefl`` command line.

    edgefl [-v|-q] run SCENARIO [--set key=value ...] [--out DIR] [--target METRIC=VALUE] [--plots] [--format png|pdf|svg]

User mistakes (bad scenario, missing data) print one clear message and exit with code 2,
without a traceback and without writing anything. An exception raised by a plug-in (the user's own
code named in the scenario: edgefl.plugins) is named as the plug-in's: exit code 4, the traceback
with -v. Anything else that goes wrong is a bug of edgefl: one line ("internal error: ..."), exit
code 70 (EX_SOFTWARE), the traceback with -vv.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import traceback
from pathlib import Path

# Before torch loads: idle OpenMP threads sleep instead of spinning. On a machine whose cores
# are shared (other runs, sweep workers), spinning threads slowed runs up to 10x in our
# measurements (docs/performance.md). A value set by the user wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from edgefl import __version__, logs  # noqa: E402
from edgefl.collector import freeze_at_exit, freeze_process  # noqa: E402
from edgefl.errors import UserError  # noqa: E402  (also known as edgefl.cli.UserError)
from edgefl.figures import DEFAULT_FORMAT, add_format_argument  # noqa: E402

EXIT_USAGE = 2
EXIT_INTERNAL = 70  # sysexits.h EX_SOFTWARE: a bug of edgefl, not a user mistake
EXIT_DIVERGED = 3  # the run stopped at a non-finite model or loss (outputs up to the last finite round)
log = logs.get_logger(__name__)


def _add_run(sub) -> None:
    p = sub.add_parser("run", help="co-simulate one scenario", description="Co-simulate one scenario file.")
    p.add_argument("scenario", type=Path, help="scenario TOML file, e.g. scenarios/quickstart.toml")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a scenario key, e.g. --set network.snr_db=5 (repeatable)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="results folder (default: results/<scenario name>); "
        "new, empty, or an earlier run's (edgefl replaces only what it wrote)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace --out with everything in it even if edgefl did not "
        "write it (never /, the home or the current folder)",
    )
    figures = p.add_mutually_exclusive_group()
    figures.add_argument(
        "--plots",
        action="store_true",
        help="also draw the run's figures (docs/run-plots.md; about 2 s more); later, edgefl plot OUT draws them "
        "from the results folder",
    )
    figures.add_argument("--no-plots", action="store_true", help="draw no figures (the default; for older scripts)")
    add_format_argument(p)
    p.set_defaults(plot_format=None)  # --format F asks for the figures in F: drawn as with --plots
    p.add_argument(
        "--resume",
        action="store_true",
        help="go on from the checkpoint a killed run left beside --out "
        "(run.checkpoint_every); the results are identical to an uninterrupted run's",
    )
    p.add_argument(
        "--target",
        action="append",
        default=[],
        metavar="METRIC=VALUE",
        help="report rounds, energy and time to this target in summary.json, e.g. acc_worst=0.8 (repeatable); "
        "the energy is the committed energy at that round (booked + radio tails still to run, docs/model.md §8), "
        "the booked one beside it",
    )
    p.set_defaults(func=cmd_run)


def _add_scenarios(sub) -> None:
    p = sub.add_parser(
        "scenarios",
        help="list the scenarios shipped with edgefl, or print one",
        description="Without a name: the scenarios shipped with edgefl (usable by name: edgefl run "
        "quickstart). With a name: its file, e.g. edgefl scenarios quickstart > my.toml.",
    )
    p.add_argument("name", nargs="?", default=None, help="a shipped scenario to print")
    p.set_defaults(func=cmd_scenarios)


def cmd_scenarios(args) -> int:
    from edgefl import shipped_scenarios as shipped

    if args.name is None:
        names = shipped.names()
        width = max(map(len, names))
        for name in names:
            print(f"{name:<{width}}  {shipped.describe(name)}")
        print(f"(in {shipped.folder()})")
        return 0
    try:
        print(shipped.path(args.name).read_text(encoding="utf-8"), end="")
    except FileNotFoundError as exc:
        raise UserError(str(exc)) from None
    return 0


def cmd_run(args) -> int:
    from edgefl.data import DataError
    from edgefl.results import check_target

    scenario = load(args.scenario, args.overrides)
    from edgefl.runner import simulate, write_results  # after the scenario is valid: a mistake is told sooner

    settle_imports()

    out = args.out or Path("results") / Path(args.scenario).stem
    check_target(out, args.force)  # before the work: a folder in the way is an error now, not after the run
    from edgefl.target import parse_target

    targets = [parse_target(text) for text in args.target]
    log.info(
        "%s: %s on %s, %d clients, %d rounds, engine %s, controller %s",
        args.scenario,
        scenario.algorithm.name,
        scenario.data.name,
        scenario.data.num_clients,
        scenario.run.rounds,
        scenario.run.engine,
        scenario.control.name,
    )
    every = scenario.run.checkpoint_every
    args.on_interrupt = f"nothing was written to {out} (a results folder is written only once its run completes)" + (
        f"; the checkpoint of the last multiple of {every} rounds is kept: rerun the same command "
        "with --resume to go on from it"
        if every
        else ""
    )
    try:
        result = simulate(scenario, out, resume=args.resume, progress=not args.quiet, targets=targets)
    except DataError as exc:  # e.g. data.dir exists but holds no dataset files
        raise UserError(f"{args.scenario}: {exc}") from None
    except (MemoryError, RuntimeError, ValueError) as exc:
        if not is_out_of_memory(exc):
            raise
        raise UserError(
            f"{args.scenario}: the run needs more memory than this machine has ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0][:120]}); reduce what sets its size: data.num_clients, the samples "
            "per client, the model's size (model.hidden, the data's dimension), algorithm.batch_size or "
            "algorithm.clients_per_round"
        ) from None
    log.info("writing results to %s", out)
    plots = (args.plots or args.plot_format is not None) and not args.no_plots
    plot_format = args.plot_format or DEFAULT_FORMAT
    write_results(result, out, plots=plots, force=args.force, plot_format=plot_format)
    final = result.summary["final"]
    energy = result.summary["energy_by_category_j"]
    ran = result.summary["rounds_run"]
    rounds = f"{ran} rounds" if ran == scenario.run.rounds else f"{ran} of {scenario.run.rounds} rounds"
    print(
        f"{scenario.algorithm.name}: {rounds}, N={scenario.data.num_clients}, "
        f"m={scenario.algorithm.clients_per_round}, tau={scenario.algorithm.local_steps}, "
        f"controller {scenario.control.name}"
    )
    if final.get("acc_mean") is not None:
        print(f"  accuracy: mean {final['acc_mean']:.4f}, worst {final['acc_worst']:.4f}, std {final['acc_std']:.4f}")
    print(
        f"  energy: {result.summary['energy_j']:.4g} J ("
        + ", ".join(f"{k} {v:.3g}" for k, v in energy.items())
        + f"); simulated time {result.summary['sim_time_s']:.4g} s; wall {result.summary['wall_time_s']:.1f} s"
    )
    for t in result.summary.get("targets", []):
        print(
            f"  target {t['target']}: "
            + (
                f"round {t['rounds']}, {t['energy_j']:.4g} J committed ({t['booked_energy_j']:.4g} J booked), "
                f"{t['sim_time_s']:.4g} s"
                if t["reached"]
                else "not reached"
            )
        )
    if result.summary.get("stopped"):
        print(f"  {result.summary['stopped']}")
    arrived, missed = result.summary["uploads_arrived"], result.summary["uploads_missed"]
    if missed > arrived:
        log.warning(
            "%d of %d uploads were cut or lost (deadline, outage, devices offline or failing): check "
            "network.deadline_s and the link budget",
            missed,
            arrived + missed,
        )
    print(
        f"results in {out}/ (metrics.csv, clients.csv, events.csv, summary.json, scenario.toml"
        + (f", *.{plot_format})" if plots else f"); figures: edgefl plot {out}")
    )
    if result.summary["status"] == "diverged":
        print(f"edgefl: {result.summary['diverged']}", file=sys.stderr)
        return EXIT_DIVERGED
    return 0


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is numpy's or torch's way of saying an allocation is too large for this machine."""
    text = str(exc)
    return isinstance(exc, MemoryError) or any(
        s in text
        for s in (
            "Maximum allowed dimension exceeded",
            "can't allocate memory",
            "not enough memory",
            "out of memory",
            "array is too big",
        )
    )


_OWN_PROCESS = False  # main() without arguments: the `edgefl` command or `python -m edgefl`, a process of its own


def settle_imports() -> None:
    """In a process of its own (:func:`main` without arguments), once a command's modules are imported: the objects
    allocated so far (torch's and edgefl's modules, about 300,000, alive as long as the process) are moved out of
    the garbage collector's reach (gc.freeze: edgefl.collector.freeze_process), and the collector, off since main
    started, is turned on again.
    Each full collection scans every tracked object: during the imports and the run, the collections cost about
    0.6 s of the quickstart's 2.7 s of CPU (docs/performance.md, "Start-up"). The results are the same (nothing
    in edgefl depends on when garbage is collected). main([...]) called from Python leaves the collector alone."""
    global _OWN_PROCESS
    if _OWN_PROCESS:
        _OWN_PROCESS = False
        freeze_process()
        gc.enable()


def load(path: Path, overrides: list[str]):
    """Load and validate a scenario (a mistake: a UserError, ScenarioError or DataError)."""
    from edgefl.scenario import load_scenario

    return load_scenario(path, overrides)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="edgefl", description="Co-simulator for federated learning over wireless edge networks."
    )
    parser.add_argument("--version", action="version", version=f"edgefl {__version__}")
    logs.add_arguments(parser, top_level=True)
    sub = parser.add_subparsers(dest="command", required=True)
    _add_run(sub)
    _add_scenarios(sub)
    for register in _extra_commands():
        register(sub)
    for command in sub.choices.values():
        logs.add_arguments(command)
    return parser


def _extra_commands():
    """Sub-commands defined in other modules (sweep, compare, optimal-tau, plot): their arguments, imported when
    the parser is built (`import edgefl.cli` stays cheap); their code, which loads torch (after the
    OMP_WAIT_POLICY default above) and scipy, only when one of them runs (:func:`_command`)."""
    from edgefl.sweeps.arguments import register_commands

    return [register_commands]


def _command(args):
    """The function of the command in ``args``: a sweep command names its function in edgefl.sweeps.cli
    (edgefl.sweeps.arguments), imported now, so that `edgefl run` never loads that module."""
    if not isinstance(args.func, str):
        return args.func
    from edgefl.sweeps import cli as sweep_commands

    return getattr(sweep_commands, args.func)


def main(argv: list[str] | None = None) -> int:
    global _OWN_PROCESS
    if argv is None and gc.isenabled():  # the command: no collection until its modules are imported (settle_imports)
        _OWN_PROCESS = True
        gc.disable()
        freeze_at_exit()  # and none as the process ends (edgefl.collector)
    try:
        return _main(argv)
    finally:
        settle_imports()


def _main(argv: list[str] | None) -> int:
    from edgefl.plugins import PluginError, faults_named

    parser = build_parser()
    args = parser.parse_args(argv)
    logs.configure(args.verbose, args.quiet)
    try:
        with faults_named():  # an exception raised in a plug-in's code: a PluginError naming it
            command = _command(args)
            if command is not cmd_run:  # `run` settles after its own imports, once the scenario is valid
                settle_imports()
            return int(command(args) or 0)
    except UserError as exc:  # the one root of the user's faults (edgefl.errors)
        if isinstance(exc, PluginError) and args.verbose >= 1 and exc.traceback_text:
            print(exc.traceback_text, file=sys.stderr, end="")
        print(f"edgefl: error: {exc}", file=sys.stderr)
        return getattr(exc, "exit_code", EXIT_USAGE)
    except KeyboardInterrupt:  # the command says what it kept (args.on_interrupt, set before its long work)
        kept = getattr(args, "on_interrupt", None)
        print("edgefl: interrupted" + (f": {kept}" if kept else ""), file=sys.stderr)
        return 130
    except Exception as exc:  # a bug of edgefl: one line, the traceback on request
        if args.verbose >= 2:
            traceback.print_exc()
        where = "" if args.verbose >= 2 else " (run with -vv for the traceback)"
        print(
            f"edgefl: internal error: {type(exc).__name__}: {exc}; please report it with the scenario{where}",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
