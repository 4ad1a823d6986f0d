"""Scorer references in YAML (docs/datasets.md): strings, inline ``{KIND: ARG}`` mappings, wrappers with a threshold or an id.

Parsing checks each reference against the kinds' declarations and the registry, and reports every
mistake with its file, line and column. A reference becomes a ``ScorerSpec``: a kind plus its validated
arguments, what YAML holds and what SQLite stores beside every score.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path as FsPath
from typing import Any

from pydantic import ValidationError

from ..errors import Problem, describe
from ..plugins import built
from ..records import record
from ..results import Threshold
from ..scorers import CalibrationBar, Registry, ScorerSpec, flow_yaml, inline_yaml
from ..scorers import find as find_kind
from ..scorers.kinds import WRAPPER_KEYS, Kind, no_argument_kinds, origin
from ..scorers.kinds import names as kind_names
from ..secret_references import digestible
from .written import as_written
from .yamlsrc import Path, Positions, did_you_mean, problems_from_pydantic
from .yamlvalues import typed

GATE_PASSES = "a gate always needs an average of 1.0"
"""Why a gate takes no threshold."""
BAR_KEYS = ("min_kappa", "min_labels", "min_accuracy")
"""The keys of ``calibrated``."""


def _calibrated(raw: Any, spec: ScorerSpec, path: Path, pos: Positions, problems: list[Problem],
                *, gate: bool) -> CalibrationBar | None:
    """``calibrated: {min_kappa, min_labels, min_accuracy}``: only on a top-level gate that is an LLM judge (labels,
    and so calibrations, are of whole conversations), each bound a number in its range
    (docs/judges.md#calibrated-gates)."""
    kind = find_kind(spec.kind)
    if not gate:
        problems.append(pos.problem(path, f"'calibrated' is set on the scorer \"{spec.id}\": only a gate is refused "
                                          "when its judge is not calibrated", "move this entry to 'gates', or remove "
                                                                              "'calibrated'", key=True))
        return None
    if any(key == "turns" and isinstance(index, int) for key, index in itertools.pairwise(path)):
        problems.append(pos.problem(path, f"'calibrated' is set on the per-turn gate \"{spec.id}\": calibrate measures "
                                          "a judge against labels of whole conversations, and a per-turn judge takes "
                                          "none, so its runs would be refused for a calibration that cannot be made",
                                    "move the judge to the dataset's top-level 'gates' (it then judges the whole "
                                    "conversation), or remove 'calibrated'", key=True))
        return None
    if kind is None or kind.group != "judge":
        problems.append(pos.problem(path, f"'calibrated' is set on the gate \"{spec.id}\", which is the check "
                                          f"'{spec.kind}': only an LLM judge is calibrated against people's labels",
                                    "remove 'calibrated' (a check needs no calibration)", key=True))
        return None
    if not isinstance(raw, dict) or not raw:
        problems.append(pos.problem(path, "'calibrated' must be a mapping of bounds",
                                    "write calibrated: {min_kappa: 0.6, min_labels: 30}"))
        return None
    bounds: dict[str, Any] = {}
    for key, written in raw.items():
        at, value = (*path, key), typed(written)  # a bound may be wholly one ${VAR} (docs/datasets.md)
        if key not in BAR_KEYS:
            problems.append(pos.problem(at, f"unknown key '{key}' in calibrated{did_you_mean(str(key), list(BAR_KEYS))}",
                                        f"valid keys: {', '.join(BAR_KEYS)}", key=True))
        elif key == "min_labels" and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            problems.append(pos.problem(at, f"min_labels must be a whole number of at least 1, got {value!r}",
                                        "write min_labels: 30"))
        elif key != "min_labels" and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not math.isfinite(value) or not (-1 if key == "min_kappa" else 0) <= value <= 1):
            low = "-1" if key == "min_kappa" else "0"
            problems.append(pos.problem(at, f"{key} must be a number from {low} to 1, got {value!r}",
                                        f"write {key}: 0.6"))
        else:
            bounds[key] = value
    if len(bounds) != len(raw):
        return None
    return CalibrationBar(**bounds)


