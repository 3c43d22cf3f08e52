"""The deployment of one run: the network (:class:`NetworkParams`), its cells (:class:`CellLayout`) and the devices
dropped in them with their mean radio links (:class:`Population`).

Built once from the scenario's ``[network]`` and ``[devices]`` sections (SI units from
here on). Pure data; the SimPy pricer reads it (what each phase's transmissions and computations then take, with
fading: edgefl.sim.physics).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field, fields
from typing import Callable

import numpy as np

from channel import (
    CQI_EFFICIENCY,
    CQI_SNR_DB,
    Link,
    db_to_linear,
    dbm_to_w,
    link_rate_bps,
    path_loss,
    tr38901,
    w_to_dbm,
)
from channel.cells import (
    downlink_interference_w,
    drop_in_disks,
    drop_in_hex_cells,
    hex_reuse_bands,
    hex_sites_m,
    open_loop_tx_power_dbm,
    strongest_cell,
    uplink_interference_w,
)
from channel.large_scale import LargeScale
from channel.mcs import MCS_TABLES, nr_overhead_fraction
from edgefl.data.errors import DataError
from edgefl.input_files import special_file
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
    bits_per_param: int = 32  # payload bits per model parameter (32: fp32)
    uplink: str = "digital"  # digital | aircomp (over-the-air computation: edgefl.sim.access.AirCompUplink)
    aircomp_symbols_per_hz: float = 1.0  # aircomp: analog symbols per s per Hz of the uplink band
    aircomp_threshold_db: float = 0.0  # aircomp: SNR at full power (dB) below which a device is not scheduled
    cells: int = 1  # cells (docs/multi-cell.md: sites x sectors): each with its own uplink access (edgefl.sim.access)
    interference: str = "expected_load"  # multi-cell uplink interference: expected_load | events (docs/multi-cell.md)

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


@dataclass(frozen=True)
class PerDevice:
    """Marks a ``[devices]`` key of which each device has its own value (a ``[[devices.classes]]`` key too), in
    the key's annotation: ``cpu_ghz: Annotated[Gigahertz, PerDevice("cpu_hz", lambda ghz, _: ghz * 1e9)]``.
    ``si``: the name of its array in :class:`DeviceArrays` (SI units); ``to_si(values, columns)``: that array
    from the devices' values of the key (NaN where unset) and of every per-device key (``columns``, by key);
    ``si = None``: the key has no array of its own (:func:`build_population` combines it with others)."""

    si: str | None
    to_si: Callable[[np.ndarray, dict[str, np.ndarray]], np.ndarray] = lambda values, columns: values


def per_device_keys(section_model) -> dict[str, PerDevice]:
    """The per-device keys of a ``[devices]`` pydantic model, each with its :class:`PerDevice` marker, in
    the model's order (the one list of them: device classes, device profiles and arrays derive from it)."""
    keys = {}
    for name, info in section_model.model_fields.items():
        marker = next((m for m in info.metadata if isinstance(m, PerDevice)), None)
        if marker is not None:
            keys[name] = marker
    return keys


