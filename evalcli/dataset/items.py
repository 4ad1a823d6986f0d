"""A validated dataset: what the rest of evalcli trusts after loading (docs/datasets.md, docs/simulated-users.md)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, astuple, field
from itertools import repeat
from typing import Any

from ..fingerprint import ItemTrees
from ..identity import canonical_json, content_digest, plain_json, text_digest, text_digests
from ..llm import default_judge_model
from ..messages import Message
from ..records import record
from ..results import FORMS
from ..scorers import Registry, ScorerSpec
from ..scorers.registry import BySpecs
from ..secret_references import References, references
from ..targets import Adapter
from ..tools import ToolsConfig
from ..version import __version__
from .distinct import Distinct, distinct_specs
from .imports import ImportScope
from .slots import MadeOnRead
from .target import sources_of

NO_ENTRIES: dict[str, Any] = {}
"""The ``metadata`` and ``labels`` of every item that has none: one mapping, never written to (an item is frozen, and
nothing changes its mappings), so 100,000 conversations do not hold 200,000 empty ones (docs/performance.md#memory)."""

Form = str
"""An item's form: a name in ``evalcli.results.FORMS`` (``input``, ``inputs``, ``turns``, ``simulate``, ``transcript``)."""


@record(frozen=True, slots=True)
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


@record(frozen=True)
class Simulation:
    """A ``simulate:`` block: who the simulated user is and how long it may talk (docs/simulated-users.md)."""

    goal: str
    persona: str | None
    facts: tuple[tuple[str, str], ...]
    """(name, value) pairs, values already rendered as text."""
    opening: str | None
    max_turns: int
    model: str
    """The simulator's model (``simulate.model``, else ``$EVALCLI_SIMULATOR_MODEL``, else the judge default)."""


@record(frozen=True, slots=True)
class RecordedTurn:
    """One turn of a recorded conversation (docs/recorded.md): the user's message and the messages that answered it
    (``output``). Made by ``of``, which keeps the messages as their JSON text when that text reads back as them: a
    file of 100,000 recorded conversations is held as text, not as dicts (docs/performance.md#memory)."""

    input: str
    packed: str | tuple[Message, ...]
    """The answering messages' JSON text, or the messages themselves when JSON cannot hold them as they are."""

    @classmethod
    def of(cls, user: str, output: Sequence[Message]) -> RecordedTurn:
        messages = list(output)
        try:
            text = json.dumps(messages, ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError):
            return cls(user, tuple(messages))
        return cls(user, text) if json.loads(text) == messages else cls(user, tuple(messages))

    @property
    def output(self) -> tuple[Message, ...]:
        """The messages that answered the user (new dicts each time they are read from text)."""
        return tuple(json.loads(self.packed)) if isinstance(self.packed, str) else self.packed


@record(frozen=True)
class Limits:
    """``limits:`` and ``on_limit`` (docs/budgets.md), of the dataset or of one item; ``None``: no such limit."""

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


@record(frozen=True, slots=True)
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
    """The conversation's whole ``target_options`` when the item has its own (merged over the dataset's), else ``None``."""
    metadata: dict[str, Any] = field(default_factory=lambda: NO_ENTRIES)
    """The item's ``metadata`` mapping (``{}`` when not given; passed to ``setup``, read by an http target's
    templates, shown by ``show``)."""
    transcript: tuple[RecordedTurn, ...] | None = None
    """The turns of a recorded conversation (a ``transcript`` item), played back as they are."""
    labels: dict[str, float] = field(default_factory=lambda: NO_ENTRIES)
    """What a person decided each scorer (by id) should give this conversation, from 0 to 1 (docs/recorded.md)."""
    line: int | None = None
    """The line of the dataset file where the item starts (for reports that point into the file)."""
    id_given: bool = False
    """Whether the item names itself (``id:``); otherwise ``id`` is its position."""
    identity: str = ""
    """Who the conversation is across runs (``evalcli.identity``): ``id:<id>``, or its content's digest."""
    content: str = ""
    """The digest of its content as resolved (``item_content``), beside the identity to tell a changed item."""
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


setattr(Item, "content", MadeOnRead(Item.__dict__["content"]))  # noqa: B010 - dataset/slots.py


@record
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
    data_file: str | None = None
    """The ``data_file`` it reads its items from (the path, from where the command runs), if any."""
    imported: dict[str, Any] = field(default_factory=dict)
    """What its import paths name (custom scorers' functions), by import path."""
    secret_values: set[str] = field(default_factory=set)
    scope: ImportScope | None = None
    """The dataset's own modules and ``sys.path``: entered while it runs."""
    target_has_memory: bool | None = None
    """``target_has_memory`` as written (``None``: decided by the target's ``memory`` attribute)."""
    tools: ToolsConfig | None = None
    """The dataset's ``tools:`` (docs/hermetic.md)."""
    unmocked: str = "live"
    """What a tool call no mock answers does: ``live`` or ``error``."""

    @property
    def controls_tools(self) -> bool:
        """Whether any ``tools:`` or ``unmocked: error`` is written anywhere: the target's tools are then routed
        through each conversation's tool plan (a plain loop: no generator made per conversation)."""
        if self.tools is not None or self.unmocked != "live":
            return True
        for item in self.items:
            if item.tools is not None or item.unmocked not in (None, "live"):
                return True
            for turn in item.turns or ():
                if turn.tools is not None:
                    return True
        return False

    @property
    def replayed_tapes(self) -> list[str]:
        """The path of every tape a ``tools: {replay: ...}`` of the dataset, an item or a turn reads."""
        blocks = [self.tools, *(i.tools for i in self.items), *(t.tools for i in self.items for t in i.turns or ())]
        return list(dict.fromkeys(b.replay for b in blocks if b is not None and b.replay is not None))

    @property
    def remembers(self) -> bool:
        """Whether the target can recall earlier turns of a thread: as the dataset says, else as the target shows."""
        if self.target_has_memory is not None:
            return self.target_has_memory
        return self.target is None or self.target.has_memory  # recorded conversations have no target to recall

    target_settings: dict[str, Any] = field(default_factory=dict)
    """A mapping target's settings as the run uses them, by form (``{"http": {...}}``); an import path's file (``source_of``)."""
    target_given: str | dict[str, Any] | None = None
    """The target ``load_dataset`` was given in place of the file's (``--target``): a worker loads it so again."""

    def resolved_configuration(self, *, streamed: bool = False) -> dict[str, Any]:
        """Everything the run uses, as one tree (docs/identity.md): evalcli's version, the target (its settings after
        interpolation and with the files they name read), its options, every gate and scorer as resolved (from
        ``scorers.yaml`` too: kind, arguments with judges' models, samples and temperature, threshold), the default
        judge model, the files of the custom scorers' modules (``sources_of``), and per conversation its content as
        resolved (own ``target_options``, simulated user, turns' gates and scorers, ``tools:`` mocks and ``limits``).
        ``streamed``: the conversations' trees are made one at a time as ``fingerprint`` reads them (``ItemTrees``)."""
        return {"evalcli": __version__, "judge_model": default_judge_model(),
            "target": {"spec": self.target_spec, **self.target_settings}, "target_options": self.target_options,
            "gates": _specs(self.gates), "scorers": _specs(self.scorers),
            "tools": _tools(self.tools), "unmocked": self.unmocked, **sources_of(self.imported, self.scope),
            "data": ItemTrees(lambda: map(self._item_tree, self.items, repeat(references())), len(self.items))
            if streamed else [self._item_tree(item) for item in self.items],
        }

    def _item_tree(self, item: Item, refs: References | None = None) -> dict[str, Any]:
        """One conversation in the resolved configuration (``refs``: as ``item_content``)."""
        return {**item_content(item, refs, turns=False), "turns": None if item.turns is None else [
            {"input": t.input, "gates": _turn_specs(t.gates), "scorers": _turn_specs(t.scorers), "tools": _tools(t.tools)}
            for t in item.turns], "tools": _tools(item.tools), "unmocked": item.unmocked,
            "limits": repr(self.limits_of(item))}

    warnings: list[str] = field(default_factory=list)
    """What validation warns about (``validate`` prints them, and every run says them once)."""
    limits: Limits | None = None
    """The dataset's ``limits`` and ``on_limit`` (docs/budgets.md)."""

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

    def distinct_specs(self) -> list[ScorerSpec]:
        """``all_specs`` with each spec once (by identity), in the order each first appears (``distinct``)."""
        return self.distinct()[0]

    def turn_specs(self) -> tuple[list[ScorerSpec], list[ScorerSpec]]:
        """The turns' gates, and the turns' scorers, of every conversation: each spec once (``distinct``)."""
        _, gates, scorers = self.distinct()
        return gates, scorers

    def distinct(self, known: Distinct | None = None) -> Distinct:
        """(``distinct_specs``, ``turn_specs``), walked once while the dataset's lists stay the same ones (``known``:
        what loading found for these specs)."""
        key = (id(self.gates), len(self.gates), id(self.scorers), len(self.scorers), id(self.items), len(self.items))
        made: tuple[tuple[int, ...], Distinct] | None = self.__dict__.get("_distinct_made")
        if made is not None and made[0] == key:
            return made[1]
        found = known or distinct_specs(self.gates, self.scorers, self.items)
        self.__dict__["_distinct_made"] = (key, found)
        return found

    def gate_specs(self) -> Iterator[ScorerSpec]:
        """Every gate configured anywhere: top level, then per turn."""
        yield from self.gates
        for item in self.items:
            for turn in item.turns or ():
                yield from turn.gates


def item_content(item: Item, refs: References | None = None, *, turns: bool = True,
                 fingerprint: Callable[[ScorerSpec], str] | None = None) -> dict[str, Any]:
    """What a conversation is, as resolved (docs/identity.md): its form and every message, turn (with its gates and scorers),
    ``simulate`` block, recorded transcript, own ``target_options``, ``metadata``, ground truth and expected outcome.
    Not its id or position, nor its ``labels`` (a person's verdict on it) or ``tags`` (how it is selected). ``refs``:
    ``references()``, looked up once by a caller digesting every conversation. ``turns=False``: its ``turns`` left
    ``None`` (the resolved configuration writes its own, ``Dataset._item_tree``). ``fingerprint``: each spec's, as
    taken at load (``contents.Digests``; else ``spec.fingerprint(refs)``)."""
    refs = refs or references()

    def scorers(specs: list[ScorerSpec]) -> list[str]:
        return [spec.fingerprint(refs) for spec in specs] if fingerprint is None else list(map(fingerprint, specs))

    return {
        "form": item.form, "inputs": item.inputs,
        "turns": None if item.turns is None or not turns else [
            {"input": t.input, "resume": t.resume, "gates": scorers(t.gates), "scorers": scorers(t.scorers)}
            for t in item.turns],
        "simulate": None if item.simulation is None else asdict(item.simulation),
        "transcript": None if item.transcript is None else [{"input": t.input, "output": t.output}
                                                                for t in item.transcript],
        "target_options": item.target_options, "metadata": item.metadata,
        "ground_truth": item.ground_truth, "expected_outcome": item.expected_outcome,
    }


CHECKED_AT_ONCE = 256
"""How many plain conversations' texts are searched for a secret at once (``identity.text_digests``)."""


def _content_digests(items: list[Item], refs: References, bears: Callable[[str], bool]) -> list[str]:
    """``_content_digest`` of each item: a plain conversation's text written directly (``_content_text``, each
    turn's gates and scorers written once per list of specs), the texts of ``CHECKED_AT_ONCE`` of them searched for a
    secret together (``text_digests``: each alone only when they hold one)."""
    digests: list[str] = []
    lists: dict[tuple[int, ...], str] = {}  # the specs are alive meanwhile (the items hold them): ids name them
    for start in range(0, len(items), CHECKED_AT_ONCE):
        chunk = items[start:start + CHECKED_AT_ONCE]
        texts: list[str] = []
        plain: list[Item] = []
        made: list[str | None] = []
        for item in chunk:
            text = None
            if _plain_content(item):
                try:
                    text = _content_text(item, refs, lists)
                except TypeError:  # pragma: no cover - an item made by hand with a message that is not text
                    pass
            if text is None:
                made.append(_content_digest(item, refs, bears))
            else:
                made.append(None)
                texts.append(text)
                plain.append(item)

        def content(n: int, plain: list[Item] = plain) -> dict[str, Any]:  # made only for a text holding a secret
            return item_content(plain[n], refs)

        found = iter(text_digests(texts, content, bears))
        digests.extend(next(found) if digest is None else digest for digest in made)
    return digests


def _content_digest(item: Item, refs: References, bears: Callable[[str], bool],
                    lists: dict[tuple[int, ...], str] | None = None, fingerprint: Callable[[ScorerSpec], str] | None = None,
                    redact: Callable[[str], str] | None = None) -> str:
    """``content_digest(item_content(item, refs), bears)``: of a plain conversation (``_plain_content``) from its text
    written directly (``_content_text``), without the mapping. ``lists`` and ``fingerprint``: as ``_content_text``
    takes them; ``redact``: as ``digestible`` does (a digest made after loading, ``contents.Digests``)."""
    plain = _plain_content(item)
    content: Callable[[], dict[str, Any]] = lambda: item_content(item, refs, fingerprint=fingerprint)  # noqa: E731
    if plain:
        try:
            text = _content_text(item, refs, lists, fingerprint)
        except TypeError:  # pragma: no cover - an item made by hand with a message that is not text
            pass
        else:
            return text_digest(text, content, bears, refs=refs, redact=redact)
    return content_digest(content(), bears, plain=plain)


def _content_text(item: Item, refs: References, lists: dict[tuple[int, ...], str] | None = None,
                  fingerprint: Callable[[ScorerSpec], str] | None = None) -> str:
    """``canonical_json(item_content(item, refs))`` of a plain conversation with no simulated user or transcript,
    written part by part in the order of its sorted keys (half the time of encoding the mapping). ``lists``: each
    list of specs' text by the specs' identities, kept by a caller writing many conversations whose turns share
    specs (``parse_list``); ``fingerprint``: as ``item_content``'s."""
    known = lists if lists is not None else {}
    made = (lambda spec: spec.fingerprint(refs)) if fingerprint is None else fingerprint

    def specs(found: list[ScorerSpec]) -> str:
        if not found:
            return "[]"
        key = tuple(map(id, found))
        text = known.get(key)
        if text is None:
            text = known[key] = "[" + ",".join([_TEXT(made(spec)) for spec in found]) + "]"
        return text

    turns = "null" if item.turns is None else "[" + ",".join([
        f'{{"gates":{specs(t.gates)},"input":{_TEXT(t.input)},"resume":'
        f'{"null" if t.resume is None else _json(t.resume)},"scorers":{specs(t.scorers)}}}' for t in item.turns]) + "]"
    outcome, truth, options = item.expected_outcome, item.ground_truth, item.target_options
    return (f'{{"expected_outcome":{"null" if outcome is None else _json(outcome)},"form":{_TEXT(item.form)},'
            f'"ground_truth":{"null" if truth is None else _json(truth)},"inputs":[{",".join(map(_TEXT, item.inputs))}],'
            f'"metadata":{"{}" if item.metadata is NO_ENTRIES else _json(item.metadata)},"simulate":null,'
            f'"target_options":{"null" if options is None else _json(options)},"transcript":null,"turns":{turns}}}')


_TEXT: Callable[[str], str] = json.encoder.encode_basestring
"""A text as ``canonical_json`` writes it (``ensure_ascii=False``)."""


def _json(value: Any) -> str:
    """``canonical_json`` of a plain value (``null`` at once)."""
    return "null" if value is None else canonical_json(value, plain=True)


def _plain_content(item: Item) -> bool | None:
    """Whether ``item_content(item)`` holds only JSON's own kinds, looking only at its parts of no fixed type (its
    messages, turns' gates and scorers and form are text by the item's type); ``None`` (look at it all) for a
    recorded or simulated conversation."""
    if item.transcript is not None or item.simulation is not None:
        return None
    return ((item.metadata is NO_ENTRIES or plain_json(item.metadata))
            and (item.ground_truth is None or plain_json(item.ground_truth))
            and (item.target_options is None or plain_json(item.target_options))
            and (item.turns is None or all(turn.resume is None or plain_json(turn.resume) for turn in item.turns)))


def _specs(found: Sequence[ScorerSpec]) -> dict[str, Any]:
    """Gates or scorers in the resolved configuration, by id."""
    return {spec.id: {**spec.spec(), "threshold": None if spec.threshold is None else spec.threshold.raw,
                      "registered": spec.registered} for spec in found}


_TURN_SPECS: BySpecs[dict[str, Any]] = BySpecs()
"""A turn's gates or scorers in the resolved configuration, one mapping per sequence of specs."""


def _turn_specs(found: list[ScorerSpec]) -> dict[str, Any]:
    """``_specs`` of a turn's list, one mapping for every turn with the same specs: the fingerprint walks it once per
    path (``fingerprint._digest_mapping``), not once per conversation (docs/performance.md). Read it, never change it."""
    return _TURN_SPECS.get(found, _specs)


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=repr, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _tools(config: ToolsConfig | None) -> dict[str, Any] | None:
    """A ``tools:`` block in the resolved configuration: its mocks and its tape, by content (docs/reliability.md)."""
    return None if config is None else config.resolved()