def _threshold(raw: Any, scorer_id: str, path: Path, pos: Positions, problems: list[Problem]) -> Threshold | None:
    """A threshold as Mastra's ``validateThresholdConfig`` takes it (docs/scorers.md#scorer-references-ids-and-thresholds):
    a number, or ``{min, max}`` with at least one of them; a bound written is a number in [0, 1], never null (a bound
    left out is not written). What results echo is the config as written, each bound as read (a ``${VAR}`` bound its
    number), in the order written."""
    def bound(written: Any, label: str, at: Path) -> float | None:
        value = typed(written)  # a bound may be wholly one ${VAR} (docs/datasets.md)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or not 0 <= value <= 1:
            shown = "null" if value is None else f"the text {value!r}" if isinstance(value, str) else value
            problems.append(pos.problem(at, f'{label} threshold for scorer "{scorer_id}" must be a finite number '
                                            f"between 0 and 1, got {shown}",
                                        f"write a number from 0 to 1, or leave '{at[-1]}' out" if value is None else
                                        "write the number without quotes" if isinstance(value, str) else
                                        "use a number from 0 to 1"))
            return None
        return float(value)

    raw = typed(raw)
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        value = bound(raw, "Minimum", path)
        return None if value is None else Threshold(value, None, raw)
    if isinstance(raw, dict):
        unknown = [k for k in raw if k not in ("min", "max")]
        for key in unknown:
            problems.append(pos.problem((*path, key), f"unknown key '{key}' in threshold{did_you_mean(str(key), ['min', 'max'])}",
                                        "a threshold mapping has only 'min' and 'max'", key=True))
        if "min" not in raw and "max" not in raw:
            problems.append(pos.problem(path, f'Threshold for scorer "{scorer_id}" must specify at least one of min or max',
                                        "write {min: 0.5}, {max: 0.9} or both"))
            return None
        low = bound(raw["min"], "Minimum", (*path, "min")) if "min" in raw else None
        high = bound(raw["max"], "Maximum", (*path, "max")) if "max" in raw else None
        if low is not None and high is not None and low > high:
            problems.append(pos.problem(path, f'Threshold for scorer "{scorer_id}" has min ({typed(raw["min"])}) greater '
                                              f'than max ({typed(raw["max"])})', "swap min and max"))
            return None
        if unknown or ("min" in raw and low is None) or ("max" in raw and high is None):
            return None
        return Threshold(low, high, {k: typed(v) for k, v in raw.items() if k in ("min", "max")})
    kind = "null" if raw is None else "an array" if isinstance(raw, list) else f"a {type(raw).__name__}"
    problems.append(pos.problem(path, f'Threshold for scorer "{scorer_id}" must be a number or an object with min/max '
                                      f"bounds, got {kind}", "write a number like 0.8, or {min: 0.3, max: 0.9}"))
    return None


