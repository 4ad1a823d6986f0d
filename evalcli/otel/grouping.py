"""Spans into conversations (docs/otel.md, "Scoring exported traces"), one trace at a time.

A trace's turns are its root spans (each an agent run), or in a file evalcli exported its own ``evalcli.turn`` spans;
a span's parent is looked for in its own trace. Each turn is read as soon as its trace is whole (``Grouper.close``)
and kept as its user message and its response messages' JSON text: the spans themselves are let go, so a file of
100,000 conversations is never held as spans (docs/performance.md#memory). At the end the turns are put in time
order (ties in the order the file wrote their roots) and grouped by conversation: ``gen_ai.conversation.id``, else
``session.id``, else the trace.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ..records import record
from .readers import read
from .spans import Span, attribute_json, attribute_text
from .turns import TurnSpans

CONVERSATION_KEYS = ("gen_ai.conversation.id", "session.id")
"""The attributes that name a span's conversation, first found first."""
NO_USER = "(no user message in the trace)"
EVALCLI_TURN = "evalcli.turn.index"
"""The attribute of evalcli's own turn spans (a file evalcli exported)."""


@record
class Turn:
    """One turn read: where its root is in time and in the file, its conversation, and what it says."""

    start_ns: int
    seq: int
    """The root's place among the file's spans (ties in time keep the file's order)."""
    key: str
    line: int | None
    user: str | None
    packed: str
    """The turn's response messages (assistant and tool), as JSON text."""
    warning: str | None
    trace: str = ""
    exported: str = ""
    """Where its root is (``FILE:LINE``) when it is one of evalcli's own turn spans (a file evalcli exported)."""


class Reopened(Exception):
    """A span of a trace already read into turns: the trace was not whole when it was closed."""


class Grouper:
    """Spans added trace by trace (``add``), each trace read into turns when it is whole (``close``)."""

    def __init__(self) -> None:
        self.open: dict[str, list[tuple[int, Span]]] = {}
        self.seen: dict[str, set[tuple[str, str | None, str, int, int]]] = {}
        """Each open trace's spans as (id, parent, name, start, end): a span read again is a copy of one read."""
        self.closed: set[str] = set()
        self.turns: list[Turn] = []
        self.spans = 0

    def add(self, span: Span) -> None:
        if span.trace_id in self.closed:
            raise Reopened(span.trace_id)
        copies = self.seen.setdefault(span.trace_id, set())
        copy = (span.span_id, span.parent_id, span.name, span.start_ns, span.end_ns)
        if copy in copies:  # the same span delivered twice (an exporter's retry, a batch appended again): read once
            return
        copies.add(copy)
        self.open.setdefault(span.trace_id, []).append((self.spans, span))
        self.spans += 1

    def close(self, trace_id: str) -> None:
        """The trace is whole: its turns are read and its spans let go (a later span of it raises ``Reopened``)."""
        spans = self.open.pop(trace_id, None)
        self.seen.pop(trace_id, None)
        self.closed.add(trace_id)
        if spans:
            self.turns.extend(_turns(spans))

    def conversations(self) -> tuple[list[str], Iterator[tuple[int, dict[str, Any]]]]:
        """Every trace closed; the turns' warnings in conversation order, and the conversations as ``(line, {"id",
        "messages"})`` in the order their first turns started (made one at a time as they are read)."""
        for trace_id in list(self.open):
            self.close(trace_id)
        grouped: dict[str, list[Turn]] = {}
        for turn in sorted(self.turns, key=lambda t: (t.start_ns, t.seq)):
            grouped.setdefault(turn.key, []).append(turn)
        self.turns = []
        replaced: list[tuple[str, str]] = []
        for key, turns in grouped.items():
            grouped[key] = _last_export(turns)
            if len(grouped[key]) < len(turns):
                replaced.append((key, grouped[key][0].exported))
        warnings = [t.warning for turns in grouped.values() for t in turns if t.warning]
        if replaced:  # one warning for them all: a file of two runs of 1,000 conversations says it once
            names = ", ".join(key for key, _ in replaced[:5]) + (f" and {len(replaced) - 5} more"
                                                                  if len(replaced) > 5 else "")
            warnings.insert(0, f"{replaced[0][1]}: {len(replaced)} conversation(s) ({names}) are in several runs "
                               "evalcli exported to this file: each is read from the last run that holds it (the "
                               "earlier runs' turns of it are left out)")
        return warnings, _made(grouped)


