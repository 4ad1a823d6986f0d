"""``evalcli view``: the run history in a browser: runs, transcripts, live runs, comparisons and human review
(docs/view.md)."""

from __future__ import annotations

from .data import check_database
from .server import ViewSettings, check_settings, make_app, serve

__all__ = ["ViewSettings", "check_database", "check_settings", "make_app", "serve"]
