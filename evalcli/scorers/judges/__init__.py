"""The LLM judges (docs/judges.md, docs/reference/scorers.md) on one engine (``engine``: structured verdicts, repair, cache
keys, cost records),
with ``kit`` (what judges read and how kinds are declared), ``criterion`` (``multi_turn_judge``), ``library``
(rubric, role adherence, factuality, goal achieved) and ``listing`` (completeness, knowledge retention,
groundedness: list, then judge)."""

from __future__ import annotations

from .engine import JudgeCall, JudgeFailed, Verdicts, output_schema, reader

__all__ = ["JudgeCall", "JudgeFailed", "Verdicts", "output_schema", "reader"]
