"""Per-client algorithm state stored compactly.

Many algorithms keep a vector per client (SCAFFOLD's control variate c_i, FedDyn's and
DRDM's gradient state g_i). With N = 10,000 clients of which few ever participate, a
dense [N, d] matrix wastes memory; :class:`ClientStore` keeps a row only for clients
that were written and reads zeros for the others. The sum over all N clients (for means
like c = (1/N) * sum_i g_i) is summed from the written rows in float64 when asked, and kept
until the next ``set``: the algorithms here keep such sums themselves, so a round's ``set``
costs no reduction (the Figure-4 study: DRDM writes 20 rows of 7,850 each round).

Layout: one ``[capacity, d]`` table of the written rows (grown by doubling) and a sorted
index of the written clients with their row slots (16 bytes per written client, found
with ``searchsorted``). ``get`` and ``set`` of C clients are a few vectorised ops, no
Python loop over clients.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # torch is imported where it is used: validating a scenario must not load it (docs/architecture.md)
    import torch


class ClientStore:
    def __init__(self, num_clients: int, dim: int, dtype: torch.dtype | None = None):  # None: float32
        import torch

        self.num_clients = num_clients
        self.dim = dim
        self.dtype = torch.float32 if dtype is None else dtype
        self._keys = np.zeros(0, dtype=np.int64)  # written client ids, sorted
        self._key_slot = np.zeros(0, dtype=np.int64)  # their rows in _table
        self._table = torch.zeros(0, dim, dtype=self.dtype)
        self._used = 0
        self._sum: torch.Tensor | None = torch.zeros(dim, dtype=torch.float64)  # sum of the rows; None: not summed

    def _ids(self, clients) -> np.ndarray:
        ids = np.asarray(clients, dtype=np.int64).reshape(-1)
        if len(ids) and (ids.min() < 0 or ids.max() >= self.num_clients):
            bad = ids[(ids < 0) | (ids >= self.num_clients)][0]
            raise IndexError(f"client {int(bad)} out of range 0..{self.num_clients - 1}")
        return ids

    def _slots(self, ids: np.ndarray) -> np.ndarray:
        """Row slot of each client id, -1 where never written."""
        if not len(self._keys):
            return np.full(len(ids), -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self._keys, ids), len(self._keys) - 1)
        return np.where(self._keys[pos] == ids, self._key_slot[pos], -1)

    def get(self, clients) -> torch.Tensor:
        """Rows for ``clients`` as a new [C, d] tensor (zeros where never written)."""
        import torch

        slots = self._slots(self._ids(clients))
        written = slots >= 0
        if written.all():  # (every client written, as soon as all have taken part: one gather)
            return self._table.index_select(0, torch.from_numpy(slots))
        out = torch.zeros(len(slots), self.dim, dtype=self.dtype)
        if written.any():
            out[torch.from_numpy(written)] = self._table.index_select(0, torch.from_numpy(slots[written]))
        return out

    def set(self, clients, rows: torch.Tensor) -> None:
        """Overwrite the rows of ``clients`` with ``rows`` [C, d] (clients without duplicates)."""
        import torch

        ids = self._ids(clients)
        if rows.shape != (len(ids), self.dim):
            raise ValueError(f"expected rows of shape {(len(ids), self.dim)}, got {tuple(rows.shape)}")
        if len(np.unique(ids)) != len(ids):
            raise ValueError("ClientStore.set: duplicate client ids")
        new = rows.detach().to(self.dtype)
        slots = self._slots(ids)
        fresh = slots < 0
        count = int(fresh.sum())
        if count:
            self._reserve(self._used + count)
            slots[fresh] = np.arange(self._used, self._used + count)
            keys = np.concatenate([self._keys, ids[fresh]])
            order = np.argsort(keys, kind="stable")
            self._keys, self._key_slot = keys[order], np.concatenate([self._key_slot, slots[fresh]])[order]
            self._used += count
        # numpy's row copies where it can (a third of index_copy_'s time for 20 rows of 7,850)
        if new.device.type == "cpu" and self.dtype in (torch.float32, torch.float64):
            self._table.numpy()[slots] = new.numpy()
        else:
            self._table.index_copy_(0, torch.from_numpy(slots), new)
        self._sum = None  # (summed again when asked)

    def _reserve(self, needed: int) -> None:
        import torch

        if needed <= self._table.shape[0]:
            return
        capacity = min(self.num_clients, max(needed, 2 * self._table.shape[0]))
        table = torch.zeros(capacity, self.dim, dtype=self.dtype)
        table[: self._used] = self._table[: self._used]
        self._table = table

    def _summed(self) -> torch.Tensor:
        """sum_i row_i over the written rows [d] in float64 (the others are zeros), kept until the next ``set``."""
        import torch

        if self._sum is None:
            self._sum = self._table[: self._used].sum(dim=0, dtype=torch.float64)
        return self._sum

    def sum(self) -> torch.Tensor:
        """sum_i row_i over all N clients [d] (float64 accumulated, returned in dtype)."""
        return self._summed().to(self.dtype)

    def mean(self) -> torch.Tensor:
        """(1/N) sum_i row_i over all N clients, untouched clients counting as zero."""
        return (self._summed() / self.num_clients).to(self.dtype)

    def __len__(self) -> int:
        return self._used

    def nbytes(self) -> int:
        """Bytes of the row table (allocated capacity) and the sum (d float64, once summed); the index adds
        16 bytes per written client (not counted)."""
        import torch

        element = torch.tensor([], dtype=self.dtype).element_size()
        return self._table.shape[0] * self.dim * element + self.dim * 8
