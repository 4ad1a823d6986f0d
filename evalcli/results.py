"""What a run produces (docs/verdicts.md, docs/reference/json.md): outcomes, per-conversation results and the run's
aggregate, with their JSON shapes; the one ``Threshold``; the run's ``Plan``; the conversation forms, declared once.
A base module: it imports nothing of evalcli but ``messages``, ``thresholds`` and ``passrate``."""

from __future__ import annotations

import math
from dataclasses import field, replace
from typing import Any, Literal

from .messages import Message
from .passrate import STABILITIES as STABILITIES
from .passrate import stability_counts as stability_counts
from .passrate import stability_of as stability_of
from .records import record
from .thresholds import TOLERANCE as TOLERANCE
from .thresholds import Threshold as Threshold
from .thresholds import reaches_gate as reaches_gate
from .thresholds import within as within

Verdict = Literal["passed", "scored", "failed"]
@record(frozen=True)
class Form:
    """One way of writing a conversation's user side (docs/datasets.md, docs/simulated-users.md), declared once."""

    name: str
    multi_turn: bool
    """The conversation owns a thread: its turns are sent on one thread (every form but ``input``)."""
    per_turn: bool
    """Its turns carry their own gates and scorers, so a run has per-turn results (docs/verdicts.md)."""
    recorded: bool = False
    """The conversation already happened: its turns are read from a recording and no target is called (docs/recorded.md)."""


FORMS: dict[str, Form] = {form.name: form for form in (
    Form("input", multi_turn=False, per_turn=False),
    Form("inputs", multi_turn=True, per_turn=False),
    Form("turns", multi_turn=True, per_turn=True),
    Form("simulate", multi_turn=True, per_turn=False),
    Form("transcript", multi_turn=False, per_turn=False, recorded=True),
)}


def finite_or_none(value: float | None) -> float | None:
    """JSON has no NaN or infinity: those become ``null``."""
    if value is None or not math.isfinite(value):
        return None
    return value


def fmt(score: float | None) -> str:
    """A score as text: ``1``, ``0.412``, ``-`` when there is none, ``nan``/``inf`` as such."""
    if score is None:
        return "-"
    if not math.isfinite(score):
        return str(score)
    return f"{score:.3f}".rstrip("0").rstrip(".") if score != int(score) else f"{score:.0f}"


@record(frozen=True)
class JudgeSample:
    """One of the verdicts a judge asked several times (``samples: N``) or a panel (``models: [...]``) gave."""

    model: str
    seed: int | None
    """The seed the sample was asked with (``None`` for a panel member, asked as a lone judge is)."""
    score: float | None
    verdict: str
    """The first line of that sample's reason (its verdict line), for people."""

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "seed": self.seed, "score": finite_or_none(self.score), "verdict": self.verdict}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JudgeSample:
        return cls(str(data.get("model")), data.get("seed"), data.get("score"), str(data.get("verdict") or ""))


@record(frozen=True)
class Outcome:
    """The result of one scorer on one run: a score, not scorable, or an error."""

    score: float | None = None
    reason: str | None = None
    not_scorable: bool = False
    error: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    """LLM usage of this scoring, if any: prompt/completion tokens, cost, cache hit."""
    samples: tuple[JudgeSample, ...] = ()
    """Each verdict behind a repeated (``samples: N``) or panel (``models``) judge's decision; empty otherwise."""
    agreement: tuple[int, int] | None = None
    """(k, N): how many of the N samples agree with the decision."""
    reached: bool | None = None
    """A gate's mean over ``--repeat`` plays: whether every play that scored it reached it (2.0 and 0.5 average 1.25,
    yet one play failed); as stored (``outcomes_from_json``). ``None``: the score decides (``reaches_gate``)."""

    @property
    def agreement_text(self) -> str | None:
        """``2/3``, or ``None`` for a judge asked once."""
        return None if self.agreement is None else f"{self.agreement[0]}/{self.agreement[1]}"

    @property
    def missed_gate(self) -> bool:
        """As a gate on one conversation: scorable, and not reached (below 1.0 or without a score; over ``--repeat``
        plays, missed by some play: ``reached``)."""
        return not self.not_scorable and not (reaches_gate(self.score) if self.reached is None else self.reached)

    @property
    def scored(self) -> bool:
        return self.score is not None and not self.not_scorable and self.error is None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"score": finite_or_none(self.score), "reason": self.reason}
        if self.not_scorable:
            data["not_scorable"] = True
        if self.error is not None:
            data["error"] = self.error
        if self.agreement is not None:
            data["agreement"] = self.agreement_text
            data["samples"] = [s.to_json() for s in self.samples]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Outcome:
        score = data.get("score")
        agreement = data.get("agreement")
        k, _, n = agreement.partition("/") if isinstance(agreement, str) else ("", "", "")
        return cls(
            score=math.nan if score is None and not data.get("not_scorable") and not data.get("error") else score,
            reason=data.get("reason"),
            not_scorable=bool(data.get("not_scorable")),
            error=data.get("error"),
            samples=tuple(JudgeSample.from_json(s) for s in data.get("samples") or () if isinstance(s, dict)),
            agreement=(int(k), int(n)) if k.isdigit() and n.isdigit() else None,
        )


