"""Reading a scenario: the TOML file, ``--set`` overrides (or a dict of dotted keys), paths made
absolute (relative to the file; in ``--set``, to the working directory), then validation."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import tomli_w
from pydantic import ValidationError

from edgefl import plugins
from edgefl import shipped_scenarios as shipped
from edgefl.errors import ScenarioError
from edgefl.input_files import special_file
from edgefl.scenario.messages import Sources, format_validation_error, source_of
from edgefl.scenario.schema import Scenario
from edgefl.scenario.sections import _data_name


def split_key(key: str) -> list[str]:
    """``algorithm."pkg.mod:Class".mu`` -> ['algorithm', 'pkg.mod:Class', 'mu'] (TOML's dotted keys: a quoted
    part may hold dots)."""
    return [part.strip('"') for part in re.findall(r'"[^"]*"|[^.]+', key.strip()) if part.strip('"')]


def parse_override(text: str) -> tuple[list[str], Any]:
    """``section.key=value`` -> (['section', 'key'], value). Values are TOML literals;
    anything that is not one is taken as a string (``--set data.dir=/x``)."""
    if "=" not in text:
        raise ScenarioError(f"--set {text!r}: expected key=value, e.g. --set network.snr_db=10")
    key, raw = text.split("=", 1)
    path = split_key(key)
    if not path:
        raise ScenarioError(f"--set {text!r}: empty key")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    except RecursionError:
        raise ScenarioError(
            f"--set {key}=...: the value is nested too deeply (arrays thousands of levels deep)"
        ) from None
    return path, value


def flat_keys(obj, prefix: str = "") -> dict[str, Any]:
    """A nested dict as {dotted key: value} (``{"run": {"seed": 0}}`` -> ``{"run.seed": 0}``)."""
    if isinstance(obj, dict):
        items: dict[str, Any] = {}
        for key, value in obj.items():
            items.update(flat_keys(value, f"{prefix}{key}."))
        return items
    return {prefix.rstrip("."): obj}


def describe_differences(old: dict, new: dict, limit: int = 5) -> str:
    """The dotted keys whose values differ between two nested dicts, ``key: old -> new`` (the first ``limit``)."""
    a, b = flat_keys(old), flat_keys(new)
    shown = lambda d, k: repr(d[k]) if k in d else "(unset)"  # noqa: E731
    diffs = [f"{k}: {shown(a, k)} -> {shown(b, k)}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    return "; ".join(diffs[:limit]) + (f"; ... ({len(diffs) - limit} more)" if len(diffs) > limit else "")


def format_override(key: str, value: Any) -> str:
    """``key=value`` with the value as a TOML literal (the inverse of :func:`parse_override`)."""
    return f"{key}={tomli_w.dumps({'v': value}).strip()[len('v = ') :]}"


def apply_overrides(raw: dict, overrides: list[str] | dict[str, Any]) -> dict:
    """Set dotted keys: ``--set`` texts (``["network.snr_db=5"]``) or a dict (``{"network.snr_db": 5}``)."""
    raw = {k: (dict(v) if isinstance(v, dict) else v) for k, v in raw.items()}
    if isinstance(overrides, dict):
        items = [(split_key(str(key)), value, f"override {key!r}") for key, value in overrides.items()]
    else:
        items = [(*parse_override(text), f"--set {text!r}") for text in overrides]
    for path, value, text in items:
        if not path:
            raise ScenarioError(f"{text}: empty key")
        if (
            len(path) == 2
            and tuple(path) in (("data", "dir"), ("devices", "availability_trace"))
            and isinstance(value, str)
        ):
            value = absolute_path(Path.cwd(), value, ".".join(path), text)
        node = raw
        for part in path[:-1]:
            if isinstance(node, list):  # [[process]]: process.<i>.<key>
                if not (part.isdigit() and int(part) < len(node) and isinstance(node[int(part)], dict)):
                    raise ScenarioError(
                        f"{text}: expected process.<i>.<key>, the key of the i-th [[process]] table "
                        f"(from 0), and the scenario has {len(node)}"
                    )
                table = node[int(part)] = dict(node[int(part)])  # a copy: the caller's dict is left as it was
                node = table
                continue
            if isinstance(node.get(part), list) and part == "process":
                node[part] = list(node[part])  # copied: the caller's dict is left as it was
            child = node.setdefault(part, {})
            if not isinstance(child, (dict, list)) or (isinstance(child, list) and part != "process"):
                raise ScenarioError(f"{text}: {part!r} is not a section")
            node = child
        if isinstance(node, list):
            raise ScenarioError(
                f"{text}: expected process.<i>.<key>, the key of the i-th [[process]] table (from 0), "
                f"and the scenario has {len(node)}"
            )
        node[path[-1]] = value
    return raw


def absolute_path(base: Path, value: str, key: str, source) -> str:
    """``value`` (a path in a scenario, relative to ``base``) made absolute, symbolic links followed."""
    try:
        return str((base / Path(value).expanduser()).resolve())
    except (OSError, RuntimeError) as exc:  # a loop of symbolic links (RuntimeError before Python 3.13)
        raise ScenarioError(
            f"{source}: {key} = {value!r}: cannot follow the path ({exc}); check its symbolic links"
        ) from None


def read_toml(path: Path) -> dict:
    special = special_file(path)  # before open(): a named pipe would block it
    if special is not None and special != "a folder":
        raise ScenarioError(f"{path}: is {special}, expected a .toml scenario file")
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such scenario file") from None
    except IsADirectoryError:
        raise ScenarioError(f"{path}: is a folder, expected a .toml scenario file") from None
    except OSError as exc:  # permission denied, a loop of symbolic links, an I/O error
        raise ScenarioError(f"{path}: cannot read the scenario file: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{path}: not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        start = exc.object[:2]
        what = (
            "a gzip-compressed file: decompress it first"
            if start == b"\x1f\x8b"
            else "UTF-16 text: save it as UTF-8"
            if start in (b"\xff\xfe", b"\xfe\xff")
            else "save it as UTF-8 (in a comment too)"
        )
        raise ScenarioError(
            f"{path}: not UTF-8 text (byte {exc.start}: {exc.object[exc.start]:#04x}); TOML files are UTF-8: {what}"
        ) from None
    except RecursionError:
        raise ScenarioError(f"{path}: nested too deeply (arrays or tables thousands of levels deep)") from None


def scenario_from_dict(raw: dict, source: str = "<scenario>") -> Scenario:
    plugins.import_plugins(raw)  # the user's own code first: its faults are PluginErrors, not the scenario's
    algorithm_section = raw.get("algorithm")
    name = algorithm_section.get("name", "fedavg") if isinstance(algorithm_section, dict) else None
    data_section = raw.get("data")
    data_name = _data_name(data_section) if isinstance(data_section, dict) else None
    try:
        scenario = Scenario.model_validate(raw)
    except ValidationError as exc:
        raise ScenarioError(format_validation_error(exc, source, algorithm_name=name, data_name=data_name)) from None
    for table in sorted({scenario.algorithm.name, *scenario.algorithm.tables()}):
        try:
            scenario.algorithm.hyperparams(table)  # every algorithm's own keys, used or not
        except ValidationError as exc:
            raise ScenarioError(format_validation_error(exc, source, ("algorithm", table), table)) from None
    try:
        scenario.control.params()  # the controller's own keys
    except ValidationError as exc:
        raise ScenarioError(format_validation_error(exc, source, ("control",))) from None
    try:
        scenario.selection.params()  # the selection policy's own keys
    except ValidationError as exc:
        raise ScenarioError(format_validation_error(exc, source, ("selection",))) from None
    for index, process in enumerate(scenario.process):
        where = f"process[{index}]"
        try:
            process.params()  # the component's own keys
        except ValidationError as exc:
            raise ScenarioError(format_validation_error(exc, source, (where,), known_keys=process.own_keys())) from None
        except ValueError as exc:
            raise ScenarioError(f"{source_of(source, where)}: {where}: {exc}") from None
    return scenario


def load_scenario(path: str | Path, overrides: list[str] | dict[str, Any] | None = None) -> Scenario:
    """Read, override (``--set`` texts or a dict of dotted keys) and validate a scenario file (a path,
    or the name of a scenario shipped with edgefl: :mod:`edgefl.shipped_scenarios`). Raises ScenarioError."""
    path = shipped.resolve(path)
    raw = read_toml(path)
    data = raw.get("data")
    if isinstance(data, dict) and isinstance(data.get("dir"), str):
        data["dir"] = absolute_path(path.parent, data["dir"], "data.dir", path)
    devices = raw.get("devices")
    if isinstance(devices, dict) and isinstance(devices.get("availability_trace"), str):
        devices["availability_trace"] = absolute_path(
            path.parent, devices["availability_trace"], "devices.availability_trace", path
        )
    raw = apply_overrides(raw, overrides or [])
    if isinstance(overrides, dict):
        texts = {key: f"override {key!r}" for key in map(str, overrides)}
    else:
        texts = {".".join(parse_override(text)[0]): f"--set {text!r}" for text in overrides or []}
    keys = {re.sub(r"^process\.(\d+)\.", r"process[\1].", key): text for key, text in texts.items()}
    return scenario_from_dict(raw, source=Sources(str(path), keys))
