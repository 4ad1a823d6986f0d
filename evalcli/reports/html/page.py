"""``HtmlReport``: one run as a self-contained HTML page, fed the run's conversations once, in dataset order.

While the conversations stream past it keeps, per conversation, a row of the list and its transcript
serialised to compact JSON (secrets redacted from the values before serialising), plus the figures
the charts need. ``render`` fills the jinja2 templates (autoescaped); ``write`` writes the file.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from dataclasses import replace
from importlib import resources
from pathlib import Path
from secrets import token_urlsafe
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from ...results import ItemResult, Outcome, RunResult
from ...secrets import Redactor
from ...store import Store
from . import charts, views
from .conversation import Row, row, transcript
from .sources import ReportSources, report_sources

PER_TURN = " (per turn)"
_JSON_IN_HTML = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


def embedded_json(value: Any) -> str:
    """JSON that is safe inside ``<script type="application/json">``: ASCII only (so no U+2028 and no lone
    surrogate can break the file), and no ``<``, ``>`` or ``&`` (so no ``</script>`` can end the block)."""
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"), default=str).translate(_JSON_IN_HTML)


@functools.cache
def environment() -> Environment:
    """The report's templates, autoescaped; an undefined name is an error, never an empty string."""
    return Environment(loader=PackageLoader("evalcli.reports.html", "templates"), autoescape=True, trim_blocks=True,
                       lstrip_blocks=True, undefined=StrictUndefined)


@functools.cache
def asset(name: str) -> Markup:
    """An inline stylesheet or script of the package (written by us, so trusted as markup)."""
    return Markup(resources.files("evalcli.reports.html").joinpath("templates", name).read_text(encoding="utf-8"))