@record
class Plan:
    """The top-level assertions of a run: gate ids, scorer ids and their thresholds, in list order."""

    gate_ids: list[str]
    scorer_ids: list[str]
    thresholds: dict[str, Any]
    """Scorer id -> raw threshold config (number or {min, max})."""

    def to_json(self) -> dict[str, Any]:
        return {"gate_ids": self.gate_ids, "scorer_ids": self.scorer_ids, "thresholds": self.thresholds}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Plan:
        return cls(list(data["gate_ids"]), list(data["scorer_ids"]), dict(data["thresholds"]))


def outcome_json(outcome: Outcome, *, gate: bool = False, threshold: Any = None) -> dict[str, Any]:
    """One gate's or scorer's outcome, in the layout shared by items, turns, the JSON and the database."""
    data = outcome.to_json()
    if threshold is not None:
        data["threshold"] = threshold
    if gate:
        data["passed"] = None if outcome.not_scorable else not outcome.missed_gate
    elif threshold is not None:  # an errored scorer's threshold is not decided: its error is what it says
        data["passed"] = None if outcome.not_scorable or (outcome.score is None and outcome.error) \
            else Threshold.from_raw(threshold).passed(outcome.score)
    return data


def outcomes_json(gates: dict[str, Outcome], scores: dict[str, Outcome], thresholds: dict[str, Any]) -> dict[str, Any]:
    """``{"gates": {id: outcome}, "scorers": {id: outcome}}`` (see ``outcome_json``)."""
    return {"gates": {k: outcome_json(o, gate=True) for k, o in gates.items()},
            "scorers": {k: outcome_json(o, threshold=thresholds.get(k)) for k, o in scores.items()}}


def outcomes_from_json(data: dict[str, Any]) -> tuple[dict[str, Outcome], dict[str, Outcome], dict[str, Any]]:
    """Gates, scorers and thresholds back from ``outcomes_json``."""
    scorers = data.get("scorers", {})
    thresholds = {k: v["threshold"] for k, v in scorers.items() if v.get("threshold") is not None}
    return ({k: _gate_from_json(v) for k, v in data.get("gates", {}).items()},
            {k: Outcome.from_json(v) for k, v in scorers.items()}, thresholds)


def _gate_from_json(data: dict[str, Any]) -> Outcome:
    """A gate's outcome as stored: its ``passed`` as decided when it was scored (``Outcome.reached``)."""
    passed = data.get("passed")
    outcome = Outcome.from_json(data)
    return replace(outcome, reached=passed) if isinstance(passed, bool) else outcome


@record(frozen=True)
class Interrupt:
    """A turn that ended waiting for the user (LangGraph's ``interrupt()``, docs/targets/frameworks.md): the value it asked with."""

    value: Any


@record(frozen=True)
class Guardrail:
    """A guardrail that tripped on the turn (the Agents SDK's input or output guardrail, docs/targets/index.md): an outcome of the
    turn, not an error."""

    name: str
    kind: str
    """``input`` (it stopped the user's message) or ``output`` (it stopped the agent's answer)."""

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "kind": self.kind}

    @classmethod
    def from_json(cls, data: Any) -> Guardrail | None:
        """A guardrail back from ``to_json`` (``None`` for none)."""
        return cls(str(data["name"]), str(data["kind"])) if isinstance(data, dict) else None


