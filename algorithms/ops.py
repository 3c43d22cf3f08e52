"""Operations: how an algorithm describes one round to whatever engine runs it.

An algorithm's ``round()`` is a generator. It ``yield``s operations and receives each
operation's result back from the engine::

    yield Broadcast(selected, bits)                        # -> None
    result = yield Train(selected, start, steps, step, ...) # -> TrainResult (numerics)
    arrived = yield Upload(selected, bits)                  # -> bool mask: who made it
    values, arrived = yield Query(U, params, ...)           # -> (per-client values, mask)

An asynchronous server (FedAsync, FedBuff) does not wait for a phase: it dispatches work and reacts
to each upload as it arrives::

    yield Dispatch(Train(selected, x, steps, ...), version, down_bits, up_bits)  # -> None, at once
    arrival = yield NextArrival()                           # -> Arrival (or None: nothing in flight)

The algorithm never sees time or energy. The engine decides *how* to compute (batched
or one client at a time) and *what it costs* (SimPy co-simulation, or the ideal engine
at zero cost). ``Upload`` and ``Query`` are the points where the engine lets simulated
time pass: only then is it known who finished before the deadline.

Client sets are 1-D integer arrays of client ids (no duplicates). Bits may be one
number for every client or an array aligned with ``clients``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Literal, Mapping

import numpy as np

if TYPE_CHECKING:  # torch is imported by the code that trains, not by the scenario's validation
    from torch import Tensor

# One client's local step, written for ONE client and flat parameter vectors:
#   step(w, grad, carry, client, shared, k) -> (w_new, carry_new)
#   w, grad : Tensor[d]           current parameters and minibatch gradient at w
#   carry   : dict[str, Tensor]   per-client state carried across the steps of this op
#   client  : dict[str, Tensor]   per-client constants (e.g. control variate c_i)
#   shared  : dict[str, Tensor]   constants shared by all clients (e.g. lr, server model)
#   k       : int                 0-based index of this step
# The engine batches it (torch.func.vmap) or loops over clients; the algorithm does not care.
StepFn = Callable[
    ["Tensor", "Tensor", "dict[str, Tensor]", "dict[str, Tensor]", dict[str, Any], int],
    "tuple[Tensor, dict[str, Tensor]]",
]


def sgd_step(w, grad, carry, client, shared, k):
    """Plain SGD: w <- w - lr * grad (``shared['lr']``)."""
    return w - shared["lr"] * grad, carry


def _as_clients(clients) -> np.ndarray:
    arr = np.asarray(clients, dtype=np.int64).reshape(-1)
    if len(arr) > 1 and len(np.unique(arr)) != len(arr):  # (one client has no duplicate: an asynchronous server's ops)
        raise ValueError(f"an operation's client set has duplicates: {arr.tolist()}")
    return arr


class Op:
    """Base class of all operations."""

    clients: np.ndarray

    def __post_init__(self) -> None:
        self.clients = _as_clients(self.clients)


@dataclass
class Broadcast(Op):
    """Server -> clients downlink of ``bits`` each (one message per client)."""

    clients: np.ndarray
    bits: float | np.ndarray


@dataclass
class Upload(Op):
    """Clients -> server uplink of ``bits`` each. Result: bool mask aligned with
    ``clients``, True where the upload arrived before the deadline (and was not lost).
    ``vectors``: how many model-sized vectors of the message are updates that update compression
    shrinks (``[compression]``, docs/compression.md); None: ⌊bits / model_bits⌋. Set 0 for a message
    whose vectors are not Train results (e.g. an Evaluate gradient)."""

    clients: np.ndarray
    bits: float | np.ndarray
    vectors: int | None = None


@dataclass
class Train(Op):
    """``steps`` local steps on each client's own minibatches.

    ``start`` is one parameter vector ``[d]`` for everyone or ``[C, d]`` per client.
    ``record_at`` (1..steps) also returns each client's parameters after that many steps
    (DRDM's snapshot). ``step_mask`` ``[C, steps]`` (bool) switches individual steps off:
    a masked step leaves w and carry unchanged and costs no compute.
    ``uploads``: the vectors of the result the clients send to the server, which update compression
    replaces by start + C(result − start): "params", "snapshot" (if recorded) or a ``carry`` key
    (relative to its start value); () for a Train whose result stays on the clients.
    Result: :class:`TrainResult`.
    """

    clients: np.ndarray
    start: Tensor
    steps: int
    step: StepFn = sgd_step
    shared: Mapping[str, Any] = field(default_factory=dict)
    client_args: Mapping[str, Tensor] = field(default_factory=dict)
    carry: Mapping[str, Tensor] = field(default_factory=dict)
    record_at: int | None = None
    step_mask: Tensor | None = None
    batch_size: int | None = None  # None: the run's algorithm.batch_size
    uploads: tuple[str, ...] = ("params", "snapshot")


@dataclass
class TrainResult:
    params: Tensor  # [C, d] after the last step
    carry: dict[str, Tensor]  # [C, ...] final carried state
    snapshot: Tensor | None = None  # [C, d] after record_at steps
    steps_done: np.ndarray | None = None  # [C] steps actually computed (masks)


@dataclass
class Dispatch(Op):
    """Non-blocking: each of ``train.clients`` downloads the model (``down_bits``), runs ``train`` and
    uploads its result (``up_bits``); the server goes on at once. ``version``: the server's model
    version that ``train.start`` is (the number of server updates so far). The numerics are fixed
    now (they do not depend on time); the result reaches the algorithm through :class:`NextArrival`.
    A client has at most one dispatched chain running. ``concurrency``: the most chains the server keeps
    running at once, the same in every Dispatch of a run (the network plans a shared band for that many
    uploads); None: every client. Result: None."""

    train: Train
    version: int
    down_bits: float | np.ndarray
    up_bits: float | np.ndarray
    concurrency: int | None = None
    clients: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.clients = self.train.clients


@dataclass
class NextArrival(Op):
    """Wait (simulated time passes) until the next dispatched chain ends. Result: :class:`Arrival`, or
    None when no dispatched chain is running."""

    clients: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


@dataclass
class Arrival:
    """One dispatched chain that ended. ``staleness``: the server updates made since it started, as the
    engine counts them (round r builds version r + 1 from version r, so an arrival taken in round r has
    staleness r − version). ``more_now``: another chain has ended by now (the next NextArrival returns it
    and no time passes; the pricer's ``arrived_by_now``): a server that fills its free slots when it is about to
    wait handles that one first."""

    client: int
    arrived: bool  # its whole chain got through; False: cut (deadline), lost, offline, ... (no update)
    version: int  # the model version it started from
    staleness: int
    start: Tensor  # [d] the model it started from
    params: Tensor  # [d] its parameters after training (what it uploaded)
    carry: dict[str, Tensor]  # its final carried state ([...] per key)
    more_now: bool = False


@dataclass
class Evaluate(Op):
    """Local evaluation at ``params`` ([d] or [C, d]) on one fresh minibatch per client
    (``full=True``: the client's whole training set). ``what`` picks the outputs:
    'loss' -> Tensor[C]; 'grad' -> Tensor[C, d]; 'loss_grad' -> (Tensor[C], Tensor[C, d]).
    Priced as forward passes ('loss') or forward+backward passes."""

    clients: np.ndarray
    params: Tensor
    what: Literal["loss", "grad", "loss_grad"] = "loss"
    full: bool = False
    batch_size: int | None = None


@dataclass
class Query(Op):
    """Broadcast ``params`` (``down_bits``), evaluate locally, upload ``up_bits``.

    A shorthand for Broadcast + Evaluate + Upload. Result: ``(values, arrived)`` where
    ``values`` is the Evaluate result for all ``clients`` and ``arrived`` the Upload mask.
    """

    clients: np.ndarray
    params: Tensor
    down_bits: float | np.ndarray
    up_bits: float | np.ndarray
    what: Literal["loss", "grad", "loss_grad"] = "loss"
    full: bool = False
    batch_size: int | None = None

    def expand(self) -> tuple[Broadcast, Evaluate, Upload]:
        return (
            Broadcast(self.clients, self.down_bits),
            Evaluate(self.clients, self.params, self.what, self.full, self.batch_size),
            Upload(self.clients, self.up_bits, vectors=0),  # evaluations: not compressed
        )
