"""Loading a dataset file (YAML, or JSONL with a header line) with file:line:col errors.

``load_dataset`` validates everything before anything runs: structure, items, every scorer reference, the registry, the
target's import (and the arguments it needs) and custom scorers' imports. Mistakes that do not depend on each other are
all found in one pass: one ``DatasetError`` lists every problem, or a ``Dataset`` the rest of the code trusts is returned.
"""

from __future__ import annotations

import contextlib
import gc
import json
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path as FsPath
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from ..errors import DatasetError, Problem
from ..scorers import Registry, flow_yaml
from ..secrets import remember, remember_named
from .contents import with_identities
from .distinct import distinct_specs
from .header import Header, plain_header
from .imports import ImportScope, resolve_imports
from .items import NO_ENTRIES, Dataset, Item, Limits, Turn
from .located import FORM_KEYS, RECORDED_KEYS, Located, file_digest
from .options import item_options, missing_arguments, option_warnings, setups
from .plain import NOT_PLAIN, plain_item
from .reading import JsonlItems, data_file_missing, missing_dataset, no_item, read_top
from .recorded import parse_labels, parse_transcript
from .references import parse_list, registration_conflicts
from .registry import find_registry, load_registry
from .secret_values import declared_secrets, redacted, secret_variables
from .shapes import ITEM_ASSERTIONS, misplaced_assertions
from .simulate import parse_simulation
from .target import resolve_target
from .tools import checked_tools, parse_tools, parse_unmocked, tool_warnings
from .yamlsrc import Path, Positions, did_you_mean, problems_from_errors, settle, validated_worded

if TYPE_CHECKING:  # the dataset file's models are imported where an item or a top level needs them (header.py)
    from .files import DatasetFile, ItemFile, LimitsFile

NO_TARGET = "(recorded)"
"""``target_spec`` of a dataset of recorded conversations without a target."""


def _item(raw: Any, index: int, path: Path, pos: Positions, registry: Registry, known: list[str],
          problems: list[Problem], line: int | None) -> Item | None:
    """One item of any form, with its labels (``known``: the scorer ids a label may name) and the ``line`` it starts on."""
    plain = plain_item(raw, index, path, pos, registry, problems, line)
    if plain is not NOT_PLAIN:  # one of the common shapes, read without the models
        return plain  # type: ignore[no-any-return]
    label = f"item {index}"
    if isinstance(raw, dict) and any(key in raw for key in ITEM_ASSERTIONS):
        raw = misplaced_assertions(raw, path, pos, registry, label, problems)  # the rest is still checked
    if not isinstance(raw, dict):
        problems.append(pos.problem(path, f"{label} must be a mapping with 'input', 'inputs' or 'turns'",
                                    "write '- input: your question'"))
        return None
    from .models import ItemFile

    model, deferred = validated_worded(ItemFile, raw, path, pos, label, problems,
                                       lambda error: bool(error["loc"]) and error["loc"][0] in ITEM_WORDED)
    if model is None:
        return None
    if model.id is not None:
        label = f"item {index} ({model.id})"
    before = len(problems)
    labels = parse_labels(raw["labels"], path, pos, label, known, problems) if "labels" in raw else {}
    item = _conversation(raw, model, index, label, path, pos, registry, problems, line)
    item = _with_tools(item, raw, model, label, path, pos, problems) if item is not None else None
    settle(deferred, problems, before)
    if item is None or labels is None:
        return None
    return replace(item, labels=labels) if labels else item


ITEM_WORDED = frozenset({*FORM_KEYS, "labels", "tools", "unmocked"})
"""An item's keys whose mistakes load.py words itself (``validated_worded``)."""


def _with_tools(item: Item, raw: dict[str, Any], model: ItemFile, label: str, path: Path, pos: Positions,
                problems: list[Problem]) -> Item:
    """The item with its own ``tools`` (read from ``raw``: the model holds them typed), ``unmocked`` and ``limits``."""
    if model.tools is not None or model.unmocked is not None:
        item = replace(item, tools=None if model.tools is None else
                       parse_tools(raw["tools"], (*path, "tools"), pos, label, problems),
                       unmocked=None if model.unmocked is None else
                       parse_unmocked(model.unmocked, (*path, "unmocked"), pos, label, problems))
    if model.limits is not None or model.on_limit is not None:
        item = replace(item, limits=limits_of(model.limits, model.on_limit))
    return item


