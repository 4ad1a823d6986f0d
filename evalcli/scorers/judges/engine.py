"""The engine every LLM judge shares (SPEC §5, §14): structured verdicts, repair, cache keys, cost records.

A judge is a prompt, an output model and a score function. It renders what it reads with
``evalcli.llm.fence`` (untrusted text between markers on lines of their own, marker look-alikes
neutralised) and asks ``JudgeCall.ask`` for a verdict: the reply must be one clean JSON object matching
the output model (strict types; the library's models forbid missing and extra fields). A reply that is
not is asked again, then the scoring is an error, never a score. Replies are cached on everything that
changes them, including the judge's own prompt version, and every call is recorded with its tokens and
cost.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from ...llm import LLMClient, LLMError, ResponseCache, UsageSink, reply_text, supports_json_mode, supports_json_schema
from ...messages import Message

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

PARSE_ATTEMPTS = 3
"""Replies asked for before an unreadable verdict becomes an error."""

REPAIR_PROMPT = ("That reply could not be read. Reply again with only one JSON object of exactly the shape "
                 "asked for, and no other text.")

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


def one_verdict(text: str | None, parse: Callable[[Any], T | None], *, same: Callable[[T, T], bool] = operator.eq,
                dig: bool = False) -> T | None:
    """The single verdict in a reply: the whole reply's JSON value, or else the JSON objects found inside it (a code
    fence, prose around it). Several that do not agree (``same``; a fake one quoted beside the real one) are none.
    With ``dig``, a reply that is JSON but not a verdict is searched inside too."""
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


@dataclass
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

    def cache_key(self, messages: Sequence[Message], fmt: dict[str, Any] | None) -> str:
        """Everything that changes the answer, hashed."""
        return ResponseCache.key_for(model=self.model, messages=list(messages), temperature=0, response_format=fmt,
                                     api_base=self.api_base, scorer_id=self.scorer_id, scorer_version=self.version)

    async def ask(self, messages: list[Message], sink: UsageSink) -> T:
        """The parsed verdict; raises ``JudgeFailed`` when none can be had."""
        fmt = response_format(self.model, self.schema_name, self.schema)
        use_cache = self.use_cache and self.llm.cache is not None
        key = self.cache_key(messages, fmt) if use_cache else None
        conversation = list(messages)
        last_reply: str | None = None
        try:
            for attempt in range(PARSE_ATTEMPTS):
                response = await self.llm.complete(
                    model=self.model, messages=conversation, purpose=self.purpose, temperature=0,
                    response_format=fmt, api_base=self.api_base, cache_key=key if attempt == 0 else None,
                    accept=lambda r: self.read(reply_text(r)) is not None, usage_sink=sink)
                last_reply = reply_text(response)
                verdict = self.read(last_reply)
                if verdict is not None:
                    return verdict
                conversation = [*messages, {"role": "assistant", "content": last_reply or ""},
                                {"role": "user", "content": self.repair_prompt}]
        except LLMError as exc:
            raise JudgeFailed(f"judge {self.scorer_id}: {exc.message}") from None
        shown = " ".join((last_reply or "").split())[:200] or "(empty reply)"
        raise JudgeFailed(f"judge {self.scorer_id}: no readable verdict from {self.model} after {PARSE_ATTEMPTS} "
                          f"attempts; last reply: {shown}")


def usage_of(sink: UsageSink, model: str) -> dict[str, Any]:
    """What an outcome records of the calls behind it."""
    return {"model": model, **sink.totals()}
