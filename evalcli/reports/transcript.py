"""One conversation, turn by turn, for people: ``evalcli show RUN ITEM`` (docs/html-report.md, docs/targets/frameworks.md).

Each turn shows the user's message (marked when simulated, or when it resumed an interrupt), the
assistant's words (with the agent that wrote them, when known, and marked when they are an interrupt),
every tool call with its arguments (pretty JSON) and every tool result (errors marked), the turn's
structured result and output retries, then the turn's gates and scorers with score, threshold,
pass/fail and reason. After the turns come the conversation's own gates and scorers with their
reasons (a judge's explanation), and its error and traceback if it failed. A conversation played with
``--repeat`` shows every play that way, failing ones first, then the means. Pure functions of an
``ItemResult``.
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text

from ..messages import Message, is_error_result, is_interrupt, message_text, retry_note
from ..results import Guardrail, ItemResult, Outcome, RunResult, TurnRecord, outcome_json
from .text import fmt, threshold_text


def pretty_arguments(arguments: Any) -> str:
    """Tool-call arguments as indented JSON (as written when they are not JSON)."""
    if isinstance(arguments, str):
        try:
            return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
        except ValueError:
            return arguments
    return json.dumps(arguments, indent=2, ensure_ascii=False, default=str)


def assistant_label(message: Message) -> str:
    """``Assistant``, with the agent that wrote the message and whether it is an interrupt: ``Assistant (Seat
    Booking Agent)``, ``Assistant (interrupt)``."""
    name = message.get("name")
    notes = [name] if isinstance(name, str) and name else []
    if is_interrupt(message):
        notes.append("interrupt")
    return f"Assistant ({', '.join(notes)})" if notes else "Assistant"


def user_label(turn: TurnRecord) -> str:
    """``User``, marked when a simulated user wrote the message or when it resumed an interrupt."""
    notes = (["simulated"] if turn.simulated else []) + (["resumes the interrupt"] if turn.resume is not None else [])
    return f"User ({', '.join(notes)})" if notes else "User"


def structured_text(value: Any) -> str:
    """A structured result as indented JSON."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def message_lines(output: list[Message], names: dict[Any, str] | None = None) -> list[Text]:
    """The assistant's words, tool calls and tool results of one turn, in order. ``names`` (call id -> tool name)
    carries the calls of earlier turns over, for a result that comes a turn later (an interrupted call)."""
    lines: list[Text] = []
    names = {} if names is None else names
    for message in output:
        role = message.get("role")
        if role == "assistant":
            text = message_text(message)
            if text.strip():
                lines.append(Text.assemble((assistant_label(message) + ": ", "bold green"), text))
            for call in message.get("tool_calls") or ():
                function = call.get("function") or {}
                name = str(function.get("name"))
                names[call.get("id")] = name
                lines.append(Text.assemble(("  tool call ", "bold cyan"), (name, "cyan"),
                                           (f"  (id {call.get('id')})", "dim")))
                lines.append(Text(_indent(pretty_arguments(function.get("arguments")), 4)))
        elif role == "tool":
            call_id = message.get("tool_call_id")
            error = is_error_result(message)
            label = f"  tool result{' ERROR' if error else ''} "
            source = message.get("source")
            notes = [f"id {call_id}", *([source] if isinstance(source, str) else []),
                     *(["handoff"] if message.get("handoff") is True else []),
                     *(["seen by evalcli, not in the reply"] if message.get("observed") is True else [])]
            said = f"  ({', '.join(notes)})"
            lines.append(Text.assemble((label, "bold red" if error else "bold blue"),
                                       (names.get(call_id, "?"), "cyan"), (said, "dim")))
            note = retry_note(message)
            if note:
                lines.append(Text(f"    {note}", style="yellow"))
            lines.append(Text(_indent(pretty_arguments(message_text(message)), 4), style="red" if error else ""))
    return lines


