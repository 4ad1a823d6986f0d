"""The texts of a conversation's stored rows (docs/storage.md): each JSON column serialised once, by one C encoder,
and redacted once (``Texts``), or built as they are to be searched for secrets at once (``RAW``, docs/secrets.md)."""

from __future__ import annotations

import json
from typing import Any

from ..results import ItemResult, TurnRecord
from ..secrets import Redactor
from ..stored_json import dumps as dumps
from .connection import Statement


class Texts:
    """The JSON texts of one conversation's rows, each serialised once with its secrets redacted (``Redactor.dumps``):
    ``Store._clean`` knows them by identity and does not redact them a second time (the texts stay alive in the
    statements until then, so an identity is never another string's)."""

    def __init__(self, redact: Redactor) -> None:
        self.redact = redact
        self.made: dict[int, str] = {id(EMPTY): EMPTY, id(NO_OUTCOMES): NO_OUTCOMES}

    def __call__(self, value: Any) -> str:
        if type(value) is dict and not value:
            return EMPTY  # nothing to redact, nothing to serialise (most turns' gate scores)
        text = self.redact.dumps(value, ensure_ascii=False, default=str)
        self.made[id(text)] = text
        return text

    def plain(self, value: str) -> str:
        """A text column's value, redacted here (``_clean`` leaves it as it is)."""
        text = self.redact(value)
        self.made[id(text)] = text
        return text

    def output(self, turn: TurnRecord) -> str:
        """A turn's ``output`` redacted, from the text made when the turn was recorded (``output_text``): the messages
        as the turn returned them, whatever was done to them since (a target changing a message it keeps, a scorer
        writing into ``output``: docs/targets/python.md "Return value"), and nothing serialised again."""
        stored = turn.output_text
        if stored is None:
            return self(turn.output)
        if self.redact.holds_secret(stored):
            try:
                stored = self(json.loads(stored))
            except (ValueError, RecursionError):  # read back under this process's limits: the messages are as good
                stored = self(turn.output)
        self.made[id(stored)] = stored
        return stored

    def turns(self, turns: list[TurnRecord]) -> str:
        """A play's turns as JSON (``TurnRecord.to_json``), each ``output`` as ``output`` gives it."""
        text = _turns(turns, self, self.output)
        self.made[id(text)] = text
        return text


EMPTY = "{}"
NO_OUTCOMES = '{"gates": {}, "scorers": {}}'
"""The ``outcomes`` of a turn without gates, scorers or a guardrail (most turns of a conversation scored as a whole)."""


class Raw:
    """``Texts`` without redaction: a conversation's rows built as they are, to be searched for secrets at once
    (``Store.item_statements``)."""

    @staticmethod
    def __call__(value: Any) -> str:
        return EMPTY if type(value) is dict and not value else dumps(value)

    @staticmethod
    def plain(value: str) -> str:
        return value

    @staticmethod
    def output(turn: TurnRecord) -> str:
        return dumps(turn.output) if turn.output_text is None else turn.output_text

    def turns(self, turns: list[TurnRecord]) -> str:
        return _turns(turns, self, self.output)


RAW = Raw()


def _turns(turns: list[TurnRecord], text: Any, output: Any) -> str:
    """``text([t.to_json() for t in turns])`` with each turn's ``output`` the text ``output`` gives (the one made
    when the turn was recorded), set in its place among the other keys."""
    pieces = []
    for turn in turns:
        data = turn.to_json()
        keys = list(data)
        at = keys.index("output")
        head = text({k: data[k] for k in keys[:at]})[:-1]
        rest = text({k: data[k] for k in keys[at + 1:]})[1:]
        pieces.append(f"{head}{', ' if at else ''}\"output\": {output(turn)}{', ' if rest != '}' else ''}{rest}")
    return f"[{', '.join(pieces)}]"


_is_text = str.__instancecheck__
"""``isinstance(value, str)`` as a C function: ``filter`` picks a row's texts without a Python step a parameter."""


def strings(statements: list[Statement]) -> list[str]:
    """Every text parameter of ``statements`` (a list of parameter rows, or one row)."""
    texts: list[str] = []
    for _, params in statements:
        for row in (params if isinstance(params, list) and params and isinstance(params[0], (tuple, list))
                    else (params,)):
            texts.extend(filter(_is_text, row))
    return texts


def item_outcomes(result: ItemResult) -> dict[str, Any]:
    """An item's ``outcomes`` column: its gates and scorers, and with ``--repeat`` ``plays``: [plays in which every
    gate passed, plays] (docs/history.md stability, kept beside the outcomes it sums up)."""
    outcomes = result.outcomes()
    if result.repeated and result.plays_passed is not None:
        outcomes["plays"] = [result.plays_passed, result.repeats, *([result.settled] if result.settled else [])]
    return outcomes


def turn_outcomes(turn: TurnRecord) -> dict[str, Any]:
    """A turn's ``outcomes`` column: its gates and scorers, and the guardrail that tripped on it (kept there, as an
    item's ``plays`` are, rather than in a column of its own)."""
    outcomes = turn.outcomes()
    if turn.guardrail is not None:
        outcomes["guardrail"] = turn.guardrail.to_json()
    return outcomes
