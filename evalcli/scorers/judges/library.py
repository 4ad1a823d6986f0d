"""The scorer library's LLM judges (docs/reference/scorers.md), each a prompt, an output model and a score function.

``rubric``, ``role_adherence``, ``factuality`` and ``goal_achieved`` ask once and live here;
``completeness``, ``knowledge_retention`` and ``grounded`` list, then judge (``listing``). All
seven are declared at the end of this file, in the order of docs/reference/scorers.md. What a judge reads is exactly
docs/reference/scorers.md
"reads" column: the others never see the user's words or tool results.
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
)

from ...errors import not_blank
from ...llm import ApiBase
from ...llm.fence import TRANSCRIPT_END, TRANSCRIPT_START, fence, neutralise_labels
from ...messages import assistant_texts
from ...results import Outcome
from ..base import ScorerRun
from ..naming import id_text, shortened
from .criterion import criterion_call, judge_criterion
from .engine import Verdicts, reader
from .kit import (
    EVIDENCE,
    Asking,
    BoundJudge,
    JudgeArgs,
    Judging,
    PlainJudgeArgs,
    Samples,
    api_base_field,
    assistant_transcript,
    declare,
    model_field,
    models_field,
    models_now,
    numbers,
    replied,
    reply_shape,
    samples_field,
    turns_of,
)
from .listing import completeness, grounded, knowledge_retention

# --- rubric -------------------------------------------------------------------------------------

class Criterion(BaseModel):
    """One rubric criterion written as a mapping."""

    model_config = ConfigDict(extra="forbid")

    criterion: Annotated[str, AfterValidator(not_blank(
        "a criterion must not be empty: write what the assistant's words must meet"))] = Field(
        min_length=1, description="What the assistant's words must meet.")
    weight: float = Field(default=1, gt=0, allow_inf_nan=False, description="Its weight in the score (> 0).")
    required: bool = Field(default=False, description="If not met, the score is 0 whatever the others.")



    @model_serializer(mode="wrap")
    def _as_written(self, handler: SerializerFunctionWrapHandler) -> Any:
        """A criterion of weight 1, not required, dumps as its plain text (how it is usually written)."""
        return self.criterion if self.weight == 1 and not self.required else handler(self)


def _criterion(value: Any) -> Any:
    return {"criterion": value} if isinstance(value, str) else value


RubricCriterion = Annotated[Criterion, BeforeValidator(_criterion, json_schema_input_type=str | Criterion)]
"""A plain string is a criterion of weight 1, not required."""


class RubricArgs(JudgeArgs):
    criteria: list[RubricCriterion] = Field(min_length=1, description="Criteria: plain strings (weight 1) or "
                                                                      "{criterion, weight, required}.")
    model: str = model_field()
    api_base: ApiBase = api_base_field()
    models: list[str] | None = models_field()
    samples: Samples = samples_field()

    @field_validator("criteria")
    @classmethod
    def _weights_add_up(cls, criteria: list[Criterion]) -> list[Criterion]:
        """The score is the satisfied weight over the total: a total past a float's range (two weights of 1.0e+308)
        would make it 0 or NaN (docs/judges.md)."""
        if not math.isfinite(sum(c.weight for c in criteria)):
            raise ValueError("the criteria's weights add up to more than a number can hold: use smaller weights "
                             "(only their ratios count)")
        return criteria


JUDGE_RUBRIC = Judging("You decide, for each criterion of a rubric, whether what the assistant said meets it.",
                       ("RubricVerdicts", "CriterionVerdict"), "criterion", "satisfied", ("satisfied", "not satisfied"),
                       ("Turn 2 names the source of the figures.", "No turn gives the price the criterion asks for."))


async def rubric(asking: Asking, args: RubricArgs, run: ScorerRun) -> Outcome:
    criteria = args.criteria
    wanted = list(range(1, len(criteria) + 1))
    listed = "\n".join(f"{i}. {c.criterion.strip()}" for i, c in zip(wanted, criteria, strict=True))
    prompt = (f"Criteria:\n{listed}\n\nThe assistant's side of the conversation follows. {EVIDENCE}\n"
              f"{assistant_transcript(turns_of(run))}\n\nFor each criterion, decide whether the assistant's turns, "
              f"taken together, meet it; if unsure, it is not met. Give exactly one verdict for each of criteria "
              f"{numbers(wanted)}.\n" + JUDGE_RUBRIC.shape(wanted))
    verdicts = await JUDGE_RUBRIC.ask(asking, prompt, wanted)
    total = sum(c.weight for c in criteria)
    met = sum(c.weight for c, (satisfied, _) in zip(criteria, verdicts, strict=True) if satisfied)
    failed_required = any(c.required and not satisfied for c, (satisfied, _) in zip(criteria, verdicts, strict=True))
    score = 0.0 if failed_required else met / total
    head = (f"A required criterion is not satisfied: score 0 (satisfied weight {met:g} of {total:g})."
            if failed_required else f"Score {score:.3f}: satisfied weight {met:g} of {total:g}.")
    return Outcome(score=score, reason=f"{head}\n{JUDGE_RUBRIC.lines([_labelled(c) for c in criteria], verdicts)}")


def _labelled(c: Criterion, text: str | None = None) -> str:
    """``Is polite (required) (weight 2)``."""
    return ((text or c.criterion.strip()) + (" (required)" if c.required else "")
            + (f" (weight {c.weight:g})" if c.weight != 1 else ""))


def _rubric_id(values: dict[str, Any]) -> str:
    criteria = RubricArgs.model_validate(values).criteria
    return f"rubric({shortened('; '.join(_labelled(c, id_text(c.criterion)) for c in criteria))})"


# --- role_adherence -----------------------------------------------------------------------------

class RoleArgs(JudgeArgs):
    role: Annotated[str, AfterValidator(not_blank("role must not be empty: describe the role the assistant must keep"))] = Field(
        min_length=1, description="The role the assistant must keep, in plain English.")
    model: str = model_field()
    api_base: ApiBase = api_base_field()
    models: list[str] | None = models_field()
    samples: Samples = samples_field()



JUDGE_ROLE = Judging("You decide, for each assistant turn, whether the assistant kept the role it was given.",
                     ("RoleVerdicts", "RoleVerdict"), "turn", "in_role", ("in role", "out of role"),
                     ("It answers the router question as the support agent.", "It says it is a language model, not "
                                                                              "the agent."))


async def role_adherence(asking: Asking, args: RoleArgs, run: ScorerRun) -> Outcome:
    turns = turns_of(run)
    judged = [t.number for t in replied(turns)]
    if not judged:
        return Outcome(not_scorable=True, reason="the conversation has no assistant text")
    prompt = (f"The role the assistant must keep:\n{args.role.strip()}\n\nThe assistant's side of the conversation "
              f"follows. {EVIDENCE}\n{assistant_transcript(turns)}\n\nFor each of assistant turns {numbers(judged)}, "
              "decide whether the assistant stays in that role in that turn: in character, within the role's scope "
              "and manner. A turn that breaks character, claims to be something else or goes outside the role is out "
              "of role. Give exactly one verdict for each of those turns.\n" + JUDGE_ROLE.shape(judged))
    verdicts = await JUDGE_ROLE.ask(asking, prompt, judged)
    kept = sum(in_role for in_role, _ in verdicts)
    subjects = [f"assistant turn {turn}" for turn in judged]
    return Outcome(score=kept / len(judged), reason=f"{kept} of {len(judged)} assistant turns in role.\n"
                                                    f"Role: {args.role.strip()}\n{JUDGE_ROLE.lines(subjects, verdicts)}")


# --- factuality ---------------------------------------------------------------------------------

Category = Literal["A", "B", "C", "D", "E"]
CATEGORY_SCORES: dict[str, float] = {"A": 0.4, "B": 0.6, "C": 1.0, "D": 0.0, "E": 1.0}
CATEGORIES = {"A": "The answer is a subset of the reference and fully consistent with it.",
              "B": "The answer is a superset of the reference and fully consistent with it.",
              "C": "The answer contains all the same details as the reference.",
              "D": "The answer and the reference disagree.",
              "E": "The answer and the reference differ, but the differences do not matter for factuality."}
"""What each category means, as the judge is told."""
CATEGORY_NAMES = {"A": "a consistent subset of the reference", "B": "a consistent superset of the reference",
                  "C": "the same details as the reference", "D": "disagrees with the reference",
                  "E": "differs only in ways that do not matter"}
"""How the reason names each category."""


class FactualityArgs(JudgeArgs):
    reference: Annotated[str | None, AfterValidator(not_blank(
        "reference must not be empty: write the reference answer, or leave it out to use ground_truth"))] = Field(
        default=None, description="The reference answer (default: the item's ground_truth).")
    model: str = model_field()
    api_base: ApiBase = api_base_field()
    models: list[str] | None = models_field()
    samples: Samples = samples_field()



class FactualityVerdict(Verdicts):
    reasoning: str
    category: Category


FACTUALITY_TASK = "You compare the factual content of the assistant's answer with a reference answer."


def reference_of(args: FactualityArgs, run: ScorerRun) -> str | None:
    """``reference``, else the item's ``ground_truth`` (as text, JSON for anything but a string)."""
    if args.reference is not None:
        return args.reference.strip()
    truth = run.ground_truth
    if truth is None or (isinstance(truth, str) and not truth.strip()):
        return None
    return truth.strip() if isinstance(truth, str) else json.dumps(truth, ensure_ascii=False, default=str)


