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

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from edgefl.results import check_target
from edgefl.runner import RunResult, simulate, write_results
from edgefl.scenario import Scenario, format_override
from edgefl.scenario import load_scenario as _load
from edgefl.sim.activities import EVENT_FIELDS

PLOT_KINDS = ("accuracy", "energy", "accuracy-energy", "gantt", "energy-rounds", "energy-snr", "cell-map",
              "uploads-missed")
EVENT_PLOT_KINDS = PLOT_KINDS[3:]  # drawn by edgefl.run_plots from the run's events and clients (docs/run-plots.md)


def load_scenario(path: str | Path, overrides: Mapping[str, Any] | None = None) -> Scenario:
    """Read a scenario file, apply ``overrides`` (dotted keys -> values) and validate it."""
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

    def save(self, out: str | Path, plots: bool = True, force: bool = False) -> Path:
        """Write the results folder, as ``edgefl run --out`` does (``force``: replace a folder edgefl did not write)."""
        return write_results(self.raw, Path(out), plots=plots, force=force)

    def plot(self, kind: str = "accuracy"):
        """A matplotlib Figure: ``accuracy`` (mean, worst client over rounds), ``energy`` (cumulative energy by
        category over rounds), ``accuracy-energy`` (worst-client accuracy against cumulative energy), or the
        plots of docs/run-plots.md: ``gantt``, ``energy-rounds``, ``energy-snr``, ``cell-map``,
        ``uploads-missed``."""
        import matplotlib.pyplot as plt

        if kind not in PLOT_KINDS:
            raise ValueError(f"unknown plot kind {kind!r}; known: {', '.join(PLOT_KINDS)}")
        if kind in EVENT_PLOT_KINDS:
            return self._event_plot(kind)
        m = self.metrics
        fig, ax = plt.subplots(figsize=(6, 4))
        title = (f"{self.scenario.algorithm.name}, N = {self.scenario.data.num_clients}, "
                 f"τ = {self.scenario.algorithm.local_steps}")
        if kind == "accuracy":
            evaluated = m.dropna(subset=["acc_mean"])
            ax.plot(evaluated["round"], evaluated["acc_mean"], label="mean over clients")
            ax.plot(evaluated["round"], evaluated["acc_worst"], label="worst client")
            ax.set(xlabel="round", ylabel="accuracy", ylim=(0, 1))
        elif kind == "energy":
            categories = [c for c in ("compute", "uplink", "downlink", "idle") if f"{c}_energy_j" in m]
            ax.stackplot(m["round"], *[m[f"{c}_energy_j"] for c in categories], labels=categories)
            ax.set(xlabel="round", ylabel="cumulative energy, all clients (J)")
        else:
            evaluated = m.dropna(subset=["acc_worst"])
            ax.plot(evaluated["energy_j"], evaluated["acc_worst"], marker=".")
            ax.set(xlabel="cumulative energy, all clients (J)", ylabel="worst-client accuracy", ylim=(0, 1))
        ax.set_title(title, fontsize=10)
        if kind != "accuracy-energy":
            ax.legend(fontsize=8)
        fig.tight_layout()
        return fig

    def _event_plot(self, kind: str):
        from edgefl import run_plots
        from edgefl.runner import run_title

        raw = self.raw
        events = raw.events if raw is not None else self.events  # a DataFrame of events.csv works too
        clients = raw.clients if raw is not None else self.clients
        positions = raw.positions if raw is not None else self.positions
        metrics = raw.metrics if raw is not None else self.metrics.to_dict("records")
        title, net = run_title(self.scenario), self.scenario.network
        if kind == "gantt":
            fig = run_plots.draw_gantt(events, title, deadline_s=net.deadline_s, round_ends=run_plots.round_ends(metrics))
        elif kind == "energy-rounds":
            fig = run_plots.draw_energy_rounds(events, title, len(metrics))
        elif kind == "uploads-missed":
            fig = run_plots.draw_uploads_missed(events, title, len(metrics))
        elif kind == "energy-snr":
            fig = run_plots.draw_energy_snr(clients, title)
        else:
            fig = run_plots.draw_cell_map(clients, positions, net.cell_radius_m, title)
        if fig is None:
            raise ValueError(f"no {kind} plot for this run: " + (
                "its devices have no distance (the scenario gives the SNR)" if kind == "cell-map" else
                "it has no events or clients to draw"))
        return fig


