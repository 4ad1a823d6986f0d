"""Recorded conversations and human labels (docs/recorded.md): ``transcript:`` items and ``labels:``.

A transcript is a list of OpenAI-format messages: ``user``, ``assistant`` (with optional ``tool_calls``),
``tool`` (with the ``tool_call_id`` it answers); ``system`` and ``developer`` messages are accepted and left
out (they are neither the user's words nor the agent's response). It is split into turns at each user
message: a turn is a user message and the messages after it, up to the next one. Messages before the first
user message (an agent's greeting) form a first turn whose user message is empty. Playing a transcript is
the run's business; no target is ever called for it.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ..errors import Problem
from ..messages import Message, message_text
from ..scorers import flow_yaml
from .items import RecordedTurn
from .yamlsrc import Path, Positions, did_you_mean
from .yamlvalues import typed

ROLES = ("user", "assistant", "tool")
"""The roles a transcript's turns are made of."""
SKIPPED_ROLES = ("system", "developer")
"""Roles accepted in a transcript and left out of its turns."""
LABEL_WORDS = {"pass": 1.0, "fail": 0.0}


def parse_transcript(raw: Any, path: Path, pos: Positions, label: str, key: str,
                     problems: list[Problem]) -> tuple[RecordedTurn, ...] | None:
    """The turns of a recorded conversation, or ``None`` after adding every mistake in it to ``problems``."""
    at = (*path, key)
    if not isinstance(raw, list) or not raw:
        problems.append(pos.problem(at, f"{label}: '{key}' must be a non-empty array of messages",
                                    "list the recorded messages: - {role: user, content: ...}"))
        return None
    before = len(problems)
    messages = [m for n, value in enumerate(raw) if (m := _message(value, (*at, n), pos, f"{label} {key}[{n}]",
                                                                   problems)) is not None]
    if len(problems) > before:
        return None
    _orphan_results(messages, at, pos, label, key, problems)
    if len(problems) > before:
        return None
    turns: list[RecordedTurn] = []
    user: str | None = None
    output: list[Message] = []
    for message in messages:
        role = message["role"]
        if role in SKIPPED_ROLES:
            continue
        if role == "user":
            if user is not None or output:
                turns.append(RecordedTurn.of(user or "", output))
            user, output = message_text(message), []
        else:
            output.append(message)
    if user is not None or output:
        turns.append(RecordedTurn.of(user or "", output))
    if not turns:
        problems.append(pos.problem(at, f"{label}: '{key}' has no user, assistant or tool message",
                                    "record at least the user's message and the agent's answer"))
        return None
    return tuple(turns)


def _orphan_results(messages: list[Message], at: Path, pos: Positions, label: str, key: str,
                    problems: list[Problem]) -> None:
    """A tool message must answer a call an assistant message before it made (its ``tool_call_id``); one that answers
    no call is a mistake in the recording (a cut log, a mistyped id), never a tool result silently scored."""
    called: list[str] = []
    for n, message in enumerate(messages):
        if message["role"] == "assistant":
            called += [str(c["id"]) for c in message.get("tool_calls") or () if isinstance(c, dict) and c.get("id")]
        elif message["role"] == "tool" and message["tool_call_id"] not in called:
            answered = message["tool_call_id"]
            made = f"calls made before it: {', '.join(called)}" if called else "no call was made before it"
            problems.append(pos.problem((*at, n, "tool_call_id"), f"{label} {key}[{n}]: the tool message answers "
                                        f"'{answered}', a call no assistant message before it made"
                                        f"{did_you_mean(answered, called)}",
                                        "give the id of the assistant's tool call it answers (tool_calls: [{id: ...}]), "
                                        f"or remove it ({made})"))


def _message(raw: Any, at: Path, pos: Positions, label: str, problems: list[Problem]) -> Message | None:
    """One message, checked (its extra keys kept as they are; tool-call arguments given as a mapping become JSON
    text, as OpenAI writes them)."""
    if not isinstance(raw, dict) or "role" not in raw:
        problems.append(pos.problem(at, f"{label} must be a mapping with 'role' and 'content'",
                                    "write {role: user, content: ...}"))
        return None
    role = raw["role"]
    known = [*ROLES, *SKIPPED_ROLES]
    if not isinstance(role, str) or role not in known:
        problems.append(pos.problem((*at, "role"), f"{label}: unknown role '{role}'{did_you_mean(str(role), known)}",
                                    "roles: user, assistant, tool (system and developer messages are skipped)"))
        return None
    message = dict(raw)
    content = raw.get("content")
    if role == "user" and not (isinstance(content, str) or _text_parts(content)):
        problems.append(pos.problem((*at, "content"), f"{label}: a user message needs text 'content'",
                                    "write content: what the user said"))
        return None
    if role == "tool" and (not isinstance(raw.get("tool_call_id"), str) or not raw["tool_call_id"].strip()):
        problems.append(pos.problem(at, f"{label}: a tool message needs 'tool_call_id' (the id of the assistant's tool "
                                        "call it answers)", "add tool_call_id: the id of that call"))
        return None
    if role == "assistant" and not (content is None or isinstance(content, (str, list))):
        kind = "a mapping" if isinstance(content, dict) else f"{type(content).__name__} {content!r}"
        problems.append(pos.problem((*at, "content"), f"{label}: an assistant message's 'content' must be its text (or "
                                                      f"null, or a list of parts), got {kind}",
                                    "write content: what the assistant said, as text (quote it if it looks like a "
                                    "number)"))
        return None
    if role == "assistant" and "tool_calls" in raw:
        calls = _tool_calls(raw["tool_calls"], (*at, "tool_calls"), pos, label, problems)
        if calls is None:
            return None
        message["tool_calls"] = calls
    return message


