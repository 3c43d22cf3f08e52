"""The scenario's sections ([run], [data], [model], [algorithm], [network], [devices], [control],
[compression]): pydantic models, every field typed, bounded and described (docs/scenario.md is
rendered from them, edgefl.scenario_doc). Validators check values, never read files: a file a key names
(``data.dir``, ``devices.availability_trace``) is read once, when the run is built.
"""

from __future__ import annotations

import difflib
from typing import Annotated, Any, ClassVar, Literal, Optional, Union

import numpy as np
from pydantic import (
    ConfigDict,
    Discriminator,
    Field,
    PlainValidator,
    PositiveFloat,
    PositiveInt,
    SerializeAsAny,
    StrictBool,
    Tag,
    create_model,
    field_validator,
    model_validator,
)

import algorithms
from channel import check_mcs_table, dbm_to_w, path_loss, tr38901
from edgefl import control, model_catalogue, plugins, selection
from edgefl.data import DEFAULT_DATASET, DataParams
from edgefl.data import REGISTRY as DATA_REGISTRY
from edgefl.data import registry as data_registry
from edgefl.deployment import PerDevice, per_device_keys
from edgefl.errors import UserError
from edgefl.model_catalogue import fits_cnn
from edgefl.numeric_keys import NumbersOnly, bools_as_text
from edgefl.sim import processes
from edgefl.target import parse_target


class Strict(NumbersOnly):
    model_config = ConfigDict(extra="forbid", validate_default=True, allow_inf_nan=False)


# Finite, physically bounded quantities of the radio and device model (NaN and inf rejected).
Seconds = Annotated[float, Field(ge=0, le=1e6, allow_inf_nan=False)]  # up to ~11 days
PositiveSeconds = Annotated[float, Field(gt=0, le=1e6, allow_inf_nan=False)]
Watts = Annotated[float, Field(ge=0, le=1e3, allow_inf_nan=False)]
Joules = Annotated[float, Field(ge=0, le=1e9, allow_inf_nan=False)]
PositiveJoules = Annotated[float, Field(gt=0, le=1e9, allow_inf_nan=False)]
Speed = Annotated[float, Field(ge=0, le=100, allow_inf_nan=False)]  # m/s: up to a fast train
SnrDb = Annotated[float, Field(ge=-50, le=60, allow_inf_nan=False)]  # a mean SNR beyond is a typo
PowerDbm = Annotated[float, Field(ge=-60, le=70, allow_inf_nan=False)]  # 1 nW .. 10 kW
NoiseFigureDb = Annotated[float, Field(ge=0, le=30, allow_inf_nan=False)]
Megahertz = Annotated[float, Field(ge=1e-3, le=1e4, allow_inf_nan=False)]  # 1 kHz (below an NB-IoT tone) .. 10 GHz
Metres = Annotated[float, Field(ge=1, le=1e5, allow_inf_nan=False)]  # 1 m (path-loss models start there) .. 100 km
Gigahertz = Annotated[float, Field(ge=1e-5, le=100, allow_inf_nan=False)]  # CPU clock: 10 kHz .. 100 GHz
Capacitance = Annotated[float, Field(ge=1e-40, le=1e-20, allow_inf_nan=False)]  # kappa; phones ~1e-28
PaEfficiency = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]  # a power amplifier's output / input power
Coordinate = Annotated[float, Field(ge=-1e5, le=1e5, allow_inf_nan=False)]  # a position's x or y (m)
CyclesPerFlop = Annotated[float, Field(gt=0, le=1e4, allow_inf_nan=False)]
CyclesPerSample = Annotated[float, Field(gt=0, le=1e15, allow_inf_nan=False)]


class RunSection(Strict):
    seed: int = Field(
        0,
        ge=0,
        lt=2**63,
        description="Master seed: data partition, model init, sampling, fading (0 <= seed < 2^63: numpy seeds are non-negative).",
    )
    rounds: PositiveInt = Field(50, le=1_000_000, description="Number of communication rounds S (at most 10^6).")
    eval_every: PositiveInt = Field(
        1, description="Evaluate the global model every k rounds (and at the last); run.eval_every_s replaces it."
    )
    eval_every_s: Optional[PositiveSeconds] = Field(
        None,
        description="Evaluate the global model every t seconds of simulated time instead of every k rounds: at "
        "the first round (server update) that ends at or after each multiple of t, and at the last round "
        "(0 < t <= 10^6 s). Set, it replaces run.eval_every; unset (the default), run.eval_every applies. The "
        "ideal engine's time stays 0: there only the last round is evaluated.",
    )
    engine: Literal["simpy", "ideal"] = Field(
        "simpy",
        description="simpy: co-simulate time and energy (SimPy discrete-event engine); ideal: zero "
        "time and energy, everyone finishes (learning only).",
    )
    executor: Literal["batched", "fastest", "loop", "vmap", "threads"] = Field(
        "batched",
        description="Client numerics: batched (closed form for linear models; clients in parallel threads for "
        "convolutional and recurrent models on a CPU; else vmap over the clients, as many at once as the memory "
        "allows: the same path, so the same numbers, on every run), fastest (the faster of vmap and threads for "
        "this model on this machine, timed on the first round, kept on --resume: faster, but two runs may take "
        "different paths), vmap or threads (that path), or loop (the per-client reference). All agree within "
        "float32 rounding.",
    )
    device: Literal["cpu", "cuda", "auto"] = Field(
        "cpu",
        description='Where training and evaluation run: "cpu", "cuda" (a GPU; none: exit 2) or "auto" (the GPU '
        "if PyTorch sees one, else the CPU). The simulation stays on the CPU; the numbers agree with the CPU's "
        "within float32 rounding (docs/performance.md).",
    )
    threads: Optional[Annotated[int, Field(gt=0, le=1024)]] = Field(
        None, description="torch CPU threads (default: torch's choice)."
    )
    checkpoint_every: Optional[Annotated[int, Field(gt=0, le=1_000_000)]] = Field(
        None,
        description="Save the run every k rounds beside its results folder (.NAME.checkpoint, removed once the "
        "results are written): `edgefl run --resume` continues a killed run from its last checkpoint, with outputs "
        "identical to an uninterrupted run (default: no checkpoints).",
    )
    stop_at: Optional[str] = Field(
        None,
        description='metric=value, e.g. "acc_worst=0.8": end the run once the target is reached (the metric and '
        "its centred moving average over 5 evaluations both reach it, edgefl.target; the run goes on for the "
        "evaluations that confirm it).",
    )

    @field_validator("stop_at")
    @classmethod
    def _a_target(cls, value):
        if value is not None:
            try:
                parse_target(value)
            except UserError as exc:
                raise ValueError(str(exc).replace("--target", "expected metric=value, got")) from None
        return value

    @field_validator("engine", mode="before")
    @classmethod
    def _removed_engine(cls, value):
        if value == "simpy_reference":  # removed: the SimPy model is the one engine now
            raise ValueError(
                "'simpy_reference' was removed: the SimPy model is now the only co-simulation; "
                'use engine = "simpy" (same model, same numbers)'
            )
        return value


