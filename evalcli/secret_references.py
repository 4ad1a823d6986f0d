"""Secrets written as a reference to their variable, ``${NAME}``, where a text must keep its words without holding the
value (docs/reliability.md, "Secrets"). Which values are secrets, and by which names, is ``evalcli.secrets``'
(``named``: the variables a dataset or registry interpolated or declared, and the environment's secret-named ones).

- ``stored`` / ``restored``: the response cache keeps a reply with each such secret as ``${NAME}`` (and every ``$`` of
  the reply doubled, so a reply that itself said ``${PIN}`` reads back as it was), anything else secret redacted;
  reading puts the values back, so a cached simulated user says on the next run the words it said on the first. A
  reference whose variable has no value now (``Unresolved``) makes the entry unusable.
- ``digestible``: what a stored digest covers (a conversation's identity, a scorer's fingerprint, a response cache
  key): each such secret as ``${NAME}``, any other secret ``[redacted]``. A digest of it is the same on every machine
  and shard whatever the secret's value, and no guess of the secret can be confirmed against it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from typing import Any

from .secrets import known, named, redactor, remembered_names, usable

REFERENCE = re.compile(r"\$(\$|\{([A-Za-z_][A-Za-z0-9_]*)\})")
"""``$$`` (a ``$`` of the original text) or ``${NAME}`` (the value of the secret NAME), in a stored text."""


class Unresolved(LookupError):
    """A stored reference to a variable that holds no secret now."""


class References:
    """Writes the secrets of ``names`` (name -> value) as ``${NAME}`` and reads them back. Two names of one value
    write the first in order; a value too short to be replaced anywhere (``secrets.usable``) is never written so."""

    def __init__(self, names: Mapping[str, str]) -> None:
        self.names = dict(names)
        by_value: dict[str, str] = {}
        for name in sorted(names):
            if usable(names[name]):
                by_value.setdefault(names[name], name)
        self._by_value = by_value
        alternatives = "|".join(re.escape(v) for v in sorted(by_value, key=len, reverse=True))
        self._values = re.compile(alternatives) if alternatives else None
        self._escaping = re.compile(f"{alternatives}|\\$" if alternatives else r"\$")
        serialised = {json.dumps(v, ensure_ascii=ascii)[1:-1] for v in by_value for ascii in (True, False)}
        self._in_json = re.compile("|".join(re.escape(v) for v in sorted(serialised, key=len, reverse=True))) \
            if serialised else None
        """Each value as JSON writes it, to tell at once whether a serialised value holds one."""

    def _written(self, match: re.Match[str]) -> str:
        found = match.group(0)
        return "$$" if found == "$" else "${" + self._by_value[found] + "}"

    def write(self, text: str, *, escape: bool) -> str:
        """``text`` with each secret as ``${NAME}``; ``escape``: every other ``$`` doubled, so ``read`` gives back
        exactly ``text``."""
        pattern = self._escaping if escape else self._values
        return text if pattern is None else pattern.sub(self._written, text)

    def holds(self, text: str) -> bool:
        """Whether ``text`` (or the JSON of a value) holds one of the secrets, as it is or as JSON escapes it."""
        return self._in_json is not None and self._in_json.search(text) is not None

    def read(self, text: str) -> str:
        """A text ``write(..., escape=True)`` made, with every value back; raises ``Unresolved``."""
        def value(match: re.Match[str]) -> str:
            name = match.group(2)
            if name is None:
                return "$"
            if name not in self.names:
                raise Unresolved(name)
            return self.names[name]

        return REFERENCE.sub(value, text) if "$" in text else text


_current: tuple[dict[Any, Any], Mapping[str, str], frozenset[str], References] | None = None


def references() -> References:
    """The references of every secret known by name now, made again only when the environment or the secrets
    remembered change (a dataset's every conversation is digested: reading the environment each time cost more than
    the digests)."""
    global _current
    raw = getattr(os.environ, "_data", None)
    current = _current
    if (current is None or not isinstance(raw, dict) or current[0] != raw or current[1] is not remembered_names()
            or current[2] is not known()):
        current = _current = (dict(raw) if isinstance(raw, dict) else {}, remembered_names(), known(),
                              References(named()))
    return current[3]


def walk(value: Any, change: Callable[[str], str]) -> Any:
    """``value`` with ``change`` applied to every string in it (mapping keys, list, tuple and set members too); every
    other value, and the kind of each container, as it was."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {walk(k, change): walk(v, change) for k, v in value.items()}
    if isinstance(value, list):
        return [walk(v, change) for v in value]
    if isinstance(value, tuple):
        return tuple(walk(v, change) for v in value)
    if isinstance(value, (set, frozenset)):
        return type(value)(walk(v, change) for v in value)
    return value


