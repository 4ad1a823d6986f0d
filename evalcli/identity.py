"""A conversation's identity across runs (docs/identity.md): the one rule every cross-run operation matches by.

A conversation is its ``id`` when the item gives one (``id:<id>``); otherwise a fingerprint of the item's content
as resolved (``<digest>``), with the nth identical item of a dataset numbered (``<digest>#2``). Its position never
matches it to anything: moving, adding or removing other items leaves it the same conversation. Beside the identity
each conversation keeps the digest of its content, so an item with an explicit id whose content changed between two
runs is told apart as *changed* (``diff``/``compare`` never count it as regressed or fixed).

``--resume``, ``--rerun-failed``, ``diff``, ``compare``, ``report --baseline``, ``merge`` and the pytest plugin's
``--lf`` all pair conversations through ``pair_by_identity``.
"""

from __future__ import annotations

import datetime
import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

from .secret_references import References, bears_secret, c_encoder, digestible

EXPLICIT = "id:"
"""The prefix of an identity given by an item's ``id``."""
LEGACY = "stored:"
"""The prefix of the identity of a conversation stored before evalcli kept identities, known only by its position
(migration 007 names it by its form and scripted messages)."""


class Identified(Protocol):
    """What pairing needs of a conversation: ``ItemResult`` has it (and so does ``dataset.Item``)."""

    @property
    def id(self) -> str: ...

    @property
    def identity(self) -> str: ...


A = TypeVar("A", bound="Identified")
B = TypeVar("B", bound="Identified")


def content_digest(content: Any, bears: Callable[[str], bool] | None = None, *, plain: bool | None = None) -> str:
    """The digest of an item's content (any value YAML can give; key order never matters), each secret in it as a
    reference to its variable (``${PIN}``) or redacted (``secret_references.digestible``): the same conversation on
    every machine and shard whatever the secret's value, and no guess of a secret can be confirmed against it
    (docs/reliability.md, "Secrets"). ``bears``: ``secret_check()``, made once by a caller digesting many. ``plain``:
    whether ``content`` is known to hold only JSON's own kinds (``plain_json``; ``None``: looked at here)."""
    return text_digest(canonical_json(content, plain=plain), lambda: content, bears)


def text_digest(text: str, content: Callable[[], Any], bears: Callable[[str], bool] | None = None, *,
                refs: References | None = None, redact: Callable[[str], str] | None = None) -> str:
    """``content_digest(content())`` given its ``canonical_json`` text, made by the caller (``content`` is made only
    when the text holds a secret). ``refs`` and ``redact``: as ``digestible`` takes them (a digest made later than
    its item was loaded, ``dataset.contents``)."""
    if (bears or bears_secret)(text):
        text = canonical_json(digestible(content(), refs=refs, redact=redact))
    return _digest(text)