def _data_name(value: Any) -> str:
    """The data set name of a [data] value (default: synthetic; not a table: the default class
    reports the type error)."""
    if isinstance(value, DataParams):
        return value.name
    name = value.get("name", DEFAULT_DATASET) if isinstance(value, dict) else DEFAULT_DATASET
    return name if isinstance(name, str) else repr(name)


PLUGIN_DATA_TAG = "plugin"  # the union member of data sets of one's own ("package.module:Class")


def _data_tag(value: Any) -> str:
    """The union tag of a [data] value: a built-in's name, or the plug-in tag."""
    name = _data_name(value)
    return PLUGIN_DATA_TAG if data_registry.is_plugin(name) else name


def _plugin_data(value: Any) -> DataParams:
    """[data] of a plug-in: validated by its own DataParams subclass (its errors name its keys)."""
    if isinstance(value, DataParams):
        return value
    return data_registry.plugin_class(value["name"]).model_validate(value)


# [data]: validated against the params class of its data.name (edgefl/data/registry.py), built-in or plug-in.
DataSection = Annotated[
    Union[
        tuple(Annotated[cls, Tag(name)] for name, cls in DATA_REGISTRY.items())
        + (Annotated[SerializeAsAny[DataParams], PlainValidator(_plugin_data), Tag(PLUGIN_DATA_TAG)],)
    ],
    Discriminator(_data_tag),
]


def model_misfit(model: str, input_shape: tuple[int, ...], num_classes: int, keys: dict | None = None) -> str | None:
    """Why ``model`` cannot learn data of this input shape and number of classes (1: a regression), or None. A
    built-in that refuses the shape says why (its factory's ValueError); a plug-in's refusal is its own (exit 4,
    when the run builds it)."""
    if model == "regression" and num_classes != 1:
        return f"the regression model predicts one number, the data has {num_classes} classes (use linear, mlp or cnn)"
    if model in model_catalogue.BUILTINS and model != "regression" and num_classes == 1:
        return 'the data is a regression (one real response): use model.name = "regression"'
    if model == "cnn" and not fits_cnn(input_shape):
        return f"the cnn needs square images (channels, side, side) with side % 4 == 0, the inputs are {input_shape}"
    if model in model_catalogue.BUILTINS:
        from edgefl import models  # torch: a model is built only once the sections are valid

        try:
            models.parameter_count(model, input_shape, num_classes, keys=keys)
        except ValueError as exc:
            return str(exc)
    return None


class ModelSection(Strict):
    """`name`: a built-in, an installed model plug-in (entry-point group `edgefl.models`) or
    `"package.module:factory"` (docs/extending.md); a model's own keys in a table of its own,
    `[model.resnet18_gn] groups = 2` or `[model."my_models:small_resnet"] width = 16`."""

    model_config = ConfigDict(extra="allow", validate_default=True, allow_inf_nan=False)
    name: str = Field(
        "linear",
        description="linear, mlp, cnn (DRDM paper's CNN), regression (linear, MSE), cifar_cnn (McMahan et al. "
        "2017), femnist_cnn (LEAF), resnet18_gn (ResNet-18 with GroupNorm, Hsieh et al. 2020), shakespeare_lstm "
        '(LEAF), or a model of one\'s own: "package.module:factory" (docs/extending.md).',
    )
    hidden: PositiveInt = Field(200, le=100_000, description="Hidden units of the mlp (at most 10^5).")

    @field_validator("name")
    @classmethod
    def _known_model(cls, name):
        if name not in model_catalogue.BUILTINS:  # a built-in is imported only when a run builds it
            model_catalogue.REGISTRY.get(name)  # UnknownPlugin (a ValueError) naming what is wrong, the nearest name
        return name

    @model_validator(mode="after")
    def _own_keys(self):
        for key, value in (self.model_extra or {}).items():
            if not (key in model_catalogue.BUILTINS or model_catalogue.is_plugin(key)):
                hint = difflib.get_close_matches(
                    key, [*ModelSection.model_fields, *model_catalogue.REGISTRY.names()], n=1
                )
                raise ValueError(
                    f"unknown key {key!r}"
                    + (f" (did you mean {hint[0]!r}?)" if hint else "")
                    + "; a model's own keys go in a table named for it, e.g. [model.resnet18_gn]"
                )
            if not isinstance(value, dict):
                raise ValueError(f"model.{key} must be a table of {key}'s own keys, e.g. [model.{key}]")
            if key == self.name or key in model_catalogue.BUILTINS:
                model_catalogue.check_keys(key, value)
        if self.name not in (self.model_extra or {}) and self.name not in model_catalogue.BUILTINS:
            model_catalogue.check_keys(
                self.name, {}
            )  # a model with required keys needs its table (no built-in has one)
        return self

    def keys(self) -> dict:
        """The selected model's own keys, validated, as its factory takes them."""
        return model_catalogue.check_keys(self.name, (self.model_extra or {}).get(self.name, {}))


class AlgorithmSection(NumbersOnly):
    """Common keys. Each algorithm's own keys go in a table of its own, e.g. `[algorithm.drdm] mu = 0.01`
    (`--set algorithm.drdm.mu=0.01`), so one scenario can hold the settings of several algorithms and
    `--set algorithm.name=...` switches between them; the tables of the algorithms not selected are
    validated but unused."""

    model_config = ConfigDict(extra="allow", validate_default=True, allow_inf_nan=False)
    name: str = Field("fedavg", description="Algorithm (see the algorithm-specific keys below).")
    local_steps: PositiveInt = Field(10, le=100_000, description="tau, local steps per round (at most 10^5).")
    clients_per_round: PositiveInt = Field(10, le=10_000_000, description="m, clients sampled per round.")
    lr: PositiveFloat = Field(
        0.1,
        le=1e4,
        description="eta, local step size (at most 10^4; a step that makes the model non-finite stops the run with exit 3).",
    )
    batch_size: PositiveInt = Field(32, le=1_000_000, description="B, minibatch size of a local step (at most 10^6).")
    over_selection: float = Field(
        0.0,
        ge=0,
        le=10,
        description="FedScale-style over-selection x: select ceil(m(1+x)) clients, aggregate the "
        "first m uploads to arrive; the others are told to stop (their energy until then counts).",
    )

    @model_validator(mode="after")
    def _known_algorithm(self):
        # algorithms.get: UnknownPlugin (a ValueError) naming what is wrong, with the nearest known name
        plugins.check_algorithm_class(self.name, algorithms.get(self.name))
        for key, value in (self.model_extra or {}).items():
            if key in algorithms.REGISTRY or (":" in key and algorithms.is_algorithm(key)):  # a plug-in's table
                if not isinstance(value, dict):
                    raise ValueError(f"algorithm.{key} must be a table of {key}'s own keys, e.g. [algorithm.{key}]")
                continue
            owners = [n for n in algorithms.names() if key in algorithms.get(n).Params.model_fields]
            if owners and self.name in owners:  # the flat form of before
                raise ValueError(
                    f"{key!r} is {self.name}'s own key: write it in its own table, [algorithm.{self.name}] "
                    f"{key} = ... (on the command line: --set algorithm.{self.name}.{key}=...)"
                )
            if owners:
                raise ValueError(
                    f"{key!r} is not a key of {self.name}; it is an own key of {', '.join(owners)}: write it "
                    f"in that algorithm's table, e.g. [algorithm.{owners[0]}] {key} = ... (--set "
                    f"algorithm.{owners[0]}.{key}=...)"
                )
            own = {k: n for n in algorithms.names() for k in algorithms.get(n).Params.model_fields}
            own.update({k: self.name for k in algorithms.get(self.name).Params.model_fields})  # the selected first
            hint = difflib.get_close_matches(
                key, list(algorithms.get(self.name).Params.model_fields), n=1
            ) or difflib.get_close_matches(key, [*AlgorithmSection.model_fields, *algorithms.names(), *own], n=1)
            where = (
                ""
                if not hint
                else (
                    f" (did you mean [algorithm.{own[hint[0]]}] {hint[0]}?)"
                    if hint[0] in own
                    else f" (did you mean {hint[0]!r}?)"
                )
            )
            raise ValueError(
                f"unknown key {key!r}{where}; the common keys are {', '.join(AlgorithmSection.model_fields)}, "
                f"and each algorithm's own keys go in [algorithm.<name>]"
            )
        return self

    def tables(self) -> dict[str, dict]:
        """The algorithms' own tables ([algorithm.<name>]) in the scenario."""
        return {k: v for k, v in (self.model_extra or {}).items() if isinstance(v, dict) and algorithms.is_algorithm(k)}

    def hyperparams(self, name: str | None = None):
        """The own keys of the selected algorithm (or of ``name``), validated by its HyperParams model."""
        name = name or self.name
        params = algorithms.get(name).Params
        return params(**bools_as_text(params, self.tables().get(name, {})))


