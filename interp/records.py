"""Typed result records: dataclasses that write themselves as JSON and read themselves back.

A Record's fields are its JSON keys, in order; a field holding a Record nests, tensors become lists
and non-finite floats null. `from_json` rebuilds the record (nested records included) from such a
dict, so readers (the report, the CLI tables) use fields, never string keys.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any, get_type_hints

from torch import Tensor


def jsonable(x):
    """Tensors to (nested) lists, records to dicts; non-finite floats to None."""
    if isinstance(x, Record):
        return x.to_json()
    if isinstance(x, Tensor):
        x = x.tolist()
    if isinstance(x, dict):
        return {k: jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def rounded(x, digits: int):
    """Floats to `digits` significant digits, through dicts, lists and tuples: what a study writes as JSON carries no
    more precision than it measured, and its last bits (which differ between runs of the same code: MKL picks its
    kernels by alignment) do not rewrite the file on every rerun."""
    if isinstance(x, float) and math.isfinite(x):
        return float(f"{x:.{digits}g}")
    if isinstance(x, dict):
        return {k: rounded(v, digits) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [rounded(v, digits) for v in x]
    return x


class Record:
    """Mixin for dataclasses: `to_json()` and `cls.from_json(dict)`. Optional fields left at None are omitted."""

    def to_json(self) -> dict:
        out = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if value is None and f.default is None:
                continue
            out[f.name] = jsonable(value)
        return out

    @classmethod
    def from_json(cls, data: dict):
        hints = get_type_hints(cls)
        kwargs = {f.name: _load(hints[f.name], data[f.name]) for f in dataclasses.fields(cls) if f.name in data}
        return cls(**kwargs)


def _load(tp: Any, value: Any) -> Any:
    """A JSON value as the annotated type: records (also inside X | None and dict[str, X]) are rebuilt."""
    if value is None:
        return None
    if isinstance(tp, type) and issubclass(tp, Record):
        return tp.from_json(value)
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(tp):
            if isinstance(arg, type) and issubclass(arg, Record) and isinstance(value, dict):
                return arg.from_json(value)
        return value
    if origin is list and isinstance(value, list):
        (item,) = typing.get_args(tp)
        return [_load(item, v) for v in value]
    if origin is dict and isinstance(value, dict):
        _, item = typing.get_args(tp)
        return {k: _load(item, v) for k, v in value.items()}
    return value