def _indent(text: str, spaces: int) -> str:
    pad = " " * spaces
    return "\n".join(pad + line for line in text.splitlines()) or pad


def outcome_lines(title: str, gates: dict[str, Outcome], scores: dict[str, Outcome],
                  thresholds: dict[str, Any]) -> list[Text]:
    """``gates:`` and ``scorers:`` lines with score, threshold, pass/fail and the reason."""
    lines: list[Text] = []
    for role, outcomes in (("gate", gates), ("scorer", scores)):
        for scorer_id, outcome in outcomes.items():
            data = outcome_json(outcome, gate=role == "gate", threshold=thresholds.get(scorer_id))
            line = Text(f"{title}{role} ", style="bold")
            line.append(scorer_id)
            score = "not scorable" if outcome.not_scorable else "error" if outcome.score is None and outcome.error \
                else fmt(outcome.score)
            line.append(f"  {score}")
            if outcome.agreement_text is not None:
                line.append(f"  (samples agree {outcome.agreement_text})")
            if data.get("threshold") is not None:
                line.append(f" ({threshold_text(data['threshold'])})")
            passed = data.get("passed")
            if passed is not None:
                line.append("  pass" if passed else "  FAIL", style="green" if passed else "bold red")
            lines.append(line)
            detail = (outcome.error and f"raised {outcome.error}") or outcome.reason
            if detail:
                lines.append(Text(_indent(detail, 6), style="dim" if passed is not False else ""))
    return lines


def plays_failing_first(plays: list[ItemResult]) -> list[ItemResult]:
    """A conversation's plays as ``show`` lists them: those that failed (errored, or missed a gate) first, each group
    in play order."""
    return sorted(plays, key=lambda play: (play.passed, play.play or 0))


def render_item(run: RunResult, item: ItemResult) -> RenderableType:
    """The whole conversation as a rich renderable: with ``--repeat``, every play (failing ones first), then the
    means over the plays; one play of it when ``item`` is a play (``item.play``)."""
    from rich.rule import Rule  # rich's rules and panels: imported by the reports that show a transcript

    status = Text("ok", style="green") if item.status == "ok" else Text(item.status, style="bold red")  # or limited
    played = f"  play {item.play}" if item.play is not None else ""
    head = Text.assemble(("Conversation ", "bold"), (item.id, "bold cyan"),
                         f"  (item {item.index}, {item.form}, {len(item.turns)} turn{'s' if len(item.turns) != 1 else ''}"
                         f"{', stopped: ' + item.stop_reason if item.stop_reason else ''}){played}  status ", status,
                         "  ", ("passed", "green") if item.passed else ("FAILED", "bold red"))
    parts: list[RenderableType] = [
        Text.assemble(("Run ", "bold"), (run.run_id, "cyan"), f"  {run.dataset_path}  ->  {run.target}"), head,
        Text(f"thread {item.thread_id or '-'}  resource {item.resource_id or '-'}", style="dim")]
    if item.stability is not None:
        parts.append(Text(f"played {item.repeats} times: {item.stability} ({item.plays_passed} of {item.repeats} plays "
                          "passed every gate)", style="bold yellow" if item.stability == "flaky" else ""))
    if item.metadata:
        parts.append(Text(f"metadata {json.dumps(item.metadata, ensure_ascii=False, default=str)}", style="dim"))
    if not item.plays:
        parts.extend(_conversation_parts(item))
        return Group(*parts)
    for play in plays_failing_first(item.plays):
        verdict = "passed" if play.passed else play.status if play.status != "ok" else "FAILED"
        parts.append(Rule(f"play {play.play} of {len(item.plays)}: {verdict}", align="left",
                          style="green" if play.passed else "bold red"))
        parts.extend(_conversation_parts(play))
    parts.append(Rule(f"all {len(item.plays)} plays: the means (each reason from the play that scored lowest)",
                      align="left"))
    for turn in item.turns:
        parts.extend(outcome_lines(f"turn {turn.index} ", turn.gate_scores, turn.scores, turn.thresholds))
    parts.extend(outcome_lines("", item.gate_scores, item.scores, item.thresholds))
    if item.status != "ok":
        parts.append(Text(item.error or "", style="bold red"))
    return Group(*parts)


