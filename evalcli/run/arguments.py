"""What a Python caller hands the library, checked as the command line's parser checks flags (docs/python-api.md,
"Mistakes of a Python caller"): a mistake is a ``UsageError`` saying what to write, never a ``TypeError`` from deep
inside a run."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import UsageError


def listed(value: Any) -> list[Any]:
    """``datasets`` or ``targets`` given as one path or spec (a ``str`` or ``Path``) is that one, not its letters."""
    if isinstance(value, (str, Path)):
        return [value]
    return list(value)


def check_targets(targets: Sequence[Any]) -> None:
    """Each target is a spec as ``--target`` takes it; an agent object is named by its import path."""
    for target in targets:
        if not isinstance(target, str):
            raise UsageError(f"target {_shown(target)} is a Python object: targets are given as --target takes them, "
                             "import paths 'module:attribute', 'model:NAME', 'http:URL' or 'mastra:URL#AGENT'",
                             f"give {_import_path(target) or 'its import path'!r} instead")


def check_store(store: Any) -> None:
    from ..store import Store

    if store is not None and not isinstance(store, Store):
        raise UsageError(f"store must be an open evalcli.store.Store, not {type(store).__name__} {_shown(store)}",
                         "open it with 'with Store(PATH) as store:' (from evalcli.store import Store), or give "
                         "plan_runs db=PATH")


def check_no_running_loop(function: str, instead: str) -> None:
    """The synchronous calls run an event loop of their own: inside a running one (Jupyter, async code) the
    awaitable one is the call to make."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise UsageError(f"{function} was called inside a running event loop (a Jupyter notebook, async code): it runs "
                     "a loop of its own", f"write 'await {instead}' there instead")


def _shown(value: Any) -> str:
    from ..secrets import redact_text

    text = redact_text(repr(value))  # before it is cut (docs/secrets.md)
    return text if len(text) <= 60 else text[:57] + "..."


def _import_path(value: Any) -> str | None:
    """Where ``value`` can be imported from: an attribute of its own module (or its class's) that is it."""
    names = {getattr(value, "__module__", None), getattr(type(value), "__module__", None)}
    for name in names:
        module = sys.modules.get(name) if isinstance(name, str) else None
        if module is None or name == "__main__":
            continue
        for attribute, held in vars(module).items():
            if held is value:
                return f"{name}:{attribute}"
    return None


def check_events(events: Any) -> None:
    """``events`` is an ``Events``: a subclass overrides what it shows and inherits the rest's no-ops."""
    from .events import Events

    if events is not None and not isinstance(events, Events):
        raise UsageError(f"events must be an evalcli.run.Events, not {type(events).__name__}",
                         f"subclass it: 'class {type(events).__name__}(Events)' (from evalcli.run import Events), "
                         "overriding only the methods you show")


def check_datasets(datasets: Sequence[Any]) -> None:
    """At least one dataset, each a path (``str`` or ``Path``) or a loaded ``Dataset``."""
    from ..dataset import Dataset

    if not datasets:
        raise UsageError("no dataset given: there is nothing to run", "give at least one dataset path, "
                         "e.g. plan_runs(['datasets/weather.yaml'])")
    for dataset in datasets:
        if not isinstance(dataset, (str, Path, Dataset)):
            raise UsageError(f"dataset {_shown(dataset)} is a {type(dataset).__name__}: a dataset is a path (str or "
                             "Path) or what load_dataset returned", "give the dataset file's path, e.g. "
                             "'datasets/weather.yaml'")
