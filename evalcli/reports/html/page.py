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
from ..text import gate_rule, stability_words
from . import charts, views
from .conversation import Row, row, transcript
from .sources import ReportSources, report_sources

PER_TURN = " (per turn)"
PAGE_ROWS = 2_000
"""A run of more conversations lists on its page its failing ones first, then a sample of the rest
(docs/html-report.md#big-runs): 100,000 transcripts made a 197 MB page no browser opens."""
MAX_FAILING_ROWS = 10_000
"""Failing or errored conversations such a page lists at most (the first, in dataset order)."""
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
        self.total = max(result.completed, result.summary.total_items)
        self.every = max(1, -(-self.total // PAGE_ROWS))
        """Over ``PAGE_ROWS`` conversations the page lists every ``every``-th conversation that did not fail."""
        self.seen = 0
        self.listed: tuple[list[Row], list[Row]] = ([], [])
        """The rows the page lists: (failing or errored, the rest), each in dataset order; likewise ``transcripts``."""
        self.transcript_texts: tuple[list[str], list[str]] = ([], [])
        self.statuses: Counter[str] = Counter()
        self.tags: Counter[str] = Counter()
        self.failing: Counter[str] = Counter()
        self.turn_misses: dict[tuple[int, str], list[str]] = {}
        self.values: dict[str, list[float]] = {}
        self.not_scorable: Counter[str] = Counter()

    def item(self, item: ItemResult) -> None:
        """Take one conversation (in dataset order)."""
        line = row(0, item, self.scorer_ids)
        self.seen += 1
        failing = self.total > PAGE_ROWS and line.status != "passed"
        if (len(self.listed[0]) < MAX_FAILING_ROWS) if failing else (self.seen - 1) % self.every == 0:
            self.listed[0 if failing else 1].append(self._redacted(line))
            self.transcript_texts[0 if failing else 1].append(embedded_json(self.redact.value(transcript(item))))
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

    @property
    def rows(self) -> list[Row]:
        """The rows of the page's list, numbered: every conversation in dataset order, or over ``PAGE_ROWS`` the
        failing and errored ones (at most ``MAX_FAILING_ROWS``) first, then every ``every``-th of the rest."""
        failing, rest = self.listed
        return [replace(line, position=n) for n, line in enumerate([*failing, *rest])]

    def left_out(self) -> str:
        """What a page that does not list every conversation says about the ones it leaves out ("" when none)."""
        shown = len(self.listed[0]) + len(self.listed[1])
        if shown >= self.seen:
            return ""
        failing = self.statuses["failed"] + self.statuses["error"]
        rest = self.seen - failing
        first = f"all {failing:,}" if len(self.listed[0]) == failing else f"the first {len(self.listed[0]):,} of {failing:,}"
        return (f"This page lists {shown:,} of {self.seen:,} conversations: {first} failing or errored "
                f"conversation{'s' if failing != 1 else ''} first, then of the other {rest:,} those at every {_nth(self.every)} "
                f"place in dataset order ({len(self.listed[1]):,}); {self.seen - shown:,} are left out. Any "
                f"conversation: evalcli show {self.result.run_id} ITEM; all of them: evalcli show "
                f"{self.result.run_id} --json -")

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
        shown = len(self.listed[0]) + len(self.listed[1])
        return {"total": shown, "passed": self.statuses["passed"], "failed": self.statuses["failed"],
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
        listed = self.rows
        rows = [{"row": r, "tags": " ".join(tag_refs[t] for t in dict.fromkeys(r.tags)),
                 "gates": " ".join(gate_refs[g] for g in dict.fromkeys(r.failing)), "change": changes.get(r.id)}
                for r in listed]
        history_chart, history_notes = self.history_chart()
        redact = self.redact.value
        return {
            "run": redact(views.header(self.result, sources.row)), "usage": views.usage(sources.row, self.result.usage),
            "counts": {"total": self.seen, "passed": self.statuses["passed"], "failed": self.statuses["failed"],
                       "error": self.statuses["error"], "not_scorable": sum(summary.not_scorable.values())},
            "summary": redact(views.summary_view(summary, self.turn_misses)), "gate_rule": gate_rule(self.result),
            "stability": stability_words(self.result),
            "baseline": redact(views.baseline_view(sources.baseline, {r.id: r.position for r in listed}))
            if sources.baseline else None,
            "histograms": self.histograms(), "turn_chart": self.turn_chart(),
            "history_chart": history_chart, "history_notes": history_notes,
            "filters": redact(filters), "rows": rows, "scorer_ids": redact(self.scorer_ids),
            "transcripts": Markup("[" + ",".join([*self.transcript_texts[0], *self.transcript_texts[1]]) + "]"),
            "left_out": self.left_out(),
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


def _nth(n: int) -> str:
    """``50th``, ``2nd``, ``21st``; 1 is "one"."""
    if n == 1:
        return "one"
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
