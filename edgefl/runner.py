"""One run: scenario -> data, model, devices, algorithm, engine -> rounds -> results.

Every random stream derives from ``run.seed`` (data partition, model init, minibatches,
client sampling, fading), so one seed gives identical numbers whichever executor runs.
"""

from __future__ import annotations

import math
import time
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import tomli_w
import torch
from tqdm import tqdm

from edgefl.checkpoint import fingerprint as checkpoint_fingerprint
from edgefl.checkpoint import restore as restore_checkpoint
from edgefl.checkpoint import save as save_checkpoint
from edgefl.collector import frozen_during_run
from edgefl.errors import UserError
from edgefl.estimation import estimation_metrics
from edgefl.logs import get_logger
from edgefl.metrics import evaluate_global
from edgefl.parts import build_run
from edgefl.plugins import returned_fault
from edgefl.resolved import resolved_dict
from edgefl.results import (
    BATTERY_COLUMNS,
    CELL_COLUMNS,
    CLIENT_COLUMNS,
    METRIC_COLUMNS,
    POSITION_COLUMNS,
    atomic_directory,
    checkpoint_file,
    claim_checkpoint,
    is_checkpoint,
    write_csv,
    write_json,
)
from edgefl.scenario import Scenario
from edgefl.sim import NoDeviceAvailable
from edgefl.sim.activities import EVENT_FIELDS
from edgefl.sim.physics import MeanSnr
from edgefl.target import (
    COMMITTED,
    DEFAULT_WINDOW,
    Target,
    definition,
    energy_at,
    energy_sentence,
    parse_target,
    rounds_to_target,
)
from energy import CATEGORIES

log = get_logger(__name__)


@dataclass
class RunResult:
    scenario: Scenario
    metrics: list[dict]
    clients: Sequence[dict]  # clients.csv's rows (ClientRows: made when asked)
    events: list
    summary: dict
    trace: list = field(default_factory=list)
    battery: Sequence[dict] = field(default_factory=list)  # battery.csv rows (BATTERY_COLUMNS; made when asked)
    positions: Sequence[dict] = field(default_factory=list)  # positions.csv rows (moving devices): round, client, x, y
    chain_ends: list | None = None  # an asynchronous server's chains as they ended (Engine.chain_ends); None: sync
    event_columns: list[str] = field(default_factory=list)  # the events.csv columns the algorithm adds ...
    event_values: Callable[[Any], tuple] | None = None  # ... and their values for one activity (Algorithm)


@dataclass
class RunRecord:
    """What a run has produced so far (saved in a checkpoint): its rows, and where it stands."""

    rows: list[dict] = field(default_factory=list)  # metrics.csv
    battery: RoundRows = field(default_factory=lambda: RoundRows(BATTERY_COLUMNS))  # battery.csv
    positions: RoundRows = field(default_factory=lambda: RoundRows(POSITION_COLUMNS))  # positions.csv
    last_eval: dict | None = None  # the last row with an evaluation
    rounds_done: int = 0
    wall_s: float = 0.0  # wall-clock time of the rounds run before the last checkpoint
    executor_strategy: str | None = None  # how the executor trains, as measured on the first round (kept on resume)
    executor_chunk: int | None = None  # clients vmap trains at once, as the free memory allowed (kept on resume)


class RowsWhenAsked(Sequence):
    """Rows (dicts) of an output file, made when asked from the columns a run keeps: equal to any sequence of the
    same rows (a list of dicts included)."""

    _noun = "row"  # what a row is (an index out of range names it)

    def __len__(self) -> int:
        raise NotImplementedError

    def __getitem__(self, i):  # type: ignore[override]
        n = len(self)
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(n))]
        if not -n <= i < n:
            raise IndexError(f"{self._noun} {i} of {n}")
        return self._row(i % n)

    def _row(self, i: int) -> dict:
        """Row ``i`` (0 <= i < len), made now."""
        raise NotImplementedError

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and len(other) == len(self) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]  # (equal to a list: as unhashable as one)


