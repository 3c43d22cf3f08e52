"""The keys a sweep may vary ([sweep.grid], ``--grid``) and the [sweep] section."""

from __future__ import annotations

import difflib
from typing import Union

from pydantic import Field, PositiveInt, StrictBool, StrictFloat, StrictInt, StrictStr, field_validator

import algorithms
from edgefl import control, selection
from edgefl.data import REGISTRY as DATA_REGISTRY
from edgefl.scenario.sections import SECTION_MODELS, Strict

GridValue = Union[StrictBool, StrictInt, StrictFloat, StrictStr]


def check_sweep_key(key: str, data_keys: list[str] | tuple[str, ...] = (), process_keys: list[list[str]] = ()) -> None:
    """Raise ValueError unless ``key`` ("section.key") is a scenario key a sweep may vary. ``data`` keys
    may be any built-in data set's or one of ``data_keys`` (the keys of the scenario's own data set,
    e.g. a plug-in's); ``process.<i>.<key>``: a key of the scenario's i-th [[process]] table (``process_keys``:
    each table's own keys); each point is validated in full later."""
    parts = key.split(".")
    if parts[0] == "process":
        check_process_key(key, parts, process_keys)
        return
    if len(parts) == 3 and parts[0] == "algorithm" and all(parts):  # an algorithm's own key
        if not algorithms.is_algorithm(parts[1]):
            raise ValueError(f"{key!r}: unknown algorithm {parts[1]!r}; known: {', '.join(algorithms.names())}")
        own = list(algorithms.get(parts[1]).Params.model_fields)
        if parts[2] not in own:
            hint = difflib.get_close_matches(parts[2], own, n=1)
            raise ValueError(f"{key!r}: not a key of {parts[1]}" + (f" (did you mean {hint[0]!r}?)" if hint else ""))
        return
    if len(parts) != 2 or not all(parts):
        raise ValueError(f"{key!r}: expected section.key (or algorithm.<name>.key), e.g. network.snr_db")
    section, name = parts
    if section not in SECTION_MODELS:
        hint = difflib.get_close_matches(section, list(SECTION_MODELS), n=1)
        raise ValueError(f"{key!r}: unknown section {section!r}" + (f" (did you mean {hint[0]!r}?)" if hint else ""))
    if key == "run.seed":
        raise ValueError("'run.seed' is not a grid key: seeds are run.seed + 0..K-1 (sweep.seeds or --seeds K)")
    if key == "devices.classes":
        raise ValueError("'devices.classes' cannot be swept (sweep a device key instead, e.g. devices.cpu_ghz)")
    known = list(SECTION_MODELS[section].model_fields)
    if section == "data":
        known = list(dict.fromkeys([*(k for cls in DATA_REGISTRY.values() for k in cls.model_fields), *data_keys]))
    if section == "control":  # any controller's own keys
        for controller_name in control.names():
            known += list(control.get(controller_name).Params.model_fields)
    if section == "selection":  # any selection policy's own keys
        for policy_name in selection.names():
            known += list(selection.get(policy_name).Params.model_fields)
    if name not in known:
        hint = difflib.get_close_matches(name, known, n=1)
        raise ValueError(f"{key!r}: unknown key" + (f" (did you mean '{section}.{hint[0]}'?)" if hint else ""))


def check_process_key(key: str, parts: list[str], process_keys: list[list[str]]) -> None:
    """``process.<i>.<key>``: a key of the scenario's i-th [[process]] table (counted from 0)."""
    if len(parts) != 3 or not parts[1].isdigit() or not parts[2]:
        raise ValueError(
            f"{key!r}: expected process.<i>.<key>, the key of the i-th [[process]] table (from 0), "
            "e.g. process.0.throttle_c"
        )
    index = int(parts[1])
    if index >= len(process_keys):
        raise ValueError(f"{key!r}: the scenario has {len(process_keys)} [[process]] table(s) (process.0 is the first)")
    own = process_keys[index]
    if parts[2] == "name":
        raise ValueError(
            f"{key!r}: a process's name cannot be swept (sweep one of its keys: {', '.join(own) or 'none'})"
        )
    if parts[2] not in own:
        hint = difflib.get_close_matches(parts[2], own, n=1)
        raise ValueError(
            f"{key!r}: not a key of process {index}"
            + (f" (did you mean 'process.{index}.{hint[0]}'?)" if hint else f"; its keys: {', '.join(own) or 'none'}")
        )


class SweepSection(Strict):
    """Grids for `edgefl sweep`: every combination of the grid values, each run with `seeds` seeds."""

    seeds: PositiveInt = Field(
        1,
        le=1000,
        description="Seeds per grid point: run.seed + 0..seeds-1 (a sweep has at "
        "most 100,000 points: grid points x seeds).",
    )
    grid: dict[str, list[GridValue]] = Field(
        default_factory=dict, description='[sweep.grid] "section.key" = [values], e.g. "network.snr_db" = [0, 10, 20].'
    )

    @field_validator("grid")
    @classmethod
    def _grid_keys_and_values(cls, grid):
        for key, values in grid.items():  # the keys: Scenario._consistent (data keys depend on data.name)
            if not values:
                raise ValueError(f"{key!r}: empty list of values")
            if len({repr(v) for v in values}) != len(values):
                raise ValueError(f"{key!r}: repeated values {values}")
        return grid
