"""The resolved scenario a run writes beside its results (``scenario.toml``): every value the run
used, defaults included, and nothing else, so that the file reproduces the run and can be read.

- Paths (``data.dir``, ``devices.availability_trace``) are written relative to the results folder
  (the loader reads them relative to the file), so the folder can be moved with its data beside it.
- Keys that do not apply to this run are left out (they would only mislead a reader), by the rules
  of :data:`NOT_APPLICABLE`: e.g. ``network.rician_k`` without Rician fading, the Shannon keys with
  the MCS table, ``model.hidden`` for a linear model, the battery keys without a battery, the
  ``[sweep]`` section (a run does not read it). Leaving them out changes nothing: the run reads
  none of them (tests/test_resolved.py reruns the written file and compares the outputs).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from channel import path_loss, tr38901
from edgefl.scenario import Scenario


def _devices_have(s: Scenario, key: str, unset=None) -> bool:
    """Whether ``devices.<key>`` or any class's is set to something other than ``unset``."""
    values = [getattr(s.devices, key, unset), *(getattr(c, key, unset) for c in s.devices.classes or [])]
    return any(v is not None and v != unset for v in values)


def _has_battery(s: Scenario) -> bool:
    return _devices_have(s, "battery_j")


def _other_builtin_loss(s: Scenario, *users: str) -> bool:
    """Whether the scenario's path-loss model is a built-in other than ``users`` (the models reading a key)."""
    return s.network.path_loss in path_loss.MODELS and s.network.path_loss not in users


def _geometry(s: Scenario) -> bool:
    return s.network.distance_m is not None or s.network.cell_radius_m is not None


NOT_APPLICABLE: dict[str, Callable[[Scenario], bool]] = {  # dotted key -> "does not apply to this scenario"
    "network.rician_k": lambda s: s.network.fading != "rician",
    "network.coherence_s": lambda s: s.network.fading == "none",
    "network.shannon_efficiency": lambda s: s.network.rate != "shannon",
    "network.snr_gap_db": lambda s: s.network.rate != "shannon",
    "network.max_spectral_efficiency": lambda s: s.network.rate != "shannon",
    "network.mcs_table": lambda s: s.network.rate != "mcs",
    "network.min_distance_m": lambda s: s.network.cell_radius_m is None,
    "network.path_loss": lambda s: not _geometry(s),
    # a built-in path-loss model reads only its own keys; a plug-in may read any of them
    "network.path_loss_intercept_db": lambda s: not _geometry(s) or _other_builtin_loss(s, "log_distance"),
    "network.path_loss_slope_db": lambda s: not _geometry(s) or _other_builtin_loss(s, "log_distance"),
    "network.carrier_ghz": lambda s: not _geometry(s) or _other_builtin_loss(s, "free_space", *tr38901.SCENARIOS),
    "network.bs_height_m": lambda s: not _geometry(s) or _other_builtin_loss(s, *tr38901.SCENARIOS),
    "network.ue_height_m": lambda s: not _geometry(s) or _other_builtin_loss(s, *tr38901.SCENARIOS),
    "network.line_of_sight": lambda s: not _geometry(s) or _other_builtin_loss(s, *tr38901.SCENARIOS),
    "network.shadowing_std_db": lambda s: not _geometry(s) or s.network.line_of_sight == "random",
    "network.shadowing_correlation": lambda s: not _geometry(s),
    "network.shadowing_decorrelation_m": lambda s: s.network.shadowing_correlation != "spatial",
    "network.shadowing_site_correlation": lambda s: s.network.shadowing_correlation != "spatial",
    "network.sectors": lambda s: not _geometry(s),
    "network.downtilt_deg": lambda s: s.network.sectors == 1,
    "network.antenna_rows": lambda s: s.network.sectors == 1,
    "network.wraparound": lambda s: s.network.cells == 1,
    "network.nr_pusch_symbols": lambda s: s.network.standard != "nr",
    "network.nr_dmrs_symbols": lambda s: s.network.standard != "nr",
    "network.noise_figure_db": lambda s: not _geometry(s),
    "network.bs_noise_figure_db": lambda s: not _geometry(s),
    "network.device_noise_figure_db": lambda s: not _geometry(s) or s.network.downlink_snr_db is not None,
    "network.bs_tx_power_dbm": lambda s: not _geometry(s) or s.network.downlink_snr_db is not None,
    "network.inter_site_m": lambda s: s.network.cells == 1 or s.network.site_positions_m is not None,
    "network.reuse": lambda s: s.network.cells == 1,
    "network.interference_load": lambda s: s.network.cells == 1,
    "network.interference": lambda s: s.network.cells * s.network.sectors == 1,
    "network.handover_margin_db": lambda s: s.network.cells == 1,
    "network.handover_interruption_s": lambda s: s.network.cells == 1,
    "network.power_control_alpha": lambda s: s.network.power_control_p0_dbm is None,
    "model.hidden": lambda s: s.model.name != "mlp",
    "devices.slowdown_mean": lambda s: s.devices.slowdown != "exponential",
    "devices.slowdown_sigma": lambda s: s.devices.slowdown != "lognormal",
    "devices.mean_on_s": lambda s: s.devices.availability != "markov",
    "devices.mean_off_s": lambda s: s.devices.availability != "markov",
    "devices.battery_reserve_j": lambda s: not _has_battery(s),
    "devices.harvest_w": lambda s: not _has_battery(s),
    "devices.harvest": lambda s: not _has_battery(s),
    "devices.tail_power_w": lambda s: not _devices_have(s, "tail_s", unset=0.0),
    "control.channel_error_db": lambda s: s.control.name == "static",
    "sweep": lambda s: True,
}
PATH_KEYS = ("data.dir", "devices.availability_trace")


def resolved_dict(scenario: Scenario, folder: str | Path) -> dict:
    """The scenario as the TOML-writable dict of the file ``folder/scenario.toml``."""
    raw = scenario.to_dict()
    if scenario.process:  # each component's own keys in full, its defaults included
        raw["process"] = [
            {"name": p.name, **(params.model_dump() if params is not None else {})}
            for p, params in ((p, p.params()) for p in scenario.process)
        ]
    for dotted, does_not_apply in NOT_APPLICABLE.items():
        *parents, key = dotted.split(".")
        table = raw
        for part in parents:
            table = table.get(part, {})
        if key in table and does_not_apply(scenario):
            del table[key]
    for dotted in PATH_KEYS:
        section, key = dotted.split(".")
        value = raw.get(section, {}).get(key)
        if isinstance(value, str):
            raw[section][key] = Path(os.path.relpath(Path(value).resolve(), Path(folder).resolve())).as_posix()
    return raw