class ClientRows(RowsWhenAsked):
    """clients.csv's rows as a sequence of dicts, one per client, made when asked from columns of all clients
    (arrays [N]): 10^6 devices hold a few arrays, not 10^6 dicts. Each column: (name, values or None, the Python
    type of its cells: int, float, or None to take them as they are); a None column is None in every row."""

    _noun = "client"

    def __init__(self, n: int, columns: list[tuple[str, object, type | None]]):
        self._n, self._columns = n, columns

    def __len__(self) -> int:
        return self._n

    def _row(self, i: int) -> dict:
        return {
            name: None if values is None else values[i] if kind is None else kind(values[i])  # type: ignore[index]
            for name, values, kind in self._columns
        }

    def __repr__(self) -> str:
        return f"ClientRows({self._n} clients)"


class RoundRows(RowsWhenAsked):
    """battery.csv's or positions.csv's rows as a sequence of dicts (keys: ``columns``, round, client, then the values'),
    made when asked from what each round added (:meth:`add`): its number, its devices and their values as lists. A round
    of an asynchronous server is one server update: the 50 dicts a table would make per update cost ~20 us, 4 % of the
    engine's time per chain (benchmarks [8]); the files are written from the lists (:meth:`table`)."""

    def __init__(self, columns: Sequence[str]):
        self.columns = tuple(columns)
        self._rounds: list[tuple] = []  # per round added: (number, clients, *values), lists aligned with clients
        self._ends: list[int] = []  # the rows up to and with each round added (where row i is found: bisect)

    def add(self, round_: int, clients: list[int], *values: list) -> None:
        """Round ``round_``'s rows: one per client, with its value in each of ``values`` (the columns after client)."""
        self._rounds.append((round_, clients, *values))
        self._ends.append(len(self) + len(clients))

    def drop_last_round(self) -> None:
        """Remove the rows the last :meth:`add` added."""
        self._rounds.pop()
        self._ends.pop()

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    def table(self):
        """The rows as lists of their values in ``columns``' order (the file's lines), in order."""
        for round_, clients, *values in self._rounds:
            for row in zip(clients, *values):
                yield [round_, *row]

    def _row(self, i: int) -> dict:
        k = bisect_right(self._ends, i)  # the round holding row i (rounds that added no row end where the last did)
        round_, clients, *values = self._rounds[k]
        j = i - (self._ends[k - 1] if k else 0)
        return dict(zip(self.columns, (round_, clients[j], *(column[j] for column in values))))

    def __iter__(self):
        columns = self.columns
        return (dict(zip(columns, row)) for row in self.table())

    def __repr__(self) -> str:
        return f"RoundRows({len(self)} rows of {len(self._rounds)} rounds)"


class RoundState(NamedTuple):
    """A run's state between two rounds, as far as a diverged round must be undone."""

    model: torch.Tensor
    per_client_energy_j: np.ndarray
    selected_count: np.ndarray
    arrived_count: np.ndarray
    missed_count: np.ndarray


