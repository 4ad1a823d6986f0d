"""``run_evals``: play every conversation against the target, score it, fold the verdict.

The runner never prints: it reports through an ``Events`` object (the CLI's is a progress bar and
warnings). Conversations run concurrently, a conversation's turns strictly in order; each finished
conversation is handed to the store at once, so an interrupted run keeps what finished.
"""

from __future__ import annotations

import asyncio
import signal
import time
import traceback
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .aggregate import Aggregator, Mean, Plan, exit_code
from .dataset import Dataset, Item, load_dataset
from .errors import UsageError
from .ids import new_run_id
from .llm import UsageSink, current_usage
from .repeat import reduce_repeats
from .result import ItemResult, RunResult, TurnRecord
from .scorers.base import Outcome, ScorerRun
from .scorers.checks import CHECKS, CheckScorer
from .scorers.registry import Builder, ScorerSpec
from .select import Selection
from .target import BadReply

INTERRUPTED = 130


@dataclass
class RunOptions:
    """How to run a dataset; every field has the CLI's default."""

    concurrency: int | None = None
    """Conversations in flight; ``None`` takes the dataset's ``concurrency``."""
    judge_concurrency: int = 8
    """Judge calls in flight across all conversations."""
    use_cache: bool = True
    """Reuse cached judge replies (``--no-cache`` turns it off)."""
    strict: bool = False
    """Exit 3 on a ``scored`` verdict."""
    max_errors: int = 0
    """Item errors tolerated before the exit code says 4."""
    selection: Selection = field(default_factory=Selection)
    turn_timeout: float | None = None
    """Seconds one target call may take before the conversation is an error."""
    resume: str | None = None
    """Continue this run id: keep finished conversations, run the rest."""
    only_indexes: set[int] | None = None
    """Run only these item indexes (used by --rerun-failed)."""
    keep_items: bool = True
    """Keep every ``ItemResult`` in ``RunResult.items`` (the CLI reads them back from the store instead)."""
    handle_signals: bool = False
    """Install SIGINT/SIGTERM handlers that stop the run cleanly (the CLI does)."""
    grace_seconds: float = 5.0
    """After an interrupt, how long conversations in flight may take to finish before they are cancelled."""
    repeat: int = 1
    """Play each conversation this many times; results are reduced by mean (pass@k for gates)."""


class Events(Protocol):
    """What the runner tells whoever is watching (all optional to act on)."""

    def started(self, run_id: str, total: int, done: int) -> None: ...
    def item_done(self, result: ItemResult) -> None: ...
    def warning(self, text: str) -> None: ...
    def stopping(self) -> None: ...


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


class ScorerFailed(Exception):
    """A scorer (not a gate) raised or errored: the conversation becomes an error."""


