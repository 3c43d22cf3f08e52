"""Update compression for any algorithm's uploads (``[compression]``; docs/compression.md).

The engine applies it to every vector a ``Train`` op lists in ``uploads``: a client's update
Δ = v_after − v_start (the parameters, DRDM's or DRFA's snapshot, the FedDA family's carried duals) is
replaced by C(Δ), so the server aggregates what it really received, and every model-sized update of an
``Upload`` (``Upload.vectors``) is charged :meth:`Compressor.bits` instead of d × bits_per_param bits.
Batched over the clients ([C, d] at once); one random stream of its own (seeded from run.seed), so a
seed gives the same numbers whichever executor trained.

- ``qsgd``: unbiased stochastic quantisation to b bits per value (Alistarh et al., "QSGD", NeurIPS
  2017): with s = 2^(b−1) − 1 levels, Q(v)_j = ‖v‖₂ · sign(v_j) · ξ_j / s, ξ_j = ⌊s|v_j|/‖v‖₂⌋ + 1 with
  probability s|v_j|/‖v‖₂ − ⌊s|v_j|/‖v‖₂⌋ (else + 0), so E[Q(v)] = v. Bits: 32 (the norm) + d·b
  (a sign and b − 1 bits of level each). b = 32 sends the floats themselves (no quantisation).
- ``topk``: the k = ⌈fraction·d⌉ entries of largest magnitude (Stich et al., "Sparsified SGD with
  memory", NeurIPS 2018), with error feedback: each client keeps what it did not send, e_i, and
  compresses e_i + Δ next time (Karimireddy et al., ICML 2019). Bits: k · (32 + ⌈log2 d⌉) (value and index).

What is not compressed: downloads; the gradients and losses of ``Evaluate``/``Query`` (SCAFF-PD's
gradient upload); scalar uploads (FedALIGN's, SCAFF-PD's loss); quantities an algorithm derives from the
compressed model (SCAFFOLD's control variate is computed from it). Algorithms whose uploads are not
updates (partial/periodic averaging: ``Algorithm.no_compression``) refuse it.
"""

from __future__ import annotations

import math

import numpy as np
import torch


class Compressor:
    """No compression (``none``): updates unchanged, d × bits_per_param bits per vector."""

    name = "none"
    resizes = False  # whether an upload's model-sized vectors change size (upload_bits)

    def __init__(self, num_clients: int, seed: int, bits_per_param: int = 32):
        self.num_clients = num_clients
        self.bits_per_param = bits_per_param
        state = np.random.SeedSequence([seed, 0xC0DE]).generate_state(1)[0]
        self.generator = torch.Generator().manual_seed(int(state))

    @property
    def changes_updates(self) -> bool:
        return False

    def compress(self, delta: torch.Tensor, clients: np.ndarray, slot: str) -> torch.Tensor:
        """C(Δ) for every row of ``delta`` [C, d] (client ``clients[i]``'s update; ``slot`` names which
        vector it is, e.g. "params" or "snapshot", for per-vector memory)."""
        return delta

    def bits(self, d: int) -> float:
        """Bits of one compressed d-vector."""
        return float(d * self.bits_per_param)

    def upload_bits(self, bits: np.ndarray, vectors: int | None, model_bits: float, d: int) -> np.ndarray:
        """Each client's payload of ``bits`` (an Upload's): its ``vectors`` (default ⌊bits / model_bits⌋)
        model-sized updates at :meth:`bits`, the rest (scalars, evaluations) unchanged; as they are without
        compression."""
        if not self.resizes:
            return bits
        counted = np.floor(bits / model_bits + 1e-9) if vectors is None else np.full(len(bits), float(vectors))
        return counted * self.bits(d) + (bits - counted * model_bits)


class QSGD(Compressor):
    name = "qsgd"
    resizes = True

    def __init__(self, num_clients: int, seed: int, bits: int, bits_per_param: int = 32):
        super().__init__(num_clients, seed, bits_per_param)
        self.b = int(bits)
        self.levels = 2 ** (self.b - 1) - 1  # s

    @property
    def changes_updates(self) -> bool:
        return self.b < 32

    def compress(self, delta, clients, slot):
        if not self.changes_updates:
            return delta
        v = delta.to(torch.float64)
        norm = torch.linalg.vector_norm(v, dim=1, keepdim=True)  # ‖v‖₂ per client
        scaled = torch.where(norm > 0, v.abs() / norm, torch.zeros_like(v)) * self.levels
        lower = torch.floor(scaled)
        up = torch.rand(v.shape, generator=self.generator, dtype=torch.float64) < (scaled - lower)
        xi = lower + up.to(torch.float64)
        return (norm * torch.sign(v) * xi / self.levels).to(delta.dtype)

    def bits(self, d):
        return float(d * self.bits_per_param) if not self.changes_updates else 32.0 + d * self.b


class TopK(Compressor):
    name = "topk"
    resizes = True

    def __init__(
        self, num_clients: int, seed: int, fraction: float, error_feedback: bool = True, bits_per_param: int = 32
    ):
        super().__init__(num_clients, seed, bits_per_param)
        self.fraction, self.error_feedback = float(fraction), bool(error_feedback)
        self.residual: dict[str, torch.Tensor] = {}  # slot -> [N, d], what each client has not sent yet

    @property
    def changes_updates(self) -> bool:
        return self.fraction < 1.0

    def k(self, d: int) -> int:
        return min(d, max(1, math.ceil(self.fraction * d)))

    def compress(self, delta, clients, slot):
        if not self.changes_updates:
            return delta
        idx = torch.as_tensor(np.asarray(clients), dtype=torch.long)
        v = delta
        if self.error_feedback:
            memory = self.residual.setdefault(slot, torch.zeros(self.num_clients, delta.shape[1], dtype=delta.dtype))
            v = delta + memory[idx]
        keep = torch.topk(v.abs(), self.k(delta.shape[1]), dim=1).indices
        sent = torch.zeros_like(v).scatter(1, keep, v.gather(1, keep))
        if self.error_feedback:
            memory[idx] = v - sent
        return sent

    def bits(self, d):
        if not self.changes_updates:
            return float(d * self.bits_per_param)
        return float(self.k(d) * (32 + math.ceil(math.log2(max(d, 2)))))


def build_compressor(section, num_clients: int, seed: int, bits_per_param: int) -> Compressor:
    """The scenario's compressor (for ``none``, :class:`Compressor`: updates and their sizes unchanged)."""
    if section.name == "qsgd":
        return QSGD(num_clients, seed, section.bits, bits_per_param)
    if section.name == "topk":
        return TopK(num_clients, seed, section.fraction, section.error_feedback, bits_per_param)
    return Compressor(num_clients, seed, bits_per_param)