class Simulation:
    """Everything one run needs, built from a validated scenario."""

    def __init__(self, scenario: Scenario, record_trace: bool = False):
        self.scenario = scenario
        run = build_run(scenario, record_trace)  # the one place the scenario is read to build the run (edgefl.parts)
        self.parts = parts = run.parts
        self.data, self.model, self.network, self.population = parts.data, parts.model, parts.network, parts.population
        self.devices = parts.devices  # the devices now (the population: as built)
        self.pricer, self.controller, self.selection = parts.pricer, parts.controller, parts.selection
        self.executor, self.engine, self.context, self.algorithm = run.executor, run.engine, run.context, run.algorithm
        self.record = RunRecord(rows=parts.history)  # (the rows the observer sees: RunParts.history)

    @classmethod
    def resume(cls, scenario: Scenario, checkpoint: Path, record_trace: bool = False) -> "Simulation":
        """The simulation of ``scenario`` as saved in ``checkpoint`` (edgefl.checkpoint): :meth:`run` goes on
        from the round after it."""
        simulation = cls(scenario, record_trace=record_trace)
        restore_checkpoint(simulation, checkpoint)
        if simulation.record.executor_strategy is not None:  # the path the run trained on: the same numbers
            simulation.executor.strategy = simulation.record.executor_strategy
            simulation.executor.chunk = simulation.record.executor_chunk
        return simulation

    def keep_checkpoints(self) -> None:
        """Let :meth:`run` write checkpoints (edgefl.checkpoint): the pricer keeps the journal of its calls
        from the first round on."""
        if self.pricer.journal is None:
            self.pricer.journal = []
        self.fingerprint = checkpoint_fingerprint(self.scenario)  # what each checkpoint says it is of

    def run(
        self, progress: bool = True, on_round=None, targets: list[Target] | None = None, checkpoint: Path | None = None
    ) -> RunResult:
        """Every round (from the first not yet run: a resumed simulation goes on); ``targets``: also report
        rounds, energy and time to each (summary.json "targets"); ``run.stop_at``: end the run once that target
        is reached and confirmed; ``checkpoint``: where to save the run every ``run.checkpoint_every`` rounds.
        The rounds' rows and the run's outputs are the :class:`Recorder`'s."""
        with frozen_during_run():  # (when garbage is collected only: edgefl.collector)
            return self._run(progress, on_round, targets, checkpoint)

    def _run(self, progress: bool, on_round, targets: list[Target] | None, checkpoint: Path | None) -> RunResult:
        run, done = self.parts.run, self.record
        recorder = Recorder(self, targets)
        every = run.checkpoint_every if checkpoint is not None else None
        if every:
            self.keep_checkpoints()
        started = time.perf_counter()
        bar = self._progress_bar(progress)
        stopped, diverged = None, None
        for r in bar:
            before = self._round_state()
            try:
                record = self.engine.run_round(self.algorithm, r)
            except NoDeviceAvailable as exc:
                stopped = f"stopped before round {r + 1}: {exc}"
                break
            row = recorder.row(r, record)
            diverged = self._divergence(r, row)
            if diverged:  # outputs end with the last finite round: its energy, events and model
                self._restore_round_state(before)
                log.debug("%s", diverged)
                break
            recorder.keep(r, row)
            if row is done.last_eval:
                worst = row.get("acc_worst")  # None for regression models
                bar.set_postfix(
                    acc_worst=f"{float('nan') if worst is None else worst:.3f}", energy_j=f"{row['energy_j']:.3g}"
                )
            reached = recorder.stop_reached(r)
            if on_round is not None:
                on_round(row)
            if reached is not None:
                stopped = reached
                break
            if run.checkpoint_every and (r + 1) % run.checkpoint_every == 0 and r + 1 < run.rounds:
                self.engine.settle()  # (what a checkpoint holds: the same numbers whether it is written or not)
                if every:
                    done.wall_s += time.perf_counter() - started
                    started = time.perf_counter()
                    save_checkpoint(self, checkpoint)
                    log.debug("checkpoint after round %d: %s", r + 1, checkpoint)
        bar.close()
        if not diverged:  # what runs on is charged (docs/model.md §8)
            recorder.finish()
        wall_s = done.wall_s + time.perf_counter() - started
        model = before.model if diverged else self.algorithm.model
        return recorder.result(self.scenario, model, wall_s, stopped, diverged)

    def _progress_bar(self, progress: bool):
        """The rounds to run, from the first not yet run, as a progress bar (shown with ``progress``)."""
        rounds, first = self.parts.run.rounds, self.record.rounds_done
        return tqdm(
            range(first, rounds),
            desc=f"{self.parts.algorithm.name}",
            unit="round",
            initial=first,
            total=rounds,
            disable=not progress or None,
            dynamic_ncols=True,
            leave=False,
        )

    # -- divergence ---------------------------------------------------------------------
    def _divergence(self, r: int, row: dict) -> str | None:
        """Why round ``r`` diverged (a non-finite model or loss), or None."""
        model = self.algorithm.model
        # a finite sum has finite terms (a NaN or an inf term makes it NaN or inf); a sum that overflows is checked
        # term by term (7,850 floats: 5 µs against 30 µs for isfinite().all() at every server update, benchmarks [8])
        model_finite = math.isfinite(model.sum().item()) or bool(torch.isfinite(model).all())
        loss = row.get("loss")
        if model_finite and (loss is None or math.isfinite(loss)):
            return None
        what = "the global model" if not model_finite else "the loss"
        hint = self._divergence_hint()
        return (
            f"diverged in round {r + 1}: {what} is no longer finite; the outputs stop at round {r} "
            f"(likely cause: {hint})"
        )

    def _divergence_hint(self) -> str:
        a = self.parts.algorithm
        hp = a.hp.model_dump()
        step_keys = [
            f"algorithm.{a.name}.{k}" for k in hp if k in ("eta_g", "gamma", "server_lr", "mu", "mu_p", "alpha")
        ]
        return f"a step size too large for this model and data: lower algorithm.lr (now {a.lr:g})" + (
            f" or {', '.join(step_keys)}" if step_keys else ""
        )

    def _round_state(self) -> RoundState:
        """The model and what a round adds to the energy ledger and the participation counts, before the round
        (to end the outputs at the last finite round when a round diverges)."""
        eng = self.engine
        return RoundState(
            self.algorithm.model.detach().clone(),
            self.pricer.ledger.per_client(),
            eng.selected_count.copy(),
            eng.arrived_count.copy(),
            eng.missed_count.copy(),
        )

    def _restore_round_state(self, state: RoundState) -> None:
        _, per_client, selected, arrived, missed = state
        self.pricer.ledger.restore(per_client)
        self.engine.selected_count[:], self.engine.arrived_count[:], self.engine.missed_count[:] = (
            selected,
            arrived,
            missed,
        )


