"""How a dataset value names a variable: ``${NAME}`` or ``${NAME:-default}``, and ``$${`` for a literal ``${``
(docs/datasets.md). The loader interpolates with it; ``evalcli mocks from-tape`` escapes recorded text with it."""

from __future__ import annotations

import re

INTERPOLATION = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
ESCAPED = "$${"
"""A literal ``${`` in a string value: ``$${HOME}`` is the text ``${HOME}``, never interpolated (docs/datasets.md)."""


def escaped(text: str) -> str:
    """``text`` written so that a dataset reads it back as it is: every ``${`` doubled to ``$${``."""
    return text.replace("${", ESCAPED)