def _arguments(kind: Kind, raw: Any, path: Path, pos: Positions, problems: list[Problem]) -> dict[str, Any] | None:
    """The validated arguments of ``{kind: raw}``: ``raw`` is the main argument or a mapping of arguments."""
    fields = list(kind.args.model_fields)
    main_form = False
    if raw is None or raw == {}:
        raw_args: dict[str, Any] = {}
    elif isinstance(raw, dict):
        raw_args = dict(raw)
    elif kind.main is None:
        problems.append(pos.problem(path, f"{kind.name} takes no arguments", f"write just '{kind.name}'"))
        return None
    else:
        main_type = kind.args.model_fields[kind.main].annotation
        if main_type is str and isinstance(raw, bool):
            problems.append(pos.problem(path, f"{kind.name}: YAML reads this value as the boolean {str(raw).lower()} "
                                              "(yes/no/on/off/true/false are booleans)", "quote it: 'yes'"))
            return None
        if main_type is str and isinstance(raw, (int, float)):
            raw = str(raw)
        raw_args, main_form = {kind.key(kind.main): raw}, True
    if kind.needs_model and "model" in raw_args and "models" in raw_args:
        problems.append(pos.problem((*path, "models"), f"{kind.name}: give either 'model' or 'models' (a panel), not both",
                                    "keep 'model: NAME' for one judge model, or 'models: [A, B, C]' for a panel",
                                    key=True))
        return None
    if kind.prepare is not None:
        raw_args = kind.prepare(raw_args)
    try:
        args = built(kind.args).model_validate(as_written(kind.args, raw_args), strict=True)  # docs/datasets.md
    except ValidationError as exc:
        if main_form:
            # main-argument form: point at the value itself (or inside it), not at a key that was never written
            for e in exc.errors():
                inside = tuple(e["loc"])[1:]
                where = ".".join(map(str, inside))
                problems.append(Problem(pos.where((*path, *inside)), f"{kind.name}: {where + ': ' if where else ''}"
                                                                     f"{e['msg'].removeprefix('Value error, ')}",
                                        f"write {{{kind.name}: {(kind.main or '').upper()}}} with a valid value"))
        else:
            problems.extend(problems_from_pydantic(exc, path, pos, kind.name, fields))
        return None
    return args.model_dump(by_alias=True)


def parse_definition(raw: Any, path: Path, pos: Positions, problems: list[Problem]) -> tuple[str, dict[str, Any], str] | None:
    """A one-key mapping ``{KIND: ARG}`` (or a bare no-argument kind) -> (kind, args, default id)."""
    if isinstance(raw, str) and find_kind(raw) is not None:
        raw = {raw: None}
    if isinstance(raw, dict) and len(raw) > 1 and (split := _split(raw, ())) is not None and not split.wrapper:
        problems.append(_arguments_beside(split, path, pos, registered=True))  # a kind's arguments beside it
        return None
    if not isinstance(raw, dict) or len(raw) != 1:
        wrapper = [key for key in raw if key in WRAPPER_KEYS] if isinstance(raw, dict) else []
        if wrapper and path:  # a registry's definition (a dataset's references are read by parse_ref)
            problems.append(pos.problem((*path, wrapper[0]), f"a registered scorer is one kind with its arguments: "
                                                             f"'{wrapper[0]}' is set where a dataset uses it",
                                        "write it in the dataset:" + _lines({"scorer": path[-1], **{
                                            k: raw[k] for k in wrapper}}), key=True))
            return None
        problems.append(pos.problem(path, "a scorer must be a one-key mapping like {includes: Brooklyn}",
                                    f"kinds: {', '.join(kind_names())}"))
        return None
    (name, arg), = raw.items()
    at = (*path, name)
    kind = find_kind(str(name))
    if kind is None:
        problems.append(pos.problem(at, f"unknown scorer kind '{name}'{did_you_mean(str(name), kind_names())}",
                                    f"kinds: {', '.join(kind_names())}", key=True))
        return None
    try:
        values = _arguments(kind, arg, at, pos, problems)
        return None if values is None else (kind.name, values, named(kind.make_id(values)))
    except Exception as exc:
        entry = origin(kind)
        if entry.builtin:
            raise
        # a package's arguments model (a validator raising other than ValueError), `prepare` or `default_id` that
        # raises is that package's mistake, as its `build` is: not "a bug in evalcli" (docs/extending.md)
        raise entry.error(f"could not read the scorer {kind.name}: {json.dumps(arg, default=str)} "
                          f"({pos.where(at)}): {describe(exc)}") from None


def named(scorer_id: str) -> str:
    """A scorer's id with each secret in it as ``${NAME}`` (any other redacted): an id is shown and stored
    everywhere, so ``includes: ${TENANT_A}`` is ``includes(${TENANT_A})``, never ``includes([redacted])``, which
    ``includes: ${TENANT_B}`` would share (docs/secrets.md)."""
    return digestible(scorer_id)  # type: ignore[no-any-return]


