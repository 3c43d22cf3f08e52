"""Numeric scenario keys take numbers only: a TOML boolean is not 1 or 0.

pydantic's lax mode (needed elsewhere: lists for tuples, strings for paths) turns ``true`` into
1.0 for a float field, so ``network.snr_db = true`` would run at 1 dB. Every scenario model
(sections, data sets, controller keys) mixes in :class:`NumbersOnly`, which rejects a boolean given
to a key whose type is a number; algorithms' own keys (``algorithms`` does not import edgefl) pass
through :func:`bools_as_text` where the scenario validates them. Non-finite numbers are rejected by the models'
``allow_inf_nan=False``; a key that documents inf opts in with ``Field(allow_inf_nan=True)``.
"""

from __future__ import annotations

import typing
from typing import Any

from pydantic import BaseModel, model_validator


def _number_types(annotation) -> set:
    """The builtin types an annotation admits, looking through Optional, Union and Annotated."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _number_types(typing.get_args(annotation)[0])
    if origin is typing.Union or type(annotation).__name__ == "UnionType":
        return set().union(*(_number_types(arg) for arg in typing.get_args(annotation)))
    return {annotation} if isinstance(annotation, type) else set()


def takes_number_not_bool(annotation) -> bool:
    types = _number_types(annotation)
    return bool(types & {int, float}) and bool not in types


def bools_as_text(model: type[BaseModel], data: Any) -> Any:
    """``data`` for ``model`` with every boolean given to a numeric field replaced by its TOML text
    ("true"/"false"), which the field's own validation then rejects under the key's name."""
    if isinstance(data, dict):
        bools = [
            key
            for key, value in data.items()
            if isinstance(value, bool)
            and key in model.model_fields
            and takes_number_not_bool(model.model_fields[key].annotation)
        ]
        if bools:
            data = {**data, **{key: str(data[key]).lower() for key in bools}}
    return data


class NumbersOnly(BaseModel):
    @model_validator(mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, data: Any) -> Any:
        return bools_as_text(cls, data)