def json_text(value: Any, *, sort_keys: bool = False) -> str:
    """``value`` as JSON text, whatever YAML read into it: a mapping key that is not text (a date, a number, bytes:
    docs/yaml.md) is written as its ``repr``, any other value JSON cannot hold as its ``repr``. The same text as
    ``json.dumps(value, sort_keys=sort_keys, default=repr, ensure_ascii=False)``, made by one encoder per
    ``sort_keys`` (``json.dumps`` with options makes a new one for every value; a run's fingerprint asks for tens of
    texts a conversation)."""
    if isinstance(value, str):
        return _json_string(value)
    encode = _ENCODERS[sort_keys]
    try:
        return encode(value)
    except TypeError:  # keys JSON cannot hold, or that do not sort together
        return encode(_text_keys(value))


_json_string = json_string = json.encoder.encode_basestring
"""What ``json.dumps(text, ensure_ascii=False)`` returns for a ``str``."""
_ENCODERS = {order: json.JSONEncoder(sort_keys=order, default=repr, ensure_ascii=False).encode for order in (False, True)}


def c_encoder(**options: Any) -> Callable[[Any], str]:
    """``json.JSONEncoder(**options).encode``, by CPython's C encoder made once. ``encode`` makes a new one for every
    value, with a dict of the containers under way that only ever finds a value holding itself: half the time of a
    small value. Made without that dict: a container inside itself recurses until ``RecursionError`` (the callers walk
    their values first, or catch it and say what ``json_text`` says). Checked against ``encode`` on a sample; where the
    C encoder is missing or writes otherwise (another Python), ``encode`` itself."""
    encoder = json.JSONEncoder(**options)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None or encoder.indent is not None:  # pragma: no cover - CPython has it; no caller indents
        return encoder.encode
    strings = json.encoder.encode_basestring_ascii if encoder.ensure_ascii else json.encoder.encode_basestring
    sample = {"b": [1.5, None, True, -2], "a": "\u00e9\n", "c": {"z": {}, "y": []}}
    try:
        made = make(None, encoder.default, strings, None, encoder.key_separator, encoder.item_separator,
                    encoder.sort_keys, encoder.skipkeys, encoder.allow_nan)
        if "".join(made(sample, 0)) != encoder.encode(sample):  # pragma: no cover - another Python's encoder
            return encoder.encode
    except TypeError:  # pragma: no cover - another Python's signature
        return encoder.encode
    return lambda value: "".join(made(value, 0))


def _text_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k if isinstance(k, str) else repr(k): _text_keys(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_text_keys(v) for v in value]
    return value


def digestible(value: Any, text: str | None = None, bears: Callable[[str], bool] | None = None, *,
               refs: References | None = None, redact: Callable[[str], str] | None = None) -> Any:
    """``value`` as a stored digest may cover it: each secret known by name as ``${NAME}``, then every other secret
    redacted (``secrets.redactor``). A value holding no secret is returned as it is (its digest unchanged), found so
    from its JSON at once (``text``, when the caller has made it: any key order), without walking it. ``bears``:
    ``secret_check()``, made once by a caller that asks for many values; ``refs`` and ``redact``: ``references()``
    and ``redactor()`` as they were when the caller took ``bears`` (a digest made later, ``dataset.contents``)."""
    text = value if isinstance(value, str) else text if text is not None else json_text(value)
    if not (bears or bears_secret)(text):
        return value
    refs = references() if refs is None else refs
    redact = redactor() if redact is None else redact
    return walk(value, lambda text: redact(refs.write(text, escape=False)))


def bears_secret(text: str) -> bool:
    """Whether a text (a value's JSON) holds a secret ``digestible`` would change."""
    return references().holds(text) or redactor().holds_secret(text)


def secret_check() -> Callable[[str], bool]:
    """``bears_secret`` for the secrets known now, without looking them up again for each text (a fingerprint asks
    for tens of texts a conversation)."""
    holds, holds_secret = references().holds, redactor().holds_secret
    return lambda text: holds(text) or holds_secret(text)


def stored(value: Any) -> Any:
    """A JSON value as the response cache keeps it: secrets known by name as ``${NAME}`` (every other ``$``
    doubled), then any other secret redacted."""
    refs, redact = references(), redactor()
    return walk(value, lambda text: redact(refs.write(text, escape=True)))


def restored(value: Any) -> Any:
    """What ``stored`` kept, with every secret's value back; raises ``Unresolved`` when one has none now."""
    refs = references()
    return walk(value, refs.read)
