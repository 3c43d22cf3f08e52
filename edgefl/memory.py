"""Will the run fit in this machine's memory? An estimate from the scenario's data, model and algorithm keys
alone, checked before any work, so that a run too large for the machine is an error naming the keys that size it
(exit 2), not an allocation failure after minutes of work or the kernel's out-of-memory kill.

The estimate of what a run adds to the process as it is when the check runs (Python, numpy and torch imported):
- the data: samples × (input values + 1 label) × 4 B (float32), from the data set's keys;
- what a data set's generator holds per client besides its samples (the Synthetic data's u_k, B_k in float64; its
  laws are drawn a chunk of clients at a time: ``estimated_bytes_per_client`` of its params; 0 for a data set that
  does not say), and what it holds only while it builds beyond what the devices and the runtime take later
  (``estimated_working_bytes``);
- the selected clients' models: m' × d × 4 B × 3 (start, result, algorithm state), and one client's step at
  least (:func:`step_bytes`; the executor trains as many clients at once as the memory allows, edgefl.executor);
- per device: :data:`PER_DEVICE_BYTES` (profiles, links, radio states, ledger, counters, the partition's offsets,
  per-client outputs) and :data:`RUNTIME_BYTES` once (torch's runtime once it computes: threads, allocator).
The two constants are measured (docs/scale.md, "Memory"): the peak RSS of ``edgefl run`` on the quickstart with
10^4 and 10^5 devices of 2 samples each is linear in the devices (1729 B a device, 488 B of it data, since the
devices' per-device Python objects became arrays; 7745 B before), which these parts give within 7 % (low).
Model size d from the model's layers, counted without allocating them (edgefl.models.parameter_count), its
activations measured on a forward pass of 2 and 4 samples (edgefl.models.saved_bytes). A data
set that cannot say its size from its keys (a plug-in, see DataParams.layout) is not checked.

The memory available is the least of the system's (MemAvailable), the process's cgroup's (memory.max −
memory.current, cgroup v2) and its address-space limit's (RLIMIT_AS − VmSize, ``ulimit -v``).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from edgefl.data import DataError
from edgefl.models import parameter_count, saved_bytes

BYTES_PER_VALUE = 4
PER_DEVICE_BYTES = 1250  # measured (see the module's docstring): what a device costs besides its data
RUNTIME_BYTES = 100e6  # measured: torch's runtime once a run computes, beyond its imports
# A vmap step's activations and their gradients at its peak, in units of the activations autograd keeps: 1.2-1.5
# read off the peaks of benchmarks/models.py's warm memory rows (CNN, CIFAR CNN, ResNet-18-GN; 2026-11-27,
# docs/performance.md); 2, the bound if no gradient were freed before the last, over-estimated them by 12-26 %.
ACTIVATION_COPIES = 1.5


def _proc_status_bytes(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def available_bytes() -> int | None:
    """What this process may still allocate: the least of MemAvailable (/proc/meminfo; else physical memory), its
    cgroup's memory.max − memory.current (cgroup v2) and RLIMIT_AS − VmSize; None if unknown."""
    limits: list[int] = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                limits.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    if not limits:
        try:
            limits.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
        except (ValueError, OSError, AttributeError):
            pass
    try:
        group = Path("/proc/self/cgroup").read_text().strip().split("\n")[0].split(":")[-1]  # v2: "0::/path"
        folder = Path("/sys/fs/cgroup") / group.lstrip("/")
        high = (folder / "memory.max").read_text().strip()
        if high != "max":
            limits.append(int(high) - int((folder / "memory.current").read_text()))
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        size = _proc_status_bytes("VmSize")
        if soft != resource.RLIM_INFINITY and size is not None:
            limits.append(soft - size)
    except (ImportError, OSError, ValueError):
        pass
    return max(min(limits), 0) if limits else None


def estimate_bytes(data, model, algorithm) -> dict[str, float] | None:
    """The estimate's parts in bytes (data, training, devices), or None when the data set cannot tell. ``data``,
    ``model``, ``algorithm``: the scenario's [data] params (edgefl.data.DataParams), [model] and [algorithm]."""
    a = algorithm
    layout, samples = data.layout(), data.estimated_samples()
    if layout is None or samples is None:
        return None
    input_shape, classes = layout
    inputs = math.prod(input_shape)
    keys = model.keys()
    d = parameter_count(model.name, input_shape, classes, model.hidden, keys)
    selected = min(data.num_clients, math.ceil(a.clients_per_round * (1 + a.over_selection)))
    per_client = getattr(data, "estimated_bytes_per_client", None)
    working = getattr(data, "estimated_working_bytes", None)
    parts = {
        "data": samples * (inputs + 1) * BYTES_PER_VALUE,
        "data generator": data.num_clients * (float(per_client()) if per_client is not None else 0.0),
        "training": selected * d * BYTES_PER_VALUE * 3 + step_bytes(d, 0.0, 0.0, a.batch_size, inputs),
        "devices": data.num_clients * PER_DEVICE_BYTES,
        "runtime": RUNTIME_BYTES,
    }
    # what the data's generator holds only while it builds (gone before the devices and the runtime take theirs):
    # the peak is the larger of the two, so only what it holds beyond the rest is added
    later = parts["training"] + parts["devices"] + parts["runtime"]
    parts["data generator"] += max(0.0, (float(working()) if working is not None else 0.0) - later)
    available = available_bytes()
    if available is not None and sum(parts.values()) + d * BYTES_PER_VALUE > available:
        return parts  # too large already: the activations are not measured (that would build the model)
    per_sample, fixed = saved_bytes(model.name, input_shape, classes, model.hidden, keys)
    parts["training"] += ACTIVATION_COPIES * (per_sample * a.batch_size + fixed)  # step_bytes' activations
    return parts


