"""The one family of user errors. Each says what is wrong, where, and what to do instead.

The CLI turns an ``EvalcliError`` into its ``exit_code`` in exactly one place; anything else that
escapes is a bug and keeps its traceback (behind ``--debug``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

INTERNAL_ERROR = 70
"""The exit code of a bug in evalcli (never of a user mistake); such a run is stored as ``failed``."""


def describe(exc: BaseException) -> str:
    """``TypeName: message`` (or just the type name when there is no message), on one line."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@dataclass(frozen=True)
class Problem:
    """One thing wrong in a file: ``where`` is ``FILE:LINE:COL`` (or just ``FILE``)."""

    where: str
    message: str
    hint: str = ""

    def __str__(self) -> str:
        text = f"{self.where}: {self.message}" if self.where else self.message
        return f"{text}\n  hint: {self.hint}" if self.hint else text


class EvalcliError(Exception):
    """A mistake the user can fix; never shown with a traceback unless ``--debug``."""

    exit_code = 2

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\n  hint: {self.hint}" if self.hint else self.message


class DatasetError(EvalcliError):
    """A dataset or registry file that cannot be used; carries every problem found."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))

    def __str__(self) -> str:
        return self.message


class TargetError(EvalcliError):
    """The target named by ``module:attribute`` cannot be imported or called."""


class UsageError(EvalcliError):
    """A bad command-line invocation (unknown run id, bad --shard, ...)."""


class StoreError(EvalcliError):
    """The SQLite store cannot be opened or does not hold what was asked for."""


def not_blank(message: str) -> Callable[[Any], Any]:
    """A check for a pydantic ``AfterValidator``: a string that is empty or only white space is a mistake, and
    ``message`` says what to write instead (``None``, for an optional field, passes)."""
    def check(value: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            raise ValueError(message)
        return value

    return check