class Recorder:
    """What a run writes, from its parts: as the rounds run, metrics.csv's rows (with battery.csv's and
    positions.csv's), kept in the simulation's :class:`RunRecord` (saved in a checkpoint); at its end,
    clients.csv's rows, events.csv's and summary.json (:meth:`result`)."""

    def __init__(self, sim: Simulation, targets: list[Target] | None):
        self.run, self.described = sim.parts.run, sim.parts.described  # the [run] section; what the run is of
        self.record, self.controller = sim.record, sim.controller
        self.data, self.model, self.network, self.population = sim.data, sim.model, sim.network, sim.population
        self.devices, self.pricer, self.executor = sim.devices, sim.pricer, sim.executor
        self.engine, self.context, self.algorithm = sim.engine, sim.context, sim.algorithm
        stop_at = self.run.stop_at
        self.stop_at = parse_target(stop_at) if stop_at else None
        self.targets = list(targets or [])
        # the devices with a battery (battery.csv's clients, the same at every round), as an index and as a list, and
        # their classes; every device (positions.csv's clients)
        self._battery_index = np.flatnonzero(np.isfinite(self.population.battery_j))
        self._battery_list: list[int] = self._battery_index.tolist()
        self._battery_classes = [self.population.device_class[c] for c in self._battery_list]
        self._every_client = list(range(self.population.num_clients))

    def row(self, r: int, record) -> dict:
        """metrics.csv's row of round ``r`` (0-based), which the engine ran (``record``): evaluated where the
        run evaluates."""
        done = self.record
        done.executor_strategy, done.executor_chunk = self.executor.strategy, self.executor.chunk
        return self._metrics_row(r, record, evaluate=self._evaluates(r, record.end_s, done.rows))

    def keep(self, r: int, row: dict) -> None:
        """Round ``r``'s rows, kept: where moving devices were, the batteries, the metrics row."""
        done = self.record
        rows = done.rows
        where = self.pricer.positions_m()
        if where is not None:  # moving devices: where each was during the round
            x, y = where[:, 0], where[:, 1]
            done.positions.add(r + 1, self._every_client, x.tolist(), y.tolist(), np.hypot(x, y).tolist())
        self._battery_rows(r, row, done.battery)
        if row.get("acc_worst") is not None or row.get("loss") is not None:
            done.last_eval = row
        rows.append(row)
        done.rounds_done = r + 1
        log.debug(
            "round %d: energy %.4g J, time %.4g s, acc_worst %s, loss %s, uploads %d arrived / %d missed",
            r + 1,
            row["energy_j"],
            row["sim_time_s"],
            row.get("acc_worst"),
            row.get("loss"),
            row["uploads_arrived"],
            row["uploads_missed"],
        )
        if (
            row is done.last_eval
            and len([x for x in rows if x.get("acc_worst") is not None or x.get("loss") is not None]) == 1
        ):
            for t in [*self.targets, *([self.stop_at] if self.stop_at else [])]:
                target_outcome(rows, t)  # a metric the run does not have: an error now, not after the run

    def stop_reached(self, r: int) -> str | None:
        """Why the run stops after round ``r`` (``run.stop_at`` reached and confirmed), or None."""
        if self.stop_at is None:
            return None
        reached = confirmed_round(self.record.rows, self.stop_at)
        if reached is None:
            return None
        return (
            f"target {self.stop_at} reached at round {reached} (confirmed by the centred {DEFAULT_WINDOW}-round "
            f"moving average at round {r + 1})"
        )

    def finish(self) -> None:
        """The run ends: what runs on is charged (docs/model.md §8), so the last row's booked energy is then its
        committed energy, drawn from the batteries."""
        rows, battery = self.record.rows, self.record.battery
        if not rows:
            return
        self.pricer.finish()
        rows[-1].update(self._energy_fields())
        if battery:
            battery.drop_last_round()
            self._battery_rows(rows[-1]["round"] - 1, rows[-1], battery)

    def result(
        self, scenario: Scenario, model: torch.Tensor, wall_s: float, stopped: str | None, diverged: str | None
    ) -> RunResult:
        """The run's outputs, of ``scenario`` (kept as it is for scenario.toml): its rows, clients.csv's (``model``:
        the final global model), events.csv's, and summary.json (``stopped``, ``diverged``: why it ended early)."""
        done = self.record
        rows, stop_at = done.rows, self.stop_at
        final = evaluate_global(self.model, self.data, model, self.engine.executor.evaluation_outputs)
        clients = self._client_rows(final)
        summary = self._summary(rows, done.last_eval, wall_s)
        summary["rounds_run"] = len(rows)
        summary["status"] = "diverged" if diverged else ("stopped" if stopped else "completed")
        if diverged:
            summary["diverged"] = diverged
        wanted = self.targets + ([stop_at] if stop_at is not None and stop_at not in self.targets else [])
        if wanted:
            summary["targets"] = [target_outcome(rows, t) for t in wanted]
        if stopped:
            summary["stopped"] = stopped
        if self.controller.steers():  # (the static controller has no state to report)
            summary["control_state"] = self.controller.summary()
        events = self.pricer.events if not diverged else [e for e in self.pricer.events if e.round < len(rows)]
        chain_ends = list(self.engine.chain_ends) if self.algorithm.asynchronous else None
        a = self.algorithm
        return RunResult(
            scenario,
            rows,
            clients,
            events,
            summary,
            self.engine.trace,
            done.battery,
            done.positions,
            chain_ends,
            list(a.event_columns),
            a.event_values if a.event_columns else None,
        )

    def _reported(self) -> dict:
        """The columns the algorithm and then the components report (each declares its ``columns``; docs/extending.md,
        "A component that reports"), after a round."""
        a, values = self.algorithm, {}
        if a.columns:
            got = a.report()
            if not isinstance(got, dict) or list(got) != list(a.columns):
                raise returned_fault(
                    a,
                    a.report,
                    got,
                    f"expected a dict of its columns, {list(a.columns)}, in that order",
                    f"the algorithm {type(a).__name__}",
                )
            values.update(got)
        if self.pricer.columns:  # e.g. [backhaul]: cloud rounds, time, energy
            values.update(self.pricer.component_metrics())
        return values

    def _battery_rows(self, r: int, row: dict, battery: RoundRows) -> None:
        """battery.csv's rows after round ``r`` (0-based): every level now, and what was harvested so far, of the
        devices with a battery (none without batteries); the lowest and mean level in the metrics row."""
        levels = self.pricer.battery_levels()
        if levels is None:
            return
        harvested = self.pricer.device_value("harvested_j")
        if len(self._battery_list) < len(levels):  # (some devices without a battery: theirs only)
            levels, harvested = levels[self._battery_index], harvested[self._battery_index]
        battery.add(r + 1, self._battery_list, self._battery_classes, levels.tolist(), harvested.tolist())
        # (the mean as ndarray.mean computes it, its sum over the count, without its Python wrapper: every update)
        row.update(battery_min_j=float(levels.min()), battery_mean_j=float(levels.sum() / len(levels)))

    def _energy_fields(self) -> dict:
        """The energy so far, in total and by category (metrics.csv's energy columns)."""
        by_cat = self.pricer.ledger.by_category()
        return {"energy_j": float(sum(by_cat.values())), **{f"{c}_energy_j": float(by_cat[c]) for c in CATEGORIES}}

    def _evaluates(self, r: int, end_s: float, rows: list[dict]) -> bool:
        """Whether round r (0-based), which ends at `end_s` of simulated time, evaluates the global model: the
        last round; every run.eval_every rounds; or with run.eval_every_s = t, the first round that ends at or
        after each multiple of t, i.e. when a multiple of t lies in (the previous round's end, end_s]."""
        run = self.run
        if r + 1 == run.rounds:
            return True
        if run.eval_every_s is None:
            return (r + 1) % run.eval_every == 0
        previous_s = rows[-1]["sim_time_s"] if rows else 0.0
        return math.floor(end_s / run.eval_every_s) > math.floor(previous_s / run.eval_every_s)

    def _metrics_row(self, r: int, record, evaluate: bool) -> dict:
        row = {
            "round": r + 1,
            "sim_time_s": float(record.end_s),
            **self._energy_fields(),
            "committed_energy_j": self.pricer.committed_energy_j(),
            "acc_mean": None,
            "acc_worst": None,
            "acc_std": None,
            "loss": None,
            "uploads_arrived": record.uploads_arrived,
            "uploads_missed": record.uploads_missed,
        }
        row.update(self._reported())
        if evaluate:
            m = evaluate_global(self.model, self.data, self.algorithm.model, self.engine.executor.evaluation_outputs)
            row.update({k: m.get(k) for k in ("acc_mean", "acc_worst", "acc_std", "loss")})
        # estimation errors / priority-client metrics where the data set has a truth or roles
        row.update(estimation_metrics(self.model, self.data, self.algorithm.model if evaluate else None))
        row.update({k: float(v) for k, v in self.algorithm.metrics().items()})
        row.update(self.controller.metrics())  # (the static controller's: none)
        row.update(self.engine.selection.metrics())  # (the engine's: a resumed run's is the checkpoint's)
        return row

    def _client_rows(self, final: dict) -> ClientRows:
        """clients.csv's rows: each column computed for all clients at once, a client's row made when asked."""
        pop, now, ledger, eng = self.population, self.devices, self.pricer.ledger, self.engine
        per_client = ledger.per_client()
        acc = final.get("client_acc")
        n = pop.num_clients
        bandwidth_hz = self.network.bandwidth_hz
        mean_snr = MeanSnr(now.uplink)
        link = mean_snr(bandwidth_hz)  # every Link.snr_linear(B, 1.0)
        several = now.cell is not None and now.handovers is not None and now.position_m is not None
        # several cells: uplink_snr_db is the SNR without interference, sinr_db with it
        up_snr = mean_snr(bandwidth_hz, interference=False) if several else link
        columns: list[tuple[str, object, type | None]] = [
            ("client", np.arange(n), int),
            ("device_class", list(pop.device_class), None),
            ("train_samples", self.data.train_sizes, int),
            ("test_samples", self.data.test_sizes, int),
            ("cpu_ghz", now.cpu_hz / 1e9, float),
            ("distance_m", None if now.distance_m is None else now.distance_m.copy(), float),  # at the end
            ("uplink_snr_db", 10 * np.log10(up_snr), float),
            *((f"{c}_energy_j", per_client[:, j], float) for j, c in enumerate(CATEGORIES)),
            ("energy_j", per_client.sum(axis=1), float),
            ("times_trained", eng.selected_count.copy(), int),  # (copies: the engine's counts go on)
            ("uploads_arrived", eng.arrived_count.copy(), int),
            ("uploads_missed", eng.missed_count.copy(), int),
            ("final_acc", acc, float),
        ]
        if several:
            assert now.cell is not None and now.handovers is not None and now.position_m is not None
            columns += [
                ("cell", now.cell.copy(), int),
                ("sinr_db", 10 * np.log10(link), float),
                ("handovers", now.handovers.copy(), int),
                ("x_m", now.position_m[:, 0].copy(), float),
                ("y_m", now.position_m[:, 1].copy(), float),
            ]
            los = pop.cells.serving_los(now.position_m, now.cell) if pop.cells is not None else None
            if los is not None:  # network.line_of_sight = "random": the serving link's state at the end
                columns.append(("los", los, int))
        return ClientRows(n, columns)

    def _summary(self, rows: list[dict], last_eval: dict | None, wall_s: float) -> dict:
        by_cat = self.pricer.ledger.by_category()
        evaluated = [r for r in rows if r["acc_worst"] is not None]
        return {
            **self.described,  # the algorithm, rounds, seed, ..., as edgefl.parts read them
            "model_parameters": self.model.dim,  # the flat vector: parameters and float buffers
            "model_buffers": self.model.buffers,
            "message_bits": float(self.model.dim * self.network.bits_per_param),  # a model's payload, headers aside
            "train_flops_per_sample": self.model.train_flops_per_sample,
            "eval_flops_per_sample": self.model.eval_flops_per_sample,
            "device": str(self.executor.device),
            "executor_strategy": self.executor.strategy,
            "sim_time_s": rows[-1]["sim_time_s"] if rows else 0.0,
            "energy_j": float(sum(by_cat.values())),
            "energy_by_category_j": {k: float(v) for k, v in by_cat.items()},
            "final": {k: last_eval.get(k) for k in ("acc_mean", "acc_worst", "acc_std", "loss")} if last_eval else {},
            "best_acc_worst": max((r["acc_worst"] for r in evaluated), default=None),
            "uploads_arrived": int(sum(r["uploads_arrived"] for r in rows)),
            "uploads_missed": int(sum(r["uploads_missed"] for r in rows)),
            "wall_time_s": wall_s,
            "data": self.data.summary(),
        }


