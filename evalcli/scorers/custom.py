"""Custom Python scorers: a callable taking a ``ScorerRun`` and returning a float, ``Score`` or ``not_scorable()``."""

from __future__ import annotations

import asyncio
import copy
import inspect
import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..results import Outcome
from .base import NotScorable, Score, ScorerRun
from .kinds import BuildContext, Kind, Scorer


def to_outcome(value: Any, name: str) -> Outcome:
    """Accept what a custom scorer may return; anything else, a non-finite score included, is that scorer's error
    (JSON and SQLite have no infinity or NaN: stored, such a score would read back as another one)."""
    if isinstance(value, NotScorable):
        return Outcome(not_scorable=True, reason=value.reason)
    if isinstance(value, Score):
        outcome = Outcome(score=float(value.score), reason=value.reason)
    elif isinstance(value, (bool, int, float)):
        outcome = Outcome(score=float(value))
    else:
        raise TypeError(f"scorer {name} returned {type(value).__name__}; return a float, evalcli.Score(score, reason) "
                        "or evalcli.not_scorable(reason)")
    if outcome.score is not None and not math.isfinite(outcome.score):
        raise ValueError(f"scorer {name} returned the score {outcome.score}: a score must be a finite number "
                         "(return evalcli.not_scorable(reason) when there is nothing to score)")
    return outcome


class PythonScorer(Scorer):
    """Wraps a user's function (sync functions run in a worker thread, so they never block the loop)."""

    def __init__(self, function: Any, name: str) -> None:
        self.fn = function if callable(function) and not hasattr(function, "score") else function.score
        self.name = name
        self.is_async = inspect.iscoroutinefunction(self.fn)

    async def score(self, run: ScorerRun) -> Outcome:
        # its own copy of the run: what it changes (the messages, the turns, ground_truth) no other scorer sees, nor
        # the next conversation (docs/scorers.md "Custom Python scorers")
        run = copy.deepcopy(run)
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
