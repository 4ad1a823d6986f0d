"""Running datasets (docs/datasets.md, docs/verdicts.md, docs/reference/cli.md, docs/simulated-users.md): a run's plan
(``plan_run``: every check, once), the runner that plays
it, one conversation, the drivers that write the user's side (scripted, per turn, simulated, recorded), the
simulated user's prompt, repeats, the once-per-run notices, and calibration of scorers against human labels
(docs/recorded.md).

The runner never prints: it reports through ``Events``. Each finished conversation flows once to the
aggregate, the ``Recorder`` (the run's rows, through the writer thread) and the events.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_exports
from .context import RunContext
from .events import Events
from .options import RunOptions, check_budgets, plan_of
from .plan import RunPlan, check_options, llm_settings, plan_run
from .recorder import Recorder
from .runner import Runner, arun_evals, run_evals

if TYPE_CHECKING:
    from .calibrate import Calibration, ScorerCalibration, acalibrate
    from .resume import rerun_indexes, rerun_selection, resume_options

# calibration, and a resume's or re-run's reading of the stored run, are imported when first asked for: a new run
# does not use them (evalcli/lazy.py)
__getattr__ = lazy_exports(__name__, {".calibrate": ("Calibration", "ScorerCalibration", "acalibrate"),
                                      ".resume": ("rerun_indexes", "rerun_selection", "resume_options")})

__all__ = ["Calibration", "Events", "Recorder", "RunContext", "RunOptions", "RunPlan", "Runner", "ScorerCalibration",
           "acalibrate", "arun_evals", "check_budgets", "check_options", "llm_settings", "plan_of", "plan_run",
           "rerun_indexes", "rerun_selection", "resume_options", "run_evals"]
