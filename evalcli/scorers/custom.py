"""Custom Python scorers: a callable taking a ``ScorerRun`` and returning a float, ``Score`` or ``not_scorable()``."""

from __future__ import annotations

import asyncio
import inspect
import numbers
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..results import Outcome
from .base import NotScorable, Score, ScorerRun, finite_score, own_copy
from .kinds import BuildContext, Kind, Scorer

RETURNS = "return a float, evalcli.Score(score, reason) or evalcli.not_scorable(reason)"


def to_outcome(value: Any, name: str) -> Outcome:
    """Accept what a custom scorer may return: a real number (``int``, ``float``, ``Fraction``, numpy's scalars), a
    ``Score`` of one, ``not_scorable()``, each reason a string or ``None``. Anything else, a non-finite score included,
    is that scorer's error (JSON and SQLite have no infinity or NaN: stored, such a score would read back as another
    one), in words that say what it returned (docs/scorers.md "Custom Python scorers")."""
    if isinstance(value, NotScorable):
        return Outcome(not_scorable=True, reason=_reason(value.reason, name))
    if isinstance(value, Score):
        if not isinstance(value.score, numbers.Real):
            raise TypeError(f"scorer {name} returned a Score whose score is of type {type(value.score).__name__}, "
                            f"not a number; {RETURNS}")
        return Outcome(score=_finite(value.score, name), reason=_reason(value.reason, name))
    if isinstance(value, numbers.Real):
        return Outcome(score=_finite(value, name))
    raise TypeError(f"scorer {name} returned {type(value).__name__}; {RETURNS}")


def _finite(value: numbers.Real, name: str) -> float:
    return finite_score(value, f"scorer {name}", "return evalcli.not_scorable(reason)")


def _reason(reason: Any, name: str) -> str | None:
    if reason is not None and not isinstance(reason, str):
        raise TypeError(f"scorer {name} returned a reason of type {type(reason).__name__}; a reason is a string "
                        "(or None)")
    return reason


class PythonScorer(Scorer):
    """Wraps a user's function (sync functions run in a worker thread, so they never block the loop)."""

    def __init__(self, function: Any, name: str) -> None:
        self.fn = function if callable(function) and not hasattr(function, "score") else function.score
        self.name = name
        self.is_async = inspect.iscoroutinefunction(self.fn)

    async def score(self, run: ScorerRun) -> Outcome:
        run = own_copy(run)  # what it changes, no other scorer sees (docs/scorers.md "Custom Python scorers")
        if self.is_async:
            value = await self.fn(run)
        else:
            value = await asyncio.to_thread(self.fn, run)
            if inspect.isawaitable(value):
                value = await value
        return to_outcome(value, self.name)


class PythonArgs(BaseModel):
    """Arguments of a custom Python scorer."""

    model_config = ConfigDict(extra="forbid")

    function: str = Field(description="Import path 'module:attribute' of a callable taking a ScorerRun.")

    @field_validator("function")
    @classmethod
    def _import_path(cls, value: str) -> str:
        module, sep, attribute = value.partition(":")
        if not sep or not module or not attribute:
            raise ValueError("python needs an import path 'module:attribute', e.g. my_scorers:tone")
        return value


def _build(args: PythonArgs, context: BuildContext) -> PythonScorer:
    return PythonScorer(context.imported[args.function], context.scorer_id)


PYTHON = Kind(name="python", args=PythonArgs, main="function", group="custom", build=_build, imports="function",
              summary="your own function of a ScorerRun, returning a float, Score(score, reason) or not_scorable()",
              default_id=lambda values: f"python({values['function']})", example="python: my_scorers:polite")