def parse_ref(raw: Any, path: Path, pos: Positions, registry: Registry, problems: list[Problem],
              *, gate: bool) -> ScorerSpec | None:
    """Any scorer reference of docs/datasets.md (string, inline, wrapper) -> a spec, or problems."""
    where = pos.where(path)
    if isinstance(raw, dict) and "scorer" in raw:
        allowed = ["scorer", "id", "calibrated"] if gate else ["scorer", "threshold", "id"]
        for key in raw:
            if key == "calibrated" and not gate:
                continue  # reported with the spec it is on (``_calibrated``)
            if key == "threshold" and gate:
                problems.append(pos.problem((*path, key), f"a gate takes no threshold: {GATE_PASSES}",
                                            "remove 'threshold', or move this entry to 'scorers'", key=True))
            elif key not in allowed:
                problems.append(pos.problem((*path, key), f"unknown key '{key}' in scorer entry{did_you_mean(str(key), allowed)}",
                                            f"valid keys: {', '.join(allowed)}", key=True))
        inner = raw["scorer"]
        if isinstance(inner, dict) and "scorer" in inner:
            problems.append(pos.problem((*path, "scorer"), "a scorer entry cannot wrap another one",
                                        "write {scorer: REF, threshold: T, id: NAME} once"))
            return None
        spec = parse_ref(inner, (*path, "scorer"), pos, registry, problems, gate=gate)
        if spec is None:
            return None
        if "id" in raw:
            if not isinstance(raw["id"], str) or not raw["id"].strip():
                problems.append(pos.problem((*path, "id"), "'id' must be a non-empty string", "write id: my-scorer"))
                return None
            spec = replace(spec, id=named(raw["id"]))
        threshold = None
        if "threshold" in raw and not gate:
            threshold = _threshold(raw["threshold"], spec.id, (*path, "threshold"), pos, problems)
        bar = _calibrated(raw["calibrated"], spec, (*path, "calibrated"), pos, problems, gate=gate) \
            if "calibrated" in raw else None
        spec = _as_registered(spec, (*path, "id") if "id" in raw else path, pos, registry, problems)
        return None if spec is None else replace(spec, threshold=threshold, where=where, calibrated=bar)
    if raw is None or raw == {} or (isinstance(raw, dict) and (len(raw) > 1 or set(raw) <= set(WRAPPER_KEYS))):
        _not_one_reference(raw, path, pos, registry, problems, gate=gate)
        return None
    if isinstance(raw, str) and raw in registry.scorers:
        return replace(registry.scorers[raw], where=where)
    if isinstance(raw, str) and raw in registry.broken:
        return None  # its definition's mistake is reported where it is written
    if isinstance(raw, str) and find_kind(raw) is None:
        known = [*registry.scorers, *no_argument_kinds()]
        hint = f"registered: {', '.join(registry.scorers) or '(none)'}; built-in: {', '.join(no_argument_kinds())}"
        if registry.path is None:
            hint += "; no scorers.yaml was found (use --scorers PATH)"
        problems.append(pos.problem(path, f"unknown scorer '{raw}'{did_you_mean(raw, known + kind_names())}", hint))
        return None
    parsed = parse_definition(raw, path, pos, problems)
    if parsed is None:
        return None
    kind, args, default_id = parsed
    return _as_registered(ScorerSpec(id=default_id, kind=kind, args=args, where=where), path, pos, registry, problems)


