"""What a run produces: per-conversation results and the run's aggregate, with their JSON shapes (SPEC §7)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .scorers.base import Outcome, finite_or_none

Message = dict[str, Any]
Verdict = Literal["passed", "scored", "failed"]


@dataclass
class TurnRecord:
    """One turn of a conversation: what was sent, what came back, and its per-turn assertions."""

    index: int
    input: str
    output: list[Message]
    duration_ms: float
    gate_scores: dict[str, Outcome] = field(default_factory=dict)
    scores: dict[str, Outcome] = field(default_factory=dict)
    thresholds: dict[str, Any] = field(default_factory=dict)
    """Raw threshold config of this turn's thresholded scorers (id -> number or {min, max})."""


@dataclass
class ItemResult:
    """One conversation's outcome; ``status`` is ``ok`` or ``error``."""

    index: int
    id: str
    tags: list[str]
    form: str
    status: str
    thread_id: str | None
    resource_id: str | None
    turns: list[TurnRecord] = field(default_factory=list)
    gate_scores: dict[str, Outcome] = field(default_factory=dict)
    scores: dict[str, Outcome] = field(default_factory=dict)
    error: str | None = None
    traceback: str | None = None
    duration_ms: float = 0.0
    usage: list[Any] = field(default_factory=list)
    repeats: int = 1
    """How many times the conversation was played (``--repeat``); its scores are the means."""
    gate_passes: dict[str, int] = field(default_factory=dict)
    """Per gate, in how many of the repeats it passed (for pass@k)."""

    @property
    def passed(self) -> bool:
        """Status ok and no gate missed, at the top level or on any turn."""
        gates = [*self.gate_scores.values(), *(o for t in self.turns for o in t.gate_scores.values())]
        return self.status == "ok" and not any(o.missed_gate for o in gates)

    def to_json(self) -> dict[str, Any]:
        """The item as it appears in ``items`` of the JSON result."""
        return {
            "index": self.index, "id": self.id, "tags": self.tags, "form": self.form, "status": self.status,
            "thread_id": self.thread_id, "resource_id": self.resource_id, "error": self.error,
            "scores": {k: finite_or_none(o.score) for k, o in self.scores.items()},
            "gate_scores": {k: finite_or_none(o.score) for k, o in self.gate_scores.items()},
            "turns": [{"index": t.index, "input": t.input, "output": t.output} for t in self.turns],
        }


@dataclass(frozen=True)
class GateResult:
    id: str
    passed: bool
    score: float

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "passed": self.passed, "score": finite_or_none(self.score)}


@dataclass(frozen=True)
class ThresholdResult:
    id: str
    passed: bool
    average_score: float
    threshold: Any

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "passed": self.passed, "average_score": finite_or_none(self.average_score),
                "threshold": self.threshold}


@dataclass(frozen=True)
class TurnResult:
    index: int
    gate_results: list[GateResult]
    threshold_results: list[ThresholdResult]
    scores: dict[str, float]

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "gate_results": [g.to_json() for g in self.gate_results],
                "threshold_results": [t.to_json() for t in self.threshold_results],
                "scores": {k: finite_or_none(v) for k, v in self.scores.items()}}


@dataclass
class Summary:
    """The aggregate of a run: means, gate and threshold results, turn results and the verdict."""

    scores: dict[str, float]
    total_items: int
    errors: int
    not_scorable: dict[str, int]
    gate_results: list[GateResult]
    threshold_results: list[ThresholdResult]
    turn_results: list[TurnResult]
    verdict: Verdict | None

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "scores": {k: finite_or_none(v) for k, v in self.scores.items()},
            "summary": {"total_items": self.total_items, "errors": self.errors, "not_scorable": self.not_scorable},
            "gate_results": [g.to_json() for g in self.gate_results],
            "threshold_results": [t.to_json() for t in self.threshold_results],
            "turn_results": [t.to_json() for t in self.turn_results],
        }


@dataclass
class RunResult:
    """A finished (or interrupted) run of one dataset."""

    run_id: str
    dataset: str
    target: str
    summary: Summary
    status: str
    exit_code: int
    items: list[ItemResult] | None = None
    """Every conversation in dataset order, when the caller asked to keep them."""
    usage: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    completed: int = 0
    selected: int = 0
    pass_at_k: dict[str, float] = field(default_factory=dict)
    """With ``--repeat k``: per gate, the share of conversations where at least one of the k plays passed."""

    @property
    def verdict(self) -> Verdict | None:
        return self.summary.verdict

    def to_json(self, items: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The JSON result of SPEC §7; ``items`` may be given already rendered (e.g. read back from the store)."""
        rendered = items if items is not None else [i.to_json() for i in self.items or []]
        return {"run_id": self.run_id, "dataset": self.dataset, "target": self.target,
                **self.summary.to_json(), "items": rendered}
