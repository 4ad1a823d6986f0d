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
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..aggregate import Aggregator, exit_code, unscored_warning
from ..dataset import Dataset, Item, dataset_models, load_dataset, model_routes, unregistered_warning
from ..errors import ExitCode, UsageError, describe
from ..fingerprint import fingerprint
from ..llm import Budget, UsageSink, import_http_client, model_problem, usage_rows, usage_summary
from ..results import ItemResult, Plan, RunResult
from ..scorers import Builder
from ..store import Store, new_run_id, stored_usage
from ..tools import TapeRecorder
from .context import RunContext
from .conversation import Conversation
from .events import Events
from .notices import memory_warning
from .options import RunOptions, plan_of
from .play import PlayContext
from .recorder import Recorder
from .repeat import PassRates, reduce_repeats
from .resume import check_resumable, kept_results, option_conflicts
from .tooling import ToolSettings


class Runner:
    """One run of one dataset (new, resumed or a re-run of failures)."""

    def __init__(self, dataset: Dataset, store: Store | None, options: RunOptions, events: Events) -> None:
        self.dataset = dataset
        self.store = store
        self.options = options
        self.events = events
        self.stopping = False
        self.interrupted = False
        self.budget = Budget(dict(options.max_cost), {k: int(v) for k, v in options.max_tokens.items()})
        """``--max-cost`` / ``--max-tokens`` (SPEC §27): once one is spent, no new conversation starts."""
        self.limited = 0
        """Conversations of this run a limit stopped (status ``limited``)."""
        self.kept_usage: list[tuple[Any, ...]] = []
        """On a resume: the LLM calls of the conversations kept (``usage_summary`` rows)."""

    async def _select(self) -> tuple[list[Item], dict[int, ItemResult], str]:
        items = self.options.selection.apply(self.dataset.items)
        if self.options.only_indexes is not None:
            items = [i for i in items if i.index in self.options.only_indexes]
        kept: dict[int, ItemResult] = {}
        run_id = self.options.resume or new_run_id()
        if self.options.resume:
            if self.store is None:
                raise UsageError("--resume needs a database", "pass --db PATH")
            store = self.store
            row, options = await asyncio.to_thread(check_resumable, store, self.options.resume, self.dataset)
            run_id = row["id"]
            conflicts = option_conflicts(options, self.options.stored(plan_of(self.dataset)))
            if conflicts:
                raise UsageError(f"resuming run {run_id} with other options: {'; '.join(conflicts)}",
                                 "continue it with the options it was started with (evalcli.run.resume_options "
                                 "reads them)")
            stored = await asyncio.to_thread(lambda: list(store.load_items(run_id)))
            kept = kept_results(stored, items, row["dataset_hash"] == self.dataset.hash)
            self.kept_usage = await asyncio.to_thread(stored_usage, store, run_id, set(kept))
        return items, kept, run_id

    async def run(self) -> RunResult:
        if self.store is not None:
            self.store.protect(self.dataset.secret_values)
        context = RunContext(self.store, self.options, self.options.concurrency or self.dataset.concurrency,
                             self._throttle)
        try:
            with self.dataset.scope or contextlib.nullcontext():
                result = await self._run(context)
        finally:
            failed = await context.aclose()
        if failed is not None:
            # the run happened and its verdict stands; what the database could not keep is said beside it
            result.store_error = describe(failed)
        return result

    async def _run(self, context: RunContext) -> RunResult:
        items, kept, run_id = await self._select()
        self.budget.add_rows(self.kept_usage)
        plan = plan_of(self.dataset)
        aggregator = Aggregator(plan, [i.index for i in items])
        warnings = [w for w in (*self.dataset.warnings, memory_warning(self.dataset, items),
                                unregistered_warning(self.dataset)) if w]
        for text in warnings:
            self.events.warning(text)
        to_run = [i for i in items if i.index not in kept]
        results: dict[int, ItemResult] = {}
        rates = PassRates()
        for result in kept.values():
            if aggregator.expects(result.index):
                aggregator.add(result)
                rates.add(result)
                if self.options.keep_items:
                    results[result.index] = result
        recorder = Recorder(context, run_id, {s.id for s in self.dataset.all_specs() if s.registered},
                            self.options.on_stored)
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

        models = [model for model, _ in dataset_models(self.dataset) if model_problem(model) is None] if to_run else []
        routes = [(m, base) for m, base in model_routes(self.dataset) if model_problem(m) is None] if to_run else []
        if to_run:
            import_http_client(models, always=self.dataset.target is not None and self.dataset.target.speaks_http)
        try:
            if self.store is not None:  # the configuration's fingerprint is only ever stored
                await recorder.begin(self.dataset, None if self.options.resume else
                                     self.options.stored(plan, fingerprint(self.dataset.resolved_configuration())))
            self.events.started(run_id, len(items), len(items) - len(to_run))
            if to_run:
                # a model that cannot be reached (package or key missing) fails each call at once, unimported
                context.warm_up(models, self.events.notice, routes)
                if self.dataset.target is not None and self.dataset.target.target_model is not None:
                    await context.llm_ready()  # a model target calls it in every turn, timed: imported first
            await self._play_all(to_run, finished, context, plan)
            for text in self.dataset.target.run_warnings() if self.dataset.target is not None else ():
                warnings.append(text)
                self.events.warning(text)
        except BaseException as exc:
            # whatever happened, the run's row ends with a status and an exit code, never 'running'
            interrupted = isinstance(exc, (KeyboardInterrupt, asyncio.CancelledError))
            status, code = ("interrupted", ExitCode.INTERRUPTED) if interrupted else ("failed", ExitCode.INTERNAL)
            aggregator.flush()
            recorder.finish_later(aggregator.summary(), status, code, aggregator.items,
                                  rates.to_json(self.options.repeat))
            raise
        aggregator.flush()
        summary = aggregator.summary()
        unscored = unscored_warning(summary)
        if unscored:
            self.events.warning(unscored)
            warnings.append(unscored)
        status, code = self._ending(summary, aggregator.items < len(items))
        await recorder.finish(summary, status, code, aggregator.items, rates.to_json(self.options.repeat))
        ordered = [results[i.index] for i in items if i.index in results] if self.options.keep_items else None
        totals = usage_summary([*self.kept_usage, *usage_rows(usage)])
        return RunResult(run_id, self.dataset.path, self.dataset.target_spec, summary, status,
                         code, ordered, totals, warnings, completed=aggregator.items, selected=len(items),
                         pass_at_k=rates.pass_at_k(), pass_all_k=rates.pass_all_k(), stability=rates.stability(),
                         repeat=self.options.repeat, dataset_name=self.dataset.name)

    def _ending(self, summary: Any, unfinished: bool) -> tuple[str, ExitCode]:
        """The run's status and exit code: ``interrupted`` (130); ``budget`` when a budget ended it before every
        conversation finished (exit 5, unless a gate failed: 1); else ``completed`` with the verdict's code."""
        if self.interrupted:
            return "interrupted", ExitCode.INTERRUPTED
        code = exit_code(summary, strict=self.options.strict, max_errors=self.options.max_errors)
        if self.budget.spent is not None and (unfinished or self.limited):
            return "budget", code if code == ExitCode.FAILED else ExitCode.BUDGET
        return "completed", code

    async def _play_all(self, items: list[Item], finished: Callable[[ItemResult], None], context: RunContext,
                        plan: Plan) -> None:
        concurrency = max(1, self.options.concurrency or self.dataset.concurrency)
        workers = min(concurrency, len(items))
        if not workers:
            return
        builder = Builder(self.dataset.imported, context.llm, self.options.use_cache)
        tools = ToolSettings.for_run(self.dataset, self.options.hermetic,
                                     TapeRecorder(self.options.record_tools, self.dataset.path)
                                     if self.options.record_tools else None)
        if tools.active and self.dataset.target is not None:
            self.dataset.target.control_tools()
        conversation = Conversation(self.dataset, builder, context.calls,
                                    PlayContext(context.llm, self.options.use_cache, context.llm_ready),
                                    plan.thresholds, context.llm_ready, self.budget if self.budget.active else None,
                                    tools)
        queue = iter(items)

        async def worker() -> None:
            for item in queue:
                if self.stopping or self.budget.spent is not None:
                    return
                if self.options.repeat > 1:
                    finished(reduce_repeats([await conversation.play(item) for _ in range(self.options.repeat)]))
                else:
                    finished(await conversation.play(item))
                await context.keep_up()
                if self.stopping:
                    return

        tasks = [asyncio.ensure_future(worker()) for _ in range(workers)]
        restore = self._install_signals() if self.options.handle_signals else None
        try:
            await self._wait(tasks)
        finally:
            if restore:
                restore()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if tools.recorder is not None:
                await asyncio.to_thread(tools.recorder.write)
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
                deadline = time.monotonic() + self.options.grace_seconds
                # re-check often: a second signal sets grace_seconds to 0 (stop now)
                while pending and time.monotonic() < deadline and self.options.grace_seconds > 0:
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
                self.options.grace_seconds = 0  # a second signal: stop now
            self.stopping = self.interrupted = True
            self.events.stopping()

        installed = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous = signal.getsignal(sig)
            try:
                loop.add_signal_handler(sig, stop)
                installed.append((sig, previous))
            except (NotImplementedError, RuntimeError, ValueError):
                pass

        def restore() -> None:
            # the handlers found are put back (the event loop's own removal would leave the defaults), so a
            # signal after the conversations still reaches whoever handled it before (the CLI, asyncio.Runner)
            for sig, previous in installed:
                loop.remove_signal_handler(sig)
                with contextlib.suppress(TypeError, ValueError, OSError):
                    signal.signal(sig, previous)

        return restore


async def arun_evals(dataset: Dataset | str | Path, *, store: Store | None = None, options: RunOptions | None = None,
                     events: Events | None = None, scorers: str | None = None) -> RunResult:
    """Run one dataset (a ``Dataset`` or a path to one) and return its result."""
    if not isinstance(dataset, Dataset):
        dataset = load_dataset(dataset, scorers)
    return await Runner(dataset, store, options or RunOptions(), events or Events()).run()


def run_evals(dataset: Dataset | str | Path, *, store: Store | None = None, options: RunOptions | None = None,
              events: Events | None = None, scorers: str | None = None) -> RunResult:
    """Synchronous ``arun_evals``: the entry point for Python users and for the CLI."""
    return asyncio.run(arun_evals(dataset, store=store, options=options, events=events, scorers=scorers))
