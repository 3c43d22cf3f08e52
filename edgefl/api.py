"""The Python API (docs/python-api.md): the CLI's commands as functions returning pandas DataFrames.

    import edgefl
    r = edgefl.run("scenarios/quickstart.toml", overrides={"run.rounds": 3})
    r.metrics.tail()          # one row per round
    r.plot("accuracy")        # a matplotlib Figure

    rows = edgefl.sweep("scenarios/energy-tau-sweep.toml", grid={"algorithm.local_steps": [5, 10]},
                        seeds=2, out="results/my-sweep")
    table = edgefl.optimal_tau("results/my-sweep", target="acc_worst=0.70")

Overrides are a dict of dotted keys, with Python values (``{"network.snr_db": 5, "algorithm.name": "drdm"}``);
user mistakes raise :class:`edgefl.scenario.ScenarioError` (or SweepError) with the same message the CLI prints.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, NamedTuple

import pandas as pd

import algorithms
from edgefl.deployment import cell_map_sites_m
from edgefl.figures import DEFAULT_FORMAT, check_format, save_figure
from edgefl.results import check_target
from edgefl.runner import RunResult, event_table, simulate, write_results
from edgefl.scenario import Scenario, ScenarioError, _drop_none, format_override, scenario_from_dict
from edgefl.scenario import load_scenario as _load
from edgefl.sweeps.plan import SweepError

PLOT_KINDS = (
    "accuracy",
    "energy",
    "accuracy-energy",
    "gantt",
    "energy-rounds",
    "energy-snr",
    "cell-map",
    "uploads-missed",
)
EVENT_PLOT_KINDS = PLOT_KINDS[3:]  # drawn by edgefl.run_plots from the run's events and clients (docs/run-plots.md)


def load_scenario(path: str | Path, overrides: Mapping[str, Any] | None = None) -> Scenario:
    """Read a scenario file, apply ``overrides`` (dotted keys -> values) and validate it (ScenarioError)."""
    with documented_errors(ScenarioError):
        _check_path(path, "path", ScenarioError)
        _check_mapping(overrides, "overrides", ScenarioError)
        return _load(path, dict(overrides or {}))


@dataclass
class Result:
    """One run: its tables as DataFrames, the summary and the scenario it ran."""

    scenario: Scenario
    metrics: pd.DataFrame  # metrics.csv: one row per round (rounds numbered from 1)
    clients: pd.DataFrame  # clients.csv: one row per client
    events: pd.DataFrame  # events.csv: every activity
    summary: dict
    battery: pd.DataFrame = field(default_factory=pd.DataFrame)  # battery.csv (devices with a battery)
    positions: pd.DataFrame = field(default_factory=pd.DataFrame)  # positions.csv (moving devices)
    raw: RunResult | None = field(default=None, repr=False)

    def save(
        self, out: str | Path, plots: bool | None = None, force: bool = False, plot_format: str | None = None
    ) -> Path:
        """Write the results folder, as ``edgefl run --out`` does: its figures only when asked, ``plots=True`` (as
        ``--plots``) or a ``plot_format``, png, pdf or svg (as ``--format``); ``force``: replace a folder edgefl
        did not write."""
        draw = plots if plots is not None else plot_format is not None
        fmt = check_format(plot_format or DEFAULT_FORMAT)  # ValueError with the known formats, before any writing
        return write_results(self.raw, Path(out), plots=draw, force=force, plot_format=fmt)

    def plot(self, kind: str = "accuracy", path: str | Path | None = None, format: str | None = None):
        """A matplotlib Figure: ``accuracy`` (mean, mean ± std and worst client over rounds) and
        ``accuracy-energy`` (the same against cumulative energy): the figures accuracy.png and
        accuracy_energy.png of `edgefl run`, drawn by the same function (edgefl.plots.draw_accuracy);
        ``energy`` (cumulative energy by category over rounds); or the plots of docs/run-plots.md: ``gantt``,
        ``energy-rounds``, ``energy-snr``, ``cell-map``, ``uploads-missed``. ``path``: also write it there, in
        ``format`` (png, pdf or svg; default: the suffix of ``path``), as `edgefl run --format` writes it; the
        figure stays open (returned)."""
        if kind not in PLOT_KINDS:
            raise ValueError(f"unknown plot kind {kind!r}; known: {', '.join(PLOT_KINDS)}")
        if path is not None:  # before the drawing: a wrong format costs nothing
            check_format(format if format is not None else Path(path).suffix.lstrip(".").lower())
        fig = self._event_plot(kind) if kind in EVENT_PLOT_KINDS else self._metrics_plot(kind)
        if path is not None:
            save_figure(fig, path, format, close=False)
        return fig

    def _metrics_plot(self, kind: str):
        import matplotlib.pyplot as plt

        from edgefl.run_plots import ENERGY_CATEGORIES, round_label

        title = self.scenario.title()
        asynchronous = algorithms.get(self.scenario.algorithm.name).asynchronous
        if kind in ("accuracy", "accuracy-energy"):  # the figures `edgefl run` writes, drawn by the same function
            from edgefl.plots import draw_accuracy

            metrics = self.raw.metrics if self.raw is not None else self.metrics.to_dict("records")
            return draw_accuracy(metrics, kind, title, asynchronous)
        m = self.metrics
        fig, ax = plt.subplots(figsize=(6, 4))
        categories = [c for c in ENERGY_CATEGORIES if f"{c.key}_energy_j" in m]
        ax.stackplot(
            m["round"],
            *[m[f"{c.key}_energy_j"] for c in categories],
            labels=[c.label for c in categories],
            colors=[c.color for c in categories],
        )
        ax.set(xlabel=round_label(asynchronous), ylabel="cumulative energy, all clients (J)")
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=8)
        fig.tight_layout()
        return fig

    def _event_plot(self, kind: str):
        from edgefl import run_plots

        raw = self.raw
        events = raw.events if raw is not None else self.events  # a DataFrame of events.csv works too
        clients = raw.clients if raw is not None else self.clients
        positions = raw.positions if raw is not None else self.positions
        metrics = raw.metrics if raw is not None else self.metrics.to_dict("records")
        title, net = self.scenario.title(), self.scenario.network
        asynchronous = algorithms.get(self.scenario.algorithm.name).asynchronous
        if kind == "gantt":
            fig = run_plots.draw_gantt(
                events, title, deadline_s=net.deadline_s, round_ends=run_plots.round_ends(metrics), chains=asynchronous
            )
        elif kind == "energy-rounds":
            fig = run_plots.draw_energy_rounds(events, title, len(metrics), asynchronous=asynchronous)
        elif kind == "uploads-missed":
            fig = run_plots.draw_uploads_missed(events, title, len(metrics), asynchronous=asynchronous)
        elif kind == "energy-snr":
            fig = run_plots.draw_energy_snr(clients, title)
        else:
            sites_m = cell_map_sites_m(net)
            fig = run_plots.draw_cell_map(
                clients, positions, net.cell_radius_m, title, sites_m=sites_m, sectors=net.sectors
            )
        if fig is None:
            raise ValueError(
                f"no {kind} plot for this run: "
                + (
                    "its devices have no distance (the scenario gives the SNR)"
                    if kind == "cell-map"
                    else "it has no events or clients to draw"
                )
            )
        return fig


def run(
    scenario: str | Path | Scenario,
    overrides: Mapping[str, Any] | None = None,
    out: str | Path | None = None,
    progress: bool = True,
    targets: list[str] | None = None,
    resume: bool = False,
) -> Result:
    """Co-simulate a scenario (a path or a loaded :class:`Scenario`, validated again here: a Scenario changed in
    Python is checked like a file); ``out``: also write the results folder there (None: nothing is written);
    ``targets`` (e.g. ``["acc_worst=0.8"]``): rounds, energy and time to each in ``summary["targets"]``. With
    ``run.checkpoint_every`` and ``out``, a checkpoint is saved beside ``out`` as the run goes; ``resume=True``
    goes on from it (as ``edgefl run --resume``). Errors: see the table in docs/python-api.md."""
    from edgefl.target import parse_target

    with documented_errors(ScenarioError):
        _check_path(scenario, "scenario", ScenarioError, Scenario)
        _check_mapping(overrides, "overrides", ScenarioError)
        _check_path(out, "out", ScenarioError, type(None))
        _check_texts(targets, "targets", "['acc_worst=0.8']", ScenarioError)
        _check_bool(progress, "progress", ScenarioError)
        _check_bool(resume, "resume", ScenarioError)
        if not isinstance(scenario, Scenario):
            scenario = load_scenario(scenario, overrides)
        elif overrides:
            raise ScenarioError("overrides apply to a scenario file; pass the path, or change the loaded Scenario")
        else:
            scenario = revalidated(scenario)
        parsed = [parse_target(t) for t in targets or []]
        if out is not None:
            check_target(Path(out))  # before the work: a folder in the way is an error now, not after the run
        result = simulate(
            scenario, Path(out) if out is not None else None, resume=resume, progress=progress, targets=parsed
        )
        event_columns, event_rows = event_table(result)
        frame = Result(
            scenario=scenario,
            metrics=pd.DataFrame(result.metrics),
            clients=pd.DataFrame(result.clients),
            events=pd.DataFrame(event_rows, columns=event_columns),
            summary=result.summary,
            battery=pd.DataFrame(result.battery),
            positions=pd.DataFrame(result.positions),
            raw=result,
        )
        if out is not None:
            frame.save(out)
    return frame


def sweep(
    scenario: str | Path,
    grid: Mapping[str, list] | None = None,
    seeds: int | None = None,
    out: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    workers: int = 1,
    backend: str = "local",
    address: str | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """``edgefl sweep``: every grid point × seed (resumable in ``out``); returns results.csv as a DataFrame.
    ``out=None`` is ``results/<scenario name>-sweep``, as on the command line: unlike a run, a sweep always
    has a folder (its points are saved as they finish, so an interrupted sweep resumes).
    ``backend="ray"`` runs the learning runs as Ray tasks (``address``: a cluster; docs/scale.md).
    With ``workers > 1`` the calling script needs ``if __name__ == "__main__":`` (docs/python-api.md)."""
    from edgefl.sweeps.common import SWEEP_WORKER_MODULES
    from edgefl.sweeps.jobs import workers_started_early
    from edgefl.sweeps.plan import plan_sweep
    from edgefl.sweeps.run import run_sweep

    with documented_errors(SweepError):
        refuse_unguarded_main(workers if isinstance(workers, int) else 1)
        _check_path(scenario, "scenario", SweepError)
        _check_mapping(grid, "grid", SweepError, "{'algorithm.local_steps': [5, 10]}")
        for key, values in (grid or {}).items():
            if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
                raise SweepError(f"grid[{key!r}]: expected a non-empty list of values, e.g. [5, 10], got {values!r}")
        if seeds is not None and (isinstance(seeds, bool) or not isinstance(seeds, int)):
            raise SweepError(f"seeds: expected an integer (seeds per grid point) or None, got {seeds!r}")
        _check_path(out, "out", SweepError, type(None))
        _check_mapping(overrides, "overrides", SweepError)
        if isinstance(workers, bool) or not isinstance(workers, int):
            raise SweepError(f"workers: expected an integer >= 1, got {workers!r}")
        _check_bool(progress, "progress", SweepError)
        path = Path(scenario)
        grids = [f"{key}={','.join(map(str, values))}" for key, values in (grid or {}).items()]
        with workers_started_early(workers, backend, SWEEP_WORKER_MODULES):  # as `edgefl sweep --workers N`
            plan = plan_sweep(path, [format_override(k, v) for k, v in (overrides or {}).items()], grids, seeds)
            summary = run_sweep(
                plan,
                Path(out) if out is not None else Path("results") / f"{path.stem}-sweep",
                workers=workers,
                backend=backend,
                address=address,
                progress=progress,
            )
        return pd.read_csv(summary.results)


class OptimalTauTables(NamedTuple):
    """The two tables of ``edgefl optimal-tau``, as DataFrames."""

    per_channel: pd.DataFrame  # optimal_tau.csv: one row per channel point (τ*, τ set, rounds and energy, CIs)
    per_tau: pd.DataFrame  # tau_energy.csv: one row per (channel point, τ): rounds and energy to target, CIs,
    # eligibility and the paired comparison with τ*


def optimal_tau(
    sweep_dir: str | Path, target: str, window: int | None = None, confidence: float = 0.95
) -> OptimalTauTables:
    """``edgefl optimal-tau`` on a finished sweep: ``(per_channel, per_tau)``, the tables optimal_tau.csv (τ*,
    the set of τ not significantly worse, rounds and energy to target with CIs, per channel point) and
    tau_energy.csv (every τ of every channel point). Writes nothing."""
    from edgefl.sweeps.analysis import optimal_tau as analyse
    from edgefl.sweeps.analysis import per_channel_rows, per_tau_rows
    from edgefl.sweeps.folder import read_sweep
    from edgefl.target import DEFAULT_WINDOW, parse_target

    with documented_errors(SweepError):
        _check_path(sweep_dir, "sweep_dir", SweepError)
        if not isinstance(target, str):
            raise SweepError(f"target: expected a text like 'acc_worst=0.8', got {target!r}")
        if window is not None and (isinstance(window, bool) or not isinstance(window, int)):
            raise SweepError(f"window: expected an integer >= 1 (rounds) or None, got {window!r}")
        if isinstance(confidence, bool) or not isinstance(confidence, (int, float)):
            raise SweepError(f"confidence: expected a number in (0, 1), got {confidence!r}")
        parsed = parse_target(target)
        keys, header, rows = read_sweep(Path(sweep_dir), metrics=[parsed.metric])
        result = analyse(rows, keys, parsed, DEFAULT_WINDOW if window is None else window, confidence, header)
        header, table = per_channel_rows(result)
        tau_header, tau_table = per_tau_rows(result)
    return OptimalTauTables(pd.DataFrame(table, columns=header), pd.DataFrame(tau_table, columns=tau_header))


# -- the errors the API raises (docs/python-api.md) ------------------------------------------------
@contextmanager
def documented_errors(kind: type[Exception]):
    """Only the documented exceptions leave the API: ScenarioError (run, load_scenario) or SweepError (sweep,
    optimal_tau) for a mistake in what is passed, with the CLI's message; PluginError for a plug-in's fault;
    OutputError and CheckpointError for an output folder or checkpoint edgefl will not use; WorkerDied for a
    sweep worker that died. Anything else is a bug of edgefl (and passes unchanged)."""
    from edgefl.checkpoint import CheckpointError
    from edgefl.errors import UserError, WorkerDied
    from edgefl.plugins import PluginError, plugin_fault
    from edgefl.results import OutputError

    try:
        yield
    except (PluginError, OutputError, CheckpointError, WorkerDied, ScenarioError, SweepError):
        raise
    except UserError as exc:
        raise kind(str(exc)) from None
    except (Exception, SystemExit) as exc:
        named = plugin_fault(exc)
        if named is None:
            raise
        raise named from exc


def revalidated(scenario: Scenario) -> Scenario:
    """A Scenario object checked again as a file is (it may have been changed in Python since it was loaded)."""
    import warnings

    with warnings.catch_warnings():  # pydantic warns when dumping a field changed to the wrong type
        warnings.simplefilter("ignore")
        raw = scenario.model_dump(mode="json", fallback=repr)
    # unset (None) keys are left out, as in a file; a whole section set to None stays, to be reported by name
    raw = {k: (v if v is None else _drop_none(v)) for k, v in raw.items()}
    return scenario_from_dict(raw, source="the Scenario passed to edgefl.run")


def refuse_unguarded_main(workers: int) -> None:
    """Refuse ``edgefl.sweep(..., workers > 1)`` called by a script without ``if __name__ == "__main__":``.
    Worker processes (forked from a fresh fork server, or spawned) import the main script again: an
    unguarded call would start the sweep again in every worker (which then found the folder locked and died).
    Checked in the script's process, from its source, before any worker starts; and, should a worker still
    import such a script, there too."""
    if _in_worker_importing_main():
        raise SweepError(
            UNGUARDED.format(
                where="a sweep worker process imported the main script, which runs edgefl.sweep() at import"
            )
        )
    if workers > 1:
        line = unguarded_main_line()
        if line is not None:
            raise SweepError(
                UNGUARDED.format(
                    where=f"{sys.modules['__main__'].__file__}, line {line}, calls "
                    'edgefl.sweep(workers > 1) outside `if __name__ == "__main__":`'
                )
            )


UNGUARDED = (
    '{where}: put the call under `if __name__ == "__main__":` (workers > 1 are fresh Python processes '
    "that import the main script, and would run the sweep again; docs/python-api.md)"
)


def _in_worker_importing_main() -> bool:
    """Whether this is a worker process running its main script's top-level code (multiprocessing names the
    main script ``__mp_main__`` in the processes it starts)."""
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals.get("__name__") == "__mp_main__":
            return True
        frame = frame.f_back
    return False


def unguarded_main_line() -> int | None:
    """The line of the main script's top-level code that led here, when it is not inside
    ``if __name__ == "__main__":``; None when it is, or when there is no script file (python -c, notebooks)."""
    import ast

    path = getattr(sys.modules.get("__main__"), "__file__", None)
    frame = sys._getframe()
    while frame is not None and not (
        frame.f_code.co_name == "<module>" and frame.f_globals.get("__name__") == "__main__"
    ):
        frame = frame.f_back
    if frame is None or not path or not str(path).endswith(".py"):
        return None
    line = frame.f_lineno
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None

    def is_main_test(test) -> bool:
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
            return False
        sides = [test.left, test.comparators[0]]
        return any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides) and any(
            isinstance(x, ast.Constant) and x.value == "__main__" for x in sides
        )

    guarded = any(
        isinstance(node, ast.If) and is_main_test(node.test) and node.lineno < line <= node.end_lineno
        for node in ast.walk(tree)
    )
    return None if guarded else line


def _check_path(value, name: str, kind: type[Exception], *also: type) -> None:
    if isinstance(value, (str, os.PathLike, *also)) and value != "":
        return
    expected = (
        "a path (str or pathlib.Path)"
        + (" or a Scenario (edgefl.load_scenario)" if Scenario in also else "")
        + (" or None" if type(None) in also else "")
    )
    raise kind(f"{name}: expected {expected}, got {value!r}")


def _check_mapping(value, name: str, kind: type[Exception], example: str = "{'network.snr_db': 5}") -> None:
    if value is None or (isinstance(value, Mapping) and all(isinstance(k, str) for k in value)):
        return
    raise kind(
        f"{name}: expected a dict of dotted keys, e.g. {example}, or None; got {type(value).__name__} {value!r:.80}"
    )


def _check_texts(value, name: str, example: str, kind: type[Exception]) -> None:
    if value is None or (isinstance(value, (list, tuple)) and all(isinstance(t, str) for t in value)):
        return
    raise kind(
        f"{name}: expected {'a list of texts like ' if name == 'targets' else 'a text like '}{example}, "
        f"got {value!r:.80}"
    )


def _check_bool(value, name: str, kind: type[Exception]) -> None:
    if not isinstance(value, bool):
        raise kind(f"{name}: expected True or False, got {value!r}")
