"""The engine every LLM judge shares (docs/judges.md, docs/reference/scorers.md): structured verdicts, repair, cache keys, cost
records.

A judge is a prompt, an output model and a score function. It renders what it reads with
``evalcli.llm.fence`` (untrusted text between markers on lines of their own, marker look-alikes
neutralised) and asks ``JudgeCall.ask`` for a verdict: the reply must be one clean JSON object matching
the output model (strict types; the library's models forbid missing and extra fields), none of whose texts is
the prompt's own (``copies``: a copied placeholder, example or rule; docs/judges.md, "Unusable answers"). A reply
that is not is asked again, then the scoring is an error, never a score. Replies are cached on everything that
changes them, including the judge's own prompt version, and every call is recorded with its tokens and
cost.

Repeated judging and panels (docs/recorded.md) live here too, once for every judge: ``sample_points`` says who is
asked (one model N times with distinct seeds, or each model of a panel once) and ``sampled`` asks them all at
once (each call takes a judge slot like any other, so N samples cost N calls at the same concurrency, not N
rounds) and decides: the median score, which for binary verdicts and an odd N is the majority. A judge asked
once is asked exactly as before (no seed, temperature 0, the same cache key).
"""

from __future__ import annotations

import asyncio
import json
import operator
import re
import statistics
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import replace
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from ...llm import (
    LLMClient,
    LLMError,
    ResponseCache,
    UsageSink,
    reply_refusal,
    reply_text,
    supports_json_mode,
    supports_json_schema,
)
from ...messages import Message
from ...records import record
from ...results import JudgeSample, Outcome, reaches_gate
from ...results import fmt as score_text
from ...secrets import cut, redact_text
from .copies import prompt_copy

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

PARSE_ATTEMPTS = 3
"""Replies asked for before an unreadable verdict becomes an error."""

REPAIR_PROMPT = ("That reply could not be read. Reply again with only one JSON object of exactly the shape "
                 "asked for, and no other text.")
COPY_PROMPT = ("That reply repeated words of the instructions ({copied}) instead of judging this conversation. Reply "
               "again with one JSON object of the shape asked for, every text in it your own words about this "
               "conversation.")
"""Asked after a verdict whose reasoning (or listed item) is the prompt's own text (``copies.is_prompt_text``)."""

def embedded_json(text: str) -> list[Any]:
    """Every JSON object that starts at some ``{`` of the text, in order."""
    decoder = json.JSONDecoder()
    found = []
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        found.append(value)
    return found


THINKING = re.compile(r"\A\s*<(think|thinking)>.*?</\1>", re.DOTALL)
"""A reasoning model's thinking before its answer (DeepSeek-R1, Qwen3 served by vLLM or Ollama): a leading
``<think>...</think>`` block."""
THINKING_END = "</think>"


def one_verdict(text: str | None, parse: Callable[[Any], T | None], *, same: Callable[[T, T], bool] = operator.eq,
                dig: bool = False) -> T | None:
    """The single verdict in a reply: the whole reply's JSON value, or else the JSON objects found inside it (a code
    fence, prose around it). Several that do not agree (``same``; a fake one quoted beside the real one) are none.
    With ``dig``, a reply that is JSON but not a verdict is searched inside too. A reasoning model's leading thinking
    (``THINKING``) is set aside first: a draft verdict in it is no verdict; and when the chat template sent the opening
    tag, so the reply only closes it, a reply with no single verdict is read again after its first ``</think>``."""
    answer = THINKING.sub("", text, count=1) if text else text
    found = _one_verdict(answer, parse, same, dig)
    if found is None and answer and THINKING_END in answer:
        found = _one_verdict(answer.split(THINKING_END, 1)[1], parse, same, dig)
    return found