def _metadata(model: ItemFile) -> dict[str, Any]:
    """An item's ``metadata`` (one shared empty mapping when it has none: ``NO_ENTRIES``)."""
    return dict(model.metadata) if model.metadata else NO_ENTRIES


def limits_of(limits: LimitsFile | None, on_limit: str | None) -> Limits:
    """``limits:`` and ``on_limit`` as written, of a dataset or an item."""
    from .models import LimitsFile

    given = limits or LimitsFile()
    return Limits(given.turns, given.tokens, given.cost, given.seconds, on_limit)


def _conversation(raw: dict[str, Any], model: ItemFile, index: int, label: str, path: Path, pos: Positions,
                  registry: Registry, problems: list[Problem], line: int | None) -> Item | None:
    before = len(problems)
    present = [key for key in ("input", "inputs", "turns", "simulate", *RECORDED_KEYS) if key in raw]
    if not present:
        problems.append(pos.problem(path, f"{label} must have 'input', 'inputs', or 'turns'",
                                    "add 'input: ...' (one turn), 'inputs: [...]', 'turns: [...]', 'simulate: {goal: "
                                    "...}' or 'transcript: [...]' (a recorded conversation)"))
        return None
    if any(key in raw for key in RECORDED_KEYS):
        return _recorded_item(raw, model, index, label, path, pos, problems, line)
    if "simulate" in raw:
        return _simulated_item(raw, model, index, label, path, pos, problems, line)
    if "inputs" in raw and isinstance(raw["inputs"], str):
        problems.append(pos.problem((*path, "inputs"), f"{label}: 'inputs' must be a non-empty array of messages, "
                                                       "got a string",
                                    f"write 'inputs: [{raw['inputs']}]' (a list), or 'input: {raw['inputs']}' for "
                                    "a single turn"))
        return None
    if "inputs" in raw and (not isinstance(raw["inputs"], list) or not raw["inputs"]):
        problems.append(pos.problem((*path, "inputs"), f"{label}: 'inputs' must be a non-empty array",
                                    "list the user's messages, e.g. 'inputs: [Hello, What is the weather?]', or write "
                                    "'input: ...' for a single turn"))
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
            parsed = _turn(turn, t, at, label, pos, registry, problems)
            if parsed is not None:
                turns.append(parsed)
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
    form = "turns" if turns is not None else "inputs" if "inputs" in raw else "input"
    item_id = str(model.id) if model.id is not None else str(index)
    return Item(index, item_id, model.tags, form, list(inputs), turns, model.ground_truth, model.expected_outcome,
                target_options=model.target_options, metadata=_metadata(model), line=line,
                id_given=model.id is not None)


