"""Which shards of a split hold a conversation (``Selection.shards_held``, kept by each shard's run so ``merge`` tells a
missing shard from an empty one: docs/ci.md): exactly the shards whose selection ``apply`` leaves non-empty."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from evalcli.dataset import Selection


def items(ids: list[str]) -> list[Any]:
    # what a selection reads of an item: its id, tags and first input
    return [SimpleNamespace(id=i, tags=["t"] if n % 2 else [], first_input=f"q {i}") for n, i in enumerate(ids)]


@given(ids=st.lists(st.text(min_size=1, max_size=8), max_size=30, unique=True), count=st.integers(1, 12),
       pattern=st.sampled_from([None, "a", "t", "^q"]), limit=st.sampled_from([None, 1, 3]))
def test_the_shards_held_are_those_a_shard_run_would_play_something_in(ids: list[str], count: int,
                                                                        pattern: str | None, limit: int | None) -> None:
    found = items(ids)
    held = Selection(pattern, (1, count), limit).shards_held(found)
    assert held == [n for n in range(1, count + 1) if Selection(pattern, (n, count), limit).apply(found)]
    assert Selection(pattern, None, limit).shards_held(found) is None
