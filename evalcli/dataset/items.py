"""A validated dataset: what the rest of evalcli trusts after loading (SPEC §1, §13)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..messages import Message
from ..results import FORMS
from ..scorers import Registry, ScorerSpec
from ..targets import Adapter
from .imports import ImportScope

Form = str
"""An item's form: a name in ``evalcli.results.FORMS`` (``input``, ``inputs``, ``turns``, ``simulate``,
``transcript``)."""


@dataclass(frozen=True)
class Turn:
    """A turn of a ``turns`` item, with its own gates and scorers."""

    input: str
    gates: list[ScorerSpec]
    scorers: list[ScorerSpec]


@dataclass(frozen=True)
class Simulation:
    """A ``simulate:`` block: who the simulated user is and how long it may talk (SPEC §13)."""

    goal: str
    persona: str | None
    facts: tuple[tuple[str, str], ...]
    """(name, value) pairs, values already rendered as text."""
    opening: str | None
    max_turns: int
    model: str
    """The simulator's model (``simulate.model``, else ``$EVALCLI_SIMULATOR_MODEL``, else the judge default)."""


@dataclass(frozen=True)
class RecordedTurn:
    """One turn of a recorded conversation (SPEC §19): the user's message and the messages that answered it."""

    input: str
    output: tuple[Message, ...]


@dataclass(frozen=True)
class Item:
    """One conversation of a dataset."""

    index: int
    id: str
    tags: list[str]
    form: Form
    inputs: list[str]
    """Every scripted user message, in order (one for ``input`` items; the opening, if any, of ``simulate``)."""
    turns: list[Turn] | None
    ground_truth: Any
    expected_outcome: str | None = None
    simulation: Simulation | None = None
    """The simulated user of a ``simulate`` item."""
    transcript: tuple[RecordedTurn, ...] | None = None
    """The turns of a recorded conversation (a ``transcript`` item), played back as they are."""
    labels: dict[str, float] = field(default_factory=dict)
    """What a person decided each scorer (by id) should give this conversation, from 0 to 1 (SPEC §19)."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """The item's ``metadata`` mapping (``{}`` when not given)."""
    line: int | None = None
    """The line of the dataset file where the item starts (for reports that point into the file)."""

    @property
    def first_input(self) -> str:
        """The first user message if known before playing (for ``--filter``), else ``""``."""
        return self.inputs[0] if self.inputs else ""

    @property
    def multi_turn(self) -> bool:
        """Whether the conversation owns a thread (every form but ``input``)."""
        return FORMS[self.form].multi_turn

    @property
    def recorded(self) -> bool:
        """Whether the conversation is a recording: played back, no target called."""
        return FORMS[self.form].recorded

    @property
    def goal(self) -> str | None:
        """The simulated user's goal, for ``simulate`` items."""
        return self.simulation.goal if self.simulation is not None else None


@dataclass
class Dataset:
    """A validated dataset, ready to run."""

    path: str
    """The dataset file as named on the command line."""
    target_spec: str
    """The target as written, or ``(recorded)`` for a dataset of recorded conversations without one."""
    target: Adapter | None
    """The target's adapter; ``None`` only when every item is recorded (no target is needed)."""
    target_options: dict[str, Any]
    concurrency: int
    gates: list[ScorerSpec]
    scorers: list[ScorerSpec]
    items: list[Item]
    registry: Registry
    hash: str
    """sha256 of the file's bytes (and of its ``data_file``)."""
    name: str = ""
    """Its stable name: the path relative to the repository root (or the resolved path outside one)."""
    imported: dict[str, Any] = field(default_factory=dict)
    """What its import paths name (custom scorers' functions), by import path."""
    secret_values: set[str] = field(default_factory=set)
    scope: ImportScope | None = None
    """The dataset's own modules and ``sys.path``: entered while it runs."""

    def all_specs(self) -> Iterator[ScorerSpec]:
        """Every scorer and gate configured anywhere: top level, then per turn."""
        yield from self.gates
        yield from self.scorers
        for item in self.items:
            for turn in item.turns or ():
                yield from turn.gates
                yield from turn.scorers

    def gate_specs(self) -> Iterator[ScorerSpec]:
        """Every gate configured anywhere: top level, then per turn."""
        yield from self.gates
        for item in self.items:
            for turn in item.turns or ():
                yield from turn.gates
