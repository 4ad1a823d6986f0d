"""Resolving a dataset's ``target`` (docs/targets/index.md, docs/targets/frameworks.md, docs/targets/http.md): an import path,
or a mapping (``http``, ``mastra``,
``model``), written in the file or given as ``--target TARGET``. This is the one place either becomes an adapter.
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import field
from pathlib import Path as FsPath
from typing import Any

from ..errors import EvalcliError, Problem
from ..records import record
from ..secrets import remember
from ..targets import (
    Adapter,
    ConfigProblem,
    FormContext,
    form_class,
    form_of,
    make_adapter,
    make_form_adapter,
    settings_of,
)
from .imports import resolve_import
from .written import as_written
from .yamlsrc import Path, Positions, validated

HINT_FORMS = {"model:": "model", "mastra:": "mastra", "http:": "http", "https:": "http"}


@record
class ResolvedTarget:
    """What the target resolved to: how it is named (in ``--target`` syntax for mappings), its adapter, and the
    values in its settings that must never be stored or shown."""

    spec: str
    adapter: Adapter | None
    secrets: set[str] = field(default_factory=set)
    resolved: dict[str, Any] = field(default_factory=dict)
    """A mapping target's settings as the run uses them (``FormAdapter.resolved``); for an import path, its module's
    file by content (``source_of``)."""


def resolve_target(raw: str | dict[str, Any], options: dict[str, Any], pos: Positions, problems: list[Problem],
                   folder: FsPath, at: Path = ("target",)) -> ResolvedTarget:
    """The adapter for ``raw`` (inside the dataset's import scope); each mistake is added to ``problems``, located
    at ``at`` in ``pos`` (``None`` adapter then)."""
    if isinstance(raw, str):
        adapter = _imported(raw, options, pos, problems, at)
        return ResolvedTarget(raw, adapter, resolved=source_of(raw) if adapter is not None else {})
    name = "target"
    try:
        name = form_of(raw)
        cls = form_class(name)
        settings, inside = settings_of(name, raw)
    except ConfigProblem as exc:
        problems.append(pos.problem((*at, *exc.at), exc.message, exc.hint, key=bool(exc.at)))
        return ResolvedTarget(name, None)
    except EvalcliError as exc:
        problems.append(pos.problem(at, exc.message, exc.hint))
        return ResolvedTarget(name, None)
    where = (*at, *inside)
    config = validated(cls.config_model, as_written(cls.config_model, settings), where, pos, f"the {name} target", problems, (
        f"the {name} target's settings must be a mapping", f"write '{name}: {{url: ...}}'"))
    if config is None:
        return ResolvedTarget(name, None)
    spec, secrets = cls.describe(config), cls.secrets(config)
    remember(secrets)
    try:
        built = cls.build(config, FormContext(folder, resolve_import))
        return ResolvedTarget(spec, make_form_adapter(cls, spec, built, options), secrets,
                              {name: cls.resolved(config, built)})
    except ConfigProblem as exc:
        problems.append(pos.problem((*where, *exc.at), exc.message, exc.hint))
    except EvalcliError as exc:
        problems.append(pos.problem(("target_options",) if "target_options" in exc.message else where, exc.message,
                                    exc.hint))
    return ResolvedTarget(spec, None, secrets)


def source_of(spec: str, modules: dict[str, Any] | None = None) -> dict[str, str]:
    """The module an import path names, by content (docs/identity.md#the-resolved-configuration): ``{"source":
    <sha256 of its file>, "source_file": "pkg/agent.py"}`` (the file's path as the module's name gives it, the same
    on every machine and shard), so a resume after the agent's code was edited is refused by the file's name. The
    modules it imports are not read. ``{}`` for a module with no file (built in, a namespace package). ``modules``: a
    dataset's own (``ImportScope.modules``), looked in first: its module is there when the scope is not entered."""
    name = spec.partition(":")[0]
    module = (modules or {}).get(name) or sys.modules.get(name)
    file = getattr(module, "__file__", None)
    if module is None or not isinstance(file, str):
        return {}
    try:
        content = FsPath(file).read_bytes()
    except OSError:
        return {}
    parts = module.__name__.split(".")
    name = "/".join(parts) + "/" + FsPath(file).name if FsPath(file).stem == "__init__" else \
        "/".join([*parts[:-1], FsPath(file).name])
    return {"source": hashlib.sha256(content).hexdigest(), "source_file": name}


CODE = "code"
"""The key of the resolved configuration under which the modules of custom scorers and ``setup`` functions count by
their files (``sources_of``)."""


def sources_of(imported: dict[str, Any], scope: Any = None) -> dict[str, Any]:
    """``{"code": {import path: source_of(path)}}`` for the import paths a dataset named besides its target (custom
    scorers, ``setup``) whose module has a file; ``{}`` when none has (a run stored before kept none: nothing to
    compare). A resume says an edit of one, as of the target's module (docs/identity.md). ``scope``: the dataset's
    ``ImportScope``, whose modules are out of ``sys.modules`` while it is not entered."""
    modules = getattr(scope, "modules", None)
    found = {path: source for path in sorted(imported) if (source := source_of(path, modules))}
    return {CODE: found} if found else {}


def _imported(spec: str, options: dict[str, Any], pos: Positions, problems: list[Problem], at: Path) -> Adapter | None:
    try:
        return make_adapter(spec, resolve_import(spec), options)
    except EvalcliError as exc:
        named = next((name for name in options if f"'{name}' is not an option" in exc.message), None)
        where = at
        if named is not None:  # point at the option the target does not take
            where = ("target_options", named)
        elif "adapter" in exc.message and "adapter" in options:
            where = ("target_options", "adapter")
        elif exc.message.startswith("target_options for"):
            where = ("target_options",)
        hint = exc.hint
        form = next((form for prefix, form in HINT_FORMS.items() if spec.startswith(prefix)), None)
        if form is not None and at == ("target",):
            hint = (f"a target string is an import path; for a {form} target write a mapping, e.g. 'target: {{model: "
                    f"{spec.partition(':')[2]}}}'" if form == "model" else
                    f"a target string is an import path; for a {form} target write 'target: {{{form}: {{url: ...}}}}'")
        problems.append(pos.problem(where, exc.message, hint, key=where != at))
        return None