class NetworkSection(Strict):
    snr_db: Optional[SnrDb] = Field(
        None,
        description="Mean uplink SNR (dB, -50 to 60: beyond is a typo, not a radio). Default 20 unless a link budget is given.",
    )
    bandwidth_mhz: Megahertz = Field(
        1.0, description="Uplink band (MHz, up to 10^4; per client if dedicated, shared otherwise)."
    )
    access: Literal["dedicated", "fdma", "tdma"] = Field(
        "dedicated", description="dedicated band per client; fdma: equal split among uploaders; tdma: FIFO queue."
    )
    fading: Literal["none", "rayleigh", "rician"] = Field(
        "none", description="Drawn per transmission attempt, or per coherence_s block when that is set."
    )
    rician_k: float = Field(
        1.0, ge=0, le=1e4, description="Rician K-factor (LOS / scattered power, linear, up to 10^4 = 40 dB)."
    )
    shannon_efficiency: float = Field(1.0, gt=0, le=1, description="Fraction of the Shannon rate achieved.")
    snr_gap_db: float = Field(0.0, ge=0, le=30, description="SNR gap of the modulation and coding (rate uses SNR/gap).")
    rate: Literal["shannon", "mcs"] = Field(
        "shannon",
        description="Rate adaptation: shannon (capped at max_spectral_efficiency if set) or mcs (the "
        "highest mcs_table entry the SNR reaches; below the lowest, the block is in outage).",
    )
    max_spectral_efficiency: Optional[Annotated[float, Field(gt=0, le=30, allow_inf_nan=False)]] = Field(
        None, description="Cap of the shannon rate, bit/s/Hz (e.g. 5.55: LTE's highest CQI). Unset: no cap."
    )
    mcs_table: Optional[
        list[
            tuple[
                Annotated[float, Field(ge=-50, le=60, allow_inf_nan=False)],
                Annotated[float, Field(gt=0, le=30, allow_inf_nan=False)],
            ]
        ]
    ] = Field(
        None,
        description="rate = mcs: [[snr_db, bit/s/Hz], ...], both increasing. Unset: the 15 entries of the "
        "3GPP 4-bit CQI table (0.1523-5.5547 bit/s/Hz at -6.7-22.7 dB).",
    )
    standard: Literal["lte", "nr"] = Field(
        "lte",
        description="The link's standard: lte, the 3GPP 4-bit CQI table for rate = mcs; nr, the NR PUSCH MCS table "
        "(TS 38.214 Table 5.1.3.1-1, SNR for 10 % BLER from 5G-LENA's link-level curves) and NR framing: the "
        "cyclic prefix and the DMRS take 1 - (nr_pusch_symbols - nr_dmrs_symbols) / 15 of the resource, on top of "
        "overhead_fraction (docs/model.md §3a).",
    )
    nr_pusch_symbols: int = Field(
        14, ge=2, le=14, description="standard = nr: OFDM symbols of a 14-symbol slot that carry the PUSCH."
    )
    nr_dmrs_symbols: int = Field(
        1, ge=1, le=4, description="standard = nr: of those, the symbols of the demodulation reference signal (1-4)."
    )
    coherence_s: Optional[Annotated[float, Field(ge=1e-4, le=1e6, allow_inf_nan=False)]] = Field(
        None,
        description="Block fading (s, at least 0.1 ms: a 5G slot): a message longer than this sees a new fading draw per block (the rate "
        "follows each block; outage blocks carry nothing). Unset: one draw per attempt.",
    )
    max_retransmissions: int = Field(
        0,
        ge=0,
        le=64,
        description="ARQ: attempts after a failed one (outage or packet error); each is charged; "
        "a message that fails them all is lost.",
    )
    downlink: Literal["broadcast", "multicast", "unicast"] = Field(
        "broadcast",
        description="broadcast: one transmission, each receiver at its own rate; multicast: one "
        "transmission at the weakest receiver's rate; unicast: base-station power and band split among the receivers.",
    )
    access_latency_s: Seconds = Field(
        0.0,
        ge=0,
        description="The radio's promotion before a message from idle (s): random access, connection "
        "set-up, grant, at devices.promotion_power_w; none while the radio is still in its tail (LTE: ~0.26 s, "
        "Huang et al. 2012).",
    )
    uplink: Literal["digital", "aircomp"] = Field(
        "digital",
        description="digital: each upload a message over `access`; aircomp: over-the-air computation (Zhu, Wang "
        "& Huang 2020): a phase's uploaders send their update vectors at once, analog, over the whole band, and "
        "the server receives their sum plus noise (docs/over-the-air.md).",
    )
    aircomp_symbols_per_hz: float = Field(
        1.0,
        gt=0,
        le=10,
        allow_inf_nan=False,
        description="aircomp: analog symbols per s per Hz of the uplink band, one model value each: d values take "
        "d / (bandwidth · this) s, whatever the number of devices.",
    )
    aircomp_threshold_db: float = Field(
        0.0,
        ge=-50,
        le=60,
        allow_inf_nan=False,
        description="aircomp: truncation (cell-interior scheduling): a device whose uplink SNR at full power over "
        "the band, this round's fading included, is below this (dB) is not scheduled in the round.",
    )
    distance_m: Optional[Metres] = Field(
        None, description="Link budget: every client at this distance (m, up to 10^5)."
    )
    cell_radius_m: Optional[Metres] = Field(None, description="Link budget: clients uniform in a disk (m, up to 10^5).")
    min_distance_m: Metres = Field(
        35.0, description="Link budget: closest client distance in the disk (3GPP TR 36.814 macro cell: 35 m)."
    )
    path_loss: str = Field(
        "log_distance",
        description="Link budget: path-loss model (channel/path_loss.py). log_distance: intercept + "
        "slope log10(d/1 km); free_space: Friis at carrier_ghz; umi_street_canyon: 3GPP TR 38.901 UMi street canyon "
        'at carrier_ghz, bs_height_m, ue_height_m, line_of_sight; or "package.module:function" '
        "(docs/extending.md).",
    )
    path_loss_intercept_db: float = Field(
        128.1, ge=0, le=300, description="log_distance: path loss at 1 km (3GPP macro: 128.1 dB)."
    )
    path_loss_slope_db: float = Field(
        37.6, ge=0, le=100, description="log_distance: path loss per decade of distance (dB)."
    )
    carrier_ghz: Annotated[float, Field(gt=0, le=100, allow_inf_nan=False)] = Field(
        3.5, description="free_space, umi_street_canyon: carrier frequency (GHz; 38.901 is valid for 0.5-100)."
    )
    bs_height_m: Annotated[float, Field(gt=1, le=150, allow_inf_nan=False)] = Field(
        10.0, description="umi_street_canyon: base-station antenna height (m; 38.901 UMi: 10)."
    )
    ue_height_m: Annotated[float, Field(ge=1.5, le=22.5, allow_inf_nan=False)] = Field(
        1.5, description="umi_street_canyon: device height (m; 38.901: 1.5-22.5)."
    )
    line_of_sight: Union[StrictBool, Literal["random"]] = Field(
        False,
        description='umi_street_canyon, uma, rma: true, the LOS formula; false, NLOS (default); "random", each '
        "device-site link LOS with the probability of 3GPP TR 38.901 Table 7.4.2-1 at its distance, with its state's "
        "path loss and shadowing sigma (Table 7.4.1-1); puts the devices on the hexagonal layout (docs/multi-cell.md).",
    )
    shadowing_std_db: float = Field(
        0.0,
        ge=0,
        le=30,
        allow_inf_nan=False,
        description="Log-normal shadowing sigma (dB), drawn once per client (and site). With line_of_sight = "
        '"random" it is the state\'s of TR 38.901 Table 7.4.1-1 instead: leave this at 0.',
    )
    shadowing_correlation: Literal["independent", "spatial"] = Field(
        "independent",
        description="independent: one shadowing draw per device and site; spatial: each site's shadowing a field "
        "exponentially correlated in space (shadowing_decorrelation_m) and correlated between sites "
        "(shadowing_site_correlation), read at each device's position (moving devices move through it).",
    )
    shadowing_decorrelation_m: Optional[Metres] = Field(
        None,
        description="shadowing_correlation = spatial: distance (m) at which the correlation falls to 1/e. Unset: "
        "TR 38.901 Table 7.5-6 for umi_street_canyon (LOS 10, NLOS 13), uma (37, 50), rma (37, 120).",
    )
    shadowing_site_correlation: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] = Field(
        0.5, description="shadowing_correlation = spatial: correlation of a device's shadowing towards two sites."
    )
    noise_figure_db: float = Field(
        0.0,
        ge=0,
        le=30,
        description="Receiver noise figure (noise = N0*B*NF, N0 = -174 dBm/Hz), "
        "of both links unless bs_noise_figure_db / device_noise_figure_db say otherwise.",
    )
    bs_noise_figure_db: Optional[NoiseFigureDb] = Field(
        None,
        description="Noise figure of the base station's receiver (the uplink; 3GPP TR 36.814: 5 dB). Unset: "
        "noise_figure_db.",
    )
    device_noise_figure_db: Optional[NoiseFigureDb] = Field(
        None,
        description="Noise figure of the devices' receivers (the downlink; 3GPP TR 36.814: 9 dB for a UE). "
        "Unset: noise_figure_db.",
    )
    bs_tx_power_dbm: PowerDbm = Field(
        33.0,
        description="Base-station power for the downlink link budget (3GPP TR 36.814 "
        "macro cell: 46 dBm over 10 MHz, i.e. 43 dBm over 5 MHz).",
    )
    uplink_max_bits_per_hz: Optional[Annotated[float, Field(gt=0, le=30, allow_inf_nan=False)]] = Field(
        None,
        description="Highest spectral efficiency of the uplink's modulation (bit/s/Hz), with either rate model "
        "(e.g. phones limited to 16QAM: ~2.4, the CQI table's best 16QAM entry 2.41). Unset: no cap beyond the "
        "rate model's.",
    )
    overhead_fraction: Annotated[float, Field(ge=0, le=0.9, allow_inf_nan=False)] = Field(
        0.0,
        description="Share of every link's resource taken by control channels and reference signals, not data: "
        "rates are (1 - overhead_fraction) x the rate model's (LTE: roughly 0.15-0.25).",
    )
    downlink_snr_db: Optional[SnrDb] = Field(
        None, description="Mean downlink SNR; default: uplink snr_db, or the budget."
    )
    downlink_bandwidth_mhz: Optional[Megahertz] = Field(None, description="Default: bandwidth_mhz.")
    deadline_s: Optional[PositiveSeconds] = Field(None, description="Per communication phase; late clients are cut.")
    outage_snr_db: Optional[Annotated[float, Field(ge=-50, le=60, allow_inf_nan=False)]] = Field(
        None,
        description="Packet-error threshold (dB): each attempt is sent at the fixed rate of the mean SNR and "
        "fails when the instantaneous SNR over the band it holds is below this (uploads; Chen et al. 2021).",
    )
    header_bits: int = Field(0, ge=0, le=10**9, description="Added to every message (both directions).")
    bits_per_param: PositiveInt = Field(32, le=64, description="Payload bits per parameter (32 = fp32).")
    cells: PositiveInt = Field(
        1,
        le=19,
        description="Base stations (docs/multi-cell.md): 1, 7 or 19 on a hexagonal layout (inter_site_m), or as many "
        "as site_positions_m lists. More than 1 needs cell_radius_m (a link budget); devices are dropped over the "
        "cells' union and served by their strongest mean link.",
    )
    inter_site_m: Optional[Metres] = Field(
        None,
        description="Hexagonal layout: distance between neighbouring base stations (m; 3GPP TR 38.901 UMa: 500). "
        "Unset: sqrt(3) x cell_radius_m (hexagons of circumradius cell_radius_m).",
    )
    site_positions_m: Optional[list[tuple[Coordinate, Coordinate]]] = Field(
        None,
        description="Listed base stations [[x, y], ...] (m, |x|, |y| up to 10^5), instead of the hexagonal layout: "
        "devices are dropped in disks of cell_radius_m around them; cells must equal their number.",
    )
    reuse: Literal[1, 3] = Field(
        1,
        description="Frequency reuse: 1, every cell on the same band (co-channel interference from every other "
        "cell); 3, neighbouring cells on different bands (listed sites: cell i on band i mod 3). Each cell's band "
        "is bandwidth_mhz.",
    )
    interference_load: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] = Field(
        1.0,
        description="Multi-cell: the fraction of time a co-channel cell transmits on a resource (activity factor; "
        "1: full buffer): interference is this times the mean received power of its devices (uplink) or base "
        "station (downlink).",
    )
    interference: Literal["expected_load", "events"] = Field(
        "expected_load",
        description="Multi-cell uplink interference: expected_load, each co-channel cell's average device a fraction "
        "interference_load of the time, fixed for the round; events, the co-channel uploads on the air now: an "
        "upload starting or ending in another cell re-times the uploads it interferes with (docs/multi-cell.md). "
        "The downlink keeps the expected load.",
    )
    handover_margin_db: Annotated[float, Field(ge=0, le=30, allow_inf_nan=False)] = Field(
        3.0,
        description="Multi-cell with moving devices: a device changes cell when another's mean link beats its "
        "serving cell's by more than this (dB, the A3 hysteresis; checked at each round's start).",
    )
    handover_interruption_s: Seconds = Field(
        0.05,
        description="Multi-cell: after a handover a device cannot send or receive for this long (s; LTE: ~0.03-"
        "0.06); its messages wait, charged at idle power.",
    )
    power_control_p0_dbm: Optional[Annotated[float, Field(ge=-150, le=30, allow_inf_nan=False)]] = Field(
        None,
        description="Open-loop uplink power control (3GPP TS 38.213): transmit power min(P_max, P0 + alpha x path "
        "loss) in dBm, P_max the device's tx_power_dbm; P0 the target received power (dBm; e.g. -80 with alpha "
        "0.8). Unset: off (every device at its tx_power_dbm). Needs a link budget.",
    )
    power_control_alpha: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] = Field(
        1.0, description="Power control: the fraction of the path loss compensated, in [0, 1] (1: full)."
    )
    sectors: Literal[1, 3] = Field(
        1,
        description="Cells per site: 1 (omnidirectional), or 3 sectors (boresights 30, 150, 270 deg) with the TR "
        "38.901 antenna element (Table 7.3-1: 8 dBi, 65 deg beam width, 30 dB front-to-back). Cell c is sector "
        "c mod 3 of site c // 3; with reuse 3 each sector of a site has its own band.",
    )
    downtilt_deg: Annotated[float, Field(ge=0, le=90, allow_inf_nan=False)] = Field(
        0.0, description="sectors = 3: the element's downtilt below the horizon (deg; TR 38.901 calibration: 12)."
    )
    antenna_rows: int = Field(
        1,
        ge=1,
        le=64,
        description="sectors = 3: elements in each sector's vertical column, 0.8 wavelengths apart, the beam tilted "
        "electrically by downtilt_deg (TR 38.901 calibration, configuration 1: 10; about 10 log10(rows) dB of gain). "
        "1: the element alone, tilted mechanically.",
    )
    wraparound: StrictBool = Field(
        False,
        description="Hexagonal layout of 7 or 19 sites: every distance and angle taken to the nearest copy of the site "
        "in the 7 copies of the layout that tile the plane, so that edge cells see the interference of centre cells.",
    )

    @field_validator("path_loss")
    @classmethod
    def _known_path_loss(cls, name):
        model = path_loss.get(name)  # ValueError naming the known models
        if name not in path_loss.MODELS:  # a plug-in: only a function model(distance_m, network) passes
            plugins.check_path_loss_function(name, model)
        return name

    @model_validator(mode="after")
    def _one_link_mode(self):
        budget = self.distance_m is not None or self.cell_radius_m is not None
        if budget and self.snr_db is not None:
            raise ValueError("give either network.snr_db or a link budget (distance_m / cell_radius_m), not both")
        if self.distance_m is not None and self.cell_radius_m is not None:
            raise ValueError("give network.distance_m or network.cell_radius_m, not both")
        if self.cell_radius_m is not None and self.cell_radius_m <= self.min_distance_m:
            raise ValueError("network.cell_radius_m must exceed network.min_distance_m")
        if self.site_positions_m is not None and len(self.site_positions_m) < 2:
            raise ValueError(
                "network.site_positions_m lists base stations of several cells (at least 2); a single cell is the "
                "default (its base station at the origin): unset site_positions_m"
            )
        if self.site_positions_m is not None and len(self.site_positions_m) != self.cells:
            raise ValueError(
                f"network.site_positions_m lists {len(self.site_positions_m)} base stations but network.cells is "
                f"{self.cells}: set network.cells = {len(self.site_positions_m)}"
            )
        if self.cells > 1:
            if self.site_positions_m is None and self.cells not in (7, 19):
                raise ValueError(
                    f"network.cells = {self.cells}: a hexagonal layout has 1, 7 or 19 cells; or list the base "
                    "stations in network.site_positions_m"
                )
            if self.cell_radius_m is None:
                raise ValueError(
                    "network.cells > 1 needs a link budget with network.cell_radius_m (e.g. 500), not snr_db or "
                    "distance_m: devices are dropped over the cells"
                )
            if self.downlink_snr_db is not None:
                raise ValueError("network.cells > 1 computes the downlink from the link budget: unset downlink_snr_db")
            if self.site_positions_m is None and self.inter_site_m is not None:
                if self.inter_site_m <= 2 * self.min_distance_m:  # the exclusion disk must fit in the hexagon
                    raise ValueError(
                        f"network.inter_site_m = {self.inter_site_m:g} puts the base stations closer than twice "
                        f"network.min_distance_m = {self.min_distance_m:g}: no device could be dropped in a cell at "
                        f"least min_distance_m from its base station (3GPP TR 36.814: 35 m). Expected inter_site_m > "
                        f"{2 * self.min_distance_m:g} (3GPP UMa: 500), or a smaller min_distance_m"
                    )
        self._check_layout_keys(budget)
        if self.nr_dmrs_symbols >= self.nr_pusch_symbols:
            raise ValueError(
                f"network.nr_dmrs_symbols ({self.nr_dmrs_symbols}) must be fewer than network.nr_pusch_symbols "
                f"({self.nr_pusch_symbols}): some symbols must carry data"
            )
        if self.power_control_p0_dbm is not None and not budget:
            raise ValueError(
                "network.power_control_p0_dbm needs a link budget (path loss): set network.cell_radius_m or "
                "distance_m instead of snr_db"
            )
        if not budget and self.snr_db is None:
            self.snr_db = 20.0
        if self.mcs_table is not None:
            if self.rate != "mcs":
                raise ValueError('network.mcs_table is used only with network.rate = "mcs"')
            try:
                check_mcs_table([row[0] for row in self.mcs_table], [row[1] for row in self.mcs_table])
            except ValueError as exc:
                raise ValueError(f"network.mcs_table: {exc}") from None
        if self.downlink == "multicast" and self.coherence_s is not None:
            raise ValueError(
                'network.downlink = "multicast" with network.coherence_s is not supported yet: unset '
                "coherence_s, or use broadcast or unicast"
            )
        if self.max_spectral_efficiency is not None and self.rate != "shannon":
            raise ValueError(
                'network.max_spectral_efficiency caps the shannon rate; with rate = "mcs" the table\'s '
                "highest entry is the cap"
            )
        return self

    def uses_layout(self) -> bool:
        """Whether the devices are dropped on the multi-cell layout (edgefl.deployment.CellLayout): several cells, or
        a key that needs it (sectors, random LOS, spatially correlated shadowing)."""
        return (
            self.cells > 1
            or self.sectors > 1
            or self.line_of_sight == "random"
            or self.shadowing_correlation == "spatial"
        )

    def _check_layout_keys(self, budget: bool) -> None:
        if self.line_of_sight == "random":
            if self.path_loss not in tr38901.SCENARIOS:
                raise ValueError(
                    f'network.line_of_sight = "random" draws LOS states from a 3GPP TR 38.901 scenario: set '
                    f"network.path_loss to one of {', '.join(tr38901.SCENARIOS)} (got {self.path_loss!r})"
                )
            if self.shadowing_std_db != 0:
                raise ValueError(
                    'network.line_of_sight = "random" takes each link\'s shadowing sigma from its state (TR 38.901 '
                    "Table 7.4.1-1): leave network.shadowing_std_db at 0"
                )
        if (
            self.shadowing_correlation == "spatial"
            and self.shadowing_decorrelation_m is None
            and self.path_loss not in tr38901.SCENARIOS
        ):
            raise ValueError(
                f'network.shadowing_correlation = "spatial" with network.path_loss = {self.path_loss!r} needs '
                "network.shadowing_decorrelation_m (m; e.g. 50): TR 38.901's table covers "
                f"{', '.join(tr38901.SCENARIOS)} only"
            )
        if self.uses_layout() and self.cell_radius_m is None:
            raise ValueError(
                'network.sectors, line_of_sight = "random" and shadowing_correlation = "spatial" place devices on '
                "the hexagonal layout: they need a link budget with network.cell_radius_m (e.g. 300), not snr_db or "
                "distance_m"
            )
        if self.wraparound:
            if self.site_positions_m is not None or self.cells not in (7, 19):
                raise ValueError(
                    "network.wraparound needs a hexagonal layout of 7 or 19 sites (network.cells = 7 or 19, no "
                    f"site_positions_m); got cells = {self.cells}"
                    + (" with listed sites" if self.site_positions_m is not None else "")
                )
        if self.uses_layout() and self.downlink_snr_db is not None:
            raise ValueError("the multi-cell layout computes the downlink from the link budget: unset downlink_snr_db")
        if self.uplink == "aircomp" and self.interference == "events":
            raise ValueError(
                'network.interference = "events" follows digital uploads; with network.uplink = "aircomp" the cells '
                'interfere in their shared slot (docs/over-the-air.md): use interference = "expected_load"'
            )


