"""What a run of several worker processes needs, checked before it starts (docs/performance.md, "Workers"):
``--workers N|auto`` within 1 to ``MAX_WORKERS``, and nothing a worker cannot do (a target in ``__main__``, a
budget, a tape being recorded). Apart from run/workers.py so the plan checks it without importing the pool."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any

from ..dataset import Dataset
from ..errors import UsageError
from .options import RunOptions

MAX_WORKERS = 64


def parse_workers(text: str) -> int:
    """``--workers N`` or ``auto`` (the cores this process may use, ``usable_cores``), checked (``check_workers``)."""
    written = text.strip().lower()
    if written == "auto":
        return min(usable_cores(), MAX_WORKERS)
    if re.fullmatch(r"-?[0-9]+", written) is None:  # ASCII digits only: int() refuses '²', which isdigit() accepts
        raise UsageError(f"--workers {text}: not a number of processes",
                         f"write --workers 4, or --workers auto (the {usable_cores()} cores this process may use)")
    workers = int(written)
    check_workers(workers)
    return workers


def usable_cores() -> int:
    """The cores this process may run on (docs/performance.md#workers): those of its CPU affinity (``taskset``, a
    container's cpuset), at most its cgroup's CPU quota (``docker run --cpus 1``), not every core of the machine
    (``os.cpu_count()``), so ``auto`` never starts two workers on one core."""
    try:
        cores = max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity where the platform has none (macOS, Windows)
        cores = os.cpu_count() or 1
    return min(cores, _cgroup_quota(CGROUP_CPU_MAX) or cores)


CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")
"""cgroup v2's CPU quota of this process's group: ``max 100000`` (none) or ``QUOTA PERIOD`` in microseconds."""


def _cgroup_quota(path: Path) -> int | None:
    """The cores a cgroup v2 quota allows (rounded up), or ``None`` without one."""
    try:
        quota, period = path.read_text().split()[:2]
        return max(1, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError, ZeroDivisionError):  # 'max', no such file, anything unexpected: no quota
        return None


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