def _last_export(turns: list[Turn]) -> list[Turn]:
    """A conversation evalcli exported in several runs' traces (runs appended to one ``--otel-file``, a run exported
    again when resumed) is the last run's, never their turns one after another (the caller warns)."""
    traces = {t.trace for t in turns}
    if len(traces) < 2 or not all(t.exported for t in turns):
        return turns
    last = max(traces, key=lambda trace: max(t.seq for t in turns if t.trace == trace))
    return [t for t in turns if t.trace == last]


def _made(grouped: dict[str, list[Turn]]) -> Iterator[tuple[int, dict[str, Any]]]:
    while grouped:
        key = next(iter(grouped))
        turns = grouped.pop(key)
        messages: list[dict[str, Any]] = []
        for turn in turns:
            if turn.packed or turn.user is not None:
                messages.append({"role": "user", "content": turn.user if turn.user is not None else NO_USER})
                messages.extend(json.loads(turn.packed) if turn.packed else ())
        if messages:
            yield min((t.line for t in turns if t.line is not None), default=1), {"id": key, "messages": messages}


def _turns(spans: list[tuple[int, Span]]) -> Iterator[Turn]:
    """A whole trace's turns: evalcli's turn spans when it has any, else its root spans."""
    ids = {s.span_id for _, s in spans}
    children: dict[str, list[Span]] = {}
    for _, span in spans:
        if span.parent_id is not None:
            children.setdefault(span.parent_id, []).append(span)
    roots = [(n, s) for n, s in spans if EVALCLI_TURN in s.attributes]
    calls: dict[str, list[Span]] = {}  # the model and tool calls under each parent the file does not hold
    if not roots:
        roots = [(n, s) for n, s in spans if s.parent_id is None]
        missing: dict[str, tuple[int, Span]] = {}
        for n, span in spans:  # a model or tool call whose parent is not in the file: one turn with its siblings
            if span.parent_id is None or span.parent_id in ids:
                continue
            if read(span, messages=False) is None:  # an agent run under a session span still open: a turn
                roots.append((n, span))
            elif span.parent_id not in missing:
                calls[span.parent_id] = [c for c in children[span.parent_id] if read(c, messages=False) is not None]
                missing[span.parent_id] = (n, _stand_in(span, calls[span.parent_id]))
        roots = sorted([*roots, *missing.values()], key=lambda found: found[0])
    for n, root in roots:
        tree = _subtree(root, children) if root.span_id not in calls else [
            root, *(s for call in calls[root.span_id] for s in _subtree(call, children))]
        parts = _by_conversation(root, tree, children) if root.span_id not in calls else [(root, tree)]
        for top, part in parts:
            key = next((text for k in CONVERSATION_KEYS for s in part if (text := attribute_text(s.attributes, k))),
                       root.trace_id)
            yield _turn(n, top, part, key)


def _conversation_of(span: Span) -> str | None:
    return next((text for k in CONVERSATION_KEYS if (text := attribute_text(span.attributes, k))), None)


def _by_conversation(root: Span, tree: list[Span], children: dict[str, list[Span]]) -> list[tuple[Span, list[Span]]]:
    """A root's spans as turns: one, unless they name several conversations (a batch job's span around the agent runs
    of several sessions): then each topmost span that names one is a turn of its conversation, with the spans under
    it (docs/otel.md)."""
    if len({found for span in tree if (found := _conversation_of(span)) is not None}) < 2:
        return [(root, tree)]
    tops: list[Span] = []
    todo, seen = [root], {id(root)}
    while todo:
        span = todo.pop()
        if _conversation_of(span) is not None:
            tops.append(span)
            continue
        for child in children.get(span.span_id, ()):
            if id(child) not in seen:
                seen.add(id(child))
                todo.append(child)
    return [(top, _subtree(top, children)) for top in sorted(tops, key=lambda s: s.start_ns)]


