"""``run_evals``: play every conversation against the target, score it, fold the verdict.

The runner never prints: it reports through an ``Events`` object (the CLI's is a progress bar and
warnings). Conversations run concurrently, a conversation's turns strictly in order. A ``RunContext``
owns what a run holds (target threads, the store's writer thread, the LLM client and its cache) and
closes it at the end, for library callers too. Each finished conversation flows once to every
consumer: the aggregate, the store (through its writer thread) and the events.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from ..aggregate import Aggregator, exit_code, unscored_warning
from ..dataset import Dataset, Item, dataset_models, load_dataset, model_routes, unregistered_warning
from ..errors import INTERNAL_ERROR, UsageError, describe
from ..fingerprint import fingerprint
from ..llm import (
    Budget,
    LLMClient,
    LLMSettings,
    UsageSink,
    check_settings,
    import_http_client,
    import_litellm,
    load_local_model,
    local_model_pending,
    model_problem,
    usage_rows,
    usage_summary,
)
from ..otel.record import arm_capture
from ..results import ItemResult, Plan, RunResult
from ..scorers import Builder
from ..store import Store, StoreWriter, new_run_id, stored_items, stored_usage
from ..targets import TargetCalls, TargetThreads
from ..tools import HermeticRun
from .conversation import Conversation
from .notices import memory_warning
from .options import RunOptions, check_budgets, plan_of
from .play import PlayContext
from .repeat import PassRates, reduce_repeats
from .resume import check_resumable, kept_results, option_conflicts
from .tooling import ToolSettings, check_hermetic

INTERRUPTED = 130
BUDGET_SPENT = 5


class Events(Protocol):
    """What the runner tells whoever is watching (all optional to act on)."""

    def started(self, run_id: str, total: int, done: int) -> None: ...
    def item_done(self, result: ItemResult) -> None: ...
    def warning(self, text: str) -> None: ...
    def stopping(self) -> None: ...
    # optional: ``notice(text)``, a long step the run is waiting on ("loading the local model ..."); ``None`` when
    # it is over. Events written before it existed still work (the runner looks for it).
    # optional: ``throttled(model, limit, concurrency)``, a model's calls in flight held at ``limit`` after 429s
    # (``None`` once it is back at the configured concurrency).


class QuietEvents:
    """Events that go nowhere (the default for library use)."""

    def started(self, run_id: str, total: int, done: int) -> None:
        pass

    def item_done(self, result: ItemResult) -> None:
        pass

    def warning(self, text: str) -> None:
        pass

    def stopping(self) -> None:
        pass


SWITCH_INTERVAL = 0.0005
"""Seconds a thread may hold the GIL while another waits, during a run (Python's default is 5 ms): the
writer and target threads share the GIL with the event loop, and a long hand-over would make every
timer and every reply wait behind them."""

WRITE_BACKLOG = 512
"""Item writes queued at most: conversations that outrun SQLite wait for the writer (bounded memory)."""


_switch_lock = threading.Lock()
_switch_runs = 0
_switch_saved = 0.0


def _hold_switch_interval() -> None:
    """Shorten the interpreter's switch interval while at least one run is in progress in this process."""
    global _switch_runs, _switch_saved
    with _switch_lock:
        if _switch_runs == 0:
            _switch_saved = sys.getswitchinterval()
            sys.setswitchinterval(min(_switch_saved, SWITCH_INTERVAL))
        _switch_runs += 1


def _release_switch_interval() -> None:
    """The last run to end restores the interval it found (runs may overlap: threads, or one event loop)."""
    global _switch_runs
    with _switch_lock:
        _switch_runs -= 1
        if _switch_runs == 0:
            sys.setswitchinterval(_switch_saved)


def _import_quietly(settings: LLMSettings, models: list[str], notice: Callable[[str | None], None],
                    routes: list[tuple[str, str | None]] | None = None) -> None:
    """Import litellm when one of the run's models goes through it (OpenAI-compatible models and the embedded one
    never do, and then it is never imported); finding each model's path reads the model table here too. Load the
    embedded model when the run uses it, saying so: it takes seconds, more the first time its file is assembled."""
    with contextlib.suppress(Exception):  # an import that fails is each model call's error, as without warming up
        paths = LLMClient(settings)
        if any(paths.path(model, base) == "litellm" for model, base in (routes or [(m, None) for m in models])):
            import_litellm()
    for model in dict.fromkeys(m for m in models if local_model_pending(m)):
        notice(f"loading the local model {model} (llama.cpp on the CPU) ...")
        try:
            with contextlib.suppress(Exception):  # a model that cannot load is each call's error, as without this
                load_local_model(model)
        finally:
            notice(None)


class RunContext:
    """Everything one run holds, closed when it ends: target threads, the writer, the LLM client and cache.

    Building it checks the LLM settings of the environment (a bad one is the user's mistake, found before the
    run's row is written) and takes nothing it would leave behind if it fails."""

    def __init__(self, store: Store | None, options: RunOptions, concurrency: int | None = None,
                 on_throttle: Callable[[str, int, int], None] | None = None) -> None:
        check_settings()
        self.model_concurrency = max(concurrency or options.concurrency or 0, options.judge_concurrency, 1)
        """Calls in flight to one (provider, model) at most: the run's concurrency (or the judges', if larger)."""
        self.on_throttle = on_throttle
        self.settings = LLMSettings.from_env()
        self.store = store
        self.options = options
        self.writer: StoreWriter | None = store.writer() if store is not None else None
        self.threads = TargetThreads()
        self.calls = TargetCalls(self.threads, options.turn_timeout, self.llm)
        self._llm: LLMClient | None = None
        self._queued: deque[Future[Any]] = deque(maxlen=WRITE_BACKLOG)
        self._write_error: BaseException | None = None
        self._warming: asyncio.Future[None] | None = None
        _hold_switch_interval()  # last: nothing after it can fail, and aclose gives it back

    def llm(self) -> LLMClient:
        """The run's LLM client (made on first use), with the response cache of the run's database."""
        if self._llm is None:
            settings = replace(self.settings)
            settings.judge_concurrency = self.options.judge_concurrency
            settings.cache = self.options.use_cache
            settings.model_concurrency = self.model_concurrency
            cache = None
            if self.store is not None and self.options.use_cache:
                cache = self.store.response_cache(self.writer)
            self._llm = LLMClient(settings, cache)
            self._llm.on_throttle = self.on_throttle
        return self._llm

    async def write(self, build: Callable[[], list[Any]]) -> None:
        """Statements built and written by the writer thread; the caller waits without blocking the loop."""
        if self.writer is not None:
            await asyncio.wrap_future(self.writer.statements(build))

    def write_later(self, build: Callable[[], list[Any]], then: Callable[[Any], Any] | None = None) -> None:
        """Statements handed to the writer thread (``then`` run after them, on its connection); nobody waits (errors
        surface when the run closes)."""
        if self.writer is not None:
            self._queued.append(self.writer.statements(build, then))

    async def keep_up(self) -> None:
        """Wait while ``WRITE_BACKLOG`` writes are queued, so results cannot pile up in memory faster than
        SQLite takes them (with a zero-latency target the conversations outrun the writer)."""
        if len(self._queued) == WRITE_BACKLOG and not self._queued[0].done():
            with contextlib.suppress(Exception):  # a failed write is raised by the writer's close (its first error)
                await asyncio.wrap_future(self._queued[0])

    def warm_up(self, models: list[str], notice: Callable[[str | None], None],
                routes: list[tuple[str, str | None]] | None = None) -> None:
        """When the run will call ``models``, start importing what they need (litellm, for a provider evalcli does
        not speak to itself) in a worker thread as conversations start: the first import takes seconds of CPU, and
        made on the event loop at the first judge or simulator call it stalled every conversation's timers (and
        Ctrl-C). Model calls wait for it with ``llm_ready``."""
        if models and self._warming is None:
            loop = asyncio.get_running_loop()

            def on_loop(text: str | None) -> None:  # told from the worker thread, shown by the loop
                loop.call_soon_threadsafe(notice, text)

            self._warming = asyncio.ensure_future(asyncio.to_thread(_import_quietly, self.settings, models, on_loop,
                                                                    routes))

    async def llm_ready(self) -> None:
        """Wait, without blocking the event loop, until the LLM layer the run started importing is imported."""
        if self._warming is not None and not self._warming.done():
            await asyncio.shield(self._warming)

    async def aclose(self) -> BaseException | None:
        """Flush and stop the writer (off the loop), close the cache, let idle target threads end. Returns the
        first write that failed (the run's result stands; what could not be stored is reported beside it)."""
        try:
            if self.writer is not None:
                try:
                    await asyncio.to_thread(self.writer.close)
                except Exception as exc:  # noqa: BLE001 - a failed write is reported with the result, not instead of it
                    self._write_error = self._write_error or exc
        finally:
            if self._llm is not None:
                await self._llm.aclose()
                if self._llm.cache is not None:
                    self._llm.cache.close()
            self.threads.close()
            _release_switch_interval()
        return self._write_error


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
        """On a resume: the LLM calls of every earlier invocation (``usage_summary`` rows), those of the conversations
        played again included: they count against the budget and in the totals."""

    async def _select(self) -> tuple[list[Item], dict[int, ItemResult], str]:
        check_hermetic(self.dataset, self.options.hermetic)
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
            self.kept_usage = await asyncio.to_thread(stored_usage, store, run_id)
        return items, kept, run_id

    async def run(self) -> RunResult:
        check_budgets(self.dataset, self.options)
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
        store = self.store
        to_run = [i for i in items if i.index not in kept]
        results: dict[int, ItemResult] = {}
        rates = PassRates()
        for result in kept.values():
            if aggregator.expects(result.index):
                aggregator.add(result)
                rates.add(result)
                if self.options.keep_items:
                    results[result.index] = result
        registered = {s.id for s in self.dataset.all_specs() if s.registered}
        usage = UsageSink()
        on_stored = self.options.on_stored

        def finished(result: ItemResult) -> None:
            self.limited += result.status == "limited"
            aggregator.add(result)
            rates.add(result)
            if store is not None:
                context.write_later(lambda: store.item_statements(run_id, result, registered),
                                    None if on_stored is None else
                                    lambda conn: on_stored(next(stored_items(conn, run_id, index=result.index))))
            if self.options.keep_items:
                results[result.index] = result
            for record in result.usage:
                usage.record(record)
            self.events.item_done(result)

        models = [model for model, _ in dataset_models(self.dataset) if model_problem(model) is None] if to_run else []
        routes = [(m, base) for m, base in model_routes(self.dataset) if model_problem(m) is None] if to_run else []
        if to_run:
            import_http_client(models, always=bool(getattr(self.dataset.target, "speaks_http", False)))
            arm_capture(self.dataset, to_run)
        try:
            if store is not None:
                resume = bool(self.options.resume)
                config = None if resume else fingerprint(self.dataset.resolved_configuration())
                await context.write(lambda: store.resume_statements(run_id) if resume else
                                    store.begin_statements(run_id, self.dataset, self.options.stored(plan, config)))
            self.events.started(run_id, len(items), len(items) - len(to_run))
            if to_run:
                # a model that cannot be reached (package or key missing) fails each call at once, unimported
                context.warm_up(models, self._notice, routes)
                if isinstance(getattr(self.dataset.target, "target_model", None), str):
                    await context.llm_ready()  # a model target calls it in every turn, timed: imported first
            await self._play_all(to_run, finished, context, plan)
            for text in self.dataset.target.run_warnings() if self.dataset.target is not None else ():
                warnings.append(text)
                self.events.warning(text)
        except BaseException as exc:
            # whatever happened, the run's row ends with a status and an exit code, never 'running'
            interrupted = isinstance(exc, (KeyboardInterrupt, asyncio.CancelledError))
            status, code = ("interrupted", INTERRUPTED) if interrupted else ("failed", INTERNAL_ERROR)
            aggregator.flush()
            partial = aggregator.summary()
            if store is not None:
                context.write_later(lambda: store.finish_statements(run_id, partial, status, code, aggregator.items,
                                                                    rates.to_json(self.options.repeat), len(items)))
            raise
        aggregator.flush()
        summary = aggregator.summary()
        unscored = unscored_warning(summary)
        if unscored:
            self.events.warning(unscored)
            warnings.append(unscored)
        status, code = self._ending(summary, aggregator.items < len(items))
        if store is not None:
            with contextlib.suppress(Exception):  # the writer keeps the error; aclose reports it with the result
                await context.write(lambda: store.finish_statements(run_id, summary, status, code, aggregator.items,
                                                                    rates.to_json(self.options.repeat), len(items)))
        ordered = [results[i.index] for i in items if i.index in results] if self.options.keep_items else None
        totals = usage_summary([*self.kept_usage, *usage_rows(usage)])
        return RunResult(run_id, self.dataset.path, self.dataset.target_spec, summary, status,
                         code, ordered, totals, warnings, completed=aggregator.items, selected=len(items),
                         pass_at_k=rates.pass_at_k(), pass_all_k=rates.pass_all_k(), stability=rates.stability(),
                         repeat=self.options.repeat, dataset_name=self.dataset.name)

    def _ending(self, summary: Any, unfinished: bool) -> tuple[str, int]:
        """The run's status and exit code: ``interrupted`` (130); ``budget`` when a budget ended it before every
        conversation finished (exit 5, unless a gate failed: 1); else ``completed`` with the verdict's code."""
        if self.interrupted:
            return "interrupted", INTERRUPTED
        code = exit_code(summary, strict=self.options.strict, max_errors=self.options.max_errors)
        if self.budget.spent is not None and (unfinished or self.limited):
            return "budget", code if code == 1 else BUDGET_SPENT
        return "completed", code

    async def _play_all(self, items: list[Item], finished: Callable[[ItemResult], None], context: RunContext,
                        plan: Plan) -> None:
        concurrency = max(1, self.options.concurrency or self.dataset.concurrency)
        workers = min(concurrency, len(items))
        if not workers:
            return
        builder = Builder(self.dataset.imported, context.llm, self.options.use_cache)
        tools = ToolSettings.of_run(self.dataset, self.options.hermetic, self.options.record_tools, self.options.resume,
                                    self.options.tape_name)
        if tools.active(self.dataset) and self.dataset.target is not None:
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
            with HermeticRun(self.options.hermetic):  # a tool call tied to no conversation is refused meanwhile
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
        """A model's calls in flight moved (SPEC §27): the watcher says when it is throttled, and when no longer."""
        throttled = getattr(self.events, "throttled", None)  # optional (see Events)
        if throttled is not None:
            throttled(model, limit if limit < ceiling else None, ceiling)

    def _notice(self, text: str | None) -> None:
        notice = getattr(self.events, "notice", None)  # optional (see Events)
        if notice is not None:
            notice(text)

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
    return await Runner(dataset, store, options or RunOptions(), events or QuietEvents()).run()


def run_evals(dataset: Dataset | str | Path, *, store: Store | None = None, options: RunOptions | None = None,
              events: Events | None = None, scorers: str | None = None) -> RunResult:
    """Synchronous ``arun_evals``: the entry point for Python users and for the CLI."""
    return asyncio.run(arun_evals(dataset, store=store, options=options, events=events, scorers=scorers))