def _one_verdict(text: str | None, parse: Callable[[Any], T | None], same: Callable[[T, T], bool],
                 dig: bool) -> T | None:
    if not text or not text.strip():
        return None
    try:
        candidates, whole = [json.loads(text.strip())], True
    except ValueError:
        candidates, whole = embedded_json(text), False
    verdicts = [v for v in map(parse, candidates) if v is not None]
    if not verdicts and whole and dig:
        verdicts = [v for v in map(parse, embedded_json(text)) if v is not None]
    if verdicts and all(same(v, verdicts[0]) for v in verdicts):
        return verdicts[0]
    return None


def reader(model: type[M], *, same: Callable[[M, M], bool] = operator.eq,
           dig: bool = False) -> Callable[[str | None], M | None]:
    """Read a reply as exactly one ``model`` (validated strictly: right types, and whatever the model says of
    missing and extra fields), with no rival verdict beside it (see ``one_verdict``)."""
    def parse(value: Any) -> M | None:
        if not isinstance(value, dict):
            return None
        try:
            return model.model_validate(value, strict=True)
        except ValidationError:
            return None

    return lambda text: one_verdict(text, parse, same=same, dig=dig)


class Verdicts(BaseModel):
    """Base of judges' output models: extra fields make a reply unreadable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def output_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON Schema, closed (``additionalProperties: false``) and with every field required."""
    def close(node: Any) -> Any:
        if isinstance(node, dict):
            node = {k: close(v) for k, v in node.items() if k != "title"}
            if node.get("type") == "object" and "properties" in node:
                node["additionalProperties"] = False
                node["required"] = list(node["properties"])
            return node
        if isinstance(node, list):
            return [close(v) for v in node]
        return node

    return close(model.model_json_schema())  # type: ignore[no-any-return]


def response_format(model: str, name: str, schema: dict[str, Any]) -> dict[str, Any] | None:
    """A JSON-schema response format where the model takes one, JSON mode where it takes that, else none."""
    if supports_json_schema(model):
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}
    if supports_json_mode(model):
        return {"type": "json_object"}
    return None


class JudgeFailed(Exception):
    """No usable verdict: the provider failed for good, or every reply was unreadable."""


