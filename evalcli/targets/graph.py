"""Walking a framework's agent graph: sub-agents (ADK), handoffs (Agents SDK), each agent once."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any


def walk(root: Any, children: Callable[[Any], Iterable[Any]]) -> Iterator[Any]:
    """``root`` and everything reachable through ``children``, breadth first, each object once (by identity; a
    cycle or a shared sub-agent ends there), ``None`` skipped."""
    seen: set[int] = set()
    queue = [root]
    while queue:
        current = queue.pop(0)
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        queue.extend(children(current))
