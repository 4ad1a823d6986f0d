"""Several datasets loaded at once, as ``evalcli validate`` and ``evalcli run`` load them (docs/python-api.md): each
once per ``--target``, every problem of every file reported together."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import DatasetError, Problem, UsageError
from ..targets import cli_target
from .items import Dataset
from .load import load_dataset

DatasetSource = str | Path | Dataset
"""A dataset as ``plan_runs`` takes it: a file to load, or one loaded already (``load_dataset``)."""


def load_datasets(datasets: Sequence[DatasetSource], scorers: str | Path | None = None,
                  targets: Sequence[str] = ()) -> list[tuple[Dataset, str | None]]:
    """Every dataset validated (once per target, when given) before any runs, with the target it was loaded with;
    every problem of every file in one ``DatasetError``."""
    parsed: list[tuple[str | None, str | dict[str, Any] | None]] = [(t, cli_target(t)) for t in targets]
    loaded: list[tuple[Dataset, str | None]] = []
    problems: list[Problem] = []
    for source in datasets:
        if isinstance(source, Dataset):
            if targets:
                raise UsageError(f"{source.path} is loaded already: it runs against its own target",
                                 "give its path to run it against other targets")
            loaded.append((source, None))
            continue
        for label, target in parsed or [(None, None)]:
            try:
                loaded.append((load_dataset(source, str(scorers) if scorers else None, target=target,
                                            target_label=label), label))
            except DatasetError as exc:
                problems.extend(p for p in exc.problems if p not in problems)  # a shared registry's, once
    if problems:
        raise DatasetError(problems)
    return loaded
