"""``run_evals``: play every conversation against the target, score it, fold the verdict.

The runner never prints: it reports through an ``Events`` object (the CLI's is a progress bar and
warnings). Conversations run concurrently, a conversation's turns strictly in order. A ``RunContext``
owns what a run holds (target threads, the store's writer thread, the LLM client and its cache) and
closes it at the end, for library callers too. Each finished conversation flows once to every
consumer: the aggregate, the store (through its writer thread) and the events.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .adapters import Session, TurnFailed, TurnTimedOut
from .adapters.callable import BadReply
from .aggregate import Aggregator, Mean, Plan, exit_code
from .calls import TargetCalls, TargetThreads
from .dataset import Dataset, Item, load_dataset
from .drivers import ConversationFailed, PlayContext
from .errors import INTERNAL_ERROR, UsageError, describe
from .ids import new_run_id
from .llm import UsageSink, current_usage
from .messages import Message
from .repeat import reduce_repeats
from .result import ItemResult, RunResult, TurnRecord
from .scorers.base import Outcome, ScorerRun, TurnView
from .scorers.kinds import Scorer
from .scorers.registry import Builder, ScorerSpec
from .select import Selection

INTERRUPTED = 130


@dataclass
class RunOptions:
    """How to run a dataset; every field has the CLI's default."""

    concurrency: int | None = None
    """Conversations in flight; ``None`` takes the dataset's ``concurrency``."""
    judge_concurrency: int = 8
    """Judge calls in flight across all conversations."""
    use_cache: bool = True
    """Reuse cached judge and simulator replies (``--no-cache`` turns it off)."""
    strict: bool = False
    """Exit 3 on a ``scored`` verdict."""
    max_errors: int = 0
    """Item errors tolerated before the exit code says 4."""
    selection: Selection = field(default_factory=Selection)
    turn_timeout: float | None = None
    """Seconds one target call may take (its own call only, not time spent waiting) before the conversation
    is an error; ``None``: no limit."""
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
    """Play each conversation this many times; results are reduced by mean (pass@k and pass^k for gates)."""


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


SWITCH_INTERVAL = 0.0005
"""Seconds a thread may hold the GIL while another waits, during a run (Python's default is 5 ms): the
writer and target threads share the GIL with the event loop, and a long hand-over would make every
timer and every reply wait behind them."""


class RunContext:
    """Everything one run holds, closed when it ends: target threads, the writer, the LLM client and cache."""

    def __init__(self, store: Any, options: RunOptions) -> None:
        self.store = store
        self.options = options
        self._switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(min(self._switch_interval, SWITCH_INTERVAL))
        self.threads = TargetThreads()
        self.calls = TargetCalls(self.threads, options.turn_timeout)
        self.writer = store.writer() if store is not None else None
        self._llm: Any = None

    def llm(self) -> Any:
        """The run's LLM client (litellm is imported only now), with the response cache of the run's database."""
        if self._llm is None:
            from .llm import LLMClient, LLMSettings, ResponseCache

            settings = LLMSettings.from_env()
            settings.judge_concurrency = self.options.judge_concurrency
            settings.cache = self.options.use_cache
            cache = None
            if self.store is not None and self.options.use_cache:
                cache = ResponseCache(self.store.path, writer=self.writer)
            self._llm = LLMClient(settings, cache)
        return self._llm

    async def write(self, build: Callable[[], list[Any]]) -> None:
        """Statements built and written by the writer thread; the caller waits without blocking the loop."""
        if self.writer is not None:
            await asyncio.wrap_future(self.writer.statements(build))

    def write_later(self, build: Callable[[], list[Any]]) -> None:
        """Statements handed to the writer thread; nobody waits (errors surface when the run closes)."""
        if self.writer is not None:
            self.writer.statements(build)

    async def aclose(self) -> None:
        """Flush and stop the writer (off the loop), close the cache, let idle target threads end."""
        try:
            if self.writer is not None:
                await asyncio.to_thread(self.writer.close)
        finally:
            if self._llm is not None and self._llm.cache is not None:
                self._llm.cache.close()
            self.threads.close()
            sys.setswitchinterval(self._switch_interval)