def target_outcome(rows: list[dict], target: Target, window: int = DEFAULT_WINDOW) -> dict:
    """Rounds, cumulative energy (J) and simulated time (s) to ``target`` (None if not reached)."""
    if rows and not any(target.metric in row for row in rows):
        known = [k for k in rows[0] if k.startswith(("acc", "loss")) or k.endswith(("loss", "error"))]
        raise UserError(f"target {target}: the run has no metric {target.metric!r} (known: {', '.join(known)})")
    reached = rounds_to_target([row["round"] for row in rows], [row.get(target.metric) for row in rows], target, window)
    at = next((row for row in rows if row["round"] == reached), None)
    return {
        "target": str(target),
        "definition": definition(target, window),
        "reached": reached is not None,
        "rounds": reached,
        "energy_j": None if at is None else energy_at(at),  # committed: what stopping there costs
        "energy_definition": energy_sentence(COMMITTED),
        "booked_energy_j": None if at is None else at["energy_j"],
        "sim_time_s": None if at is None else at["sim_time_s"],
    }


def confirmed_round(rows: list[dict], target: Target, window: int = DEFAULT_WINDOW) -> int | None:
    """The round ``target`` was reached at, once no later evaluation can change it: its centred moving
    average has its whole window (window // 2 evaluations after it)."""
    evaluated = [row for row in rows if row.get(target.metric) is not None]
    if not evaluated:
        return None
    reached = rounds_to_target(
        [row["round"] for row in evaluated], [row[target.metric] for row in evaluated], target, window
    )
    if reached is None:
        return None
    after = sum(1 for row in evaluated if row["round"] > reached)
    return reached if after >= window // 2 else None


