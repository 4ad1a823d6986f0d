"""Scorer references in YAML (SPEC §1): strings, inline ``{KIND: ARG}`` mappings, wrappers with a threshold or an id.

Parsing checks each reference against the kinds' declarations and the registry, and reports every
mistake with its file, line and column. A reference becomes a ``ScorerSpec``: a kind plus its validated
arguments, what YAML holds and what SQLite stores beside every score.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path as FsPath
from typing import Any

from pydantic import ValidationError

from ..errors import Problem
from ..results import Threshold
from ..scorers import Registry, ScorerSpec, inline_yaml
from ..scorers import find as find_kind
from ..scorers.kinds import Kind, no_argument_kinds
from ..scorers.kinds import names as kind_names
from .yamlsrc import Path, Positions, did_you_mean, problems_from_pydantic


def _threshold(raw: Any, scorer_id: str, path: Path, pos: Positions, problems: list[Problem]) -> Threshold | None:
    def bound(value: Any, label: str, at: Path) -> float | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or not 0 <= value <= 1:
            problems.append(pos.problem(at, f'{label} threshold for scorer "{scorer_id}" must be a finite number '
                                            f"between 0 and 1, got {value}", "use a number from 0 to 1"))
            return None
        return float(value)

    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        value = bound(raw, "Minimum", path)
        return None if value is None else Threshold(value, None, raw)
    if isinstance(raw, dict):
        unknown = [k for k in raw if k not in ("min", "max")]
        for key in unknown:
            problems.append(pos.problem((*path, key), f"unknown key '{key}' in threshold{did_you_mean(str(key), ['min', 'max'])}",
                                        "a threshold mapping has only 'min' and 'max'", key=True))
        if raw.get("min") is None and raw.get("max") is None:
            problems.append(pos.problem(path, f'Threshold for scorer "{scorer_id}" must specify at least one of min or max',
                                        "write {min: 0.5}, {max: 0.9} or both"))
            return None
        low = bound(raw.get("min"), "Minimum", (*path, "min"))
        high = bound(raw.get("max"), "Maximum", (*path, "max"))
        if low is not None and high is not None and low > high:
            problems.append(pos.problem(path, f'Threshold for scorer "{scorer_id}" has min ({raw["min"]}) greater than '
                                              f'max ({raw["max"]})', "swap min and max"))
            return None
        if unknown or (raw.get("min") is not None and low is None) or (raw.get("max") is not None and high is None):
            return None
        return Threshold(low, high, {k: raw[k] for k in ("min", "max") if raw.get(k) is not None})
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
        args = kind.args.model_validate(raw_args)
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
    if not isinstance(raw, dict) or len(raw) != 1:
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
    values = _arguments(kind, arg, at, pos, problems)
    return None if values is None else (kind.name, values, kind.make_id(values))


def parse_ref(raw: Any, path: Path, pos: Positions, registry: Registry, problems: list[Problem],
              *, gate: bool) -> ScorerSpec | None:
    """Any scorer reference of SPEC §1 (string, inline, wrapper) -> a spec, or problems."""
    where = pos.where(path)
    if isinstance(raw, dict) and "scorer" in raw:
        allowed = ["scorer", "id"] if gate else ["scorer", "threshold", "id"]
        for key in raw:
            if key == "threshold" and gate:
                problems.append(pos.problem((*path, key), "a gate takes no threshold: a gate always needs an average of 1.0",
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
            spec = replace(spec, id=raw["id"])
        threshold = None
        if "threshold" in raw and not gate:
            threshold = _threshold(raw["threshold"], spec.id, (*path, "threshold"), pos, problems)
        spec = _as_registered(spec, (*path, "id") if "id" in raw else path, pos, registry, problems)
        return None if spec is None else replace(spec, threshold=threshold, where=where)
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
