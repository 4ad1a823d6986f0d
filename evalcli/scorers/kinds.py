"""Scorer kinds, each declared once (docs/reference/scorers.md), found through the ``evalcli.scorers`` entry points.

A ``Kind`` is a name, a strict pydantic model of its arguments, its main argument (what
``{kind: ARG}`` sets), a one-line summary, whether it needs a model, how its default id reads and
how to build a scorer from validated arguments. Parsing YAML references, building scorers,
``evalcli scorers``, ``evalcli schema`` and the docs' scorer table all read these declarations.
Every kind comes from an entry point naming a ``Kind`` or a list of them: evalcli's own (``builtin``)
as those of installed packages (docs/extending.md); adding a built-in kind is one ``Kind(...)`` in its
module's list and its name in ``builtin.TABLE``, which makes evalcli's own kinds known by name: a built-in kind's
module is imported when a kind it declares is first resolved (docs/performance.md "Start-up and finish"). A name
(or alias) is never declared twice: a package cannot replace a built-in kind.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel

from ..plugins import SCORERS, Entry, Names, built, entries, load_path, own_models
from ..records import record
from ..results import Outcome
from . import builtin
from .base import ScorerRun
from .naming import id_arg, id_value

if TYPE_CHECKING:
    from ..llm import LLMClient

Group = Literal["check", "judge", "custom"]
GROUP_ORDER: tuple[Group, ...] = ("check", "judge", "custom")
"""The groups of kinds, in the order listings show them."""

class Scorer:
    """What every scorer kind builds (docs/scorers.md): ``score`` a run. A scorer that never waits on anything (a
    check) is ``immediate`` and also answers ``score_now``, which the conversation then calls in turn, sparing a
    task and an event-loop round trip per score."""

    immediate: ClassVar[bool] = False
    """Whether ``score_now`` answers (without waiting on anything)."""

    async def score(self, run: ScorerRun) -> Outcome:
        """The run's outcome (a score with its reason, not scorable, or an error)."""
        raise NotImplementedError

    def score_now(self, run: ScorerRun) -> Outcome:
        """``score`` without waiting: only for an ``immediate`` scorer."""
        raise NotImplementedError(f"{type(self).__name__} is not immediate: await its score()")


@record
class BuildContext:
    """What building a scorer may need: its id, the run's LLM client (made on first use), custom functions."""

    scorer_id: str
    llm: Callable[[], LLMClient]
    """Returns the run's LLM client (created on first call)."""
    use_cache: bool = True
    imported: dict[str, Any] = field(default_factory=dict)
    """What the dataset's import paths name (custom scorers' functions), by import path."""