def run_scenario(scenario: Scenario, progress: bool = True, record_trace: bool = False) -> RunResult:
    return Simulation(scenario, record_trace=record_trace).run(progress=progress)


def simulate(
    scenario: Scenario,
    out: Path | None = None,
    resume: bool = False,
    progress: bool = True,
    targets: list[Target] | None = None,
) -> RunResult:
    """Run ``scenario`` whose results go to ``out``: with ``run.checkpoint_every``, saving a checkpoint beside
    ``out`` as it goes (edgefl.checkpoint); with ``resume``, going on from that checkpoint if there is one."""
    checkpoint = checkpoint_file(out) if out is not None else None
    if resume and checkpoint is not None and checkpoint.exists():
        simulation = Simulation.resume(scenario, checkpoint)
        log.info(
            "resuming %s after round %d (checkpoint %s)",
            simulation.parts.algorithm.name,
            simulation.record.rounds_done,
            checkpoint,
        )
    else:
        if resume:
            log.warning(
                "no checkpoint to resume from%s: starting from round 1",
                f" ({checkpoint} does not exist)" if checkpoint is not None else " (no results folder given)",
            )
        simulation = Simulation(scenario)
        if not resume and checkpoint is not None and checkpoint.exists() and simulation.parts.run.checkpoint_every:
            log.warning(
                "%s holds a checkpoint of an earlier run of %s; starting again (pass --resume to go on from it)",
                checkpoint,
                out,
            )
    log.info("data and model built; simulating")
    every = simulation.parts.run.checkpoint_every
    if every and out is not None:
        claim_checkpoint(out)  # before the first round: a file of the user's there is never replaced
    return simulation.run(progress=progress, targets=targets, checkpoint=checkpoint if every else None)


