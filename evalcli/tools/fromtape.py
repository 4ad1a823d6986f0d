"""Mocks from recordings (docs/hermetic.md, "Mocks from recordings"): the ``tools:`` block that answers the calls a
tape recorded, for a person to edit.

Each tool gets one entry per distinct arguments (``when``: every argument, as recorded), answering as the tape did:
``returns`` or ``raises``, or a ``sequence`` when the same call got several answers in a conversation. Entries with
more arguments come first, so a call is never answered by an entry written for a call with fewer. A call with no
arguments is the tool's fallback (no ``when``). Where conversations got different answers to the same call, the
answers of the first conversation that made it are kept, and a comment says which call differed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import field
from typing import Any

import yaml

from ..interpolation import escaped as escaped_text
from ..patterns import is_pattern
from ..records import record
from ..secrets import REDACTED
from .plan import Recorded


@record
class _Call:
    """One distinct call of a tool: its arguments and, per conversation, its answers in order."""

    arguments: dict[str, Any]
    answers: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def literal(value: Any) -> Any:
    """A recorded argument as a ``when`` value matching only itself: a string that reads as a ``"/.../"`` pattern is
    written as the pattern of its exact text (docs/hermetic.md, "Mocks"); a string where the tape's redactor put
    ``[redacted]`` is the pattern of its text with anything there, so the mock still answers the call that carries
    the secret (which the block never holds)."""
    if isinstance(value, str) and REDACTED in value:
        return "/^" + ".+".join(re.escape(part) for part in value.split(REDACTED)) + "$/"
    if is_pattern(value):
        return f"/^{re.escape(value)}$/"
    if isinstance(value, dict):
        return {k: literal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [literal(v) for v in value]
    return value


def escaped(value: Any) -> Any:
    """A recorded value as a dataset must write it to read it back as it was: a ``${`` in a string written ``$${``, so
    a tool's text that holds ``${HOME}`` is never interpolated when the block is loaded (docs/datasets.md)."""
    if isinstance(value, str):
        return escaped_text(value)
    if isinstance(value, dict):
        return {k: escaped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [escaped(v) for v in value]
    return value


def mocks_from_calls(calls: Mapping[str, Iterable[Recorded]]) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """The ``tools:`` mocks answering ``calls`` (by conversation identity, in order), and a note per call whose
    answers differed between conversations."""
    tools: dict[str, dict[str, _Call]] = {}
    for identity, recorded in calls.items():
        for call in recorded:
            found = tools.setdefault(call.tool, {}).setdefault(call.arguments, _Call(json.loads(call.arguments)))
            answer = {"raises": escaped(call.error)} if call.error is not None else {"returns": escaped(call.result)}
            found.answers.setdefault(identity, []).append(answer)
    mocks: dict[str, list[dict[str, Any]]] = {}
    notes: list[str] = []
    for tool, by_arguments in tools.items():
        entries = []
        for arguments, found in by_arguments.items():
            plays = list(found.answers.values())
            kept = plays[0]
            if any(play != kept for play in plays[1:]):
                notes.append(f"{tool}({arguments}): conversations got different answers; those of "
                             f"{next(iter(found.answers))} are kept")
            entry: dict[str, Any] = {"when": escaped(literal(found.arguments))} if found.arguments else {}
            if all(step == kept[0] for step in kept):
                entry.update(kept[0])
            else:
                entry["sequence"] = kept
            entries.append(entry)
        entries.sort(key=lambda e: -len(e.get("when", {})))  # stable: the tape's order among equals
        mocks[tool] = entries
    return mocks, notes


def tools_yaml(calls: Mapping[str, Iterable[Recorded]], source: str) -> str:
    """The ``tools:`` block as YAML text, with a header saying where it came from and what differed."""
    listed = {identity: list(recorded) for identity, recorded in calls.items()}
    mocks, notes = mocks_from_calls(listed)
    count = sum(len(r) for r in listed.values())
    header = [f"# tools: mocks answering the {count} tool call{'s' if count != 1 else ''} of {len(listed)} "
              f"conversation{'s' if len(listed) != 1 else ''} recorded in {source}",
              "# (docs/hermetic.md, \"Mocks from recordings\"); edit freely. Add 'unmocked: error' to the dataset to",
              "# make a call these do not answer the conversation's error.",
              *(f"# note: {note}" for note in notes)]
    body = yaml.safe_dump({"tools": mocks}, sort_keys=False, allow_unicode=True, default_flow_style=None, width=100)
    return "\n".join(header) + "\n" + body
