"""``evalcli run`` as a plain function: the request becomes ``RunOptions``, the library plans the runs
(``plan_runs``: every check, once) and makes them (``run_planned``: reports, comparison, CI files); this module
shows them on the terminal and turns an interrupt into exit 130 (docs/python-api.md)."""

from __future__ import annotations

import contextlib
import gc
import os
import signal
from collections.abc import Callable, Iterator
from dataclasses import field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..dataset import Selection, parse_shard
from ..dbname import db_option
from ..errors import ExitCode, UsageError
from ..evaluate import Reporter, RunsInterrupted, check_not_read, plan_runs, run_planned
from ..llm import parse_budget
from ..records import record
from ..results import RunResult
from ..run import Events, RunOptions, RunPlan
from ..run.options import check_pass_rate, interrupting_signals, parse_repeat
from ..run.worker_checks import parse_workers
from .console import make_console
from .outputs import stdout_for_json

if TYPE_CHECKING:
    from rich.console import Console

    from ..evaluate import Plans
    from ..reports import TerminalReport
    from ..reports.otel import Exporter
    from ..store import Comparison


YOUNG_OBJECTS = 10_000
"""Allocations between two collections of the youngest generation during a run (Python's default: 700)."""


@record
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


@record
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
    workers: str | None = None
    """``--workers N|auto`` as written; ``None``: one process."""
    repeat: str | None = None
    """``N``, ``auto`` or ``auto:MAX`` as written; ``None``: not given (1, or on ``--resume`` the run's own)."""
    pass_rate: float | None = None
    """``--pass-rate``; ``None``: not given (1.0, or on ``--resume`` the run's own)."""
    turn_timeout: float | None = None
    resume: str | None = None
    rerun_failed: str | None = None
    quiet: bool = False
    verbose: bool = False
    targets: list[str] = field(default_factory=list)
    """``--target TARGET`` (repeatable): each replaces the datasets' own target, one run per target."""
    record_tools: Path | None = None
    """``--record-tools DIR``: every tool call to ``DIR/<dataset stem>.tape.jsonl``."""
    hermetic: bool = False
    otel_endpoint: str | None = None
    """``--otel-endpoint URL``: the run as spans to an OTLP/HTTP receiver (``-``: the environment's; docs/otel.md)."""
    otel_file: Path | None = None
    """``--otel-file PATH``: the run as spans, appended to an OTLP JSON file (docs/otel.md)."""
    max_cost: str | None = None
    """``--max-cost``, as written (``5`` or ``judge=2,target=3``)."""
    max_tokens: str | None = None


def check_request(request: RunRequest) -> None:
    """Flags of the command's own that cannot go together (the library checks the rest)."""
    if request.quiet and request.verbose:
        raise UsageError("--quiet and --verbose cannot be used together", "choose one")
    if request.pass_rate is None or request.resume is not None:
        return  # a resume restores the run's own repeats (docs/verdicts.md#repeats-and-the-pass-rate)
    check_pass_rate(request.pass_rate)
    repeat, sequential = parse_repeat(request.repeat) if request.repeat is not None else (1, False)
    if repeat <= 1 and not sequential:  # a conversation played once passes a gate by its score
        raise UsageError(f"--pass-rate {request.pass_rate:g} without --repeat: it decides among a conversation's "
                         "repeated plays, and each conversation is played once (its gates need a mean of 1.0)",
                         "add --repeat 5 or --repeat auto, or leave --pass-rate out")


def run_options(request: RunRequest) -> tuple[RunOptions, dict[str, Any]]:
    """The request as ``RunOptions`` (``--shard`` and the budgets parsed), and the options given explicitly by name
    (what a resumed run's own options must not contradict)."""
    selection = Selection(request.filter, parse_shard(request.shard) if request.shard else None, request.limit)
    repeat, sequential = parse_repeat(request.repeat) if request.repeat is not None else (1, False)
    options = RunOptions(concurrency=request.concurrency, judge_concurrency=request.judge_concurrency,
                         use_cache=request.use_cache, strict=request.strict, max_errors=request.max_errors or 0,
                         selection=selection, turn_timeout=request.turn_timeout, resume=request.resume,
                         rerun_failed=request.rerun_failed, keep_items=False, handle_signals=True,
                         repeat=repeat, sequential=sequential,
                         pass_rate=1.0 if request.pass_rate is None else request.pass_rate,
                         max_cost=_budget(request.max_cost, "--max-cost", False),
                         max_tokens=_budget(request.max_tokens, "--max-tokens", True), hermetic=request.hermetic,
                         record_tools=str(request.record_tools) if request.record_tools else None,
                         workers=parse_workers(request.workers) if request.workers is not None else 1)
    given = {"filter": request.filter, "shard": selection.shard, "limit": request.limit,
             "repeat": repeat if request.repeat is not None else None,
             "sequential": sequential if request.repeat is not None else None, "pass_rate": request.pass_rate,
             "strict": True if request.strict else None, "max_errors": request.max_errors,
             "hermetic": True if request.hermetic else None}
    return options, {name: value for name, value in given.items() if value is not None}


