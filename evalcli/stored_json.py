"""The JSON text a turn's messages are stored as, made once when the turn is recorded, whichever adapter played it
(docs/targets/python.md "Return value", docs/storage.md): a message the store could not write is that conversation's
error then, never a conversation lost by the writer with the run passing.

A base module: it imports nothing of evalcli but ``errors`` and ``secret_references``.
"""

from __future__ import annotations

import json
from typing import Any

from .errors import describe
from .secret_references import c_encoder

dumps = c_encoder(ensure_ascii=False, default=str)
"""``json.dumps(value, ensure_ascii=False, default=str)`` (``tests/test_turn_cost.py``), the JSON text of every column a
conversation writes, by an encoder made once: ``JSONEncoder.encode`` makes a new one (and a dict of the values under
way, to find a value that holds itself) for every value, which was half the time of a turn's output and most of a small
one's."""


class Unstorable(ValueError):
    """A turn's message the store cannot write: its text says which and why."""


def stored_text(messages: list[Any], what: str = "response message") -> str:
    """``dumps(messages)``, the turn's ``output`` as the store writes it, made here once (the writer takes it as it is
    when the conversation holds no secret: ``store/row_texts.py``). Raises ``Unstorable`` naming the ``what`` message
    (``response message 1``) the store could not write: JSON cannot hold it (a container inside itself, nesting past
    the encoder's recursion, a key that is not text, a number or null, an integer with more digits than Python writes
    under its current limit, a value whose text fails), or its text is no Unicode the database's UTF-8 can hold (a
    lone surrogate). Any other value JSON has no type for is written as its text."""
    try:
        text = dumps(messages)
    except Exception:  # noqa: BLE001 - a value's __str__ may raise anything: which message, and why, is found below
        text = None
    if text is not None and (text.isascii() or _utf8(text)):
        return text
    for n, message in enumerate(messages):
        problem = _unstorable(message)
        if problem is not None:
            raise Unstorable(f"{what} {n} {problem}: it cannot be stored as JSON; return plain data (the value's "
                             "text, or a copy a JSON encoder can write)")
    raise Unstorable(f"the {what}s cannot be written as JSON")  # pragma: no cover - each message alone could be


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_LEAVES = frozenset({str, int, float, bool, type(None)})


def _unstorable(message: Any) -> str | None:
    """What keeps a message from being stored: a list or mapping inside itself (``holds itself at ['self']``),
    nesting deeper than the store's JSON encoder can write (its recursion, about 1,000 levels: a message it could
    write is stored, however deep), JSON's own refusal, or a lone surrogate in its text; ``None`` when it can be."""
    loop = _loop(message, [], set())
    if loop is not None:
        return loop
    try:
        text = json.dumps(message, ensure_ascii=False, default=str)  # as the store writes it (``dumps``)
    except RecursionError:
        return "nests lists and mappings too deeply to be written as JSON"
    except Exception as exc:  # noqa: BLE001 - a key JSON cannot hold, an integer too long, a value whose text fails
        return f"cannot be written as JSON ({describe(exc)})"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"holds text that is not Unicode ({ascii(exc.object[exc.start:exc.end])[1:-1]}, a lone surrogate)"
    return None


def _loop(value: Any, path: list[Any], open_: set[int]) -> str | None:
    """Where a list or mapping holds itself (``open_``: the ids of the containers ``value`` is inside; a value reached
    twice on two paths is no loop); walked without recursion, as a message may nest thousands of levels."""
    if type(value) in _LEAVES or not isinstance(value, dict | list | tuple):
        return None
    stack: list[tuple[Any, Any]] = [(value, iter(_children(value)))]
    open_.add(id(value))
    while stack:
        container, children = stack[-1]
        for key, item in children:
            if type(item) in _LEAVES or not isinstance(item, dict | list | tuple):
                continue
            if id(item) in open_:
                return f"holds itself at {''.join(f'[{k!r}]' for k in [*path, key])}"
            open_.add(id(item))
            path.append(key)
            stack.append((item, iter(_children(item))))
            break
        else:
            stack.pop()
            open_.discard(id(container))
            if path and stack:
                path.pop()
    return None


def _children(value: Any) -> Any:
    return value.items() if isinstance(value, dict) else enumerate(value)

