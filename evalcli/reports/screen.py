"""What reaches a terminal: text that a target, a tool, a scorer or a dataset wrote is printed as characters, never
as commands to the terminal (docs/history.md#what-a-terminal-is-sent).

rich drops a few control characters (BEL, BS, VT, FF, CR) from the text it prints, and passes every other: an
agent's reply holding ``ESC [2J`` cleared the screen of whoever ran ``evalcli show``, ``ESC ]52`` wrote their
clipboard, ``ESC ]8`` made a link, and a right-to-left override (U+202E) turned the rest of a table's row around.
``inert_console`` drops every such character from what it prints, after rich has laid the text out: each is zero
cells wide to rich, so tables keep their alignment. rich's own colours and cursor moves are its control segments,
which pass.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # rich is imported when a console is made: the JUnit and Markdown files never load it
    from rich.console import Console, ConsoleOptions, RenderableType
    from rich.segment import Segment

CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""The C0 controls but tab and line feed, DEL, the C1 controls, and the directional formatting characters."""


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


def inert_console(**options: Any) -> Console:
    """A rich ``Console(**options)`` whose printed text never holds a character of ``CONTROLS``."""
    return _inert_console_class()(**options)


@functools.cache
def _inert_console_class() -> type[Console]:
    from rich.console import Console
    from rich.segment import Segment

    class InertConsole(Console):
        def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
            for segment in super().render(renderable, options):
                if segment.control or not CONTROLS.search(segment.text):
                    yield segment
                else:  # text, never one of rich's own colours or cursor moves (its control segments)
                    yield Segment(CONTROLS.sub("", segment.text), segment.style)

    return InertConsole
