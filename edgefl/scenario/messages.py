"""Error messages of a scenario that does not validate: each names the file and the key, and
suggests the nearest known key (did you mean ...?)."""

from __future__ import annotations

import difflib

from pydantic import ValidationError

import algorithms
from edgefl import plugins
from edgefl.data import REGISTRY as DATA_REGISTRY
from edgefl.data import DataParams
from edgefl.data import registry as data_registry
from edgefl.data.registry import unknown_name_message
from edgefl.scenario.schema import Scenario
from edgefl.scenario.sections import PLUGIN_DATA_TAG, SECTION_MODELS, AlgorithmSection, DeviceClass


def _known_keys(parent: list[str], algorithm_name: str | None, data_name: str | None = None) -> list[str]:
    """The keys allowed under ``parent`` (a field path), for suggestions."""
    if not parent:
        return list(Scenario.model_fields)
    if parent == ["algorithm"]:
        return [*AlgorithmSection.model_fields, *algorithms.names()]
    if len(parent) == 2 and parent[0] == "algorithm" and algorithms.is_algorithm(parent[1]):
        return list(algorithms.get(parent[1]).Params.model_fields)
    if parent == ["data"]:
        try:
            return list(data_registry.get(data_name).model_fields)
        except ValueError:
            return list(DataParams.model_fields)
    if parent[0] == "devices" and len(parent) == 3 and parent[1] == "classes":
        return list(DeviceClass.model_fields)
    if len(parent) == 1 and parent[0] in SECTION_MODELS:
        return list(SECTION_MODELS[parent[0]].model_fields)
    return []


def _unknown_key_message(
    loc: list[str], algorithm_name: str | None, data_name: str | None, known_keys: list[str] | None = None
) -> str:
    known = _known_keys(loc[:-1], algorithm_name, data_name) if known_keys is None else known_keys
    if loc[:-1] == ["data"]:  # a key of another data set?
        owners = [name for name, cls in DATA_REGISTRY.items() if loc[-1] in cls.model_fields]
        if owners:
            return (
                f"not a key of data.name = {data_name!r} (it belongs to {', '.join(owners)}); known: {', '.join(known)}"
            )
    hint = difflib.get_close_matches(loc[-1], known, n=1)
    if hint:
        return f"unknown {'section' if len(loc) == 1 else 'key'} (did you mean {hint[0]!r}?)"
    return f"unknown {'section' if len(loc) == 1 else 'key'}" + (f"; known: {', '.join(known)}" if known else "")


class Sources(str):
    """Where a scenario's values come from: its file (this string) and the overrides (``--set``) that set some
    keys, so that a mistake in an override is attributed to the override, not to the file."""

    overrides: dict[str, str]  # dotted key (process[i].key for [[process]] tables) -> "--set 'key=value'"

    def __new__(cls, path: str, overrides: dict[str, str]):
        made = super().__new__(cls, path)
        made.overrides = overrides
        return made

    def of(self, key: str) -> str:
        """The source of the value at ``key`` (a dotted path): the override that set it or a table holding
        it, or one it holds (a section's check naming the key); else the file."""
        for set_key, text in self.overrides.items():
            if key == set_key or key.startswith(set_key + ".") or set_key.startswith((key + ".", key + "[")):
                return f"{text} (overriding {self})"
        return str(self)


def source_of(source: str, key: str) -> str:
    """``source`` (a file, or :class:`Sources`) as the origin of the value at the dotted ``key``."""
    return source.of(key) if isinstance(source, Sources) else source


def format_validation_error(
    err: ValidationError,
    source: str,
    prefix: tuple[str, ...] = (),
    algorithm_name: str | None = None,
    data_name: str | None = None,
    known_keys: list[str] | None = None,
) -> str:
    """``known_keys``: the keys allowed where an unknown key was found (default: looked up from its path)."""
    lines = []
    for item in err.errors():
        loc = [*prefix, *(str(p) for p in item["loc"])]
        if len(loc) >= 2 and loc[0] == "process" and loc[1].isdigit():
            loc[:2] = [f"process[{loc[1]}]"]  # the i-th [[process]] table
        if len(loc) >= 2 and loc[0] == "data" and (loc[1] in DATA_REGISTRY or loc[1] == PLUGIN_DATA_TAG):
            del loc[1]  # the tag of the data set's class, not a key
        path = ".".join(loc) if loc else "(scenario)"
        source_here = source_of(source, path)
        if item["type"] == "union_tag_invalid" and loc == ["data"]:
            lines.append(f"{source_here}: data.name: {unknown_name_message(item['ctx']['tag'])}")
        elif loc == ["process"] and item["type"] == "list_type":
            lines.append(
                f"{source_here}: process: expected an array of tables, one [[process]] (double brackets) per "
                'component, e.g. [[process]] name = "thermal"'
            )
        elif item["type"] == "extra_forbidden":
            lines.append(f"{source_here}: {path}: {_unknown_key_message(loc, algorithm_name, data_name, known_keys)}")
        elif item["type"] == "missing":
            where = f" for data.name = {data_name!r}" if loc[0] == "data" else ""
            lines.append(f"{source_here}: {path} is required{where}")
        else:
            msg = item["msg"].removeprefix("Value error, ")
            if "cannot import" in msg and "No module named" in msg:
                msg += "; " + plugins.not_found_hint()
            got = item.get("input")
            shown = "" if isinstance(got, dict) or item["type"] == "value_error" else f" (got {got!r})"
            names_key = msg.startswith(f"{path}.") or (not loc and msg.split(".")[0] in Scenario.model_fields)
            where = "" if names_key else f"{path}: "  # the message names the key itself
            lines.append(f"{source_here}: {where}{msg}{shown}")
    return "\n".join(lines)
