"""What each CLI command does, as plain functions over the library (the CLI only parses and prints)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from ..dataset import Dataset, Selection, check_filter, load_dataset, parse_shard
from ..errors import EXIT_PRECEDENCE, DatasetError, Problem, UsageError
from ..llm import check_settings, parse_budget
from ..reports import (
    JsonReport,
    JsonSpool,
    JsonStream,
    JUnitSuite,
    MarkdownSummary,
    TerminalReport,
    deliver,
    interrupted_line,
    junit_document,
    plural,
)
from ..results import ItemResult, RunResult
from ..run import INTERRUPTED, Events, RunOptions, arun_evals, check_budgets, rerun_selection, resume_options
from ..secrets import Redactor
from ..store import Store
from ..targets import cli_target
from ..tools import tape_path
from .console import make_console
from .outputs import check_outputs, check_tapes, open_for_writing, per_run, stdout_for_json, tape_names

if TYPE_CHECKING:
    from ..otel.export import Exporter
    from ..reports.html import HtmlReport


@dataclass
class DatasetsRequest:
    """What every command that runs datasets is asked: the datasets and the database, the registry, the JSON output,
    and how much runs at once (``evalcli run`` and ``evalcli calibrate``)."""

    datasets: list[Path]
    db: Path
    scorers: Path | None = None
    json_out: str | None = None
    concurrency: int | None = None
    judge_concurrency: int = 8
    use_cache: bool = True


@dataclass
class RunRequest(DatasetsRequest):
    """Everything ``evalcli run`` was asked to do."""

    junit: Path | None = None
    markdown: Path | None = None
    html: Path | None = None
    strict: bool = False
    max_errors: int | None = None
    """``None``: not given (0, or on ``--resume`` the run's own)."""
    filter: str | None = None
    limit: int | None = None
    shard: str | None = None
    repeat: int | None = None
    """``None``: not given (1, or on ``--resume`` the run's own)."""
    turn_timeout: float | None = None
    resume: str | None = None
    rerun_failed: str | None = None
    quiet: bool = False
    verbose: bool = False
    targets: list[str] = field(default_factory=list)
    """``--target SPEC`` (repeatable): each replaces the datasets' own target, one run per target."""
    record_tools: Path | None = None
    """``--record-tools DIR``: every tool call to ``DIR/<dataset stem>.tape.jsonl``."""
    otel_endpoint: str | None = None
    """``--otel-endpoint URL``: the run as spans to an OTLP/HTTP receiver (``-``: the environment's; docs/otel.md)."""
    otel_file: Path | None = None
    """``--otel-file PATH``: the run as spans, appended to an OTLP JSON file (docs/otel.md)."""
    hermetic: bool = False
    max_cost: str | None = None
    """``--max-cost``, as written (``5`` or ``judge=2,target=3``)."""
    max_tokens: str | None = None


@dataclass(frozen=True)
class Planned:
    """One run to make: a validated dataset, and the ``--target`` it was loaded with (``None``: its own)."""

    dataset: Dataset
    target: str | None


@dataclass
class Outputs:
    """The files a run writes, per dataset (checked writable before anything runs)."""

    json: list[Path | None]
    junit: list[Path | None]
    markdown: list[Path | None]
    html: list[Path | None]
    tapes: list[str | None] = field(default_factory=list)
    """Each run's ``--record-tools`` tape name (``None``: its dataset's stem)."""

    @classmethod
    def plan(cls, request: RunRequest) -> Outputs:
        """Each report's path per run (one run per dataset and ``--target``, in the order ``load_all`` gives them),
        all of them and the database checked at once."""
        targets: list[str | None] = [*request.targets] or [None]
        runs = [(path, target) for path in request.datasets for target in targets]

        def paths(value: Path | None) -> list[Path | None]:
            return [None] * len(runs) if value is None else list(per_run(value, runs))

        json_path = Path(request.json_out) if request.json_out and request.json_out != "-" else None
        outputs = cls(paths(json_path), paths(request.junit), paths(request.markdown), paths(request.html),
                      tape_names(runs))
        check_outputs([(what, path) for what, chosen in outputs.named() for path in chosen if path is not None],
                      db=("--db", request.db))
        return outputs

    def named(self) -> list[tuple[str, list[Path | None]]]:
        """(option, its path per run) of each report."""
        return [("--json", self.json), ("--junit", self.junit), ("--markdown", self.markdown), ("--html", self.html)]


def load_all(paths: list[Path], scorers: Path | None, targets: list[str] | None = None) -> list[Planned]:
    """Validate every dataset (once per ``--target``, when given) before running any; every problem of every file
    in one error."""
    parsed: list[tuple[str | None, str | dict[str, Any] | None]] = [(t, cli_target(t)) for t in targets or []]
    runs: list[Planned] = []
    problems: list[Problem] = []
    for path in paths:
        for label, target in parsed or [(None, None)]:
            try:
                dataset = load_dataset(path, str(scorers) if scorers else None, target=target, target_label=label)
                runs.append(Planned(dataset, label))
            except DatasetError as exc:
                problems.extend(p for p in exc.problems if p not in problems)  # a shared registry's, once
    if problems:
        raise DatasetError(problems)
    return runs


def combine_exit_codes(codes: list[int]) -> int:
    """One exit code for several runs: the worst wins, in ``EXIT_PRECEDENCE``'s order."""
    return next((code for code in EXIT_PRECEDENCE if code in codes), 0)


def check_request(request: RunRequest) -> None:
    """Flags that cannot go together, and a database that cannot be opened where asked."""
    if request.quiet and request.verbose:
        raise UsageError("--quiet and --verbose cannot be used together", "choose one")
    if request.resume and len(request.datasets) != 1:
        raise UsageError("--resume continues one run: name exactly one dataset", "evalcli run DATASET --resume RUN_ID")
    if request.resume and request.rerun_failed:
        raise UsageError("--resume and --rerun-failed cannot be used together", "choose one")
    if len(request.targets) > 1 and (request.resume or request.rerun_failed):
        flag = "--resume" if request.resume else "--rerun-failed"
        raise UsageError(f"{flag} continues one run, of one target: give at most one --target",
                         f"evalcli run DATASET --target SPEC {flag} RUN_ID")
    if len(set(request.targets)) < len(request.targets):
        repeated = next(t for t in request.targets if request.targets.count(t) > 1)
        raise UsageError(f"--target {repeated} is given twice", "name each target once")
    check_filter(request.filter)
    if request.shard:
        parse_shard(request.shard)
    check_backend()
    _budget(request.max_cost, "--max-cost", False)
    _budget(request.max_tokens, "--max-tokens", True)


def check_backend() -> None:
    """``EVALCLI_LLM_BACKEND``, checked before anything runs."""
    from ..llm import backend_from_env

    backend_from_env()


def _options(request: RunRequest, store: Store | None, dataset: Dataset, events: Events,
             tape_name: str | None = None) -> RunOptions:
    selection = Selection(request.filter, parse_shard(request.shard) if request.shard else None, request.limit)
    options = RunOptions(concurrency=request.concurrency, judge_concurrency=request.judge_concurrency,
                         use_cache=request.use_cache, strict=request.strict, max_errors=request.max_errors or 0,
                         selection=selection, turn_timeout=request.turn_timeout, keep_items=False, handle_signals=True,
                         repeat=request.repeat or 1, max_cost=_budget(request.max_cost, "--max-cost", False),
                         max_tokens=_budget(request.max_tokens, "--max-tokens", True), hermetic=request.hermetic,
                         record_tools=str(request.record_tools) if request.record_tools else None,
                         tape_name=tape_name)
    if request.rerun_failed and store is not None:
        options.only_indexes, gone = rerun_selection(store, request.rerun_failed, dataset)
        if gone:
            events.warning(f"{plural(gone, 'failed conversation')} of run {request.rerun_failed} "
                           f"{'is' if gone == 1 else 'are'} no longer in {dataset.path} (by identity: an edited or "
                           f"removed item is another conversation); re-running the {len(options.only_indexes)} "
                           "that still exist")
    if request.resume and store is not None:
        given = {"filter": request.filter, "shard": selection.shard, "limit": request.limit, "repeat": request.repeat,
                 "strict": True if request.strict else None, "max_errors": request.max_errors}
        options = resume_options(store, request.resume, dataset, options,
                                 {name: value for name, value in given.items() if value is not None})
    check_budgets(dataset, options)
    return options


def _budget(text: str | None, option: str, whole: bool) -> dict[str | None, float]:
    if text is None:
        return {}
    try:
        return parse_budget(text, option, whole)
    except ValueError as exc:
        raise UsageError(str(exc), "see evalcli run --help") from None


def _selected(dataset: Dataset, options: RunOptions) -> tuple[int, str | None]:
    """How many conversations the options select, and why none when none (``None``: an empty shard)."""
    selection = options.selection
    items = dataset.items
    if options.only_indexes is not None:
        items = [i for i in items if i.index in options.only_indexes]
        if not items:
            return 0, None
    if selection.filter and not Selection(filter=selection.filter).apply(items):
        return 0, f"--filter '{selection.filter}' matches no conversation of {dataset.path} (it searches ids, " \
                  "tags and first inputs)"
    if selection.limit == 0:
        return 0, "--limit 0 selects no conversation"
    return len(selection.apply(items)), None


class _Watched:
    """The command's events, remembering the run in progress: an interrupt that comes after its conversations
    (while it is finished or reported) still marks that run."""

    def __init__(self, events: Events, exporter: Exporter | None = None) -> None:
        self.events = events
        self.run_id: str | None = None
        self.exporter = exporter
        """``--otel-file`` / ``--otel-endpoint``: collects each conversation as it finishes."""

    def started(self, run_id: str, total: int, done: int) -> None:
        self.run_id = run_id
        self.events.started(run_id, total, done)

    def item_done(self, result: ItemResult) -> None:
        if self.exporter is not None:
            self.exporter.add(result)
        self.events.item_done(result)

    def notice(self, text: str | None) -> None:
        notice = getattr(self.events, "notice", None)
        if notice is not None:
            notice(text)

    def throttled(self, model: str, limit: int | None, ceiling: int) -> None:
        throttled = getattr(self.events, "throttled", None)
        if throttled is not None:
            throttled(model, limit, ceiling)

    def warning(self, text: str) -> None:
        self.events.warning(text)

    def stopping(self) -> None:
        self.events.stopping()

    def close(self) -> None:
        close = getattr(self.events, "close", None)
        if close:
            close()


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM interrupts the command as Ctrl-C does (the runner handles both during the conversations), and the
    first interrupt holds every later one; the handlers found are put back when the command is done, unless it
    was interrupted (then it exits 130, its last words included)."""
    def interrupt(signum: int, frame: object) -> None:
        _hold_signals()  # the first interrupt is the one: the next ones never cut into its handling
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGINT, interrupt), signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGTERM) is not _held:
            signal.signal(signal.SIGINT, previous[0])
            signal.signal(signal.SIGTERM, previous[1])
        else:  # interrupted: the process exits 130 now; ignored, as Python's shutdown would reset a handler of its own
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, signal.SIG_IGN)


def _hold_signals() -> None:
    """Once interrupted, further SIGINT/SIGTERM are ignored: the command says so and exits 130, never killed half-way
    (nor while the interpreter shuts down)."""
    with contextlib.suppress(ValueError):  # not the main thread: leave signals alone
        # a handler that does nothing rather than SIG_IGN: a signal already on its way finds a handler to run
        signal.signal(signal.SIGINT, _held)
        signal.signal(signal.SIGTERM, _held)


def _held(signum: int, frame: object) -> None:
    """An interrupt after the first: the command is already stopping."""


def run_command(request: RunRequest, events: Events, out: Console) -> int:
    """``evalcli run``: validate all, check every output, run each dataset (once per ``--target``), report each, and
    with several targets compare them; the combined exit code."""
    check_request(request)
    check_settings()
    outputs = Outputs.plan(request)
    runs = load_all(request.datasets, request.scorers, request.targets)
    if request.record_tools is not None:
        check_tapes([tape_path(request.record_tools, r.dataset.path, outputs.tapes[n]) for n, r in enumerate(runs)],
                    [Path(tape) for r in runs for tape in r.dataset.replayed_tapes])
    gc.freeze()  # what loading made lives as long as the command: the collector need not walk it again in the run
    redact = Redactor(extra=set().union(*(r.dataset.secret_values for r in runs)))
    history = request.resume or request.rerun_failed
    # a run that continues or re-runs another needs its database; otherwise nothing is created before the
    # selection is known to hold a conversation
    store = Store(request.db, redact) if history else None
    watched = _Watched(events, _exporter(request, redact))
    with _sigterm_interrupts():
        return _run_all(request, events, out, outputs, runs, redact, history, store, watched)


def _run_all(request: RunRequest, events: Events, out: Console, outputs: Outputs, runs: list[Any], redact: Redactor,
             history: Any, store: Store | None, watched: _Watched) -> int:
    """``run_command``'s runs and reports, under its signal handling: an interrupt while the runs are finished or
    reported marks the run interrupted and exits 130, and from then on further signals wait (SPEC §22)."""
    codes: list[int] = []
    suites: list[tuple[Path | None, ET.Element]] = []
    sections: list[tuple[Path | None, str]] = []
    finished: list[tuple[Dataset, str]] = []
    current: Dataset | None = None
    interrupted = reported = False
    try:
        plans = [(r.dataset, _options(request, store, r.dataset, events, outputs.tapes[n])) for n, r in enumerate(runs)]
        counts = [_selected(d, o) for d, o in plans]
        reasons = [why for n, why in counts if why]
        if reasons and sum(n for n, _ in counts) == 0:
            raise UsageError(reasons[0], "loosen --filter or --limit; nothing was run or stored")
        store = store or Store(request.db, redact)
        # one event loop for every dataset: clients a framework keeps per process stay bound to a live loop
        with stdout_for_json(request.json_out == "-") as stdout, asyncio.Runner() as loop:
            stream = JsonStream(stdout, several=len(runs) > 1) if stdout is not None else None
            for n, ((dataset, options), (count, why)) in enumerate(zip(plans, counts, strict=True)):
                if count == 0:
                    events.warning(why or _empty_note(request, dataset))
                    continue
                current, watched.run_id = dataset, None
                # a fresh run whose JSON is the one report needing every conversation renders it as it goes
                spool = JsonSpool(redact) if (stream is not None or outputs.json[n] is not None) and not history \
                    and not _reads_every_item(request, outputs, n) else None
                with contextlib.closing(spool) if spool is not None else contextlib.nullcontext():
                    if spool is not None:
                        options = replace(options, on_stored=spool.add)
                    result = loop.run(arun_evals(dataset, store=store, options=options, events=watched))
                    watched.close()
                    if watched.exporter is not None:
                        watched.exporter.finish(result, dataset.path)
                    codes.append(result.exit_code)
                    finished.append((dataset, result.run_id))
                    suite, section = _report(request, result, dataset, store, out, redact, outputs, n, stream,
                                             spool)
                if suite is not None:
                    suites.append((outputs.junit[n], suite))
                if section is not None:
                    sections.append((outputs.markdown[n], section))
                if result.status == "interrupted":
                    break
            if stream is not None:
                stream.close()
        if len(request.targets) > 1 and not request.quiet:
            _compare_targets(store, finished, out, request.db)
        reported = True
        _write_ci_reports(suites, sections, redact)
    except KeyboardInterrupt:
        # Ctrl-C or SIGTERM outside the conversations (finishing the run, writing reports): the run in progress is
        # marked interrupted and the command exits 130, as an interrupt during the conversations does; a second
        # signal while that is done waits (never a kill half-way through marking the run)
        _hold_signals()
        interrupted = True
        watched.close()
        codes.append(INTERRUPTED)
        if store is not None and watched.run_id is not None:
            store.mark_interrupted(watched.run_id)
        out.print(interrupted_line(watched.run_id, current.path if current else "DATASET", str(request.db)),
                  soft_wrap=True)
    finally:
        if store is not None:
            store.close()
        if not (reported or interrupted):  # after a failure, the runs that finished are still reported
            _write_ci_reports(suites, sections, redact)
    return combine_exit_codes(codes)


def _exporter(request: RunRequest, redact: Redactor) -> Exporter | None:
    """The run's OpenTelemetry export, when asked for (docs/otel.md); the endpoint is checked before anything runs."""
    if request.otel_endpoint is None and request.otel_file is None:
        return None
    from ..otel.endpoint import traces_url
    from ..otel.export import Exporter

    url = None
    if request.otel_endpoint is not None:
        url = traces_url(None if request.otel_endpoint == "-" else request.otel_endpoint)
        if url is None:
            raise UsageError("--otel-endpoint -: OTEL_EXPORTER_OTLP_ENDPOINT is not set",
                             "give the receiver's URL, e.g. --otel-endpoint http://localhost:6006")
    if request.otel_file is not None and request.otel_file.is_dir():
        raise UsageError(f"--otel-file {request.otel_file} is a directory", "give a file path, e.g. run.otlp.jsonl")
    return Exporter(redact, request.otel_file, url)


def _compare_targets(store: Store, finished: list[tuple[Dataset, str]], out: Console, db: Path) -> None:
    """After runs of several targets: per dataset, its runs side by side (SPEC §17)."""
    from ..reports import comparison_table
    from ..store import compare_runs

    by_dataset: dict[str, list[str]] = {}
    for dataset, run_id in finished:
        by_dataset.setdefault(dataset.path, []).append(run_id)
    for run_ids in by_dataset.values():
        if len(run_ids) < 2:
            continue
        out.print(comparison_table(compare_runs(store, run_ids)))
        where = f" --db {db}" if str(db) != "evalcli.db" else ""
        out.print(f"conversations whose gates differ: evalcli compare {' '.join(run_ids)}{where}", style="dim",
                  markup=False, soft_wrap=True)


def _empty_note(request: RunRequest, dataset: Dataset) -> str:
    if request.rerun_failed:
        return f"run {request.rerun_failed} has no failed conversation of {dataset.path}: nothing to re-run"
    return f"shard {request.shard} of {dataset.path} holds no conversation ({plural(len(dataset.items), 'item')} " \
           "in all): nothing to run"


def _reads_every_item(request: RunRequest, outputs: Outputs, n: int) -> bool:
    """Whether a report besides the JSON reads every conversation of run ``n`` back (``--quiet`` alone reads only
    those that errored)."""
    return not request.quiet or any(o[n] is not None for o in (outputs.junit, outputs.markdown, outputs.html)) \
        or bool(os.environ.get("GITHUB_STEP_SUMMARY"))


def _report(request: RunRequest, result: RunResult, dataset: Dataset, store: Store, out: Console, redact: Redactor,
            outputs: Outputs, n: int, stream: JsonStream | None,
            spool: JsonSpool | None = None) -> tuple[ET.Element | None, str | None]:
    """Read the run's conversations once and feed every report (the JSON from ``spool``, when it holds them all:
    nothing failed to be stored or kept); returns its JUnit suite and Markdown section."""
    terminal = TerminalReport(out, result, [s.id for s in dataset.scorers], [g.id for g in dataset.gates],
                              verbose=request.verbose, quiet=request.quiet, db_path=str(request.db))
    junit = JUnitSuite(result) if outputs.junit[n] else None
    markdown = MarkdownSummary(result) if outputs.markdown[n] or os.environ.get("GITHUB_STEP_SUMMARY") else None
    json_reports = [stream.report(result, redact)] if stream is not None else []
    json_path, html_path = outputs.json[n], outputs.html[n]
    html = _html_report(store, result, redact) if html_path is not None else None
    spooled = spool if spool is not None and spool.usable and not result.store_error else None
    with contextlib.ExitStack() as files:
        if json_path is not None:
            json_reports.append(JsonReport(files.enter_context(open_for_writing(json_path)), result, redact))
        reports = [r for r in (terminal, *(json_reports if spooled is None else []), junit, markdown, html) if r is not None]
        if len(reports) > 1 or not request.quiet:
            deliver(store.load_items(result.run_id), reports)
        elif result.summary.errors:
            deliver(store.load_items(result.run_id, errors_only=True), reports)  # --quiet: the verdict and errors
        if spooled is not None:
            for text in spooled.texts():
                for report in json_reports:
                    report.rendered(text)
        for report in json_reports:
            report.close()
    if html is not None and html_path is not None:
        html.write(html_path)
    terminal.close()
    if result.store_error:
        make_console(stderr=True).print(
            f"error: the database {request.db} could not store all of run {result.run_id}: {result.store_error}\n"
            "  hint: the verdict and exit code are the run's own; the stored run, and reports read from it, may miss "
            "conversations (check the disk and the file's permissions)", style="red", markup=False, soft_wrap=True)
    return (junit.close() if junit else None), (markdown.close() if markdown else None)


def _html_report(store: Store, result: RunResult, redact: Redactor) -> HtmlReport:
    from ..reports.html import report_for_run  # jinja2 is imported only when a run asks for HTML

    return report_for_run(store, result, redact)


def _write_ci_reports(suites: list[tuple[Path | None, ET.Element]], sections: list[tuple[Path | None, str]],
                      redact: Redactor) -> None:
    """JUnit and Markdown files (one per dataset), and the GitHub step summary (appended) when set."""
    for path, suite in suites:
        if path is not None:
            with open_for_writing(path) as handle:
                handle.write(redact(junit_document([suite])))
    for path, text in sections:
        if path is not None:
            with open_for_writing(path) as handle:
                handle.write(redact(text))
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary and sections:
        with open(step_summary, "a", encoding="utf-8") as handle:
            handle.write(redact("\n".join(text for _, text in sections)))
