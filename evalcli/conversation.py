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

from .adapters import Calls, Session, TurnFailed, TurnTimedOut
from .adapters.callable import BadReply
from .dataset import Dataset, Item
from .drivers import ConversationFailed, PlayContext
from .errors import describe
from .llm import UsageSink, current_usage
from .messages import Message
from .result import ItemResult, TurnRecord
from .scorers.base import Outcome, ScorerRun, TurnView
from .scorers.kinds import Scorer
from .scorers.registry import Builder, ScorerSpec


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
        session = self.dataset.target.open(multi_turn=item.driver.multi_turn, calls=self.calls)
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
