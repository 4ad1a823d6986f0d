"""A judge's answer that is the prompt's own text (docs/judges.md, "Unusable answers").

A small model copies what it was shown: the shape's placeholders (``one or two sentences``, ``<claim>``), the example
reply, a rule or the criterion itself. Such a reasoning (or listed claim, fact or intention) says nothing about the
conversation, so a verdict holding one is never stored: the engine asks again, then records the judge's error.

The prompt's own text is every message sent, without the fenced evidence (between a ``<<<BEGIN ...>>>`` and its
``<<<END ...>>>`` marker, where the conversation's words are quoted: a reasoning may quote those). A text is a copy of
it when, in lower case with only its letters and digits, it is one of the prompt's pieces (split at quotes, angle
brackets, line ends and sentence ends), or when 80% of its words or more stand in runs of four words found in it as
they stand ("The agent confirmed the booking for two people", pieced from the criterion and the example).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any, Literal, get_origin

from pydantic import BaseModel

from ...messages import Message, message_text

FENCED = re.compile(r"<<<BEGIN [^\n]*?>>>.*?<<<END [^\n]*?>>>", re.DOTALL)
"""A fenced section: untrusted evidence, not the prompt's own words."""
PIECES = re.compile(r"[\"<>\n]|(?<=[.!?:;])\s")
MIN_COPIED_WORDS = 4
"""Runs of this many words of the prompt's own text are what a copy is pieced together from."""
COPIED_SHARE = 0.8
"""A text whose words stand, this share of them or more, in runs of ``MIN_COPIED_WORDS`` words of the prompt's own
text is a copy (a reasoning may repeat a few words of its criterion, not be made of the prompt)."""


def words(text: str) -> str:
    """The text's words in lower case, one space between them (letters and digits only)."""
    return " ".join(re.findall(r"[^\W_]+", text.lower()))


def own_text(messages: Sequence[Message]) -> str:
    """Every message's text, without the fenced evidence."""
    return "\n".join(FENCED.sub("\n", message_text(m) or "") for m in messages)


def is_prompt_text(text: str, messages: Sequence[Message]) -> bool:
    """Whether ``text`` is the prompt's own text (a placeholder, the example, a rule, the criterion), whole or pieced
    together, and not the model's own words."""
    said = words(text).split()
    if not said:
        return False
    own = own_text(messages)
    if " ".join(said) in {words(piece) for piece in PIECES.split(own)}:
        return True
    return copied_share(said, words(own).split()) >= COPIED_SHARE


def copied_share(said: list[str], own: list[str]) -> float:
    """The share of ``said``'s words that stand in a run of ``MIN_COPIED_WORDS`` words found as they are in ``own``."""
    n = MIN_COPIED_WORDS
    runs = {tuple(own[i:i + n]) for i in range(len(own) - n + 1)}
    covered = [False] * len(said)
    for i in range(len(said) - n + 1):
        if tuple(said[i:i + n]) in runs:
            covered[i:i + n] = [True] * n
    return sum(covered) / len(said)


def texts_in(value: Any) -> Iterator[str]:
    """Every free text in a verdict: its fields, lists and nested verdicts (not a field whose values are listed,
    such as factuality's ``category``: a letter of the prompt is the answer there)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, BaseModel):
        for name, field in type(value).model_fields.items():
            if get_origin(field.annotation) is not Literal:
                yield from texts_in(getattr(value, name))
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from texts_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from texts_in(item)


def prompt_copy(verdict: Any, messages: Sequence[Message]) -> str | None:
    """The first text of ``verdict`` that is the prompt's own text, or ``None`` when every one is the model's own."""
    return next((text for text in texts_in(verdict) if is_prompt_text(text, messages)), None)
