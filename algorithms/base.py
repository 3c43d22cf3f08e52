"""What every algorithm is given (:class:`Context`) and what it must provide (:class:`Algorithm`).

An algorithm file reads like the paper: server state in ``__init__``, one round in
``round()`` as a generator of operations (see :mod:`algorithms.ops`), one client's
local step as a plain function of one client's flat parameter vector. It imports torch
and numpy, never the simulator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterator

import numpy as np
from pydantic import BaseModel, ConfigDict

from algorithms.ops import Op

if TYPE_CHECKING:  # torch is imported by the code that trains, not by the scenario's validation (edgefl run)
    import torch


class HyperParams(BaseModel):
    """An algorithm's own scenario keys (``[algorithm]`` section, besides the common ones).

    Subclass it with typed fields and defaults; unknown keys are rejected.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


@dataclass
class Context:
    """Everything an algorithm may know about the run. No time, no energy."""

    num_clients: int  # N
    dim: int  # d, number of model parameters
    init_params: torch.Tensor  # [d], the seeded initial model w^(0)
    train_sizes: np.ndarray  # [N], d_i samples per client
    local_steps: int  # tau
    clients_per_round: int  # m
    lr: float  # eta (local step size)
    batch_size: int  # B
    bits_per_param: int  # payload bits of one parameter (32 for fp32)
    rng: np.random.Generator  # the algorithm's own random stream (client sampling, t', ...)
    hp: Any  # the algorithm's HyperParams instance
    # Optional: each client's role, e.g. "priority" / "non_priority" (prioritized FL),
    # and the model's parameter layout [(name, shape), ...] in flat-vector order (partitions
    # of the vector by tensor, e.g. partial model averaging). None where the run has none.
    client_roles: np.ndarray | None = None
    # Several cells (network.cells > 1): each client's serving cell, its edge server (int [N]; set by the engine at
    # each round's start, so it follows handovers). None in a single cell.
    client_cells: np.ndarray | None = None
    # Whether servers at the edges (each cell's base station) aggregate apart from a cloud: several cells, or a
    # [backhaul] to the cloud (edgefl.parts decides it from the run's parts). False: one server.
    edge_servers: bool = False
    param_layout: list[tuple[str, tuple[int, ...]]] | None = None
    # Which clients are online at the start of the current round (bool [N]); set by the engine
    # each round when devices can be unavailable, None when every client always is.
    online: np.ndarray | None = None
    # Over-selection x (FedScale): select ceil(m (1 + x)) clients; the engine keeps the first m
    # uploads to arrive and stops the others.
    over_selection: float = 0.0
    # A client selection policy ([selection], edgefl.selection) for algorithms that accept one: k -> the k
    # clients it picks (its own seeded stream). None: uniform sampling with ``rng``, as without a policy.
    selector: Callable[[int], np.ndarray] | None = None

    def selection_size(self, m: int) -> int:
        """How many clients to select for m participants: ceil(m (1 + over_selection))."""
        return m if self.over_selection == 0 else min(self.num_clients, math.ceil(m * (1 + self.over_selection)))

    def sample(self, m: int, rng: np.random.Generator | None = None) -> np.ndarray:
        """``selection_size(m)`` distinct clients uniformly at random among those online (``rng``: the
        context's stream by default), sorted. With everyone online and no over-selection this is
        ``uniform_sample(rng, N, m)``."""
        if self.selector is not None:
            return self.selector(self.selection_size(m))
        rng = self.rng if rng is None else rng
        m = self.selection_size(m)
        if self.online is None:
            return uniform_sample(rng, self.num_clients, m)
        ids = np.flatnonzero(self.online)
        return ids[uniform_sample(rng, len(ids), min(m, len(ids)))]

    def sample_idle(self, k: int, busy) -> np.ndarray:
        """Up to k distinct clients uniformly at random among those online and not in ``busy`` (an
        asynchronous server's clients in flight), sorted. With everyone online and idle this is
        ``uniform_sample(rng, N, k)``, the draw of :meth:`sample`."""
        idle = np.ones(self.num_clients, dtype=bool) if self.online is None else self.online.copy()
        idle[np.asarray(sorted(busy), dtype=np.int64)] = False
        ids = np.flatnonzero(idle)
        return ids[uniform_sample(self.rng, len(ids), min(k, len(ids)))]

    @property
    def model_bits(self) -> float:
        """Payload of one full model (or any d-vector), without headers."""
        return float(self.dim * self.bits_per_param)

    @property
    def scalar_bits(self) -> float:
        return float(self.bits_per_param)


