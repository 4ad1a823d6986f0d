"""The JSON text a turn's messages are stored as, made once when the turn is recorded, whichever adapter played it
(docs/targets/python.md "Return value", docs/storage.md): a message the store could not write is that conversation's
error then, never a conversation lost by the writer with the run passing.

A base module: it imports nothing of evalcli but ``errors`` and ``secret_references``.
"""

from __future__ import annotations

import json
import re
import sys
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
    under its current limit or reads under its default one, a value whose text fails), or its text is no Unicode the
    database's UTF-8 can hold (a lone surrogate). Any other value JSON has no type for is written as its text."""
    deep = sys.getrecursionlimit() > RECURSION
    text = _written(messages, deep)
    if text is not None:
        return text
    for n, message in enumerate(messages):
        problem = _unstorable(message)
        if problem is not None:
            raise Unstorable(f"{what} {n} {problem}: it cannot be stored as JSON; return plain data (the value's "
                             "text, or a copy a JSON encoder can write)")
    try:  # each message was written on its own (the long digits were a text's, not an integer's): so are they together
        return dumps(messages)
    except Exception as exc:  # noqa: BLE001 - a value whose text failed this time only
        raise Unstorable(f"the {what}s cannot be written as JSON ({printable(describe(exc))})") from None


def check(value: Any, what: str) -> None:
    """Raises ``Unstorable`` when the store could not write ``value``, a turn's other JSON (``what``: ``the structured
    result``, a framework's state), by the rule of ``stored_text``."""
    if _written(value, sys.getrecursionlimit() > RECURSION) is None:
        problem = _unstorable(value)
        if problem is not None:
            raise Unstorable(f"{what} {problem}: it cannot be stored as JSON")


def _written(value: Any, deep: bool) -> str | None:
    """``dumps(value)`` when it is surely what the store writes; ``None``: ``_unstorable`` looks closer (under a
    raised recursion limit, ``deep``, a value holding itself would overflow the C stack first: it is walked)."""
    try:
        text = None if deep else dumps(value)
    except Exception:  # noqa: BLE001 - a value's __str__ may raise anything: which message, and why, is found later
        return None
    if text is not None and (text.isascii() or _utf8(text)) and (len(text) <= DIGITS or not _may_hold_long_integers(text)):
        return text
    return None


RECURSION = 1000
"""Python's default recursion limit, under which evalcli reads stored runs back (``show``, ``report``, the run's own
report, a ``--workers`` run's results). Past it (a target that raised the limit) a message is walked before the C
encoder writes it (``_loop``): a value holding itself would have it recurse until the C stack overflows (the process
killed by SIGSEGV) instead of raising ``RecursionError``; and nesting deeper than ``NESTING`` is refused, as what
could be written then could not be read back (docs/targets/python.md "Return value")."""
NESTING = 900
"""The levels of lists and mappings a message may nest under a raised recursion limit: a little under what JSON
writes and reads under the default one (about 1,000, less the frames of the code around)."""
DIGITS = sys.int_info.default_max_str_digits
"""The integers evalcli reads back (4,300 digits: Python's default limit, under which ``show``, ``report`` and the
run's own report parse the stored text): one a target wrote under a limit it raised is refused."""
_DIGIT_RUN = re.compile(f"[0-9]{{{DIGITS + 1}}}")


def _may_hold_long_integers(text: str) -> bool:
    """Whether ``text`` may hold an integer longer than ``DIGITS``: only under a digit limit raised past it (0: none),
    in a text that long, with that many digits in a row (``_unstorable`` then tells an integer from a string's text)."""
    if len(text) <= DIGITS:
        return False
    limit = sys.get_int_max_str_digits()
    return (limit == 0 or limit > DIGITS) and _DIGIT_RUN.search(text) is not None


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
    write is stored, however deep; ``NESTING`` under a raised limit), JSON's own refusal, an integer longer than
    evalcli reads back (``DIGITS``), or a lone surrogate in its text; ``None`` when it can be."""
    depth: list[int] = [0]
    loop = _loop(message, [], set(), depth)
    if loop is not None:
        return loop
    if depth[0] > NESTING and sys.getrecursionlimit() > RECURSION:
        return (f"nests lists and mappings deeper than {NESTING} levels, more than evalcli reads back under Python's "
                "default recursion limit")
    try:
        text = json.dumps(message, ensure_ascii=False, default=str)  # as the store writes it (``dumps``)
    except RecursionError:
        return "nests lists and mappings too deeply to be written as JSON"
    except Exception as exc:  # noqa: BLE001 - a key JSON cannot hold, an integer too long, a value whose text fails
        return f"cannot be written as JSON ({printable(describe(exc))})"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"holds text that is not Unicode ({ascii(exc.object[exc.start:exc.end])[1:-1]}, a lone surrogate)"
    if _may_hold_long_integers(text):
        digits = _longest_integer(message)
        if digits > DIGITS:
            return (f"cannot be written as JSON (ValueError: Exceeds the limit ({DIGITS} digits) for integer string "
                    f"conversion: value has {digits} digits; evalcli reads stored runs under Python's default limit)")
    return None


def printable(text: str) -> str:
    """``text`` as the database can store it: a lone surrogate (in an exception's message, say) written as its escape
    (``\\ud800``); any other text as it is."""
    return text if text.isascii() or _utf8(text) else text.encode("utf-8", "backslashreplace").decode("utf-8")


def _longest_integer(value: Any) -> int:
    """The digits of the longest integer in a value JSON could write (no loops), walked without recursion."""
    longest, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, int) and not isinstance(item, bool):
            longest = max(longest, len(str(abs(item))))
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return longest


def _loop(value: Any, path: list[Any], open_: set[int], depth: list[int]) -> str | None:
    """Where a list or mapping holds itself (``open_``: the ids of the containers ``value`` is inside; a value reached
    twice on two paths is no loop); walked without recursion, as a message may nest thousands of levels. ``depth[0]``:
    the deepest nesting seen."""
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
            depth[0] = max(depth[0], len(stack))
            break
        else:
            stack.pop()
            open_.discard(id(container))
            if path and stack:
                path.pop()
    return None


def _children(value: Any) -> Any:
    return value.items() if isinstance(value, dict) else enumerate(value)

