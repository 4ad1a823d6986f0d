"""A run's conversations read light (docs/history.md, "Big runs"): without what the agent said and the reasons of
its scores, which is all ``diff`` and ``compare`` need to pair and count two runs of 100,000 conversations."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ..identity import EXPLICIT

if TYPE_CHECKING:
    from ..results import ItemResult

LIGHT = {"output": "'[]' AS output", "structured": "NULL AS structured"}
"""The columns of a turn ``light`` leaves out (what the agent said): ``diff`` and ``compare`` pair and count without."""


def turns_from(conn: Any, light: bool) -> str:
    if not light:
        return "SELECT * FROM turns"
    columns = [row[1] for row in conn.execute("PRAGMA table_info(turns)")]  # a database of any schema version
    return f"SELECT {', '.join(LIGHT.get(column, column) for column in columns)} FROM turns"


def stored_outcomes(text: str | None, light: bool) -> dict[str, Any]:
    """An ``outcomes`` column; ``light``: without each gate's and scorer's reason and samples (they quote the agent)."""
    outcomes: dict[str, Any] = json.loads(text or "{}")
    if light:
        for group in ("gates", "scorers"):
            for outcome in (outcomes.get(group) or {}).values():
                outcome.pop("reason", None)
                outcome.pop("samples", None)
    return outcomes


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
    from .store import stored_items  # the store imports this module

    found: list[dict[int, ItemResult]] = []
    for n, run_id in enumerate(run_ids):
        wanted = sorted({index for row in batch if (index := row[n]) is not None})
        found.append({item.index: item for item in stored_items(conn, run_id, indexes=wanted, light=True)}
                     if wanted else {})
    for row in batch:
        yield [None if index is None else found[n].get(index) for n, index in enumerate(row)]