@dataclass
class DeviceArrays:
    """Each device's parameters (arrays [N], SI units): the arrays of the per-device ``[devices]`` keys
    (:class:`PerDevice`), declared here so that the engine's reads are typed. Adding a device key: its field
    in ``DevicesSection`` with its marker, and its array here (docs/architecture.md, "Adding a device key")."""

    cpu_hz: np.ndarray
    cpu_hz_min: np.ndarray  # a controller's lower bounds (Hz, W); the upper: cpu_hz, tx_power_w
    kappa: np.ndarray  # effective switched capacitance (J / (cycle * Hz^2))
    static_power_w: np.ndarray
    tx_power_w: np.ndarray
    tx_power_w_min: np.ndarray
    circuit_power_w: np.ndarray
    pa_efficiency: np.ndarray  # of the transmit power amplifier, in (0, 1]
    rx_power_w: np.ndarray
    idle_power_w: np.ndarray
    promotion_power_w: np.ndarray  # while the radio connects from idle (W)
    tail_s: np.ndarray  # radio tail after each message (s) ...
    tail_power_w: np.ndarray  # ... and its power (W)
    battery_j: np.ndarray  # capacity per device (J; inf: mains power) ...
    battery_reserve_j: np.ndarray  # ... the level below which it is unavailable ...
    harvest_w: np.ndarray  # ... and the power it harvests (W)
    speed_mps: np.ndarray  # random-waypoint speed (0: static)
    train_cycles_per_sample: np.ndarray  # forward + backward (devices.cycles_per_flop, cycles_per_sample)
    eval_cycles_per_sample: np.ndarray  # forward only

    def device_arrays(self) -> dict[str, np.ndarray]:
        """A copy of each array, by name."""
        return {f.name: np.array(getattr(self, f.name), dtype=np.float64) for f in fields(DeviceArrays)}


@dataclass(frozen=True)
class Cell:
    """The cell devices move in (``network.cell_radius_m``): an annulus around the base station."""

    min_distance_m: float  # network.min_distance_m
    radius_m: float  # network.cell_radius_m
    path_loss_db: Callable[[np.ndarray], np.ndarray]  # of the scenario's model, at a distance (m)
    bs_power_w: float  # the base station's transmit power (W; network.bs_tx_power_dbm)