def _turn(turn: Any, t: int, at: Path, label: str, pos: Positions, registry: Registry,
          problems: list[Problem]) -> Turn | None:
    """One turn of a ``turns`` item: ``input`` (with its gates and scorers), or ``resume`` (docs/targets/frameworks.md)."""
    from .models import TurnFile

    if not isinstance(turn, dict) or ("input" not in turn and "resume" not in turn):
        typo = next((key for key in turn if did_you_mean(str(key), ["input"])), None) if isinstance(turn, dict) else None
        if typo is not None:
            problems.append(pos.problem((*at, typo), f"{label}: turn {t}: unknown key '{typo}'"
                                                     f"{did_you_mean(str(typo), list(TurnFile.model_fields))}",
                                        "every turn needs 'input: what the user says'", key=True))
            return None
        found = (": it is empty" if not turn and isinstance(turn, (dict, type(None))) else
                 f": it has only {', '.join(repr(str(k)) for k in turn)}" if isinstance(turn, dict) else
                 ", not a list" if isinstance(turn, list) else f", not {turn!r}")
        said = f"'- input: {flow_yaml(turn)}'" if isinstance(turn, str) else "'- input: what the user says'"
        problems.append(pos.problem(at, f"{label}: turn {t} must be an object with an 'input' property{found}",
                                    f"write {said} (with its 'gates:' and 'scorers:' under it), or '- resume: VALUE' "
                                    "to answer an interrupt"))
        return None
    if "input" in turn and "resume" in turn:
        problems.append(pos.problem((*at, "resume"), f"{label}: turn {t} gives both 'input' and 'resume'",
                                    "keep one: 'input' is a message (it resumes a pending interrupt as it is), "
                                    "'resume' any value", key=True))
        return None
    empty = next((key for key in ("input", "resume") if key in turn and turn[key] is None), None)
    if empty is not None:  # `- input:` with its text forgotten: refused, never sent as the text "null"
        problems.append(pos.problem((*at, empty), f"{label}: turn {t}: '{empty}' needs a value", "write e.g. " + (
            "'- input: What about tomorrow?'" if empty == "input" else "'resume: yes' or 'resume: {approved: true}'")))
        return None
    if "resume" in turn and t == 0:
        problems.append(pos.problem((*at, "resume"), f"{label}: turn 0 cannot resume: no earlier turn can have "
                                                     "ended in an interrupt", "write '- input: ...' for the first turn",
                                    key=True))
        return None
    model, deferred = validated_worded(TurnFile, turn, at, pos, f"{label} turn {t}", problems,
                                       lambda error: error["loc"][:1] == ("tools",))
    if model is None:
        return None
    before = len(problems)
    gates = parse_list(model.gates, (*at, "gates"), pos, registry, problems, gate=True)
    scorers = parse_list(model.scorers, (*at, "scorers"), pos, registry, problems, gate=False)
    tools = None if model.tools is None else parse_tools(turn["tools"], (*at, "tools"), pos, f"{label} turn {t}", problems)
    settle(deferred, problems, before)
    if model.input is not None:
        return Turn(model.input, gates, scorers, tools=tools)
    return Turn(resume_text(model.resume), gates, scorers, resume=model.resume, tools=tools)