async def factuality(asking: Asking, args: FactualityArgs, run: ScorerRun) -> Outcome:
    reference = reference_of(args, run)
    if reference is None:
        return Outcome(not_scorable=True, reason="no reference: give `reference` or the item's ground_truth")
    # the last assistant text, as json_output reads it: the last assistant message that has text (a tool-calling
    # turn's preamble, "Let me look that up.", is not the answer)
    answers = assistant_texts(run.output, strip=True)
    if not answers:
        return Outcome(score=0.0, reason="no assistant text to compare with the reference")
    answer = fence(f"Assistant answer: {neutralise_labels(answers[-1])}", TRANSCRIPT_START, TRANSCRIPT_END)
    categories = "\n".join(f"{k}: {v}" for k, v in CATEGORIES.items())
    prompt = (f"The reference answer:\n{neutralise_labels(reference)}\n\nThe assistant's answer follows. {EVIDENCE}\n"
              f"{answer}\n\nCompare the factual content of the answer with the reference; ignore style, grammar and "
              f"punctuation. Pick exactly one category:\n{categories}\n"
              + reply_shape('{"reasoning": ..., "category": ...} with "reasoning" (your own words about this '
                            'answer) and "category" (one of A, B, C, D and E). For example, for another answer:\n'
                            '{"reasoning": "Both give 1889 as the year the tower opened.", "category": "C"}'))
    verdict: FactualityVerdict = await asking.ask(FACTUALITY_TASK, prompt, FactualityVerdict, reader(FactualityVerdict))
    score = CATEGORY_SCORES[verdict.category]
    return Outcome(score=score, reason=f"Category {verdict.category} ({CATEGORY_NAMES[verdict.category]}): "
                                       f"{score:g}.\n\nReference: {reference}\n\n{verdict.reasoning.strip()}")