@record(frozen=True)
class Kind:
    """One scorer kind: everything that parsing, building, listing and documenting it needs."""

    name: str
    args: type[BaseModel]
    summary: str
    """One line for ``evalcli scorers`` and the docs' table."""
    build: Callable[[Any, BuildContext], Scorer]
    """Validated arguments (an instance of ``args``) + context -> a scorer."""
    group: Group = "check"
    main: str | None = None
    """The argument that ``{name: ARG}`` sets; ``None`` when the kind takes no arguments."""
    needs_model: bool = False
    aliases: tuple[str, ...] = ()
    """Other names accepted in YAML (``judge`` for ``multi_turn_judge``)."""
    prepare: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    """Adjust raw arguments before validation (e.g. a model default from the environment)."""
    default_id: Callable[[dict[str, Any]], str] | None = None
    """The id an inline reference gets; default: ``name(main, other=non-default, ...)``."""
    example: str = ""
    """A short YAML example of an inline reference, for docs."""
    prompt_version: str | None = None
    """A judge's prompt version (part of its cache key), recorded with each calibration; ``None`` for checks."""
    imports: str | None = None
    """The argument that holds an import path (``module:attribute``), imported when the dataset is validated (a
    custom scorer's ``function``); ``BuildContext.imported`` has what it names."""

    def make_id(self, values: dict[str, Any]) -> str:
        if self.default_id is not None:
            return self.default_id(values)
        if self.main is None:
            return self.name
        parts = [id_arg(values[self.key(self.main)])]
        for name, model_field in self.args.model_fields.items():
            key = model_field.alias or name
            if name != self.main and values.get(key) != model_field.default:
                parts.append(f"{key}={id_value(values[key])}")
        return f"{self.name}({', '.join(parts)})"

    def key(self, field_name: str) -> str:
        """How an argument is written in YAML: its alias if it has one (``schema``), else its name."""
        return self.args.model_fields[field_name].alias or field_name

    def argument_docs(self) -> list[tuple[str, str, str]]:
        """(name, default or 'required', description) of each argument, in declaration order."""
        rows = []
        for key, model_field in self.args.model_fields.items():
            default = "required" if model_field.is_required() else _json_default(model_field.get_default(
                call_default_factory=True))
            rows.append((model_field.alias or key, default, (model_field.description or "").strip()))
        return rows

    def schema(self) -> dict[str, Any]:
        """JSON Schema of the inline reference ``{name: ARG}`` (ARG: the main argument or the arguments)."""
        arguments = inline_refs(built(self.args).model_json_schema())  # evalcli's own built without plugins
        arguments.pop("title", None)
        options: list[dict[str, Any]] = [arguments]
        if self.main is not None:
            options.insert(0, arguments["properties"][self.key(self.main)])
        else:
            options.append({"type": "null"})
        value = options[0] if len(options) == 1 else {"anyOf": options}
        return {"type": "object", "properties": {name: value for name in (self.name, *self.aliases)},
                "minProperties": 1, "maxProperties": 1, "additionalProperties": False,
                "description": self.summary}


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with every local ``$ref`` replaced by its definition and ``$defs`` dropped, so it can be
    embedded in another document (the dataset schema) without dangling references."""
    defs = schema.get("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                target = {k: v for k, v in defs[ref.removeprefix("#/$defs/")].items() if k != "title"}
                return resolve({**target, **{k: v for k, v in node.items() if k != "$ref"}})
            return {k: resolve(v) for k, v in node.items() if k != "$defs"}
        if isinstance(node, list):
            return [resolve(v) for v in node]
        return node

    return resolve(schema)  # type: ignore[no-any-return]


def _json_default(value: Any) -> str:
    return "none" if value is None else id_value(value)


WRAPPER_KEYS = ("threshold", "id", "min", "max", "calibrated")
"""Keys written beside a kind that belong to a wrapper around it, ``{scorer: REF, threshold: T, id: NAME}`` (``min``
and ``max`` inside its threshold; ``calibrated`` on a gate, docs/judges.md#calibrated-gates)."""
RESERVED = ("scorer", *WRAPPER_KEYS)
"""Names no scorer kind can have: a dataset reads them as the entry's own keys, so such a kind could never be used."""

_KINDS: dict[str, Kind] = {}
_ALIASES: dict[str, str] = {}
_ORIGINS: dict[str, Entry] = {}
_ORDER: list[str] = []
"""Every kind's name, in declaration order (evalcli's own first)."""
_PENDING: dict[str, str] = {}
"""A built-in kind known by name only: the ``module:attribute`` declaring it, imported when it is first resolved."""
_loaded = False


def _add(kind: Kind, entry: Entry, names: Names) -> None:
    """Take one declared kind; a name or alias declared before is refused, never replaced."""
    _claim(kind.name, kind.aliases, entry, names)
    _KINDS[kind.name] = kind


def _claim(name: str, aliases: tuple[str, ...], entry: Entry, names: Names) -> None:
    names.claim([name, *aliases], entry)
    for each in (name, *aliases):
        _ALIASES[each] = name
    _ORIGINS[name] = entry
    _ORDER.append(name)


def _declared(entry: Entry) -> Sequence[Kind]:
    """The kinds an entry point names: a ``Kind`` or a list (or tuple) of them, each one usable."""
    return _checked(entry, entry.load())


def _checked(entry: Entry, value: Any) -> Sequence[Kind]:
    """``value``, what ``entry`` declares, as a list of kinds, each one usable."""
    kinds = [value] if isinstance(value, Kind) else value if isinstance(value, list | tuple) else None
    if kinds is None or not all(isinstance(kind, Kind) for kind in kinds):
        wrong = type(value).__name__ if kinds is None else next(type(k).__name__ for k in kinds if not isinstance(k, Kind))
        raise entry.error(f"names a {wrong}, not an evalcli.scorers.Kind or a list of them")
    for kind in kinds:
        if not (isinstance(kind.args, type) and issubclass(kind.args, BaseModel)):
            raise entry.error(f"declares the scorer kind '{kind.name}' with args={kind.args!r}, not a pydantic model class")
        if kind.group not in GROUP_ORDER:
            raise entry.error(f"declares the scorer kind '{kind.name}' in the group {kind.group!r}, not one of "
                              f"{', '.join(GROUP_ORDER)}")
        reserved = [name for name in (kind.name, *kind.aliases) if name in RESERVED]
        if reserved:
            raise entry.error(f"declares the scorer kind '{kind.name}' with the name '{reserved[0]}', which a dataset "
                              f"reads as a key of the entry itself ({', '.join(RESERVED)}), so no dataset could use it")
        if kind.main is not None and kind.main not in kind.args.model_fields:
            raise entry.error(f"declares the scorer kind '{kind.name}' with main={kind.main!r}, which is not a field of "
                              f"{kind.args.__name__}")
    return kinds


def _builtin_table(entry: Entry) -> tuple[tuple[str, tuple[str, ...], str], ...] | None:
    """The names of the kinds one of evalcli's own entry points declares (``builtin.TABLE``), known without importing
    them; ``None`` for a package's entry point."""
    module, _, attribute = entry.value.partition(":")
    if not entry.builtin or module.strip() != builtin.__name__:
        return None
    return builtin.TABLE.get(attribute.strip())


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    names = Names("scorer kind")
    try:
        for entry in entries(SCORERS):
            table = _builtin_table(entry)
            if table is None:
                for kind in _declared(entry):
                    _add(kind, entry, names)
                continue
            for name, aliases, path in table:
                _claim(name, aliases, entry, names)
                _PENDING[name] = path
    except BaseException:
        _loaded = False  # asked again, every kind is read again (and the mistake found again)
        for known in (_KINDS, _ALIASES, _ORIGINS, _PENDING):
            known.clear()
        _ORDER.clear()
        raise


def _kind(name: str) -> Kind:
    """The kind called ``name`` (canonical), its module imported if it is a built-in one not resolved before."""
    kind = _KINDS.get(name)
    if kind is not None:
        return kind
    path = _PENDING[name]
    entry = _ORIGINS[name]
    with own_models():  # evalcli's own kinds' modules: their argument models built without plugins
        value = load_path(path, entry)
    for each in _checked(entry, value):
        if _PENDING.get(each.name) == path:
            _KINDS[each.name] = each
            del _PENDING[each.name]
    if name not in _KINDS:
        raise entry.error(f"does not declare the scorer kind '{name}' in {path}")
    return _KINDS[name]


def origin(kind: Kind) -> Entry:
    """The entry point that declared ``kind`` (its package: ``evalcli`` for a built-in one)."""
    _load()
    return _ORIGINS[kind.name]


def find(name: str) -> Kind | None:
    """The kind called ``name`` (or one of its aliases), if any."""
    _load()
    canonical = _ALIASES.get(name)
    return _kind(canonical) if canonical is not None else None


def all_kinds(builtin_only: bool = False) -> list[Kind]:
    """Every kind: checks, then judges, then custom, each in declaration order (evalcli's own first); with
    ``builtin_only``, evalcli's own only (the reference page lists those)."""
    _load()
    kinds = [_kind(name) for name in _ORDER if not builtin_only or _ORIGINS[name].builtin]
    return sorted(kinds, key=lambda k: GROUP_ORDER.index(k.group))


def names() -> list[str]:
    """Every name a reference may use (kinds and aliases)."""
    _load()
    return [name for kind in all_kinds() for name in (kind.name, *kind.aliases)]


def no_argument_kinds() -> list[str]:
    """Kinds usable as a bare string (``used_no_tools``): those without arguments."""
    return [k.name for k in all_kinds() if k.main is None and not any(
        f.is_required() for f in k.args.model_fields.values())]
