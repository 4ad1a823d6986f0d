"""How a pytest session plays datasets (read from its options by ``session.settings_of``), and the line of its
summary for each dataset's run."""

from __future__ import annotations

from dataclasses import field
from pathlib import Path

from ..records import record


@record(frozen=True)
class Settings:
    """How this session plays datasets."""

    db: Path
    html: Path | None
    strict: bool
    use_cache: bool
    shown_db: str
    """The database as a user types it after ``--db`` (relative to the current directory when inside it)."""


@record
class RunLine:
    """One dataset's run, for the session's summary (sent from pytest-xdist workers to the controller as a dict)."""

    dataset: str
    run_id: str
    verdict: str
    """The verdict's one label (``passed on 1 of 2 conversations; 1 errored``), as every report words it."""
    conversations: int
    failed: int
    errors: int
    status: str
    db: str
    warnings: list[str] = field(default_factory=list)
    limited: int = 0
    """Conversations a limit or a spent budget stopped: counted apart from ``errors`` (docs/budgets.md)."""
