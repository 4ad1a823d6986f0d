"""``--repeat N`` and ``--repeat auto[:MAX]``: play each conversation N times (or until the sequential rule settles
it, ``passrate.settle``; docs/verdicts.md#sequential-repeats) and reduce the results to one, by mean.

Every score (top level and per turn, gates included) becomes the mean over the repeats where it was
scorable, with the reason of the play that scored lowest (so a gate whose mean shows a failure explains it
with a failing play's reason). Whether a gate passed is never read off that mean: a play passes when it
reached every gate on every turn, and a gate passed on the conversation only when every play that scored it
reached it, or with ``--pass-rate P`` at least P of them (``passrate.passes_at_rate``, the one rule of a gate
under repeats; docs/history.md#stability-under-repeat), so the conversation's ``passed``, its stability and pass@k /
pass^k agree whatever the gate's score range (plays scoring 2.0 and 0.5 average 1.25, and the conversation is
flaky, not passed). pass@k records, per gate (top level, and per turn by id), whether at least one
of the k repeats passed, pass^k whether all did, counting only the repeats where the gate was scorable. A
repeat that errored makes the whole conversation an error: flakiness is never averaged away. Every play is
kept on the result (``ItemResult.plays``, numbered from 1) and stored (docs/identity.md).
"""

from __future__ import annotations

from dataclasses import replace

from ..aggregate import Mean
from ..aggregate import PassRates as PassRates
from ..passrate import DEFAULT_PASS_RATE, passes_at_rate
from ..results import ItemResult, Outcome


def mean_outcomes(runs: list[dict[str, Outcome]], *, gates: bool = False,
                  pass_rate: float = DEFAULT_PASS_RATE) -> dict[str, Outcome]:
    """Per id (first-seen order): the mean of the scorable outcomes with the reason (and error) of the lowest-scoring
    one (the first of equals), or not scorable if none was. For ``gates``, the mean is reached when at least
    ``pass_rate`` of the plays that scored it reached it (``passes_at_rate``; every play by default), whatever the
    scores' range (``Outcome.reached``)."""
    ids = list(dict.fromkeys(key for outcomes in runs for key in outcomes))
    reduced = {}
    for key in ids:
        present = [outcomes[key] for outcomes in runs if key in outcomes]
        mean = Mean()
        scored = [outcome for outcome in present if outcome.score is not None and not outcome.not_scorable]
        for outcome in scored:
            mean.add(outcome.score or 0.0)  # never None here
        if scored:
            worst = min(scored, key=lambda outcome: outcome.score or 0.0)
            reached = passes_at_rate(sum(not o.missed_gate for o in scored), len(scored), pass_rate) if gates else None
            reduced[key] = Outcome(score=mean.value, reason=worst.reason, error=worst.error, reached=reached)
        else:
            reduced[key] = Outcome(not_scorable=True, reason=present[0].reason)
    return reduced


def reduce_repeats(results: list[ItemResult], pass_rate: float = DEFAULT_PASS_RATE,
                   settled: str | None = None) -> ItemResult:
    """One result for a conversation played ``len(results)`` times, its gates passed by ``pass_rate`` of its plays;
    ``settled``: what ``--repeat auto``'s rule decided."""
    first = results[0]
    usage = [record for r in results for record in r.usage]
    duration = sum(r.duration_ms for r in results)
    plays = [replace(r, play=n) for n, r in enumerate(results, 1)]
    failed = next(((n, r) for n, r in enumerate(results) if r.status != "ok"), None)
    if failed is not None:
        n, bad = failed
        return replace(bad, error=f"repeat {n + 1} of {len(results)}: {bad.error}", usage=usage, duration_ms=duration,
                       repeats=len(results), plays=plays, settled=None)
    turns = []
    for index, turn in enumerate(first.turns):
        same = [r.turns[index] for r in results if len(r.turns) > index]
        turns.append(replace(turn, gate_scores=mean_outcomes([t.gate_scores for t in same], gates=True,
                                                             pass_rate=pass_rate),
                             scores=mean_outcomes([t.scores for t in same])))
    passes = [gates_passed(r) for r in results]
    gate_ids = list(dict.fromkeys([*first.gate_scores, *(g for p in passes for g in p)]))
    return replace(first, turns=turns,
                   gate_scores=mean_outcomes([r.gate_scores for r in results], gates=True, pass_rate=pass_rate),
                   scores=mean_outcomes([r.scores for r in results]), usage=usage, duration_ms=duration,
                   repeats=len(results), gate_passes={g: sum(p.get(g) is True for p in passes) for g in gate_ids},
                   gate_plays={g: sum(g in p for p in passes) for g in gate_ids},
                   plays_passed=sum(r.passed for r in results), plays=plays, settled=settled)


def gates_passed(play: ItemResult) -> dict[str, bool]:
    """Per gate scorable in one play, whether the play passed it: top-level gates, then per-turn gates by id (passed
    when the gate passed on every turn that scored it). A gate not scorable in the play is left out."""
    passed: dict[str, bool] = {}
    for outcomes in (play.gate_scores, *(turn.gate_scores for turn in play.turns)):
        for gate_id, outcome in outcomes.items():
            if not outcome.not_scorable:
                passed[gate_id] = passed.get(gate_id, True) and not outcome.missed_gate
    return passed