def metric_columns(rows: list[dict]) -> list[str]:
    extra = [k for k in (rows[0] if rows else {}) if k not in METRIC_COLUMNS]
    return METRIC_COLUMNS + extra


ASYNC_EVENT_COLUMNS = ("model_version", "staleness")


def event_table(result: RunResult) -> tuple[list[str], list[tuple]]:
    """events.csv's columns and rows, in timeline order, with the columns the algorithm adds (its
    ``event_columns``: HierFAVG's aggregation with edge servers). An asynchronous run's uploads also carry the model
    version their chain started from and, for those that arrived, their staleness (server updates since)."""
    events = sorted(result.events or [], key=lambda e: e.timeline_key())  # same order whichever engine
    columns, extras = list(EVENT_FIELDS), []
    if result.event_values is not None:
        columns += result.event_columns
        extras.append(_checked_event_values(result.event_values, len(result.event_columns)))
    if result.chain_ends is not None:
        ends = {(end.client, end.end_s): end for end in result.chain_ends}  # a chain ends with its upload

        def staleness(event) -> tuple:
            end = ends.get((event.client, float(event.end_s))) if event.kind == "upload" else None
            return (None, None) if end is None else (end.version, end.staleness if end.arrived else None)

        columns += ASYNC_EVENT_COLUMNS
        extras.append(staleness)
    if not extras:
        return columns, [e.row() for e in events]
    return columns, [sum((extra(e) for extra in extras), e.row()) for e in events]


