"""Per-client energy ledger: every joule the simulator charges, by client and category."""

from __future__ import annotations

import numpy as np

# Transmission only in uplink and downlink; a radio's promotion before a message and its tail after one are their
# own categories (docs/model.md §8).
CATEGORIES = ("compute", "uplink", "downlink", "idle", "promotion", "tail")
_INDEX = {name: k for k, name in enumerate(CATEGORIES)}
_FEW_ROWS = 8  # add_rows of at most this many rows adds them one by one


def _category_index(category: str) -> int:
    try:
        return _INDEX[category]
    except (KeyError, TypeError):
        raise ValueError(f"unknown energy category {category!r}; expected one of {CATEGORIES}") from None


class EnergyLedger:
    """Energy in J per client and category, a float64 array of shape [num_clients, len(CATEGORIES)].

    Columns follow ``CATEGORIES`` = (compute, uplink, downlink, idle, promotion, tail).
    """

    __slots__ = ("_j", "changes")

    def __init__(self, num_clients: int):
        num_clients = int(num_clients)
        if num_clients < 0:
            raise ValueError(f"num_clients must be >= 0, got {num_clients}")
        self._j = np.zeros((num_clients, len(CATEGORIES)), dtype=np.float64)
        self.changes = 0  # how many times it was written: a reader can tell that nothing changed since it last read

    @property
    def num_clients(self) -> int:
        return self._j.shape[0]

    def _check_client(self, client) -> int:
        c = int(client)
        if c != client or not 0 <= c < self.num_clients:
            raise IndexError(f"client {client!r} out of range [0, {self.num_clients})")
        return c

    def add(self, client: int, category: str, joules: float) -> None:
        """Charge ``joules`` (>= 0, finite) to ``client`` under ``category``."""
        k = _category_index(category)
        c = self._check_client(client)
        j = float(joules)
        if not (j >= 0 and np.isfinite(j)):
            raise ValueError(f"joules must be finite and >= 0, got {joules!r}")
        self._j[c, k] += j
        self.changes += 1

    def add_many(self, clients, category: str, joules) -> None:
        """Vectorised ``add``: charge ``joules`` (scalar or array aligned with ``clients``).

        Repeated client ids accumulate.
        """
        k = _category_index(category)
        clients = np.asarray(clients).reshape(-1)
        if clients.size and (
            not np.issubdtype(clients.dtype, np.integer) or clients.min() < 0 or clients.max() >= self.num_clients
        ):
            raise IndexError(f"client ids must be integers in [0, {self.num_clients})")
        j = np.broadcast_to(np.asarray(joules, dtype=np.float64), clients.shape)
        if np.any(~np.isfinite(j)) or np.any(j < 0):
            raise ValueError("joules must be finite and >= 0")
        np.add.at(self._j[:, k], clients, j)
        self.changes += 1

    def add_rows(self, clients, categories, joules, read_after=()) -> list[dict[str, float]]:
        """Charge rows of mixed categories: ``joules[k]`` to ``clients[k]`` under category index
        ``categories[k]`` (a column of ``CATEGORIES``), in one update. Repeated (client, category)
        cells accumulate in row order, as one ``add`` per row would. ``read_after``: row counts (ascending) after
        which :meth:`by_category` is read, as it would be after charging only those rows: returned in that order
        (a pricer's round ends within the rows, booked together)."""
        if np.ndim(joules) == 1 and len(joules) <= _FEW_ROWS and not len(read_after):
            self._add_few(clients, categories, joules)
            return []
        clients = np.asarray(clients).reshape(-1)
        categories = np.asarray(categories).reshape(-1)
        j = np.asarray(joules, dtype=np.float64).reshape(-1)
        if not (clients.shape == categories.shape == j.shape):
            raise ValueError("clients, categories and joules must have the same length")
        if clients.size and (clients.min() < 0 or clients.max() >= self.num_clients):
            raise IndexError(f"client ids must be integers in [0, {self.num_clients})")
        if categories.size and (categories.min() < 0 or categories.max() >= len(CATEGORIES)):
            raise IndexError(f"category indices must be in [0, {len(CATEGORIES)})")
        if not (np.all(np.isfinite(j)) and np.all(j >= 0)):
            raise ValueError("joules must be finite and >= 0")
        totals, start = [], 0
        for end in read_after:
            np.add.at(self._j, (clients[start:end], categories[start:end]), j[start:end])
            totals.append(self.by_category())
            start = end
        np.add.at(self._j, (clients[start:], categories[start:]), j[start:])
        self.changes += 1
        return totals

    def _add_few(self, clients, categories, joules) -> None:
        """:meth:`add_rows` of a few rows, one cell after another (the same additions in the same order as
        ``np.add.at``'s, without its per-call cost: a battery ask of an asynchronous run books 1-3 rows)."""
        clients, categories = np.asarray(clients).reshape(-1), np.asarray(categories).reshape(-1)
        joules = np.asarray(joules, dtype=np.float64).reshape(-1)
        if not (clients.shape == categories.shape == joules.shape):
            raise ValueError("clients, categories and joules must have the same length")
        self.add_cells(list(zip(clients.tolist(), categories.tolist(), joules.tolist())))

    def add_cells(self, rows: list[tuple[int, int, float]], read_after=()) -> list[dict[str, float]]:
        """:meth:`add_rows` of rows given as (client, category index, J) of plain ints and floats, one cell after
        another, in row order, as ``np.add.at`` adds them (a booking of a few log rows: benchmarks [8]; of a round's
        rows: benchmarks [3]). ``read_after``: as :meth:`add_rows`'s."""
        n, kinds, cells, inf = self.num_clients, len(CATEGORIES), self._j, np.inf
        for client, category, j in rows:
            if not (type(client) is int and 0 <= client < n and type(category) is int and 0 <= category < kinds):
                raise IndexError(
                    f"client ids must be integers in [0, {n})"
                    if type(client) is not int or not 0 <= client < n
                    else f"category indices must be in [0, {kinds})"
                )
            if not (0 <= j < inf):
                raise ValueError("joules must be finite and >= 0")
        # (each cell read as a float and written back: the same IEEE addition as ``+=`` on the array's cell, without
        # a numpy scalar made per row: ~33 rows per server update of benchmarks [8], a round's ~120 of [3])
        totals, start, cell = [], 0, cells.item
        for end in read_after:  # (after every check: nothing half-added)
            for client, category, j in rows[start:end]:
                cells[client, category] = cell(client, category) + j
            totals.append(self.by_category())
            start = end
        for client, category, j in rows[start:] if start else rows:
            cells[client, category] = cell(client, category) + j
        self.changes += 1
        return totals

    def merge(self, other: "EnergyLedger") -> None:
        """Add another ledger (same number of clients) into this one."""
        if other.num_clients != self.num_clients:
            raise ValueError(f"ledger sizes differ: {self.num_clients} vs {other.num_clients}")
        self._j += other._j
        self.changes += 1

    def by_category(self) -> dict[str, float]:
        """Total J per category, summed over clients."""
        sums = self._j.sum(axis=0)
        return {name: float(sums[k]) for k, name in enumerate(CATEGORIES)}

    def restore(self, per_client: np.ndarray) -> None:
        """Set every client's energy back to ``per_client`` (a copy taken with :meth:`per_client`)."""
        self._j[...] = per_client
        self.changes += 1

    def per_client(self) -> np.ndarray:
        """Copy of the [num_clients, len(CATEGORIES)] array of J, columns in ``CATEGORIES`` order."""
        return self._j.copy()

    def client_totals(self) -> np.ndarray:
        """Total J per client, shape [num_clients]."""
        return self._j.sum(axis=1)

    def total(self) -> float:
        """Total J over all clients and categories."""
        return float(self._j.sum())

    def copy(self) -> "EnergyLedger":
        new = EnergyLedger(0)
        new._j = self._j.copy()
        new.changes = self.changes
        return new

    def __repr__(self) -> str:
        parts = ", ".join(f"{k}={v:.4g} J" for k, v in self.by_category().items())
        return f"EnergyLedger(num_clients={self.num_clients}, {parts})"
