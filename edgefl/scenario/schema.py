"""The whole scenario: its sections, and the checks that need more than one of them."""

from __future__ import annotations

from pydantic import Field, ValidationError, model_serializer, model_validator

import algorithms
from edgefl.data import DEFAULT_DATASET
from edgefl.data import REGISTRY as DATA_REGISTRY
from edgefl.scenario.sections import (
    AlgorithmSection,
    BackhaulSection,
    CompressionSection,
    ControlSection,
    DataSection,
    DevicesSection,
    ModelSection,
    NetworkSection,
    ProcessSection,
    RunSection,
    SelectionSection,
    Strict,
    apply_radio_profile,
    model_misfit,
)
from edgefl.scenario.sweep_keys import SweepSection, check_sweep_key


class Scenario(Strict):
    run: RunSection = Field(default_factory=RunSection)
    data: DataSection = Field(default_factory=DATA_REGISTRY[DEFAULT_DATASET])
    model: ModelSection = Field(default_factory=ModelSection)
    algorithm: AlgorithmSection = Field(default_factory=AlgorithmSection)
    network: NetworkSection = Field(default_factory=NetworkSection)
    devices: DevicesSection = Field(default_factory=DevicesSection)
    control: ControlSection = Field(default_factory=ControlSection)
    compression: CompressionSection = Field(default_factory=CompressionSection)
    selection: SelectionSection = Field(default_factory=SelectionSection)
    backhaul: BackhaulSection | None = Field(
        None,
        description="Edge servers and a cloud (docs/multi-cell.md): each round's aggregation goes from the edges to "
        "the cloud and back over a backhaul. Unset: the server is at the base station, nothing is charged.",
    )
    sweep: SweepSection = Field(default_factory=SweepSection, description="Grids for `edgefl sweep`.")
    process: list[ProcessSection] = Field(
        default_factory=list,
        description="Components from the scenario file, one `[[process]]` table each: "
        '`name` and the component\'s own keys (see "Process-specific keys" below).',
    )

    @model_serializer(mode="wrap")
    def _without_empty_process(self, handler):
        """No ``process`` key when there is none: a scenario without [[process]] dumps (and hashes: checkpoints,
        sweep points) as before processes existed."""
        dumped = handler(self)
        if isinstance(dumped, dict) and not self.process:
            dumped.pop("process", None)
        if isinstance(dumped, dict) and self.backhaul is None:
            dumped.pop("backhaul", None)  # likewise without a backhaul
        selection = self.selection  # (not a SelectionSection when set to None in Python: validation says so)
        if isinstance(dumped, dict) and getattr(selection, "name", None) == "uniform" and not selection.model_extra:
            dumped.pop("selection", None)  # likewise without a selection policy (docs/selection.md)
        return dumped

    @model_validator(mode="before")
    @classmethod
    def _radio_profile(cls, raw):
        return apply_radio_profile(raw)  # devices.radio_profile: named values of the radio keys

    @model_validator(mode="after")
    def _consistent(self):
        moving = self.devices.speed_mps > 0 or any((c.speed_mps or 0) > 0 for c in self.devices.classes)
        if moving and self.network.cell_radius_m is None:
            raise ValueError("devices.speed_mps > 0 needs a cell: set network.cell_radius_m (a link budget)")
        if self.process and self.run.engine != "simpy":
            raise ValueError(
                'process (a [[process]] table) needs run.engine = "simpy" (the ideal engine charges '
                "no time or energy a process could change)"
            )
        for key in self.sweep.grid:
            try:
                check_sweep_key(key, tuple(type(self.data).model_fields), self.process_keys())
            except ValueError as exc:
                raise ValueError(f"sweep.grid: {exc}") from None
        if self.algorithm.clients_per_round > self.data.num_clients:
            raise ValueError(
                f"algorithm.clients_per_round = {self.algorithm.clients_per_round} exceeds "
                f"data.num_clients = {self.data.num_clients}"
            )
        if self.control.name != "static":
            if self.run.engine != "simpy":
                raise ValueError(
                    f'control.name = {self.control.name!r} needs run.engine = "simpy" (it sets knobs '
                    "the ideal engine does not charge)"
                )
            self.control.plugin_class().check_scenario(self)
        if self.selection.name != "uniform":
            self._check_selection()
        layout = self.data.layout()
        if layout is not None:
            why = model_misfit(self.model.name, *layout, self.model.keys())
            if why:
                raise ValueError(f"model.name = {self.model.name!r} does not fit data.name = {self.data.name!r}: {why}")
        if algorithms.is_algorithm(self.algorithm.name) and self._own_keys_valid():
            algorithms.get(self.algorithm.name).check_scenario(self)
        if self.network.uplink == "aircomp":
            self._check_aircomp()
        if self.compression.name != "none" and algorithms.is_algorithm(self.algorithm.name):
            why = getattr(algorithms.get(self.algorithm.name), "no_compression", None)
            if why:
                raise ValueError(
                    f"compression.name = {self.compression.name!r} does not apply to {self.algorithm.name}: {why}"
                )
        return self

    def _check_selection(self) -> None:
        """A selection policy needs the SimPy engine (what the base station knows of the channel) and an algorithm
        that lets it choose the clients (``Algorithm.accepts_selection``)."""
        name = self.selection.name
        if self.run.engine != "simpy":
            raise ValueError(
                f'selection.name = {name!r} needs run.engine = "simpy" (a policy selects from the channel, the '
                "devices' durations and batteries, which the ideal engine does not model)"
            )
        if algorithms.is_algorithm(self.algorithm.name) and not algorithms.get(self.algorithm.name).accepts_selection:
            accepting = [a for a in algorithms.names() if algorithms.get(a).accepts_selection]
            raise ValueError(
                f"selection.name = {name!r} does not apply to algorithm.name = {self.algorithm.name!r}: its math "
                "depends on how its clients are sampled (e.g. DRDM samples by its weights λ), so it samples them "
                f'itself; use selection.name = "uniform" (or leave [selection] out), or one of the algorithms '
                f"that accept a policy: {', '.join(accepting)} (docs/selection.md)"
            )
        if self._selection_keys_valid():
            self.selection.plugin_class().check_scenario(self)

    def _selection_keys_valid(self) -> bool:
        try:
            self.selection.params()
        except ValidationError:
            return False
        return True

    def _check_aircomp(self) -> None:
        """Over-the-air computation needs the co-simulation, uncompressed analog values, and an algorithm whose
        server needs only the uniform mean of the uploads."""
        if self.run.engine != "simpy":
            raise ValueError('network.uplink = "aircomp" needs run.engine = "simpy" (the ideal engine has no channel)')
        if self.compression.name != "none":
            raise ValueError(
                f'network.uplink = "aircomp" sends analog values, not compressed bits: compression.name = '
                f'{self.compression.name!r} must be "none"'
            )
        if self.control.name != "static":
            raise ValueError(
                f'network.uplink = "aircomp" sets each sender\'s power itself (channel inversion) and has no band shares: '
                f'control.name = {self.control.name!r} would plan with knobs it does not use; use control.name = "static"'
            )
        name = self.algorithm.name
        if algorithms.is_algorithm(name) and self._own_keys_valid():
            if not algorithms.get(name).sums_uploads(self.algorithm.hyperparams()):
                fix = (
                    f'set [algorithm.{name}] weighting = "uniform"'
                    if name in ("fedavg", "fedprox")
                    else 'use fedavg or fedprox with weighting = "uniform"'
                )
                raise ValueError(
                    f'network.uplink = "aircomp" delivers only the mean of the clients\' uploads, and {name} with '
                    f'these keys needs each one: {fix}, or set network.uplink = "digital"'
                )

    def title(self, algorithm: str | None = None) -> str:
        """Its key values, for plot titles: the algorithm (``algorithm``: instead of its own, e.g. the algorithms
        compared) and its sizes, the link (several cells: their number, size, frequency reuse and sectors), the
        uplink if over the air, and a controller, a selection policy or a backhaul where they are not the defaults."""
        net = self.network
        if net.snr_db is not None:
            link = f"SNR {net.snr_db:g} dB"
        elif net.distance_m is not None:
            link = f"{net.distance_m:g} m"
        elif net.sectors > 1:  # docs/multi-cell.md: network.cells counts the sites
            sites = f"{net.cells} site{'s' if net.cells > 1 else ''}"
            link = f"{sites} of {net.cell_radius_m:g} m, {net.sectors} sectors each, reuse {net.reuse}"
        elif net.cells > 1:
            link = f"{net.cells} cells of {net.cell_radius_m:g} m, reuse {net.reuse}"
        else:
            link = f"cell {net.cell_radius_m:g} m"
        others = [
            *([f"controller {self.control.name}"] if self.control.name != "static" else []),
            *([f"selection {self.selection.name}"] if self.selection.name != "uniform" else []),
            *([f"backhaul {self.backhaul.rate_mbps:g} Mbit/s"] if self.backhaul is not None else []),
        ]
        a = self.algorithm
        return (
            f"{algorithm or a.name}: N = {self.data.num_clients}, m = {a.clients_per_round}, "
            f"τ = {a.local_steps}, η = {a.lr:g}; {link}, {net.bandwidth_mhz:g} MHz {net.access}"
            + (", over the air" if net.uplink == "aircomp" else "")
            + (f", deadline {net.deadline_s:g} s" if net.deadline_s is not None else "")
            + ("; " + ", ".join(others) if others else "")
        )

    def process_keys(self) -> list[list[str]]:
        """The own keys of each [[process]] table's component, in order (for sweep keys ``process.<i>.<key>``)."""
        return [p.own_keys() for p in self.process]

    def _own_keys_valid(self) -> bool:
        """Whether the selected algorithm's own keys validate (if not, scenario_from_dict reports them by name)."""
        try:
            self.algorithm.hyperparams()
        except ValidationError:
            return False
        return True

    def to_dict(self) -> dict:
        """Plain dict (TOML-writable: no None, paths as strings)."""
        return _drop_none(self.model_dump(mode="json"))


def _drop_none(value):
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value]
    return value
