"""Running planned runs as ``evalcli run`` does (docs/python-api.md): each run in turn on one event loop, each
reported once (its conversations read once, fed to every report), then the comparison of several targets and the
CI files. The caller shows what it wants through a ``Reporter`` (the CLI's prints the terminal report)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine, Generator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ..errors import ExitCode, UsageError
from ..records import record
from ..results import ItemResult, RunResult
from ..run import Events, Runner, RunPlan
from ..run.arguments import check_events, check_no_running_loop, check_store
from ..store import Store
from .outputs import open_for_writing
from .plans import Plans

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET

    from ..reports import JsonSpool, TerminalReport
    from ..reports.html import HtmlReport
    from ..store import Comparison

Step = Coroutine[Any, Any, RunResult]


class Reporter:
    """What a caller shows of the runs besides the files they write: a class of no-op methods, each overridden as
    needed (the CLI's prints every run's terminal report, the comparison of several targets, a store's failure)."""

    every_item: bool = False
    """Whether the ``terminal`` report reads every conversation (else only those that errored)."""

    def terminal(self, plan: RunPlan, result: RunResult) -> TerminalReport | None:
        """The run's terminal report, fed its conversations with the other reports and closed after them."""
        return None

    def reported(self, plan: RunPlan, result: RunResult) -> None:
        """The run's reports are written."""

    def compared(self, comparison: Comparison, run_ids: list[str]) -> None:
        """The runs of one dataset against several targets, side by side (after the last run)."""


@record(frozen=True)
class Runs:
    """What ``run_planned`` did: each run's result, in the plans' order (a plan that selected nothing has none),
    and the comparison of each dataset's runs when there were several targets."""

    results: tuple[RunResult, ...]
    comparisons: tuple[Comparison, ...] = ()

    @property
    def exit_code(self) -> ExitCode:
        """The worst of the runs' exit codes (0 when none ran)."""
        return ExitCode.worst(result.exit_code for result in self.results)


class RunsInterrupted(KeyboardInterrupt):
    """An interrupt outside the conversations (while a run was finished or reported): that run is marked
    interrupted and keeps what it stored; ``run_id`` is ``None`` when no run had started."""

    def __init__(self, run_id: str | None, dataset: str) -> None:
        super().__init__(f"interrupted while finishing run {run_id}" if run_id else "interrupted before any run")
        self.run_id = run_id
        self.dataset = dataset


class _Watched(Events):
    """The caller's events, remembering which run has started: an interrupt after its conversations still marks
    it."""

    def __init__(self, events: Events) -> None:
        self.events = events
        self.run_id: str | None = None

    def started(self, run_id: str, total: int, done: int) -> None:
        self.run_id = run_id
        self.events.started(run_id, total, done)

    def item_done(self, result: ItemResult) -> None:
        self.events.item_done(result)

    def item_kept(self, result: ItemResult) -> None:
        self.events.item_kept(result)

    def warning(self, text: str) -> None:
        self.events.warning(text)

    def notice(self, text: str | None) -> None:
        self.events.notice(text)

    def throttled(self, model: str, limit: int | None, ceiling: int) -> None:
        self.events.throttled(model, limit, ceiling)

    def stopping(self) -> None:
        self.events.stopping()

    def close(self) -> None:
        self.events.close()


class _Session:
    """One ``run_planned``: the runs in turn, each reported, then the comparison and the CI files."""

    def __init__(self, plans: Plans, store: Store | None, events: Events, reporter: Reporter,
                 json_stream: IO[str] | None, compare: bool) -> None:
        if store is None and any(plans.outputs.html):
            raise UsageError("an HTML report is read from the database", "give the runs a database (--db PATH)")
        self.plans, self.store, self.reporter, self.compare = plans, store, reporter, compare
        self.watched = _Watched(events)
        self.redact = plans.redactor
        self.stream = None
        if json_stream is not None:
            from ..reports import JsonStream

            self.stream = JsonStream(json_stream, several=len(plans.runs) > 1)
        self.current: RunPlan | None = None
        self.suites: list[tuple[Path | None, ET.Element]] = []
        self.sections: list[tuple[Path | None, str]] = []
        self.reported = self.interrupted = False

    def steps(self) -> Generator[Step, RunResult, Runs]:
        """Each run to make, as a coroutine whose result is sent back; the runs' outcome is returned."""
        results: list[RunResult] = []
        for note in (note for plan in self.plans.runs for note in plan.notes):
            self.watched.warning(note)
        for n, plan in enumerate(self.plans.runs):
            if not plan.items:
                self.watched.warning(plan.nothing or _empty_note(plan))
                continue
            self.current, self.watched.run_id = plan, None
            spool = None
            if self._spools(n):
                from ..reports import JsonSpool

                spool = JsonSpool(self.redact)
            with contextlib.closing(spool) if spool is not None else contextlib.nullcontext():
                if spool is not None:
                    plan = replace(plan, options=replace(plan.options, on_stored=spool.add))
                result = yield Runner(plan, self.store, self.watched).run()
                self.watched.close()
                results.append(result)
                self._report(n, plan, result, spool)
            if result.status == "interrupted":
                break
        if self.stream is not None:
            self.stream.close()
        comparisons = self._comparisons(results) if self.compare else ()
        self.reported = True
        self.write_ci_files()
        return Runs(tuple(results), comparisons)

    def _spools(self, n: int) -> bool:
        """Whether run ``n``'s JSON is rendered as its conversations are stored: it is the one report that reads
        every conversation, of a fresh run (a resumed one's kept conversations are not stored again)."""
        wanted = self.stream is not None or self.plans.outputs.json[n] is not None
        return wanted and self.store is not None and not self.plans.history and not self.reporter.every_item \
            and not self.plans.outputs.ci(n)

    def _report(self, n: int, plan: RunPlan, result: RunResult, spool: JsonSpool | None) -> None:
        """Read the run's conversations once and feed every report (the JSON from ``spool`` when it holds them all:
        nothing failed to be stored); keep its JUnit suite and Markdown section for the CI files. The reports' modules
        are imported here, after the run (the CLI's progress imports them on a thread once a conversation is done:
        docs/performance.md "Start-up and finish")."""
        from ..reports import JsonReport, deliver

        outputs, redact = self.plans.outputs, self.redact
        terminal = self.reporter.terminal(plan, result)
        junit = markdown = None
        if outputs.ci(n):  # the CI files' reports (and xml.etree) are imported only by a run that writes them
            from ..reports.ci import JUnitSuite, MarkdownSummary

            junit = JUnitSuite(result) if outputs.junit[n] else None
            markdown = MarkdownSummary(result) if outputs.markdown[n] or outputs.step_summary else None
        json_reports = [self.stream.report(result, redact)] if self.stream is not None else []
        json_path, html_path = outputs.json[n], outputs.html[n]
        html = _html_report(self.store, result, redact) if html_path is not None and self.store is not None else None
        spooled = spool if spool is not None and spool.usable and not result.store_error else None
        with contextlib.ExitStack() as files:
            if json_path is not None:
                json_reports.append(JsonReport(files.enter_context(open_for_writing(json_path)), result, redact))
            others = [r for r in (*(json_reports if spooled is None else []), junit, markdown, html) if r is not None]
            if others or self.reporter.every_item:
                deliver(self._items(result), [r for r in (terminal, *others) if r is not None])
            elif terminal is not None and result.summary.errors:
                deliver(self._items(result, errors_only=True), [terminal])
            for text in spooled.texts() if spooled is not None else ():
                for report in json_reports:
                    report.rendered(text)
            for report in json_reports:
                report.close()
        if html is not None and html_path is not None:
            html.write(html_path)
        if terminal is not None:
            terminal.close()
        self.reporter.reported(plan, result)
        if junit is not None:
            self.suites.append((outputs.junit[n], junit.close()))
        if markdown is not None:
            self.sections.append((outputs.markdown[n], markdown.close()))

    def _items(self, result: RunResult, errors_only: bool = False) -> Iterator[ItemResult]:
        """The run's conversations in dataset order: read back from the store, else as the run kept them."""
        if self.store is not None:
            return self.store.load_items(result.run_id, errors_only=errors_only)
        return iter([item for item in result.items or [] if not errors_only or item.status != "ok"])

    def _comparisons(self, results: list[RunResult]) -> tuple[Comparison, ...]:
        """After runs of several targets: per dataset, its runs side by side (docs/targets/index.md)."""
        if len(self.plans.targets) < 2 or self.store is None:
            return ()
        from ..store import compare_runs

        by_dataset: dict[str, list[str]] = {}
        for result in results:
            by_dataset.setdefault(result.dataset_path, []).append(result.run_id)
        found = []
        for run_ids in by_dataset.values():
            if len(run_ids) >= 2:
                comparison = compare_runs(self.store, run_ids)
                self.reporter.compared(comparison, run_ids)
                found.append(comparison)
        return tuple(found)

    def write_ci_files(self) -> None:
        """JUnit and Markdown files (one per run), and the step summary (appended) when there is one."""
        for path, suite in self.suites:
            if path is not None:
                from ..reports.ci import junit_document

                with open_for_writing(path) as handle:
                    handle.write(self.redact(junit_document([suite])))
        for path, text in self.sections:
            if path is not None:
                with open_for_writing(path) as handle:
                    handle.write(self.redact(text))
        summary = self.plans.outputs.step_summary
        if summary is not None and self.sections:
            with open(summary, "a", encoding="utf-8") as handle:
                handle.write(self.redact("\n".join(text for _, text in self.sections)))

    def drive(self, play: Callable[[Step], RunResult]) -> Runs:
        """Make the runs, ``play`` running each one to its result; an interrupt outside the conversations marks the
        run in progress interrupted (``RunsInterrupted``); after a failure the runs that finished are reported."""
        steps = self.steps()
        try:
            step = next(steps)
            while True:
                step = steps.send(play(step))
        except StopIteration as done:
            return self._done(done)
        except KeyboardInterrupt:
            raise self._interrupted() from None
        finally:
            self._close(steps)

    async def adrive(self) -> Runs:
        """``drive`` on the running event loop, each run awaited."""
        steps = self.steps()
        try:
            step = next(steps)
            while True:
                step = steps.send(await step)
        except StopIteration as done:
            return self._done(done)
        except KeyboardInterrupt:
            raise self._interrupted() from None
        finally:
            self._close(steps)

    @staticmethod
    def _done(done: StopIteration) -> Runs:
        runs: Runs = done.value
        return runs

    def _close(self, steps: Generator[Step, RunResult, Runs]) -> None:
        steps.close()
        if not (self.reported or self.interrupted):
            self.write_ci_files()

    def _interrupted(self) -> RunsInterrupted:
        self.interrupted = True
        self.watched.close()
        run_id = self.watched.run_id
        if self.store is not None and run_id is not None:
            self.store.mark_interrupted(run_id)
        return RunsInterrupted(run_id, self.current.dataset.path if self.current else "DATASET")


def run_planned(plans: Plans, *, store: Store | None = None, events: Events | None = None,
                reporter: Reporter | None = None, json_stream: IO[str] | None = None, compare: bool = True,
                loop: asyncio.Runner | None = None) -> Runs:
    """Make every planned run in turn on one event loop (``loop``, else one of its own), in ``store`` (else the
    plans' database, opened and closed here; neither: nothing is stored), each reported as it ends: its JSON,
    JUnit, Markdown and HTML files, ``json_stream`` (one JSON document for all), ``reporter``'s own; then with
    several targets each dataset's runs compared (``compare``), and the CI files written. An interrupt outside the
    conversations marks the run in progress interrupted and raises ``RunsInterrupted`` (a ``KeyboardInterrupt``)."""
    check_no_running_loop("run_planned", "arun_planned(plans, ...)")
    check_store(store)
    check_events(events)
    with _store(plans, store) as opened:
        session = _Session(plans, opened, events or Events(), reporter or Reporter(), json_stream, compare)
        if loop is not None:
            return session.drive(loop.run)
        with asyncio.Runner() as own:
            return session.drive(own.run)


async def arun_planned(plans: Plans, *, store: Store | None = None, events: Events | None = None,
                       reporter: Reporter | None = None, json_stream: IO[str] | None = None,
                       compare: bool = True) -> Runs:
    """``run_planned`` for code already inside an event loop: each run awaited in turn on the running loop."""
    check_store(store)
    check_events(events)
    with _store(plans, store) as opened:
        return await _Session(plans, opened, events or Events(), reporter or Reporter(), json_stream, compare).adrive()


@contextlib.contextmanager
def _store(plans: Plans, store: Store | None) -> Iterator[Store | None]:
    """The given store, or the plans' database opened for the runs (and closed after them)."""
    if store is not None or plans.db is None:
        yield store
        return
    opened = Store(plans.db, plans.redactor)
    try:
        yield opened
    finally:
        opened.close()


def _empty_note(plan: RunPlan) -> str:
    """Why a run that selected nothing is not made, when nothing else said so."""
    if plan.options.rerun_failed:
        return f"run {plan.options.rerun_failed} has no failed conversation of {plan.dataset.path}: nothing to re-run"
    from ..reports import plural

    shard = plan.options.selection.shard
    where = f"shard {shard[0]}/{shard[1]}" if shard else "the selection"
    return f"{where} of {plan.dataset.path} holds no conversation ({plural(len(plan.dataset.items), 'item')} in " \
           "all): nothing to run"


def _html_report(store: Store, result: RunResult, redact: Any) -> HtmlReport:
    from ..reports.html import report_for_run  # jinja2 is imported only when a run asks for HTML

    return report_for_run(store, result, redact)
