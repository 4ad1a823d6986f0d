"""evalcli: multi-turn evals of LLM agents, with gates, thresholds, verdicts and SQLite history.

Public API::

    from evalcli import run_evals, Agent, Memory, Score, not_scorable, ScorerRun, ConversationInfo
    from evalcli import plan_runs, run_planned     # several datasets and targets, as `evalcli run` runs them
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .version import __version__

__all__ = [
    "Agent",
    "ConversationInfo",
    "Memory",
    "NotScorable",
    "RunOptions",
    "Score",
    "ScorerRun",
    "__version__",
    "load_dataset",
    "not_scorable",
    "plan_run",
    "plan_runs",
    "run_evals",
    "run_planned",
    "tool",
]

if TYPE_CHECKING:
    from .agent import Agent, Memory
    from .dataset import load_dataset
    from .evaluate import plan_runs, run_planned
    from .run import RunOptions, plan_run, run_evals
    from .scorers import NotScorable, Score, ScorerRun, not_scorable
    from .targets import ConversationInfo
    from .tools import tool

_LAZY = {"Agent": "agent", "Memory": "agent", "run_evals": "run", "RunOptions": "run", "load_dataset": "dataset",
         "plan_run": "run", "plan_runs": "evaluate", "run_planned": "evaluate",
         "NotScorable": "scorers", "Score": "scorers", "ScorerRun": "scorers", "not_scorable": "scorers",
         "ConversationInfo": "targets", "tool": "tools"}


def __getattr__(name: str) -> Any:
    # everything loads only when used: `import evalcli` (and evalcli's pytest plugin, inert unless a dataset is
    # collected) costs nothing measurable
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'evalcli' has no attribute {name!r}")