def _checked_event_values(values: Callable[[Any], tuple], n: int) -> Callable[[Any], tuple]:
    """``values`` (an algorithm's ``event_values``), whose every answer must be a tuple of ``n`` values (else the
    algorithm's fault: a PluginError naming it)."""

    def checked(event) -> tuple:
        got = values(event)
        if not isinstance(got, tuple) or len(got) != n:
            owner = getattr(values, "__self__", values)
            rule = f"expected a tuple of {n} values, one per column of its event_columns"
            raise returned_fault(owner, values, got, rule, f"the algorithm {type(owner).__name__}")
        return got

    return checked


def _table(rows: Sequence[dict], columns: Sequence[str]):
    """A file's rows as lists of their values in ``columns``' order: a run's :class:`RoundRows` as kept, other rows
    (dicts) read by column."""
    if isinstance(rows, RoundRows) and rows.columns == tuple(columns):
        return rows.table()
    return ([row[c] for c in columns] for row in rows)


def write_results(
    result: RunResult, out_dir: Path, plots: bool = True, force: bool = False, plot_format: str = "png"
) -> Path:
    """Write metrics.csv, clients.csv, events.csv, summary.json, scenario.toml and plots (``plot_format``: png,
    pdf or svg, edgefl.figures)."""
    out_dir = Path(out_dir)
    with atomic_directory(out_dir, force) as tmp:
        columns = metric_columns(result.metrics)
        write_csv(tmp / "metrics.csv", columns, ([row.get(c) for c in columns] for row in result.metrics))
        client_columns = CLIENT_COLUMNS + [c for c in CELL_COLUMNS if result.clients and c in result.clients[0]]
        write_csv(tmp / "clients.csv", client_columns, ([row[c] for c in client_columns] for row in result.clients))
        event_columns, event_rows = event_table(result)
        write_csv(tmp / "events.csv", event_columns, event_rows)
        write_json(tmp / "summary.json", result.summary)
        for name, columns, rows in (
            ("positions.csv", POSITION_COLUMNS, result.positions),
            ("battery.csv", BATTERY_COLUMNS, result.battery),
        ):
            if rows:
                write_csv(tmp / name, list(columns), _table(rows, columns))
        with open(tmp / "scenario.toml", "wb") as handle:  # paths relative to out_dir, where it will be
            tomli_w.dump(resolved_dict(result.scenario, out_dir), handle)
        if plots:
            from edgefl.plots import plot_run  # matplotlib: slow to import, loaded only when figures are drawn

            plot_run(
                tmp,
                result.metrics,
                result.clients,
                title=result.scenario.title(),
                battery=result.battery,
                events=result.events,
                positions=result.positions,
                scenario=result.scenario,
                fmt=plot_format,
            )
    if is_checkpoint(checkpoint_file(out_dir)):  # the run's checkpoint, if any: the results are complete
        checkpoint_file(out_dir).unlink(missing_ok=True)
    return out_dir
