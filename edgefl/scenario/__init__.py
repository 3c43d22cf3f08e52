"""Scenario files: TOML (stdlib ``tomllib``), validated with pydantic.

Every field is typed and bounded; unknown sections and keys are errors with a
suggestion; each error names the file and the field path. ``--set key=value``
overrides go through the same validation. Units are in the key names (``snr_db``,
``bandwidth_mhz``, ``cpu_ghz``); SI units are used from the engine on.

Relative paths in a file (``data.dir``) are relative to that file's folder; in
``--set`` they are relative to the working directory.

One module a concern; every name is importable from here (``from edgefl.scenario import X``):

- :mod:`~edgefl.scenario.sections`: the sections' pydantic models (fields, bounds, descriptions);
- :mod:`~edgefl.scenario.sweep_keys`: which keys a sweep may vary, and [sweep];
- :mod:`~edgefl.scenario.schema`: :class:`Scenario`, and the checks across sections;
- :mod:`~edgefl.scenario.messages`: validation errors as messages that
  name the file and the key and suggest the nearest known key;
- :mod:`~edgefl.scenario.loading`: reading the TOML file, ``--set`` overrides, paths, validation.
"""

from edgefl.errors import ScenarioError
from edgefl.scenario.loading import (
    absolute_path,
    apply_overrides,
    describe_differences,
    flat_keys,
    format_override,
    load_scenario,
    parse_override,
    read_toml,
    scenario_from_dict,
    split_key,
)
from edgefl.scenario.messages import format_validation_error
from edgefl.scenario.schema import Scenario, _drop_none
from edgefl.scenario.sections import (
    SECTION_MODELS,
    AlgorithmSection,
    CompressionSection,
    ControlSection,
    DataSection,
    DeviceClass,
    DevicesSection,
    ModelSection,
    NetworkSection,
    ProcessSection,
    RunSection,
    Strict,
    model_misfit,
)
from edgefl.scenario.sweep_keys import GridValue, SweepSection, check_sweep_key

__all__ = [
    "SECTION_MODELS",
    "AlgorithmSection",
    "CompressionSection",
    "ControlSection",
    "DataSection",
    "DeviceClass",
    "DevicesSection",
    "GridValue",
    "ModelSection",
    "NetworkSection",
    "ProcessSection",
    "RunSection",
    "Scenario",
    "ScenarioError",
    "Strict",
    "SweepSection",
    "absolute_path",
    "apply_overrides",
    "check_sweep_key",
    "describe_differences",
    "flat_keys",
    "format_override",
    "format_validation_error",
    "load_scenario",
    "model_misfit",
    "parse_override",
    "read_toml",
    "scenario_from_dict",
    "split_key",
    "_drop_none",
]