def step_bytes(d: int, per_sample: float, fixed: float, batch: int, inputs: int) -> float:
    """Memory of one client's local step in a vmap batch (bytes): its parameters' copies besides the result (d × 4 B
    × 3: the per-parameter tensors cut from the [C, d] matrix, their gradients, the step's result before it replaces
    the old), its minibatch (B × (inputs + 1) × 4 B), and the activations autograd keeps for the backward pass
    (``per_sample`` × B + ``fixed``, edgefl.models.saved_bytes) ACTIVATION_COPIES times (the backward pass builds
    their gradients while they are still held, and frees both layer by layer)."""
    activations = ACTIVATION_COPIES * (per_sample * batch + fixed)
    return d * BYTES_PER_VALUE * 3 + batch * (inputs + 1) * BYTES_PER_VALUE + activations


def training_bytes(
    strategy: str, clients: int, at_once: int, d: int, per_sample: float, fixed: float, batch: int, inputs: int
) -> float:
    """Memory a Train op of ``clients`` adds (bytes) once torch has computed a step (its one-time kernels and
    buffers are :data:`RUNTIME_BYTES`), by the executor's path (edgefl.executor): the results (clients × d × 4 B)
    and ``at_once`` clients' steps: vmap, :func:`step_bytes` each; the closed form of linear models, LINEAR_VECTORS
    × d × 4 B and the minibatch each; threads or the loop, each
    client in its own thread with its own module copy and its own allocator arena: THREAD_VECTORS × d × 4 B plus
    the minibatch and THREAD_ACTIVATIONS × the activations (``per_sample`` × B + ``fixed``).
    benchmarks/models.py compares it with the measured peak (docs/performance.md, "Benchmark models")."""
    results = clients * d * BYTES_PER_VALUE
    if strategy == "vmap":
        return results + at_once * step_bytes(d, per_sample, fixed, batch, inputs)
    minibatch = batch * (inputs + 1) * BYTES_PER_VALUE
    if strategy == "linear":  # the closed form (LinearGrad) keeps no activations, only its logits [K, B]
        return results + at_once * (LINEAR_VECTORS * d * BYTES_PER_VALUE + minibatch)
    activations = THREAD_ACTIVATIONS * (per_sample * batch + fixed)
    return results + at_once * (THREAD_VECTORS * d * BYTES_PER_VALUE + minibatch + activations)


# A client's thread (the executor's threads path) holds about 8 vectors of d values at its peak: the module copy,
# w, the gradient leaves and their concatenation, the step's result and its temporaries, and what its allocator
# arena keeps of the blocks it freed; and the threads are not in step (one is in its forward pass while another
# frees its activations in its backward pass): their peaks together hold about half of each one's activations.
# Both read off the peaks of benchmarks/models.py's memory rows (2 threads; 2026-11-27, docs/performance.md:
# 7.7 vectors and 0.2-0.5 of the activations fit them; the d-heavy FEMNIST CNN and the activation-heavy ResNet-18
# bound the two).
THREAD_VECTORS = 8
THREAD_ACTIVATIONS = 0.5
# The closed form's step (edgefl.executor.LinearGrad), per client: the gradient, its bmm's result, the step's
# result and its temporary (lr × g): 4 vectors of d, counted from the code (1.4-1.8 MB measured for 6 clients of
# the MNIST linear model against 1.5 MB so counted; step_bytes, which also counts activations, gave 2.6 MB).
LINEAR_VECTORS = 4


def check_memory(data, model, algorithm, available: int | None = None) -> None:
    """Raise DataError when the estimate (:func:`estimate_bytes`) exceeds the memory available now."""
    parts = estimate_bytes(data, model, algorithm)
    available = available_bytes() if available is None else available
    if parts is None or available is None or sum(parts.values()) <= available:
        return
    gib = lambda b: f"{b / 2**30:.3g} GiB"  # noqa: E731
    shown = ", ".join(f"{k} {gib(v)}" for k, v in parts.items())
    raise DataError(
        f"this run needs about {gib(sum(parts.values()))} of memory more ({shown}) and {gib(available)} are "
        f"available: "
        f"reduce what sizes it: data.num_clients (= {data.num_clients}), the samples per client, the "
        f"input and model size (model.name = {model.name!r}"
        + (f", model.hidden = {model.hidden}" if model.name == "mlp" else "")
        + (f", [model.{model.name}] keys {model.keys()}" if model.keys() and model.name != "mlp" else "")
        + "), algorithm.clients_per_round "
        f"(= {algorithm.clients_per_round}) or algorithm.batch_size (= {algorithm.batch_size})"
    )