def _text_parts(content: Any) -> bool:
    return isinstance(content, list) and any(isinstance(p, dict) and p.get("type") == "text" for p in content)


def _tool_calls(raw: Any, at: Path, pos: Positions, label: str, problems: list[Problem]) -> list[Any] | None:
    if raw is None:
        return []
    if not isinstance(raw, list):
        problems.append(pos.problem(at, f"{label}: 'tool_calls' must be a list", "write tool_calls: [{id: ..., "
                                                                                  "function: {name: ..., arguments: ...}}]"))
        return None
    calls = []
    for n, call in enumerate(raw):
        function = call.get("function") if isinstance(call, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name:
            problems.append(pos.problem((*at, n), f"{label}: tool call {n} needs 'function' with a 'name'",
                                        "write {id: call_1, function: {name: get_weather, arguments: '{}'}}"))
            return None
        arguments = function.get("arguments", "{}")  # type: ignore[union-attr]
        if isinstance(arguments, dict):
            arguments = json.dumps(arguments, ensure_ascii=False)
        elif not isinstance(arguments, str):
            problems.append(pos.problem((*at, n, "function", "arguments"), f"{label}: tool call {n}'s 'arguments' must "
                                        f"be JSON text or a mapping, got {type(arguments).__name__} {arguments!r}",
                                        "write arguments: '{\"city\": \"Paris\"}' or arguments: {city: Paris}"))
            return None
        calls.append({**call, "function": {**function, "arguments": arguments}})  # type: ignore[dict-item]
    return calls


def parse_labels(raw: Any, path: Path, pos: Positions, label: str, known: list[str],
                 problems: list[Problem]) -> dict[str, float] | None:
    """``{SCORER_ID: SCORE}`` (a number in [0, 1], or pass/fail) for scorer ids the dataset configures at the top
    level (``known``); ``None`` after adding the mistakes to ``problems``."""
    at = (*path, "labels")
    write = (f"write labels: {flow_yaml({known[0] if known else 'SCORER_ID': 'pass'})} (pass, fail or a score from 0 "
             "to 1) for "
             + (f"one of the dataset's gates and scorers ({', '.join(known)})" if known else
                "a gate or scorer of the dataset's top-level 'gates:' or 'scorers:' (it has none)"))
    if raw is None or raw == {}:
        problems.append(pos.problem(at, f"{label}: 'labels' is empty: it names no scorer, so it labels nothing",
                                    f"{write}, or remove 'labels' from this conversation"))
        return None
    if not isinstance(raw, dict):
        kind = "a list" if isinstance(raw, list) else "a string" if isinstance(raw, str) else f"{raw!r}"
        problems.append(pos.problem(at, f"{label}: 'labels' must be a mapping of scorer id -> score, got {kind}", write))
        return None
    labels: dict[str, float] = {}
    for scorer_id, value in raw.items():
        here = (*at, scorer_id)
        if str(scorer_id) not in known:
            problems.append(pos.problem(here, f"{label}: label for unknown scorer id '{scorer_id}'"
                                              f"{did_you_mean(str(scorer_id), known)}",
                                        f"label one of the dataset's gates or scorers: {', '.join(known) or '(none)'}",
                                        key=True))
            continue
        score = _label_value(typed(value))
        if score is None:
            problems.append(pos.problem(here, f"{label}: label '{scorer_id}' must be a number from 0 to 1, or pass/fail, "
                                              f"got {value!r}", "write pass, fail, or a score like 0.5"))
            continue
        labels[str(scorer_id)] = score
    return labels if len(labels) == len(raw) else None


def _label_value(value: Any) -> float | None:
    if isinstance(value, str):
        return LABEL_WORDS.get(value.strip().lower())
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value) if 0 <= value <= 1 else None
