"""One conversation as the HTML report shows it: a row of the list, and its transcript as data.

The transcript holds what ``evalcli show RUN ITEM`` prints (``transcript.py``): each turn's user
message (marked when simulated), the assistant's words, every tool call with its arguments as pretty
JSON, every tool result (errors marked), the turn's gates and scorers with score, threshold,
pass/fail and reason; then the conversation's own gates and scorers, its error and traceback. The
decisions (what is an error, how a score or threshold reads) are made here, once, with the same
helpers as the terminal; the page's script only lays the result out.
"""

from __future__ import annotations

from typing import Any

from ...messages import Message, is_error_result, message_text, retry_note
from ...records import record
from ...results import ItemResult, Outcome, outcome_json
from ..text import ERROR, NOT_SCORABLE, fmt, one_line, plays_words, threshold_text, why_failed
from ..transcript import assistant_label, guardrail_text, pretty_arguments, structured_text

INPUT_WIDTH = 90
"""Characters of the first user message shown in the list."""


def status_of(item: ItemResult) -> str:
    """``passed``, ``failed`` (a gate missed) or ``error`` (the conversation raised)."""
    if item.status != "ok":
        return "error"
    return "passed" if item.passed else "failed"


def failing_gates(item: ItemResult) -> list[str]:
    """Labels of the gates this conversation missed: ``id`` at the top level, ``turn N: id`` per turn (as ``diff``)."""
    if item.status != "ok":
        return []
    missed = [gate_id for gate_id, o in item.gate_scores.items() if o.missed_gate]
    for turn in item.turns:
        missed += [f"turn {turn.index}: {gate_id}" for gate_id, o in turn.gate_scores.items() if o.missed_gate]
    return missed


@record(frozen=True)
class ScoreCell:
    text: str
    missed: bool
    """The conversation's score misses the scorer's threshold."""


@record(frozen=True)
class Row:
    """One line of the conversation list."""

    position: int
    index: int
    id: str
    tags: list[str]
    form: str
    turns: int
    status: str
    failing: list[str]
    why: str
    input: str
    scores: list[ScoreCell]
    plays: str = ""
    """Under repeats, its stability and passing plays (``flaky 3/6``), as the terminal's status column shows them."""
    shown: str = ""
    """The status as the list shows it when it is not ``status`` (the filter's): ``limited`` for a conversation a
    limit or a budget stopped, filtered with the errored (docs/budgets.md)."""


def row(position: int, item: ItemResult, scorer_ids: list[str]) -> Row:
    """The list's row for a conversation (``position`` is its place in the report, in dataset order)."""
    status = status_of(item)
    first = one_line(item.turns[0].input, INPUT_WIDTH) if item.turns else ""
    return Row(position, item.index, item.id, list(item.tags), item.form, len(item.turns), status,
               failing_gates(item), one_line(why_failed(item)) if status != "passed" else "", first,
               [_cell(item, scorer_id) for scorer_id in scorer_ids], plays_words(item),
               "limited" if item.status == "limited" else "")


def _cell(item: ItemResult, scorer_id: str) -> ScoreCell:
    outcome = item.scores.get(scorer_id)
    if outcome is None:
        return ScoreCell("-", False)
    if outcome.not_scorable:
        return ScoreCell(NOT_SCORABLE, False)
    if outcome.score is None and outcome.error:
        return ScoreCell(ERROR, True)  # the scorer that made the conversation an error
    passed = outcome_json(outcome, threshold=item.thresholds.get(scorer_id)).get("passed")
    return ScoreCell(fmt(outcome.score), passed is False)


def message_entries(output: list[Message], names: dict[Any, str] | None = None) -> list[dict[str, Any]]:
    """A turn's response messages in order: ``text`` (assistant words), ``call`` (a tool call and its
    arguments) and ``result`` (a tool result, ``error`` when it failed). ``names`` carries earlier turns' calls."""
    entries: list[dict[str, Any]] = []
    names = {} if names is None else names
    for message in output:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role == "assistant":
            text = message_text(message)
            if text.strip():
                entry: dict[str, Any] = {"k": "text", "text": text}
                label = assistant_label(message)
                if label != "Assistant":  # the agent that wrote it (Agents SDK), or an interrupt
                    entry["who"] = label
                if message.get("interrupt") is True:
                    entry["interrupt"] = True
                entries.append(entry)
            for call in message.get("tool_calls") or ():
                function = (call.get("function") if isinstance(call, dict) else None) or {}
                name = str(function.get("name"))
                names[call.get("id")] = name
                entries.append({"k": "call", "name": name, "id": call.get("id"),
                                "args": pretty_arguments(function.get("arguments"))})
        elif role == "tool":
            call_id = message.get("tool_call_id")
            entry = {"k": "result", "name": names.get(call_id, "?"), "id": call_id,
                     "error": is_error_result(message), "text": pretty_arguments(message_text(message))}
            if isinstance(message.get("source"), str):
                entry["source"] = message["source"]  # where the result came from: live, mock or replay (docs/hermetic.md)
            note = retry_note(message)
            if note:
                entry["retry"] = note  # a ModelRetry, or the call that succeeded after N (docs/targets/index.md)
            entries.append(entry)
    return entries


def outcome_entries(gates: dict[str, Outcome], scores: dict[str, Outcome], thresholds: dict[str, Any]) -> list[dict[str, Any]]:
    """Gates, then scorers: id, score, threshold, pass/fail (``None`` when it does not apply) and the reason."""
    entries = []
    for role, outcomes in (("gate", gates), ("scorer", scores)):
        for scorer_id, outcome in outcomes.items():
            data = outcome_json(outcome, gate=role == "gate", threshold=thresholds.get(scorer_id))
            threshold = data.get("threshold")
            entries.append({"role": role, "id": scorer_id,
                            "score": "not scorable" if outcome.not_scorable else "error"
                            if outcome.score is None and outcome.error else fmt(outcome.score) + (
                                f" ({outcome.agreement_text} agree)" if outcome.agreement_text else ""),
                            "threshold": None if threshold is None else threshold_text(threshold),
                            "passed": data.get("passed"),
                            "reason": (outcome.error and f"raised {outcome.error}") or outcome.reason or ""})
    return entries


def transcript(item: ItemResult) -> dict[str, Any]:
    """The conversation as data for the page's script (see the module docstring)."""
    names: dict[Any, str] = {}
    return {
        "id": item.id, "index": item.index, "form": item.form, "status": status_of(item),
        "thread": item.thread_id, "resource": item.resource_id, "stop": item.stop_reason,
        "metadata": structured_text(item.metadata) if item.metadata else None,
        "turns": [{"index": t.index, "input": t.input, "simulated": t.simulated, "resumed": t.resume is not None,
                   "messages": message_entries(t.output, names),
                   "structured": None if t.structured is None else structured_text(t.structured),
                   "retries": t.output_retries,
                   "guardrail": None if t.guardrail is None else guardrail_text(t.guardrail).strip(),
                   "outcomes": outcome_entries(t.gate_scores, t.scores, t.thresholds)} for t in item.turns],
        "outcomes": outcome_entries(item.gate_scores, item.scores, item.thresholds),
        "error": item.error if item.status != "ok" else None,
        "traceback": item.traceback if item.status != "ok" else None,
    }