@record(frozen=True)
class _Split:
    """A mapping of several keys read as one reference written loosely: the kind (or registered id), its arguments
    written beside it, and the wrapper's keys."""

    raw: dict[Any, Any]
    name: str
    arguments: tuple[str, ...]
    wrapper: tuple[str, ...]

    def reference(self) -> Any:
        """The reference as it should have been written: ``{includes: costs}``, ``weather-judge``, or the kind with
        its arguments in one mapping (``{called_tool: {name: x, times: 2}}``)."""
        value = self.raw[self.name]
        kind = find_kind(self.name)
        if self.arguments and kind is not None:
            inner = dict(value) if isinstance(value, dict) else {} if value is None or kind.main is None \
                else {kind.key(kind.main): value}
            return {self.name: {**inner, **{key: self.raw[key] for key in self.arguments}}}
        if value is None and (kind is None or kind.main is None):
            return self.name
        return {self.name: value}

    def wrapped(self, gate: bool) -> Any:
        """The wrapper that holds it (a gate's without a threshold), or the reference alone when nothing is left to
        wrap."""
        entry: dict[str, Any] = {"scorer": self.reference()}
        bounds = {key: self.raw[key] for key in ("min", "max") if key in self.raw}
        if not gate and ("threshold" in self.raw or bounds):
            entry["threshold"] = self.raw["threshold"] if "threshold" in self.raw else bounds
        if "id" in self.raw:
            entry["id"] = self.raw["id"]
        if "calibrated" in self.raw:
            entry["calibrated"] = self.raw["calibrated"]
        return entry if len(entry) > 1 else entry["scorer"]


def _split(raw: dict[Any, Any], registered: Iterable[str]) -> _Split | None:
    """``raw`` read as one kind (or ``registered`` id) with its arguments and wrapper keys beside it; ``None`` when it
    is not that (two kinds, or keys that are neither)."""
    wrapper = tuple(str(key) for key in raw if key in WRAPPER_KEYS)
    rest = [key for key in raw if key not in WRAPPER_KEYS]
    if len(rest) == 1:
        return _Split(raw, str(rest[0]), (), wrapper)
    names = [key for key in rest if find_kind(str(key)) is not None or key in registered]
    kind = find_kind(str(names[0])) if len(names) == 1 else None
    if kind is None:
        return None
    accepted = {kind.key(name) for name in kind.args.model_fields}
    arguments = tuple(str(key) for key in rest if key != names[0])
    return _Split(raw, str(names[0]), arguments, wrapper) if set(arguments) <= accepted else None


def _lines(entry: Any) -> str:
    """A list entry as the YAML lines to write instead, each on a line of the hint: ``- scorer: {includes: costs}``
    then ``  threshold: 1.2``."""
    if not isinstance(entry, dict):
        return f"\n      - {flow_yaml(entry)}"
    lines = [f"{key}: {flow_yaml(value)}" for key, value in entry.items()]
    return "".join(f"\n      {'- ' if n == 0 else '  '}{line}" for n, line in enumerate(lines))


def _arguments_beside(split: _Split, path: Path, pos: Positions, *, registered: bool = False) -> Problem:
    """A kind's arguments written beside it; the rewrite is a list entry, or the registry's ``ID: {...}`` line."""
    names = " and ".join(f"'{key}'" for key in split.arguments)
    rewrite = f"\n      {path[-1]}: {flow_yaml(split.reference())}" if registered else _lines(split.reference())
    return pos.problem((*path, split.arguments[0]), f"{names} {'is an argument' if len(split.arguments) == 1 else 'are arguments'}"
                                                    f" of {split.name}: a scorer reference has one key, so its "
                                                    "arguments go in one mapping under it", "write" + rewrite, key=True)


