"""Words every output shares, in a base module so a command that prints one line (``evalcli validate``) need not import
the reports."""

from __future__ import annotations

import re

CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""What a terminal reads as commands, never printed from text an agent, a tool, a scorer or a dataset wrote
(docs/history.md#what-a-terminal-is-sent): the C0 controls but tab and line feed, DEL, the C1 controls, and the
directional formatting characters (a right-to-left override turned the rest of a table's row around)."""


def inert(text: str) -> str:
    """``text`` without the characters a terminal would read as commands (``CONTROLS``)."""
    return CONTROLS.sub("", text) if CONTROLS.search(text) else text


def shell_word(text: str) -> str:
    """``text`` as a shell reads it back, and as it survives ``inert``: quoted only when it must be, and written as
    ``$'...'`` with escapes (bash, zsh) when it holds a character ``inert`` drops."""
    import shlex

    if not CONTROLS.search(text):
        return shlex.quote(text)
    escaped = "".join(("\\" + c if c in "\\'" else c) if not CONTROLS.match(c)
                      else f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}" for c in text)
    return f"$'{escaped}'"


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 conversation``, ``2 conversations``."""
    return f"{count} {word if count == 1 else many or word + 's'}"


def stored_run_word(outcome: str, errors: int, limited: int, scorer_errors: bool) -> str | None:
    """How a stored run's verdict reads in a list of runs (``evalcli runs``, the view) when it covers only part of the
    run (``outcome``: ``results.run_outcome``, ``errors`` when a conversation or a scorer errored): ``limited`` when
    every conversation it left out was stopped by a limit or a budget (never called an error: docs/budgets.md),
    else ``errored`` (docs/history.md); ``None`` for any other outcome (the verdict reads as it is)."""
    if outcome != "errors":
        return None
    return "limited" if limited and limited >= errors and not scorer_errors else "errored"
