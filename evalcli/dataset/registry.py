"""The scorer registry file, ``scorers.yaml`` (docs/storage.md): found, read and validated with located errors."""

from __future__ import annotations

from pathlib import Path as FsPath

from ..errors import DatasetError, Problem
from ..scorers import Registry, ScorerSpec, inline_yaml
from ..scorers.kinds import no_argument_kinds
from ..secrets import remember_named
from .references import parse_definition
from .yamlsrc import Path, load_yaml


def load_registry(path: str | FsPath | None) -> Registry:
    """Read a ``scorers.yaml``; ``None`` gives an empty registry. Mistakes are kept in ``problems``
    (a definition that is wrong is left out and its id marked ``broken``), so a dataset using the
    registry can report them together with its own."""
    if path is None:
        return Registry()
    file = str(path)
    registry = Registry(path=file)
    try:
        text = FsPath(file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or "it is not UTF-8 text"
        registry.problems.append(Problem(file, f"cannot read scorer registry: {reason}", "check --scorers PATH"))
        return registry
    try:
        data, pos, used = load_yaml(text, file)
    except DatasetError as exc:
        registry.problems.extend(exc.problems)
        return registry
    registry.problems.extend(used.problems)
    registry.secret_values = used.secret_values
    remember_named((name, value) for name, values in used.values.items() for value in values
                   if value in used.secret_values)
    if not isinstance(data, dict) or set(data) - {"scorers"}:
        extra = sorted(map(str, set(data) - {"scorers"})) if isinstance(data, dict) else []
        registry.problems.append(pos.problem((extra[0],) if extra else (), "a scorer registry has one key, 'scorers'",
                                             "write 'scorers:' then 'my-id: {includes: text}' entries", key=True))
        if not isinstance(data, dict):
            return registry
    entries = data.get("scorers") or {}
    if not isinstance(entries, dict):
        registry.problems.append(pos.problem(("scorers",), "'scorers' must be a mapping of id -> scorer",
                                             "write 'my-id: {includes: text}' under it"))
        return registry
    for scorer_id, definition in entries.items():
        at: Path = ("scorers", scorer_id)
        parsed = parse_definition(definition, at, pos, registry.problems)
        if parsed is None:
            registry.broken.add(str(scorer_id))
            continue
        kind, args, _ = parsed
        if str(scorer_id) != kind and str(scorer_id) in no_argument_kinds():
            # a dataset's bare `used_no_tools` is this id or the check: never silently another kind (docs/scorers.md)
            shown = inline_yaml(ScorerSpec(str(scorer_id), kind, args))
            registry.problems.append(pos.problem(at, f"'{scorer_id}' is the name of a built-in check, registered here "
                                                     f"as {shown}: a dataset's '- {scorer_id}' would run this instead "
                                                     "of the check", "give it an id that names no built-in check "
                                                                     "(evalcli scorers lists them)", key=True))
            registry.broken.add(str(scorer_id))
            continue
        registry.scorers[str(scorer_id)] = ScorerSpec(str(scorer_id), kind, args, registered=True, where=pos.where(at))
    return registry


def find_registry(dataset: FsPath, explicit: str | None) -> FsPath | None:
    """``--scorers`` if given, else ``scorers.yaml`` next to the dataset, else in the current directory."""
    if explicit:
        return FsPath(explicit)
    for folder in (dataset.parent, FsPath.cwd()):
        candidate = folder / "scorers.yaml"
        if candidate.is_file():
            return candidate
    return None
