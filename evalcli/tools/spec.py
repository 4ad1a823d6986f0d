"""What a dataset says about its tools (docs/hermetic.md), as data: mocks by tool, how unmocked calls go, and the tape a
conversation replays. Matching a call against a mock's ``when`` and the canonical JSON of arguments are each one
function here, used everywhere."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import field
from typing import Any

from ..patterns import values_match
from ..records import record
from ..secrets import redactor

ALL = "*"
"""The ``tools:`` key whose ``faults`` hold for every tool that has none of its own (docs/hermetic.md, "Faults")."""

UNMOCKED = ("live", "error")
"""``unmocked:``: a call no mock answers runs the real tool, or is the conversation's error."""
MATCHES = ("exact", "name")
"""``tools.match``: how a replayed call finds its recorded answer."""
SOURCES = ("live", "mock", "replay", "fault")
"""Where a recorded tool call's result came from (``fault``: a fault ``faults:`` injected, docs/hermetic.md)."""
RESERVED = ("replay", "match")
"""Keys of a ``tools:`` mapping that are not tool names."""


@record(frozen=True)
class Answer:
    """One answer a mock gives: a value (``returns``) or an error (``raises``), after ``delay`` seconds."""

    returns: Any = None
    raises: str | None = None
    delay: float = 0.0


@record(frozen=True)
class Mock:
    """One entry of a tool's mocks: the calls it answers (``when``: a subset of the arguments; ``None``: any
    call, a fallback), and its answers (one, or a ``sequence``: the nth call it answers gets the nth, the last
    repeats)."""

    answers: tuple[Answer, ...]
    when: Mapping[str, Any] | None = None
    path: tuple[str | int, ...] = field(default=(), compare=False)
    """Where it is written, inside its ``tools:`` block (for errors that point at it)."""

    def answer(self, nth: int) -> Answer:
        """The answer to the ``nth`` call (0-based) this entry answers."""
        return self.answers[min(nth, len(self.answers) - 1)]


@record(frozen=True)
class ServerMock:
    """``{mcp: NAME, from_tape: PATH}``: every call of the MCP server ``NAME``'s tools answered from a tape, never
    live (docs/hermetic.md, "MCP tools")."""

    server: str
    from_tape: str
    calls: Mapping[str, list[Any]] = field(default_factory=dict, compare=False, repr=False)
    """The tape's recorded calls by conversation identity, read when the dataset is loaded."""
    digest: str | None = None


@record(frozen=True)
class ToolsConfig:
    """A ``tools:`` block (dataset, item or turn): mocks by tool name, and a tape to replay."""

    mocks: Mapping[str, tuple[Mock, ...]] = field(default_factory=dict)
    replay: str | None = None
    """The tape's path (resolved against the dataset's folder)."""
    match: str = "exact"
    tape: Mapping[str, list[Any]] | None = field(default=None, compare=False, repr=False)
    """The tape's recorded calls by conversation identity, read when the dataset is loaded."""
    tape_digest: str | None = None
    """The digest of the tape's bytes as they were read (what a resume compares)."""
    faults: Mapping[str, Any] = field(default_factory=dict)
    """``faults:`` by tool name (``'*'``: every tool without its own), as ``evalcli.tools.faults.Faults``."""
    servers: Mapping[str, ServerMock] = field(default_factory=dict)
    """Whole MCP servers mocked from tapes, by server name."""

    def over(self, base: ToolsConfig | None) -> ToolsConfig:
        """This block over ``base``: per tool, this block's mocks replace the base's; the replay of this block if
        it names one, else the base's."""
        if base is None:
            return self
        mocks = {**base.mocks, **self.mocks}
        chosen = self if self.replay is not None else base
        return ToolsConfig(mocks, chosen.replay, chosen.match, chosen.tape, chosen.tape_digest,
                           {**base.faults, **self.faults}, {**base.servers, **self.servers})

    def resolved(self) -> dict[str, Any]:
        """This block as the resolved configuration a resume compares holds it (docs/reliability.md): each tool's
        mocks, and the tape it replays by path, ``match`` and content (so an edited tape is noticed)."""
        return {"mocks": {name: repr(entries) for name, entries in self.mocks.items()}, "replay": self.replay,
                "match": self.match, "tape": self.tape_digest,
                **({"faults": {name: repr(f) for name, f in self.faults.items()}} if self.faults else {}),
                **({"servers": {name: [m.from_tape, m.digest] for name, m in self.servers.items()}}
                   if self.servers else {})}


def matches(when: Mapping[str, Any] | None, arguments: Mapping[str, Any]) -> bool:
    """Whether a call's arguments match a mock's ``when``: every key of ``when`` is an argument whose value matches
    (``evalcli.patterns.values_match``, the rule every check uses: equal as JSON values, or, for a ``"/.../"``
    string, a value whose text the regular expression finds). No ``when`` matches every call."""
    if when is None:
        return True
    return all(key in arguments and values_match(wanted, arguments[key]) for key, wanted in when.items())


def canonical(value: Any) -> str:
    """The canonical JSON of a value (keys sorted, no spaces): what ``exact`` replay compares arguments by."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def tape_arguments(arguments: Mapping[str, Any]) -> str:
    """A call's arguments as a tape holds them and ``exact`` replay compares them: canonical JSON with every secret
    redacted (docs/hermetic.md, "Tapes"), so a tape holds no secret and still answers the call that had one. Numbers
    compare by value, as everywhere a value is matched (``evalcli.patterns``): ``1.0`` is written ``1``, so a model that
    sent ``{"n": 1}`` when recording and ``{"n": 1.0}`` when replaying (or a tape edited by hand) still matches."""
    plain = _numbers_by_value(dict(arguments))
    text = canonical(plain)
    redact = redactor()
    return canonical(redact.value(plain)) if redact.holds_secret(text) else text


def _numbers_by_value(value: Any) -> Any:
    """``value`` with every whole float (``1.0``, not ``inf`` nor ``nan``) as its int, at any depth."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _numbers_by_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_numbers_by_value(item) for item in value]
    return value


def jsonable(value: Any) -> Any:
    """A tool's result as JSON data (what a tape stores): JSON values as they are, anything else by its text."""
    try:
        return json.loads(json.dumps(value, default=_dumped))
    except (TypeError, ValueError):
        return str(value)


def _dumped(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    return str(value)


def as_text(value: Any) -> str:
    """A mocked or replayed result as a tool's text output: a string as it is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(jsonable(value), ensure_ascii=False)