class Conversation:
    """Plays one item against the target through a session, and scores it."""

    def __init__(self, dataset: Dataset, builder: Builder, context: RunContext, plan: Plan) -> None:
        self.dataset = dataset
        self.builder = builder
        self.context = context
        self.thresholds = plan.thresholds
        self.play_context = PlayContext(context.llm, context.options.use_cache)

    async def play(self, item: Item) -> ItemResult:
        started = time.perf_counter()
        sink = UsageSink()
        token = current_usage.set(sink)
        session = self.dataset.target.open(multi_turn=item.driver.multi_turn, calls=self.context.calls)
        result = ItemResult(item.index, item.id, list(item.tags), item.form, "ok", thread_id=session.thread_id,
                            resource_id=session.resource_id, thresholds=self.thresholds)
        try:
            await self._converse(item, session, result)
            if result.status == "ok":
                await self._score(item, result)
        except ScorerFailed as exc:
            self._fail(result, str(exc), exc.__cause__ or exc)
            # an errored conversation is left out of scoring: show no partial scores for it either
            result.gate_scores, result.scores = {}, {}
            for record in result.turns:
                record.gate_scores, record.scores = {}, {}
        finally:
            current_usage.reset(token)
        result.usage = list(sink)
        result.duration_ms = (time.perf_counter() - started) * 1000
        return result

    async def _converse(self, item: Item, session: Session, result: ItemResult) -> None:
        async def send(text: str, simulated: bool) -> list[Message]:
            index = len(result.turns)
            started = time.perf_counter()
            try:
                output = await session.send(text)
            except TurnTimedOut as exc:
                raise ConversationFailed(f"turn {index}: {exc}", exc) from None
            except TurnFailed as exc:
                # the agent's run ended with an exception: keep the messages it produced before it
                result.turns.append(TurnRecord(index, text, exc.messages, _ms(started), simulated=simulated))
                raise ConversationFailed(f"turn {index}: the target raised {describe(exc.cause)}", exc.cause) from None
            except BadReply as exc:
                raise ConversationFailed(f"turn {index}: {exc}", exc) from None
            except Exception as exc:  # noqa: BLE001 - the target's failure is this conversation's error
                raise ConversationFailed(f"turn {index}: the target raised {describe(exc)}", exc) from None
            result.turns.append(TurnRecord(index, text, output, _ms(started), simulated=simulated))
            return output

        try:
            result.stop_reason = await item.driver.play(send, self.play_context)
        except ConversationFailed as exc:
            result.stop_reason = exc.stop_reason
            self._fail(result, exc.message, exc.cause or exc)
        finally:
            try:
                await session.close()
            except Exception as exc:  # noqa: BLE001 - a session that cannot close is this conversation's error
                if result.status == "ok":
                    self._fail(result, f"closing the conversation failed: {describe(exc)}", exc)

    @staticmethod
    def _fail(result: ItemResult, message: str, cause: BaseException) -> None:
        result.status, result.error = "error", message
        result.traceback = "".join(traceback.format_exception(cause))

    async def _score(self, item: Item, result: ItemResult) -> None:
        views = tuple(TurnView(t.index, t.input, t.output, t.simulated) for t in result.turns)
        accumulated = [m for turn in result.turns for m in turn.output]
        first = result.turns[0].input if result.turns else item.first_input
        whole = ScorerRun(first, accumulated, item.ground_truth, None, views, item.expected_outcome, item.goal)
        result.gate_scores = await self._gates(self.dataset.gates, whole)
        result.scores = await self._scorers(self.dataset.scorers, whole)
        for turn, record, view in zip(item.turns or (), result.turns, views, strict=False):
            run = ScorerRun(record.input, record.output, item.ground_truth, record.index, (view,),
                            item.expected_outcome, item.goal)
            record.gate_scores = await self._gates(turn.gates, run)
            record.scores = await self._scorers(turn.scorers, run)
            record.thresholds = {s.id: s.threshold.raw for s in turn.scorers if s.threshold is not None}

    async def _gates(self, specs: list[ScorerSpec], run: ScorerRun) -> dict[str, Outcome]:
        def settle(outcome: Outcome) -> Outcome:
            if outcome.error is not None:
                return Outcome(score=0.0, reason=outcome.reason, error=outcome.error, usage=outcome.usage)
            return outcome

        async def gate(spec: ScorerSpec, scorer: Scorer) -> Outcome:
            try:
                return settle(await scorer.score(run))
            except Exception as exc:  # noqa: BLE001 - a gate that raises scores 0, with its error shown
                return Outcome(score=0.0, error=describe(exc))

        scorers = [self.builder.build(s) for s in specs]
        if all(hasattr(s, "score_now") for s in scorers):
            # checks never wait on anything: scoring them in turn spares tasks and event-loop round trips
            outcomes = {}
            for spec, scorer in zip(specs, scorers, strict=True):
                try:
                    outcomes[spec.id] = settle(scorer.score_now(run))  # type: ignore[attr-defined]
                except Exception as exc:  # noqa: BLE001 - as above
                    outcomes[spec.id] = Outcome(score=0.0, error=describe(exc))
            return outcomes
        results = await asyncio.gather(*(gate(s, scorer) for s, scorer in zip(specs, scorers, strict=True)))
        return {s.id: o for s, o in zip(specs, results, strict=True)}

    async def _scorers(self, specs: list[ScorerSpec], run: ScorerRun) -> dict[str, Outcome]:
        where = "" if run.turn_index is None else f" (turn {run.turn_index})"

        def settle(spec: ScorerSpec, outcome: Outcome) -> Outcome:
            if outcome.error is not None:
                raise ScorerFailed(f"scorer {spec.id}{where} failed: {outcome.error}")
            return outcome

        async def score(spec: ScorerSpec, scorer: Scorer) -> Outcome:
            try:
                outcome = await scorer.score(run)
            except Exception as exc:
                raise ScorerFailed(f"scorer {spec.id}{where} raised {describe(exc)}") from exc
            return settle(spec, outcome)

        scorers = [self.builder.build(s) for s in specs]
        if all(hasattr(s, "score_now") for s in scorers):
            outcomes = {}
            for spec, scorer in zip(specs, scorers, strict=True):
                try:
                    outcome = scorer.score_now(run)  # type: ignore[attr-defined]
                except Exception as exc:
                    raise ScorerFailed(f"scorer {spec.id}{where} raised {describe(exc)}") from exc
                outcomes[spec.id] = settle(spec, outcome)
            return outcomes
        # one scorer failing makes the conversation an error: its siblings are cancelled, not left spending
        tasks: list[asyncio.Task[Outcome]] = []
        try:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(score(s, scorer)) for s, scorer in zip(specs, scorers, strict=True)]
        except BaseExceptionGroup as failed:
            first = _first_failure(failed, tasks)
            if first is not None:
                raise first from first.__cause__
            raise
        return {s.id: t.result() for s, t in zip(specs, tasks, strict=True)}


