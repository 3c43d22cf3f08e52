"""Where the numerics run (``run.device``): the one place a device is chosen and its memory read.

- ``"cpu"`` (the default): the CPU;
- ``"cuda"``: the first CUDA GPU PyTorch sees; none there is a :class:`~edgefl.errors.UserError` (exit 2);
- ``"auto"``: the GPU if PyTorch sees one, else the CPU.

The simulation (SimPy, the network, the energy ledger) and the algorithms' state stay on the CPU; the executor
moves each operation's parameters to the device and its results back (edgefl.executor), so algorithms are
written once. The same seed gives the same minibatches on every device; the numbers agree within float32
rounding of a different kernel order (benchmarks/gpu_check.py measures it, docs/performance.md): on a GPU,
TF32 is off and cuDNN picks deterministic algorithms (:func:`_exact_cuda`).
"""

from __future__ import annotations

import os
from typing import Literal

import torch

from edgefl.errors import UserError
from edgefl.memory import available_bytes

DeviceName = Literal["cpu", "cuda", "auto"]


def resolve_device(name: str) -> torch.device:
    """The torch device of ``run.device``."""
    if name == "cpu":
        return torch.device("cpu")
    if name not in ("cuda", "auto"):
        raise UserError(f'run.device = {name!r}: expected "cpu", "cuda" or "auto"')
    if torch.cuda.is_available():
        _exact_cuda()
        return torch.device("cuda", 0)
    if name == "auto":
        return torch.device("cpu")
    raise UserError(
        'run.device = "cuda", but PyTorch sees no CUDA GPU here (torch.cuda.is_available() is False: no GPU, no '
        'driver, or a CPU-only PyTorch build): use run.device = "auto" (the GPU when there is one, else the CPU) '
        'or "cpu"'
    )


def _exact_cuda() -> None:
    """float32 as on the CPU (no TF32: cuDNN's convolutions would use it by default, 10-bit mantissas) and the
    same numbers run after run (cuDNN's deterministic algorithms, cuBLAS's fixed workspace)."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def free_bytes(device: torch.device) -> int | None:
    """Memory free for tensors on ``device`` now (bytes; None if unknown)."""
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    return available_bytes()
