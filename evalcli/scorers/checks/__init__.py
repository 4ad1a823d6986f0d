"""The deterministic checks (docs/checks.md, docs/reference/scorers.md, docs/targets/frameworks.md): ``basic`` (text and tool
checks), ``tools`` (arguments, trajectories,
F1, JSON output), ``agents`` (which agent answered, structured results) and ``matching`` (JSON value matching and
maximum bipartite matching). No LLM."""

from __future__ import annotations

from .basic import CheckArgs, CheckScorer, check, dice_similarity

__all__ = ["CheckArgs", "CheckScorer", "check", "dice_similarity"]