def _digest(text: str) -> str:
    """A content digest of its canonical text: the first 20 hex digits of its SHA-256."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]


def text_digests(texts: Sequence[str], content: Callable[[int], Any], bears: Callable[[str], bool] | None = None
                 ) -> list[str]:
    """``text_digest`` of each text (``content(n)``: the nth one's content), searched for a secret together: the
    texts joined by newlines, which no secret's form as JSON writes it, URL userinfo or secret query value spans
    (``Redactor.holds_any``), so a text holding a secret always makes the whole hold one. When the whole holds none
    (the common case) each text is digested as it is; else each is looked at alone, as ``text_digest`` does."""
    check = bears or bears_secret
    if not texts:
        return []
    if not check("\n".join(texts)):
        return [_digest(text) for text in texts]
    return [text_digest(text, lambda n=n: content(n), check) for n, text in enumerate(texts)]  # type: ignore[misc]


def canonical_json(value: Any, *, plain: bool | None = None) -> str:
    """One text per value, whatever the order of its mappings' keys, for everything safe_load can give: mappings
    whose keys are dates, numbers, bytes or tuples as well as strings, sets, bytes, dates and timestamps (each
    tagged, so the date 2024-01-01 and the string "2024-01-01" differ). A value of JSON's own kinds only (text keys)
    is encoded as it is, without the tagged copy (the same text: every conversation's content is digested at load).
    ``plain``: whether the caller knows that it is (``plain_json``; ``None``: looked at here)."""
    return _ENCODE(value if (_plain(value) if plain is None else plain) else _canonical(value))


_ENCODE = c_encoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=repr)
"""What ``json.dumps(..., sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=repr)`` does, by an
encoder made once; every value given is walked first (``_plain``, ``_canonical``), and a cycle fails there."""
_SCALARS = frozenset({str, int, float, bool, type(None)})


def _plain(value: Any) -> bool:
    """Whether ``value`` holds only what JSON writes as it is (``_canonical`` would give an equal copy): text, numbers,
    booleans, null, lists and tuples of them, mappings with text keys. A scalar member is looked at in the loop, a
    container by a call."""
    kind = type(value)
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or (type(item) not in _SCALARS and not _plain(item)):
                return False
        return True
    if kind is list or kind is tuple:
        for item in value:
            if type(item) not in _SCALARS and not _plain(item):
                return False
        return True
    return kind in _SCALARS


plain_json: Callable[[Any], bool] = _plain
"""Whether a value holds only what JSON writes as it is (``canonical_json``'s ``plain``)."""


def _canonical(value: Any) -> Any:
    if isinstance(value, dict):
        if all(isinstance(key, str) for key in value):
            return {key: _canonical(item) for key, item in value.items()}
        pairs = [[_canonical(key), _canonical(item)] for key, item in value.items()]
        return {"<mapping>": sorted(pairs, key=lambda pair: json.dumps(pair, sort_keys=True, default=repr))}
    if isinstance(value, list | tuple):
        return [_canonical(item) for item in value]
    if isinstance(value, set | frozenset):
        return {"<set>": sorted((_canonical(item) for item in value), key=lambda item: json.dumps(
            item, sort_keys=True, default=repr))}
    if isinstance(value, bytes):
        return {"<bytes>": value.hex()}
    if isinstance(value, datetime.date):  # datetimes too
        return {"<" + type(value).__name__ + ">": value.isoformat()}
    return value


def conversation_identity(given_id: str | None, content: str, nth: int = 1) -> str:
    """The identity of one conversation: ``id:<given_id>`` when the item names itself, else its content digest
    (``content``, from ``content_digest``), suffixed ``#nth`` for the second and later identical items."""
    if given_id is not None:
        return EXPLICIT + given_id
    return content if nth <= 1 else f"{content}#{nth}"


def identities(entries: Iterable[tuple[str | None, str]]) -> list[str]:
    """The identities of a dataset's conversations, in order, from each one's (given id or ``None``, content digest):
    identical items without an id are numbered by their order among themselves."""
    seen: dict[str, int] = {}
    out = []
    for given_id, content in entries:
        nth = 1
        if given_id is None:
            nth = seen[content] = seen.get(content, 0) + 1
        out.append(conversation_identity(given_id, content, nth))  # the one rule of an identity
    return out


def identity_of(item: Identified) -> str:
    """An item's identity; one built without one (a library caller's own ``ItemResult``) is its id."""
    return item.identity or EXPLICIT + item.id


def given_name(item: Identified) -> str:
    """The name ``evalcli show RUN NAME`` finds a conversation by: its own id as its identity holds it, a secret in it as
    ``${NAME}`` (two ids that differ only in their secrets are both ``[redacted]-refund`` where they are shown)."""
    identity = identity_of(item)
    return identity[len(EXPLICIT):] if identity.startswith(EXPLICIT) else item.id


def pair_by_identity(items_a: Sequence[A], items_b: Sequence[B]) -> list[tuple[A | None, B | None]]:
    """Conversations of run A and run B paired by identity: every one of A in A's order (with B's of the same
    identity, or ``None``), then those only B has, in B's order."""
    by_identity = {identity_of(b): b for b in items_b}
    pairs: list[tuple[A | None, B | None]] = []
    matched: set[str] = set()
    for a in items_a:
        key = identity_of(a)
        pairs.append((a, by_identity.get(key)))
        matched.add(key)
    pairs.extend((None, b) for b in items_b if identity_of(b) not in matched)
    return pairs


def changed(a: Any, b: Any) -> bool:
    """Whether two conversations of one identity differ in content (only an item with an explicit id can): each
    side's ``content`` digest, when both runs kept one."""
    content_a, content_b = getattr(a, "content", ""), getattr(b, "content", "")
    return bool(content_a and content_b and content_a != content_b)
