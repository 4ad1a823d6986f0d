"""The engine every LLM judge shares (SPEC §5, §14): fencing, structured verdicts, repair, cache, cost.

A judge is a prompt, an output model and a score function. It renders what it reads with
``fence`` (untrusted text between markers on lines of their own, marker look-alikes neutralised)
and asks ``JudgeCall.ask`` for a verdict: the reply must be one clean JSON object matching the
output model (strict types, no missing or extra fields). A reply that is not is asked again, then the
scoring is an error, never a score. Replies are cached on everything that changes them, including
the judge's own prompt version, and every call is recorded with its tokens and cost.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from ..llm import LLMClient, LLMError, ResponseCache, UsageSink, supports_json_mode, supports_json_schema
from ..messages import Message

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

PARSE_ATTEMPTS = 3
"""Replies asked for before an unreadable verdict becomes an error."""

TRANSCRIPT_START = "<<<BEGIN ASSISTANT TRANSCRIPT (UNTRUSTED)>>>"
TRANSCRIPT_END = "<<<END ASSISTANT TRANSCRIPT (UNTRUSTED)>>>"
CONVERSATION_START = "<<<BEGIN CONVERSATION TRANSCRIPT (UNTRUSTED)>>>"
CONVERSATION_END = "<<<END CONVERSATION TRANSCRIPT (UNTRUSTED)>>>"
TOOL_RESULTS_START = "<<<BEGIN TOOL RESULTS (UNTRUSTED)>>>"
TOOL_RESULTS_END = "<<<END TOOL RESULTS (UNTRUSTED)>>>"
LISTED_START = "<<<BEGIN LISTED ITEMS (UNTRUSTED)>>>"
LISTED_END = "<<<END LISTED ITEMS (UNTRUSTED)>>>"
"""Items a judge listed from untrusted text (intentions, facts, claims), fenced when it is asked about them."""
MARKER_REMOVED = "[marker removed]"
LABEL_ESCAPED = "[label removed] "

REPAIR_PROMPT = ("That reply could not be read. Reply again with only one JSON object of exactly the shape "
                 "asked for, and no other text.")

_INVISIBLE = re.compile("[\u00ad\u034f\u061c\u115f\u1160\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u3164\ufeff\uffa0]")
_W = r"[\W_]*"
_EDGE = r"(?:begin|start|end|stop|open|close)"
_FENCED = rf"(?:tool{_W}results?|listed{_W}items?)"
"""Fenced sections named without the word "transcript"."""
_MARKER = re.compile(
    "|".join(
        [
            rf"{_EDGE}{_W}(?:assistant{_W}|conversation{_W})?(?:untrusted{_W})?transcript"
            rf"(?:{_W}untrusted)?",
            rf"untrusted{_W}(?:assistant{_W}|conversation{_W})?transcript",
            rf"transcript{_W}untrusted",
            rf"{_EDGE}{_W}(?:untrusted{_W})?{_FENCED}(?:{_W}untrusted)?",
            rf"untrusted{_W}{_FENCED}",
        ]
    ),
    re.IGNORECASE,
)
_ANGLES = re.compile(r"<(?:\s*<){2,}|>(?:\s*>){2,}")
_LABEL = re.compile(r"^(\s*)((?:user|assistant|tool result|tool call)\b[^:\n]{0,40}:)", re.IGNORECASE | re.MULTILINE)

_LOOKALIKES = dict(zip(map(ord, "АВЕЅІЈКМНОРСТХУаеіјорсѕхуԁΑΒΕΖΗΙΚΜΝΟΡΤΥΧαεικνορτυχ"),
                       "ABESIJKMHOPCTXYaeijopcsxydABEZHIKMNOPTYXaeiknoptux", strict=True))
"""Cyrillic and Greek letters that look like Latin ones (a marker spelled with them still looks like one)."""


def _folded(text: str) -> tuple[str, list[int]]:
    """The text without accents and with look-alike letters made Latin, and where each char came from."""
    chars: list[str] = []
    origin: list[int] = []
    for index, char in enumerate(text):
        for part in unicodedata.normalize("NFKD", char):
            if not unicodedata.combining(part):
                chars.append(part.translate(_LOOKALIKES))
                origin.append(index)
    return "".join(chars), origin


def neutralise(text: str) -> str:
    """The text with anything resembling a transcript marker replaced by ``[marker removed]``."""
    text = unicodedata.normalize("NFKC", _INVISIBLE.sub("", text))
    folded, origin = _folded(text)
    pieces, last = [], 0
    for match in _MARKER.finditer(folded):
        if match.end() > match.start():
            pieces += [text[last:origin[match.start()]], MARKER_REMOVED]
            last = origin[match.end() - 1] + 1
    text = "".join(pieces) + text[last:]
    return _ANGLES.sub(MARKER_REMOVED, text)


def neutralise_labels(text: str) -> str:
    """Neutralised text in which a line that starts like a transcript label ("User turn 2:") is marked as
    not being one, so an agent cannot forge the other side of a conversation."""
    return _LABEL.sub(lambda m: m.group(1) + LABEL_ESCAPED + m.group(2), neutralise(text))


def fence(body: str, start: str = CONVERSATION_START, end: str = CONVERSATION_END) -> str:
    """``body`` between the start and end markers, each on a line of its own (``body`` already neutralised)."""
    return f"{start}\n{body}\n{end}"


def reply_text(response: dict[str, Any]) -> str | None:
    """The text content of the first choice of a chat-completion response."""
    try:
        content = response["choices"][0]["message"].get("content")
    except (KeyError, IndexError, TypeError, AttributeError):
        return None
    return content if isinstance(content, str) else None


def json_candidates(text: str | None) -> list[Any]:
    """The JSON value of the whole reply, or else every JSON object found inside it (code fence, prose)."""
    if not text or not text.strip():
        return []
    try:
        return [json.loads(text.strip())]
    except ValueError:
        return embedded_json(text)


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


def one_verdict(text: str | None, parse: Callable[[Any], T | None]) -> T | None:
    """The single verdict in a reply; several that disagree (a fake one quoted beside the real one) are none."""
    verdicts = [v for v in (parse(c) for c in json_candidates(text)) if v is not None]
    if verdicts and all(v == verdicts[0] for v in verdicts):
        return verdicts[0]
    return None


def reader(model: type[M]) -> Callable[[str | None], M | None]:
    """Read a reply as exactly one ``model``: right types, no missing and no extra fields, no rival verdict."""
    def parse(value: Any) -> M | None:
        if not isinstance(value, dict):
            return None
        try:
            return model.model_validate(value, strict=True)
        except ValidationError:
            return None

    return lambda text: one_verdict(text, parse)


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
