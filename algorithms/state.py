"""Per-client algorithm state stored compactly.

Many algorithms keep a vector per client (SCAFFOLD's control variate c_i, FedDyn's and
DRDM's gradient state g_i). With N = 10,000 clients of which few ever participate, a
dense [N, d] matrix wastes memory; :class:`ClientStore` keeps a row only for clients
that were written, reads zeros for the others, and maintains the sum over all N
clients incrementally (in float64) so that means like c = (1/N) * sum_i g_i cost O(d).
"""

from __future__ import annotations

import numpy as np
import torch


class ClientStore:
    def __init__(self, num_clients: int, dim: int, dtype: torch.dtype = torch.float32):
        self.num_clients = num_clients
        self.dim = dim
        self.dtype = dtype
        self._rows: dict[int, torch.Tensor] = {}
        self._sum = torch.zeros(dim, dtype=torch.float64)

    def get(self, clients) -> torch.Tensor:
        """Rows for ``clients`` as a new [C, d] tensor (zeros where never written)."""
        clients = np.asarray(clients, dtype=np.int64).reshape(-1)
        out = torch.zeros(len(clients), self.dim, dtype=self.dtype)
        for k, client in enumerate(clients):
            row = self._rows.get(int(client))
            if row is not None:
                out[k] = row
        return out

    def set(self, clients, rows: torch.Tensor) -> None:
        """Overwrite the rows of ``clients`` with ``rows`` [C, d]."""
        clients = np.asarray(clients, dtype=np.int64).reshape(-1)
        if rows.shape != (len(clients), self.dim):
            raise ValueError(f"expected rows of shape {(len(clients), self.dim)}, got {tuple(rows.shape)}")
        for k, client in enumerate(clients):
            client = int(client)
            if not 0 <= client < self.num_clients:
                raise IndexError(f"client {client} out of range 0..{self.num_clients - 1}")
            new = rows[k].detach().to(self.dtype).clone()
            old = self._rows.get(client)
            if old is not None:
                self._sum -= old.to(torch.float64)
            self._sum += new.to(torch.float64)
            self._rows[client] = new

    def sum(self) -> torch.Tensor:
        """sum_i row_i over all N clients [d] (float64 accumulated, returned in dtype)."""
        return self._sum.to(self.dtype)

    def mean(self) -> torch.Tensor:
        """(1/N) sum_i row_i over all N clients, untouched clients counting as zero."""
        return (self._sum / self.num_clients).to(self.dtype)

    def __len__(self) -> int:
        return len(self._rows)

    def nbytes(self) -> int:
        element = torch.tensor([], dtype=self.dtype).element_size()
        return len(self._rows) * self.dim * element + self._sum.numel() * 8
