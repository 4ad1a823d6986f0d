"""evalcli's own scorer kinds, declared as any package declares its own (docs/extending.md): the entry points
``checks``, ``judges`` and ``python`` of the group ``evalcli.scorers`` in evalcli's ``pyproject.toml`` name these
lists, in the order ``evalcli scorers`` and the reference page list them.

``TABLE`` names each list's kinds (and aliases) and the module that declares them, so a kind is known by name
without importing its module: the module is imported when a spec of that kind is first resolved (a run with three
basic checks imports no judge; docs/performance.md "Start-up and finish"). ``tests/test_startup.py`` compares the
table with the modules' declarations; the lists themselves are read from those modules when first asked for."""

from __future__ import annotations

import importlib
from typing import Any

from ..plugins import own_models

TABLE: dict[str, tuple[tuple[str, tuple[str, ...], str], ...]] = {
    "CHECKS": (
        *(((name, (), "evalcli.scorers.checks.basic:KINDS")) for name in (
            "includes", "excludes", "equals", "matches", "similarity", "called_tool", "did_not_call", "tool_order",
            "tool_retries", "max_tool_calls", "used_no_tools", "no_tool_errors")),
        *(((name, (), "evalcli.scorers.checks.tools:KINDS")) for name in (
            "tool_args", "trajectory", "tool_f1", "json_output")),
        *(((name, (), "evalcli.scorers.checks.agents:KINDS")) for name in (
            "answered_by", "structured_output", "guardrail_tripped")),
    ),
    "JUDGES": (
        ("multi_turn_judge", ("judge",), "evalcli.scorers.judges.criterion:MULTI_TURN_JUDGE"),
        *(((name, (), "evalcli.scorers.judges.library:KINDS")) for name in (
            "rubric", "completeness", "knowledge_retention", "role_adherence", "grounded", "factuality",
            "goal_achieved")),
    ),
    "PYTHON": (("python", (), "evalcli.scorers.custom:PYTHON"),),
}
"""For each list (the attribute an entry point names): (kind, its aliases, ``module:attribute`` declaring it), in
the list's order. ``CHECKS``: the deterministic checks; ``JUDGES``: the LLM judges, the criterion judge then the
library's; ``PYTHON``: custom scorers, a function of the user's own."""

def declared(path: str) -> Any:
    """What ``module:attribute`` names (a ``Kind`` or a list of them), its module imported now (its argument models
    built without pydantic's plugins: ``own_models``)."""
    module, _, attribute = path.partition(":")
    with own_models():
        return getattr(importlib.import_module(module), attribute)


def __getattr__(name: str) -> Any:
    # CHECKS, JUDGES, PYTHON: the kinds of one list, each module imported (what loading an entry point gives)
    if name not in TABLE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    kinds: list[Any] = []
    for path in dict.fromkeys(path for _, _, path in TABLE[name]):
        value = declared(path)
        kinds.extend(value if isinstance(value, list | tuple) else [value])
    return tuple(kinds)
