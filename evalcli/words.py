"""Words every output shares, in a base module so a command that prints one line (``evalcli validate``) need not import
the reports."""

from __future__ import annotations


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 conversation``, ``2 conversations``."""
    return f"{count} {word if count == 1 else many or word + 's'}"
