"""``--repeat N``: play each conversation N times and reduce the results to one, by mean.

Every score (top level and per turn, gates included) becomes the mean over the repeats where it was
scorable; pass@k records, per gate, whether at least one of the k repeats passed, pass^k whether all
did, counting only the repeats where the gate was scorable. A repeat that errored makes the whole
conversation an error: flakiness is never averaged away.
"""

from __future__ import annotations

from dataclasses import replace

from ..aggregate import Mean
from ..results import ItemResult, Outcome, stability_counts


def mean_outcomes(runs: list[dict[str, Outcome]]) -> dict[str, Outcome]:
    """Per id (first-seen order): the mean of the scorable outcomes, or not scorable if none was."""
    ids = list(dict.fromkeys(key for outcomes in runs for key in outcomes))
    reduced = {}
    for key in ids:
        present = [outcomes[key] for outcomes in runs if key in outcomes]
        mean = Mean()
        for outcome in present:
            if outcome.score is not None and not outcome.not_scorable:
                mean.add(outcome.score)
        first = present[0]
        if mean.count:
            reduced[key] = Outcome(score=mean.value, reason=first.reason, error=first.error)
        else:
            reduced[key] = Outcome(not_scorable=True, reason=first.reason)
    return reduced


def reduce_repeats(results: list[ItemResult]) -> ItemResult:
    """One result for a conversation played ``len(results)`` times."""
    first = results[0]
    usage = [record for r in results for record in r.usage]
    duration = sum(r.duration_ms for r in results)
    failed = next(((n, r) for n, r in enumerate(results) if r.status != "ok"), None)
    if failed is not None:
        n, bad = failed
        return replace(bad, error=f"repeat {n + 1} of {len(results)}: {bad.error}", usage=usage, duration_ms=duration,
                       repeats=len(results))
    turns = []
    for index, turn in enumerate(first.turns):
        same = [r.turns[index] for r in results if len(r.turns) > index]
        turns.append(replace(turn, gate_scores=mean_outcomes([t.gate_scores for t in same]),
                             scores=mean_outcomes([t.scores for t in same])))
    plays = {gate_id: [o for r in results if (o := r.gate_scores.get(gate_id)) is not None and not o.not_scorable]
             for gate_id in first.gate_scores}
    return replace(first, turns=turns, gate_scores=mean_outcomes([r.gate_scores for r in results]),
                   scores=mean_outcomes([r.scores for r in results]), usage=usage, duration_ms=duration,
                   repeats=len(results), gate_passes={g: sum(not o.missed_gate for o in p) for g, p in plays.items()},
                   gate_plays={g: len(p) for g, p in plays.items()}, plays_passed=sum(r.passed for r in results))


class PassRates:
    """pass@k and pass^k per gate over a run's conversations: a conversation counts for a gate when the gate was
    scorable in at least one of its k plays, and only those plays count (not scorable is never a failure)."""

    def __init__(self) -> None:
        self.at_k: dict[str, Mean] = {}
        self.all_k: dict[str, Mean] = {}
        self.stabilities: list[str | None] = []

    def add(self, result: ItemResult) -> None:
        self.stabilities.append(result.stability)
        if result.status != "ok" or result.repeats <= 1:
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
