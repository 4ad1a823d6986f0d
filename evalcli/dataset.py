"""Dataset files: strict models of the YAML, and loading with file:line:col errors.

``load_dataset`` reads and validates everything before anything runs: structure, items, every
scorer reference, the registry, the target's import and custom scorers' imports. It raises one
``DatasetError`` listing every problem found, or returns a ``Dataset`` the rest of the code trusts.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path as FsPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import DatasetError, EvalcliError, Problem
from .scorers.registry import PYTHON_KIND, Registry, ScorerSpec, find_registry, load_registry, parse_list
from .target import Target, resolve_import
from .yamlsrc import Interpolated, Path, Positions, load_yaml, problems_from_pydantic

Form = Literal["input", "inputs", "turns"]
MAX_JSONL_LINE = 8 * 1024 * 1024


class TurnFile(BaseModel):
    """One turn of a ``turns`` item."""

    model_config = ConfigDict(extra="forbid")
    input: str = Field(description="What the user says on this turn.")
    gates: list[Any] | None = Field(default=None, description="Gates on this turn's own output.")
    scorers: list[Any] | None = Field(default=None, description="Scorers on this turn's own output.")


class ItemFile(BaseModel):
    """One conversation: exactly one of ``input``, ``inputs`` or ``turns``."""

    model_config = ConfigDict(extra="forbid")
    id: str | int | None = Field(default=None, description="Unique id; defaults to the item's position.")
    tags: list[str] = Field(default_factory=list, description="Labels for --filter and reports.")
    input: Any = Field(default=None, description="A single-turn question.")
    inputs: Any = Field(default=None, description="Several turns on one thread, scored as a whole.")
    turns: Any = Field(default=None, description="Several turns, each with its own gates and scorers.")
    ground_truth: Any = Field(default=None, description="Passed to scorers unchanged.")


class DatasetFile(BaseModel):
    """The top level of a dataset file."""

    model_config = ConfigDict(extra="forbid")
    target: str = Field(description="Import path 'module:attribute' of the agent under test.")
    target_options: dict[str, Any] = Field(default_factory=dict, description="Keyword options for generate().")
    concurrency: int = Field(default=4, ge=1, le=10_000, description="Conversations run in parallel.")
    gates: list[Any] | None = Field(default=None, description="Each must average exactly >= 1.0 over items.")
    scorers: list[Any] | None = Field(default=None, description="Tracked scorers, optionally with a threshold.")
    data: list[Any] | None = Field(default=None, description="The conversations.")
    data_file: str | None = Field(default=None, description="A JSONL file of items (one a line), relative to this file.")
    description: str | None = Field(default=None, description="Free text, for people.")


@dataclass(frozen=True)
class Turn:
    """A turn of a ``turns`` item, with its own gates and scorers."""

    input: str
    gates: list[ScorerSpec]
    scorers: list[ScorerSpec]


@dataclass(frozen=True)
class Item:
    """One conversation of a dataset."""

    index: int
    id: str
    tags: list[str]
    form: Form
    inputs: list[str]
    """Every user message, in order (one for ``input`` items)."""
    turns: list[Turn] | None
    ground_truth: Any

    @property
    def first_input(self) -> str:
        return self.inputs[0]


@dataclass
class Dataset:
    """A validated dataset, ready to run."""

    path: str
    target_spec: str
    target: Target
    target_options: dict[str, Any]
    concurrency: int
    gates: list[ScorerSpec]
    scorers: list[ScorerSpec]
    items: list[Item]
    registry: Registry
    hash: str
    python_scorers: dict[str, Any] = field(default_factory=dict)
    secret_values: set[str] = field(default_factory=set)

    def all_specs(self) -> Iterator[ScorerSpec]:
        """Every scorer and gate configured anywhere: top level, then per turn."""
        yield from self.gates
        yield from self.scorers
        for item in self.items:
            for turn in item.turns or ():
                yield from turn.gates
                yield from turn.scorers


def _item(raw: Any, index: int, path: Path, pos: Positions, registry: Registry,
          problems: list[Problem]) -> Item | None:
    before = len(problems)
    label = f"item {index}"
    if not isinstance(raw, dict):
        problems.append(pos.problem(path, f"{label} must be a mapping with 'input', 'inputs' or 'turns'",
                                    "write '- input: your question'"))
        return None
    try:
        model = ItemFile.model_validate(raw)
    except ValidationError as exc:
        problems.extend(problems_from_pydantic(exc, path, pos, label, list(ItemFile.model_fields)))
        return None
    if model.id is not None:
        label = f"item {index} ({model.id})"
    present = [key for key in ("input", "inputs", "turns") if key in raw]
    if not present:
        problems.append(pos.problem(path, f"{label} must have 'input', 'inputs', or 'turns'",
                                    "add 'input: ...' (one turn), 'inputs: [...]' or 'turns: [...]'"))
        return None
    if "inputs" in raw and (not isinstance(raw["inputs"], list) or not raw["inputs"]):
        problems.append(pos.problem((*path, "inputs"), f"{label}: 'inputs' must be a non-empty array",
                                    "list at least one user message under 'inputs:'"))
        return None
    if "turns" in raw and ("input" in raw or "inputs" in raw):
        problems.append(pos.problem((*path, "turns"), f"{label}: 'turns' cannot be combined with 'input' or 'inputs'",
                                    "move each message into its own '- input: ...' under 'turns'", key=True))
        return None
    if "input" in raw and "inputs" in raw:
        problems.append(pos.problem((*path, "inputs"), f"{label}: 'input' cannot be combined with 'inputs'",
                                    "keep one: 'input' for a single turn, 'inputs' for several", key=True))
        return None
    if "turns" in raw and (not isinstance(raw["turns"], list) or not raw["turns"]):
        problems.append(pos.problem((*path, "turns"), f"{label}: 'turns' must be a non-empty array",
                                    "add '- input: ...' entries under 'turns:'"))
        return None
    turns: list[Turn] | None = None
    if "turns" in raw:
        turns = []
        for t, turn in enumerate(raw["turns"]):
            at = (*path, "turns", t)
            if not isinstance(turn, dict) or "input" not in turn:
                problems.append(pos.problem(at, f"{label}: turn {t} must be an object with an 'input' property",
                                            "write '- input: what the user says'"))
                continue
            try:
                turn_model = TurnFile.model_validate(turn)
            except ValidationError as exc:
                problems.extend(problems_from_pydantic(exc, at, pos, f"{label} turn {t}", list(TurnFile.model_fields)))
                continue
            gates = parse_list(turn_model.gates, (*at, "gates"), pos, registry, problems, gate=True)
            scorers = parse_list(turn_model.scorers, (*at, "scorers"), pos, registry, problems, gate=False)
            turns.append(Turn(turn_model.input, gates, scorers))
        inputs = [t.input for t in turns]
    elif "inputs" in raw:
        inputs = raw["inputs"]
        for n, text in enumerate(inputs):
            if not isinstance(text, str):
                problems.append(pos.problem((*path, "inputs", n), f"{label}: inputs[{n}] must be a string",
                                            "quote it: - \"...\""))
    else:
        inputs = [raw["input"]]
        if not isinstance(raw["input"], str):
            problems.append(pos.problem((*path, "input"), f"{label}: 'input' must be a string", "quote it: input: \"...\""))
    if len(problems) > before:
        return None
    form: Form = "turns" if turns is not None else "inputs" if "inputs" in raw else "input"
    item_id = str(model.id) if model.id is not None else str(index)
    return Item(index, item_id, list(model.tags), form, list(inputs), turns, model.ground_truth)


def _jsonl_items(file: FsPath, header: bool) -> Iterator[tuple[int, Any, Positions]]:
    """(line number, parsed value, positions) for each non-blank line, read one line at a time."""
    with file.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            pos = Positions(str(file), values={(): (number, 1)})
            if len(line) > MAX_JSONL_LINE:
                raise DatasetError([Problem(f"{file}:{number}:1", f"line is longer than {MAX_JSONL_LINE // 2**20} MB",
                                            "keep each item under that size")])
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except ValueError as exc:
                raise DatasetError([Problem(f"{file}:{number}:{getattr(exc, 'colno', 1)}",
                                            f"not valid JSON: {getattr(exc, 'msg', exc)}",
                                            "each line must be one JSON object")]) from None
            yield number, value, pos


def _read_top(file: FsPath) -> tuple[Any, Positions, Interpolated, list[tuple[Any, Positions, Path]] | None]:
    """The top-level mapping of a dataset file; for ``.jsonl`` files also its items (header line first)."""
    if file.suffix == ".jsonl":
        header: Any = None
        header_pos = Positions(str(file))
        items: list[tuple[Any, Positions, Path]] = []
        for _, value, pos in _jsonl_items(file, header=True):
            if header is None and isinstance(value, dict) and "target" in value:
                header, header_pos = value, pos
            else:
                items.append((value, pos, ()))
        if header is None:
            raise DatasetError([Problem(f"{file}:1:1", "a JSONL dataset needs a first line with 'target' (and scorers)",
                                        'start the file with {"target": "module:attr", "scorers": [...]}')])
        header.setdefault("data", [])
        return header, header_pos, Interpolated(), items
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise DatasetError([Problem(str(file), f"cannot read dataset: {exc.strerror}", "check the path")]) from None
    except UnicodeDecodeError as exc:
        before = file.read_bytes()[:exc.start]
        line, line_start = before.count(b"\n") + 1, before.rfind(b"\n") + 1
        column = len(before[line_start:].decode("utf-8", "replace")) + 1
        raise DatasetError([Problem(f"{file}:{line}:{column}",
                                    f"the file is not UTF-8 text (byte {exc.object[exc.start]:#04x})",
                                    "save it as UTF-8")]) from None
    data, pos, used = load_yaml(text, str(file))
    return data, pos, used, None


def load_dataset(path: str | FsPath, scorers_path: str | None = None) -> Dataset:
    """Read and validate a dataset (YAML, or JSONL with a header line) and its scorer registry."""
    file = FsPath(path)
    if not file.is_file():
        raise DatasetError([Problem(str(path), "no such dataset file", "check the path (e.g. datasets/weather.yaml)")])
    registry_path = find_registry(file, scorers_path)
    registry = load_registry(registry_path)
    data, pos, used, jsonl_items = _read_top(file)
    problems: list[Problem] = []
    if not isinstance(data, dict):
        raise DatasetError([pos.problem((), "a dataset must be a mapping with 'target' and 'data'",
                                        "start with 'target: module:attribute' then 'data:'")])
    try:
        top = DatasetFile.model_validate(data)
    except ValidationError as exc:
        raise DatasetError(problems_from_pydantic(exc, (), pos, "dataset", list(DatasetFile.model_fields))) from None
    gates = parse_list(top.gates, ("gates",), pos, registry, problems, gate=True)
    scorers = parse_list(top.scorers, ("scorers",), pos, registry, problems, gate=False)
    hasher = hashlib.sha256(file.read_bytes())
    raw_items: list[tuple[Any, Positions, Path]] = []
    if jsonl_items is not None:
        raw_items = jsonl_items
    elif top.data_file is not None:
        if top.data is not None:
            problems.append(pos.problem(("data_file",), "'data' and 'data_file' cannot both be given",
                                        "keep the items in one place", key=True))
        data_path = file.parent / top.data_file
        if not data_path.is_file():
            raise DatasetError([*problems, pos.problem(("data_file",), f"data file '{top.data_file}' not found",
                                                      "give a path relative to the dataset file")])
        hasher.update(data_path.read_bytes())
        raw_items = [(value, p, ()) for _, value, p in _jsonl_items(data_path, header=False)]
    else:
        raw_items = [(raw, pos, ("data", i)) for i, raw in enumerate(top.data or [])]
    if not raw_items:
        problems.append(pos.problem(("data",), "'data' is empty: there is nothing to run",
                                    "add at least one item, e.g. '- input: What is the weather?'"))
    items: list[Item] = []
    ids: dict[str, int] = {}
    for index, (raw, item_pos, at) in enumerate(raw_items):
        item = _item(raw, index, at, item_pos, registry, problems)
        if item is None:
            continue
        if item.id in ids:
            problems.append(item_pos.problem((*at, "id"), f"item {index}: id '{item.id}' is already used by item {ids[item.id]}",
                                             "give every item its own id"))
        ids[item.id] = index
        items.append(item)
    has_turn_assertions = any(t.gates or t.scorers for i in items for t in i.turns or ())
    if raw_items and not gates and not scorers and not has_turn_assertions and not problems:
        problems.append(pos.problem((), "At least one scorer or gate must be provided",
                                    "add 'scorers:' or 'gates:' (e.g. '- includes: Brooklyn')"))
    target = _resolve_target(top.target, file, pos, problems)
    python_scorers = _resolve_python_scorers([*gates, *scorers, *(s for i in items for t in i.turns or ()
                                                                   for s in (*t.gates, *t.scorers))],
                                             file, registry, problems)
    if problems:
        raise DatasetError(problems)
    assert target is not None
    return Dataset(path=str(path), target_spec=top.target, target=target, target_options=top.target_options,
                   concurrency=top.concurrency, gates=gates, scorers=scorers, items=items, registry=registry,
                   hash=hasher.hexdigest(), python_scorers=python_scorers,
                   secret_values=used.secret_values | registry.secret_values)


def search_paths(file: FsPath) -> list[FsPath]:
    """Where targets and custom scorers are imported from: the dataset's folder, then the current directory."""
    return [file.parent, FsPath.cwd()]


def _resolve_target(spec: str, file: FsPath, pos: Positions, problems: list[Problem]) -> Target | None:
    try:
        return Target(spec, resolve_import(spec, search_paths(file)))
    except EvalcliError as exc:
        problems.append(pos.problem(("target",), exc.message, exc.hint))
        return None


def _resolve_python_scorers(specs: list[ScorerSpec], file: FsPath, registry: Registry,
                            problems: list[Problem]) -> dict[str, Any]:
    resolved: dict[str, Any] = {}
    paths = search_paths(file)
    if registry.path:
        paths.insert(1, FsPath(registry.path).parent)
    for spec in specs:
        function = spec.args.get("function") if spec.kind == PYTHON_KIND else None
        if function is None or function in resolved:
            continue
        try:
            value = resolve_import(function, paths, what="python scorer")
        except EvalcliError as exc:
            problems.append(Problem(spec.where, exc.message, exc.hint))
            continue
        if not callable(value) and not callable(getattr(value, "score", None)):
            problems.append(Problem(spec.where, f"python scorer '{function}' is not callable",
                                    "point at a function taking a ScorerRun"))
            continue
        resolved[function] = value
    return resolved
