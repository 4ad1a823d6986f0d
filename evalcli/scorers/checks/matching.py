"""Tool calls with their arguments, JSON value matching and maximum bipartite matching (docs/reference/scorers.md).

Argument values compare by the one rule of ``evalcli.patterns.values_match`` (a mock's ``when`` uses it too):
JSON values, numbers by value (``1`` equals ``1.0``), booleans only with booleans, strings exactly, and a string
written ``"/.../"`` a regular expression. ``partial`` wants every expected key present with a matching value
(nested mappings partial too); ``exact`` wants equality as a whole. Lists match lists of the same length element
by element, under the same mode. Arguments that are not a JSON object never match.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, Literal, TypeVar

from ...messages import Message, excerpt
from ...patterns import CompareMode, pattern_problems, values_match
from ...records import record

__all__ = ["ArgsMode", "Call", "CompareMode", "arguments_match", "calls_of", "maximum_matching", "parse_arguments",
           "valid_patterns", "values_match"]

ArgsMode = Literal["ignore", "partial", "exact"]
T = TypeVar("T")


def valid_patterns(value: T) -> T:
    """A check's argument whose ``"/.../"`` strings are all valid regular expressions (else ``ValueError`` naming
    each one and where it is inside the argument)."""
    problems = pattern_problems(value)
    if problems:
        raise ValueError("; ".join(problems))
    return value


@record(frozen=True)
class Call:
    """One tool call the agent made: its name, its arguments as sent, and those arguments parsed."""

    name: str
    raw: Any
    """``function.arguments`` as sent (normally a JSON string)."""
    id: Any
    """The call's ``id`` (what its tool result's ``tool_call_id`` names)."""
    arguments: dict[str, Any] | None
    """The arguments as a JSON object; ``None`` when they do not parse or are not an object."""

    def describe(self) -> str:
        """``book({"date": "today"})``: the name and the arguments as sent, shortened."""
        raw = self.raw if isinstance(self.raw, str) else json.dumps(self.raw, ensure_ascii=False, default=str)
        return f"{self.name}({excerpt(raw, 60)[1:-1]})"


def parse_arguments(raw: Any) -> dict[str, Any] | None:
    """A call's arguments as a JSON object, or ``None`` (unparseable, or a JSON value that is not an object)."""
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str):
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def calls_of(messages: Iterable[Message]) -> list[Call]:
    """Every tool call of every message, in order, with its arguments (as ``messages.tool_calls`` reads names)."""
    calls = []
    for message in messages:
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, dict) else None
            name = function.get("name") if isinstance(function, dict) else None
            if isinstance(name, str) and name:
                raw = function.get("arguments") if isinstance(function, dict) else None
                calls.append(Call(name, raw, call.get("id"), parse_arguments(raw)))
    return calls


def arguments_match(expected: dict[str, Any], call: Call, mode: ArgsMode) -> bool:
    """Whether the call's arguments match ``expected``: under ``ignore`` always; otherwise never when they
    are not a JSON object."""
    if mode == "ignore":
        return True
    return call.arguments is not None and values_match(expected, call.arguments, mode)


def maximum_matching(left: int, right: int, fits: Callable[[int, int], bool]) -> dict[int, int]:
    """A maximum matching of a bipartite graph (augmenting paths): left index -> right index.

    First fit can miss a pairing that exists: expected ``[search, search {q: x}]`` against calls
    ``[search(q=x), search(q=y)]`` pairs the bare ``search`` with the first call and leaves nothing for
    ``search {q: x}``; augmenting paths re-pair earlier choices, so the matching is as large as possible.
    """
    edges = [[j for j in range(right) if fits(i, j)] for i in range(left)]
    owner: dict[int, int] = {}

    def augment(i: int, seen: set[int]) -> bool:
        for j in edges[i]:
            if j not in seen:
                seen.add(j)
                if j not in owner or augment(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    for i in range(left):
        augment(i, set())
    return {i: j for j, i in sorted(owner.items())}