def _first_failure(group: BaseExceptionGroup[Any], tasks: list[asyncio.Task[Outcome]]) -> ScorerFailed | None:
    """The failure of the first scorer in list order (what the conversation's error names)."""
    for task in tasks:
        if task.done() and not task.cancelled() and isinstance(task.exception(), ScorerFailed):
            return task.exception()  # type: ignore[return-value]
    matched, _ = group.split(ScorerFailed)
    return matched.exceptions[0] if matched else None  # type: ignore[return-value]


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000


def memory_warning(dataset: Dataset, items: list[Item]) -> str | None:
    """Once per run: multi-turn conversations against a target that cannot remember."""
    count = sum(1 for i in items if i.driver.multi_turn)
    if not count or dataset.target.has_memory:
        return None
    return (f"target {dataset.target_spec} has no memory: its {count} multi-turn "
            f"conversation{'s' if count != 1 else ''} will run, but no turn can recall the earlier ones "
            "(give the target a 'memory' attribute, e.g. evalcli.Memory)")


def unregistered_warning(dataset: Dataset) -> str | None:
    """Once per run, one line: which inline gates and scorers score without storing rows, and how to register
    the first of them (an example built from the user's own reference)."""
    specs = [s for s in dataset.all_specs() if not s.registered]
    if not specs:
        return None
    gates = {s.id for s in (*dataset.gates, *(g for i in dataset.items for t in i.turns or () for g in t.gates))}
    gate_ids = list(dict.fromkeys(s.id for s in specs if s.id in gates))
    scorer_ids = list(dict.fromkeys(s.id for s in specs if s.id not in gates))
    parts = [f"{label}{'s' if len(ids) > 1 else ''} {', '.join(ids)}"
             for label, ids in (("gate", gate_ids), ("scorer", scorer_ids)) if ids]
    count = len(gate_ids) + len(scorer_ids)
    where = Path(dataset.registry.path).name if dataset.registry.path else "scorers.yaml"
    first = specs[0]
    name = _slug(first.id)
    return (f"{' and '.join(parts)} {'is' if count == 1 else 'are'} not registered in {where}: scored, but not stored; "
            f"to compare across runs add e.g. '{name}: {_inline_yaml(first)}' under 'scorers:' in {where} and refer "
            f"to it as {name}")


def _inline_yaml(spec: ScorerSpec) -> str:
    """The reference as one line of YAML: ``{includes: Brooklyn}``, ``{called_tool: {name: x, times: 2}}``."""
    import yaml

    from .scorers.kinds import find

    kind = find(spec.kind)
    args = dict(spec.args)
    if kind is not None and kind.main is None and not args:
        return spec.kind
        defaults = {k: f.get_default(call_default_factory=True) for k, f in kind.args.model_fields.items()
                    if not f.is_required()}
        args = {k: v for k, v in args.items() if k not in defaults or defaults[k] != v}
        if kind.main is not None and list(args) == [kind.main]:
            return yaml.safe_dump({spec.kind: args[kind.main]}, default_flow_style=True, allow_unicode=True,
                                  width=10_000).strip()
    return yaml.safe_dump({spec.kind: args or None}, default_flow_style=True, allow_unicode=True, width=10_000).strip()


