"""Several runs as ``evalcli run`` makes them, for Python callers, the CLI and the pytest plugin alike
(docs/python-api.md): ``plan_runs`` loads and checks every dataset once per target, with where the reports go;
``run_planned`` (``arun_planned`` on a running loop) makes each run in turn (the runner takes each ``RunPlan``),
reports it, compares the runs of several targets and writes the CI files.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_exports
from .outputs import (
    Outputs,
    check_apart,
    check_not_read,
    check_outputs,
    check_tapes,
    database_problem,
    file_problem,
    open_for_writing,
    per_run,
    run_names,
    tape_names,
)

if TYPE_CHECKING:
    from ..dataset import DatasetSource, load_datasets
    from .plans import Plans, check_combination, plan_runs
    from .runs import Reporter, Runs, RunsInterrupted, arun_planned, run_planned

# planning and running are imported when first asked for: the read commands only check their output files
# (evalcli/lazy.py)
__getattr__ = lazy_exports(__name__, {
    "..dataset": ("DatasetSource", "load_datasets"),
    ".plans": ("Plans", "check_combination", "plan_runs"),
    ".runs": ("Reporter", "Runs", "RunsInterrupted", "arun_planned", "run_planned"),
})

__all__ = ["DatasetSource", "Outputs", "Plans", "Reporter", "Runs", "RunsInterrupted", "arun_planned", "check_apart",
           "check_combination", "check_not_read", "check_outputs", "check_tapes", "database_problem", "file_problem",
           "load_datasets", "open_for_writing", "per_run", "plan_runs", "run_names", "run_planned", "tape_names"]
