"""Keeping secrets out of everything evalcli writes: the DB, JSON, JUnit, Markdown and logs.

A secret is the value of an environment variable whose name says it is one (``*_API_KEY``,
``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``...) or a value a dataset interpolated that looks like a key.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from typing import Any

REDACTED = "[redacted]"

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH(?!OR)", re.IGNORECASE)
"""Names of environment variables that hold credentials."""
KEY_SHAPE = re.compile(r"\b(sk|pk|rk|key|gsk|xai|hf|ghp|gho|xox[abp])[-_][A-Za-z0-9_\-]{8,}")
"""Provider API keys by their look (``sk-...``, ``ghp_...``, ``xoxb-...``)."""


def looks_secret(name: str, value: str) -> bool:
    """A value that is probably a credential: named like one, or shaped like a provider key."""
    if len(value) < 8:
        return False
    return bool(SECRET_NAME.search(name)) or KEY_SHAPE.match(value) is not None


class Redactor:
    """Replaces every known secret value in a text with ``[redacted]``."""

    def __init__(self, extra: Iterable[str] = (), env: dict[str, str] | None = None) -> None:
        source = os.environ if env is None else env
        values = {v for k, v in source.items() if len(v) >= 8 and SECRET_NAME.search(k)}
        values.update(v for v in extra if len(v) >= 8)
        self.values = frozenset(values)
        """Every secret value this redactor replaces."""
        ordered = sorted(values, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(v) for v in ordered)) if ordered else None
        # each value as JSON writes it (with and without ensure_ascii): a secret in any string of a value is then
        # in the value's JSON text, which one search finds
        escaped = {json.dumps(v, ensure_ascii=ascii)[1:-1] for v in ordered for ascii in (True, False)}
        self._escaped = re.compile("|".join(re.escape(v) for v in sorted(escaped, key=len, reverse=True))) \
            if escaped else None

    def including(self, extra: Iterable[str]) -> Redactor:
        """This redactor, or one that also replaces ``extra`` when some of it is new."""
        more = {v for v in extra if len(v) >= 8} - self.values
        return self if not more else Redactor(self.values | more, env={})

    def __call__(self, text: str) -> str:
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(REDACTED, text)

    def dumps(self, value: Any, **options: Any) -> str:
        """``json.dumps(self.value(value), **options)``, without walking the value when its JSON holds no secret
        (the common case, and walking every string of every stored conversation was most of a report's time)."""
        text = json.dumps(value, **options)
        if self._escaped is None or not self._escaped.search(text):
            return text
        return json.dumps(self.value(value), **options)

    def value(self, value: Any) -> Any:
        """A copy of a JSON-like value with every string (keys included) redacted; done before serialising,
        so a secret holding quotes or backslashes is still found. Anything that is not JSON (an object a target
        returned, bytes, a date) becomes its text here, redacted, as serialising would have made it unredacted."""
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self(value)
        if isinstance(value, dict):
            return {self(k) if isinstance(k, str) else self(str(k)) if not _json_key(k) else k: self.value(v)
                    for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.value(v) for v in value]
        if value is None or isinstance(value, (bool, int, float)):
            return value
        return self(str(value))


def _json_key(key: Any) -> bool:
    """Keys ``json.dumps`` writes as they are (anything else it would turn into text, or refuse)."""
    return key is None or isinstance(key, (bool, int, float))


_environment: tuple[dict[Any, Any], Redactor] | None = None


def _environment_redactor() -> Redactor:
    """A ``Redactor`` of the environment's secrets, made again only when the environment changes (a model call's
    error text or cached reply is redacted on every call; reading the environment and compiling the pattern
    each time cost more than the redaction)."""
    global _environment
    raw = getattr(os.environ, "_data", None)  # CPython's mapping under os.environ: comparing it is cheap
    if not isinstance(raw, dict):
        return Redactor()
    if _environment is None or _environment[0] != raw:
        _environment = (dict(raw), Redactor())
    return _environment[1]


def redact_text(text: str) -> str:
    """Secret environment values and anything shaped like a provider key, replaced (for error texts)."""
    return KEY_SHAPE.sub(REDACTED, _environment_redactor()(text))
