"""Gates, thresholds, per-turn results and the verdict (docs/verdicts.md), folded from conversations in dataset order.

Every mean is a plain left-to-right sum in dataset order (item order, then turn order) divided by the
count, so a run's figures never depend on which conversation finished first. Results may arrive out
of order: what folding reads of them (their outcomes' scores, not their messages) waits until every earlier item
has been folded in.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from .errors import ExitCode
from .records import record
from .results import (
    GateResult,
    ItemResult,
    Outcome,
    Plan,
    Summary,
    Threshold,
    ThresholdResult,
    TurnRecord,
    TurnResult,
    Verdict,
    reaches_gate,
    stability_counts,
)


@record
class Mean:
    """A running mean that adds in arrival order, exactly like summing a list left to right."""

    total: float = 0.0
    count: int = 0

    def add(self, value: float) -> None:
        self.total += value
        self.count += 1

    @property
    def value(self) -> float:
        return self.total / self.count


def _numeric(outcome: Outcome) -> float | None:
    """The score to average, or ``None`` when the outcome is not scorable (counted apart)."""
    return None if outcome.not_scorable else outcome.score


@record
class GateFold:
    """Whether a gate passed over a run: its mean reaches 1.0, except under repeats, where it passes only when every
    conversation passed it by the one rule of repeats (``passrate.passes_at_rate``, ``Outcome.reached``): a mean of
    plays passed at ``--pass-rate`` 0.8 is below 1 yet passed (docs/verdicts.md#repeats-and-the-pass-rate)."""

    repeated: bool = False
    missed: bool = False

    def add(self, outcome: Outcome, repeated: bool) -> None:
        """Fold one conversation's outcome of the gate; ``repeated``: the conversation was played under repeats. Only
        then does its ``reached`` decide: read back from a database (``--resume``, ``merge``), a conversation played
        once carries the ``passed`` it was stored with too, and the gate's mean still decides (plays scoring 2 and 0
        average 1 and pass, as in the run that played them)."""
        self.repeated = self.repeated or (repeated and outcome.reached is not None)
        self.missed = self.missed or outcome.missed_gate

    def passed(self, mean: float) -> bool:
        return not self.missed if self.repeated else reaches_gate(mean)


@record
class _TurnBucket:
    gates: dict[str, Mean] = field(default_factory=dict)
    folds: dict[str, GateFold] = field(default_factory=dict)
    thresholds: dict[str, tuple[Any, Mean]] = field(default_factory=dict)
    scores: dict[str, Mean] = field(default_factory=dict)


class Aggregator:
    """Folds ``ItemResult``s (any arrival order) into a ``Summary`` that depends only on dataset order."""

    def __init__(self, plan: Plan, order: list[int]) -> None:
        self.plan = plan
        self.order = order
        """Item indexes in the order they are folded (the dataset order of the selected items)."""
        self._position = {index: n for n, index in enumerate(order)}
        self._next = 0
        self._waiting: dict[int, ItemResult] = {}
        self.gates: dict[str, Mean] = {g: Mean() for g in plan.gate_ids}
        self.gate_folds: dict[str, GateFold] = {g: GateFold() for g in plan.gate_ids}
        self.scores: dict[str, Mean] = {s: Mean() for s in plan.scorer_ids}
        self.scored: dict[str, None] = {}
        """Scorer ids in the order they first scored (``scores``' keys are in that order, as Mastra's are)."""
        self.not_scorable_early: dict[str, int] = {}
        self.not_scorable_scorers: dict[str, int] = {}
        self.turns: dict[int, _TurnBucket] = {}
        self.turn_gates: dict[str, bool] = {}
        """Per-turn gate ids met so far, and whether any conversation's turn scored it."""
        self.items = 0
        self.errors = 0
        self.limited = 0
        self.scorer_errors: dict[str, int] = {}
        """Per scorer id, the conversations (or turns) where it errored: left out of its mean, never not-scorable."""

    def expects(self, index: int) -> bool:
        """Whether the item with this index is part of the run."""
        return index in self._position

    def add(self, result: ItemResult) -> None:
        """Accept one conversation's result; fold it and any results it was holding back. One held back behind an
        earlier conversation still playing (a slow one, another worker's) keeps only what folding reads, never its
        messages: a run's memory does not grow with every conversation that finishes meanwhile."""
        position = self._position[result.index]
        if position != self._next:
            self._waiting[position] = _held(result)
            return
        self._fold(result)
        self._next += 1
        while self._next in self._waiting:
            self._fold(self._waiting.pop(self._next))
            self._next += 1

    def flush(self) -> None:
        """Fold every result still held back behind a missing one (an interrupted run has gaps), in order."""
        for position in sorted(self._waiting):
            self._fold(self._waiting.pop(position))

    def _count(self, table: dict[str, int], key: str) -> None:
        table[key] = table.get(key, 0) + 1

    def _fold(self, result: ItemResult) -> None:
        self.items += 1
        if result.status != "ok":
            self.errors += 1
            self.limited += result.status == "limited"
            return
        # the order of not-scorable counts follows Mastra: top-level gates, per-turn ones, then scorers
        self._fold_top(result.gate_scores, self.gates, self.not_scorable_early, {})
        for gate_id, fold in self.gate_folds.items():
            outcome = result.gate_scores.get(gate_id)
            if outcome is not None and _numeric(outcome) is not None:
                fold.add(outcome, result.repeated)
        if result.per_turn:
            for turn in result.turns:
                self._fold_turn(turn, result.repeated)
        self._fold_top(result.scores, self.scores, self.not_scorable_scorers, self.scored)

    def _fold_top(self, outcomes: dict[str, Outcome], means: dict[str, Mean], not_scorable: dict[str, int],
                  scored: dict[str, None]) -> None:
        for key, mean in means.items():
            outcome = outcomes.get(key)
            if outcome is None or self._errored(key, outcome):
                continue
            value = _numeric(outcome)
            if value is not None:
                mean.add(value)
                scored[key] = None
            else:
                self._count(not_scorable, key)

    def _fold_turn(self, turn: TurnRecord, repeated: bool) -> None:
        # a bucket, mean or fold is made the first time its key is met, not made and dropped on every turn after
        bucket = self.turns.get(turn.index)
        if bucket is None:
            bucket = self.turns[turn.index] = _TurnBucket()
        for gate_id, outcome in turn.gate_scores.items():
            value = _numeric(outcome)
            self.turn_gates[gate_id] = self.turn_gates.get(gate_id, False) or value is not None
            if value is not None:
                mean = bucket.gates.get(gate_id)
                if mean is None:
                    mean = bucket.gates[gate_id] = Mean()
                fold = bucket.folds.get(gate_id)
                if fold is None:
                    fold = bucket.folds[gate_id] = GateFold()
                mean.add(value)
                fold.add(outcome, repeated)
            else:
                self._count(self.not_scorable_early, gate_id)
        for scorer_id, outcome in turn.scores.items():
            if self._errored(scorer_id, outcome):
                continue
            value = _numeric(outcome)
            if value is None:
                self._count(self.not_scorable_early, scorer_id)
                continue
            if scorer_id in turn.thresholds:
                if scorer_id not in bucket.thresholds:
                    bucket.thresholds[scorer_id] = (turn.thresholds[scorer_id], Mean())
                bucket.thresholds[scorer_id][1].add(value)
            scored = bucket.scores.get(scorer_id)
            if scored is None:
                scored = bucket.scores[scorer_id] = Mean()
            scored.add(value)

    def _errored(self, key: str, outcome: Outcome) -> bool:
        """A scorer's outcome that is its error (a gate's error scores 0 and is folded as a score)."""
        if outcome.error is None or outcome.score is not None:
            return False
        self._count(self.scorer_errors, key)
        return True

    def summary(self) -> Summary:
        """The run's aggregate so far (call after every result has been added)."""
        gate_results = [GateResult(g, self.gate_folds[g].passed(m.value), m.value) for g, m in self.gates.items()
                        if m.count]
        threshold_results = []
        for scorer_id, raw in self.plan.thresholds.items():
            mean = self.scores.get(scorer_id)
            if mean is None or not mean.count:
                continue
            threshold = Threshold.from_raw(raw)
            threshold_results.append(ThresholdResult(scorer_id, threshold.passed(mean.value), mean.value, raw))
        turn_results = []
        for index in sorted(self.turns):
            bucket = self.turns[index]
            turn_results.append(TurnResult(
                index,
                [GateResult(g, bucket.folds[g].passed(m.value), m.value) for g, m in bucket.gates.items()],
                [ThresholdResult(s, Threshold.from_raw(raw).passed(m.value), m.value, raw)
                 for s, (raw, m) in bucket.thresholds.items()],
                {s: m.value for s, m in bucket.scores.items()},
            ))
        not_scorable = dict(self.not_scorable_early)
        for key, count in self.not_scorable_scorers.items():
            not_scorable[key] = not_scorable.get(key, 0) + count
        return Summary(
            scores={s: self.scores[s].value for s in self.scored},
            total_items=self.items, errors=self.errors, not_scorable=not_scorable, scorer_errors=dict(self.scorer_errors),
            limited=self.limited,
            gate_results=gate_results, threshold_results=threshold_results, turn_results=turn_results,
            verdict=verdict(gate_results, threshold_results, turn_results),
            unscored_gates=[g for g, m in self.gates.items() if not m.count and self.items > self.errors]
            + [g for g, scored in self.turn_gates.items() if not scored],
        )


def _held(result: ItemResult) -> ItemResult:
    """What ``Aggregator._fold`` reads of a conversation: its status, form, repeats and each outcome's score (each
    turn's too), without its messages, texts, plays, or the outcomes' reasons and usage."""
    turns = [TurnRecord(t.index, "", [], 0.0, _scores(t.gate_scores), _scores(t.scores), t.thresholds)
             for t in result.turns] if result.per_turn else []
    return ItemResult(result.index, "", [], result.form, result.status, None, None, turns,
                      _scores(result.gate_scores), _scores(result.scores), repeats=result.repeats,
                      settled=result.settled)


def _scores(outcomes: dict[str, Outcome]) -> dict[str, Outcome]:
    return {key: Outcome(o.score, None, o.not_scorable, o.error, reached=o.reached) for key, o in outcomes.items()}


def unscored_warning(summary: Summary) -> str | None:
    """The one warning line for declared gates that were not scorable on any conversation (``None``: there are none)."""
    gates = summary.unscored_gates
    if not gates:
        return None
    names = ", ".join(gates)
    return (f"gate{'s' if len(gates) > 1 else ''} {names} {'were' if len(gates) > 1 else 'was'} not scorable on any "
            "conversation: nothing was checked (with --strict this run exits 3)")


def verdict(gates: list[GateResult], thresholds: list[ThresholdResult], turns: list[TurnResult]) -> Verdict | None:
    """``failed`` if any gate failed, else ``scored`` if any threshold failed, else ``passed``; none without either."""
    all_gates = [*gates, *(g for t in turns for g in t.gate_results)]
    all_thresholds = [*thresholds, *(r for t in turns for r in t.threshold_results)]
    if not all_gates and not all_thresholds:
        return None
    if not all(g.passed for g in all_gates):
        return "failed"
    if not all(r.passed for r in all_thresholds):
        return "scored"
    return "passed"


def exit_code(summary: Summary, *, strict: bool, max_errors: int = 0, invalid: bool = False) -> ExitCode:
    """docs/reference/exit-codes.md, precedence 2, then 1, then 4 (a conversation errored, or a scorer on one:
    docs/scorers.md), then 3
    (with ``strict``: a threshold missed, or a declared gate that no conversation could score, docs/identity.md), then 0."""
    if invalid:
        return ExitCode.BAD_INPUT
    if summary.verdict == "failed":
        return ExitCode.FAILED
    if summary.errors + sum(summary.scorer_errors.values()) > max_errors:
        return ExitCode.ERRORED
    if strict and (summary.verdict == "scored" or summary.unscored_gates):
        return ExitCode.SCORED
    return ExitCode.OK


class PassRates:
    """pass@k and pass^k per gate over a run's conversations (as played, resumed or merged from shards): a
    conversation counts for a gate when the gate was scorable in at least one of its k plays, and only those plays
    count (not scorable is never a failure)."""

    def __init__(self) -> None:
        self.at_k: dict[str, Mean] = {}
        self.all_k: dict[str, Mean] = {}
        self.stabilities: list[str | None] = []
        self.plays = 0
        """Plays of every conversation together."""

    def add(self, result: ItemResult) -> None:
        self.stabilities.append(result.stability)
        self.plays += result.repeats
        if result.status != "ok" or not result.repeated:
            return
        for gate_id, scorable in result.gate_plays.items():
            if not scorable:
                continue
            passed = result.gate_passes.get(gate_id, 0)
            self.at_k.setdefault(gate_id, Mean()).add(float(passed > 0))
            self.all_k.setdefault(gate_id, Mean()).add(float(passed == scorable))

    def stability(self) -> dict[str, int]:
        """How many conversations are stable-pass, flaky and stable-fail (``{}`` without repeats)."""
        return stability_counts(self.stabilities)

    def pass_at_k(self) -> dict[str, float]:
        """Per gate, the share of conversations where at least one scorable play passed."""
        return {g: m.value for g, m in self.at_k.items() if m.count}

    def pass_all_k(self) -> dict[str, float]:
        """Per gate, the share of conversations where every scorable play passed (pass^k)."""
        return {g: m.value for g, m in self.all_k.items() if m.count}

    def to_json(self, repeat: int, auto: bool = False, pass_rate: float = 1.0) -> dict[str, Any]:
        """What the JSON result of a run of ``repeat`` plays adds (``RunResult.to_json``): nothing for one play."""
        if repeat <= 1:
            return {}
        return {"repeat": repeat, "repeat_auto": auto, "pass_rate": pass_rate, "plays": self.plays,
                "pass_at_k": self.pass_at_k(), "pass_all_k": self.pass_all_k()}