# The radio profiles (devices.radio_profile): values of the radio's state-machine keys, each set unless the scenario
# sets it (docs/model.md §8 gives the sources). lte: measured on a commercial LTE network, Huang et al., "A close
# examination of performance and power characteristics of 4G LTE networks", MobiSys 2012 (promotion 260 ms at
# 1.21 W, tail 11.58 s at 1.06 W). lte_fast_dormancy: the same radio, which asks for its release (fast dormancy,
# 3GPP Rel-8 SCRI / LTE RRC connection release) ~1 s after its last packet, as the traffic-aware scheme of Deng and
# Balakrishnan, CoNEXT 2012; every message after a gap then pays a promotion. nr_inactive: 5G NR standalone,
# suspended to RRC_INACTIVE (3GPP TS 38.331 §5.3.8) after a short inactivity timer and resumed from it: the
# resume is the control-plane latency 3GPP TR 38.913 §7.5 targets (10 ms), taken as 50 ms with its random access;
# the tail and promotion powers are taken from LTE (an assumption: 5G modems draw comparable power while connected).
RADIO_PROFILES: dict[str, dict[str, float]] = {
    "lte": {"access_latency_s": 0.26, "promotion_power_w": 1.2, "tail_s": 11.6, "tail_power_w": 1.06},
    "lte_fast_dormancy": {"access_latency_s": 0.26, "promotion_power_w": 1.2, "tail_s": 1.0, "tail_power_w": 1.06},
    "nr_inactive": {"access_latency_s": 0.05, "promotion_power_w": 1.2, "tail_s": 1.0, "tail_power_w": 1.06},
}