def plan_of(dataset: Dataset) -> Plan:
    return Plan([g.id for g in dataset.gates], [s.id for s in dataset.scorers],
                {s.id: s.threshold.raw for s in dataset.scorers if s.threshold is not None})


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Conversation:
    """Plays one item against the target and scores it."""

    def __init__(self, dataset: Dataset, builder: Builder, options: RunOptions, executor: ThreadPoolExecutor) -> None:
        self.dataset = dataset
        self.builder = builder
        self.options = options
        self.executor = executor
        memory_option = dataset.target_options.get("memory")
        self.caller_memory = memory_option if isinstance(memory_option, dict) else None
        self.call_options = {k: v for k, v in dataset.target_options.items() if k != "memory"}

    def _memory(self, item: Item) -> dict[str, Any] | None:
        if item.form == "input":
            return self.caller_memory
        thread = str(uuid.uuid4())
        resource = (self.caller_memory or {}).get("resource") or thread
        return {**(self.caller_memory or {}), "thread": thread, "resource": resource}

    async def play(self, item: Item) -> ItemResult:
        started = time.perf_counter()
        sink = UsageSink()
        token = current_usage.set(sink)
        memory = self._memory(item)
        result = ItemResult(item.index, item.id, list(item.tags), item.form, "ok",
                            thread_id=(memory or {}).get("thread"), resource_id=(memory or {}).get("resource"))
        try:
            await self._turns(item, memory, result)
            if result.status == "ok":
                await self._score(item, result)
        except ScorerFailed as exc:
            result.status, result.error = "error", str(exc)
            result.traceback = "".join(traceback.format_exception(exc.__cause__ or exc))
            # an errored conversation is left out of scoring: show no partial scores for it either
            result.gate_scores, result.scores = {}, {}
            for record in result.turns:
                record.gate_scores, record.scores = {}, {}
        finally:
            current_usage.reset(token)
        result.usage = list(sink)
        result.duration_ms = (time.perf_counter() - started) * 1000
        return result

    async def _turns(self, item: Item, memory: dict[str, Any] | None, result: ItemResult) -> None:
        target = self.dataset.target
        for index, text in enumerate(item.inputs):
            started = time.perf_counter()
            try:
                call = target.call(text, memory, self.call_options, self.executor)
                output = await (asyncio.wait_for(call, self.options.turn_timeout) if self.options.turn_timeout else call)
            except TimeoutError as exc:
                result.status = "error"
                result.error = f"turn {index}: the target did not answer within {self.options.turn_timeout:g}s"
                result.traceback = "".join(traceback.format_exception(exc))
                return
            except BadReply as exc:
                result.status, result.error = "error", f"turn {index}: {exc}"
                result.traceback = "".join(traceback.format_exception(exc))
                return
            except Exception as exc:  # noqa: BLE001 - the target's failure is this conversation's error
                result.status, result.error = "error", f"turn {index}: the target raised {_describe(exc)}"
                result.traceback = "".join(traceback.format_exception(exc))
                return
            finally:
                duration = (time.perf_counter() - started) * 1000
            result.turns.append(TurnRecord(index, text, output, duration))

    async def _score(self, item: Item, result: ItemResult) -> None:
        accumulated = [m for turn in result.turns for m in turn.output]
        whole = ScorerRun(item.first_input, accumulated, item.ground_truth)
        result.gate_scores = await self._gates(self.dataset.gates, whole)
        result.scores = await self._scorers(self.dataset.scorers, whole)
        for turn, record in zip(item.turns or (), result.turns, strict=False):
            run = ScorerRun(turn.input, record.output, item.ground_truth, record.index)
            record.gate_scores = await self._gates(turn.gates, run)
            record.scores = await self._scorers(turn.scorers, run)
            record.thresholds = {s.id: s.threshold.raw for s in turn.scorers if s.threshold is not None}

    async def _one(self, spec: ScorerSpec, run: ScorerRun) -> Outcome:
        scorer = self.builder.build(spec)
        if isinstance(scorer, CheckScorer):
            return scorer.score_now(run)
        outcome: Outcome = await scorer.score(run)
        return outcome

    async def _gates(self, specs: list[ScorerSpec], run: ScorerRun) -> dict[str, Outcome]:
        async def gate(spec: ScorerSpec) -> Outcome:
            try:
                outcome = await self._one(spec, run)
            except Exception as exc:  # noqa: BLE001 - a gate that raises scores 0, with its error shown
                return Outcome(score=0.0, error=_describe(exc))
            if outcome.error is not None:
                return Outcome(score=0.0, reason=outcome.reason, error=outcome.error, usage=outcome.usage)
            return outcome

        outcomes = await _gather([gate(s) for s in specs], concurrent=not _checks_only(specs))
        return {s.id: o for s, o in zip(specs, outcomes, strict=True)}

    async def _scorers(self, specs: list[ScorerSpec], run: ScorerRun) -> dict[str, Outcome]:
        async def score(spec: ScorerSpec) -> Outcome:
            where = f"scorer {spec.id}" + (f" (turn {run.turn_index})" if run.turn_index is not None else "")
            try:
                outcome = await self._one(spec, run)
            except Exception as exc:
                raise ScorerFailed(f"{where} raised {_describe(exc)}") from exc
            if outcome.error is not None:
                raise ScorerFailed(f"{where} failed: {outcome.error}")
            return outcome

        outcomes = await _gather([score(s) for s in specs], concurrent=not _checks_only(specs))
        return {s.id: o for s, o in zip(specs, outcomes, strict=True)}


