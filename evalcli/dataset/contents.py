"""Conversations' identities and content digests (docs/identity.md), each digest made at load or when first asked
(docs/performance.md, "Less work per loaded item").

An item without an ``id`` is its content's digest, made at load. An item that names itself has its identity
without it, and before its first turn a new run needs nothing else of it: its digest (the sha256 of its content's
text, two thirds of what loading an item cost beside reading it) is made when first asked: ``Item.content`` is read
through ``slots.MadeOnRead``, which makes it at the first read, whoever reads it (evalcli, a library caller, ``pickle``,
``copy``, ``asdict``). It is the value loading would have made, whenever and by whichever thread
it is asked: made from the item as loaded (``Later`` holds that item, not a copy made since with other options or
turns) with what a digest depends on taken at load (``Digests``: the secrets' references, the secret check, the
redactor and each scorer's fingerprint; a target's secrets are remembered after its items are read, and its import
may change the environment). Two threads asking at once make the same text.
"""

from __future__ import annotations

from collections.abc import Callable

from ..identity import identities
from ..scorers import ScorerSpec
from ..secret_references import References, digestible, references, secret_check
from ..secrets import redactor
from .items import Item, _content_digest, _content_digests, _plain_content


class Digests:
    """What a conversation's digest depends on, as it was when its dataset was loaded."""

    __slots__ = ("bears", "fingerprints", "lists", "redact", "refs")

    def __init__(self, refs: References, bears: Callable[[str], bool]) -> None:
        self.refs, self.bears, self.redact = refs, bears, redactor()
        self.lists: dict[tuple[int, ...], str] = {}
        """Each list of specs' text by the specs' identities (``items._content_text``); the specs stay alive in
        ``fingerprints``."""
        self.fingerprints: dict[int, tuple[ScorerSpec, str]] = {}

    def keep(self, item: Item) -> None:
        """The fingerprints of ``item``'s turns' gates and scorers, made now."""
        found, refs = self.fingerprints, self.refs
        for turn in item.turns or ():
            for spec in (*turn.gates, *turn.scorers):
                if id(spec) not in found:
                    found[id(spec)] = (spec, spec.fingerprint(refs))

    def fingerprint(self, spec: ScorerSpec) -> str:
        known = self.fingerprints.get(id(spec))
        return spec.fingerprint(self.refs) if known is None else known[1]

    def digest(self, item: Item) -> str:
        """``items._content_digest`` of a plain conversation, as at load."""
        return _content_digest(item, self.refs, self.bears, self.lists, self.fingerprint, self.redact)


class Later:
    """An item's content digest, made when first asked (``value``) from the item as loaded."""

    __slots__ = ("digests", "item", "made")

    def __init__(self, item: Item, digests: Digests) -> None:
        self.item: Item | None = item
        self.digests = digests
        self.made: str | None = None

    def value(self) -> str:
        made = self.made
        if made is None:
            item = self.item
            if item is None:  # made meanwhile by another thread (``made`` is set before ``item`` is let go)
                return self.made  # type: ignore[return-value]
            made = self.made = self.digests.digest(item)
            self.item = None
        return made


def with_identities(items: list[Item]) -> list[Item]:
    """The items with their identities and content digests (the nth identical item without an id numbered), each
    set in ``items`` itself (a dataset's items are never held twice: docs/performance.md#memory); the digest of a
    plain conversation that names itself is left to be made when first asked (``Later``)."""
    refs, bears = references(), secret_check()
    digests: Digests | None = None
    now: list[Item] = []
    for item in items:
        if item.id_given and _plain_content(item):
            if digests is None:
                digests = Digests(refs, bears)
            digests.keep(item)
            object.__setattr__(item, "content", Later(item, digests))
        else:
            now.append(item)
    for item, content in zip(now, _content_digests(now, refs, bears), strict=True):
        object.__setattr__(item, "content", content)
    # an item that names itself is its id, whatever its content (not read here: that would make its digest now); an
    # id holding a secret is its id with the secret as ``${NAME}`` (docs/identity.md), never ``[redacted]``: two ids
    # that differ only in their secrets (``${TENANT_A}-refund``, ``${TENANT_B}-refund``) stay two conversations
    given = [item.id for item in items if item.id_given]
    secret_ids = bool(given) and bears("\n".join(given))
    found = identities((_given_id(item.id, refs, bears) if secret_ids else item.id, "") if item.id_given
                       else (None, item.content) for item in items)
    for item, identity in zip(items, found, strict=True):
        # the items were made by this load and nothing holds them yet: set in place, not copied (``replace`` ran
        # each item's ``__init__`` again, a tenth of loading)
        object.__setattr__(item, "identity", identity)
    return items


def _given_id(given: str, refs: References, bears: Callable[[str], bool]) -> str:
    """An item's own id as its identity holds it: each secret in it as ``${NAME}``, any other redacted
    (``secret_references.digestible``)."""
    return digestible(given, bears=bears, refs=refs)  # type: ignore[no-any-return]
