"""One conversation: run its setup, open a session on the target, let the driver play the user's side, clean
up, score the result.

The conversation runs with its own ``target_options`` (the item's merged over the dataset's) and what its
``setup`` returned (docs/targets/frameworks.md); a generator setup is resumed after the conversation, also when it failed.
Gates run before scorers, each group over the whole conversation and then per turn (docs/datasets.md, docs/verdicts.md). A
gate that raises scores 0; a scorer that raises or errors is recorded as that scorer's error, left out of its mean,
and the conversation's gates, per-turn results and verdict stand (docs/scorers.md, "A scorer that fails").
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import time
import traceback
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..dataset import Dataset, Item, Limits
from ..errors import describe, requested_url
from ..llm import Budget, UsageSink, current_usage, dollars
from ..messages import Message
from ..otel import begin as capture_turn
from ..otel import end as end_capture
from ..otel.record import recorded as with_spans
from ..otel.record import spans_on
from ..results import ItemResult, Outcome, TurnRecord
from ..scorers import Builder, Scorer, ScorerRun, ScorerSpec, TurnView
from ..scorers.registry import BySpecs
from ..stored_json import Unstorable, check, printable, stored_text
from ..targets import (
    Adapter,
    BadReply,
    Calls,
    ConversationInfo,
    ConversationOptions,
    ItemInfo,
    Session,
    Setup,
    SetupFailed,
    Thread,
    TurnFailed,
    TurnRejected,
    TurnTimedOut,
    merge_options,
)
from ..targets.callable import OWN, package_reply
from ..tools import CURRENT, ToolPlan, recorded_turn
from .drivers import driver_for
from .play import ConversationFailed, Driver, LimitReached, PlayContext
from .tooling import ToolSettings


class Conversation:
    """Plays one item against the target through a session, and scores it."""

    def __init__(self, dataset: Dataset, builder: Builder, calls: Calls, play_context: PlayContext,
                 thresholds: dict[str, Any], ready: Callable[[], Awaitable[None]] | None = None,
                 budget: Budget | None = None, tools: ToolSettings | None = None) -> None:
        self.dataset = dataset
        self.budget = budget
        """The run's ``--max-cost`` / ``--max-tokens``: a conversation that needs a call of a spent purpose is
        ``limited``."""
        self.tools = tools or ToolSettings()
        """What the run does with tools (``--hermetic``, ``--record-tools``); each conversation gets its own plan."""
        self.ready = ready
        """Waits until the run's LLM layer is imported (judges call models): awaited before scoring."""
        self.builder = builder
        self.calls = calls
        self.play_context = play_context
        self.thresholds = thresholds
        """Raw thresholds of the run's top-level scorers, recorded with each conversation's outcomes."""
        self._scorers: BySpecs[tuple[list[Scorer], bool]] = BySpecs(BUILT_LISTS)

    async def play(self, item: Item) -> ItemResult:
        started = time.perf_counter()
        sink = UsageSink(self.budget)
        token = current_usage.set(sink)
        driver = driver_for(item)
        plan = self.tools.plan_for(self.dataset, item) if driver.calls_target else None
        plan_token = CURRENT.set(plan)  # this conversation's task only: the conversations beside it have their own
        options = self.dataset.options_of(item)
        target = self.dataset.target if driver.calls_target else None  # a recording calls no target
        thread = target.thread(options, multi_turn=item.multi_turn) if target is not None else None
        result = ItemResult(item.index, item.id, list(item.tags), item.form, "ok",
                            thread_id=thread.thread if thread else None,
                            resource_id=thread.resource if thread else None, thresholds=self.thresholds,
                            metadata=item.metadata, identity=item.identity, content=item.content)
        try:
            spec = options.get("setup")
            if thread is None:
                await self._converse(driver, None, result, None)
            elif spec is None:
                session = self._open(item, ConversationOptions(thread, item.target_options), result)
                if session is not None:
                    await self._converse(driver, session, result, self.dataset.limits_of(item), spans_on(options))
            else:
                await self._with_setup(Setup(spec, self.dataset.imported[spec], self.calls), item, options, thread,
                                       driver, result)
            if result.status == "ok":
                await self._score(item, driver, result)
        finally:
            if plan is not None:
                plan.close()
            CURRENT.reset(plan_token)
            current_usage.reset(token)
        self.tools.finished(item, plan)
        if sink.refused is not None:
            # a call it needed was not started: what ended it is the budget, not a fault (docs/budgets.md)
            result.status, result.stop_reason = "limited", "budget"
            result.error = f"limited by the budget after {len(result.turns)} turn(s): {sink.refused}"
            result.traceback = None
        result.usage = list(sink)
        result.duration_ms = (time.perf_counter() - started) * 1000
        return result

    def _open(self, item: Item, conversation: ConversationOptions, result: ItemResult) -> Session | None:
        """A session on the conversation's thread and options; ``None`` (the conversation an error) when the options
        a setup returned do not fit."""
        try:
            target = self.dataset.target
            if target is None:  # loading requires a target unless every item is recorded
                raise RuntimeError(f"item {item.id}: the dataset has no target to play it against")
            return target.open(multi_turn=item.multi_turn, calls=self.calls, conversation=conversation,
                               item=ItemInfo(item.id, item.metadata))
        except (ValueError, TypeError) as exc:
            if not conversation.from_setup:
                raise
            spec = (conversation.options or {}).get("setup")
            self._fail(result, f"setup {spec} returned options that do not fit: {exc}", exc)
            return None

    async def _with_setup(self, setup: Setup, item: Item, options: dict[str, Any], thread: Thread, driver: Driver,
                          result: ItemResult) -> None:
        """Run the setup, the conversation on what it returned, then the setup's cleanup (also after a failure)."""
        # the setup's own copies of the ground truth and metadata: what it writes there stays its own (items without
        # metadata share one empty mapping; scoring, the stored item and the run's fingerprint read the dataset's:
        # docs/targets/frameworks.md)
        info = ConversationInfo(thread.thread, thread.resource, item.id, list(item.tags), copy.deepcopy(item.ground_truth),
                                copy.deepcopy(item.metadata) if item.metadata else {})
        try:
            returned = await setup.enter(info)
        except SetupFailed as exc:
            self._fail(result, exc.message, exc.cause or exc)
            return
        try:
            assert self.dataset.target is not None  # a setup is only run for a conversation with the target
            problems = self.dataset.target.returned_problems(returned)
            if problems:
                self._fail(result, f"setup {setup.spec} returned options the target does not take: "
                                   f"{'; '.join(problems)}", ValueError("; ".join(problems)))
                return
            merged = merge_options(options, returned) if returned else item.target_options
            session = self._open(item, ConversationOptions(thread, merged, frozenset(returned)), result)
            if session is not None:
                await self._converse(driver, session, result, self.dataset.limits_of(item), spans_on(merged or {}))
        finally:
            try:
                await setup.exit()
            except SetupFailed as exc:
                if result.status == "ok":
                    self._fail(result, exc.message, exc.cause or exc)

    async def _converse(self, driver: Driver, session: Session | None, result: ItemResult,
                        limits: Limits | None, spans: bool = False) -> None:
        sink = current_usage.get()
        began = time.perf_counter()

        checked: set[int] = set()
        checks = limits is not None or (sink is not None and sink.budget is not None and session is not None)

        def before_turn() -> None:
            # a limit or a spent budget ends the conversation before its next turn: nothing is sent, nor asked. A
            # turn's limits are checked once, before it begins: a simulated user's message, once asked for, is sent
            # (its own tokens end the conversation at the next turn, docs/simulated-users.md)
            index = len(result.turns)
            if limits is not None and index not in checked:
                checked.add(index)
                _check_limits(limits, index, began, sink)
            refused = sink.refusal("target") if sink is not None and session is not None else None
            if refused is not None:
                raise ConversationFailed(f"turn {index}: not sent: {refused}", RuntimeError(refused))

        async def send(text: str, simulated: bool, resume: Any = None,
                       recorded: list[Message] | None = None) -> list[Message]:
            index = len(result.turns)
            if recorded is not None or session is None:
                output = list(recorded or [])
                try:
                    stored = stored_text(output, "recorded message")
                except Unstorable as exc:
                    raise ConversationFailed(f"turn {index}: {exc}", exc) from None
                result.turns.append(TurnRecord(index, text, output, 0.0, simulated=simulated, output_text=stored))
                return output
            started = time.perf_counter()
            plan, adapter = CURRENT.get(), self.dataset.target
            if plan is not None:
                plan.begin(index)

            outside: list[str] = []
            captured = None

            def sourced(messages: list[Message]) -> list[Message]:
                # the turn's tool calls as recorded: sources, the calls evalcli saw that the reply did not report
                # (through its plan, or in the spans the agent emitted: docs/otel.md), and the calls that ran outside
                # the plan where that is the conversation's error (docs/hermetic.md)
                messages = with_spans(captured, messages, index)
                if plan is None:
                    return messages
                if plan.watching(index):
                    return list(messages)  # copied, as recorded_turn would
                sent = adapter is not None and adapter.plan_sent
                seen = recorded_turn(messages, plan, index, service_sources=sent)
                ran = [call for call in seen.outside if not call.error or adapter is None or adapter.error_results_ran]
                outside.extend(problem for call in ran if (problem := plan.outside(call.tool, sent=sent)) is not None)
                return seen.messages

            def failed(messages: list[Message], output_retries: int = 0) -> None:
                # the turn that failed is recorded too: what the user said (and what came back before the failure, when
                # the store can write it: the failure is the conversation's error either way)
                kept = sourced(messages)
                try:
                    stored = stored_text(kept)
                except Unstorable:
                    kept, stored = [], "[]"
                result.turns.append(TurnRecord(index, text, kept, _ms(started), simulated=simulated,
                                               output_retries=output_retries, output_text=stored))

            if checks:  # else before_turn has nothing to check: no limits, no budget (docs/performance.md)
                before_turn()
            captured = capture_turn(index, result.thread_id, result.id) if spans else None
            try:
                try:
                    # `resume` only for a resume turn (an adapter that `resumes`): a session's `send(text)` is the
                    # whole protocol of every other adapter, a package's included (docs/extending.md)
                    sending = session.send(text) if resume is None else session.send(text, resume=resume)
                    # a package's adapter's answer is checked (docs/extending.md); evalcli's own make theirs right
                    reply = await sending if type(adapter).__module__.startswith(OWN) else \
                        await package_reply(sending, adapter)
                finally:
                    if captured is not None:
                        end_capture(captured)
            except TurnTimedOut as exc:
                failed([])
                raise ConversationFailed(f"turn {index}: {exc}", exc) from None
            except TurnFailed as exc:
                # the agent's run ended with an exception: keep the messages it produced before it
                failed(exc.messages, exc.output_retries)
                raise _tool_problem(plan, outside, index, adapter) or ConversationFailed(
                    f"turn {index}: the target raised {_described(exc.cause)}", exc.cause) from None
            except (BadReply, TurnRejected) as exc:
                failed([])
                raise ConversationFailed(f"turn {index}: {exc}", exc) from None
            except asyncio.CancelledError as exc:
                task = asyncio.current_task()
                if task is None or task.cancelling():
                    raise  # evalcli cancelled the turn (an interrupt): not the target's failure
                # the target's own (a library's cancel scope that leaked, `raise CancelledError`): its error, as any
                # other exception; it ended the whole run (exit 1 with a traceback, a worker's 'internal error')
                failed([])
                raise ConversationFailed(f"turn {index}: the target raised {_described(exc)}", exc) from None
            except Exception as exc:  # noqa: BLE001 - the target's failure is this conversation's error
                failed([])
                raise _tool_problem(plan, outside, index, adapter) or ConversationFailed(
                    f"turn {index}: the target raised {_described(exc)}", exc) from None
            # a turn the plan only watched, without spans, is recorded as sourced() would: its messages copied
            messages = list(reply.messages) if captured is None and plan is not None and plan.watching(index) \
                else sourced(reply.messages)
            try:  # every adapter's messages, as the store will write them (docs/targets/python.md "Return value")
                stored = stored_text(messages)
            except Unstorable as exc:
                result.turns.append(TurnRecord(index, text, [], _ms(started), simulated=simulated, output_text="[]"))
                raise ConversationFailed(f"turn {index}: {exc}", exc) from None
            try:  # and its other JSON: a framework's state, an interrupt's value (docs/targets/frameworks.md)
                if reply.structured is not None:
                    check(reply.structured, "the structured result")
                if reply.interrupt is not None:
                    check(reply.interrupt.value, "the interrupt's value")
            except Unstorable as exc:
                result.turns.append(TurnRecord(index, text, messages, _ms(started), simulated=simulated,
                                               output_text=stored))
                raise ConversationFailed(f"turn {index}: {exc}", exc) from None
            result.turns.append(TurnRecord(index, text, messages, _ms(started), simulated=simulated,
                                           structured=reply.structured, interrupt=reply.interrupt,
                                           resume=reply.resume, output_retries=reply.output_retries,
                                           guardrail=reply.guardrail, captured=captured, output_text=stored))
            # a tool call the plan refused (unmocked: error, --hermetic), or one that ran outside it where it may not,
            # is the conversation's error
            if outside or (plan is not None and plan.refusals):
                refusal = _tool_problem(plan, outside, index, adapter)
                if refusal is not None:
                    raise refusal
            return messages

        seconds = limits.seconds if limits is not None else None
        try:
            try:
                context = self.play_context.with_check(before_turn)
                if seconds is None:
                    result.stop_reason = await driver.play(send, context)
                else:
                    async with asyncio.timeout(seconds):
                        result.stop_reason = await driver.play(send, context)
            except TimeoutError:
                raise LimitReached("seconds", f"the conversation's limit of {seconds:g} s was reached") from None
        except LimitReached as exc:
            # it stops there: limited, or scored on what was played (on_limit: score)
            result.stop_reason = exc.limit
            if limits is None or not limits.scored:
                result.status = "limited"
                result.error = f"limited by {exc.limit} after {len(result.turns)} turn(s): {exc.message}"
        except ConversationFailed as exc:
            result.stop_reason = exc.stop_reason
            self._fail(result, exc.message, exc.cause or exc)
        finally:
            try:
                if session is not None:
                    await session.close()
            except Exception as exc:  # noqa: BLE001 - a session that cannot close is this conversation's error
                if result.status == "ok":
                    self._fail(result, f"closing the conversation failed: {describe(exc)}", exc)

    def _built(self, specs: list[ScorerSpec]) -> tuple[list[Scorer], bool]:
        """The scorers of a list of specs (the dataset's, or a turn's), and whether every one is ``immediate``: built
        once per run for each distinct sequence of specs (``BySpecs``), not for every conversation or turn that scores
        it (docs/performance.md)."""
        return self._scorers.get(specs, self._build)

    def _build(self, specs: Sequence[ScorerSpec]) -> tuple[list[Scorer], bool]:
        scorers = [self.builder.build(s) for s in specs]
        return scorers, all(s.immediate for s in scorers)

    @staticmethod
    def _fail(result: ItemResult, message: str, cause: BaseException) -> None:
        # a lone surrogate in an exception's text is written as its escape: the database could not store the error
        result.status, result.error = "error", printable(message)
        result.traceback = printable("".join(traceback.format_exception(cause)))

    async def _score(self, item: Item, driver: Driver, result: ItemResult) -> None:
        if self.ready is not None:
            await self.ready()
        views = tuple(TurnView(t.index, t.input, t.output, t.simulated, t.structured,
                               None if t.interrupt is None else t.interrupt.value, t.resume, t.output_retries,
                               None if t.guardrail is None else t.guardrail.to_json())
                      for t in result.turns)
        accumulated = [m for turn in result.turns for m in turn.output]
        first = result.turns[0].input if result.turns else item.first_input
        whole = ScorerRun(first, accumulated, item.ground_truth, None, views, item.expected_outcome, item.goal)
        # a list of checks (or none) is scored here, without a coroutine a list (docs/performance.md)
        gates, scorers = self.dataset.gates, self.dataset.scorers
        found = self._now(gates, whole, True)
        result.gate_scores = await self._outcomes(gates, whole, gate=True) if found is None else found
        found = self._now(scorers, whole, False)
        result.scores = await self._outcomes(scorers, whole, gate=False) if found is None else found
        for record, view in zip(result.turns, views, strict=True):
            assertions = driver.assertions(record.index)
            if assertions is None:
                continue
            run = ScorerRun(record.input, record.output, item.ground_truth, record.index, (view,),
                            item.expected_outcome, item.goal)
            gates, scorers = assertions.gates, assertions.scorers
            found = self._now(gates, run, True)
            record.gate_scores = await self._outcomes(gates, run, gate=True) if found is None else found
            if scorers:
                record.thresholds = {s.id: s.threshold.raw for s in scorers if s.threshold is not None}
            found = self._now(scorers, run, False)
            record.scores = await self._outcomes(scorers, run, gate=False) if found is None else found

    def _now(self, specs: list[ScorerSpec], run: ScorerRun, gate: bool) -> dict[str, Outcome] | None:
        """``_outcomes`` of a list that needs no waiting (none, or checks only), scored at once; ``None`` for a list
        with a scorer that may wait (a judge): ``_outcomes`` scores it."""
        if not specs:
            return {}
        scorers, immediate = self._built(specs)
        return _scored_now(specs, scorers, run, gate) if immediate else None

    async def _outcomes(self, specs: list[ScorerSpec], run: ScorerRun, *, gate: bool) -> dict[str, Outcome]:
        """Every spec's outcome on ``run``, in list order. A gate that raises or errors scores 0 (its error kept); a
        scorer that does is recorded as that scorer's error, left out of its mean: the conversation's gates, its
        per-turn results and the verdict stand (docs/scorers.md, "A scorer that fails")."""
        if not specs:
            return {}
        scorers, immediate = self._built(specs)
        if immediate:
            return _scored_now(specs, scorers, run, gate)

        exited: list[SystemExit] = []

        async def score(scorer: Scorer) -> Outcome:
            try:
                outcome = await scorer.score(run)
                return _recorded(outcome, gate)
            except Exception as exc:  # noqa: BLE001 - as above
                return _raised(exc, gate)
            except SystemExit as exc:  # a scorer called sys.exit(): raised out of a task, it would escape the loop
                exited.append(exc)
                return Outcome()

        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(score(scorer)) for scorer in scorers]
        if exited:  # raised here, in the conversation's own task: the run stops as for a target's (docs/reliability.md)
            raise exited[0]
        return {s.id: t.result() for s, t in zip(specs, tasks, strict=True)}


