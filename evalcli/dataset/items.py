"""A validated dataset: what the rest of evalcli trusts after loading (SPEC §1, §13)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import astuple, dataclass, field
from typing import Any

from ..messages import Message
from ..results import FORMS
from ..scorers import Registry, ScorerSpec
from ..targets import Adapter
from ..tools import ToolsConfig
from .imports import ImportScope

Form = str
"""An item's form: a name in ``evalcli.results.FORMS`` (``input``, ``inputs``, ``turns``, ``simulate``,
``transcript``)."""


@dataclass(frozen=True)
class Turn:
    """A turn of a ``turns`` item, with its own gates and scorers."""

    input: str
    """What the user says; for a ``resume`` turn, the resume value as text (what the turn records as its input)."""
    gates: list[ScorerSpec]
    scorers: list[ScorerSpec]
    resume: Any = None
    """The value that resumes the previous turn's interrupt (``Command(resume=...)``); ``None``: an ordinary turn."""
    tools: ToolsConfig | None = None
    """The turn's own ``tools:`` (per tool, over the item's)."""


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
class Limits:
    """``limits:`` and ``on_limit`` (SPEC §27), of the dataset or of one item; ``None``: no such limit."""

    turns: int | None = None
    tokens: int | None = None
    cost: float | None = None
    seconds: float | None = None
    on_limit: str | None = None
    """``error`` (``None``: the default) or ``score``."""

    def over(self, base: Limits | None) -> Limits:
        """These limits, key by key, over ``base`` (an item's over its dataset's)."""
        if base is None:
            return self
        return Limits(*(mine if mine is not None else theirs for mine, theirs in
                        zip(astuple(self), astuple(base), strict=True)))

    @property
    def scored(self) -> bool:
        """``on_limit: score``: a limited conversation is scored on what was played, not counted as errored."""
        return self.on_limit == "score"


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
    target_options: dict[str, Any] | None = None
    """The conversation's whole ``target_options`` when the item has its own (merged over the dataset's); ``None``:
    the dataset's."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """The item's ``metadata`` mapping (``{}`` when not given; passed to ``setup``, read by an http target's
    templates, shown by ``show``)."""
    transcript: tuple[RecordedTurn, ...] | None = None
    """The turns of a recorded conversation (a ``transcript`` item), played back as they are."""
    labels: dict[str, float] = field(default_factory=dict)
    """What a person decided each scorer (by id) should give this conversation, from 0 to 1 (SPEC §19)."""
    line: int | None = None
    """The line of the dataset file where the item starts (for reports that point into the file)."""
    tools: ToolsConfig | None = None
    """The item's own ``tools:`` (per tool, over the dataset's)."""
    unmocked: str | None = None
    """The item's ``unmocked`` (``None``: the dataset's)."""
    limits: Limits | None = None
    """The item's own ``limits`` and ``on_limit`` (``Dataset.limits_of`` merges them over the dataset's)."""

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
    target_has_memory: bool | None = None
    """``target_has_memory`` as written (``None``: decided by the target's ``memory`` attribute)."""
    tools: ToolsConfig | None = None
    """The dataset's ``tools:`` (SPEC §25)."""
    unmocked: str = "live"
    """What a tool call no mock answers does: ``live`` or ``error``."""

    @property
    def controls_tools(self) -> bool:
        """Whether any ``tools:`` or ``unmocked: error`` is written anywhere: the target's tools are then routed
        through each conversation's tool plan."""
        return (self.tools is not None or self.unmocked != "live"
                or any(i.tools is not None or i.unmocked not in (None, "live") or any(t.tools is not None
                                                                                        for t in i.turns or ())
                       for i in self.items))

    @property
    def remembers(self) -> bool:
        """Whether the target can recall earlier turns of a thread: as the dataset says, else as the target shows."""
        if self.target_has_memory is not None:
            return self.target_has_memory
        return self.target is None or self.target.has_memory  # recorded conversations have no target to recall

    warnings: list[str] = field(default_factory=list)
    """What validation warns about (``validate`` prints them, and every run says them once)."""
    limits: Limits | None = None
    """The dataset's ``limits`` and ``on_limit`` (SPEC §27)."""

    def limits_of(self, item: Item) -> Limits | None:
        """The limits one conversation runs under: its own, key by key, over the dataset's."""
        if item.limits is None:
            return self.limits
        return item.limits.over(self.limits)

    def options_of(self, item: Item) -> dict[str, Any]:
        """The ``target_options`` one conversation runs with."""
        return item.target_options if item.target_options is not None else self.target_options

    def all_specs(self) -> Iterator[ScorerSpec]:
        """Every scorer and gate configured anywhere: top level, then per turn."""
        yield from self.gates
        yield from self.scorers
        for item in self.items:
            for turn in item.turns or ():
                yield from turn.gates
                yield from turn.scorers

    def configuration(self) -> dict[str, str]:
        """What decides a run's scores besides its items, part by part, each as a digest: the target and its
        options, every gate and scorer by id (top level; per turn, over every conversation), the simulated
        users' models. A run keeps it, so resuming it with another configuration can be refused by name."""
        parts = {"target": _digest(self.target_spec), "target_options": _digest(self.target_options)}
        seen: dict[int, str] = {}

        def fingerprint(spec: ScorerSpec) -> str:
            known = seen.get(id(spec))
            if known is None:
                known = seen[id(spec)] = spec.fingerprint()
            return known

        for label, specs in (("gate", self.gates), ("scorer", self.scorers)):
            for spec in specs:
                parts[f"{label} {spec.id}"] = fingerprint(spec)
        per_turn: dict[str, dict[str, None]] = {}
        models: dict[str, None] = {}
        for item in self.items:
            for turn in item.turns or ():
                for label, specs in (("turn gate", turn.gates), ("turn scorer", turn.scorers)):
                    for spec in specs:
                        per_turn.setdefault(f"{label} {spec.id}", {})[fingerprint(spec)] = None
            if item.simulation is not None:
                models[item.simulation.model] = None
        parts.update({label: _digest(sorted(digests)) for label, digests in per_turn.items()})
        if models:
            parts["simulated users' model"] = _digest(sorted(models))
        return parts

    def gate_specs(self) -> Iterator[ScorerSpec]:
        """Every gate configured anywhere: top level, then per turn."""
        yield from self.gates
        for item in self.items:
            for turn in item.turns or ():
                yield from turn.gates


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=repr, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
