"""The data that flows from the op interpreter to a pricer, and from a pricer to the event log."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, NamedTuple

ActivityKind = Literal["download", "compute", "upload"]
EVENT_FIELDS = (
    "round",
    "phase",
    "client",
    "kind",
    "label",
    "start_s",
    "end_s",
    "bits",
    "cycles",
    "energy_j",
    "category",
    "status",
    "cpu_hz",
    "tx_power_w",
)

_QUANTITIES = frozenset({"start_s", "end_s", "bits", "cycles", "energy_j"})


@dataclass(frozen=True)
class Activity:
    """One thing one client does inside a communication phase.

    Transmissions carry ``bits`` (payload + header). Compute carries ``samples`` and
    ``work`` ('train': forward+backward, 'eval': forward only); the pricer turns samples
    into CPU cycles with the client's device profile, so a trace stays device-free.
    """

    kind: ActivityKind
    label: str
    bits: float = 0.0
    samples: float = 0.0
    work: Literal["train", "eval"] = "train"


@dataclass
class PhaseRecord:
    """Everything the clients did between two synchronisation points (one Upload)."""

    round: int
    phase: int
    chains: dict[int, list[Activity]] = field(default_factory=dict)
    needed: int | None = None  # over-selection: the phase ends when this many uploads have arrived
    sharers: int | None = None  # FDMA: the most uploads in flight at once, where other phases' chains run too


class Event(NamedTuple):
    """One row of events.csv: an activity as it happened in simulated time (a named tuple: a run
    creates one per activity, so it must be cheap to make)."""

    round: int
    phase: int
    client: int
    kind: str  # download | compute | upload | idle (a wait) | promotion (the radio connecting) | tail (after a message)
    label: str
    start_s: float
    end_s: float
    bits: float
    cycles: float
    energy_j: float
    category: str  # compute | uplink | downlink | idle
    status: str  # ok | cut (deadline) | lost (every attempt failed) | offline | failed | battery | stopped
    cpu_hz: float = 0.0  # the frequency its CPU ran at (what its energy is charged at): a compute row's
    tx_power_w: float = 0.0  # the power it was sent at: an upload row's

    def row(self) -> tuple:
        """The CSV row; quantities as floats (SimPy's clock starts at the integer 0); rounds numbered from 1,
        as in metrics.csv, battery.csv and positions.csv (the engine counts from 0). ``cpu_hz`` of a compute
        row and ``tx_power_w`` of an upload row; empty in the rows where they do not apply."""
        return tuple(
            self.round + 1
            if name == "round"
            else float(getattr(self, name))
            if name in _QUANTITIES
            else (float(self.cpu_hz) if self.kind == "compute" else None)
            if name == "cpu_hz"
            else (float(self.tx_power_w) if self.kind == "upload" else None)
            if name == "tx_power_w"
            else getattr(self, name)
            for name in EVENT_FIELDS
        )

    def timeline_key(self) -> tuple:
        """Canonical order of the event log: by round, phase, start time, then client."""
        return (self.round, self.phase, float(self.start_s), self.client, float(self.end_s), self.kind, self.label)
