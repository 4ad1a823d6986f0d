"""Running datasets (SPEC §3, §6, §11, §13): the runner, one conversation, the drivers that write the user's side
(scripted, per turn, simulated, recorded), the simulated user's prompt, repeats, the once-per-run notices, and
calibration of scorers against human labels (SPEC §19).

The runner never prints: it reports through ``Events``. Each finished conversation flows once to the
aggregate, the store (through its writer thread) and the events.
"""

from __future__ import annotations

from .calibrate import Calibration, ScorerCalibration, acalibrate
from .context import RunContext
from .events import Events
from .options import RunOptions, plan_of
from .recorder import Recorder
from .resume import rerun_indexes, rerun_selection, resume_options
from .runner import Runner, arun_evals, run_evals

__all__ = ["Calibration", "Events", "Recorder", "RunContext", "RunOptions", "Runner", "ScorerCalibration",
           "acalibrate", "arun_evals", "plan_of", "rerun_indexes", "rerun_selection", "resume_options", "run_evals"]