def _budget(text: str | None, option: str, whole: bool) -> dict[str | None, float]:
    if text is None:
        return {}
    try:
        return parse_budget(text, option, whole)
    except ValueError as exc:
        raise UsageError(str(exc), "see evalcli run --help") from None


class TerminalReporter(Reporter):
    """What ``evalcli run`` prints of each run (the table, the verdict; every conversation with ``--verbose``, only
    the errored ones with ``--quiet``), a store that could not keep a run, and the comparison of several targets."""

    def __init__(self, request: RunRequest, out: Callable[[], Console], exporter: Exporter | None = None) -> None:
        self.request = request
        self._out = out
        self.every_item = not request.quiet
        self.exporter = exporter
        """``--otel-file`` / ``--otel-endpoint``: each run written as spans once reported (docs/otel.md)."""

    @cached_property
    def out(self) -> Console:
        """The console the runs are reported on, made when first printed to: rich is not imported before the first
        turn (docs/performance.md "Start-up and finish")."""
        return self._out()

    def terminal(self, plan: RunPlan, result: RunResult) -> TerminalReport:
        from ..reports import TerminalReport  # after the run: docs/performance.md "Start-up and finish"

        dataset, request = plan.dataset, self.request
        return TerminalReport(self.out, result, [s.id for s in dataset.scorers], [g.id for g in dataset.gates],
                              verbose=request.verbose, quiet=request.quiet, db_path=str(request.db))

    def reported(self, plan: RunPlan, result: RunResult) -> None:
        if self.exporter is not None:
            from ..reports.otel import ExportFailed

            try:
                self.exporter.finish(result, plan.dataset.path)
            except ExportFailed as failed:  # the run is stored and its exit code stands (docs/otel.md)
                for problem in failed.problems:
                    make_console(stderr=True).print(
                        f"warning: run {failed.run_id} was not exported: {problem}\n  (the run is stored in "
                        f"{self.request.db}; its verdict and exit code are its own)",
                        style="yellow", markup=False, soft_wrap=True)
        if result.tape_error:
            make_console(stderr=True).print(
                f"error: --record-tools could not write the tape {result.tape_error}\n  hint: the verdict and exit "
                "code are the run's own, and a tape that was there is left as it was; record it again into a folder "
                f"you can write: evalcli run {plan.dataset.path} --record-tools DIR",
                style="red", markup=False, soft_wrap=True)
        if result.store_error:
            make_console(stderr=True).print(
                f"error: the database {self.request.db} could not store all of run {result.run_id}: "
                f"{result.store_error}\n  hint: the verdict and exit code are the run's own; the stored run, and "
                "reports read from it, may miss conversations (check the disk and the file's permissions)",
                style="red", markup=False, soft_wrap=True)

    def compared(self, comparison: Comparison, run_ids: list[str]) -> None:
        from ..reports import comparison_table

        self.out.print(comparison_table(comparison))
        self.out.print(f"conversations whose gates differ: evalcli compare {' '.join(run_ids)}"
                       f"{db_option(self.request.db)}", style="dim", markup=False, soft_wrap=True)