@record
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
    simulated: bool = False
    """Whether a simulated user wrote this turn's input (docs/simulated-users.md)."""
    structured: Any = None
    """The turn's structured result as JSON (docs/targets/frameworks.md): PydanticAI's or the Agents SDK's output when it
    is not text, LangGraph's final state without ``messages``; ``None`` when there is none."""
    interrupt: Interrupt | None = None
    """The interrupt the turn ended in, waiting for the user (the next user message resumes it)."""
    resume: Any = None
    """What this turn resumed a pending interrupt with (a scripted or simulated message, or a turn's ``resume``)."""
    output_retries: int = 0
    """How many times the agent's output was rejected and asked for again (PydanticAI output validation)."""
    guardrail: Guardrail | None = None
    """The guardrail that tripped on this turn, if one did (its output is what the agent had produced)."""
    captured: Any = field(default=None, repr=False, compare=False)
    """The OpenTelemetry spans the agent emitted this turn (``otel.TurnCapture``), kept for an export, never stored."""
    output_text: str | None = field(default=None, repr=False, compare=False)
    """``output``'s JSON as stored, made as the turn was recorded (``stored_json.stored_text``); ``None``: made later."""

    @property
    def passed(self) -> bool:
        """No gate of this turn missed."""
        return not any(o.missed_gate for o in self.gate_scores.values())

    def outcomes(self) -> dict[str, Any]:
        return outcomes_json(self.gate_scores, self.scores, self.thresholds)

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "input": self.input, "output": self.output, "simulated": self.simulated,
                "duration_ms": round(self.duration_ms, 3), "outcomes": self.outcomes(), "structured": self.structured,
                "interrupt": None if self.interrupt is None else self.interrupt.value, "resume": self.resume,
                "output_retries": self.output_retries,
                "guardrail": None if self.guardrail is None else self.guardrail.to_json()}


