"""The op interpreter: runs an algorithm's round, does the numerics, has a pricer charge it.

Broadcast, Train and Evaluate only append activities to each client's chain for the
current phase (Train/Evaluate results are computed at once: numerics do not depend on
time). Upload closes the phase: the pricer simulates every pending chain and reports
who finished, which is the Upload's result. Query = Broadcast + Evaluate + Upload.

An asynchronous server (FedAsync, FedBuff) is the same round generator, a process among the others:
``Dispatch`` fixes its clients' training (their minibatches drawn now) and has the pricer start their
download -> compute -> upload chains (``start_chains``: no simulated time passes); ``NextArrival`` lets
simulated time pass until the next of them ends (``next_arrival``) and hands its result to the
algorithm. One round is one server update (one model version); the chains run on across rounds. A chain's
result is needed only when it ends, so the chains dispatched since the last training are trained then, together
(:meth:`Engine.settle`): a server that refills one slot per arrival trains about ``concurrency`` clients per
executor call, not one.

With ``record_trace`` the phases are kept, so the same learning run can be re-priced on
another channel (:func:`reprice`) without training again.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np
import torch

from algorithms.base import Algorithm
from algorithms.ops import Arrival, Broadcast, Dispatch, Evaluate, NextArrival, Query, Train, Upload
from edgefl.compression import Compressor
from edgefl.control.steering import FixedKnobs
from edgefl.executor import Executor
from edgefl.plugins import PluginError
from edgefl.seed_axis import train_together
from edgefl.sim.activities import Activity, Event, PhaseRecord
from energy import EnergyLedger

if TYPE_CHECKING:
    from edgefl.executor import PreparedTrain
    from edgefl.selection import NoPolicy


class Pricer(Protocol):
    """What the op interpreter needs from an engine that charges phases (SimPyPricer, IdealPricer)."""

    ledger: EnergyLedger  # energy by client and category, so far
    events: list[Event] | None  # every activity as it happened (events.csv), if recorded
    can_change_participation: bool  # can the channel decide who arrives?
    journal: list | None  # the state-changing calls received, when a run checkpoints (edgefl.sim.journal)

    @property
    def now(self) -> float: ...  # simulated time, s

    def price_phase(self, phase: PhaseRecord) -> dict[int, bool]: ...  # who completed their chain

    def start_chains(self, phase: PhaseRecord) -> None: ...  # start the phase's chains now; return at once

    @property
    def analog_uplink(self) -> bool: ...  # uploads arrive as an analog sum (over-the-air computation)

    def superpose(self, updates, clients=None): ...  # the arrived updates [K, d] (of clients [K]) as received

    def next_arrival(self) -> tuple[int, bool] | None: ...  # wait for the next of them to end: (client, completed)

    def arrived_by_now(self) -> bool: ...  # another of them has ended and next_arrival has not returned it

    def start_round(self, needed: int) -> np.ndarray | None: ...  # devices move, wait; who is online (None: all)

    def battery_levels(self) -> np.ndarray | None: ...  # every device's level (J) now; None: no batteries

    def positions_m(self) -> np.ndarray | None: ...  # every device's (x, y) in m; None: nobody moves

    def device_value(self, name: str) -> np.ndarray | None: ...  # a per-device value a component keeps (None: none)

    columns: dict[str, str]  # the metrics.csv columns the components add

    def component_metrics(self) -> dict[str, float]: ...  # their values at the end of a round

    def serving_cells(self) -> np.ndarray | None: ...  # every device's serving cell now; None: as dropped

    def allocate(self, allocation) -> None: ...  # a controller's knobs for the next phase (None: nominal)

    def end_round(self, round_: int) -> None: ...  # the round ends: what runs on (radio tails) is charged so far

    def finish(self) -> None: ...  # the run ends: what still runs on (radio tails) is charged

    def committed_energy_j(self) -> float: ...  # J committed at the last round's end: booked + what runs on

    def round_end_energy(self, round_: int) -> tuple[dict[str, float], float]: ...  # at its end: by category, committed


@dataclass
class InFlight:
    """A dispatched chain running: where it started from and the result it carries (its numerics fixed at dispatch,
    computed by the time it ends: Engine.settle)."""

    version: int
    start: torch.Tensor  # [d]
    params: torch.Tensor | None = None  # [d]; None: not trained yet
    carry: dict[str, torch.Tensor] = field(default_factory=dict)


@dataclass
class ChainEnd:
    """A dispatched chain that ended (events.csv's model_version and staleness of its upload)."""

    round: int  # the engine's round (0-based) when it ended
    client: int
    end_s: float  # simulated time it ended
    version: int
    staleness: int
    arrived: bool


@dataclass
class RoundRecord:
    round: int
    end_s: float  # simulated time at the end of the round
    uploads_arrived: int = 0
    uploads_missed: int = 0
    phases: list[PhaseRecord] = field(default_factory=list)


class Engine:
    def __init__(
        self,
        executor: Executor,
        pricer: Pricer,
        header_bits: float = 0.0,
        record_trace: bool = False,
        *,
        compressor: Compressor,
        steering: FixedKnobs,
        selection: NoPolicy,
    ):
        """The run's parts (edgefl.parts), null objects where there is nothing to do: ``compressor``, update
        compression (edgefl.compression: Train results and Upload bits; the base Compressor sends them as they
        are); ``steering``, a controller's plan for each round (τ, τ_i, participants) and resources for each phase
        (CPU, power, band shares) (edgefl.control.steering; FixedKnobs: the scenario's knobs); ``selection``, a
        client selection policy behind Context.sample (edgefl.selection; NoPolicy: the algorithm samples)."""
        self.executor = executor
        self.compressor, self.steering, self.selection = compressor, steering, selection
        self._trained: tuple | None = None  # the phase's Train (op, result), for an analog uplink
        self.pricer = pricer
        self.header_bits = float(header_bits)
        self.record_trace = record_trace
        self.trace: list[PhaseRecord] = []
        num = pricer.ledger.num_clients
        self.selected_count = np.zeros(num, dtype=np.int64)  # times a client was given training work
        self.arrived_count = np.zeros(num, dtype=np.int64)  # uploads that arrived
        self.missed_count = np.zeros(num, dtype=np.int64)  # uploads cut off or lost
        self.in_flight: dict[int, InFlight] = {}  # an asynchronous server's dispatched chains, by client
        self.chain_ends: list[ChainEnd] = []  # ... and those that ended, in order
        self.concurrency: int | None = None  # ... and the most of them running at once (Dispatch.concurrency)
        self._untrained: list[tuple[Train, PreparedTrain, list[InFlight]]] = []  # ... dispatched, not trained yet

    def run_round(self, algorithm: Algorithm, r: int) -> RoundRecord:
        # Devices move; where they can be offline, the server waits until enough are online, and
        # the algorithm samples among them (Context.online).
        self._ctx = algorithm.ctx
        self._algorithm = algorithm
        algorithm.ctx.online = self.pricer.start_round(algorithm.ctx.clients_per_round)
        cells = self.pricer.serving_cells() if algorithm.ctx.client_cells is not None else None
        if cells is not None:  # several cells: a client's edge is its serving cell at the round's start (handovers)
            algorithm.ctx.client_cells = cells
        self.steering.start_round(algorithm.ctx, r)
        self._record = RoundRecord(round=r, end_s=self.pricer.now)
        self._phase = PhaseRecord(round=r, phase=0)
        self.selection.start_round(self, algorithm, r)  # what the policy knows now; the loss queries it asks, charged
        rounds = algorithm.round(r)
        if not inspect.isgenerator(rounds):  # a plug-in's round() that returns instead of yielding
            raise PluginError(
                f"the plug-in {_named(algorithm)}: its round({r}) returned {type(rounds).__name__}, expected a "
                "generator of operations (round(r) yields Broadcast, Train, Upload, ... of algorithms.ops)"
            )
        reply = None
        while True:
            try:
                op = rounds.send(reply)  # type: ignore[arg-type]  # round(r) is typed Iterator[Op]: it is a generator
            except StopIteration:
                break
            reply = self._handle(op)
        self._close_phase()  # trailing broadcasts etc.
        self.pricer.end_round(r)
        self._record.end_s = self.pricer.now
        return self._record

    # -- operations -------------------------------------------------------------------
    def _handle(self, op):
        if isinstance(op, Broadcast):
            for client, bits in zip(op.clients, self._per_client(op.bits, op.clients)):
                self._add(client, Activity("download", "broadcast", bits=bits + self.header_bits))
            return None
        if isinstance(op, Train):
            op = self.steering.train_op(op)  # a controller's step budgets τ_i
            result = self._trained_result(op, self.executor.train(op))
            self._trained = (op, result)  # an analog uplink adds its noise to it when the upload arrives
            self._charge_training(op, result.steps_done)
            return result
        if isinstance(op, Evaluate):
            values = self.executor.evaluate(op)
            work = "eval" if op.what == "loss" else "train"
            for client, samples in zip(op.clients, self.executor.samples_evaluated(op)):
                self._add(client, Activity("compute", "evaluate", samples=float(samples), work=work))
            return values
        if isinstance(op, Upload):
            for client, bits in zip(op.clients, self._upload_bits(op)):
                self._add(client, Activity("upload", "upload", bits=bits + self.header_bits))
            m = self._ctx.clients_per_round
            if self._ctx.over_selection > 0 and len(op.clients) > m:
                self._phase.needed = m  # the first m uploads to arrive; the others are stopped
            completed = self._close_phase()
            arrived = np.array([completed.get(int(c), False) for c in op.clients], dtype=bool)
            if self.pricer.analog_uplink and arrived.any():
                self._superpose(op.clients[arrived])
            self._trained = None
            self.arrived_count[op.clients[arrived]] += 1
            self.missed_count[op.clients[~arrived]] += 1
            self._record.uploads_arrived += int(arrived.sum())
            self._record.uploads_missed += int((~arrived).sum())
            return arrived
        if isinstance(op, Dispatch):
            self._dispatch(op)
            return None
        if isinstance(op, NextArrival):
            return self._next_arrival()
        if isinstance(op, Query):
            broadcast, evaluate, upload = op.expand()
            self._handle(broadcast)
            values = self._handle(evaluate)
            return values, self._handle(upload)
        raise PluginError(
            f"the plug-in {_named(getattr(self, '_algorithm', None))}: its round(r) yielded {type(op).__name__} ({op!r:.80}), not an "
            "operation: round(r) yields Broadcast, Train, Evaluate, Upload, Query, Dispatch or NextArrival (algorithms.ops)"
        )

    # -- an asynchronous server ---------------------------------------------------------------
    def _dispatch(self, op: Dispatch) -> None:
        """Train the clients now (numerics do not depend on time) and start their chains: download,
        train, upload, as one phase of their own (logged under the round in progress as each ends)."""
        busy = [c for c in op.clients.tolist() if c in self.in_flight]
        if busy:
            raise PluginError(
                f"{_named(self._algorithm)}: Dispatch of client {busy[0]}, whose dispatched chain is still running "
                "(a client has at most one: wait for its NextArrival)"
            )
        if self._phase.chains:
            raise PluginError(
                f"{_named(self._algorithm)}: Dispatch after Broadcast/Train/Evaluate without an Upload: an "
                "asynchronous server's chains are Dispatch ops alone"
            )
        self._handle(Broadcast(op.train.clients, op.down_bits))
        train = self.steering.train_op(op.train)  # a controller's step budgets τ_i
        prepared = self.executor.prepare(train)  # its minibatches drawn now, in dispatch order (trained: settle)
        self._charge_training(train, prepared.steps_done)
        for client, bits in zip(train.clients, self._upload_bits(Upload(train.clients, op.up_bits))):
            self._add(client, Activity("upload", "upload", bits=bits + self.header_bits))
        # each chain's start [d]: the one start shared by the clients (as a row of it repeated: the same tensor), or
        # its own row
        n, start = len(train.clients), train.start
        starts = [start] * n if start.dim() == 1 else [start[k] for k in range(n)]
        chains_of = [InFlight(op.version, row) for row in starts]
        self.in_flight.update(zip(train.clients.tolist(), chains_of))
        self._untrained.append((train, prepared, chains_of))
        chains = self._phase
        self._phase = PhaseRecord(round=chains.round, phase=chains.phase + 1)
        chains.sharers = self._concurrency(op)
        self.steering.allocate(chains, self._ctx.online)
        self.pricer.start_chains(chains)

    def _concurrency(self, op: Dispatch) -> int:
        """The most chains in flight at once, as the run's Dispatch ops declare it (checked)."""
        declared = self._ctx.num_clients if op.concurrency is None else int(op.concurrency)
        if self.concurrency is None:
            self.concurrency = declared
        if declared != self.concurrency or len(self.in_flight) > declared:
            raise PluginError(
                f"{_named(self._algorithm)}: Dispatch with concurrency {op.concurrency} and {len(self.in_flight)} "
                f"chains in flight; the run's first Dispatch declared {self.concurrency}: every Dispatch declares the "
                "same bound, and no more chains run at once"
            )
        return declared

    def _next_arrival(self) -> Arrival | None:
        """Simulated time passes until the next dispatched chain ends; its result, version and staleness."""
        ended = self.pricer.next_arrival()
        if ended is None:
            return None
        client, arrived = ended
        chain = self.in_flight.pop(client)
        if chain.params is None:
            self.settle()
        assert chain.params is not None  # (trained now)
        r = self._record.round
        staleness = r - chain.version
        self.chain_ends.append(ChainEnd(r, client, float(self.pricer.now), chain.version, staleness, arrived))
        if arrived:
            self.arrived_count[client] += 1
            self._record.uploads_arrived += 1
        else:
            self.missed_count[client] += 1
            self._record.uploads_missed += 1
        return Arrival(
            client,
            arrived,
            chain.version,
            staleness,
            chain.start,
            chain.params,
            chain.carry,
            more_now=self.pricer.arrived_by_now(),
        )

    def settle(self) -> None:
        """Train the dispatched chains not trained yet, together (edgefl.seed_axis.train_together: one batched call
        for those whose Train ops can be stacked), and compress their results, in the order they were dispatched.
        Their minibatches were drawn at dispatch: the results are those of training each Dispatch at once, to the
        byte where the CPU's matrix products round a row alike whatever rows are beside it (MNIST's linear and MLP
        models on one thread, tests/test_async.py), else within 1e-6 (several threads, or a model's small products:
        their last bits, as on the seed axis). Called
        when a chain not trained yet ends, and by the runner at every ``run.checkpoint_every`` rounds (a checkpoint
        holds the chains trained: which ones are stacked together is then the same whether it is written or not)."""
        untrained, self._untrained = self._untrained, []
        results, _ = train_together([(self.executor, prepared) for _, prepared, _ in untrained])
        for (op, _, chains), result in zip(untrained, results):
            if isinstance(result, BaseException):
                raise result
            result = self._trained_result(op, result)
            for k, chain in enumerate(chains):
                chain.params, chain.carry = result.params[k], {name: value[k] for name, value in result.carry.items()}

    def __getstate__(self) -> dict:
        """A pickled engine (a checkpoint) holds its dispatched chains trained (:meth:`settle`)."""
        self.settle()
        return self.__dict__

    def _trained_result(self, op: Train, result):
        """A Train op's result as the clients upload it (compressed: :meth:`_compress`)."""
        if self.compressor.changes_updates:
            self._compress(op, result)
        return result

    def _charge_training(self, op: Train, steps_done) -> None:
        """The op's clients were given training work: each one's computation, of ``steps_done`` minibatches."""
        batch = op.batch_size or self.executor.batch_size
        self.selected_count[op.clients] += 1
        for client, steps in zip(op.clients, steps_done):
            self._add(client, Activity("compute", "train", samples=float(steps * batch), work="train"))

    def _compress(self, op: Train, result) -> None:
        """The server receives start + C(v − start), not v, for every vector v the clients upload
        (``op.uploads``: the parameters, DRDM's/DRFA's snapshot, or a carried vector such as FedDA's dual
        z, relative to its start). What is not compressed: downloads, Evaluate/Query results, scalar
        uploads; an algorithm's quantities derived from the compressed vector (SCAFFOLD's control
        variate) follow from it."""

        for name in op.uploads:
            if name == "params":
                start = _start_rows(op.start, len(op.clients))
                result.params = start + self.compressor.compress(result.params - start, op.clients, name)
            elif name == "snapshot":
                if result.snapshot is not None:
                    start = _start_rows(op.start, len(op.clients))
                    result.snapshot = start + self.compressor.compress(result.snapshot - start, op.clients, name)
            else:
                start = _start_rows(op.carry[name], len(op.clients)).to(result.carry[name].dtype)
                result.carry[name] = start + self.compressor.compress(result.carry[name] - start, op.clients, name)

    def _superpose(self, arrived: np.ndarray) -> None:
        """Over-the-air computation: the server receives the arrived clients' updates as an analog sum plus
        noise (the pricer's ``superpose``), and the algorithm aggregates what it received: each arrived row of
        the phase's Train result becomes start + its update as received (algorithms that need only the
        uniform mean of the uploaded parameters: Algorithm.sums_uploads)."""
        if self._trained is None:  # no Train in the phase: nothing of the model was sent
            return
        op, result = self._trained
        row_of = {int(c): i for i, c in enumerate(op.clients)}
        kept = np.array([int(c) for c in arrived if int(c) in row_of], dtype=np.int64)
        rows = torch.as_tensor([row_of[c] for c in kept.tolist()], dtype=torch.long)
        if len(rows) == 0:
            return
        start = _start_rows(op.start, len(op.clients))[rows].to(result.params.dtype)
        result.params[rows] = start + self.pricer.superpose(result.params[rows] - start, kept)

    def _upload_bits(self, op: Upload) -> np.ndarray:
        """Each client's payload, as the compressor sends it (Compressor.upload_bits)."""
        bits = self._per_client(op.bits, op.clients)
        return self.compressor.upload_bits(bits, op.vectors, self._ctx.model_bits, self._ctx.dim)

    @staticmethod
    def _per_client(bits, clients) -> np.ndarray:
        if isinstance(bits, (int, float)):  # (one payload for all: without broadcast_to's cost, per Dispatch: [8])
            return np.full(len(clients), bits, dtype=float)
        return np.broadcast_to(np.asarray(bits, dtype=float), (len(clients),))

    def _add(self, client, activity: Activity) -> None:
        self._phase.chains.setdefault(int(client), []).append(activity)

    def _close_phase(self) -> dict[int, bool]:
        phase = self._phase
        self._phase = PhaseRecord(round=phase.round, phase=phase.phase + 1)
        if not phase.chains:
            return {}
        if self.record_trace:
            self.trace.append(phase)
        self.steering.allocate(phase, self._ctx.online)
        return self.pricer.price_phase(phase)


def reprice(trace: list[PhaseRecord], pricer: Pricer) -> list[float]:
    """Charge a recorded trace with another pricer (e.g. another channel).

    Exact (identical to a full co-simulation) when that pricer cannot change who
    participates: no deadline, no outage. Returns the simulated end time of every round.
    """
    return [cost.end_s for cost in reprice_rounds(trace, pricer)]


@dataclass
class RoundCost:
    """A round as re-priced: its end time and the energy spent so far (cumulative)."""

    round: int  # 0-based, as RoundRecord.round
    end_s: float  # simulated time at the end of the round
    energy_by_category_j: dict[str, float]  # booked, cumulative since the start of the run, all clients
    committed_energy_j: float  # committed at the round's end (booked + what runs on: docs/model.md §8)


def reprice_rounds(trace: list[PhaseRecord], pricer: Pricer) -> list[RoundCost]:
    """:func:`reprice`, keeping per round what a co-simulation's metrics.csv holds: the end
    time and the ledger's cumulative energy by category after the round's last phase.
    Rounds without any phase are absent (their cost equals the previous round's). The pricer runs
    the same SimPy model as a co-simulation, only without training."""
    check_exact(trace, pricer)
    ends: dict[int, float] = {}  # round -> the time it ended
    for k, phase in enumerate(trace):
        pricer.price_phase(phase)
        if k + 1 == len(trace) or trace[k + 1].round != phase.round:  # the round's last phase
            pricer.end_round(phase.round)  # as the co-simulation's Engine does
            if k + 1 == len(trace):  # the run's end: radio tails still running are charged, as a co-simulation does
                pricer.finish()
            ends[phase.round] = pricer.now
    # Each round's energy read once the trace is priced (the numbers at its end: the ledger books a few batches
    # instead of one per round, benchmarks [5]); the last round's with the tails that finish charged.
    costs = []
    for r in sorted(ends):
        by_category, committed_j = pricer.round_end_energy(r)
        if r == trace[-1].round:
            by_category = pricer.ledger.by_category()
        costs.append(RoundCost(r, ends[r], by_category, committed_j))
    return costs


def check_exact(trace: list[PhaseRecord], pricer: Pricer) -> None:
    """A ValueError unless re-pricing ``trace`` with ``pricer`` is exact (:func:`reprice`)."""
    if pricer.can_change_participation or any(phase.needed is not None for phase in trace):
        raise ValueError(
            "re-pricing is exact only where the network cannot change who takes part (no deadline, "
            "packet errors, MCS outage, unavailable or failing devices, over-selection); co-simulate "
            "instead"
        )


def _start_rows(start: torch.Tensor, clients: int) -> torch.Tensor:
    """A Train op's start as one row per client: as it is when per client [C, d], else [d] repeated C times."""
    return start if start.dim() == 2 else start.unsqueeze(0).expand(clients, -1)


def _named(algorithm) -> str:
    cls = type(algorithm)
    return f"algorithm.name = '{cls.__module__}:{cls.__qualname__}'"