def run_command(request: RunRequest, events: Events, out: Callable[[], Console]) -> int:
    """``evalcli run``: plan every dataset (once per ``--target``) with its outputs, make the runs with the
    terminal's report (on the console ``out`` makes when first printed to), and exit with the worst of their codes
    (130 when interrupted)."""
    check_request(request)
    options, given = run_options(request)
    plans = plan_runs(request.datasets, options, targets=request.targets, scorers=request.scorers, db=request.db,
                      given=given, json=request.json_out if request.json_out != "-" else None, junit=request.junit,
                      markdown=request.markdown, html=request.html,
                      step_summary=os.environ.get("GITHUB_STEP_SUMMARY") or None)
    exporter = _exporter(request, plans)
    if exporter is not None:
        from ..reports.otel import ExportEvents

        events = ExportEvents(events, exporter)
    gc.freeze()  # what loading made lives as long as the command: the collector need not walk it again in the run
    # a conversation in flight holds a few hundred young objects, 64 at a time: at the default threshold (700) the
    # collector walked them again every few turns (6% of a zero-latency run's CPU); reference counting frees
    # them, and only cycles wait for the next collection (docs/performance.md)
    gc.set_threshold(YOUNG_OBJECTS, *gc.get_threshold()[1:])
    gc.enable()  # `evalcli run` collects nothing before (evalcli.cli.main): the little garbage made so far is frozen
    reporter = TerminalReporter(request, out, exporter)
    with _sigterm_interrupts():
        try:
            with stdout_for_json(request.json_out == "-") as stdout:
                runs = run_planned(plans, events=events, reporter=reporter, json_stream=stdout,
                                   compare=not request.quiet)
        except RunsInterrupted as stop:
            # Ctrl-C or SIGTERM outside the conversations (finishing a run, writing reports): the run in progress is
            # marked interrupted and the command exits 130, as an interrupt during the conversations does
            _hold_signals()
            from ..reports import interrupted_line

            reporter.out.print(interrupted_line(stop.run_id, stop.dataset, str(request.db)), soft_wrap=True)
            return ExitCode.INTERRUPTED
        if runs.exit_code == ExitCode.INTERRUPTED:
            # interrupted during the conversations (the runner's handler took it, not this command's): a second
            # interrupt as the process exits is held too, or it met the default handler Python's shutdown puts
            # back and killed the process (by SIGINT, not exit 130)
            _hold_signals()
    return runs.exit_code


def _exporter(request: RunRequest, plans: Plans) -> Exporter | None:
    """The runs' OpenTelemetry export, when asked for (docs/otel.md), checked before anything runs (its modules are
    imported only then)."""
    if request.otel_endpoint is None and request.otel_file is None:
        return None
    from ..otel.endpoint import check as check_endpoint
    from ..otel.endpoint import traces_url
    from ..reports.otel import Exporter

    url = None
    if request.otel_endpoint is not None:
        url = traces_url(None if request.otel_endpoint == "-" else request.otel_endpoint)
        if url is None:
            raise UsageError("--otel-endpoint -: OTEL_EXPORTER_OTLP_ENDPOINT is not set",
                             "give the receiver's URL, e.g. --otel-endpoint http://localhost:6006")
        check_endpoint(url, from_env=request.otel_endpoint == "-")
    if request.otel_file is not None and str(request.otel_file) == "-":  # never a file named "-" in the folder
        raise UsageError("--otel-file -: the run's spans are written to a file, not to stdout (it carries the report)",
                         "give a file path, e.g. --otel-file run.otlp.jsonl, or send them with --otel-endpoint URL")
    if request.otel_file is not None and request.otel_file.is_dir():
        raise UsageError(f"--otel-file {request.otel_file} is a directory", "give a file path, e.g. run.otlp.jsonl")
    if request.otel_file is not None and not request.otel_file.absolute().parent.is_dir():
        raise UsageError(f"--otel-file {request.otel_file}: the folder {request.otel_file.absolute().parent} does not "
                         "exist", "create it, or give a path in an existing folder")
    if request.otel_file is not None:  # never appended to the traces the run scores, its dataset or its database
        check_not_read([("--otel-file", request.otel_file)],
                       [(plan.dataset.path, plan.dataset.data_file) for plan in plans.runs], plans.db)
    return Exporter(plans.redactor, request.otel_file, url)


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM (and SIGHUP) interrupts the command as Ctrl-C does (the runner handles both during the conversations), and the
    first interrupt holds every later one; the handlers found are put back when the command is done, unless it
    was interrupted (then it exits 130, its last words included)."""
    def interrupt(signum: int, frame: object) -> None:
        _hold_signals()  # the first interrupt is the one: the next ones never cut into its handling
        raise KeyboardInterrupt

    try:
        previous = {sig: signal.signal(sig, interrupt) for sig in interrupting_signals()}
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGTERM) is not _held:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        else:  # interrupted: the process exits 130 now; ignored, as Python's shutdown would reset a handler of its own
            for sig in interrupting_signals():
                signal.signal(sig, signal.SIG_IGN)


def _hold_signals() -> None:
    """Once interrupted, further SIGINT/SIGTERM are ignored: the command says so and exits 130, never killed half-way
    (nor while the interpreter shuts down)."""
    with contextlib.suppress(ValueError):  # not the main thread: leave signals alone
        # a handler that does nothing rather than SIG_IGN: a signal already on its way finds a handler to run
        for sig in interrupting_signals():
            signal.signal(sig, _held)


def _held(signum: int, frame: object) -> None:
    """An interrupt after the first: the command is already stopping."""
