"""Scorers (docs/scorers.md, docs/reference/scorers.md): every kind declared once (``kinds``, found through the
``evalcli.scorers`` entry points: evalcli's own in ``builtin``, and those of installed packages, docs/extending.md),
the specs and how scorers are built from them (``registry``), custom Python scorers, the deterministic ``checks`` and
the LLM ``judges`` on one engine.

A scorer is a ``Scorer`` (``async def score(run: ScorerRun) -> Outcome``, and ``score_now`` when it never
waits). Kinds are declared where they are implemented and found by name; parsing references from YAML is
``evalcli.dataset``'s job. What a scorer receives and returns (``base``) is imported at once (``import evalcli``
needs it); the rest when first used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .base import NotScorable, Score, ScorerRun, TurnView, not_scorable

if TYPE_CHECKING:
    from .kinds import BuildContext, Kind, Scorer, all_kinds, find, origin
    from .registry import Builder, CalibrationBar, Registry, ScorerSpec, flow_yaml, inline_yaml, registration_line

__all__ = ["BuildContext", "Builder", "CalibrationBar", "Kind", "NotScorable", "Registry", "Score", "Scorer",
           "ScorerRun", "ScorerSpec", "TurnView", "all_kinds", "find", "flow_yaml", "inline_yaml", "not_scorable",
           "origin", "registration_line"]

_LAZY = {"BuildContext": "kinds", "Kind": "kinds", "Scorer": "kinds", "all_kinds": "kinds", "find": "kinds",
         "origin": "kinds", "Builder": "registry", "CalibrationBar": "registry", "Registry": "registry", "ScorerSpec": "registry",
         "flow_yaml": "registry", "inline_yaml": "registry", "registration_line": "registry"}


def __getattr__(name: str) -> Any:
    # kinds and specs need pydantic: loaded only when used, keeping `import evalcli` light
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'evalcli.scorers' has no attribute {name!r}")