@record
class ItemResult:
    """One conversation's outcome; ``status`` is ``ok``, ``error`` or ``limited`` (a limit or budget stopped it: which
    one is its ``stop_reason``; docs/budgets.md)."""

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
    """Per gate, in how many of the repeats it passed (for pass@k and pass^k)."""
    gate_plays: dict[str, int] = field(default_factory=dict)
    """Per gate, in how many of the repeats it was scorable (plays where it was not are left out of pass@k and
    pass^k, as docs/verdicts.md leaves them out of the mean)."""
    thresholds: dict[str, Any] = field(default_factory=dict)
    """Raw threshold config of the run's thresholded top-level scorers (id -> number or {min, max})."""
    stop_reason: str | None = None
    """Why a simulated conversation ended (``user_stop``, ``max_turns``, ``loop``); ``None`` when scripted."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """The item's ``metadata`` mapping (docs/targets/frameworks.md), as written."""
    identity: str = ""
    """Who the conversation is across runs (``evalcli.identity``; ``""``: not known, then its ``id`` is)."""
    content: str = ""
    """The digest of the item's content when it ran (tells an explicit id whose content changed)."""
    plays_passed: int | None = None
    """With ``--repeat``: in how many of its plays every gate passed (top level and per turn)."""
    plays: list[ItemResult] = field(default_factory=list)
    """With ``--repeat``: every play as it happened (its own turns, outcomes and reasons), in play order; empty when
    played once (or read back without them: ``Store.load_plays``)."""
    play: int | None = None
    """Which play of a ``--repeat`` this result is (from 1); ``None`` for a conversation's reduced result."""
    settled: str | None = None
    """Under ``--repeat auto``: what the sequential rule decided after its last play (``passrate.settle``)."""

    @property
    def repeated(self) -> bool:
        """Whether it was played under ``--repeat`` (several plays, or any number under ``--repeat auto``)."""
        return self.repeats > 1 or self.settled is not None

    @property
    def stability(self) -> str | None:
        """``stable-pass``, ``flaky`` or ``stable-fail`` under ``--repeat`` (``None`` played once, or errored)."""
        return stability_of(self.plays_passed, self.repeats, self.settled) if self.status == "ok" else None

    @property
    def pass_rate(self) -> float:
        """The share of its plays that passed every gate (1 or 0 when played once; 0 when it errored)."""
        if self.status != "ok":
            return 0.0
        if self.plays_passed is None or self.repeats <= 1:
            return float(self.passed)
        return self.plays_passed / self.repeats

    @property
    def per_turn(self) -> bool:
        """Whether its turns have results of their own (its form scores per turn)."""
        return FORMS[self.form].per_turn

    @property
    def passed(self) -> bool:
        """Status ok and no gate missed, at the top level or on any turn (under ``--repeat``: each gate by the pass-rate
        rule, ``Outcome.reached``; with several gates below ``--pass-rate 1`` this may differ from the stability label,
        which counts plays that passed every gate: docs/verdicts.md, "Sequential repeats")."""
        gates = [*self.gate_scores.values(), *(o for t in self.turns for o in t.gate_scores.values())]
        return self.status == "ok" and not any(o.missed_gate for o in gates)

    def outcomes(self) -> dict[str, Any]:
        """Gates and scorers of the whole conversation with scores, reasons, thresholds and pass/fail."""
        return outcomes_json(self.gate_scores, self.scores, self.thresholds)

    def to_json(self) -> dict[str, Any]:
        """The item as it appears in ``items`` of the JSON result (docs/reference/json.md keys, then evalcli's own)."""
        return {
            "index": self.index, "id": self.id, "tags": self.tags, "form": self.form, "status": self.status,
            "thread_id": self.thread_id, "resource_id": self.resource_id, "error": self.error,
            "scores": {k: finite_or_none(o.score) for k, o in self.scores.items()},
            "gate_scores": {k: finite_or_none(o.score) for k, o in self.gate_scores.items()},
            "turns": [t.to_json() for t in self.turns],
            "passed": self.passed, "stop_reason": self.stop_reason, "outcomes": self.outcomes(),
            "duration_ms": round(self.duration_ms, 3), "traceback": self.traceback, "metadata": self.metadata,
            **({"repeats": self.repeats, "plays_passed": self.plays_passed, "stability": self.stability}
               if self.repeated else {}),
            **({"limited": {"limit": self.stop_reason, "turns": len(self.turns)}} if self.status == "limited" else {}),
        }


@record(frozen=True)
class GateResult:
    id: str
    passed: bool
    score: float

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "passed": self.passed, "score": finite_or_none(self.score)}


@record(frozen=True)
class ThresholdResult:
    id: str
    passed: bool
    average_score: float
    threshold: Any

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "passed": self.passed, "average_score": finite_or_none(self.average_score),
                "threshold": self.threshold}


@record(frozen=True)
class TurnResult:
    index: int
    gate_results: list[GateResult]
    threshold_results: list[ThresholdResult]
    scores: dict[str, float]

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "gate_results": [g.to_json() for g in self.gate_results],
                "threshold_results": [t.to_json() for t in self.threshold_results],
                "scores": {k: finite_or_none(v) for k, v in self.scores.items()}}


@record
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
    unscored_gates: list[str] = field(default_factory=list)
    """Declared gates that were not scorable on any conversation (docs/identity.md: a warning; ``--strict`` exits 3). Not
    part of the JSON result."""
    scorer_errors: dict[str, int] = field(default_factory=dict)
    """Per scorer id, how many times it errored on a conversation that did not (or on one of its turns): each left
    out of that scorer's mean and counted as an error for the exit code (docs/scorers.md, "A scorer that fails")."""
    limited: int = 0
    """How many of ``errors`` a limit or a spent budget stopped: worded limited, never errored (docs/budgets.md)."""

    def to_json(self) -> dict[str, Any]:
        failed = {**({"scorer_errors": self.scorer_errors} if self.scorer_errors else {}),
                  **({"limited": self.limited} if self.limited else {})}
        return {"verdict": self.verdict, "scores": {k: finite_or_none(v) for k, v in self.scores.items()},
                "summary": {"total_items": self.total_items, "errors": self.errors, "not_scorable": self.not_scorable,
                            **failed},
                "gate_results": [g.to_json() for g in self.gate_results],
                "threshold_results": [t.to_json() for t in self.threshold_results],
                "turn_results": [t.to_json() for t in self.turn_results]}