BUILT_LISTS = 256
"""How many sequences of specs ``_built`` keeps built (``BySpecs``: keeping every one grew a run's memory with its
conversations)."""


def _scored_now(specs: list[ScorerSpec], scorers: list[Scorer], run: ScorerRun, gate: bool) -> dict[str, Outcome]:
    """Checks never wait on anything: scoring them in turn spares tasks and event-loop round trips."""
    outcomes: dict[str, Outcome] = {}
    for spec, scorer in zip(specs, scorers, strict=True):
        try:
            outcome = scorer.score_now(run)
        except Exception as exc:  # noqa: BLE001 - a scorer's failure is its own outcome
            outcome = _raised(exc, gate)
        outcomes[spec.id] = _recorded(outcome, gate)
    return outcomes


def _recorded(outcome: Outcome, gate: bool) -> Outcome:
    """``outcome`` as recorded, in the one form the database can store: a lone surrogate in its reason, its error or a
    sample's verdict line (a judge's reasoning, a scorer's own text) written as its escape (``\\ud800``; the writer
    used to lose the conversation with the run passing); an error's outcome has no score, a gate's scores 0
    (docs/scorers.md, "A scorer that fails")."""
    reason = None if outcome.reason is None else printable(outcome.reason)
    if outcome.error is not None:
        return Outcome(score=0.0 if gate else None, reason=reason, error=printable(outcome.error), usage=outcome.usage)
    if reason is outcome.reason and all(printable(s.verdict) is s.verdict for s in outcome.samples):
        return outcome
    return dataclasses.replace(outcome, reason=reason,
                               samples=tuple(dataclasses.replace(s, verdict=printable(s.verdict))
                                             for s in outcome.samples))


