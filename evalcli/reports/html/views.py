"""The report's header, result tables and baseline comparison as plain values for the template."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ...results import RunResult, Summary
from ...store import Change
from ..text import DATASETS_DIFFER, budget_words, fmt, threshold_text, usage_parts, verdict_words
from .sources import Baseline

MAX_NAMED = 5
"""Conversations named beside a failing turn gate before '+N more'."""


def duration(started: str | None, finished: str | None) -> str:
    """``42.1 s`` or ``3 min 5 s`` between two stored ISO timestamps; ``-`` when either is missing."""
    if not started or not finished:
        return "-"
    seconds = (datetime.fromisoformat(finished) - datetime.fromisoformat(started)).total_seconds()
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


def header(result: RunResult, row: dict[str, Any]) -> dict[str, Any]:
    """Who ran what, when, and how it ended."""
    started = (row.get("started_at") or "")[:19].replace("T", " ")
    return {"run_id": result.run_id, "dataset": result.dataset_path, "dataset_id": result.dataset_name or row.get("dataset"),
            "target": result.target, "git_commit": row.get("git_commit"), "started": (started + " UTC") if started else "-",
            "duration": duration(row.get("started_at"), row.get("finished_at")), "status": row.get("status") or result.status,
            "verdict": result.verdict, "outcome": result.outcome, "badge": badge(result), "budget": budget_words(result),
            # a run still playing (or whose process was killed) has no exit code yet, as ``show`` says
            "exit_code": None if result.status == "running" else result.exit_code,
            "not_finished": not_finished(result)}


def not_finished(result: RunResult) -> str | None:
    """What the header says of a run that did not play every conversation it selected, as ``show`` does: still
    playing (or killed), interrupted, or stopped by an error; ``None`` for a run that ended (a spent budget says its
    own words: ``budget_words``)."""
    resume = f"--resume {result.run_id}"
    if result.status == "running":
        return (f"not finished: {result.completed} of {result.selected} conversations stored so far (the run is still "
                f"playing, or its process was killed; continue a killed one with {resume})")
    if result.status == "interrupted":
        return f"interrupted after {result.completed} of {result.selected} conversations; continue with {resume}"
    if result.status == "failed":
        return (f"stopped by an error after {result.completed} of {result.selected} conversations, so its verdict "
                f"covers only these; continue with {resume}")
    return None


def badge(result: RunResult) -> str:
    """The header's badge: the verdict, and when conversations errored what it covers (``passed · 3 of 4
    errored``), never a plain green ``passed``."""
    words = verdict_words(result)
    ended = {"interrupted": "interrupted", "budget": "budget spent", "unfinished": "did not finish"}.get(result.outcome)
    if result.status == "running":  # the verdict of the conversations stored so far, never a final one
        ended = "not finished"
    return f"{ended} · {words}" if ended else words


def usage(row: dict[str, Any], totals: dict[str, Any] | None = None) -> dict[str, Any]:
    """LLM calls, cache hits, tokens and cost, as stored for the whole run; with the run's usage totals, each
    purpose that made calls (target, simulator, judge) in words."""
    return {"calls": row.get("llm_calls") or 0, "cache_hits": row.get("cache_hits") or 0,
            "prompt_tokens": row.get("prompt_tokens") or 0, "completion_tokens": row.get("completion_tokens") or 0,
            "cost": f"{float(row.get('cost') or 0):.4f}", "purposes": usage_parts(totals or {})}


def summary_view(summary: Summary, turn_misses: dict[tuple[int, str], list[str]]) -> dict[str, Any]:
    """Gates, scores with their thresholds, and turn results (naming who failed a turn gate)."""
    thresholds = {t.id: t for t in summary.threshold_results}
    scores = []
    for scorer_id, mean in summary.scores.items():
        result = thresholds.get(scorer_id)
        scores.append({"id": scorer_id, "mean": fmt(mean), "threshold": threshold_text(result.threshold) if result else "",
                       "passed": result.passed if result else None,
                       "not_scorable": summary.not_scorable.get(scorer_id, 0)})
    scores += [{"id": t.id, "mean": fmt(t.average_score), "threshold": threshold_text(t.threshold), "passed": t.passed,
                "not_scorable": summary.not_scorable.get(t.id, 0)} for t in summary.threshold_results
               if t.id not in summary.scores]
    turns = []
    for turn in summary.turn_results:
        gates = []
        for gate in turn.gate_results:
            missed = turn_misses.get((turn.index, gate.id), [])
            gates.append({"id": gate.id, "score": fmt(gate.score), "passed": gate.passed,
                          "failed_by": missed[:MAX_NAMED], "more": max(0, len(missed) - MAX_NAMED)})
        turns.append({"index": turn.index, "gates": gates,
                      "thresholds": [{"id": t.id, "score": fmt(t.average_score), "threshold": threshold_text(t.threshold),
                                      "passed": t.passed} for t in turn.threshold_results],
                      "scores": [(k, fmt(v)) for k, v in turn.scores.items()]})
    return {"gates": [{"id": g.id, "score": fmt(g.score), "passed": g.passed} for g in summary.gate_results],
            "scores": scores, "turns": turns}


def _changes(changes: list[Change]) -> list[dict[str, Any]]:
    return [{"id": c.id, "a": fmt(c.a), "b": fmt(c.b), "delta": "-" if c.delta is None else f"{c.delta:+.3f}",
             "regressed": c.regressed} for c in changes]


def baseline_view(baseline: Baseline, positions: dict[str, int]) -> dict[str, Any]:
    """The comparison with the baseline as ``evalcli diff BASELINE RUN`` makes it, per conversation too."""
    diff = baseline.diff
    kinds = ("regressed", "improved", "changed", "new", "missing", "unchanged")
    order = {kind: n for n, kind in enumerate(kinds)}
    listed = [*baseline.changes.items(), *((None, change) for change in baseline.gone)]
    changed = sorted(((item_id, change) for item_id, change in listed if change.kind != "unchanged"),
                     key=lambda pair: order[pair[1].kind])
    return {"run_id": diff.a.run_id, "dataset": diff.a.dataset_path,
            "datasets_differ": DATASETS_DIFFER if diff.datasets_differ else "",
            "verdict_a": diff.a.verdict, "verdict_b": diff.b.verdict,
            "verdict_words_a": verdict_words(diff.a), "verdict_words_b": verdict_words(diff.b),
            "tolerance": fmt(diff.tolerance) if diff.tolerance else "", "regressions": diff.regressions,
            "scorers": _changes(diff.scorers), "gates": _changes(diff.gates),
            "counts": {kind: baseline.count(kind) for kind in kinds},
            "conversations": [{"id": change.name, "position": None if item_id is None else positions.get(item_id),
                               "kind": change.kind, "details": change.details} for item_id, change in changed]}
