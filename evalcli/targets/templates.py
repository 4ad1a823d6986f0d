"""The ``http`` target's templates (docs/targets/http.md): a JSON body whose strings are jinja2 templates, run in the sandbox.

A string that is exactly one expression (``"{{ history }}"``) takes that value's JSON type; any other string
renders to a string; numbers, booleans and ``null`` are sent as written. Templates are compiled once, when
the dataset is loaded: an undefined name is a mistake found there (with the place it was written), never
an empty string sent at run time. Undefined attributes at run time (``{{ metadata.missing }}``) raise, and
so are that conversation's error.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..records import record
from .session import ConfigProblem

if TYPE_CHECKING:
    import jinja2

NAMES = ("input", "thread", "resource", "item_id", "turn", "metadata", "history", "tools")
"""What a template may use: this turn's user message, the conversation's thread and resource, the item's id, the
turn's index (from 0), the item's metadata, the conversation's messages before this turn (user ones too), and its
tool plan as JSON (``tools``: the mocks of this turn, ``unmocked``, ``hermetic``; docs/hermetic.md)."""
MEMORY_NAMES = frozenset({"thread", "resource", "history"})
"""A request that carries one of these lets the agent tell one conversation's turns from another's."""

Location = tuple[str | int, ...]


_environment: jinja2.Environment | None = None


def environment() -> jinja2.Environment:
    """The one sandboxed environment (strict about undefined values, no autoescaping: the output is JSON, not HTML)."""
    global _environment
    if _environment is None:
        from jinja2 import StrictUndefined
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        _environment = ImmutableSandboxedEnvironment(undefined=StrictUndefined, autoescape=False,
                                                     keep_trailing_newline=True)
        # a template sees its variables and nothing else: jinja2's globals (range, namespace, lipsum, dict,
        # cycler, joiner) are names it did not define, found at validation like any other (docs/targets/index.md)
        _environment.globals.clear()
    return _environment


@record(frozen=True)
class Compiled:
    """One template string: ``value`` evaluates a single expression (keeping its type), ``text`` renders a string."""

    names: frozenset[str]
    value: Callable[[dict[str, Any]], Any] | None = None
    text: Callable[[dict[str, Any]], str] | None = None

    def render(self, context: dict[str, Any]) -> Any:
        if self.value is not None:
            return self.value(context)
        assert self.text is not None
        return self.text(context)


def compile_string(source: str, at: Location) -> Compiled | str:
    """A template string compiled, or the string itself when it holds no template syntax."""
    if "{{" not in source and "{%" not in source and "{#" not in source:
        return source
    import jinja2
    from jinja2 import meta, nodes

    env = environment()
    try:
        tree = env.parse(source)
    except jinja2.TemplateSyntaxError as exc:
        raise ConfigProblem(at, f"template does not parse: {exc.message}",
                              "write jinja2 syntax, e.g. \"{{ input }}\"") from None
    names = frozenset(meta.find_undeclared_variables(tree)
                      | {n.name for n in tree.find_all(nodes.Name) if n.name == "self" and n.ctx == "load"})
    unknown = sorted(names - set(NAMES))
    if unknown:
        raise ConfigProblem(at, f"template uses {', '.join(repr(n) for n in unknown)}, which "
                                  f"{'is' if len(unknown) == 1 else 'are'} not defined",
                              f"templates may use: {', '.join(NAMES)}")
    body = tree.body
    single = (len(body) == 1 and isinstance(body[0], nodes.Output) and len(body[0].nodes) == 1
              and not isinstance(body[0].nodes[0], nodes.TemplateData))
    stripped = source.strip()
    if single and source == stripped and stripped.startswith("{{") and stripped.endswith("}}"):
        node = body[0].nodes[0]  # type: ignore[attr-defined]
        if isinstance(node, nodes.Name) and node.ctx == "load":
            name = node.name  # "{{ input }}": the value itself, without a template context per turn
            return Compiled(names, value=lambda context: context[name])
        expression = env.compile_expression(stripped[2:-2], undefined_to_none=False)
        return Compiled(names, value=lambda context: _plain(expression(**context)))
    template = env.from_string(tree)
    return Compiled(names, text=lambda context: template.render(context))


def _plain(value: Any) -> Any:
    from jinja2 import Undefined

    if isinstance(value, Undefined):
        value._fail_with_undefined_error()
    return value


@record(frozen=True)
class Body:
    """A JSON value with template strings in it, compiled; ``render`` gives this turn's value."""

    value: Any
    names: frozenset[str]

    @classmethod
    def compile(cls, value: Any, at: Location = ()) -> Body:
        names: set[str] = set()

        def walk(node: Any, where: Location) -> Any:
            if isinstance(node, str):
                compiled = compile_string(node, where)
                if isinstance(compiled, Compiled):
                    names.update(compiled.names)
                return compiled
            if isinstance(node, dict):
                return {key: walk(child, (*where, key)) for key, child in node.items()}
            if isinstance(node, list):
                return [walk(child, (*where, i)) for i, child in enumerate(node)]
            return node

        return cls(walk(value, at), frozenset(names))

    def render(self, context: dict[str, Any]) -> Any:
        return _render(self.value, context)


def _render(node: Any, context: dict[str, Any]) -> Any:
    if isinstance(node, Compiled):
        return node.render(context)
    if isinstance(node, dict):
        return {key: _render(child, context) for key, child in node.items()}
    if isinstance(node, list):
        return [_render(child, context) for child in node]
    return node


def _iso(value: Any) -> str:
    """YAML's dates and timestamps in a body as ISO 8601 strings (docs/targets/index.md); any other value JSON cannot hold is a
    ``TypeError`` naming its type."""
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def to_json(value: Any) -> bytes:
    """A rendered body as JSON bytes (dates as ISO 8601); a value JSON cannot hold is a ``TypeError`` naming its
    type."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_iso).encode()
    except (TypeError, ValueError) as exc:
        raise TypeError(f"the request body is not JSON: {exc}") from None