MISSING_PARENT = "evalcli.missing_parent"
"""The attribute of a stand-in for a parent span the file does not hold (``_stand_in``)."""


def _stand_in(child: Span, siblings: list[Span]) -> Span:
    """A root for the model and tool calls under a parent the file does not hold (a root span exported to the next
    file of a collector that rotates its files, or not yet ended): it stands where its first child is, from its
    earliest start, and holds nothing of its own. Its other children (agent runs) are turns of their own."""
    return Span(child.trace_id, child.parent_id or "", None, "", min(s.start_ns for s in siblings),
                max(s.end_ns for s in siblings), {MISSING_PARENT: True}, where=child.where)


def _turn(seq: int, root: Span, tree: list[Span], key: str) -> Turn:
    """One turn's user message and response messages (docs/otel.md)."""
    turn = TurnSpans.of(tree)
    if EVALCLI_TURN in root.attributes:
        user = attribute_text(root.attributes, "evalcli.turn.input")
        messages = _recorded_output(root) or turn.messages()
    else:
        user = _root_input(root) or turn.user_text()
        messages = turn.messages(_root_output(root))
    line = root.where.rsplit(":", 1)[-1]
    warning = None
    if MISSING_PARENT in root.attributes:
        warning = (f"{root.where}: span {root.span_id} is not in the file, the spans under it are: they are read as "
                   "one turn (its conversation id, input and output, if it held them, are missing)")
    if user is None and messages:
        missing = f"no user message found for this turn; recorded as '{NO_USER}'"
        warning = f"{warning}; {missing}" if warning else f"{root.where}: span {root.span_id}: {missing}"
    packed = json.dumps(_valid(messages), ensure_ascii=False) if messages or user is not None else ""
    return Turn(root.start_ns, seq, key, int(line) if line.isdigit() else None, user, packed, warning, root.trace_id,
                root.where if EVALCLI_TURN in root.attributes else "")


def _subtree(root: Span, children: dict[str, list[Span]]) -> list[Span]:
    """The root and every span under it, each once: a file whose span ids repeat (a span its own parent, two spans
    each other's) is read to its end, never walked round a cycle."""
    out, todo, seen = [], [root], {id(root)}
    while todo:
        span = todo.pop()
        out.append(span)
        for child in children.get(span.span_id, ()):
            if id(child) not in seen:
                seen.add(id(child))
                todo.append(child)
    return out


def _root_input(root: Span) -> str | None:
    a = root.attributes
    value = attribute_json(a, "input.value")
    if isinstance(value, str):
        return value
    if isinstance(value, dict):  # a chain's input as a mapping: its messages' last user text, or a text field
        for key in ("input", "query", "question", "message", "messages"):
            found = value.get(key)
            if isinstance(found, str):
                return found
    messages = attribute_json(a, "gen_ai.input.messages")
    if isinstance(messages, list):
        from .readers import genai_messages

        users = [m for m in genai_messages(messages) if m.get("role") == "user" and isinstance(m.get("content"), str)]
        return str(users[-1]["content"]) if users else None
    return None


def _root_output(root: Span) -> str | None:
    a = root.attributes
    for key in ("output.value", "final_result", "gen_ai.completion"):
        value = attribute_json(a, key)
        if isinstance(value, str):
            return value
    return None


def _recorded_output(root: Span) -> list[dict[str, Any]]:
    value = attribute_json(root.attributes, "evalcli.turn.output")
    return value if isinstance(value, list) else []


def _valid(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages a transcript accepts: every tool message answers a call id, every call has a name."""
    out = []
    for n, message in enumerate(messages):
        if message.get("role") == "tool" and not message.get("tool_call_id"):
            message = {**message, "tool_call_id": f"unknown_{n}"}
        if message.get("role") not in ("assistant", "tool"):
            continue
        out.append(message)
    return out
