"""A value as a strict pydantic model of evalcli's own declarations reads it (a scorer kind's arguments, a target
form's settings): a whole interpolation at a key that wants a number or true/false read as YAML reads it, the rule of
``fields.Interpolable`` (docs/datasets.md, "Environment variables").

Kept apart from ``fields`` (the dataset file's models, with ``files``): loading a dataset whose top level and items
are plain validates references and targets with this, without importing the dataset file's models
(docs/performance.md "Before the first turn")."""

from __future__ import annotations

from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel

from .yamlvalues import typed


def as_written(model: type[BaseModel], data: Any) -> Any:
    """``data`` to validate strictly with ``model`` (a scorer kind's arguments, a target form's settings): a whole
    interpolation at a key whose type is a number or true/false read as YAML reads it (``yamlvalues.typed``), in
    the models of its keys too; the same rule as ``Interpolable`` (docs/datasets.md)."""
    if not isinstance(data, dict):
        return data
    out = dict(data)
    for name, field in model.model_fields.items():
        key = field.alias or name
        if key in out:
            out[key] = _written_value(field.annotation, out[key])
    return out


def _written_value(annotation: Any, value: Any) -> Any:
    leaves = _leaves(annotation)
    if isinstance(value, dict):
        models = [leaf for leaf in leaves if isinstance(leaf, type) and issubclass(leaf, BaseModel)]
        return as_written(models[0], value) if len(models) == 1 else value
    if leaves and all(leaf in (int, float, bool, type(None)) for leaf in leaves):
        return typed(value)
    return value


def _leaves(annotation: Any) -> list[Any]:
    """The types a field's annotation is made of (``Annotated`` and unions opened)."""
    if get_origin(annotation) is Annotated:
        return _leaves(get_args(annotation)[0])
    if get_origin(annotation) in (Union, UnionType):
        return [leaf for arg in get_args(annotation) for leaf in _leaves(arg)]
    return [annotation]
