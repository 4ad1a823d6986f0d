"""Two or more runs' conversations read side by side, a few hundred at a time (docs/history.md, "Big runs"): how
``diff`` and ``compare`` pair two runs of 100,000 conversations without holding either (each conversation read
light: ``evalcli.store.light``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from ..identity import EXPLICIT
from ..results import ItemResult
from .light import stored_items

CHUNK = 500
"""How many conversations of each run ``read_rows`` reads at a time (one ``IN (...)`` query a run)."""


def conversation_keys(conn: Any, run_id: str) -> list[tuple[str, int]]:
    """Each stored conversation of a run as (identity, item index), in dataset order: all ``diff`` and ``compare``
    hold of a whole run to pair it (``evalcli.identity.identity_of``, read in SQL)."""
    query = ("SELECT CASE WHEN identity IS NOT NULL AND identity != '' THEN identity ELSE ? || item_id END, "
             "item_index FROM items WHERE run_id = ? ORDER BY item_index")
    return [(str(key), int(index)) for key, index in conn.execute(query, (EXPLICIT, run_id))]


def read_rows(conn: Any, run_ids: list[str], rows: Iterable[list[int | None]]) -> Iterator[list[ItemResult | None]]:
    """Per row (one conversation: each run's item index, or ``None`` when that run lacks it) each run's light
    conversation, read ``CHUNK`` rows at a time: two runs of 100,000 conversations are compared holding a few
    hundred conversations, never both runs (docs/history.md#big-runs)."""
    batch: list[list[int | None]] = []
    for row in rows:
        batch.append(row)
        if len(batch) == CHUNK:
            yield from _read_batch(conn, run_ids, batch)
            batch = []
    if batch:
        yield from _read_batch(conn, run_ids, batch)


def _read_batch(conn: Any, run_ids: list[str], batch: list[list[int | None]]) -> Iterator[list[ItemResult | None]]:
    found: list[dict[int, ItemResult]] = []
    for n, run_id in enumerate(run_ids):
        wanted = sorted({index for row in batch if (index := row[n]) is not None})
        found.append({item.index: item for item in stored_items(conn, run_id, indexes=wanted, light=True)}
                     if wanted else {})
    for row in batch:
        yield [None if index is None else found[n].get(index) for n, index in enumerate(row)]
