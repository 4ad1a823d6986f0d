"""Choosing which conversations of a dataset to run: --filter, --shard, --limit."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence

from ..errors import UsageError
from ..records import record
from .items import Item


@record(frozen=True)
class Selection:
    """Which items run. Applied in this order: filter, shard, limit."""

    filter: str | None = None
    """A regex searched in each item's id, each tag and its first input."""
    shard: tuple[int, int] | None = None
    """(I, N): the I-th of N stable, disjoint parts of the dataset (by item id)."""
    limit: int | None = None
    """At most this many items (the first ones left after filter and shard)."""

    def apply(self, items: Sequence[Item]) -> list[Item]:
        chosen = self._filtered(items)
        if self.shard:
            index, count = self.shard
            chosen = [i for i in chosen if shard_of(i.id, count) == index]
        if self.limit is not None:
            chosen = chosen[: self.limit]
        return chosen


    def _filtered(self, items: Iterable[Item]) -> list[Item]:
        if not self.filter:
            return list(items)
        pattern = re.compile(self.filter)
        return [i for i in items
                if pattern.search(i.id) or any(pattern.search(t) for t in i.tags) or pattern.search(i.first_input)]

    def shards_held(self, items: Iterable[Item]) -> list[int] | None:
        """A sharded selection's shards (1..N) that hold at least one of ``items`` passing ``--filter`` (``--limit``
        only shortens a shard): what ``merge`` expects to find (docs/ci.md). ``None`` unsharded."""
        if self.shard is None:
            return None
        count, held = self.shard[1], set()
        for item in self._filtered(items):
            held.add(shard_of(item.id, count))
            if len(held) == count:
                break
        return sorted(held)


def shard_of(item_id: str, count: int) -> int:
    """The shard (1..count) an item id belongs to: stable across machines, runs and Python versions."""
    digest = hashlib.sha256(item_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


def parse_shard(text: str) -> tuple[int, int]:
    """``I/N`` with 1 <= I <= N, in ASCII digits."""
    match = re.fullmatch(r"\s*([0-9]+)\s*/\s*([0-9]+)\s*", text)  # ASCII digits (\d takes any script's)
    if not match:
        raise UsageError(f"--shard '{text}' is not I/N", "write e.g. --shard 1/4 (the first of four shards)")
    index, count = int(match.group(1)), int(match.group(2))
    if count < 1 or not 1 <= index <= count:
        raise UsageError(f"--shard {text}: I must be between 1 and N", "write e.g. --shard 2/4")
    return index, count


def check_filter(pattern: str | None) -> None:
    if pattern is None:
        return
    try:
        re.compile(pattern)
    except re.error as exc:
        raise UsageError(f"--filter '{pattern}' is not a valid regular expression: {exc}",
                         "escape special characters, e.g. --filter 'weather\\?'") from None
