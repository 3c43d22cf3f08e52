"""Controllers: the server's per-device knobs, set each round (docs/control.md).

A controller runs at the server. At the start of each round it sees what a base station would
know (:class:`Observation`: mean channel gains, optionally with an estimation error, battery
levels, each device's energy so far, the metrics of the rounds so far) and returns the round's
:class:`RoundPlan`: the number of local steps τ, per-device step budgets τ_i ≤ τ, and who may take
part. Then, for every phase of the round, once the clients and their work are known (the
algorithm has sampled them and said what they download, compute and upload), it may return an
:class:`Allocation`: each client's CPU frequency, transmit power and FDMA band share. The engine
charges the knobs; the algorithm never sees them (only τ, and masked steps, change its numerics).

Write one by subclassing :class:`Controller` (its own scenario keys in a nested ``Params`` model,
like an algorithm's) and name it in the scenario: ``[control] name = "package.module:Class"``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from pydantic import ConfigDict

from edgefl.deployment import DeviceArrays, NetworkParams
from edgefl.numeric_keys import NumbersOnly


class ControlParams(NumbersOnly):
    """A controller's own ``[control]`` keys (besides ``name`` and ``channel_error_db``): subclass it
    with typed fields and defaults; unknown keys are rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


@dataclass
class DeviceLimits(DeviceArrays):
    """What the server knows of the devices (arrays [N], SI units): every per-device array of the
    population (edgefl.deployment.DeviceArrays, derived from the [devices] keys) as the run starts: the knob
    bounds and the constants of the energy model (docs/model.md)."""

    @classmethod
    def of(cls, population: DeviceArrays) -> "DeviceLimits":
        """The devices' arrays as they are now (copies: the engine may change a population's knobs)."""
        return cls(**population.device_arrays())

    @property
    def cpu_hz_max(self) -> np.ndarray:
        """devices.cpu_ghz: the highest frequency, what the static controller runs at."""
        return self.cpu_hz

    @property
    def tx_power_w_max(self) -> np.ndarray:
        """devices.tx_power_dbm: the highest power, what the static controller sends at."""
        return self.tx_power_w


@dataclass(frozen=True)
class ControlContext:
    """Given to a controller once, when the run starts."""

    num_clients: int  # N
    clients_per_round: int  # m
    local_steps: int  # τ of the scenario (algorithm.local_steps)
    batch_size: int  # samples per local step
    model_bits: float  # one model-sized vector, without headers
    network: NetworkParams
    devices: DeviceLimits
    rng: np.random.Generator  # the controller's own stream (seeded from run.seed)


@dataclass
class Observation:
    """What the server knows at the start of a round (or of a phase). Arrays are [N]."""

    round: int  # 0-based
    now_s: float  # simulated time
    online: np.ndarray  # bool: online (and charged) now
    uplink_snr_per_w: np.ndarray  # mean uplink SNR (linear) per W of transmit power over the whole uplink band,
    #                               as the server estimates it (network.channel_error_db)
    noise_scales_with_band: np.ndarray  # bool: a link budget (SNR ∝ 1/band); False: a configured SNR
    downlink_rate_bps: np.ndarray  # mean download rate of each device (no fading), as estimated
    battery_j: np.ndarray | None  # levels now; None: mains power
    energy_j: np.ndarray  # spent so far, all categories
    history: list[dict]  # metrics.csv rows of the rounds so far (loss, accuracy, energy, ...)
    work: "Work"  # each device's work in its last phase (what a round asks of it)
    cpu_hz: np.ndarray | None = None  # the knobs of the previous allocation (None: nominal)
    # When each device's radio tail runs out (s of simulated time; -inf: its radio is idle): a message asked for
    # before then needs no promotion (docs/model.md section 8; the base station knows each device's RRC state).
    # None: no tails.
    radio_connected_until_s: np.ndarray | None = None


@dataclass
class Work:
    """Work per device (arrays [N]): downloaded and uploaded bits (headers included), CPU cycles, local
    steps, and messages sent or received. In an Observation at the start of a round: each device's last
    phase (before any: one model down, ``local_steps`` steps, one model up); in :meth:`Controller.allocate`:
    the phase about to be simulated (zeros for devices not in it)."""

    download_bits: np.ndarray
    cycles: np.ndarray
    upload_bits: np.ndarray
    steps: np.ndarray  # local steps of the Train ops
    messages: np.ndarray  # downloads + uploads (each pays network.access_latency_s)
    clients: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # who has work


@dataclass
class RoundPlan:
    """A round's plan. None everywhere: the scenario's behaviour."""

    local_steps: int | None = None  # τ of this round (the algorithm's local_steps)
    steps: np.ndarray | None = None  # τ_i [N] <= τ: each Train op's steps past τ_i are masked (no compute)
    participants: np.ndarray | None = None  # bool [N]: who may be sampled (together with who is online)


@dataclass
class Allocation:
    """A phase's resources (arrays [N]; None: nominal). ``band_share`` only with network.access = "fdma":
    each upload gets band_share·B Hz for itself for the whole phase (sum <= 1) instead of sharing the band."""

    cpu_hz: np.ndarray | None = None
    tx_power_w: np.ndarray | None = None
    band_share: np.ndarray | None = None


class Controller:
    """Base class: the scenario's fixed knobs (``static``). Override :meth:`plan` and/or :meth:`allocate`."""

    name: ClassVar[str] = ""
    Params: ClassVar[type[ControlParams]] = ControlParams
    # Whether the controller can change who takes part or how much they learn (τ, τ_i, participants):
    # sweeps then co-simulate every point instead of re-pricing one training.
    changes_learning: ClassVar[bool] = False

    def __init__(self, ctx: ControlContext, params: ControlParams | None = None):
        self.ctx = ctx
        self.params = params if params is not None else self.Params()

    @classmethod
    def check_scenario(cls, scenario) -> None:
        """Raise ValueError (shown as the scenario's error) when the scenario cannot run this controller."""

    @classmethod
    def steers(cls) -> bool:
        """Whether it sets anything: it overrides :meth:`plan` or :meth:`allocate`. One that does not (the static
        controller) is asked nothing and nothing is observed for it (edgefl.control.steering), and summary.json
        has no "control_state"."""
        return cls.plan is not Controller.plan or cls.allocate is not Controller.allocate

    def plan(self, obs: Observation) -> RoundPlan:
        return RoundPlan()

    def allocate(self, obs: Observation, work: Work) -> Allocation | None:
        return None

    def metrics(self) -> dict:
        """Extra metrics.csv columns of the round just run (the same keys every round)."""
        return {}

    def summary(self) -> dict:
        """What summary.json reports of the controller at the end ("control_state")."""
        return {}
