"""Export (docs/otel.md, "Exporting a run"): a run written as OpenTelemetry spans, to an OTLP JSON file
(``--otel-file``) or an OTLP/HTTP endpoint (``--otel-endpoint``).

One trace per run: a span for the run, one per conversation under it (``gen_ai.conversation.id`` = its thread, or its
id), one per turn under that (what the user said and the turn's messages), the spans captured during the turn under
the turn, and a ``gen_ai.evaluation.result`` event per score on the span it scored (a conversation's gates and
scorers on its conversation span, per-turn ones on the turn's). Every attribute and event passes through the
run's redaction (``secrets.Redactor``) before anything is written or sent.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import field
from pathlib import Path
from typing import Any

from ..otel.otlp import encode_request
from ..otel.spans import Span, SpanEvent
from ..records import record
from ..results import ItemResult, Outcome, RunResult
from ..run.events import Events
from ..secrets import Redactor
from ..version import __version__

EVALUATION_EVENT = "gen_ai.evaluation.result"


class ExportFailed(Exception):
    """The run's spans did not all reach where they were asked to go; the run itself is stored (docs/otel.md)."""

    def __init__(self, run_id: str, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.run_id = run_id
        self.problems = problems


@record
class Exporter:
    """Collects a run's conversations as they finish (``add``), then writes the run (``finish``)."""

    redact: Redactor
    file: Path | None = None
    endpoint: str | None = None
    items: list[ItemResult] = field(default_factory=list)

    def add(self, result: ItemResult) -> None:
        self.items.append(result)

    def finish(self, run: RunResult, dataset_path: str) -> list[Span]:
        """Write the run (every conversation added since the last ``finish``); returns the spans written."""
        spans = run_spans(run, dataset_path, sorted(self.items, key=lambda i: i.index))
        self.items = []
        spans = [redacted(span, self.redact) for span in spans]
        request = encode_request(spans, {"service.name": "evalcli", "service.version": __version__})
        failed: list[str] = []
        if self.file is not None:
            try:
                with self.file.open("a", encoding="utf-8") as handle:
                    handle.write(_line_start(self.file) + json.dumps(request, ensure_ascii=False) + "\n")
            except OSError as exc:
                failed.append(f"--otel-file {self.file} could not be written: {exc.strerror or exc}\n"
                              "  hint: check the folder exists, its permissions and the disk")
        if self.endpoint is not None:
            from ..otel.endpoint import SendFailed, post

            try:
                post(self.endpoint, request)
            except SendFailed as exc:
                failed.append(str(exc))
        if failed:
            raise ExportFailed(run.run_id, failed)
        return spans


def _line_start(path: Path) -> str:
    """A line break when the file does not end with one (a file written by hand, or by a tool that ends its last
    line without one): the run's request is always a line of its own (docs/otel.md)."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            if handle.tell() == 0:
                return ""
            handle.seek(-1, os.SEEK_END)
            return "" if handle.read(1) == b"\n" else "\n"
    except OSError:
        return ""


def run_spans(run: RunResult, dataset_path: str, items: list[ItemResult]) -> list[Span]:
    """The run as spans: times laid out from the durations the run recorded, ending now, conversations side by
    side from the run's start (a turn's captured spans keep their own times, and its span covers them)."""
    trace_id = os.urandom(16).hex()
    end = time.time_ns()
    longest = max((i.duration_ms for i in items), default=0.0)
    start = end - int(longest * 1e6)
    run_span = Span(trace_id, _id(), None, f"evalcli.run {run.run_id}", start, end,
                    {"evalcli.run.id": run.run_id, "evalcli.dataset": dataset_path, "evalcli.target": run.target,
                     "evalcli.verdict": run.status, "evalcli.exit_code": run.exit_code}, scope="evalcli")
    out = [run_span]
    for item in items:
        out.extend(_conversation(item, run_span, start))
    return out


def _conversation(item: ItemResult, run_span: Span, start: int) -> list[Span]:
    conversation = Span(run_span.trace_id, _id(), run_span.span_id, f"evalcli.conversation {item.id}", start,
                        start + int(item.duration_ms * 1e6),
                        {"gen_ai.conversation.id": item.thread_id or item.id, "evalcli.item.id": item.id,
                         "evalcli.item.index": item.index, "evalcli.status": item.status}, scope="evalcli")
    if item.error:
        conversation.error = item.error
    conversation.events = evaluations({**item.gate_scores, **item.scores}, set(item.gate_scores), start)
    out = [conversation]
    at = start
    for turn in item.turns:
        captured = [_moved(s, run_span.trace_id) for s in turn.captured.spans()] if turn.captured is not None else []
        begin = min([at, *(s.start_ns for s in captured)])
        finish = max([at + int(turn.duration_ms * 1e6), *(s.end_ns for s in captured)])
        turn_span = Span(run_span.trace_id, _id(), conversation.span_id, f"evalcli.turn {turn.index}", begin, finish,
                         {"gen_ai.conversation.id": item.thread_id or item.id, "evalcli.turn.index": turn.index,
                          "evalcli.item.id": item.id, "evalcli.turn.input": turn.input,
                          "evalcli.turn.output": json.dumps(turn.output, ensure_ascii=False, default=str)},
                         scope="evalcli")
        turn_span.events = evaluations({**turn.gate_scores, **turn.scores}, set(turn.gate_scores), finish)
        ids = {s.span_id for s in captured}
        for span in captured:  # the agent's top spans hang under the turn they belong to
            if span.parent_id is None or span.parent_id not in ids:
                span.parent_id = turn_span.span_id
        out += [turn_span, *captured]
        at = finish
    conversation.end_ns = max(conversation.end_ns, at)
    return out


def evaluations(outcomes: dict[str, Outcome], gates: set[str], at: int) -> list[SpanEvent]:
    """A ``gen_ai.evaluation.result`` event per scored outcome (a gate's label: reached or not; a scorer's: its
    score's side of 0.5)."""
    events = []
    for name, outcome in outcomes.items():
        attributes: dict[str, Any] = {"gen_ai.evaluation.name": name}
        if outcome.score is not None:
            attributes["gen_ai.evaluation.score.value"] = float(outcome.score)
            passed = not outcome.missed_gate if name in gates else outcome.score >= 0.5
            attributes["gen_ai.evaluation.score.label"] = "pass" if passed else "fail"
        explanation = outcome.error or outcome.reason
        if explanation:
            attributes["gen_ai.evaluation.explanation"] = explanation
        if outcome.not_scorable:
            attributes["evalcli.not_scorable"] = True
        events.append(SpanEvent(EVALUATION_EVENT, at, attributes))
    return events


def redacted(span: Span, redact: Redactor) -> Span:
    """The span with every attribute and event redacted (names, values and JSON text alike)."""
    span.attributes = redact.value(span.attributes)
    span.events = [SpanEvent(e.name, e.time_ns, redact.value(e.attributes)) for e in span.events]
    if span.error:
        span.error = redact(span.error)
    span.name = redact(span.name)
    return span


def _moved(span: Span, trace_id: str) -> Span:
    span.trace_id = trace_id
    return span


def _id() -> str:
    return os.urandom(8).hex()


class ExportEvents(Events):
    """A run's events passed on to ``inner``, each finished conversation also handed to the exporter."""

    def __init__(self, inner: Events, exporter: Exporter) -> None:
        self.inner = inner
        self.exporter = exporter

    def started(self, run_id: str, total: int, done: int) -> None:
        self.inner.started(run_id, total, done)

    def item_done(self, result: ItemResult) -> None:
        self.exporter.add(result)
        self.inner.item_done(result)

    def item_kept(self, result: ItemResult) -> None:  # a resumed run is exported whole (docs/otel.md)
        self.exporter.add(result)
        self.inner.item_kept(result)

    def warning(self, text: str) -> None:
        self.inner.warning(text)

    def notice(self, text: str | None) -> None:
        self.inner.notice(text)

    def throttled(self, model: str, limit: int | None, ceiling: int) -> None:
        self.inner.throttled(model, limit, ceiling)

    def stopping(self) -> None:
        self.inner.stopping()

    def close(self) -> None:
        self.inner.close()