def _conversation_parts(item: ItemResult) -> list[RenderableType]:
    """One play's turns, its whole-conversation outcomes and its error; a text of more than ``LONG`` characters
    printed by ``Pieces``."""
    return [Pieces(part) if isinstance(part, Text) and len(part) > LONG else part for part in _parts(item)]


LONG = 20_000
"""A text longer than this many characters is printed by ``Pieces``."""


class Pieces:
    """A long text (a message of megabytes) printed piece by piece: rich wraps one ``Text`` in a time that grows with
    the square of its length (``show`` took 18 s on a message of 8 MB, six minutes on one of 20 MB). Each line longer
    than 256 screen lines is cut into pieces of 256 screen lines' characters, each wrapped on its own: the same
    lines, but that a piece starts a new screen line (docs/html-report.md "Transcripts")."""

    def __init__(self, text: Text) -> None:
        self.text = text

    def __rich_console__(self, console: Any, options: Any) -> Any:
        step = max(1, options.max_width) * 256
        for line in self.text.split("\n", allow_blank=True):
            if len(line) <= step:
                yield line
            else:
                yield from line.divide(range(step, len(line), step))


def _parts(item: ItemResult) -> list[RenderableType]:
    from rich.panel import Panel  # rich's panels and rules: imported by the reports that show a transcript
    from rich.rule import Rule

    parts: list[RenderableType] = []
    names: dict[Any, str] = {}
    for turn in item.turns:
        parts.append(Rule(f"turn {turn.index}", align="left"))
        parts.append(Text.assemble((user_label(turn) + ": ", "bold magenta"), turn.input))
        parts.extend(message_lines(turn.output, names))
        if turn.structured is not None:
            parts.append(Text("  structured output", style="bold yellow"))
            parts.append(Text(_indent(structured_text(turn.structured), 4)))
        if turn.output_retries:
            parts.append(Text(f"  output retries: {turn.output_retries} (the output was rejected and asked for again)",
                              style="yellow"))
        if turn.guardrail is not None:
            parts.append(Text(guardrail_text(turn.guardrail), style="bold yellow"))
        parts.extend(outcome_lines("turn ", turn.gate_scores, turn.scores, turn.thresholds))
    if item.gate_scores or item.scores:
        parts.append(Rule("whole conversation", align="left"))
        parts.extend(outcome_lines("", item.gate_scores, item.scores, item.thresholds))
    if item.status != "ok":
        parts.append(Rule("error", align="left", style="red"))
        parts.append(Text(item.error or "", style="bold red"))
        if item.traceback:
            parts.append(Panel(Text(item.traceback.rstrip()), title="traceback", title_align="left", style="red"))
    return parts


def guardrail_text(guardrail: Guardrail) -> str:
    """How ``show`` and the HTML report say that a guardrail tripped on a turn."""
    stopped = "the user's message" if guardrail.kind == "input" else "the agent's answer"
    return f"  guardrail tripped: {guardrail.name} ({guardrail.kind} guardrail; it stopped {stopped})"


def item_document(run: RunResult, item: ItemResult) -> dict[str, Any]:
    """``evalcli show RUN ITEM --json``: the run's identity and the conversation as in ``items`` of the JSON; with
    ``--repeat``, ``plays``: every play (numbered from 1) as such an item, failing ones first; ``play``: which play
    ``item`` is, when it is one."""
    document: dict[str, Any] = {"run_id": run.run_id, "dataset": run.dataset_path, "target": run.target, "item": item.to_json()}
    if item.play is not None:
        document["play"] = item.play
    if item.plays:
        document["plays"] = [{"play": p.play, **p.to_json()} for p in plays_failing_first(item.plays)]
    return document
