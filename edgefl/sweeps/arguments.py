"""The arguments of the sweep sub-commands (registered by edgefl.cli), apart from the commands themselves
(:mod:`edgefl.sweeps.cli`): building the parser imports neither torch nor scipy, so that ``edgefl run`` and a
scenario mistake are answered without loading them. Each sub-command's ``func`` is the name of its function in
:mod:`edgefl.sweeps.cli`, which edgefl.cli imports only when a sweep command runs.

edgefl sweep SCENARIO [--grid key=v1,v2,...]... [--seeds K] [--out DIR] [--set key=value]...
                      [--workers N] [--backend local|ray [--address ADDR]] [--force] [--quiet]
edgefl compare SCENARIO --algorithms A,B,... [--seeds K] [--target METRIC=VALUE] [--out DIR] [--no-plots]
edgefl optimal-tau DIR --target acc_worst=0.80 [--window 5] [--confidence 0.95] [--out DIR] [--no-plots]
edgefl plot RUN [--out DIR] [--format F]  (the figures of a run's results folder)
edgefl plot DIR [--metric acc_worst] [--target acc_worst=0.80] [--window 5] [--at key=value]... [--out DIR]

compare, optimal-tau and plot draw their figures in --format png (default), pdf or svg (edgefl.figures).
"""

from __future__ import annotations

from pathlib import Path

from edgefl.figures import add_format_argument
from edgefl.sweeps.jobs import BACKENDS
from edgefl.target import DEFAULT_WINDOW


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
    p.set_defaults(func="cmd_sweep")

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
    p.set_defaults(func="cmd_compare")

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
    p.set_defaults(func="cmd_optimal_tau")

    p = sub.add_parser(
        "plot",
        help="the figures of a run, or accuracy versus energy per τ and the Pareto front of a sweep",
        description="Of a run's results folder: the figures `edgefl run --plots` draws (docs/run-plots.md). Of a "
        "sweep: accuracy versus cumulative energy per τ (and per algorithm), and the Pareto front of energy "
        "versus rounds-to-target (needs --target).",
    )
    p.add_argument(
        "dir", type=Path, help="a finished run's results folder, or a finished sweep folder (with results.csv)"
    )
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
    p.set_defaults(func="cmd_plot")