def run(scenario: str | Path | Scenario, overrides: Mapping[str, Any] | None = None, out: str | Path | None = None,
        progress: bool = True, targets: list[str] | None = None, resume: bool = False) -> Result:
    """Co-simulate a scenario (a path or a loaded :class:`Scenario`); ``out``: also write the results
    folder there (None: nothing is written); ``targets`` (e.g. ``["acc_worst=0.8"]``): rounds, energy and
    time to each in ``summary["targets"]``. With ``run.checkpoint_every`` and ``out``, a checkpoint is saved
    beside ``out`` as the run goes; ``resume=True`` goes on from it (as ``edgefl run --resume``)."""
    from edgefl.target import parse_target

    if not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario, overrides)
    elif overrides:
        raise ValueError("overrides apply to a scenario file; pass the path, or change the loaded Scenario")
    if out is not None:
        check_target(Path(out))  # before the work: a folder in the way is an error now, not after the run
    result = simulate(scenario, Path(out) if out is not None else None, resume=resume, progress=progress,
                      targets=[parse_target(t) for t in targets or []])
    frame = Result(
        scenario=scenario, metrics=pd.DataFrame(result.metrics), clients=pd.DataFrame(result.clients),
        events=pd.DataFrame([e.row() for e in sorted(result.events or [], key=lambda e: e.timeline_key())],
                            columns=list(EVENT_FIELDS)),
        summary=result.summary, battery=pd.DataFrame(result.battery), positions=pd.DataFrame(result.positions),
        raw=result)
    if out is not None:
        frame.save(out)
    return frame


def sweep(scenario: str | Path, grid: Mapping[str, list] | None = None, seeds: int | None = None,
          out: str | Path | None = None, overrides: Mapping[str, Any] | None = None, workers: int = 1,
          backend: str = "local", address: str | None = None, progress: bool = True) -> pd.DataFrame:
    """``edgefl sweep``: every grid point × seed (resumable in ``out``); returns results.csv as a DataFrame.
    ``backend="ray"`` runs the learning runs as Ray tasks (``address``: a cluster; docs/scale.md)."""
    from edgefl.sweeps.plan import plan_sweep
    from edgefl.sweeps.run import run_sweep

    path = Path(scenario)
    grids = [f"{key}={','.join(map(str, values))}" for key, values in (grid or {}).items()]
    plan = plan_sweep(path, [format_override(k, v) for k, v in (overrides or {}).items()], grids, seeds)
    summary = run_sweep(plan, Path(out) if out else Path("results") / f"{path.stem}-sweep", workers=workers,
                        backend=backend, address=address, progress=progress)
    return pd.read_csv(summary.results)


def optimal_tau(sweep_dir: str | Path, target: str, window: int | None = None,
                confidence: float = 0.95) -> pd.DataFrame:
    """``edgefl optimal-tau`` on a finished sweep: one row per channel point (τ*, the set of τ not
    significantly worse, rounds and energy to target with CIs). Writes nothing."""
    from edgefl.sweeps.analysis import optimal_tau as analyse
    from edgefl.sweeps.analysis import per_channel_rows, read_results
    from edgefl.sweeps.store import grid_keys
    from edgefl.target import DEFAULT_WINDOW, parse_target

    folder = Path(sweep_dir)
    _, rows = read_results(folder / "results.csv")
    result = analyse(rows, grid_keys(folder), parse_target(target), window or DEFAULT_WINDOW, confidence)
    header, table = per_channel_rows(result)
    return pd.DataFrame(table, columns=header)