@record
class RunResult:
    """A finished (or interrupted) run of one dataset."""

    run_id: str
    dataset_path: str
    """The dataset file as named when it was run (the JSON's ``dataset``)."""
    target: str
    summary: Summary
    status: str
    exit_code: int
    items: list[ItemResult] | None = None
    """Every conversation in dataset order, when the caller asked to keep them."""
    usage: dict[str, Any] = field(default_factory=dict)
    """LLM calls, cache hits, tokens and cost of the run, and per purpose, as ``evalcli.llm.usage_summary`` sums them."""
    warnings: list[str] = field(default_factory=list)
    completed: int = 0
    selected: int = 0
    pass_at_k: dict[str, float] = field(default_factory=dict)
    """With ``--repeat k``: per gate, the share of conversations where at least one of the k plays passed."""
    pass_all_k: dict[str, float] = field(default_factory=dict)
    """With ``--repeat k``: per gate, the share of conversations where all k plays passed (pass^k)."""
    repeat: int = 1
    """How many times each conversation was played (``--repeat``; under ``--repeat auto`` at most)."""
    repeat_auto: bool = False
    """``--repeat auto[:MAX]``: each conversation played until the sequential rule settled it."""
    pass_rate: float = 1.0
    """``--pass-rate``: the share of its plays that must pass a gate on a repeated conversation."""
    plays: int = 0
    """Plays of every conversation of the run together (with repeats; what ``--repeat auto`` saves)."""
    dataset_name: str = ""
    """The dataset's stable name (its path relative to the repository root, or resolved): ``runs.dataset``."""
    stability: dict[str, int] = field(default_factory=dict)
    """With ``--repeat k``: how many conversations are stable-pass, flaky and stable-fail (``{}`` otherwise)."""
    store_error: str | None = None
    """A database write that failed during the run: the result stands, the stored run may miss part of it."""
    tape_error: str | None = None
    """The ``--record-tools`` tape that could not be written (docs/hermetic.md, "Tapes"): the result stands."""

    @property
    def verdict(self) -> Verdict | None:
        return self.summary.verdict

    @property
    def outcome(self) -> str:
        """One word for how the run ended, for badges: ``interrupted``; ``budget`` (a budget ended it before every
        conversation was played); ``unfinished`` (status ``failed``: an error stopped it); ``failed`` (a gate
        missed); ``errors`` (some conversations errored, so a ``passed`` or ``scored`` verdict covers only the
        others); ``scored``; ``passed``; ``none`` (no verdict and no error)."""
        return run_outcome(self.verdict, bool(self.summary.errors or self.summary.scorer_errors), self.status)

    def to_json(self, items: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The JSON result of docs/reference/json.md; ``items`` may be given already rendered (e.g. read back from the store)."""
        rendered = items if items is not None else [i.to_json() for i in self.items or []]
        repeats = ({"repeat": self.repeat, "repeat_auto": self.repeat_auto, "pass_rate": self.pass_rate,
                    "plays": self.plays, "pass_at_k": self.pass_at_k, "pass_all_k": self.pass_all_k}
                   if self.repeat > 1 else {})
        aggregate = self.summary.to_json()
        if self.stability:
            aggregate["summary"]["stability"] = self.stability
        return {"run_id": self.run_id, "dataset": self.dataset_path, "target": self.target,
                **aggregate, **repeats, "usage": self.usage, "status": self.status,
                "conversations": self.conversations, "items": rendered}

    @property
    def conversations(self) -> dict[str, int]:
        """How many conversations the run selected, how many it played (finished, a ``limited`` one included) and
        how many it did not play (a budget or an interrupt ended it first)."""
        return {"selected": self.selected, "played": self.completed, "not_played": max(0, self.selected - self.completed)}


def run_outcome(verdict: str | None, errored: bool, status: str = "completed") -> str:
    """``RunResult.outcome`` from its parts (``errored``: a conversation or a scorer errored), a stored run's too."""
    if status in ("interrupted", "budget", "failed"):  # failed: an error stopped it (a worker died, sys.exit())
        return "unfinished" if status == "failed" else status
    return "failed" if verdict == "failed" else "errors" if errored else verdict or "none"