def _factuality_id(values: dict[str, Any]) -> str:
    reference = values.get("reference")
    return "factuality" if reference is None else f"factuality({shortened(id_text(reference))})"


# --- goal_achieved ------------------------------------------------------------------------------

class GoalAchieved(BoundJudge):
    """A criterion judge (docs/judges.md) whose criterion is the item's ``expected_outcome``, else the simulated user's goal."""

    binary = True

    async def once(self, asking: Asking, run: ScorerRun) -> Outcome:
        criterion = next((c.strip() for c in (run.expected_outcome, run.goal) if c and c.strip()), None)
        if criterion is None:
            return Outcome(not_scorable=True, reason="the item has neither expected_outcome nor simulate.goal")
        call = criterion_call(asking.llm, asking.model, asking.scorer_id, asking.version, asking.api_base,
                              asking.use_cache, asking.point)
        return await judge_criterion(call, criterion, run.output, sink=asking.sink)


# --- declarations, in docs/reference/scorers.md order -------------------------------------------------------------

KINDS = (
    declare("rubric", RubricArgs, rubric, version="2", main="criteria", default_id=_rubric_id,
            summary="weighted share of the criteria the assistant's words meet; 0 if a required one is not met",
            example="rubric: [Cites a source, {criterion: Is polite, required: true}]"),
    declare("completeness", PlainJudgeArgs, completeness, version="2", main=None, default_id=lambda values: "completeness",
            summary="the user's intentions are listed, then each judged met or not: met / listed (none listed: 1)",
            example="completeness"),
    declare("knowledge_retention", PlainJudgeArgs, knowledge_retention, version="2", main=None,
            default_id=lambda values: "knowledge_retention",
            summary="facts the user gave are listed; each assistant turn from the first fact on is judged for lapses "
                    "(forgot or contradicted): 1 - lapses / judged turns (none judged: 1)",
            example="knowledge_retention"),
    declare("role_adherence", RoleArgs, role_adherence, version="2", main="role",
            default_id=lambda values: f"role_adherence({shortened(id_text(values['role']))})",
            summary="each assistant turn judged in or out of `role`: in-role turns / assistant turns",
            example="role_adherence: A patient support agent for Acme routers"),
    declare("grounded", PlainJudgeArgs, grounded, version="2", main=None, default_id=lambda values: "grounded",
            summary="claims in the assistant's replies are listed, each judged supported by a tool result or not: "
                    "supported / claims (no claims: 1)", example="grounded"),
    declare("factuality", FactualityArgs, factuality, version="2", main="reference", default_id=_factuality_id,
            summary="the last answer against `reference` (default: ground_truth): A subset 0.4, B superset 0.6, C same 1, "
                    "D disagrees 0, E immaterial differences 1", example="factuality: Paris is the capital of France."),
    declare("goal_achieved", PlainJudgeArgs, None, version="2", main=None, default_id=lambda values: "goal_achieved",
            summary="a criterion judge whose criterion is the item's expected_outcome (else simulate.goal): 1 or 0",
            example="goal_achieved", build=GoalAchieved),
)
"""The library's judges, in the order ``evalcli scorers`` lists them."""


models_now(JUDGE_RUBRIC, JUDGE_ROLE)
