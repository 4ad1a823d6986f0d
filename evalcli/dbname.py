"""Where a database is, as commands name it: the default file, and the ``--db`` a suggested command adds."""

from __future__ import annotations

import shlex
from pathlib import Path

DEFAULT_DATABASE = "evalcli.db"
"""The database every command reads and writes unless ``--db`` names another (in the current directory)."""


def db_option(db: str | Path | None) -> str:
    """How a command evalcli suggests (``evalcli show RUN ITEM``, ``--resume RUN``) names the database: `` --db PATH``
    (quoted for a shell), or nothing when it is the default one, which the command then opens by itself."""
    if not db or str(db) == DEFAULT_DATABASE:
        return ""
    return f" --db {shlex.quote(str(db))}"