def apply_radio_profile(raw):
    """A raw scenario (a dict) with ``devices.radio_profile``'s values filled in where the keys are not set
    (network.access_latency_s; devices.promotion_power_w, tail_s, tail_power_w); anything else unchanged."""
    if not isinstance(raw, dict) or not isinstance(raw.get("devices"), dict):
        return raw
    profile = RADIO_PROFILES.get(raw["devices"].get("radio_profile"))  # (an unknown name: the field's error)
    if profile is None:
        return raw
    devices = dict(raw["devices"])
    for key in ("promotion_power_w", "tail_s", "tail_power_w"):
        devices.setdefault(key, profile[key])
    network = raw.get("network", {})
    if isinstance(network, dict):  # (anything else: the section's own error)
        network = {"access_latency_s": profile["access_latency_s"], **network}
    return {**raw, "devices": devices, "network": network}


class DevicesSection(Strict):
    cpu_ghz: Annotated[Gigahertz, PerDevice("cpu_hz", lambda ghz, _: ghz * 1e9)] = Field(
        1.0, description="CPU frequency f (GHz, up to 100)."
    )
    kappa: Annotated[Capacitance, PerDevice("kappa")] = Field(
        1e-28, description="Effective switched capacitance (energy = kappa*C*f^2)."
    )
    static_power_w: Annotated[Watts, PerDevice("static_power_w")] = Field(
        0.0, description="CPU static power while computing."
    )
    tx_power_dbm: Annotated[PowerDbm, PerDevice("tx_power_w", lambda dbm, _: dbm_to_w(dbm))] = Field(
        23.0, description="Uplink transmit power (23 dBm = 0.2 W)."
    )
    circuit_power_w: Annotated[Watts, PerDevice("circuit_power_w")] = Field(
        0.0,
        description="Radio circuit power added while transmitting (uplink power "
        "drawn = tx power / pa_efficiency + circuit_power_w).",
    )
    pa_efficiency: Annotated[PaEfficiency, PerDevice("pa_efficiency")] = Field(
        1.0,
        description="Efficiency of the transmitter's power amplifier, in (0, 1]: it draws tx power / pa_efficiency "
        "(a phone's at 23 dBm: ~0.2-0.4). 1 (with circuit_power_w = 0): the radiated power only, as Yang et al. 2021.",
    )
    rx_power_w: Annotated[Watts, PerDevice("rx_power_w")] = Field(0.1, description="Power while receiving (downlink).")
    idle_power_w: Annotated[Watts, PerDevice("idle_power_w")] = Field(
        0.01, description="Power while waiting inside a phase (e.g. TDMA queue)."
    )
    promotion_power_w: Annotated[
        Optional[Watts], PerDevice("promotion_power_w", lambda w, c: np.where(np.isnan(w), c["idle_power_w"], w))
    ] = Field(
        None,
        description="Power (W) while the radio connects before a message from idle, for "
        "network.access_latency_s (LTE RRC promotion: ~1.2 W for ~0.26 s, Huang et al. 2012). Unset: idle_power_w.",
    )
    tail_s: Annotated[Seconds, PerDevice("tail_s")] = Field(
        0.0,
        description="Radio tail after each message: the radio stays connected at "
        "tail_power_w this long unless the next message starts first, which then needs no "
        "promotion (LTE RRC tail: ~11.6 s).",
    )
    tail_power_w: Annotated[Watts, PerDevice("tail_power_w")] = Field(
        0.0, description="Power during the radio tail (LTE: ~1.06 W; Huang et al. 2012)."
    )
    radio_profile: Optional[Literal["lte", "lte_fast_dormancy", "nr_inactive"]] = Field(
        None,
        description="A named set of the radio's state-machine keys (RADIO_PROFILES, docs/model.md §8): "
        "network.access_latency_s, devices.promotion_power_w, tail_s, tail_power_w, each unless set explicitly. "
        "lte: Huang et al. 2012; lte_fast_dormancy: the phone releases the connection ~1 s after its last packet; "
        "nr_inactive: 5G NR suspended to RRC_INACTIVE, resumed quickly. Unset: the keys' own values.",
    )
    slowdown: Literal["none", "exponential", "lognormal"] = Field(
        "none",
        description="Stragglers: a random per-round factor on every client's compute time. exponential: "
        "1 + Exp(slowdown_mean) (shifted exponential, Lee et al. 2018); lognormal: exp(slowdown_sigma * N(0, 1)).",
    )
    slowdown_mean: Annotated[float, Field(ge=0, le=100, allow_inf_nan=False)] = Field(
        1.0, description="slowdown = exponential: mean of the extra factor."
    )
    slowdown_sigma: Annotated[float, Field(ge=0, le=5, allow_inf_nan=False)] = Field(
        0.5, description="slowdown = lognormal: sigma of the log factor."
    )
    battery_j: Annotated[
        Optional[PositiveJoules], PerDevice("battery_j", lambda j, _: np.where(np.isnan(j), np.inf, j))
    ] = Field(
        None,
        description="Battery capacity (J; a phone: ~40 kJ). Unset: mains power. Drawn by every charge; "
        "a device that empties mid-round stops (work lost, energy counted).",
    )
    battery_reserve_j: Annotated[Joules, PerDevice("battery_reserve_j")] = Field(
        0.0, description="Below this level a device is unavailable until it harvests back above it."
    )
    harvest_w: Annotated[Watts, PerDevice("harvest_w")] = Field(
        0.0, description="Harvested power (W): constant, or per device (harvest)."
    )
    harvest: Literal["constant", "uniform"] = Field(
        "constant",
        description="constant: every device harvests harvest_w; uniform: each device's power is "
        "drawn once, uniform in [0, 2 harvest_w].",
    )
    speed_mps: Annotated[Speed, PerDevice("speed_mps")] = Field(
        0.0,
        description="Mobility: random-waypoint speed inside the cell (m/s; "
        "needs network.cell_radius_m); path loss recomputed from the new distance each round.",
    )
    availability: Literal["always", "markov", "trace"] = Field(
        "always",
        description="always online; markov: on/off periods, exponential with means mean_on_s / mean_off_s; "
        "trace: online in the intervals of availability_trace. Algorithms sample among the devices online when a "
        "round starts (the server waits until clients_per_round are); a device going offline mid-round is lost.",
    )
    mean_on_s: PositiveSeconds = Field(1800.0, description="availability = markov: mean online period (s).")
    mean_off_s: PositiveSeconds = Field(600.0, description="availability = markov: mean offline period (s).")
    availability_trace: Optional[str] = Field(
        None,
        description="availability = trace: CSV with a header client,start_s,end_s, one online interval per "
        "row (relative to the scenario file).",
    )
    p_fail: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="Probability that a participating device fails in a round "
        "(at a uniform time within its work in the phase); its work of that round is lost.",
    )
    cycles_per_flop: Annotated[CyclesPerFlop, PerDevice(None)] = Field(
        1.0,
        description="CPU cycles per measured FLOP. The default 1 is a "
        "convention, not a measurement (one FP32 operation per cycle): a phone core's "
        "SIMD units do 8-16 FLOPs per cycle at peak, training runs far below peak; "
        "calibrate it to the device (docs/model.md §7).",
    )
    cycles_per_sample: Annotated[Optional[CyclesPerSample], PerDevice(None)] = Field(
        None, description="Override the measured FLOPs (training)."
    )
    cpu_ghz_min: Annotated[
        Optional[Gigahertz],
        PerDevice("cpu_hz_min", lambda ghz, c: np.where(np.isnan(ghz), c["cpu_ghz"] / 10, ghz) * 1e9),
    ] = Field(
        None,
        description="Lowest CPU frequency a controller may set ([control]); cpu_ghz is the highest. "
        "Unset: cpu_ghz / 10.",
    )
    tx_power_dbm_min: Annotated[
        Optional[Annotated[float, Field(ge=-60, le=60, allow_inf_nan=False)]],
        PerDevice("tx_power_w_min", lambda dbm, c: dbm_to_w(np.where(np.isnan(dbm), c["tx_power_dbm"] - 30, dbm))),
    ] = Field(
        None,
        description="Lowest transmit power a controller may set; tx_power_dbm is the highest. "
        "Unset: tx_power_dbm - 30 dB.",
    )
    classes: list["DeviceClass"] = Field(default_factory=list, description="[[devices.classes]] tables.")

    @field_validator("availability_trace")
    @classmethod
    def _a_path(cls, value):
        """The value's shape only: the file is read once, when the run is built (edgefl.deployment)."""
        if value is not None and (not value.strip() or "\0" in value):
            raise ValueError(f"expected the path of a CSV file (client,start_s,end_s), got {value!r}")
        return value

    @model_validator(mode="after")
    def _shares(self):
        total = sum(c.share for c in self.classes)
        if total > 1 + 1e-9:
            raise ValueError(f"device class shares sum to {total:g} > 1")
        for cls in self.classes:
            capacity = cls.battery_j if cls.battery_j is not None else self.battery_j
            reserve = cls.battery_reserve_j if cls.battery_reserve_j is not None else self.battery_reserve_j
            if capacity is not None and reserve >= capacity:
                raise ValueError(
                    f"device class {cls.name!r}: battery_reserve_j = {reserve:g} must be below battery_j = {capacity:g}"
                )
        for where, cls in [("devices", None)] + [(f"device class {c.name!r}", c) for c in self.classes]:

            def value(key):
                own = None if cls is None else getattr(cls, key)
                return own if own is not None else getattr(self, key)

            if value("cpu_ghz_min") is not None and value("cpu_ghz_min") > value("cpu_ghz"):
                raise ValueError(
                    f"{where}: cpu_ghz_min = {value('cpu_ghz_min'):g} must be <= cpu_ghz = "
                    f"{value('cpu_ghz'):g} (the highest frequency)"
                )
            if value("tx_power_dbm_min") is not None and value("tx_power_dbm_min") > value("tx_power_dbm"):
                raise ValueError(
                    f"{where}: tx_power_dbm_min = {value('tx_power_dbm_min'):g} must be <= tx_power_dbm "
                    f"= {value('tx_power_dbm'):g} (the highest power)"
                )
        if self.battery_j is not None and self.battery_reserve_j >= self.battery_j:
            raise ValueError(
                f"devices.battery_reserve_j = {self.battery_reserve_j:g} must be below devices.battery_j "
                f"= {self.battery_j:g}"
            )
        if (self.availability == "trace") != (self.availability_trace is not None):
            raise ValueError(
                'devices.availability = "trace" needs devices.availability_trace (a CSV file), and '
                'availability_trace needs availability = "trace"'
            )
        return self