@record
class JudgeCall(Generic[T]):
    """One question to a judge model, asked until it gets one readable answer (or gives up)."""

    llm: LLMClient
    model: str
    scorer_id: str
    version: str
    """The judge's prompt version: part of the cache key, bumped when its prompts change."""
    read: Callable[[str | None], T | None]
    """Reply text -> the verdict, or ``None`` when it is not one clean verdict (see ``reader``)."""
    schema_name: str
    schema: dict[str, Any]
    api_base: str | None = None
    use_cache: bool = True
    purpose: str = "judge"
    repair_prompt: str = REPAIR_PROMPT
    point: SamplePoint | None = None
    """Which sample of a repeated judge this call is (its seed and temperature); ``None``: a judge asked once."""

    def cache_key(self, messages: Sequence[Message], fmt: dict[str, Any] | None) -> str:
        """Everything that changes the answer, hashed (a sample's number and seed too, when it is one of several)."""
        point = self.point if self.point is not None and self.point.seed is not None else None
        extra: dict[str, Any] = {} if point is None else {"sample": point.index, "seed": point.seed}
        return ResponseCache.key_for(model=self.model, messages=list(messages), temperature=_temperature(point),
                                     response_format=fmt, api_base=self.api_base, scorer_id=self.scorer_id,
                                     scorer_version=self.version, **extra)

    def usable(self, reply: str | None, messages: Sequence[Message]) -> tuple[T | None, str | None]:
        """The reply's verdict, or ``None`` and, when the verdict was read but holds the prompt's own text (a copied
        placeholder, example or rule: ``copies.prompt_copy``), that text: such a verdict is no answer."""
        verdict = self.read(reply)
        if verdict is None:
            return None, None
        copied = prompt_copy(verdict, messages)
        return (verdict, None) if copied is None else (None, copied)

    async def ask(self, messages: list[Message], sink: UsageSink) -> T:
        """The parsed verdict; raises ``JudgeFailed`` when none can be had (every reply unreadable, or the prompt's
        own text)."""
        fmt = response_format(self.model, self.schema_name, self.schema)
        use_cache = self.use_cache and self.llm.cache is not None
        key = self.cache_key(messages, fmt) if use_cache else None
        conversation = list(messages)
        last_reply: str | None = None
        refusal: str | None = None
        copied: str | None = None
        try:
            for attempt in range(PARSE_ATTEMPTS):
                response = await self.llm.complete(
                    model=self.model, messages=conversation, purpose=self.purpose, temperature=_temperature(self.point),
                    seed=self.point.seed if self.point is not None else None,
                    response_format=fmt, api_base=self.api_base, cache_key=key if attempt == 0 else None,
                    accept=lambda r: self.usable(reply_text(r), messages)[0] is not None, usage_sink=sink)
                last_reply = reply_text(response)
                refusal = None if last_reply and last_reply.strip() else reply_refusal(response)
                verdict, copied = self.usable(last_reply, messages)
                if verdict is not None:
                    return verdict
                repair = self.repair_prompt if copied is None else COPY_PROMPT.format(copied=json.dumps(
                    redact_text(copied)[:80]))
                conversation = [*messages, {"role": "assistant", "content": last_reply or ""},
                                {"role": "user", "content": repair}]
        except LLMError as exc:
            raise JudgeFailed(f"judge {self.scorer_id}: {exc.message}") from None
        if copied is not None:
            raise JudgeFailed(f"judge {self.scorer_id}: no usable verdict from {self.model} after {PARSE_ATTEMPTS} "
                              f"attempts: its answer repeated the prompt's own text ({json.dumps(redact_text(copied)[:80])}), "
                              "not a judgement of this conversation")
        # redacted before it is cut; a refusal (OpenAI's message.refusal, with no content) is quoted as one
        shown = cut(last_reply or "", 200, more="") or (
            f"(a refusal) {cut(refusal, 200, more='')}" if refusal else "(empty reply)")
        raise JudgeFailed(f"judge {self.scorer_id}: no readable verdict from {self.model} after {PARSE_ATTEMPTS} "
                          f"attempts; last reply: {shown}")


def usage_of(sink: UsageSink, model: str) -> dict[str, Any]:
    """What an outcome records of the calls behind it."""
    return {"model": model, **sink.totals()}


# --- repeated judging and panels (docs/recorded.md) -------------------------------------------------------

MAX_SAMPLES = 9
SAMPLE_TEMPERATURE = 0.7
"""The temperature of each sample when one model is asked several times: at temperature 0 every sample would
give the same verdict, and the seeds would change nothing."""
AGREEMENT_TOLERANCE = 0.1
"""A sample of a scale judge agrees with the decision when its score is this close to the median."""


@record(frozen=True)
class SamplePoint:
    """Who is asked for one verdict: a model, and a seed when one model is asked several times."""

    model: str
    seed: int | None = None
    index: int | None = None
    """The sample's number (from 0) when one model is asked several times: part of its cache key."""

    def label(self, count: int) -> str:
        """How a reason or an error names it: ``sample 2 of 3 (seed 2)`` or the panel member's model."""
        if self.seed is None:
            return f"panel member {self.model}"
        return f"sample {(self.index or 0) + 1} of {count} (seed {self.seed})"


def _temperature(point: SamplePoint | None) -> float:
    return SAMPLE_TEMPERATURE if point is not None and point.seed is not None else 0


def sample_points(model: str, models: Sequence[str] | None, samples: int) -> list[SamplePoint]:
    """A panel's members, each once; else the model, once or ``samples`` times with seeds 1..N."""
    if models:
        return [SamplePoint(m) for m in models]
    if samples <= 1:
        return [SamplePoint(model)]
    return [SamplePoint(model, seed=i + 1, index=i) for i in range(samples)]


