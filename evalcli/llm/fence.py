"""Untrusted text shown to a model: fenced between markers, with look-alikes of the markers neutralised.

Judges (docs/judges.md, docs/reference/scorers.md) and the simulated user (docs/simulated-users.md) show models what an agent
(or a user) wrote. That
text is evidence, never instructions: it is put between explicit start and end markers, each on a line of
its own, and anything inside it that resembles a marker (any case, spacing or punctuation, invisible
characters, full-width, accented or Cyrillic/Greek look-alike letters) becomes ``[marker removed]``;
``neutralise_labels`` also marks lines that start like a transcript label (``User turn 2:``), so an agent
cannot forge the other side of a conversation.
"""

from __future__ import annotations

import re
import unicodedata

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
_MARKER_WORDS = ("transcript", "tool", "listed")
_ANGLES = re.compile(r"<(?:\s*<){2,}|>(?:\s*>){2,}")
_LABEL = re.compile(r"^(\s*)((?:user|assistant|tool result|tool call)\b[^:\n]{0,40}:)", re.IGNORECASE | re.MULTILINE)

_LOOKALIKES = dict(zip(map(ord, "АВЕЅІЈКМНОРСТХУаеіјорсѕхуԁΑΒΕΖΗΙΚΜΝΟΡΤΥΧαεικνορτυχ"),
                       "ABESIJKMHOPCTXYaeijopcsxydABEZHIKMNOPTYXaeiknoptux", strict=True))
"""Cyrillic and Greek letters that look like Latin ones (a marker spelled with them still looks like one)."""


def _folded(text: str) -> tuple[str, list[int] | None]:
    """The text without accents and with look-alike letters made Latin, and where each char came from
    (``None``: from the same place, as in ASCII text, which folding leaves as it is)."""
    if text.isascii():
        return text, None
    chars: list[str] = []
    origin: list[int] = []
    last = 0
    for run in _NON_ASCII.finditer(text):  # ASCII stretches are copied whole; only the rest is folded char by char
        chars.append(text[last:run.start()])
        origin.extend(range(last, run.start()))
        for index in range(run.start(), run.end()):
            for part in unicodedata.normalize("NFKD", text[index]):
                if not unicodedata.combining(part):
                    chars.append(part.translate(_LOOKALIKES))
                    origin.append(index)
        last = run.end()
    chars.append(text[last:])
    origin.extend(range(last, len(text)))
    return "".join(chars), origin


_NON_ASCII = re.compile(r"[^\x00-\x7f]+")


def neutralise(text: str) -> str:
    """The text with anything resembling a transcript marker replaced by ``[marker removed]``."""
    text = unicodedata.normalize("NFKC", _INVISIBLE.sub("", text))
    folded, origin = _folded(text)
    pieces, last = [], 0
    lowered = folded.casefold()
    # every marker holds one of these words whole: without them there is nothing to find (and the scan is the cost)
    matches = _MARKER.finditer(folded) if any(word in lowered for word in _MARKER_WORDS) else ()
    for match in matches:
        if match.end() > match.start():
            start, end = (match.start(), match.end() - 1) if origin is None else (origin[match.start()],
                                                                                 origin[match.end() - 1])
            pieces += [text[last:start], MARKER_REMOVED]
            last = end + 1
    text = "".join(pieces) + text[last:]
    return _ANGLES.sub(MARKER_REMOVED, text)


def neutralise_labels(text: str) -> str:
    """Neutralised text in which a line that starts like a transcript label ("User turn 2:") is marked as
    not being one, so an agent cannot forge the other side of a conversation."""
    return _LABEL.sub(lambda m: m.group(1) + LABEL_ESCAPED + m.group(2), neutralise(text))


def fence(body: str, start: str = CONVERSATION_START, end: str = CONVERSATION_END) -> str:
    """``body`` between the start and end markers, each on a line of its own (``body`` already neutralised)."""
    return f"{start}\n{body}\n{end}"