def _raised(exc: Exception, gate: bool) -> Outcome:
    return Outcome(score=0.0 if gate else None, error=printable(describe(exc)))


def _check_limits(limits: Limits, index: int, began: float, sink: UsageSink | None) -> None:
    """Before a turn: stop when the conversation has reached one of its limits (``LimitReached`` names it)."""
    records = list(sink) if sink is not None else []
    tokens = sum(r.prompt_tokens + r.completion_tokens for r in records)
    cost = sum(r.cost for r in records)
    elapsed = time.perf_counter() - began
    reached: list[tuple[str, str]] = []
    if limits.turns is not None and index >= limits.turns:
        reached.append(("turns", f"its {limits.turns} turn(s) were played"))
    if limits.tokens is not None and tokens >= limits.tokens:
        reached.append(("tokens", f"{tokens} tokens were used (limit {limits.tokens})"))
    if limits.cost is not None and cost >= limits.cost:
        reached.append(("cost", f"{dollars(cost)} was spent (limit ${limits.cost:g})"))
    if limits.seconds is not None and elapsed >= limits.seconds:
        reached.append(("seconds", f"{limits.seconds:g} s went by"))
    for name, why in reached[:1]:
            raise LimitReached(name, f"turn {index} not played: {why}")


def _tool_problem(plan: ToolPlan | None, outside: list[str], index: int,
                  adapter: Adapter | None) -> ConversationFailed | None:
    """The turn's tool problem as the conversation's error: the plan's first refusal, else the first call that ran
    outside it where it may not (with what the target can do about it)."""
    if plan is not None and plan.refusals:
        return ConversationFailed(f"turn {index}: {plan.refusals[0]}")
    if outside:
        hint = adapter.outside_hint if adapter is not None else ""
        return ConversationFailed(f"turn {index}: {outside[0]}" + (f"; {hint}" if hint else ""))
    return None


def _described(exc: BaseException) -> str:
    """The target's exception on one line, naming the URL it was requesting when it says (a model endpoint that
    cannot be reached: which host was tried, e.g. api.openai.com because OPENAI_BASE_URL was not set)."""
    url = requested_url(exc)
    return describe(exc) + (f" (requesting {url})" if url else "")


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000
