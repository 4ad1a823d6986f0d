"""What the embedded model may write when a JSON reply is asked for (docs/models.md, "The embedded model's answers").

A 270M-parameter model copies what it reads: a reply shape's placeholders (``one or two sentences``), the prompt's
example, the criterion. Its output is held by a llama.cpp grammar made from the reply's JSON schema (cyllama's
``json_schema_to_grammar``), tightened:

- every free text (a string with no ``enum``, ``const``, ``pattern`` or ``format``) has ``TEXT_CHARS`` characters and
  none of ``FORBIDDEN_CHARS``, the brackets placeholders are written with;
- a ``reasoning`` opens with a quote of one line of the evidence the prompt fenced (``Assistant turn 1: An error
  occurred ...``, up to ``QUOTE_CHARS`` characters), then goes on in the model's words: its reason points at what the
  conversation said instead of repeating the instructions;
- JSON's whitespace is one optional space (the converter also allows newlines and indentation, which the model then
  spends tokens and seconds on).

A reply that still holds the prompt's own text is no verdict (``scorers.judges.copies``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

TEXT_CHARS = (6, 300)
"""The fewest and most characters of a free text: never an empty reasoning, and always room to close the JSON."""
FORBIDDEN_CHARS = "<>"
"""Characters no free text may hold: what placeholders are written with (``<one sentence>``)."""
QUOTE_CHARS = 100
"""The most characters of an evidence line a reasoning opens with."""
MAX_QUOTES = 24
"""The most evidence lines a reasoning may choose from (the first ones)."""
FENCED = re.compile(r"^<<<BEGIN [^\n]*>>>\n(.*?)\n<<<END [^\n]*>>>$", re.DOTALL | re.MULTILINE)
REASONING_RULE = re.compile(r"^((?:\S*-)?reasoning) ::= ")


def constrained(schema: Any) -> Any:
    """A JSON schema with every free text held to ``TEXT_CHARS`` characters."""
    if isinstance(schema, list):
        return [constrained(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    node = {key: constrained(value) for key, value in schema.items()}
    if node.get("type") == "string" and not {"enum", "const", "pattern", "format"} & set(node):
        node.setdefault("minLength", TEXT_CHARS[0])
        node.setdefault("maxLength", TEXT_CHARS[1])
    return node


def evidence_quotes(messages: Sequence[dict[str, Any]]) -> list[str]:
    """The lines of the evidence fenced in ``messages`` (the conversation, tool results, listed items), each cut to
    ``QUOTE_CHARS`` characters, in order, each once."""
    quotes: list[str] = []
    for message in messages:
        content = message.get("content")
        for body in FENCED.findall(content if isinstance(content, str) else ""):
            for line in body.splitlines():
                quote = line.strip()[:QUOTE_CHARS].rstrip()
                if quote and quote not in quotes:
                    quotes.append(quote)
    return quotes[:MAX_QUOTES]


def _literal(text: str) -> str:
    """A GBNF literal matching ``text`` as JSON writes it inside a string."""
    inside = json.dumps(text, ensure_ascii=False)[1:-1]
    return '"' + inside.replace("\\", "\\\\").replace('"', '\\"') + '"'


def grammar_for(response_format: Any, quotes: Sequence[str] = ()) -> str | None:
    """The GBNF grammar an OpenAI ``response_format`` asks for (JSON, to its schema when one is given), so the small
    model emits what the caller parses, held as the module says (a ``reasoning`` opens with one of ``quotes`` when
    there are any); ``None`` for free text."""
    if not isinstance(response_format, dict):
        return None
    kind = response_format.get("type")
    schema: Any = None
    if kind == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema")
    elif kind == "json_object":
        schema = response_format.get("schema")
    else:
        return None
    from cyllama.utils.json_schema_to_grammar import json_schema_to_grammar

    grammar: str = json_schema_to_grammar(constrained(schema) if isinstance(schema, dict) and schema
                                          else {"type": "object"})
    opening = " | ".join(_literal(q) for q in quotes)
    lines = []
    for line in grammar.splitlines():
        if line.startswith("space ::="):
            line = 'space ::= " "?'
        elif line.startswith("char ::="):
            line = line.replace('[^"', f'[^{FORBIDDEN_CHARS}"', 1)
        elif opening and (rule := REASONING_RULE.match(line)) and "char{" in line:
            line = f'{rule.group(1)} ::= "\\"" ({opening}) char{{0,{TEXT_CHARS[1]}}} "\\"" space'
        lines.append(line)
    return "\n".join(lines)
