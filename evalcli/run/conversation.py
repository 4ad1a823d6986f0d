"""One conversation: open a session on the target, let the driver play the user's side, score the result.

Gates run before scorers, each group over the whole conversation and then per turn (SPEC §3, §6). A
gate that raises scores 0; a scorer that raises makes the conversation an error, and its siblings
are cancelled at once so nothing keeps running (or spending) after the conversation ended.
"""

from __future__ import annotations

import asyncio
import time
import traceback
from typing import Any

from ..dataset import Dataset, Item
from ..errors import describe
from ..llm import UsageSink, current_usage
from ..messages import Message
from ..results import ItemResult, Outcome, TurnRecord
from ..scorers import Builder, Scorer, ScorerRun, ScorerSpec, TurnView
from ..targets import BadReply, Calls, ItemInfo, Session, TurnFailed, TurnTimedOut
from .drivers import ConversationFailed, Driver, PlayContext, driver_for


class ScorerFailed(Exception):
    """A scorer (not a gate) raised or errored: the conversation becomes an error."""


class Conversation:
    """Plays one item against the target through a session, and scores it."""

    def __init__(self, dataset: Dataset, builder: Builder, calls: Calls, play_context: PlayContext,
                 thresholds: dict[str, Any]) -> None:
        self.dataset = dataset
        self.builder = builder
        self.calls = calls
        self.play_context = play_context
        self.thresholds = thresholds
        """Raw thresholds of the run's top-level scorers, recorded with each conversation's outcomes."""

    async def play(self, item: Item) -> ItemResult:
        started = time.perf_counter()
        sink = UsageSink()
        token = current_usage.set(sink)
        driver = driver_for(item)
        session = self._open(item) if driver.calls_target else None  # a recording calls no target
        result = ItemResult(item.index, item.id, list(item.tags), item.form, "ok",
                            thread_id=session.thread_id if session else None,
                            resource_id=session.resource_id if session else None, thresholds=self.thresholds)
        try:
            await self._converse(driver, session, result)
            if result.status == "ok":
                await self._score(item, driver, result)
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

    def _open(self, item: Item) -> Session:
        target = self.dataset.target
        if target is None:  # loading requires a target unless every item is recorded
            raise RuntimeError(f"item {item.id}: the dataset has no target to play it against")
        return target.open(multi_turn=item.multi_turn, calls=self.calls, item=ItemInfo(item.id, item.metadata))

    async def _converse(self, driver: Driver, session: Session | None, result: ItemResult) -> None:
        async def send(text: str, simulated: bool, recorded: list[Message] | None = None) -> list[Message]:
            index = len(result.turns)
            if recorded is not None or session is None:
                result.turns.append(TurnRecord(index, text, list(recorded or []), 0.0, simulated=simulated))
                return result.turns[-1].output
            started = time.perf_counter()
            try:
                output = (await session.send(text)).messages
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
            result.stop_reason = await driver.play(send, self.play_context)
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

    @staticmethod
    def _fail(result: ItemResult, message: str, cause: BaseException) -> None:
        result.status, result.error = "error", message
        result.traceback = "".join(traceback.format_exception(cause))

    async def _score(self, item: Item, driver: Driver, result: ItemResult) -> None:
        views = tuple(TurnView(t.index, t.input, t.output, t.simulated) for t in result.turns)
        accumulated = [m for turn in result.turns for m in turn.output]
        first = result.turns[0].input if result.turns else item.first_input
        whole = ScorerRun(first, accumulated, item.ground_truth, None, views, item.expected_outcome, item.goal)
        result.gate_scores = await self._outcomes(self.dataset.gates, whole, gate=True)
        result.scores = await self._outcomes(self.dataset.scorers, whole, gate=False)
        for record, view in zip(result.turns, views, strict=True):
            assertions = driver.assertions(record.index)
            if assertions is None:
                continue
            run = ScorerRun(record.input, record.output, item.ground_truth, record.index, (view,),
                            item.expected_outcome, item.goal)
            record.gate_scores = await self._outcomes(assertions.gates, run, gate=True)
            record.scores = await self._outcomes(assertions.scorers, run, gate=False)
            record.thresholds = {s.id: s.threshold.raw for s in assertions.scorers if s.threshold is not None}

    async def _outcomes(self, specs: list[ScorerSpec], run: ScorerRun, *, gate: bool) -> dict[str, Outcome]:
        """Every spec's outcome on ``run``, in list order. A gate that raises or errors scores 0 (its error kept);
        a scorer that does makes the conversation an error (``ScorerFailed``), and its siblings are cancelled."""
        where = "" if run.turn_index is None else f" (turn {run.turn_index})"

        def settle(spec: ScorerSpec, outcome: Outcome) -> Outcome:
            if outcome.error is None:
                return outcome
            if gate:
                return Outcome(score=0.0, reason=outcome.reason, error=outcome.error, usage=outcome.usage)
            raise ScorerFailed(f"scorer {spec.id}{where} failed: {outcome.error}")

        def raised(spec: ScorerSpec, exc: Exception) -> Outcome:
            if gate:
                return Outcome(score=0.0, error=describe(exc))  # a gate that raises scores 0, with its error shown
            raise ScorerFailed(f"scorer {spec.id}{where} raised {describe(exc)}") from exc

        scorers = [self.builder.build(s) for s in specs]
        if all(hasattr(s, "score_now") for s in scorers):
            # checks never wait on anything: scoring them in turn spares tasks and event-loop round trips
            outcomes = {}
            for spec, scorer in zip(specs, scorers, strict=True):
                try:
                    outcome = scorer.score_now(run)  # type: ignore[attr-defined]
                except Exception as exc:  # noqa: BLE001 - a gate's error scores 0; a scorer's is raised
                    outcome = raised(spec, exc)
                outcomes[spec.id] = settle(spec, outcome)
            return outcomes

        async def score(spec: ScorerSpec, scorer: Scorer) -> Outcome:
            try:
                outcome = await scorer.score(run)
            except Exception as exc:  # noqa: BLE001 - as above
                outcome = raised(spec, exc)
            return settle(spec, outcome)

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