class HtmlReport:
    """Collects one run's conversations (``item``), then renders the page (``render``) or writes it (``write``)."""

    def __init__(self, result: RunResult, sources: ReportSources, redact: Redactor | None = None) -> None:
        self.result = result
        self.sources = sources
        self.redact = redact or Redactor()
        self.scorer_ids = list(sources.plan.scorer_ids)
        self.rows: list[Row] = []
        self.transcripts: list[str] = []
        self.statuses: Counter[str] = Counter()
        self.tags: Counter[str] = Counter()
        self.failing: Counter[str] = Counter()
        self.turn_misses: dict[tuple[int, str], list[str]] = {}
        self.values: dict[str, list[float]] = {}
        self.not_scorable: Counter[str] = Counter()

    def item(self, item: ItemResult) -> None:
        """Take one conversation (in dataset order)."""
        line = row(len(self.rows), item, self.scorer_ids)
        self.rows.append(self._redacted(line))
        self.transcripts.append(embedded_json(self.redact.value(transcript(item))))
        self.statuses[line.status] += 1
        self.tags.update(self.redact(tag) for tag in item.tags)
        self.failing.update(line.failing)
        for turn in item.turns:
            for gate_id, outcome in turn.gate_scores.items():
                if outcome.missed_gate and item.status == "ok":
                    self.turn_misses.setdefault((turn.index, gate_id), []).append(line.id)
        if item.status == "ok":
            self._collect(item.scores, "")
            for turn in item.turns:
                self._collect(turn.scores, PER_TURN)

    def _redacted(self, line: Row) -> Row:
        redact = self.redact
        return replace(line, id=redact(line.id), tags=[redact(t) for t in line.tags], why=redact(line.why),
                       input=redact(line.input))

    def _collect(self, outcomes: dict[str, Outcome], suffix: str) -> None:
        for scorer_id, outcome in outcomes.items():
            key = scorer_id + suffix
            if outcome.not_scorable:
                self.not_scorable[key] += 1
            elif outcome.score is not None:
                self.values.setdefault(key, []).append(outcome.score)

    # -- rendering ---------------------------------------------------------------------------------

    def histograms(self) -> list[charts.Histogram]:
        """Each scorer's distribution: the run's scorers in their order, then per-turn scorers as met."""
        keys = [k for k in self.scorer_ids if k in self.values or k in self.not_scorable]
        keys += [k for k in [*self.values, *self.not_scorable] if k not in keys]
        return [charts.histogram(key, self.values.get(key, []), self.not_scorable[key]) for key in dict.fromkeys(keys)]

    def turn_chart(self) -> charts.LineChart | None:
        """Per turn index: each per-turn scorer's mean and each per-turn gate's score."""
        turns = self.result.summary.turn_results
        series: dict[str, list[float | None]] = {}
        for n, turn in enumerate(turns):
            values = {**turn.scores, **{f"gate {g.id}": g.score for g in turn.gate_results}}
            for key, value in values.items():
                series.setdefault(key, [None] * len(turns))[n] = value
        if not series:
            return None
        return charts.line_chart("Per-turn means", [f"turn {t.index}" for t in turns], series)

    def history_chart(self) -> tuple[charts.LineChart | None, list[str]]:
        """Each registered scorer's mean over the runs of this dataset, and what the chart leaves out."""
        history = self.sources.history
        labels = list(dict.fromkeys(label for point in history for label in point.means))
        notes = []
        if len(history) <= 1:
            notes.append("No earlier run of this dataset in this database: the chart grows with every run.")
        untracked = self.untracked()
        if untracked:
            notes.append(f"Not in this chart: {', '.join(untracked)}. They are not registered in scorers.yaml, so no "
                         "run has rows of theirs in the 'scores' table this chart reads (their scores of this run are "
                         "in the tables above and below); 'evalcli validate "
                         f"{self.sources.row.get('dataset_path') or 'DATASET'}' prints the lines that register them.")
        if not labels:
            notes.append("No registered scorer scored this run: scorers registered in scorers.yaml are tracked across "
                         "runs.")
            return None, notes
        series = {label: [point.means.get(label) for point in history] for label in labels}
        x_labels = [(point.started_at or point.run_id)[5:19].replace("T", " ") for point in history]
        chart = charts.line_chart("Registered scorers across runs", x_labels, series, highlight_last=True)
        return chart, notes

    def untracked(self) -> list[str]:
        """The run's gates and scorers (top level and per turn) that are not registered, in the order they are met."""
        registered = self.sources.registered
        if registered is None:
            return []
        summary, plan = self.result.summary, self.sources.plan
        ids = [*plan.gate_ids, *plan.scorer_ids, *(i for t in summary.turn_results
                                                     for i in (*(g.id for g in t.gate_results), *t.scores))]
        return [i for i in dict.fromkeys(ids) if i not in registered]

    def filters(self) -> dict[str, Any]:
        """The choices of the filters, with counts: statuses, failing gates and tags."""
        summary = self.result.summary
        gates = [*self.sources.plan.gate_ids,
                 *(f"turn {t.index}: {g.id}" for t in summary.turn_results for g in t.gate_results)]
        gates += [label for label in self.failing if label not in gates]
        return {"total": len(self.rows), "passed": self.statuses["passed"], "failed": self.statuses["failed"],
                "error": self.statuses["error"],
                "gates": [{"label": label, "count": self.failing[label]} for label in dict.fromkeys(gates)],
                "tags": [{"label": tag, "count": count} for tag, count in self.tags.items()]}

    def context(self) -> dict[str, Any]:
        """Everything the template reads."""
        sources, summary = self.sources, self.result.summary
        filters = self.filters()
        gate_refs = {g["label"]: str(n) for n, g in enumerate(filters["gates"])}
        tag_refs = {t["label"]: str(n) for n, t in enumerate(filters["tags"])}
        changes = sources.baseline.changes if sources.baseline else {}
        rows = [{"row": r, "tags": " ".join(tag_refs[t] for t in dict.fromkeys(r.tags)),
                 "gates": " ".join(gate_refs[g] for g in dict.fromkeys(r.failing)), "change": changes.get(r.id)}
                for r in self.rows]
        history_chart, history_notes = self.history_chart()
        redact = self.redact.value
        return {
            "run": redact(views.header(self.result, sources.row)), "usage": views.usage(sources.row, self.result.usage),
            "counts": {"total": len(self.rows), "passed": self.statuses["passed"], "failed": self.statuses["failed"],
                       "error": self.statuses["error"], "not_scorable": sum(summary.not_scorable.values())},
            "summary": redact(views.summary_view(summary, self.turn_misses)),
            "baseline": redact(views.baseline_view(sources.baseline, {r.id: r.position for r in self.rows}))
            if sources.baseline else None,
            "histograms": self.histograms(), "turn_chart": self.turn_chart(),
            "history_chart": history_chart, "history_notes": history_notes,
            "filters": redact(filters), "rows": rows, "scorer_ids": redact(self.scorer_ids),
            "transcripts": Markup("[" + ",".join(self.transcripts) + "]"),
            "css": asset("report.css"), "js": asset("report.js"), "nonce": token_urlsafe(18), "version": _version(),
        }

    def render(self) -> str:
        """The whole page; every secret the redactor knows is replaced, in the values and in the page."""
        return self.redact(environment().get_template("report.html.j2").render(self.context()))

    def write(self, path: Path) -> None:
        """Render and write the page (UTF-8; creating missing folders)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.render(), encoding="utf-8", errors="replace")


def _version() -> str:
    from ...version import __version__

    return __version__


def report_for_run(store: Store, result: RunResult, redact: Redactor) -> HtmlReport:
    """The HTML report of a run that just finished (``evalcli run --html``), ready to be fed its conversations."""
    return HtmlReport(result, report_sources(store, result.run_id), redact)
