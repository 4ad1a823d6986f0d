"""Keeping secrets out of everything evalcli writes: the DB, JSON, JUnit, Markdown and logs.

A secret is the value of an environment variable whose name says it is one (``*_API_KEY``,
``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``...) or a value a dataset interpolated that looks like a key.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from .yamlsrc import looks_secret

REDACTED = "[redacted]"


class Redactor:
    """Replaces every known secret value in a text with ``[redacted]``."""

    def __init__(self, extra: Iterable[str] = (), env: dict[str, str] | None = None) -> None:
        source = os.environ if env is None else env
        values = {v for k, v in source.items() if looks_secret(k, v) and _named_secret(k)}
        values.update(v for v in extra if len(v) >= 8)
        ordered = sorted(values, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(v) for v in ordered)) if ordered else None

    def __call__(self, text: str) -> str:
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(REDACTED, text)


def _named_secret(name: str) -> bool:
    return bool(re.search(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", name, re.IGNORECASE))
