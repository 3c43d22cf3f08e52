"""Generate the scenario reference (docs/scenarios.md) from the schema itself.

    python -m edgefl.scenario_doc > docs/scenarios.md

A test checks that the committed page equals this output, so the reference cannot
drift from the code.
"""

from __future__ import annotations

import inspect
import math
import types
import typing

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

import algorithms
from edgefl import control, selection
from edgefl.data import DATASET_NAMES as DATA_NAMES
from edgefl.data import DEFAULT_DATASET, DataParams
from edgefl.data.registry import FAMILIES, family_names
from edgefl.scenario import SECTION_MODELS, DeviceClass, ProcessSection, Scenario
from edgefl.sim import processes

INTRO = """# Scenario reference

A scenario is one TOML file per network (`scenarios/*.toml`). Every key below is
validated; unknown sections and keys are errors with a suggestion. Any key can be
overridden on the command line with `--set section.key=value` (values are TOML
literals: `--set network.snr_db=5`, `--set network.fading='"rayleigh"'` or simply
`--set network.fading=rayleigh`). Relative paths in a file are relative to the file.

Units are in the key names: `_db`, `_dbm`, `_mhz`, `_ghz`, `_w` (watts), `_s` (seconds),
`_m` (metres), `_j` (joules). The engine converts to SI once, at the boundary.

This page is generated: `python -m edgefl.scenario_doc > docs/scenarios.md`.
"""


def _unwrap(annotation):
    """(base type, extra constraint metadata, optional?) of a field annotation."""
    optional = False
    metadata = []
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in args:
        optional = True
        annotation = next(a for a in args if a is not type(None))
    if typing.get_origin(annotation) is typing.Annotated:
        annotation, *metadata = typing.get_args(annotation)
    return annotation, metadata, optional


def _type_name(annotation) -> str:
    base, _, optional = _unwrap(annotation)
    if typing.get_origin(base) is typing.Literal:
        text = "one of " + ", ".join(f'"{v}"' if isinstance(v, str) else repr(v) for v in typing.get_args(base))
    else:
        text = getattr(base, "__name__", str(base)).replace("typing.", "")
    return text + (" (optional)" if optional else "")


def _default(field) -> str:
    if field.default is PydanticUndefined:
        if field.default_factory is not None:
            return "(see below)" if field.default_factory is not list else "[]"
        return "required"
    value = field.default
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    if isinstance(value, str):
        return f'"{value}"'
    return "unset" if value is None else repr(value)


def _constraints(field) -> str:
    """The field's bounds, from its own metadata and from an ``Annotated[..., Field(...)]`` type
    (also inside ``Optional``), each once; "finite" where NaN and inf are rejected."""
    items = [*field.metadata, *_unwrap(field.annotation)[1]]
    items = [part for item in items for part in (item.metadata if isinstance(item, FieldInfo) else [item])]
    parts = []
    for item in items:
        for name, symbol in (("gt", ">"), ("ge", "≥"), ("lt", "<"), ("le", "≤")):
            bound = getattr(item, name, None)
            if bound is not None:
                parts.append(f"{symbol} {bound:g}" if isinstance(bound, float) else f"{symbol} {bound}")
        if getattr(item, "allow_inf_nan", None) is False:
            parts.append("finite")
    return ", ".join(dict.fromkeys(parts))


def table(model: type[BaseModel], skip: tuple[str, ...] = ()) -> list[str]:
    lines = ["| key | type | default | bounds | meaning |", "|---|---|---|---|---|"]
    for name, field in model.model_fields.items():
        if name in skip:
            continue
        meaning = (field.description or "").replace("|", "\\|")
        lines.append(
            f"| `{name}` | {_type_name(field.annotation)} | {_default(field)} | {_constraints(field)} | {meaning} |"
        )
    return lines


def data_sets() -> list[str]:
    """One table per data set family: its own keys besides the common ones."""
    out = [
        f"Without `name`, the data set is `{DEFAULT_DATASET}`. Each data set accepts its own keys "
        "besides the common ones above; any other key is an error.\n"
    ]
    for cls in FAMILIES:
        out.append("### " + ", ".join(f"`{name}`" for name in family_names(cls)) + "\n")
        out.append(" ".join(inspect.cleandoc(cls.__doc__ or "").split()).replace("``", "`") + "\n")
        out.extend(table(cls, skip=tuple(DataParams.model_fields)))
        out.append("")
    return out


def own_keys(kind: str, section: str, names: list[str], get, after: str) -> list[str]:
    """The keys of each algorithm (or controller) besides the common ones of its section."""
    out = [
        f"## {kind}-specific keys\n",
        f"Besides the common keys of `[{section}]`, each {kind.lower()} accepts its own keys{after}\n",
    ]
    for name in names:
        params = get(name).Params
        out.append(f"### `{name}`" + (f" (`[{section}.{name}]`)" if section == "algorithm" else "") + "\n")
        out.extend(table(params) if params.model_fields else ["No keys of its own."])
        out.append("")
    return out


def render() -> str:
    out = [INTRO]
    for section, model in SECTION_MODELS.items():
        out.append(f"## [{section}]\n")
        if model.__doc__ and model.__doc__.strip() and section in ("algorithm", "control", "selection"):
            out.append(model.__doc__.strip() + "\n")
        rows = table(model, skip=("classes",))
        if section == "data":  # name: the registry's names (each family narrows it to its own)
            names = ", ".join(f'"{name}"' for name in DATA_NAMES)
            rows = [
                f'| `name` | one of {names} | "{DEFAULT_DATASET}" |  | {model.model_fields["name"].description} |'
                if row.startswith("| `name` |")
                else row
                for row in rows
            ]
        out.extend(rows)
        out.append("")
        if section == "data":
            out.extend(data_sets())
        if section == "devices":
            out.append("### [[devices.classes]]\n")
            out.append(
                "Device classes override the base values for a share of the clients "
                "(assigned at random, seeded). Clients not in a class keep the base values.\n"
            )
            out.extend(table(DeviceClass))
            out.append("")
    extra = [name for name in Scenario.model_fields if name not in SECTION_MODELS]
    for name in extra:
        field = Scenario.model_fields[name]
        annotation = field.annotation
        if name == "process":
            out.append("## [[process]]\n")
            out.append(f"{field.description}\n")
            out.extend(table(ProcessSection))
            out.append("")
        elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
            out.append(f"## [{name}]\n")
            out.extend(table(annotation))
            out.append("")
        else:
            out.append(f"## [{name}]\n\n{field.description or ''}\n")
    out.extend(
        own_keys(
            "Algorithm",
            "algorithm",
            algorithms.names(),
            algorithms.get,
            ", in a table of its own (`[algorithm.<name>]`; `--set algorithm.<name>.<key>=...`):",
        )
    )
    out.extend(own_keys("Controller", "control", control.names(), control.get, " (docs/control.md):"))
    out.extend(own_keys("Selection policy", "selection", selection.names(), selection.get, " (docs/selection.md):"))
    out.extend(
        own_keys(
            "Process",
            "[process]",
            processes.names(),
            processes.get,
            ' in its table (docs/architecture.md, "Adding a physical process"; sweep keys `process.<i>.<key>`):',
        )
    )
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":  # pragma: no cover
    print(render(), end="")