def _device_class_fields() -> dict[str, Any]:
    """The keys of a [[devices.classes]] table: ``name``, ``share`` and every per-device key of [devices]
    (edgefl.deployment.PerDevice), with its bounds and description, unset by default (the base value)."""
    keys: dict[str, Any] = {
        "name": (str, Field(description="Label, shown in clients.csv.")),
        "share": (float, Field(gt=0, le=1, description="Fraction of the N clients in this class.")),
    }
    for key in per_device_keys(DevicesSection):
        info = DevicesSection.model_fields[key]
        bounds = [m for m in info.metadata if not isinstance(m, PerDevice)]
        accepts_none = info.default is None  # already Optional[...]
        annotation = info.annotation if accepts_none else Optional[Annotated[(info.annotation, *bounds)]]
        keys[key] = (annotation, Field(None, description=info.description))
    return keys


# A [[devices.classes]] table: derived from DevicesSection's per-device keys (each declared once, there).
DeviceClass = create_model("DeviceClass", __base__=Strict, **_device_class_fields())
DevicesSection.model_rebuild()


class PluginSection(NumbersOnly):
    """A section (or a table of [[process]]) that names a plug-in in ``name`` and holds the plug-in's own keys
    beside it, checked against its Params: a controller, a selection policy, a component."""

    model_config = ConfigDict(extra="allow", validate_default=True, allow_inf_nan=False)
    registry: ClassVar[Any]  # the plug-in kind's module: get(name) -> class (ValueError naming the known ones)
    key: ClassVar[str]  # the scenario key that names the plug-in (plugin_registry.KINDS)
    # (base class, the methods it leaves to a subclass, what they are) when the base cannot run by itself
    abstract: ClassVar[tuple[type, tuple[str, ...], str] | None] = None

    @field_validator("name", check_fields=False)
    @classmethod
    def _known(cls, name):
        found = cls.registry.get(name)  # ValueError with the known names
        plugins.check_params_model(cls.key, name, found)  # a PluginError (exit 4): the plug-in's own fault
        if cls.abstract is not None:
            plugins.check_defines(cls.key, name, found, *cls.abstract)
        return name

    def plugin_class(self):
        return self.registry.get(self.name)

    def params(self):
        """The plug-in's own keys, validated by its Params (None: it has none)."""
        params_model = self.plugin_class().Params
        extra = self.model_extra or {}
        if params_model is None:
            if extra:
                raise ValueError(
                    f"{', '.join(extra)}: {self.name} has no keys of its own (its class defines no Params)"
                )
            return None
        return params_model(**extra)