def _checks_only(specs: list[ScorerSpec]) -> bool:
    return all(spec.kind in CHECKS for spec in specs)


async def _gather(coroutines: list[Any], *, concurrent: bool = True) -> list[Any]:
    if len(coroutines) > 1 and concurrent:
        return list(await asyncio.gather(*coroutines))
    # checks never wait on anything: awaiting them in turn spares gather's tasks and event-loop round trips
    results: list[Any] = []
    try:
        for coroutine in coroutines:
            results.append(await coroutine)
    finally:
        for coroutine in coroutines[len(results) + 1:]:
            coroutine.close()
    return results


def memory_warning(dataset: Dataset, items: list[Item]) -> str | None:
    """Once per run: multi-turn conversations against a target that cannot remember."""
    count = sum(1 for i in items if i.form != "input")
    if not count or dataset.target.has_memory:
        return None
    return (f"target {dataset.target_spec} has no memory configured: its {count} multi-turn "
            f"conversation{'s' if count != 1 else ''} will run, but no turn can recall the earlier ones. "
            "Give the target a truthy 'memory' attribute (e.g. evalcli.Memory) so turns share history.")


def unregistered_warning(dataset: Dataset) -> str | None:
    names = list(dict.fromkeys(s.id for s in dataset.all_specs() if not s.registered))
    if not names:
        return None
    where = dataset.registry.path or "scorers.yaml next to the dataset"
    return (f"scorer{'s' if len(names) > 1 else ''} {', '.join(names)} "
            f"{'are' if len(names) > 1 else 'is'} not registered: scored, but no score rows are stored. "
            f"To keep comparable scores across runs, register {'them' if len(names) > 1 else 'it'} in {where} "
            "(e.g. 'mentions-brooklyn: {includes: Brooklyn}') and refer to it by id.")


