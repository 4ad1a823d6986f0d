"""A dataset's top level read without the models, when it is written in the common shape (docs/performance.md,
"Before the first turn").

``load._top_level`` validates a dataset's top-level keys with ``files.DatasetFile``, whose schema pulls in every
model of a dataset file (items, turns, simulated users, recorded messages, tool mocks): importing and building them
costs more than reading a whole plain dataset of 300 conversations, and a dataset whose header and items are plain
(``plain.py``) needs none of them. When every key of
the top level is one ``DatasetFile`` takes as it is (an import path or a mapping as ``target``, a mapping of
options, a concurrency from 1 to 10,000, lists of gates and scorers, texts, ``on_limit`` and ``secrets``, each of the
exact type the strict model asks for) and none needs a model of its own (``tools``, ``limits``, ``unmocked`` given),
``plain_header`` gives the values the model would (its containers copied, as validation copies them), without
importing the models (``files``, ``fields``: imported where an item or a top level needs them).
Anything else returns ``None`` and is validated by the model as before, so every mistake is still found and worded
the same way (tests/test_plain_header.py holds the two paths equal on generated headers).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Header:
    """A top level read by ``plain_header``: ``DatasetFile``'s fields, with its defaults (tests/test_plain_header.py
    holds the two equal), for ``load`` to read as it reads the model."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.target: str | dict[str, Any] | None = values.get("target")
        self.target_options: dict[str, Any] = values["target_options"] if "target_options" in values else {}
        self.target_has_memory: bool | None = values.get("target_has_memory")
        self.concurrency: int = values["concurrency"] if "concurrency" in values else 4
        self.gates: list[Any] | None = values.get("gates")
        self.scorers: list[Any] | None = values.get("scorers")
        self.data: list[Any] | None = values.get("data")
        self.data_file: str | None = values.get("data_file")
        self.description: str | None = values.get("description")
        self.tools: None = None
        self.unmocked: None = None
        self.limits: None = None
        self.on_limit: str | None = values.get("on_limit")
        self.secrets: list[str] | None = values.get("secrets")


def _text(value: Any) -> bool:
    return value is None or type(value) is str


def _options(value: Any) -> bool:
    return type(value) is dict and all(type(key) is str for key in value)


def _list(value: Any) -> bool:
    return value is None or type(value) is list


PLAIN_KEYS: dict[str, Callable[[Any], bool]] = {
    "target": lambda value: _text(value) or _options(value),
    "target_options": _options,
    "target_has_memory": lambda value: value is None or type(value) is bool,
    "concurrency": lambda value: type(value) is int and 1 <= value <= 10_000,
    "gates": _list,
    "scorers": _list,
    "data": lambda value: value is None,  # a list of items is set aside by ``load._top_level``
    "data_file": _text,
    "description": _text,
    "tools": lambda value: value is None,
    "unmocked": lambda value: value is None,
    "limits": lambda value: value is None,
    "on_limit": lambda value: value is None or (type(value) is str and value in ("error", "score")),
    "secrets": lambda value: value is None or (type(value) is list and all(type(name) is str for name in value)),
}
"""``DatasetFile``'s keys, and the values ``plain_header`` takes as the model would (anything else: the model)."""


def plain_header(given: dict[Any, Any]) -> Header | None:
    """The ``Header`` of ``given`` (a dataset's top-level mapping) when it is plain, else ``None``."""
    for key, value in given.items():
        check = PLAIN_KEYS.get(key) if type(key) is str else None
        if check is None or not check(value):
            return None
    return Header({key: (dict(value) if type(value) is dict else list(value) if type(value) is list else value)
                   for key, value in given.items()})
