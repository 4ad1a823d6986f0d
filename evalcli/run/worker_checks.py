"""What a run of several worker processes needs, checked before it starts (docs/performance.md, "Workers"):
``--workers N|auto`` within 1 to ``MAX_WORKERS``, and nothing a worker cannot do (a target in ``__main__``, a
budget, a tape being recorded). Apart from run/workers.py so the plan checks it without importing the pool."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..dataset import Dataset
from ..errors import UsageError
from .options import RunOptions

MAX_WORKERS = 64


def parse_workers(text: str) -> int:
    """``--workers N`` or ``auto`` (the machine's cores, ``os.cpu_count()``), checked (``check_workers``)."""
    written = text.strip().lower()
    if written == "auto":
        return os.cpu_count() or 1
    if not written.lstrip("-").isdigit():
        raise UsageError(f"--workers {text}: not a number of processes",
                         f"write --workers 4, or --workers auto (this machine's {os.cpu_count() or 1} cores)")
    workers = int(written)
    check_workers(workers)
    return workers


def check_workers(workers: int) -> None:
    """A number of worker processes from 1 to ``MAX_WORKERS``."""
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAX_WORKERS:
        raise UsageError(f"--workers {workers}: a run is played by 1 to {MAX_WORKERS} processes",
                         f"write --workers 1 (one process, the default) up to --workers {MAX_WORKERS}, or --workers "
                         "auto")


def check_worker_run(dataset: Dataset, options: RunOptions) -> None:
    """What a run of several workers cannot do, refused before it starts: a target or scorer that only exists in the
    script run as ``__main__`` (a worker cannot import it), a budget (each worker would spend its own), recorded
    tapes (each worker would write its own)."""
    if options.workers <= 1:
        return
    flag = f"--workers {options.workers}"
    for name in _in_main(dataset):
        raise UsageError(f"{flag}: {name} is defined in __main__ (the script being run): a worker process cannot "
                         "import it", f"move it into a module (e.g. agent.py beside {Path(dataset.path).name}) and "
                         "point at that module (target: agent:agent), or run with --workers 1")
    if options.max_cost or options.max_tokens:
        budget = "--max-cost" if options.max_cost else "--max-tokens"
        raise UsageError(f"{budget} cannot be used with {flag}: each worker would count its own spending",
                         f"run with --workers 1 to keep the budget (docs/budgets.md), or drop {budget}")
    if options.record_tools is not None:
        raise UsageError(f"--record-tools cannot be used with {flag}: each worker would write the tape",
                         "record the tape with --workers 1, then replay it with any number of workers")


def _in_main(dataset: Dataset) -> list[str]:
    """The target and custom scorers that live in ``__main__``."""
    found = []
    if dataset.target_spec.startswith("__main__:") or _module_of(dataset.target) == "__main__":
        found.append(f"target '{dataset.target_spec}'")
    for name, obj in dataset.imported.items():
        if str(name).startswith("__main__:") or getattr(obj, "__module__", None) == "__main__":
            found.append(f"'{name}'")
    return found


def _module_of(adapter: Any) -> str | None:
    obj = getattr(adapter, "obj", None)
    module = getattr(obj, "__module__", None)
    return module if isinstance(module, str) else None