def _not_one_reference(raw: Any, path: Path, pos: Positions, registry: Registry, problems: list[Problem],
                       *, gate: bool) -> None:
    """An entry of ``gates:``/``scorers:`` that is not one reference: empty, a wrapper's key alone, or a kind with a
    threshold, an id, bounds or its arguments beside it. Says what to write instead, and reports the mistakes inside
    it as well (a threshold out of range, an argument the kind does not take), so they are all known at once."""
    listed = "gates" if gate else "scorers"
    if not raw:
        problems.append(pos.problem(path, f"an empty entry in '{listed}'",
                                    "write a scorer, e.g. '- includes: Brooklyn', or remove the '-' line"))
        return
    if set(raw) <= set(WRAPPER_KEYS):  # 'threshold: 0.8' as a list entry of its own
        key = next(iter(raw))
        problems.append(pos.problem((*path, key), f"'{key}' is not a scorer: it belongs in the entry of the scorer it "
                                                  "is for", "write the scorer and it as one entry:" + _lines(
                                                      {"scorer": {"includes": "Brooklyn"}, **raw}), key=True))
        return
    split = _split(raw, registry.scorers)
    if split is None:
        kinds = [key for key in raw if find_kind(str(key)) is not None or key in registry.scorers]
        if len(kinds) > 1:
            problems.append(pos.problem((*path, kinds[1]), f"one entry names {len(kinds)} scorers "
                                                           f"({', '.join(map(str, kinds))}): a scorer reference has one key",
                                        "write each as its own entry:" + "".join(_lines({k: raw[k]}) for k in kinds),
                                        key=True))
        else:
            problems.append(pos.problem(path, f"a scorer reference has one key, its kind; this one has "
                                              f"{', '.join(repr(str(k)) for k in raw)}",
                                        f"write e.g. '- includes: Brooklyn'; kinds: {', '.join(kind_names())}"))
        return
    spec = parse_ref(split.reference(), path, pos, registry, problems, gate=gate)
    scorer_id = str(raw["id"]) if isinstance(raw.get("id"), str) else spec.id if spec else split.name
    if not split.wrapper:
        problems.append(_arguments_beside(split, path, pos))
        return
    kept = ("id", "calibrated") if gate else ("id",)  # what a gate's wrapper holds (docs/judges.md#calibrated-gates)
    bounds = [key for key in split.wrapper if key not in kept]
    if gate and bounds:
        problems.append(pos.problem((*path, bounds[0]), f"'{bounds[0]}' beside '{split.name}' in 'gates': a gate takes "
                                                        f"no threshold ({GATE_PASSES})",
                                    "remove it, or make this a scorer: under 'scorers:' write" + _lines(
                                        split.wrapped(gate=False)), key=True))
    if "threshold" in raw and not gate:
        _threshold(raw["threshold"], scorer_id, (*path, "threshold"), pos, problems)
    elif bounds and not gate:
        _threshold({key: raw[key] for key in ("min", "max") if key in raw}, scorer_id, path, pos, problems)
    if "id" in raw and (not isinstance(raw["id"], str) or not raw["id"].strip()):
        problems.append(pos.problem((*path, "id"), "'id' must be a non-empty string", "write id: my-scorer"))
    if gate and not split.arguments and split.wrapper == tuple(bounds):
        return  # the only mistake is the threshold, said above
    moved = [key for key in split.wrapper if not (gate and key not in kept)]
    what = " and ".join(f"'{key}'" for key in (*split.arguments, *moved))
    wrapped = " and ".join([*(["a threshold"] if set(moved) - {"id", "calibrated"} else []),
                            *(["an id"] if "id" in moved else []),
                            *(["its calibration bar"] if "calibrated" in moved else [])])
    goes = [*(["its arguments go in one mapping under it"] if split.arguments else []),
            *([f"{wrapped} {'go' if ' and ' in wrapped else 'goes'} in a wrapper around it"] if wrapped else [])]
    problems.append(pos.problem((*path, (*split.arguments, *moved)[0]),
                                f"{what} cannot be written beside '{split.name}': a scorer reference has one key; "
                                f"{', and '.join(goes)}", "write" + _lines(split.wrapped(gate)), key=True))


