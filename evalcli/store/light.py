"""A run's conversations read light (docs/history.md, "Big runs"): without what the agent said and the reasons of
its scores, which is all ``diff`` and ``compare`` need to pair and count two runs of 100,000 conversations."""

from __future__ import annotations

import json
from typing import Any

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