class Runner:
    """One run of one dataset (new, resumed or a re-run of failures)."""

    def __init__(self, dataset: Dataset, store: Any, options: RunOptions, events: Events) -> None:
        self.dataset = dataset
        self.store = store
        self.options = options
        self.events = events
        self.stopping = False
        self.interrupted = False

    def _select(self) -> tuple[list[Item], dict[int, ItemResult], str]:
        items = self.options.selection.apply(self.dataset.items)
        if self.options.only_indexes is not None:
            items = [i for i in items if i.index in self.options.only_indexes]
        kept: dict[int, ItemResult] = {}
        run_id = self.options.resume or new_run_id()
        if self.options.resume:
            if self.store is None:
                raise UsageError("--resume needs a database", "pass --db PATH")
            kept = {r.index: r for r in self.store.load_items(run_id) if r.status == "ok"}
        return items, kept, run_id

    async def run(self) -> RunResult:
        items, kept, run_id = self._select()
        plan = plan_of(self.dataset)
        aggregator = Aggregator(plan, [i.index for i in items])
        warnings = [w for w in (memory_warning(self.dataset, items), unregistered_warning(self.dataset)) if w]
        for text in warnings:
            self.events.warning(text)
        if self.store is not None:
            self.store.begin_run(run_id, self.dataset, plan, self.options, resume=bool(self.options.resume))
        to_run = [i for i in items if i.index not in kept]
        self.events.started(run_id, len(items), len(items) - len(to_run))
        results: dict[int, ItemResult] = {}
        for result in kept.values():
            if aggregator.expects(result.index):
                aggregator.add(result)
                if self.options.keep_items:
                    results[result.index] = result
        registered = {s.id for s in self.dataset.all_specs() if s.registered}
        usage = UsageSink()

        passes: dict[str, Mean] = {}

        def finished(result: ItemResult) -> None:
            aggregator.add(result)
            if result.status == "ok":
                for gate_id, count in result.gate_passes.items():
                    passes.setdefault(gate_id, Mean()).add(float(count > 0))
            if self.store is not None:
                self.store.write_item(run_id, result, registered)
            if self.options.keep_items:
                results[result.index] = result
            for record in result.usage:
                usage.record(record)
            self.events.item_done(result)

        await self._play_all(to_run, finished)
        aggregator.flush()
        summary = aggregator.summary()
        status = "interrupted" if self.interrupted else "completed"
        code = INTERRUPTED if self.interrupted else exit_code(summary, strict=self.options.strict,
                                                                max_errors=self.options.max_errors)
        totals = usage.totals()
        if self.store is not None:
            self.store.finish_run(run_id, summary, status, code, totals, completed=aggregator.items)
        ordered = [results[i.index] for i in items if i.index in results] if self.options.keep_items else None
        return RunResult(run_id, self.dataset.path, self.dataset.target_spec, summary, status, code, ordered,
                         totals, warnings, completed=aggregator.items, selected=len(items),
                         pass_at_k={g: m.value for g, m in passes.items() if m.count})

    async def _play_all(self, items: list[Item], finished: Callable[[ItemResult], None]) -> None:
        concurrency = max(1, self.options.concurrency or self.dataset.concurrency)
        workers = min(concurrency, len(items))
        if not workers:
            return
        executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="evalcli-target")
        builder = Builder(self.dataset.python_scorers, self._llm_factory, self.options.use_cache)
        conversation = Conversation(self.dataset, builder, self.options, executor)
        queue = iter(items)

        async def worker() -> None:
            for item in queue:
                if self.stopping:
                    return
                if self.options.repeat > 1:
                    finished(reduce_repeats([await conversation.play(item) for _ in range(self.options.repeat)]))
                else:
                    finished(await conversation.play(item))
                if self.stopping:
                    return

        tasks = [asyncio.ensure_future(worker()) for _ in range(workers)]
        restore = self._install_signals() if self.options.handle_signals else None
        try:
            await self._wait(tasks)
        finally:
            if restore:
                restore()
            # every conversation is over; a sync target call that timed out or was cancelled may still
            # run in its thread, and Python cannot stop it: do not wait for it
            executor.shutdown(wait=False, cancel_futures=True)

    async def _wait(self, tasks: list[asyncio.Task[None]]) -> None:
        pending = set(tasks)
        while pending:
            done, pending = await asyncio.wait(pending, timeout=0.2, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                if task.exception() is not None:
                    for other in pending:
                        other.cancel()
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

    def _install_signals(self) -> Callable[[], None] | None:
        loop = asyncio.get_running_loop()

        def stop() -> None:
            if self.stopping:
                self.options.grace_seconds = 0  # a second signal: stop now
            self.stopping = self.interrupted = True
            self.events.stopping()

        installed = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop)
                installed.append(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass

        def restore() -> None:
            for sig in installed:
                loop.remove_signal_handler(sig)

        return restore

    def _llm_factory(self) -> Any:
        from .llm import LLMClient, LLMSettings, ResponseCache

        settings = LLMSettings.from_env()
        settings.judge_concurrency = self.options.judge_concurrency
        settings.cache = self.options.use_cache
        cache = ResponseCache(self.store.path) if self.store is not None and self.options.use_cache else None
        return LLMClient(settings, cache)


async def arun_evals(dataset: Dataset | str | Path, *, store: Any = None, options: RunOptions | None = None,
                     events: Events | None = None, scorers: str | None = None) -> RunResult:
    """Run one dataset (a ``Dataset`` or a path to one) and return its result."""
    if not isinstance(dataset, Dataset):
        dataset = load_dataset(dataset, scorers)
    return await Runner(dataset, store, options or RunOptions(), events or QuietEvents()).run()


def run_evals(dataset: Dataset | str | Path, *, store: Any = None, options: RunOptions | None = None,
              events: Events | None = None, scorers: str | None = None) -> RunResult:
    """Synchronous ``arun_evals``: the entry point for Python users and for the CLI."""
    return asyncio.run(arun_evals(dataset, store=store, options=options, events=events, scorers=scorers))


