r"""How argument values read inside default ids (``includes(Brooklyn)``, ``tool_args(get_weather, {city: Paris})``).

One rule for every kind: values are written like YAML flow, a string bare when it cannot be read as
anything else and JSON-quoted when it could (``"1"``, ``"true"``, ``"Paris, France"``), so different
arguments never share an id. The one exception is a kind's main argument when it is a string: it is
written as is (docs/checks.md ``includes(Brooklyn)``, ``matches(\d+°F)``), since nothing follows it that it
could be confused with.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import yaml

from ..secret_references import digestible

_SPECIAL = set(",:;{}[]()\"'#&*!|>%@`\n\t")
LONG_ID = 80
"""Beyond this many characters an argument in an id is shortened to a prefix and a hash."""


def id_text(value: str) -> str:
    """A string as it reads in an id: bare when unambiguous, else JSON-quoted."""
    if not value or value != value.strip() or _SPECIAL & set(value) or value.startswith(("-", "?", "~")):
        return json.dumps(value, ensure_ascii=False)
    try:
        plain = yaml.safe_load(value) == value
    except yaml.YAMLError:
        plain = False
    return value if plain else json.dumps(value, ensure_ascii=False)


def id_value(value: Any) -> str:
    """Any JSON value as it reads in an id: ``{city: Paris, days: 2}``, ``[search, book]``, ``null``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return id_text(value)
    if isinstance(value, list):
        return "[" + ", ".join(id_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{id_text(str(k))}: {id_value(v)}" for k, v in value.items()) + "}"
    return id_text(str(value))


def id_arg(value: Any) -> str:
    """A kind's main argument in its default id: a string as written, anything else as ``id_value``."""
    return value if isinstance(value, str) else id_value(value)


def shortened(text: str) -> str:
    """``text`` if short, else its start and a hash of the whole (still unique, still readable)."""
    if len(text) <= LONG_ID:
        return text
    digest = hashlib.sha256(digestible(text).encode("utf-8")).hexdigest()[:8]  # confirms no guess of a secret
    return f"{text[:LONG_ID - 12]}… #{digest}"