def _as_registered(spec: ScorerSpec, path: Path, pos: Positions, registry: Registry,
                   problems: list[Problem]) -> ScorerSpec | None:
    """Registration is decided by configuration, not by id: a reference under a registered id is that registered
    scorer when its kind and arguments are the same, and a mistake when they differ (its scores would be stored
    and compared under the id of another configuration)."""
    registered = registry.scorers.get(spec.id)
    if registered is None or (spec.registered and spec.kind == registered.kind and spec.args == registered.args):
        return spec
    if spec.kind == registered.kind and spec.args == registered.args:
        return replace(spec, registered=True)
    where = FsPath(registry.path).name if registry.path else "scorers.yaml"
    problems.append(pos.problem(path, f"id '{spec.id}' is registered in {where} as {inline_yaml(registered)}: this "
                                      f"{inline_yaml(spec)} would be stored and compared under the same id",
                                f"give it an id of its own ({{scorer: ..., id: another-name}}), or use the registered "
                                f"scorer as it is: '{spec.id}'", key=path[-1] == "id"))
    return None


def parse_list(raw: Any, path: Path, pos: Positions, registry: Registry, problems: list[Problem],
               *, gate: bool) -> list[ScorerSpec]:
    """A ``gates:`` or ``scorers:`` list; ids must be unique within it."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        problems.append(pos.problem(path, f"'{path[-1]}' must be a list", f"write '{path[-1]}:' followed by '- ...' lines"))
        return []
    specs: list[ScorerSpec] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(raw):
        named = registry.named.get(entry) if type(entry) is str else None  # a registered name met before
        spec = named or parse_ref(entry, (*path, i), pos, registry, problems, gate=gate)
        if spec is None:
            continue
        if spec.id in seen:
            problems.append(pos.problem((*path, i), f"duplicate scorer id '{spec.id}' in '{path[-1]}' (also entry {seen[spec.id]})",
                                        "give one of them its own name: {scorer: ..., id: another-name}"))
            continue
        seen[spec.id] = i
        if named is None:
            spec = _shared(spec, registry)
            if type(entry) is str and entry in registry.scorers and _plain(spec):
                registry.named[entry] = spec
        specs.append(spec)
    return specs


def _plain(spec: ScorerSpec) -> bool:
    """Whether a spec is shared by every identical reference (a kind that imports code keeps each its own place)."""
    kind = find_kind(spec.kind)
    return kind is None or kind.imports is None


def _shared(spec: ScorerSpec, registry: Registry) -> ScorerSpec:
    """The spec already parsed for an identical reference, if any: a gate on every turn of a large
    dataset is then one object, not one per turn (memory stays flat in the number of items)."""
    if not _plain(spec):
        return spec  # an import error names this reference's own place
    threshold = spec.threshold
    key = (spec.id, spec.kind, json.dumps(spec.args, sort_keys=True, default=repr), spec.registered,
           None if threshold is None else (threshold.min, threshold.max, repr(threshold.raw)))
    return registry.shared.setdefault(key, spec)


def registration_conflicts(specs: Iterable[ScorerSpec]) -> list[Problem]:
    """Scores are stored by id, so an id names one registered configuration in a whole dataset, or none: an id that
    a registered scorer has somewhere (e.g. renamed with ``{scorer: REGISTERED, id: NAME}``) and another
    configuration has elsewhere is a mistake, reported where the other one is written."""
    every = list(specs)
    registered: dict[str, ScorerSpec] = {}
    for spec in every:
        if spec.registered:
            registered.setdefault(spec.id, spec)
    conflicts: dict[int, ScorerSpec] = {}
    for spec in every:
        first = registered.get(spec.id)
        if first is not None and not (spec.registered and spec.kind == first.kind and spec.args == first.args):
            conflicts.setdefault(id(spec), spec)
    return [Problem(spec.where, f"id '{spec.id}' names the registered scorer {inline_yaml(registered[spec.id])} "
                                f"({registered[spec.id].where}), but here it is {inline_yaml(spec)}: their scores would "
                                "be stored and compared as one",
                    "give this one an id of its own: {scorer: ..., id: another-name}") for spec in conflicts.values()]