async def sampled(points: Sequence[SamplePoint], ask: Callable[[SamplePoint], Coroutine[Any, Any, Outcome]], *,
                  binary: bool, confirm: bool = False) -> Outcome:
    """Ask every point at once and decide; a single point is just asked. ``binary``: the judge's scores are
    verdicts (0 or its scale), so agreeing means the same score; otherwise within ``AGREEMENT_TOLERANCE``.
    ``confirm`` (``samples: {n, when: fail}``): the first point alone, and the others only when its verdict fails
    (``failing``), then decided over all (docs/judges.md#confirm-on-fail)."""
    if len(points) == 1:
        return await ask(points[0])
    if confirm:
        first = await ask(points[0])
        if not failing(first):
            return confirmed_once(points, first)
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(ask(point)) for point in points[1:]]
        outcome = decide(points, [first, *(t.result() for t in tasks)], binary=binary)
        note = f"Confirm on fail: the first verdict failed, so {len(points) - 1} more were asked."
        return replace(outcome, reason=f"{outcome.reason}\n{note}") if outcome.error is None else outcome
    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(ask(point)) for point in points]
    return decide(points, [t.result() for t in tasks], binary=binary)


def failing(outcome: Outcome) -> bool:
    """Whether a first verdict calls for confirmation: a score that would miss a gate (below 1,
    ``reaches_gate``). An error or not scorable is no verdict: it stands as it is."""
    return outcome.error is None and not outcome.not_scorable and outcome.score is not None \
        and not reaches_gate(outcome.score)


def confirmed_once(points: Sequence[SamplePoint], first: Outcome) -> Outcome:
    """A confirm-on-fail judge whose first verdict passed (or errored, or was not scorable): that verdict, its
    sample recorded (1/1), the others never asked."""
    if first.error is not None:
        return Outcome(error=f"{points[0].label(len(points))}: {first.error}", usage=first.usage)
    if first.not_scorable or first.score is None:
        return first
    sample = JudgeSample(points[0].model, points[0].seed, first.score, _verdict_line(first.reason))
    note = (f"Confirm on fail: the first verdict passed ({score_text(first.score)}); the other "
            f"{len(points) - 1} samples were not asked.")
    return replace(first, reason=f"{first.reason or ''}\n\n{note}", samples=(sample,), agreement=(1, 1))


def decide(points: Sequence[SamplePoint], outcomes: Sequence[Outcome], *, binary: bool) -> Outcome:
    """One outcome from several: the median score (an odd count: the middle verdict, the majority for binary ones),
    the reason of the first sample that gave it, each sample's verdict, and how many agree (k/N). A sample that
    failed makes the whole an error (never a decision from the rest); not scorable is decided before any call,
    so it is the same for every sample."""
    count = len(points)
    for point, outcome in zip(points, outcomes, strict=True):
        if outcome.error is not None:
            return Outcome(error=f"{point.label(count)}: {outcome.error}")
    for outcome in outcomes:
        if outcome.not_scorable or outcome.score is None:
            return outcome
    scores = [float(o.score) for o in outcomes if o.score is not None]
    decided = statistics.median(scores)
    tolerance = 0.0 if binary else AGREEMENT_TOLERANCE + 1e-9
    agree = sum(abs(score - decided) <= tolerance for score in scores)
    chosen = next(o for o in outcomes if o.score == decided)
    samples = tuple(JudgeSample(p.model, p.seed, o.score, _verdict_line(o.reason))
                    for p, o in zip(points, outcomes, strict=True))
    who = "models" if points[0].seed is None else "samples"
    rule = "majority" if binary else "median"
    lines = [f"- {p.label(count).removeprefix('panel member ')}: {score_text(s.score)}  {s.verdict}"
             for p, s in zip(points, samples, strict=True)]
    summary = f"{agree} of {count} {who} agree ({rule}: {score_text(decided)})."
    return Outcome(score=decided, reason=f"{chosen.reason or ''}\n\n{summary}\n" + "\n".join(lines),
                   samples=samples, agreement=(agree, count))


def _verdict_line(reason: str | None) -> str:
    return next((line.strip() for line in (reason or "").splitlines() if line.strip()), "")