@dataclass(frozen=True)
class CellLayout:
    """Several cells (``network.cells`` > 1, sectors, docs/multi-cell.md): where the sites are, the cells' bands,
    where the devices were dropped and which cell serves each, as built, and the links' large-scale loss."""

    site_m: np.ndarray  # base stations (x, y) [S, 2], m
    band: np.ndarray  # each cell's band [C] (reuse 1: all 0; reuse 3: 0, 1, 2); C = S x sectors
    position_m: np.ndarray  # each device's position (x, y) [N, 2], m, as dropped
    large_scale: LargeScale  # every link's loss at a position: path loss (LOS state), shadowing, sector gain
    serving: np.ndarray  # each device's serving cell [N], as dropped: the strongest mean link
    drop: Callable[[np.random.Generator, int], np.ndarray]  # n points uniform over the cells' union (rng, n) -> [n, 2]
    path_loss_db: Callable[[np.ndarray], np.ndarray]  # the scenario's model, at a distance (m)
    min_distance_m: float  # path loss taken at least at this distance
    max_tx_power_w: np.ndarray  # each device's tx_power_dbm (W): power control's P_max
    bs_power_w: float
    up_noise_figure_db: float
    down_noise_figure_db: float
    uplink_bandwidth_hz: float
    downlink_bandwidth_hz: float
    interference_load: float
    uplink_events: (
        bool  # network.interference = "events": the uplinks carry no standing interference (it comes and goes)
    )
    p0_dbm: float | None  # open-loop power control (None: off) ...
    alpha: float  # ... its path-loss compensation
    handover_margin_db: float
    handover_interruption_s: float

    def link_loss_db(self, position_m: np.ndarray) -> np.ndarray:
        """Every device's mean loss to every cell [N, C] (dB): path loss (at >= min_distance_m, in the link's LOS
        state) + shadowing − the sector's antenna gain (channel.large_scale)."""
        return self.large_scale.loss_db(position_m)

    @property
    def shadowing_db(self) -> np.ndarray:
        """Each device's shadowing towards each site [N, S] (dB) where it was dropped."""
        return self.large_scale.site_shadowing_db(self.position_m)

    def serving_distance_m(self, position_m: np.ndarray, serving: np.ndarray) -> np.ndarray:
        """Each device's ground distance to its serving cell's site [N] (m; its nearest copy with wraparound)."""
        offset = self.large_scale.offsets_m(position_m)[np.arange(len(serving)), serving // self.large_scale.sectors]
        return np.hypot(offset[:, 0], offset[:, 1])

    def serving_los(self, position_m: np.ndarray, serving: np.ndarray) -> np.ndarray | None:
        """Whether each device's link to its serving site is LOS [N] (random LOS), or None (a fixed state)."""
        los = self.large_scale.los(position_m)
        return None if los is None else los[np.arange(len(serving)), serving // self.large_scale.sectors]

    def links(self, position_m: np.ndarray, serving: np.ndarray) -> tuple[np.ndarray, list[Link], list[Link]]:
        """The devices' transmit powers [N] (W: power control, or P_max) and their mean uplinks and downlinks to
        their serving cells, with the co-channel cells' mean interference (channel/cells.py) as extra noise over
        the band (W/Hz: the interferer's power spread over its cell's band)."""
        loss = self.link_loss_db(position_m)
        rows = np.arange(len(serving))
        own = loss[rows, serving]
        power_w = self.max_tx_power_w
        if self.p0_dbm is not None:
            power_w = dbm_to_w(open_loop_tx_power_dbm(w_to_dbm(self.max_tx_power_w), self.p0_dbm, self.alpha, own))
        gain = db_to_linear(-loss)
        up_load = 0.0 if self.uplink_events else self.interference_load
        up_i = uplink_interference_w(power_w, gain, serving, self.band, up_load)[serving]
        down_i = downlink_interference_w(self.bs_power_w, gain, serving, self.band, self.interference_load)
        up_psd, down_psd = up_i / self.uplink_bandwidth_hz, down_i / self.downlink_bandwidth_hz
        uplink = [
            Link.from_budget(power_w[i], own[i], self.up_noise_figure_db, interference_w_per_hz=up_psd[i]) for i in rows
        ]
        downlink = [
            Link.from_budget(self.bs_power_w, own[i], self.down_noise_figure_db, interference_w_per_hz=down_psd[i])
            for i in rows
        ]
        return np.asarray(power_w, dtype=np.float64), uplink, downlink


@dataclass(kw_only=True)
class Population(DeviceArrays):
    """Per-client device and link parameters (arrays of length N), as the scenario built them: nothing writes
    them during a run (what changes, a controller's knobs and the links of moving devices, is the run's
    :class:`edgefl.sim.devices.DeviceState`). A field named like a ``[devices]`` key that all devices share
    (slowdown, availability, p_fail, ...) takes its value (:func:`build_population`)."""

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
    cell: Cell | None = None  # where devices move (network.cell_radius_m set)
    cells: CellLayout | None = None  # several base stations (network.cells > 1)

    @property
    def num_clients(self) -> int:
        return len(self.cpu_hz)


def network_params(network) -> NetworkParams:
    """The network of a run from the scenario's ``[network]``: the keys that change unit or shape here,
    and every other field of :class:`NetworkParams` from the ``[network]`` key of the same name."""
    converted = {
        "bandwidth_hz": network.bandwidth_mhz * 1e6,
        "downlink_bandwidth_hz": (network.downlink_bandwidth_mhz or network.bandwidth_mhz) * 1e6,
        "efficiency": network.shannon_efficiency,
        "header_bits": float(network.header_bits),
        "mcs_snr_db": tuple(r[0] for r in network.mcs_table) if network.mcs_table else MCS_TABLES[network.standard][0],
        "mcs_efficiency": tuple(r[1] for r in network.mcs_table)
        if network.mcs_table
        else MCS_TABLES[network.standard][1],
        "cells": network.cells * network.sectors,
        "overhead_fraction": overhead_fraction(network),
    }
    same = {f.name: getattr(network, f.name) for f in fields(NetworkParams) if f.name not in converted}
    return NetworkParams(**converted, **same)


def overhead_fraction(network) -> float:
    """The share of every link's resource that carries no data: ``network.overhead_fraction``, and with
    ``standard = "nr"`` the NR framing's too (channel.mcs.nr_overhead_fraction): 1 − (1 − o)(1 − o_NR)."""
    if network.standard != "nr":
        return float(network.overhead_fraction)
    framing = nr_overhead_fraction(network.nr_pusch_symbols, network.nr_dmrs_symbols)
    return 1.0 - (1.0 - network.overhead_fraction) * (1.0 - framing)


def assign_device_classes(
    devices, num_clients: int, rng: np.random.Generator
) -> tuple[dict[str, np.ndarray], list[str]]:
    """Each client's device profile, as a column per per-device key (float, NaN where unset): base values,
    overridden by its class (shares of N); and each client's class name. Arrays, not a dict per device (10^6
    devices)."""
    keys = per_device_keys(type(devices))
    columns = {
        name: np.full(num_clients, np.nan if getattr(devices, name) is None else getattr(devices, name), dtype=float)
        for name in keys
    }
    labels = ["base"] * num_clients
    order = rng.permutation(num_clients)
    cursor = 0
    for cls in devices.classes:
        count = int(round(cls.share * num_clients))
        members = order[cursor : cursor + count]
        for key, value in cls.model_dump().items():
            if key in keys and value is not None:
                columns[key][members] = value
        for client in members.tolist():
            labels[client] = cls.name
        cursor += count
    return columns, labels


def device_arrays(
    devices, columns: dict[str, np.ndarray], train_flops_per_sample: float, eval_flops_per_sample: float, seed: int
) -> dict[str, np.ndarray]:
    """The :class:`DeviceArrays` of the clients' profiles (``columns``: :func:`assign_device_classes`; by name, SI
    units): each per-device key's array by its marker's conversion, the compute cycles from the model's FLOPs, and
    the harvested power."""
    keys = per_device_keys(type(devices))
    arrays = {marker.si: marker.to_si(columns[key], columns) for key, marker in keys.items() if marker.si}
    # Training a sample costs forward + backward; evaluating it, the forward pass only.
    # With a configured cycles_per_sample (training), evaluation is taken as 1/3 of it,
    # the usual forward : backward = 1 : 2 split.
    explicit, cycles_per_flop = columns["cycles_per_sample"], columns["cycles_per_flop"]
    given = ~np.isnan(explicit)
    arrays["train_cycles_per_sample"] = np.where(given, explicit, train_flops_per_sample * cycles_per_flop)
    arrays["eval_cycles_per_sample"] = np.where(given, explicit / 3.0, eval_flops_per_sample * cycles_per_flop)
    if devices.harvest == "uniform":  # each device's power drawn once, uniform in [0, 2 harvest_w]: its own stream
        rng_harvest = np.random.default_rng(np.random.SeedSequence([seed, 0x4A27]))
        arrays["harvest_w"] = arrays["harvest_w"] * rng_harvest.uniform(0.0, 2.0, size=len(explicit))
    return arrays


def build_population(
    network, devices, num_clients: int, train_flops_per_sample: float, eval_flops_per_sample: float, seed: int
) -> Population:
    """Draw the clients' devices and positions (seeded) and compute their mean links."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x9E0]))
    columns, labels = assign_device_classes(devices, num_clients, rng)
    arrays = device_arrays(devices, columns, train_flops_per_sample, eval_flops_per_sample, seed)
    tx_power_w = arrays["tx_power_w"]

    distance, layout = None, None
    if network.snr_db is not None:
        # every device the same link: one (immutable) Link for all, not one object per device
        uplink = [Link.from_snr_db(network.snr_db)] * num_clients
        down_db = network.downlink_snr_db if network.downlink_snr_db is not None else network.snr_db
        downlink = [Link.from_snr_db(down_db)] * num_clients
    elif network.uses_layout():  # several cells: devices dropped over them, served by the strongest
        layout = build_cell_layout(network, tx_power_w, num_clients, rng, seed)
        arrays["tx_power_w"], uplink, downlink = layout.links(layout.position_m, layout.serving)
        path_loss_db = layout.path_loss_db
        distance = layout.serving_distance_m(layout.position_m, layout.serving)
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
        if network.power_control_p0_dbm is not None:  # open-loop power control at the drop (TS 38.213)
            tx_power_w = arrays["tx_power_w"] = dbm_to_w(
                open_loop_tx_power_dbm(
                    w_to_dbm(tx_power_w), network.power_control_p0_dbm, network.power_control_alpha, loss + shadowing
                )
            )
        uplink = [Link.from_budget(tx_power_w[i], loss[i], up_nf_db, shadowing[i]) for i in range(num_clients)]
        if network.downlink_snr_db is not None:
            downlink = [Link.from_snr_db(network.downlink_snr_db)] * num_clients
        else:
            downlink = [Link.from_budget(bs_power_w, loss[i], down_nf_db, shadowing[i]) for i in range(num_clients)]
    # the [devices] keys all devices share (slowdown, availability, p_fail, ...): the Population's fields of that name
    keys = type(devices).model_fields
    shared = {f.name: getattr(devices, f.name) for f in fields(Population) if f.name in keys and f.name not in arrays}
    return Population(
        **shared,
        **arrays,
        uplink=uplink,
        downlink=downlink,
        device_class=labels,
        distance_m=distance,
        availability_intervals=(
            read_availability_trace(devices.availability_trace, num_clients) if devices.availability_trace else {}
        ),
        cells=layout,
        cell=None
        if network.cell_radius_m is None
        else Cell(
            network.min_distance_m, network.cell_radius_m, path_loss_db, float(dbm_to_w(network.bs_tx_power_dbm))
        ),
    )


def cell_sites_m(network) -> tuple[np.ndarray, np.ndarray, float]:
    """The base stations (x, y) [S, 2] in m of ``network.cells`` (listed, or a hexagonal layout), each cell's band
    [S x sectors] (3 sectors at reuse 3: band = the sector), and the hexagonal layout's inter-site distance (m;
    unset: sqrt(3) x cell_radius_m; nan for listed sites)."""
    if network.site_positions_m is not None:
        site_m = np.array(network.site_positions_m, dtype=np.float64)
        band, inter_site_m = np.arange(len(site_m)) % network.reuse, float("nan")
    else:
        radius_m = network.cell_radius_m
        inter_site_m = network.inter_site_m if network.inter_site_m is not None else float(np.sqrt(3.0) * radius_m)
        site_m, band = hex_sites_m(network.cells, inter_site_m), hex_reuse_bands(network.cells, network.reuse)
    if network.sectors > 1:
        sector = np.tile(np.arange(network.sectors), len(site_m))
        band = sector % network.reuse if network.reuse > 1 else np.zeros_like(sector)
    return site_m, band, inter_site_m


def cell_map_sites_m(network) -> np.ndarray | None:
    """Each cell's base station (x, y) [C, 2] in m, for the cell map (a site's sectors share its position); None for
    a network without several cells (nor a scenario)."""
    if network is None or getattr(network, "cells", 1) * getattr(network, "sectors", 1) <= 1:
        return None
    return np.repeat(cell_sites_m(network)[0], network.sectors, axis=0)


def build_cell_layout(
    network, max_tx_power_w: np.ndarray, num_clients: int, rng: np.random.Generator, seed: int = 0
) -> CellLayout:
    """The base stations of ``network.cells`` (a hexagonal layout, or listed sites), the devices dropped
    uniformly over the cells' union, their links' large-scale loss (channel.large_scale: LOS states, shadowing,
    sectors, wraparound), and the strongest cell of each."""
    radius_m, min_m = network.cell_radius_m, network.min_distance_m
    site_m, band, inter_site_m = cell_sites_m(network)
    if network.site_positions_m is not None:

        def drop(generator: np.random.Generator, n: int) -> np.ndarray:
            return drop_in_disks(generator, n, site_m, radius_m, min_m)
    else:

        def drop(generator: np.random.Generator, n: int) -> np.ndarray:
            return drop_in_hex_cells(generator, n, site_m, inter_site_m, min_m)

    position_m = drop(rng, num_clients)
    path_loss_db = path_loss_function(network)
    large_scale = large_scale_model(network, site_m, inter_site_m, path_loss_db, num_clients, rng, seed)
    serving = strongest_cell(large_scale.loss_db(position_m))
    up_nf_db, down_nf_db = receiver_noise_figures_db(network)
    return CellLayout(
        site_m=site_m,
        band=band,
        position_m=position_m,
        large_scale=large_scale,
        serving=serving,
        drop=drop,
        path_loss_db=path_loss_db,
        min_distance_m=min_m,
        max_tx_power_w=np.asarray(max_tx_power_w, dtype=np.float64).copy(),
        bs_power_w=float(dbm_to_w(network.bs_tx_power_dbm)),
        up_noise_figure_db=up_nf_db,
        down_noise_figure_db=down_nf_db,
        uplink_bandwidth_hz=network.bandwidth_mhz * 1e6,
        downlink_bandwidth_hz=(network.downlink_bandwidth_mhz or network.bandwidth_mhz) * 1e6,
        interference_load=network.interference_load,
        uplink_events=network.interference == "events",
        p0_dbm=network.power_control_p0_dbm,
        alpha=network.power_control_alpha,
        handover_margin_db=network.handover_margin_db,
        handover_interruption_s=network.handover_interruption_s,
    )


def large_scale_model(
    network,
    site_m: np.ndarray,
    inter_site_m: float,
    path_loss_db: Callable[[np.ndarray], np.ndarray],
    num_clients: int,
    rng: np.random.Generator,
    seed: int,
) -> LargeScale:
    """The links' large-scale model (channel.large_scale.LargeScale) of the scenario's ``[network]``. Independent
    shadowing is drawn from ``rng`` (the drop's stream, as before these keys existed); the LOS draws and the
    correlated fields from streams of their own."""
    sites = len(site_m)
    random_los = network.line_of_sight == "random"
    model = network.path_loss
    heights = (network.carrier_ghz, network.bs_height_m, network.ue_height_m)
    los_args: dict = {}
    if random_los:
        los_rng = np.random.default_rng(np.random.SeedSequence([seed, 0x105]))
        los_args = {
            "state_path_loss_db": lambda d, los: tr38901.path_loss_by_state_db(model, d, los, *heights),
            "los_probability": lambda d: tr38901.los_probability(model, d, network.ue_height_m),
            "state_sigma_db": lambda d, los: tr38901.shadowing_std_by_state_db(model, d, los, *heights),
            "los_uniform": los_rng.uniform(0.0, 1.0, size=(num_clients, sites)),
        }
    sigma_db = None if random_los else float(network.shadowing_std_db)
    z, field = None, None
    if network.shadowing_correlation == "independent":
        z = rng.standard_normal(size=(num_clients, sites))  # sigma x z: the same numbers as normal(0, sigma)
    else:
        if network.shadowing_decorrelation_m is not None:
            d_los = d_nlos = float(network.shadowing_decorrelation_m)
        else:
            d_los, d_nlos = tr38901.SHADOWING_DECORRELATION_M[model]
        field_rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5F1D]))
        field = tr38901.CorrelatedField(field_rng, np.array([d_los, d_nlos] + [d_los] * sites + [d_nlos] * sites))
    shifts = tr38901.hex_wrap_shifts_m(network.cells, inter_site_m) if network.wraparound else np.zeros((1, 2))
    return LargeScale(
        site_m=site_m,
        sectors=network.sectors,
        shifts_m=shifts,
        min_distance_m=network.min_distance_m,
        path_loss_db=path_loss_db,
        sigma_db=sigma_db,
        z=z,
        field=field,
        site_correlation=network.shadowing_site_correlation,
        bs_height_m=network.bs_height_m,
        ue_height_m=network.ue_height_m,
        downtilt_deg=network.downtilt_deg,
        antenna_rows=network.antenna_rows,
        **los_args,
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