def _slug(text: str) -> str:
    import re

    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:40].rstrip("-") or "my-scorer"


class Runner:
    """One run of one dataset (new, resumed or a re-run of failures)."""

    def __init__(self, dataset: Dataset, store: Any, options: RunOptions, events: Events) -> None:
        self.dataset = dataset
        self.store = store
        self.options = options
        self.events = events
        self.stopping = False
        self.interrupted = False

    async def _select(self) -> tuple[list[Item], dict[int, ItemResult], str]:
        items = self.options.selection.apply(self.dataset.items)
        if self.options.only_indexes is not None:
            items = [i for i in items if i.index in self.options.only_indexes]
        kept: dict[int, ItemResult] = {}
        run_id = self.options.resume or new_run_id()
        if self.options.resume:
            if self.store is None:
                raise UsageError("--resume needs a database", "pass --db PATH")
            stored = await asyncio.to_thread(lambda: list(self.store.load_items(run_id)))
            kept = {r.index: r for r in stored if r.status == "ok"}
        return items, kept, run_id

    async def run(self) -> RunResult:
        context = RunContext(self.store, self.options)
        try:
            scope = self.dataset.scope
            if scope is None:
                return await self._run(context)
            with scope:
                return await self._run(context)
        finally:
            await context.aclose()

    async def _run(self, context: RunContext) -> RunResult:
        items, kept, run_id = await self._select()
        plan = plan_of(self.dataset)
        aggregator = Aggregator(plan, [i.index for i in items])
        warnings = [w for w in (memory_warning(self.dataset, items), unregistered_warning(self.dataset)) if w]
        for text in warnings:
            self.events.warning(text)
        store = self.store
        if store is not None:
            resume = bool(self.options.resume)
            await context.write(lambda: store.resume_statements(run_id) if resume else
                                store.begin_statements(run_id, self.dataset, plan, self.options))
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
        all_passes: dict[str, Mean] = {}

        def finished(result: ItemResult) -> None:
            aggregator.add(result)
            if result.status == "ok" and result.repeats > 1:
                for gate_id, count in result.gate_passes.items():
                    passes.setdefault(gate_id, Mean()).add(float(count > 0))
                    all_passes.setdefault(gate_id, Mean()).add(float(count == result.repeats))
            if store is not None:
                context.write_later(lambda: store.item_statements(run_id, result, registered))
            if self.options.keep_items:
                results[result.index] = result
            for record in result.usage:
                usage.record(record)
            self.events.item_done(result)

        try:
            await self._play_all(to_run, finished, context, plan)
        except BaseException as exc:
            # whatever happened, the run's row ends with a status and an exit code, never 'running'
            interrupted = isinstance(exc, (KeyboardInterrupt, asyncio.CancelledError))
            status, code = ("interrupted", INTERRUPTED) if interrupted else ("failed", INTERNAL_ERROR)
            aggregator.flush()
            partial = aggregator.summary()
            if store is not None:
                context.write_later(lambda: store.finish_statements(run_id, partial, status, code, aggregator.items))
            raise
        status = "interrupted" if self.interrupted else "completed"
        aggregator.flush()
        summary = aggregator.summary()
        code = INTERRUPTED if self.interrupted else exit_code(summary, strict=self.options.strict,
                                                                max_errors=self.options.max_errors)
        if store is not None:
            await context.write(lambda: store.finish_statements(run_id, summary, status, code, aggregator.items))
        ordered = [results[i.index] for i in items if i.index in results] if self.options.keep_items else None
        return RunResult(run_id, self.dataset.path, self.dataset.target_spec, summary, status,
                         code, ordered, usage.totals(), warnings, completed=aggregator.items, selected=len(items),
                         pass_at_k={g: m.value for g, m in passes.items() if m.count},
                         pass_all_k={g: m.value for g, m in all_passes.items() if m.count},
                         repeat=self.options.repeat, dataset_id=self.dataset.name)

    async def _play_all(self, items: list[Item], finished: Callable[[ItemResult], None], context: RunContext,
                        plan: Plan) -> None:
        concurrency = max(1, self.options.concurrency or self.dataset.concurrency)
        workers = min(concurrency, len(items))
        if not workers:
            return
        builder = Builder(self.dataset.python_scorers, context.llm, self.options.use_cache)
        conversation = Conversation(self.dataset, builder, context, plan)
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
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
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
