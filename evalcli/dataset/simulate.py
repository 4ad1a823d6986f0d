"""The ``simulate:`` item form (docs/simulated-users.md): the YAML block validated into a ``Simulation``.

Playing it is the run's business (``evalcli.run``): this module only reads who the simulated user is.
"""

from __future__ import annotations

import json
import os
from typing import Any

from ..errors import Problem
from ..llm import default_judge_model
from .items import Simulation
from .yamlsrc import Path, Positions, validated

SIMULATOR_MODEL_ENV = "EVALCLI_SIMULATOR_MODEL"


def simulator_model(configured: str | None) -> str:
    """``simulate.model``, else ``$EVALCLI_SIMULATOR_MODEL``, else the judge default."""
    return configured or os.environ.get(SIMULATOR_MODEL_ENV) or default_judge_model()


def render_fact(value: Any) -> str:
    """A fact's value as the simulator reads it: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def parse_simulation(raw: Any, path: Path, pos: Positions, label: str, problems: list[Problem]) -> Simulation | None:
    """The simulated user of a ``simulate`` block, or ``None`` after adding every mistake in it to ``problems``."""
    from .models import SimulateFile  # the dataset file's models, imported when first needed (header.py)

    block = validated(SimulateFile, raw, path, pos, f"{label} simulate", problems, (
        f"{label}: 'simulate' must be a mapping with at least 'goal'", "write 'simulate: {goal: what the user wants}'"))
    if block is None:
        return None
    facts = tuple((str(name), render_fact(value)) for name, value in (block.facts or {}).items())
    return Simulation(block.goal.strip(), block.persona, facts, block.opening, block.max_turns,
                      simulator_model(block.model))