class Algorithm:
    """Base class. Subclasses set ``name``, ``Params`` and implement ``round`` and ``model``."""

    name: ClassVar[str] = ""
    Params: ClassVar[type[HyperParams]] = HyperParams
    # Why update compression ([compression]) cannot apply to this algorithm's uploads; None: it applies
    # (to the vectors each Train op lists in ``uploads``).
    no_compression: ClassVar[str | None] = None
    # An asynchronous server (Dispatch / NextArrival ops): one round is one server update (model version);
    # its numerics depend on the order of arrivals, so a run's trace cannot be re-priced on another network.
    asynchronous: ClassVar[bool] = False
    # Whether a client selection policy ([selection] name, docs/selection.md) may choose the clients that
    # ctx.sample returns: True where the math does not depend on how clients are sampled.
    accepts_selection: ClassVar[bool] = False

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.hp = ctx.hp

    @classmethod
    def sums_uploads(cls, hp: HyperParams) -> bool:
        """Whether, with these hyperparameters, the server needs only the uniform mean of the parameters the
        clients upload after a Train (an over-the-air sum serves it: ``network.uplink = "aircomp"``). Default: no."""
        return False

    @classmethod
    def check_scenario(cls, scenario) -> None:
        """Raise ValueError when the validated scenario cannot run this algorithm (checked when the
        scenario is loaded, before any work). Default: every scenario fits."""

    def round(self, r: int) -> Iterator[Op]:  # pragma: no cover - interface
        """Run round ``r`` (0-based) as a generator of operations."""
        raise NotImplementedError(f"{type(self).__name__} does not define round(r)")

    @property
    def model(self) -> torch.Tensor:  # pragma: no cover - interface
        """The current global model [d]: what is evaluated after each round."""
        raise NotImplementedError(f"{type(self).__name__} does not define the property model")

    def metrics(self) -> dict[str, float]:
        """Extra per-round numbers for metrics.csv (e.g. the entropy of lambda), after the evaluation's."""
        return {}

    # What it reports, typed and declared as a component does (edgefl.sim.component; docs/extending.md):
    # ``columns``, the metrics.csv columns it adds right after the round's time and energy, before the components'
    # (name -> what it holds), whose values ``report()`` returns after every round, every column in that order;
    # ``event_columns``, the events.csv columns it adds (name -> what it holds), whose values for one activity
    # ``event_values(event)`` returns. An instance sets them in ``__init__`` where they depend on the run (HierFAVG:
    # with edge servers only). None by default.
    columns: dict[str, str] = {}
    event_columns: dict[str, str] = {}

    def report(self) -> dict[str, float]:
        """The values of its ``columns`` after a round."""
        return {}

    def event_values(self, event) -> tuple:
        """The values of its ``event_columns`` for one activity of events.csv (edgefl.sim.activities)."""
        return ()


def uniform_sample(rng: np.random.Generator, num_clients: int, m: int) -> np.ndarray:
    """m distinct clients, uniformly at random, sorted (sorting keeps batches deterministic)."""
    return np.sort(rng.choice(num_clients, size=m, replace=False))


def weighted_mean(rows: torch.Tensor, weights: np.ndarray | torch.Tensor | None = None) -> torch.Tensor:
    """Average of the rows of ``rows`` [k, d] with non-negative ``weights`` [k] (None: uniform)."""
    import torch

    if weights is None:
        return rows.mean(dim=0)
    if isinstance(weights, torch.Tensor) and weights.dtype == rows.dtype:
        w = weights  # (made by the caller once for several means)
    else:
        w = torch.as_tensor(np.asarray(weights, dtype=np.float64), dtype=rows.dtype)
    return (w[:, None] * rows).sum(dim=0) / w.sum()
