"""How a value a dataset writes matches a value the agent produced: the one rule, used by a mock's ``when``
(``evalcli.tools.matches``), ``tool_args``, ``trajectory`` and ``structured_output`` alike (docs/checks.md,
"Arguments"; docs/hermetic.md, "Mocks").

Values compare as JSON values: numbers by value (``1`` equals ``1.0``), booleans only with booleans, ``null`` with
``null``, strings exactly; a list matches a list of the same length element by element; a mapping matches a mapping
with every key given (``partial``: others may be there; ``exact``: the same keys), value by value. A string written
``"/.../"`` is a regular expression: it matches a value whose text it finds (``re.search``; the text of a value that
is not a string is its canonical JSON), at any depth.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from .regex_time import search

CompareMode = Literal["partial", "exact"]


def is_pattern(value: Any) -> bool:
    """A value written ``"/.../"``: a regular expression (``"//"`` is the empty one, which finds any text)."""
    return isinstance(value, str) and len(value) >= 2 and value.startswith("/") and value.endswith("/")


def _text(value: Any) -> str:
    """What a pattern searches: a string as it is, anything else as canonical JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def values_match(expected: Any, actual: Any, mode: CompareMode = "exact") -> bool:
    """Whether ``actual`` matches ``expected`` (the dataset's side, the only one where ``"/.../"`` is a pattern)
    under ``mode``."""
    if is_pattern(expected):
        return search(expected[1:-1], _text(actual)) is not None
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(expected, bool) and isinstance(actual, bool) and expected == actual
    if _is_number(expected) or _is_number(actual):
        return _is_number(expected) and _is_number(actual) and expected == actual
    if isinstance(expected, dict):
        if not isinstance(actual, dict) or (mode == "exact" and set(expected) != set(actual)):
            return False
        return all(key in actual and values_match(value, actual[key], mode) for key, value in expected.items())
    if isinstance(expected, (list, tuple)):
        return isinstance(actual, (list, tuple)) and len(expected) == len(actual) and all(
            values_match(e, a, mode) for e, a in zip(expected, actual, strict=True))
    if expected is None:
        return actual is None
    return isinstance(expected, str) and isinstance(actual, str) and expected == actual


def pattern_problems(value: Any, path: str = "") -> list[str]:
    """Every ``"/.../"`` string inside ``value`` that is not a valid regular expression, as ``path: why`` (the path
    inside ``value``: ``a.b[1]``), so loading refuses it where it is written instead of a conversation failing."""
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in pattern_problems(item, f"{path}.{key}" if path else str(key))]
    if isinstance(value, (list, tuple)):
        return [p for n, item in enumerate(value) for p in pattern_problems(item, f"{path}[{n}]")]
    if not is_pattern(value):
        return []
    try:
        re.compile(value[1:-1])
    except re.error as exc:
        return [f"{path + ': ' if path else ''}{value!r} is not a valid regular expression: {exc}"]
    return []
