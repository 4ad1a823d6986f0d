"""Checks on what framework agents report (docs/targets/frameworks.md, docs/targets/index.md): ``answered_by``,
``structured_output`` and
``guardrail_tripped``.

``answered_by`` reads the ``name`` an assistant message carries (the Agents SDK agent that wrote it);
``structured_output`` reads the last scored turn's ``structured`` result (a framework agent's output that is
not text, LangGraph's final state), compared as ``tool_args`` compares arguments (docs/reference/scorers.md);
``guardrail_tripped`` reads the guardrail each scored turn records (an Agents SDK input or output guardrail).
"""

from __future__ import annotations

from functools import partial
from typing import Any, Literal

from pydantic import Field

from ...messages import excerpt, message_text
from ...results import Outcome
from ..base import ScorerRun
from ..kinds import BuildContext
from ..naming import id_value, shortened
from .basic import CheckArgs, CheckScorer, check
from .matching import values_match
from .tools import JsonSchemaArg, PatternedArgs, schema_error, schema_validator


class AnsweredByArgs(CheckArgs):
    name: str = Field(min_length=1, description="The agent's name (the Agents SDK's Agent.name).")


class StructuredOutputArgs(CheckArgs):
    expected: PatternedArgs | None = Field(default=None, description="What the structured result must match (a "
                                                                     "mapping, compared under `mode`; a string "
                                                                     "\"/.../\" is a regular expression).")
    mode: Literal["partial", "exact"] = Field(
        default="partial", description="partial: every key given, with a matching value; exact: equal as a whole.")
    json_schema: JsonSchemaArg = Field(default=None, alias="schema",
                                       description="A JSON Schema the structured result must be valid against.")


class GuardrailTrippedArgs(CheckArgs):
    name: str | None = Field(default=None, min_length=1,
                             description="The guardrail's name (its function's name, or the name it was given); "
                                         "default: any guardrail.")


def guardrail_tripped(run: ScorerRun, a: GuardrailTrippedArgs) -> Outcome:
    tripped = [(t.index, t.guardrail) for t in run.turns if t.guardrail is not None]
    said = "; ".join(f"turn {i}: {g.get('name')} ({g.get('kind')})" for i, g in tripped) or "none"
    hit = any(a.name is None or g.get("name") == a.name for _, g in tripped)
    wanted = "a guardrail" if a.name is None else f"guardrail {a.name!r}"
    return Outcome(score=float(hit), reason=f"{wanted} {'tripped' if hit else 'did not trip'}; tripped: {said}")


def answered_by(run: ScorerRun, a: AnsweredByArgs) -> Outcome:
    last = next((m for m in reversed(run.output) if m.get("role") == "assistant" and message_text(m).strip()), None)
    if last is None:
        return Outcome(score=0.0, reason="no assistant message with text")
    name = last.get("name")
    said = excerpt(message_text(last), 80)
    if not isinstance(name, str) or not name:
        return Outcome(score=0.0, reason=f"the last answer ({said}) names no agent (only Agents SDK targets name "
                                         "the agent that wrote a message)")
    verdict = "is" if name == a.name else "is not"
    return Outcome(score=float(name == a.name), reason=f"the last answer ({said}) was written by {name!r}, which "
                                                       f"{verdict} {a.name!r}")


def _differences(expected: dict[str, Any], actual: Any, mode: str) -> str:
    """Which top-level keys did not match (missing, different, or unexpected under ``exact``)."""
    if not isinstance(actual, dict):
        return f"the structured result is not a mapping: {excerpt(id_value(actual), 80)}"
    missing = [k for k in expected if k not in actual]
    different = [f"{k}: {id_value(actual[k])} (expected {id_value(v)})" for k, v in expected.items()
                 if k in actual and not values_match(v, actual[k], "exact" if mode == "exact" else "partial")]
    extra = [k for k in actual if k not in expected] if mode == "exact" else []
    parts = ([f"missing {', '.join(missing)}"] if missing else []) + different
    parts += [f"unexpected {', '.join(extra)}"] if extra else []
    return "; ".join(parts) or "the values differ"


def structured_output(run: ScorerRun, a: StructuredOutputArgs, validator: Any = None) -> Outcome:
    if not run.turns or run.turns[-1].structured is None:
        return Outcome(not_scorable=True, reason="the last turn has no structured result")
    value = run.turns[-1].structured
    where = f"turn {run.turns[-1].index}'s structured result {excerpt(id_value(value), 120)}"
    if a.expected is not None and not values_match(a.expected, value, a.mode):
        return Outcome(score=0.0, reason=f"{where} does not match {shortened(id_value(a.expected))} ({a.mode}): "
                                         f"{_differences(a.expected, value, a.mode)}")
    if validator is not None:
        error = schema_error(validator, value)
        if error is not None:
            return Outcome(score=0.0, reason=f"{where} is not valid against the schema: {error}")
    checks = [f"matches {shortened(id_value(a.expected))} ({a.mode})"] if a.expected is not None else []
    checks += ["is valid against the schema"] if validator is not None else []
    return Outcome(score=1.0, reason=f"{where} {' and '.join(checks) or 'is present'}")


def _build_structured_output(args: StructuredOutputArgs, context: BuildContext) -> CheckScorer:
    return CheckScorer(partial(structured_output, validator=schema_validator(args.json_schema)), args)


KINDS = (
    check("answered_by", AnsweredByArgs, "name", answered_by,
          "1 if the last assistant message with text was written by agent `name` (its `name` field)",
          "answered_by: Seat Booking Agent"),
    check("structured_output", StructuredOutputArgs, None, structured_output,
          "1 if the last turn's structured result matches `expected` (partial or exact) and `schema`; not scorable "
          "without one", "structured_output: {expected: {risk: 1}}", default_id=lambda values: "structured_output",
          build=_build_structured_output),
    check("guardrail_tripped", GuardrailTrippedArgs, "name", guardrail_tripped,
          "1 if a guardrail (with `name`: that one) tripped on a scored turn (Agents SDK input and output guardrails)",
          "guardrail_tripped: math_guardrail",
          default_id=lambda values: f"guardrail_tripped({values['name']})" if values.get("name") else "guardrail_tripped"),
)
"""The checks of this module, in the order ``evalcli scorers`` lists them."""
