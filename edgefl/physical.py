"""The physical world of one run: each client's device and mean radio links, and the network.

Built once from the scenario's ``[network]`` and ``[devices]`` sections (SI units from
here on). Pure data; the SimPy pricer reads it.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from channel import CQI_EFFICIENCY, CQI_SNR_DB, Link, dbm_to_w, link_rate_bps, path_loss
from edgefl.data.errors import DataError
from edgefl.files import special_file
from edgefl.plugins import checked_path_loss


@dataclass(frozen=True)
class NetworkParams:
    bandwidth_hz: float  # uplink band (per client if access = dedicated, shared otherwise)
    downlink_bandwidth_hz: float  # each client's downlink band (the base station broadcasts)
    access: str  # dedicated | fdma | tdma
    fading: str  # none | rayleigh | rician
    rician_k: float
    efficiency: float  # fraction of the Shannon rate achieved
    snr_gap_db: float
    outage_snr_db: float | None  # packet-error threshold: an attempt below this instantaneous SNR fails
    deadline_s: float | None  # per communication phase
    header_bits: float  # added to every message
    rate: str = "shannon"  # rate adaptation: shannon | mcs
    max_spectral_efficiency: float | None = None  # bit/s/Hz cap of the shannon rate
    mcs_snr_db: tuple[float, ...] = CQI_SNR_DB  # rate = mcs: thresholds (dB) ...
    mcs_efficiency: tuple[float, ...] = CQI_EFFICIENCY  # ... and their spectral efficiencies (bit/s/Hz)
    coherence_s: float | None = None  # block fading: a new draw every coherence_s seconds of a message
    max_retransmissions: int = 0  # ARQ: attempts after a failed one
    access_latency_s: float = 0.0  # the radio's promotion from idle before a message (s)
    downlink: str = "broadcast"  # broadcast | multicast | unicast
    uplink_max_bits_per_hz: float | None = None  # the uplink modulation's highest spectral efficiency (bit/s/Hz)
    overhead_fraction: float = 0.0  # of every link's resource: control channels and reference signals
    uplink: str = "digital"  # digital | aircomp (over-the-air computation: edgefl.sim.aircomp)
    aircomp_symbols_per_hz: float = 1.0  # aircomp: analog symbols per s per Hz of the uplink band
    aircomp_threshold_db: float = 0.0  # aircomp: SNR at full power (dB) below which a device is not scheduled
    bits_per_param: float = 32.0  # payload bits per model value (aircomp: values = payload bits / this)

    @property
    def uplink_access(self) -> str:
        """How uploads get the channel (edgefl.sim.access.UPLINKS): the access scheme, or over-the-air computation."""
        return "aircomp" if self.uplink == "aircomp" else self.access

    @property
    def block_fading(self) -> bool:
        """Whether block fading is on: a message sees a new fading draw every ``coherence_s`` seconds
        (unset coherence, or no fading: one draw per attempt, or none)."""
        return self.coherence_s is not None and self.fading != "none"

    def rate_bps(self, bandwidth_hz, snr_linear, link: str = "up") -> np.ndarray:
        """The rate (bit/s) of the ``link`` ("up" or "down") at ``bandwidth_hz`` and linear SNR: this network's
        rate model, the uplink's modulation cap, the overhead of control and reference signals
        (channel.rate.link_rate_bps; the one place the network's rate keys reach it)."""
        return np.asarray(
            link_rate_bps(
                bandwidth_hz,
                snr_linear,
                self.rate,
                self.efficiency,
                self.snr_gap_db,
                self.max_spectral_efficiency,
                self.mcs_snr_db,
                self.mcs_efficiency,
                self.uplink_max_bits_per_hz if link == "up" else None,
                self.overhead_fraction,
            )
        )


@dataclass
class Population:
    """Per-client device and link parameters (arrays of length N)."""

    cpu_hz: np.ndarray
    kappa: np.ndarray  # effective switched capacitance (J / (cycle * Hz^2))
    static_power_w: np.ndarray
    tx_power_w: np.ndarray
    circuit_power_w: np.ndarray
    rx_power_w: np.ndarray
    idle_power_w: np.ndarray
    tail_s: np.ndarray  # radio tail after each message (s) ...
    tail_power_w: np.ndarray  # ... and its power (W)
    train_cycles_per_sample: np.ndarray  # forward + backward
    eval_cycles_per_sample: np.ndarray  # forward only
    uplink: list[Link]
    downlink: list[Link]
    device_class: list[str]
    distance_m: np.ndarray | None = None
    slowdown: str = "none"  # straggling: none | exponential | lognormal, a per-round compute-time factor
    slowdown_mean: float = 0.0  # exponential: factor = 1 + Exp(mean)
    slowdown_sigma: float = 0.0  # lognormal: factor = exp(sigma * N(0, 1))
    availability: str = "always"  # always | markov | trace
    mean_on_s: float = 1.0  # markov: mean online period ...
    mean_off_s: float = 1.0  # ... and mean offline period (s)
    availability_intervals: dict[int, list[tuple[float, float]]] = field(default_factory=dict)  # trace
    p_fail: float = 0.0  # probability that a participating device fails in a round
    battery_j: np.ndarray | None = None  # capacity per device (J; inf: mains power) ...
    battery_reserve_j: np.ndarray | None = None  # ... the level below which it is unavailable ...
    harvest_w: np.ndarray | None = None  # ... and the power it harvests (W)
    speed_mps: np.ndarray | None = None  # random-waypoint speed (0: static)
    cell: tuple | None = None  # (d_min m, R m, path_loss_db(distance_m) of the scenario's model, BS power W)
    cpu_hz_min: np.ndarray | None = None  # a controller's lower bounds (Hz, W); the upper: cpu_hz, tx_power_w
    tx_power_w_min: np.ndarray | None = None
    promotion_power_w: np.ndarray | None = None  # while the radio connects from idle (W); None: idle_power_w
    pa_efficiency: np.ndarray | None = None  # of the transmit power amplifier, in (0, 1]; None: 1

    def __post_init__(self) -> None:
        n = len(self.cpu_hz)
        if self.pa_efficiency is None:
            self.pa_efficiency = np.ones(n)
        if self.promotion_power_w is None:
            self.promotion_power_w = np.array(self.idle_power_w, dtype=np.float64)
        if self.battery_j is None:
            self.battery_j = np.full(n, np.inf)
        if self.battery_reserve_j is None:
            self.battery_reserve_j = np.zeros(n)
        if self.harvest_w is None:
            self.harvest_w = np.zeros(n)
        if self.speed_mps is None:
            self.speed_mps = np.zeros(n)
        if self.cpu_hz_min is None:
            self.cpu_hz_min = self.cpu_hz.copy()
        if self.tx_power_w_min is None:
            self.tx_power_w_min = self.tx_power_w.copy()

    @property
    def num_clients(self) -> int:
        return len(self.cpu_hz)


DEVICE_FIELDS = (
    "cpu_ghz",
    "kappa",
    "static_power_w",
    "tx_power_dbm",
    "circuit_power_w",
    "pa_efficiency",
    "rx_power_w",
    "idle_power_w",
    "promotion_power_w",
    "tail_s",
    "tail_power_w",
    "battery_j",
    "battery_reserve_j",
    "harvest_w",
    "speed_mps",
    "cycles_per_flop",
    "cycles_per_sample",
    "cpu_ghz_min",
    "tx_power_dbm_min",
)


def network_params(network) -> NetworkParams:
    return NetworkParams(
        bandwidth_hz=network.bandwidth_mhz * 1e6,
        downlink_bandwidth_hz=(network.downlink_bandwidth_mhz or network.bandwidth_mhz) * 1e6,
        access=network.access,
        fading=network.fading,
        rician_k=network.rician_k,
        efficiency=network.shannon_efficiency,
        snr_gap_db=network.snr_gap_db,
        outage_snr_db=network.outage_snr_db,
        deadline_s=network.deadline_s,
        header_bits=float(network.header_bits),
        rate=network.rate,
        max_spectral_efficiency=network.max_spectral_efficiency,
        mcs_snr_db=tuple(r[0] for r in network.mcs_table) if network.mcs_table else CQI_SNR_DB,
        mcs_efficiency=tuple(r[1] for r in network.mcs_table) if network.mcs_table else CQI_EFFICIENCY,
        coherence_s=network.coherence_s,
        max_retransmissions=network.max_retransmissions,
        access_latency_s=network.access_latency_s,
        downlink=network.downlink,
        uplink_max_bits_per_hz=network.uplink_max_bits_per_hz,
        overhead_fraction=network.overhead_fraction,
        uplink=network.uplink,
        aircomp_symbols_per_hz=network.aircomp_symbols_per_hz,
        aircomp_threshold_db=network.aircomp_threshold_db,
        bits_per_param=float(network.bits_per_param),
    )


def assign_device_classes(devices, num_clients: int, rng: np.random.Generator) -> list[dict]:
    """Each client's device profile: base values, overridden by its class (shares of N)."""
    base = {name: getattr(devices, name) for name in DEVICE_FIELDS}
    labels = ["base"] * num_clients
    profiles = [dict(base) for _ in range(num_clients)]
    order = rng.permutation(num_clients)
    cursor = 0
    for cls in devices.classes:
        count = int(round(cls.share * num_clients))
        overrides = {k: v for k, v in cls.model_dump().items() if k in DEVICE_FIELDS and v is not None}
        for client in order[cursor : cursor + count]:
            profiles[client].update(overrides)
            labels[client] = cls.name
        cursor += count
    for client, label in enumerate(labels):
        profiles[client]["class"] = label
    return profiles


def build_population(
    network, devices, num_clients: int, train_flops_per_sample: float, eval_flops_per_sample: float, seed: int
) -> Population:
    """Draw the clients' devices and positions (seeded) and compute their mean links."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x9E0]))
    profiles = assign_device_classes(devices, num_clients, rng)

    def column(key):
        return np.array([p[key] for p in profiles], dtype=float)

    cycles_per_flop = column("cycles_per_flop")
    explicit = [p["cycles_per_sample"] for p in profiles]
    # Training a sample costs forward + backward; evaluating it, the forward pass only.
    # With a configured cycles_per_sample (training), evaluation is taken as 1/3 of it,
    # the usual forward : backward = 1 : 2 split.
    train_cycles = np.array(
        [c if c is not None else train_flops_per_sample * cpf for c, cpf in zip(explicit, cycles_per_flop)]
    )
    eval_cycles = np.array(
        [c / 3.0 if c is not None else eval_flops_per_sample * cpf for c, cpf in zip(explicit, cycles_per_flop)]
    )
    tx_power_w = dbm_to_w(column("tx_power_dbm"))
    # A controller's lower bounds (docs/control.md): unset, a tenth of the frequency and 30 dB below the power.
    cpu_ghz_min = np.array([p["cpu_ghz"] / 10 if p["cpu_ghz_min"] is None else p["cpu_ghz_min"] for p in profiles])
    tx_dbm_min = np.array(
        [p["tx_power_dbm"] - 30 if p["tx_power_dbm_min"] is None else p["tx_power_dbm_min"] for p in profiles]
    )
    rng_harvest = np.random.default_rng(np.random.SeedSequence([seed, 0x4A27]))  # its own stream

    distance = None
    if network.snr_db is not None:
        uplink = [Link.from_snr_db(network.snr_db) for _ in range(num_clients)]
        down_db = network.downlink_snr_db if network.downlink_snr_db is not None else network.snr_db
        downlink = [Link.from_snr_db(down_db) for _ in range(num_clients)]
    else:
        if network.distance_m is not None:
            distance = np.full(num_clients, float(network.distance_m))
        else:  # uniform over a disk of radius R, at least min_distance_m from the base station
            r_min, r_max = network.min_distance_m, network.cell_radius_m
            distance = np.sqrt(rng.uniform(r_min**2, r_max**2, size=num_clients))
        shadowing = rng.normal(0.0, network.shadowing_std_db, size=num_clients)
        path_loss_db = path_loss_function(network)
        loss = path_loss_db(distance)
        bs_power_w = float(dbm_to_w(network.bs_tx_power_dbm))
        # Each link's noise figure is its receiver's: the base station's on the uplink, the device's on the downlink.
        up_nf_db, down_nf_db = receiver_noise_figures_db(network)
        uplink = [Link.from_budget(tx_power_w[i], loss[i], up_nf_db, shadowing[i]) for i in range(num_clients)]
        if network.downlink_snr_db is not None:
            downlink = [Link.from_snr_db(network.downlink_snr_db) for _ in range(num_clients)]
        else:
            downlink = [Link.from_budget(bs_power_w, loss[i], down_nf_db, shadowing[i]) for i in range(num_clients)]
    return Population(
        cpu_hz=column("cpu_ghz") * 1e9,
        cpu_hz_min=np.minimum(cpu_ghz_min, column("cpu_ghz")) * 1e9,
        tx_power_w_min=dbm_to_w(np.minimum(tx_dbm_min, column("tx_power_dbm"))),
        kappa=column("kappa"),
        static_power_w=column("static_power_w"),
        tx_power_w=tx_power_w,
        circuit_power_w=column("circuit_power_w"),
        pa_efficiency=column("pa_efficiency"),
        rx_power_w=column("rx_power_w"),
        idle_power_w=column("idle_power_w"),
        promotion_power_w=np.array(
            [p["idle_power_w"] if p["promotion_power_w"] is None else p["promotion_power_w"] for p in profiles],
            dtype=float,
        ),
        tail_s=column("tail_s"),
        tail_power_w=column("tail_power_w"),
        train_cycles_per_sample=train_cycles,
        eval_cycles_per_sample=eval_cycles,
        uplink=uplink,
        downlink=downlink,
        device_class=[p["class"] for p in profiles],
        distance_m=distance,
        slowdown=devices.slowdown,
        slowdown_mean=devices.slowdown_mean,
        slowdown_sigma=devices.slowdown_sigma,
        availability=devices.availability,
        mean_on_s=devices.mean_on_s,
        mean_off_s=devices.mean_off_s,
        availability_intervals=(
            read_availability_trace(devices.availability_trace, num_clients) if devices.availability_trace else {}
        ),
        p_fail=devices.p_fail,
        battery_j=np.array([np.inf if p["battery_j"] is None else p["battery_j"] for p in profiles]),
        battery_reserve_j=column("battery_reserve_j"),
        harvest_w=column("harvest_w")
        * (rng_harvest.uniform(0.0, 2.0, size=num_clients) if devices.harvest == "uniform" else 1.0),
        speed_mps=column("speed_mps"),
        cell=None
        if network.cell_radius_m is None
        else (network.min_distance_m, network.cell_radius_m, path_loss_db, float(dbm_to_w(network.bs_tx_power_dbm))),
    )


def receiver_noise_figures_db(network) -> tuple[float, float]:
    """The noise figures (dB) of the uplink's receiver (the base station) and of the downlink's (a device):
    ``network.bs_noise_figure_db`` and ``device_noise_figure_db``, each ``noise_figure_db`` when unset."""
    pick = lambda own: network.noise_figure_db if own is None else own  # noqa: E731
    return pick(network.bs_noise_figure_db), pick(network.device_noise_figure_db)


def path_loss_function(network) -> Callable[[np.ndarray], np.ndarray]:
    """``loss_db(distance_m)`` of the scenario's path-loss model, called positionally as documented,
    ``model(distance_m, network)``; a plug-in's result is checked (edgefl.plugins.checked_path_loss)."""
    model = path_loss.get(network.path_loss)
    if network.path_loss in path_loss.MODELS:
        return lambda distance_m: np.asarray(model(distance_m, network), dtype=np.float64)
    return checked_path_loss(network.path_loss, model, network)


def read_availability_trace(path: str, num_clients: int) -> dict[int, list[tuple[float, float]]]:
    """Online intervals per client from a CSV ``client,start_s,end_s`` (one interval per row).
    Read once, when the run is built (a scenario's validators only check the value's shape). Raises
    DataError (a user mistake: the CLI exits 2) naming the file and the line of the first bad row."""
    intervals: dict[int, list[tuple[float, float]]] = {}
    special = special_file(path)  # before open(): a named pipe would block it
    if special is not None:
        raise DataError(f"devices.availability_trace: {path} is {special}, not a CSV file; give a regular file")
    try:
        with open(path, newline="") as handle:
            rows = list(csv.reader(handle))
    except OSError as exc:
        raise DataError(f"devices.availability_trace: cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise DataError(
            f"devices.availability_trace: {path} is not UTF-8 text (byte {exc.start}); expected a CSV "
            "file client,start_s,end_s"
        ) from None
    except csv.Error as exc:  # e.g. a cell longer than the csv module's limit (131,072 characters)
        raise DataError(
            f"devices.availability_trace: {path} is not a CSV file of client,start_s,end_s ({exc})"
        ) from None
    if not rows or [h.strip() for h in rows[0]] != ["client", "start_s", "end_s"]:
        raise DataError(f"{path}: line 1: expected the header client,start_s,end_s")
    for line, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        try:
            client, start_s, end_s = int(row[0]), float(row[1]), float(row[2])
        except (ValueError, IndexError):
            raise DataError(
                f"{path}: line {line}: expected client,start_s,end_s (an integer and two numbers), "
                f"got {','.join(row)!r}"
            ) from None
        if not 0 <= client < num_clients:
            raise DataError(f"{path}: line {line}: client {client} is not in 0..{num_clients - 1}")
        if not (0 <= start_s < end_s and math.isfinite(end_s)):
            raise DataError(f"{path}: line {line}: expected 0 <= start_s < end_s, both finite, got {start_s}, {end_s}")
        intervals.setdefault(client, []).append((start_s, end_s))
    return intervals
