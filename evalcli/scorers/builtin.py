"""evalcli's own scorer kinds, declared as any package declares its own (docs/extending.md): the entry points
``checks``, ``judges`` and ``python`` of the group ``evalcli.scorers`` in evalcli's ``pyproject.toml`` name these
lists, in the order ``evalcli scorers`` and the reference page list them."""

from __future__ import annotations

from .checks import agents, basic, tools
from .custom import PYTHON as PYTHON_KIND
from .judges import criterion, library

CHECKS = (*basic.KINDS, *tools.KINDS, *agents.KINDS)
"""The deterministic checks."""
JUDGES = (criterion.MULTI_TURN_JUDGE, *library.KINDS)
"""The LLM judges: the criterion judge, then the library's."""
PYTHON = (PYTHON_KIND,)
"""Custom scorers: a function of the user's own."""