class ControlSection(PluginSection):
    """Common keys; the controller's own keys are checked against its Params (edgefl/control)."""

    registry: ClassVar[Any] = control
    key: ClassVar[str] = "control.name"
    name: str = Field(
        "static",
        description="Controller of per-device knobs, set each round (docs/control.md): "
        "static (the scenario's values), deadline_fit, min_energy, adaptive_tau, or a user's "
        '"package.module:Class".',
    )
    channel_error_db: Annotated[float, Field(ge=0, le=20, allow_inf_nan=False)] = Field(
        0.0,
        description="Std (dB) of the log-normal error of the mean channel the controller sees (drawn per "
        "device and round).",
    )


class SelectionSection(PluginSection):
    """Who trains each round (docs/selection.md); the policy's own keys are checked against its Params."""

    registry: ClassVar[Any] = selection
    key: ClassVar[str] = "selection.name"
    abstract: ClassVar[tuple[type, tuple[str, ...], str] | None] = (
        selection.Policy,
        ("select",),
        "a selection policy defines select(view, k), the clients it picks: docs/selection.md",
    )
    name: str = Field(
        "uniform",
        description="Client selection policy, for the algorithms that accept one (docs/selection.md): uniform "
        "(the algorithm's own sampling), fedcs, best_channel, energy_aware, oort, power_of_choice, or a user's "
        '"package.module:Class".',
    )