def resume_text(value: Any) -> str:
    """A ``resume`` value as the turn's recorded input: a string as is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _simulated_item(raw: dict[str, Any], model: ItemFile, index: int, label: str, path: Path, pos: Positions,
                    problems: list[Problem], line: int | None) -> Item | None:
    """A ``simulate`` item: an LLM plays the user (docs/simulated-users.md)."""
    scripted = [key for key in ("input", "inputs", "turns") if key in raw]
    if scripted:
        problems.append(pos.problem((*path, "simulate"), f"{label}: 'simulate' cannot be combined with "
                                                         f"'{scripted[0]}'",
                                    "keep 'simulate' (an LLM plays the user) or script the messages, not both", key=True))
    simulation = parse_simulation(raw["simulate"], (*path, "simulate"), pos, label, problems)
    if simulation is None or scripted:
        return None
    item_id = str(model.id) if model.id is not None else str(index)
    opening = [simulation.opening] if simulation.opening else []
    return Item(index, item_id, model.tags, "simulate", opening, None, model.ground_truth, model.expected_outcome,
                simulation, target_options=model.target_options, metadata=_metadata(model), line=line,
                id_given=model.id is not None)


def _recorded_item(raw: dict[str, Any], model: ItemFile, index: int, label: str, path: Path, pos: Positions,
                   problems: list[Problem], line: int | None) -> Item | None:
    """A ``transcript`` item: a recorded conversation, scored as it is (docs/recorded.md)."""
    keys = [key for key in RECORDED_KEYS if key in raw]
    others = [key for key in ("input", "inputs", "turns", "simulate") if key in raw]
    if len(keys) > 1 or others:
        problems.append(pos.problem((*path, keys[0]), f"{label}: '{keys[0]}' cannot be combined with "
                                                      f"'{(keys[1:] + others)[0]}'",
                                    "a recorded conversation is scored as it is: keep 'transcript' alone, or script "
                                    "the messages for the target", key=True))
        return None
    turns = parse_transcript(raw[keys[0]], path, pos, label, keys[0], problems)
    if turns is None:
        return None
    item_id = str(model.id) if model.id is not None else str(index)
    return Item(index, item_id, model.tags, "transcript", [t.input for t in turns], None, model.ground_truth,
                model.expected_outcome, transcript=turns,
                metadata=_metadata(model), line=line, id_given=model.id is not None)


def load_dataset(path: str | FsPath, scorers_path: str | None = None, target: str | dict[str, Any] | None = None,
                 target_label: str | None = None) -> Dataset:
    """Read and validate a dataset (YAML, or JSONL with a header line) and its scorer registry.

    ``target`` replaces the file's own target (``--target TARGET``, parsed by ``targets.forms.cli_target``; its
    mistakes are reported as ``--target <target_label>``). Every independent mistake, in the dataset and in its
    registry, is reported in one ``DatasetError``.

    Python's cyclic garbage collector is paused meanwhile: loading makes hundreds of thousands of objects that all
    stay alive, and each collection they set off would walk them all again (parsing a 10,000-item file took 1.5 to
    2 times as long with it running); whatever cycles loading leaves are collected once it is back on.
    """
    with _collector_paused():
        try:
            return _load_dataset(path, scorers_path, target, target_label)
        except DatasetError as exc:  # a problem may quote a value: never a secret of the environment
            raise DatasetError(redacted(exc.problems)) from None


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def _load_dataset(path: str | FsPath, scorers_path: str | None, target: str | dict[str, Any] | None,
                  target_label: str | None) -> Dataset:
    file = FsPath(path)
    if file.is_dir():
        raise DatasetError([Problem(str(path), "this is a directory, not a dataset file",
                                    f"name the YAML files in it, e.g. {FsPath(path) / '*.yaml'}")])
    if not file.is_file():
        raise DatasetError([missing_dataset(path)])
    if file.stat().st_size == 0:
        raise DatasetError([Problem(str(path), "the file is empty",
                                    "write 'target: module:attribute', 'scorers:' and 'data:' (see 'evalcli init')")])
    registry = load_registry(find_registry(file, scorers_path))
    problems: list[Problem] = list(registry.problems)
    try:
        data, pos, used, listed = read_top(file)
    except DatasetError as exc:
        raise DatasetError([*exc.problems, *problems]) from None
    problems.extend(used.problems)
    if not isinstance(data, dict):
        raise DatasetError([*problems, pos.problem((), "a dataset must be a mapping with 'target' and 'data'",
                                                   "start with 'target: module:attribute' then 'data:'")])
    if target is not None:
        data.setdefault("target", target)
    top, bad_keys = _top_level(data, pos, problems)
    # known before anything is digested (conversations' identities, scorer ids): a digest covers a secret by its name
    secret_values = used.secret_values | registry.secret_values | declared_secrets(top.secrets or [], used)
    remember(secret_values)
    remember_named(secret_variables(top.secrets or [], used, secret_values))
    tools = None if top.tools is None else parse_tools(data["tools"], ("tools",), pos, "dataset", problems)
    unmocked = "live" if top.unmocked is None else parse_unmocked(top.unmocked, ("unmocked",), pos, "dataset", problems)
    gates = parse_list(top.gates, ("gates",), pos, registry, problems, gate=True)
    scorers = parse_list(top.scorers, ("scorers",), pos, registry, problems, gate=False)
    hasher = file_digest(file)
    raw_items: Iterable[tuple[Any, Positions, Path]] = []
    ingested: Any = None
    if listed is not None:
        raw_items = listed
    elif top.data_file is not None:
        if top.data is not None:
            problems.append(pos.problem(("data_file",), "'data' and 'data_file' cannot both be given",
                                        "keep the items in one place", key=True))
        data_path = file.parent / top.data_file
        if not top.data_file.strip():
            raise DatasetError([*problems, pos.problem(("data_file",), "'data_file' is empty",
                                                      "name a JSONL file of items (one a line), relative to the "
                                                      "dataset file, or remove 'data_file'")])
        if not data_path.is_file():
            raise DatasetError([*problems, pos.problem(("data_file",), *data_file_missing(top.data_file, file))])
        file_digest(data_path, hasher)
        from ..otel.ingest import ingest as ingest_traces  # only a dataset with a data file reads traces
        from ..otel.ingest import is_trace_file

        if is_trace_file(data_path):  # OpenTelemetry traces, read as recorded conversations (docs/otel.md)
            ingested = ingest_traces(data_path)
            raw_items = ((value, Positions(str(data_path), values={(): (line, 1)}), ())
                         for line, value in ingested.conversations)
        else:
            raw_items = JsonlItems(data_path)
    else:
        raw_items = [(raw, pos, ("data", i)) for i, raw in enumerate(top.data or [])]
    known = [*(g.id for g in gates), *(s.id for s in scorers)]
    try:
        items, located = _items(raw_items, registry, known, problems, lines=top.data_file is None)
    except DatasetError as exc:  # a line that is not JSON: said with every problem found before it
        raise DatasetError(redacted([*problems, *exc.problems], secret_values)) from None
    if not located and "data" not in bad_keys:  # a trace file says why it holds none (docs/otel.md)
        problems.append(ingested.no_conversation() if ingested else no_item(file, top.data_file, listed is not None,
                                                                            pos))
    has_turn_assertions = any(t.gates or t.scorers for i in items for t in i.turns or ())
    if located and not gates and not scorers and not has_turn_assertions and not problems:
        empty = next((key for key in ("scorers", "gates") if key in data), None)  # written, but with no entry
        if empty is None:
            problems.append(pos.problem((), "At least one scorer or gate must be provided",
                                        "add 'scorers:' or 'gates:' (e.g. '- includes: Brooklyn')"))
        else:
            problems.append(pos.problem((empty,), f"At least one scorer or gate must be provided: '{empty}' is empty",
                                        f"add an entry under '{empty}:', e.g. '- includes: Brooklyn'"))
    # every spec once (by identity): identical references share one, and what is looked at is the spec
    found = distinct_specs(gates, scorers, items)
    specs = found[0]
    problems.extend(registration_conflicts(specs))
    scope = ImportScope(search_paths(file, registry))
    with scope:
        resolved = None
        if target is not None:
            resolved = resolve_target(target, top.target_options, Positions(f"--target {target_label or target}"),
                                      problems, file.parent, at=())
        elif top.target:
            resolved = resolve_target(top.target, top.target_options, pos, problems, file.parent)
        imported = resolve_imports(specs, problems)
        items = item_options(items, located, top.target_options, resolved.adapter if resolved else None, problems)
        problems += missing_arguments(resolved.adapter if resolved else None, top.target_options, items, Positions(
            f"--target {target_label or target}").problem((), "") if target is not None else pos.problem(("target",), ""))
        imported.update(setups(items, located, top.target_options, problems, pos))
    tools, items = checked_tools(tools, items, located, resolved.adapter if resolved else None, file.parent, pos,
                                  problems)
    recorded = bool(located) and located.recorded
    if not top.target and target is None and not recorded and "target" not in bad_keys and ingested is None:
        problems.append(pos.problem(("target",), "'target' is empty" if "target" in data else "dataset needs 'target'",
                                    "write 'target: module:attribute' (or a mapping with 'a2a', 'http', 'mastra' or 'model'; "
                                    "only a dataset whose items are all recorded transcripts may leave it out)"))
    if problems:
        raise DatasetError(redacted(problems, secret_values))
    if resolved is None:  # every item is a recorded transcript: nothing to call
        target_spec, adapter, target_secrets = NO_TARGET, None, set[str]()
    else:
        assert resolved.adapter is not None
        target_spec, adapter, target_secrets = resolved.spec, resolved.adapter, resolved.secrets
    dataset = Dataset(path=str(path), target_spec=target_spec, target=adapter, target_options=top.target_options,
                      concurrency=top.concurrency, gates=gates, scorers=scorers, items=items, registry=registry,
                      data_file=str(file.parent / top.data_file) if top.data_file else None,
                      hash=hasher.hexdigest(), name=dataset_name(file), imported=imported, target_given=target,
                      secret_values=secret_values | target_secrets, scope=scope,
                      target_has_memory=top.target_has_memory, tools=tools, unmocked=unmocked or "live",
                      target_settings=resolved.resolved if resolved is not None else {},
                      limits=limits_of(top.limits, top.on_limit) if top.limits or top.on_limit else None,
                      warnings=(ingested.warnings if ingested else []) + ([f"{path}: {w}" for w in (
                          *option_warnings(adapter, top.target_options, items),
                          *tool_warnings(adapter, specs, tools, items))]
                          if adapter is not None else []))
    dataset.distinct(found)  # the items since have their options and tools, the same turns' specs
    return dataset


def _top_level(data: dict[str, Any], pos: Positions, problems: list[Problem]) -> tuple[DatasetFile | Header, set[str]]:
    """The top-level keys, and those that were wrong: a wrong or unknown key is reported and left out, so the rest of
    the file is still checked. The items of ``data`` are validated one by one (``_item``), with their own lines. A top
    level in the common shape is read without the models (``header.plain_header``: the same values)."""
    items = data.get("data")
    given = {**data, "data": None} if isinstance(items, list) else data
    plain = plain_header(given)
    if plain is not None:
        if isinstance(items, list):
            plain.data = items
        return plain, set()
    from .models import DatasetFile

    try:
        top, bad = DatasetFile.model_validate(given), set[str]()
    except ValidationError as exc:
        errors = exc.errors()
        reported = [e for e in errors if not _top_worded(e)]
        problems.extend(problems_from_errors(reported, (), pos, "dataset", list(DatasetFile.model_fields)))
        bad = {str(e["loc"][0]) for e in reported if e["loc"]}
        worded = {str(e["loc"][0]) for e in errors if _top_worded(e)} - bad
        kept = {k: v for k, v in given.items() if k not in bad | worded and k in DatasetFile.model_fields}
        try:
            top = DatasetFile.model_validate(kept)
        except ValidationError:  # pragma: no cover - every failing key was left out
            top = DatasetFile()
        top = top.model_copy(update={key: data[key] for key in worded})
    return (top.model_copy(update={"data": items}) if isinstance(items, list) else top), bad


def _top_worded(error: ErrorDetails) -> bool:
    """A mistake load.py words itself: in ``tools`` and ``unmocked`` (a target's own settings are validated by its
    form, ``resolve_target``; here it is only an import path or a mapping)."""
    return error["loc"][:1] in (("tools",), ("unmocked",))


def _items(raw_items: Iterable[tuple[Any, Positions, Path]], registry: Registry, known: list[str],
           problems: list[Problem], *, lines: bool) -> tuple[list[Item], Located]:
    """The valid items, and where each raw item is (``Located``: its raw value is not kept); with ``lines``, each
    item knows its line in the dataset file (not so for a ``data_file``'s). ``raw_items`` is read once, one item at a
    time (a JSONL file's lines are never held whole: docs/performance.md#memory)."""
    items: list[Item] = []
    ids: dict[str, int] = {}
    located = Located()
    for index, (raw, item_pos, at) in enumerate(raw_items):
        # a JSONL line's item is at its line (``Located`` keeps it): its positions are not asked again
        kept = located.add(raw, item_pos, at)
        line = (kept or item_pos.line(at)) if lines else None
        item = _item(raw, index, at, item_pos, registry, known, problems, line)
        if item is not None:
            item_id = item.id
        else:
            raw_id = raw.get("id") if isinstance(raw, dict) else None
            if not isinstance(raw_id, (str, int)):
                continue
            item_id = str(raw_id)
        if item_id in ids:
            problems.append(item_pos.problem((*at, "id"), f"item {index}: id '{item_id}' is already used by item "
                                                          f"{ids[item_id]}", "give every item its own id"))
        ids.setdefault(item_id, index)
        if item is not None:
            items.append(item)
    return with_identities(items), located


def dataset_name(file: FsPath) -> str:
    """The dataset's stable name: its path relative to the repository root holding it, else its resolved path."""
    resolved = file.resolve()
    for folder in resolved.parents:
        if (folder / ".git").exists():
            return resolved.relative_to(folder).as_posix()
    return resolved.as_posix()


def search_paths(file: FsPath, registry: Registry | None = None) -> list[FsPath]:
    """Where targets and custom scorers are imported from: the dataset's folder, the registry's, the current directory."""
    paths = [file.parent]
    if registry is not None and registry.path:
        paths.append(FsPath(registry.path).parent)
    return [*paths, FsPath.cwd()]
