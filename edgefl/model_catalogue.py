"""What a scenario can know of a model without building it: the built-in models by name, a model's own keys
checked against its factory's signature, the loss it trains with, whether the DRDM cnn takes an input shape.

A built-in is named here as ``"module:factory"`` and imported only when a run builds it or its keys are checked
(:data:`REGISTRY`), so that validating a scenario never loads torch (issue 30: a scenario mistake is told in
under a second). Building and running models: :mod:`edgefl.models`; the field's benchmark models:
:mod:`edgefl.zoo`.
"""

from __future__ import annotations

import difflib
import inspect
import math
import typing
from typing import Any, Literal

from pydantic import ConfigDict, ValidationError, create_model

from plugin_registry import Registry

LossName = Literal["cross_entropy", "mse"]

# model.name -> its factory f(input_shape, num_classes, **keys) -> nn.Module (edgefl.models documents each)
BUILTINS: dict[str, str] = {
    "linear": "edgefl.models:linear",
    "mlp": "edgefl.models:mlp",
    "cnn": "edgefl.models:cnn",
    "regression": "edgefl.models:regression",
    "cifar_cnn": "edgefl.zoo:cifar_cnn",
    "femnist_cnn": "edgefl.zoo:femnist_cnn",
    "resnet18_gn": "edgefl.zoo:resnet18_gn",
    "shakespeare_lstm": "edgefl.zoo:shakespeare_lstm",
}
MODEL_NAMES = tuple(BUILTINS)
REGISTRY = Registry.of("model.name", BUILTINS, accepts=callable)


def fits_cnn(input_shape: tuple[int, ...]) -> bool:
    """Whether the cnn takes inputs of this shape: square images (C, H, W) with H % 4 == 0 (two 2x2 poolings)."""
    return len(input_shape) == 3 and input_shape[1] == input_shape[2] and input_shape[1] % 4 == 0


def is_plugin(name: str) -> bool:
    return REGISTRY.is_plugin(name)


def loss_of(name: str, num_classes: int) -> LossName:
    """The training loss of model ``name`` on data of ``num_classes`` classes (1: a regression): the built-in
    regression model and any model on a regression's data, mean squared error; else cross-entropy."""
    return "mse" if name == "regression" or num_classes == 1 else "cross_entropy"


def keys_model(name: str):
    """The pydantic model of the own keys of model ``name`` (``[model.<name>]``): the factory's parameters
    after ``input_shape`` and ``num_classes``, typed by their annotations (Any without one), required unless
    they have a default; other keys are errors unless the factory takes ``**keys``. NaN and inf rejected."""
    factory = REGISTRY.get(name)
    made = _KEYS_MODELS.get(name)
    if made is not None and made[0] is factory:  # (made once per factory: a sweep validates each of its grid points)
        return made[1]
    params = list(inspect.signature(factory).parameters.values())[2:]
    hints = _annotations(factory)
    fields: dict[str, Any] = {}
    extra = "forbid"
    for p in params:
        if p.kind == p.VAR_KEYWORD:
            extra = "allow"
        elif p.kind != p.VAR_POSITIONAL and not p.name.startswith("_"):
            fields[p.name] = (hints.get(p.name, Any), ... if p.default is p.empty else p.default)
    config = ConfigDict(extra=extra, allow_inf_nan=False, arbitrary_types_allowed=True)  # type: ignore[typeddict-item]
    model = create_model(f"model {name} keys", __config__=config, **fields)
    _KEYS_MODELS[name] = (factory, model)
    return model


_KEYS_MODELS: dict[str, tuple[Any, Any]] = {}  # model name -> (its factory, the pydantic model of its keys)


def _annotations(factory) -> dict[str, Any]:
    try:
        return typing.get_type_hints(factory, include_extras=True)
    except Exception:  # noqa: BLE001 - unresolvable annotations: the keys are then untyped
        return {}


def check_keys(name: str, values: dict) -> dict:
    """``values`` of ``[model.<name>]`` validated (ValueError naming the key), as the factory takes them."""
    try:
        checked = keys_model(name).model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        what = first["msg"]
        if first["type"] == "extra_forbidden":
            known = list(keys_model(name).model_fields)
            hint = difflib.get_close_matches(where, known, n=1)
            what = "unknown key" + (f" (did you mean {hint[0]!r}?)" if hint else "") + f"; its keys: {', '.join(known)}"
        raise ValueError(f"model.{_table(name)}.{where}: {what}") from None
    out = {**checked.model_dump(), **(checked.model_extra or {})}
    for key, value in out.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"model.{_table(name)}.{key} = {value}: expected a finite number")
    return out


def _table(name: str) -> str:
    return f'"{name}"' if ":" in name or "." in name else name
