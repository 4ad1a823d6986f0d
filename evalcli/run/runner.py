"""``run_evals``: play every conversation against the target, score it, fold the verdict.

The runner never prints: it reports through ``Events`` (the CLI's are a progress bar and warnings).
Conversations run concurrently, a conversation's turns strictly in order. A ``RunContext`` owns what a
run holds (target threads, the store's writer thread, the LLM client and its cache) and closes it at
the end, for library callers too. Each finished conversation flows once to every consumer: the
aggregate, the ``Recorder`` (the run's rows, through the writer thread) and the events.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import signal
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from ..aggregate import Aggregator, exit_code, unscored_warning
from ..dataset import Dataset, Item, load_dataset
from ..dbname import db_option
from ..errors import EvalcliError, ExitCode, describe, exit_called
from ..llm import Budget, UsageSink, import_http_client, uncounted_warning, usage_rows, usage_summary
from ..otel.capture import refused as capture_refused
from ..otel.record import arm_capture
from ..passrate import settle
from ..results import ItemResult, RunResult
from ..scorers import Builder
from ..store import Store, new_run_id
from ..store.run_lock import RunLock, hold
from ..tools import HermeticRun
from .arguments import check_datasets, check_events, check_no_running_loop, check_store
from .context import RunContext
from .conversation import Conversation
from .events import Events
from .options import RunOptions, interrupting_signals
from .plan import RunPlan, plan_run
from .play import PlayContext
from .recorder import Recorder
from .repeat import PassRates, reduce_repeats
from .tooling import ToolSettings


class TargetExited(EvalcliError):
    """The target or a scorer called ``sys.exit()`` while a conversation played: the run stops, marked ``failed``
    (exit 70), what finished stored and the rest resumable (docs/reliability.md)."""

    exit_code = ExitCode.INTERNAL


class Runner:
    """One planned run of one dataset (new, resumed or a re-run of failures): ``plan_run`` checked it."""

    def __init__(self, plan: RunPlan, store: Store | None, events: Events) -> None:
        self.plan = plan
        self.dataset = plan.dataset
        self.store = store
        self.options = plan.options
        self.events = events
        self.stopping = False
        self.interrupted = False
        self.grace_seconds = plan.options.grace_seconds
        """How long conversations in flight may still take after an interrupt (a second one sets it to 0)."""
        self.budget = Budget(dict(plan.options.max_cost), {k: int(v) for k, v in plan.options.max_tokens.items()})
        """``--max-cost`` / ``--max-tokens`` (docs/models.md): once one is spent, no new conversation starts."""
        self.limited = 0
        """Conversations of this run a limit stopped (status ``limited``)."""
        self.run_id: str | None = plan.run_id
        self.tape_error: str | None = None
        """``--record-tools``' tape that could not be written (``RunResult.tape_error``)."""
        self.run_warnings: list[str] = []
        """What the target (or a worker's) noticed while the conversations were played, said once each."""
        self.row: Future[Any] | None = None
        self.lock: RunLock | None = None
        """The run's lock while this process plays it (``store.run_lock``)."""
        """A new run's row, as the writer thread writes it (``_begin``)."""

    def resume_command(self) -> str:
        """The command that plays what this run left (its database named unless it is the default one: a shard's
        ``--db shard-2.db`` run resumed without it would look in ``evalcli.db``)."""
        return (f"evalcli run {shlex.quote(str(self.dataset.path))} --resume {self.run_id or 'RUN_ID'}"
                + db_option(self.store.path if self.store is not None else None))

    def _context(self) -> RunContext:
        """What the conversations share while they play (the store told the dataset's secrets first)."""
        if self.store is not None:
            self.store.protect(self.dataset.secret_values)
        return RunContext(self.store, self.options, self.plan.settings,
                          self.options.concurrency or self.dataset.concurrency, self._throttle)

    async def run(self) -> RunResult:
        context = self._context()
        try:
            with self.dataset.scope or contextlib.nullcontext():
                result = await self._run(context)
        finally:
            try:
                failed = await context.aclose()
            finally:
                self._row_written()
                if self.lock is not None:
                    self.lock.release()
        if failed is not None:
            # the run happened and its verdict stands; what the database could not keep is said beside it
            result.store_error = describe(failed)
        result.tape_error = self.tape_error
        return result

    async def _run(self, context: RunContext) -> RunResult:
        plan = self.plan
        self.budget.add_rows(list(plan.kept_usage))
        aggregator = Aggregator(plan.scoring, [i.index for i in plan.items])
        warnings = list(plan.warnings)
        for text in warnings:
            self.events.warning(text)
        results: dict[int, ItemResult] = {}
        rates = PassRates()
        for result in _kept_values(plan.kept, self.store):
            if aggregator.expects(result.index):
                aggregator.add(result)
                rates.add(result)
                self.events.item_kept(result)
                if self.options.keep_items:
                    results[result.index] = result
        run_id = self.run_id = plan.run_id or new_run_id()
        if self.store is not None:  # held while this process plays the run: a --resume beside it is refused
            self.lock = hold(self.store.path, run_id)
        recorder = Recorder(context, run_id, lambda: plan.registered, self.options.on_stored)
        usage = UsageSink()

        def finished(result: ItemResult) -> None:
            self.limited += result.status == "limited"
            aggregator.add(result)
            rates.add(result)
            recorder.item(result)
            if self.options.keep_items:
                results[result.index] = result
            for record in result.usage:
                usage.record(record)
            self.events.item_done(result)

        try:
            await self._play(context, recorder, finished, warnings)
        except BaseException as exc:
            # whatever happened, the run's row ends with a status and an exit code, never 'running'
            interrupted = isinstance(exc, (KeyboardInterrupt, asyncio.CancelledError))
            status, code = ("interrupted", ExitCode.INTERRUPTED) if interrupted else ("failed", ExitCode.INTERNAL)
            if isinstance(exc, EvalcliError):  # stored as the process exits: a package's broken kind is exit 2
                code = ExitCode(exc.exit_code)
            aggregator.flush()
            recorder.finish_later(aggregator.summary(), status, code, aggregator.items,
                                  self._repeats(rates), len(plan.items))
            raise
        aggregator.flush()
        summary = aggregator.summary()
        for said in (unscored_warning(summary), uncounted_warning(usage, self._bounds)):
            if said:
                self.events.warning(said)
                warnings.append(said)
        status, code = self._ending(summary, aggregator.items < len(plan.items))
        await recorder.finish(summary, status, code, aggregator.items, self._repeats(rates),
                              len(plan.items))
        ordered = [results[i.index] for i in plan.items if i.index in results] if self.options.keep_items else None
        totals = usage_summary([*plan.kept_usage, *usage_rows(usage)])
        return RunResult(run_id, self.dataset.path, self.dataset.target_spec, summary, status,
                         code, ordered, totals, warnings, completed=aggregator.items, selected=len(plan.items),
                         pass_at_k=rates.pass_at_k(), pass_all_k=rates.pass_all_k(), stability=rates.stability(),
                         repeat=self.options.repeat, repeat_auto=self.options.sequential,
                         pass_rate=self.options.pass_rate, plays=rates.plays, dataset_name=self.dataset.name)

    def _bounds(self) -> list[str]:
        """The token and cost bounds of this run, as written: what a call reporting no usage escapes."""
        limits = [self.dataset.limits_of(item) for item in self.plan.items]
        written = {"--max-tokens": bool(self.budget.max_tokens), "--max-cost": bool(self.budget.max_cost),
                   "limits.tokens": any(lim is not None and lim.tokens is not None for lim in limits),
                   "limits.cost": any(lim is not None and lim.cost is not None for lim in limits)}
        return [name for name, given in written.items() if given]

    def _repeats(self, rates: PassRates) -> dict[str, Any]:
        """What the run's row and JSON add under repeats (``PassRates.to_json``)."""
        return rates.to_json(self.options.repeat, self.options.sequential, self.options.pass_rate)

    async def _sequential(self, conversation: Conversation, item: Item) -> ItemResult:
        """``--repeat auto[:MAX]``: play ``item`` until the sequential rule settles it (``passrate.settle``) or a play
        errors, at most ``repeat`` times (docs/verdicts.md#sequential-repeats). An interrupt does not cut it short: like
        a fixed ``--repeat N`` it finishes its plays within the grace period (or is cancelled, and played again in
        full on ``--resume``), so a stored conversation always holds the plays the rule asked for."""
        plays: list[ItemResult] = []
        settled: str | None = None
        while settled is None:
            play = await conversation.play(item)
            plays.append(play)
            if play.status != "ok":
                break
            settled = settle(sum(p.passed for p in plays), len(plays), self.options.pass_rate, self.options.repeat)
        return reduce_repeats(plays, self.options.pass_rate, settled)

    async def _play(self, context: RunContext, recorder: Recorder, finished: Callable[[ItemResult], None],
                    warnings: list[str]) -> None:
        """Begin the run's row, play every conversation to run (here, or in ``--workers`` processes), end with what
        the target noticed."""
        plan, target = self.plan, self.dataset.target
        to_run = plan.to_run
        if to_run and self.options.workers <= 1:  # imported before the run's clock starts (its first turn is not slowed)
            import_http_client(list(plan.model_names), always=target is not None and target.speaks_http)
        row = await self._begin(recorder)
        self.events.started(recorder.run_id, len(plan.items), len(plan.items) - len(to_run))
        try:
            if self.options.workers > 1 and to_run:
                from .workers import WorkerPool

                await WorkerPool(self, finished, context.keep_up).play(to_run)
            else:
                await self._play_here(to_run, finished, context)
                self.say_target_warnings()
        except BaseException:
            failed = _failure(row)
            if failed is not None:
                raise failed from None  # what stopped the run is its row (as when nothing had played)
            raise
        if row is not None:
            await row  # written by now, or its error raised: the run stopped at once (``_row_done``)
        warnings.extend(self.run_warnings)

    async def _begin(self, recorder: Recorder) -> asyncio.Future[Any] | None:
        """The run's row. A new run's is queued ahead of its conversations' rows and written by the writer thread,
        which makes its fingerprint (a walk of every conversation, only made to be stored) while the first
        conversations play (docs/performance.md#the-first-turn); one that cannot be made or written stops the run
        at once (``_row_done``) and its error is the run's. A resumed run's row is marked running, awaited."""
        make = self.plan.stored_later() if self.store is not None else None
        selected = len(self.plan.items)
        written = recorder.begin_new(self.dataset, make, selected) if make is not None else None
        if written is None:
            await recorder.begin(self.dataset, None, selected)
            return None
        self.row = written
        row = asyncio.wrap_future(written)
        row.add_done_callback(self._row_done)
        return row

    def _row_done(self, row: asyncio.Future[Any]) -> None:
        """The run's row could not be made or written: the run stops now (no grace), its error raised by ``_play``."""
        if _failure(row) is not None:
            self.stopping, self.grace_seconds = True, 0

    def _row_written(self) -> None:
        """Wait (blocking) until the writer thread has written the run's row, when closing the run was itself cut
        short (a second interrupt): the run keeps its row, resumable, whatever else it could not store."""
        if self.row is not None and not self.row.done():
            with contextlib.suppress(Exception):
                self.row.result()

    async def _play_here(self, to_run: list[Item], finished: Callable[[ItemResult], None],
                         context: RunContext) -> None:
        """Play ``to_run`` in this process (the run's, or a worker's share)."""
        target = self.dataset.target
        if to_run:
            # a worker's share imports here (the run's own process did before its clock started; again costs nothing)
            import_http_client(list(self.plan.model_names), always=target is not None and target.speaks_http)
            if not arm_capture(self.dataset, to_run) and (why := capture_refused()) is not None:
                self.events.warning(why)  # the app's own provider keeps its spans: said, never silently off
            # a model that cannot be reached (package or key missing) fails each call at once, unimported
            context.warm_up(list(self.plan.model_names), self.events.notice, list(self.plan.models))
            if target is not None and target.target_model is not None:
                await context.llm_ready()  # a model target calls it in every turn, timed: imported first
        await self._play_all(to_run, finished, context)

    def say_target_warnings(self) -> None:
        """What the target noticed over the whole run, said once each after its conversations (with workers, from
        what each worker counted: ``add_run_counts``)."""
        for text in self.dataset.target.run_warnings() if self.dataset.target is not None else ():
            self.run_warnings.append(text)
            self.events.warning(text)

    async def play_share(self, finished: Callable[[ItemResult], None]) -> None:
        """A worker's share of a run (``evalcli.run.worker``): the plan's conversations played and each handed to
        ``finished``; nothing of the run is recorded or said here (the run's own process does it, the target's
        warnings too, from every worker's counts)."""
        context = self._context()
        try:
            with self.dataset.scope or contextlib.nullcontext():
                await self._play_here(self.plan.to_run, finished, context)
        finally:
            await context.aclose()

    def _ending(self, summary: Any, unfinished: bool) -> tuple[str, ExitCode]:
        """The run's status and exit code: ``interrupted`` (130); ``budget`` when a budget ended it before every
        conversation finished (exit 5, unless a gate failed: 1); else ``completed`` with the verdict's code."""
        if self.interrupted:
            return "interrupted", ExitCode.INTERRUPTED
        code = exit_code(summary, strict=self.options.strict, max_errors=self.options.max_errors)
        if self.budget.spent is not None and (unfinished or self.limited):
            return "budget", code if code == ExitCode.FAILED else ExitCode.BUDGET
        return "completed", code

    async def _play_all(self, items: list[Item], finished: Callable[[ItemResult], None], context: RunContext) -> None:
        concurrency = max(1, self.options.concurrency or self.dataset.concurrency)
        workers = min(concurrency, len(items))
        if not workers:
            return
        builder = Builder(self.dataset.imported, context.llm, self.options.use_cache)
        tools = ToolSettings.of_run(self.dataset, self.options.hermetic, self.options.record_tools,
                                    self.options.resume, self.options.tape_name, self.plan.controls_tools)
        if tools.active and self.dataset.target is not None:
            self.dataset.target.control_tools()
        conversation = Conversation(self.dataset, builder, context.calls,
                                    PlayContext(context.llm, self.options.use_cache, context.llm_ready),
                                    self.plan.scoring.thresholds, context.llm_ready, self.budget if self.budget.active else None,
                                    tools)
        queue = iter(items)

        async def play(item: Item) -> None:
            if self.options.sequential:
                finished(await self._sequential(conversation, item))
            elif self.options.repeat > 1:
                finished(reduce_repeats([await conversation.play(item) for _ in range(self.options.repeat)],
                                        self.options.pass_rate))
            else:
                finished(await conversation.play(item))

        once = not self.options.sequential and self.options.repeat <= 1

        async def worker() -> None:
            for item in queue:
                if self.stopping or self.budget.spent is not None:
                    return
                try:
                    if once:  # a conversation played once: each resumption of its turns passes one coroutine fewer
                        finished(await conversation.play(item))
                    else:
                        await play(item)
                except SystemExit as exc:  # evalcli never exits this way: the target (or a scorer) called sys.exit()
                    raise TargetExited(f"conversation {item.id}: {exit_called(exc)}",
                                       "the conversations finished are stored; remove the sys.exit() call, then play "
                                       f"the rest with: {self.resume_command()}") from None
                await context.keep_up()
                if self.stopping:
                    return

        tasks = [asyncio.ensure_future(worker()) for _ in range(workers)]
        restore = self._install_signals() if self.options.handle_signals else None
        try:
            with HermeticRun(self.options.hermetic):  # a tool call tied to no conversation is refused meanwhile
                await self._wait(tasks)
        finally:
            if restore:
                restore()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if tools.recorder is not None:
                try:
                    await asyncio.to_thread(tools.recorder.write)
                except OSError as exc:  # the run's verdict stands: said beside it, as a failed database write is
                    self.tape_error = f"{tools.recorder.path}: {describe(exc)}"
            if self.dataset.target is not None:
                await self.dataset.target.aclose()

    async def _wait(self, tasks: list[asyncio.Task[None]]) -> None:
        pending = set(tasks)
        while pending:
            done, pending = await asyncio.wait(pending, timeout=0.2, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                if task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
            if self.stopping and pending:
                deadline = time.monotonic() + self.grace_seconds
                # re-check often: a second signal sets grace_seconds to 0 (stop now)
                while pending and time.monotonic() < deadline and self.grace_seconds > 0:
                    _, pending = await asyncio.wait(pending, timeout=min(0.1, deadline - time.monotonic()))
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
                return

    def _throttle(self, model: str, limit: int, ceiling: int) -> None:
        """A model's calls in flight moved (docs/models.md): the watcher says when it is throttled, and when no
        longer."""
        self.events.throttled(model, limit if limit < ceiling else None, ceiling)

    def _install_signals(self) -> Callable[[], None] | None:
        loop = asyncio.get_running_loop()

        def stop() -> None:
            if self.stopping:
                self.grace_seconds = 0  # a second signal: stop now
            self.stopping = self.interrupted = True
            self.events.stopping()

        installed = []
        for sig in interrupting_signals():
            previous = signal.getsignal(sig)
            try:
                loop.add_signal_handler(sig, stop)
                installed.append((sig, previous))
            except (NotImplementedError, RuntimeError, ValueError):
                pass

        def restore() -> None:
            # the handlers found are put back (the event loop's own removal would leave the defaults), so a
            # signal after the conversations still reaches whoever handled it before (the CLI, asyncio.Runner);
            # held back meanwhile: one arriving between the removal and the restore met the default, and SIGTERM's
            # default ends the process at once (a second Ctrl-C or SIGTERM as the run ended: killed, not exit 130)
            held = _blocked({sig for sig, _ in installed})
            try:
                for sig, previous in installed:
                    loop.remove_signal_handler(sig)
                    with contextlib.suppress(TypeError, ValueError, OSError):
                        signal.signal(sig, previous)
            finally:
                _unblocked(held)

        return restore


def _blocked(signals: set[int]) -> set[int] | None:
    """Hold ``signals`` back from this thread (they wait, pending, until ``_unblocked``); ``None`` where signals cannot
    be held (not POSIX)."""
    if not signals or not hasattr(signal, "pthread_sigmask"):
        return None
    return set(signal.pthread_sigmask(signal.SIG_BLOCK, signals))


def _unblocked(previous: set[int] | None) -> None:
    """Deliver what ``_blocked`` held back, to the handlers now in place."""
    if previous is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _failure(row: asyncio.Future[Any] | None) -> BaseException | None:
    """Why the run's row was not written, once the writer thread has tried (``None``: written, or not yet)."""
    return row.exception() if row is not None and row.done() and not row.cancelled() else None


async def arun_evals(dataset: Dataset | str | Path, *, store: Store | None = None, options: RunOptions | None = None,
                     events: Events | None = None, scorers: str | None = None) -> RunResult:
    """Run one dataset (a ``Dataset`` or a path to one) and return its result: ``plan_run`` checks it, the runner
    plays the plan (``evalcli.evaluate.run_planned`` runs several, with reports, as ``evalcli run`` does)."""
    check_store(store)
    check_events(events)
    check_datasets([dataset])
    if not isinstance(dataset, Dataset):
        dataset = load_dataset(dataset, scorers)
    plan = plan_run(dataset, options, store)
    events = events or Events()
    for note in plan.notes:
        events.warning(note)
    return await Runner(plan, store, events).run()


def run_evals(dataset: Dataset | str | Path, *, store: Store | None = None, options: RunOptions | None = None,
              events: Events | None = None, scorers: str | None = None) -> RunResult:
    """Synchronous ``arun_evals``: the entry point for Python users and for the CLI.

    The result is handed out beside the event loop's main task, not as its result: closing ``asyncio.run`` asks for
    the SIGINT handler, and ``signal.getsignal`` formats asyncio's own one (a partial naming the main task) with the
    task's ``repr``, which includes its result: every conversation of the run, 0.7 s of CPU after 3,000 of them
    (docs/performance.md)."""
    check_no_running_loop("run_evals", "arun_evals(dataset, ...) (from evalcli.run import arun_evals)")
    held: list[RunResult] = []

    async def main() -> None:
        held.append(await arun_evals(dataset, store=store, options=options, events=events, scorers=scorers))

    asyncio.run(main())
    return held[0]


def _kept_values(kept: Mapping[int, ItemResult], store: Store | None) -> Iterator[ItemResult]:
    """A plan's kept conversations (``resume.kept_values``); a run that resumes nothing has none, and does not import
    the resume's module (docs/performance.md "Start-up and finish")."""
    if type(kept) is dict:
        return iter(kept.values())
    from .resume import kept_values

    return kept_values(kept, store)
