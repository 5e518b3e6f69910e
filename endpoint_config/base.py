"""The base of every config block: unknown keys are errors, values are never converted between kinds, and a parsed
block never changes."""

from __future__ import annotations

import functools
from types import UnionType
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, model_validator


@functools.cache
def _tuple_fields(model: type[BaseModel]) -> frozenset[str]:
    """The fields of `model` that hold a tuple (`tuple[...]`, or one inside `X | None`)."""

    def holds_tuple(annotation: Any) -> bool:
        if annotation is tuple or get_origin(annotation) is tuple:
            return True
        return get_origin(annotation) in (Union, UnionType) and any(holds_tuple(a) for a in get_args(annotation))

    return frozenset(name for name, field in model.model_fields.items() if holds_tuple(field.annotation))


class Strict(BaseModel):
    """A misspelt key must not be silently ignored; a validated block is a value; and a value of the wrong kind is
    refused, never converted (strict mode: `retain_data: "no"` is not a boolean, `instance_count: "2"` not a number,
    `2.0` not an integer). The config's YAML reader (endpoint_config/yaml_reader.py) reads only true/false as
    booleans, so a YAML 1.1 `yes`/`no`/`on`/`off` reaches a boolean field as a string and is refused too. YAML's
    `.inf` and `.nan` are floats no key means: an objective of `.inf` can never be missed, a `.inf` spread crashes the
    load test, and a NaN passes every bound (every comparison with it is false), so they are refused everywhere."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _sequences_as_tuples(cls, data: Any) -> Any:
        # YAML has one sequence type, which PyYAML reads as a list; strict mode would refuse a list for a tuple field.
        # A list keeps its kind as a tuple (both are sequences), so this is no conversion between kinds.
        if not isinstance(data, dict):
            return data
        fields = _tuple_fields(cls)
        if not any(isinstance(data.get(name), list) for name in fields):
            return data
        return {k: tuple(v) if k in fields and isinstance(v, list) else v for k, v in data.items()}


__all__ = ["Strict"]
