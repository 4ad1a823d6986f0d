"""How a pytest session plays datasets (from its options), and the line of its summary for each dataset's run."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest


@dataclass(frozen=True)
class Settings:
    """How this session plays datasets."""

    db: Path
    html: Path | None
    strict: bool
    use_cache: bool
    shown_db: str
    """The database as a user types it after ``--db`` (relative to the current directory when inside it)."""


@dataclass
class RunLine:
    """One dataset's run, for the session's summary (sent from pytest-xdist workers to the controller as a dict)."""

    dataset: str
    run_id: str
    verdict: str | None
    conversations: int
    failed: int
    errors: int
    status: str
    db: str
    warnings: list[str] = field(default_factory=list)


def settings_of(config: pytest.Config, here: Path) -> Settings:
    """The options, paths resolved from ``here`` and checked (``pytest.UsageError``, before anything runs)."""
    from .plugin import absolute_path, shown_path

    db_option = config.getoption("evalcli_db")
    db = absolute_path(here / db_option) if db_option else here / "evalcli.db"
    if db_option and db.is_dir():
        raise pytest.UsageError(f"--evalcli-db {db_option} is a directory; give a database file, "
                                f"e.g. --evalcli-db {Path(db_option) / 'evalcli.db'}")
    if db_option and not db.parent.is_dir():
        raise pytest.UsageError(f"--evalcli-db {db_option}: the folder {db.parent} does not exist; create it first")
    if db_option and not os.access(db if db.exists() else db.parent, os.W_OK):
        raise pytest.UsageError(f"--evalcli-db {db_option} cannot be written (permission denied)")
    html_option = config.getoption("evalcli_html")
    html = absolute_path(here / html_option) if html_option else None
    if html is not None and html.is_dir():
        raise pytest.UsageError(f"--evalcli-html {html_option} is a directory; give a file, e.g. report.html")
    return Settings(db, html, bool(config.getoption("evalcli_strict")), not config.getoption("evalcli_no_cache"),
                    shown_path(db, here))
