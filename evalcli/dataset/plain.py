"""The common items, read without pydantic (docs/performance.md, "Start-up and finish").

Most items of a large dataset are written in one of a few plain shapes: ``{"id", "input"}``, ``{"id", "inputs"}`` or
``{"id", "turns": [{"input", "gates", "scorers"}]}``, every value of the type ``ItemFile`` asks for. For such an item
``plain_item`` builds the ``Item`` that ``load._item`` builds after ``ItemFile.model_validate`` (the same values, the
same problems: the only ones such an item can still have are its turns' gates and scorers, parsed here by the same
``parse_list``). Anything else, a key outside these shapes, a value of another type, a blank id or tag, returns
``None`` before any problem is added, and is validated by the models as before: every mistake is still worded by
``load._item`` (tests/test_plain_items.py holds the two paths equal on generated items).
"""

from __future__ import annotations

from typing import Any

from ..errors import Problem
from ..scorers import Registry, ScorerSpec
from .items import NO_ENTRIES, Item, Turn
from .references import parse_list
from .yamlsrc import Path, Positions

ITEM_KEYS = frozenset({"id", "tags", "input", "inputs", "turns", "ground_truth", "expected_outcome", "metadata"})
"""The keys a plain item may have (``ItemFile``'s fields that need no parsing of their own)."""
FORMS = ("input", "inputs", "turns")
TURN_KEYS = frozenset({"input", "gates", "scorers"})
"""The keys a plain turn may have (``TurnFile``'s, less ``resume`` and ``tools``)."""
NOT_PLAIN = object()
"""What ``plain_item`` returns for an item it leaves to the models."""


def plain_item(raw: Any, index: int, path: Path, pos: Positions, registry: Registry, problems: list[Problem],
               line: int | None) -> Any:
    """The ``Item`` of ``raw`` when it has a plain shape (``None`` when its gates or scorers had problems, added to
    ``problems`` as ``load._turn`` adds them); ``NOT_PLAIN`` otherwise, with nothing added."""
    if type(raw) is not dict or not raw.keys() <= ITEM_KEYS:
        return NOT_PLAIN
    form = _plain_form(raw)
    if form is None:
        return NOT_PLAIN
    value = raw[form]
    turns: list[Turn] | None = None
    if form == "input":
        inputs = [value]
    elif form == "inputs":
        inputs = list(value)
    else:
        before = len(problems)
        turns = []
        named = registry.named
        for t, turn in enumerate(value):
            gates, scorers = turn.get("gates"), turn.get("scorers")
            # a list of registered names met before is what ``parse_list`` gives for it, with nothing to report
            gates = [] if gates is None else _named(gates, named) or parse_list(
                gates, (*path, "turns", t, "gates"), pos, registry, problems, gate=True)
            scorers = [] if scorers is None else _named(scorers, named) or parse_list(
                scorers, (*path, "turns", t, "scorers"), pos, registry, problems, gate=False)
            turns.append(_turn(turn["input"], gates, scorers))
        if len(problems) > before:
            return None
        inputs = [t.input for t in turns]
    given = raw.get("id")
    tags = raw.get("tags")
    metadata = raw.get("metadata")
    made: Any = _Item()  # ``Item(...)`` with the defaults of the fields a plain item leaves out (``_Item``)
    made.index, made.id, made.tags, made.form, made.inputs, made.turns = (
        index, str(given) if given is not None else str(index), list(tags) if tags is not None else [], form, inputs,
        turns)
    made.ground_truth, made.expected_outcome, made.simulation, made.target_options = (
        raw.get("ground_truth"), raw.get("expected_outcome"), None, None)
    made.metadata, made.transcript, made.labels, made.line, made.id_given = (
        dict(metadata) if metadata else NO_ENTRIES, None, NO_ENTRIES, line, given is not None)
    made.identity, made.content, made.tools, made.unmocked, made.limits = "", "", None, None, None
    made.__class__ = Item
    return made


class _Item:
    """An ``Item`` being filled: the same slots, set as a plain object's, then made an ``Item`` by assigning its
    class (the layouts are the same). A frozen dataclass's ``__init__`` sets each of its 20 fields through
    ``object.__setattr__`` (~33,000 instructions an item, ~5,000 so); ``plain_item`` sets every field, as
    ``Item(...)`` would (tests/test_plain_items.py compares them field by field), docs/performance.md."""

    __slots__ = Item.__slots__


class _Turn:
    """A ``Turn`` being filled, as ``_Item``."""

    __slots__ = Turn.__slots__


def _turn(text: str, gates: list[ScorerSpec], scorers: list[ScorerSpec]) -> Turn:
    """``Turn(text, gates, scorers)``, filled as ``_Item``."""
    made: Any = _Turn()
    made.input, made.gates, made.scorers, made.resume, made.tools = text, gates, scorers, None, None
    made.__class__ = Turn
    return made  # type: ignore[no-any-return]


def _named(entries: list[Any], named: dict[str, ScorerSpec]) -> list[ScorerSpec] | None:
    """The specs of ``entries`` when each is the name of a registered scorer met before (``Registry.named``) and
    their ids differ: what ``parse_list`` gives for them, with no problem (``None`` otherwise, and for no entry)."""
    if len(entries) == 1:  # the common case: one name
        entry = entries[0]
        spec = named.get(entry) if type(entry) is str else None
        return None if spec is None else [spec]
    specs = []
    for entry in entries:
        spec = named.get(entry) if type(entry) is str else None
        if spec is None:
            return None
        specs.append(spec)
    return specs if len({spec.id for spec in specs}) == len(specs) else None


def _plain_form(raw: dict[str, Any]) -> str | None:
    """The form of ``raw`` (all its keys in ``ITEM_KEYS``) when every key holds what ``ItemFile`` takes as it is,
    with exactly one form; ``None`` otherwise."""
    form = None
    for key in FORMS:
        if key in raw:
            if form is not None:
                return None
            form = key
    if form is None:
        return None
    value = raw[form]
    if form == "input":
        if type(value) is not str:
            return None
    elif type(value) is not list or not value:
        return None
    elif form == "inputs":
        for text in value:
            if type(text) is not str:
                return None
    else:
        for turn in value:  # each ``{"input": TEXT}`` with, at most, ``gates`` and ``scorers`` lists (or nulls)
            if type(turn) is not dict or type(turn.get("input")) is not str or not turn.keys() <= TURN_KEYS:
                return None
            gates, scorers = turn.get("gates"), turn.get("scorers")
            if not ((gates is None or type(gates) is list) and (scorers is None or type(scorers) is list)):
                return None
    if "id" in raw:
        given = raw["id"]
        if not (type(given) is int or (type(given) is str and given.strip())):
            return None
    if "tags" in raw:
        tags = raw["tags"]
        if type(tags) is not list or any(type(tag) is not str or not tag.strip() for tag in tags):
            return None
    if "expected_outcome" in raw and raw["expected_outcome"] is not None and type(raw["expected_outcome"]) is not str:
        return None
    metadata = raw.get("metadata")
    return form if metadata is None or (type(metadata) is dict and all(type(key) is str for key in metadata)) else None