class CompressionSection(Strict):
    """Update compression of every algorithm's uploads (docs/compression.md)."""

    name: Literal["none", "qsgd", "topk"] = Field(
        "none",
        description="none; qsgd: unbiased stochastic quantisation to `bits` per value plus the norm "
        "(Alistarh et al. 2017); topk: the largest `fraction` of the entries, with their indices (Stich et al. 2018).",
    )
    bits: Optional[Annotated[int, Field(ge=2, le=32)]] = Field(
        None, description="qsgd: bits per value (sign + level); 32 sends the floats (no quantisation). Default 8."
    )
    fraction: Optional[Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]] = Field(
        None, description="topk: fraction of the entries sent. Default 0.1."
    )
    error_feedback: Optional[bool] = Field(
        None,
        description="topk: keep what was not sent and add it to the next update (Karimireddy et al. 2019). "
        "Default true.",
    )

    @model_validator(mode="after")
    def _keys_of_the_method(self):
        if self.name != "qsgd" and self.bits is not None:
            raise ValueError(f'compression.bits applies to name = "qsgd", not {self.name!r}')
        if self.name != "topk" and (self.fraction is not None or self.error_feedback is not None):
            raise ValueError(f'compression.fraction and error_feedback apply to name = "topk", not {self.name!r}')
        if self.name == "qsgd" and self.bits is None:
            self.bits = 8
        if self.name == "topk":
            self.fraction = 0.1 if self.fraction is None else self.fraction
            self.error_feedback = True if self.error_feedback is None else self.error_feedback
        return self


class ProcessSection(PluginSection):
    """A component from the scenario file: a table of the array ``[[process]]``, with ``name`` and the
    component's own keys (checked against its Params: docs/architecture.md, "Adding a physical process")."""

    registry: ClassVar[Any] = processes
    key: ClassVar[str] = "[[process]] name"
    name: str = Field(
        description="The process: a built-in (thermal), an installed plug-in (entry point "
        '`edgefl.processes`) or a user\'s "package.module:Class" (an edgefl.sim.component.Component '
        "subclass)."
    )

    def own_keys(self) -> list[str]:
        params_model = self.plugin_class().Params
        return list(params_model.model_fields) if params_model is not None else []


class BackhaulSection(Strict):
    """Edge servers at the base stations and a cloud server behind a backhaul (docs/multi-cell.md)."""

    rate_mbps: Annotated[float, Field(gt=0, le=1e6, allow_inf_nan=False)] = Field(
        1000.0, description="Each edge server's link to the cloud (Mbit/s, each way; up to 10^6)."
    )
    latency_ms: Annotated[float, Field(ge=0, le=1e5, allow_inf_nan=False)] = Field(
        10.0, description="One-way latency between an edge server and the cloud (ms)."
    )
    energy_j_per_bit: Annotated[float, Field(ge=0, le=1e-3, allow_inf_nan=False)] = Field(
        0.0,
        description="Energy of the backhaul per bit carried (J/bit; wired networks: ~1e-8 to 1e-7), reported apart "
        "from the devices' energy.",
    )


SECTION_MODELS = {  # data: the keys every data set has; each data set's own are in its class
    "run": RunSection,
    "data": DataParams,
    "model": ModelSection,
    "algorithm": AlgorithmSection,
    "network": NetworkSection,
    "devices": DevicesSection,
    "control": ControlSection,
    "compression": CompressionSection,
    "selection": SelectionSection,
    "backhaul": BackhaulSection,
}
