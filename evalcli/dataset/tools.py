"""The ``tools:`` blocks of a dataset (docs/hermetic.md), read with file:line errors and checked against the target: every
tool named must be one the agent has (where its adapter can list them), every ``when`` key one of the tool's
parameters (where its schema is known), and a target whose tools run in a service (``http``, ``mastra``) takes
``tools:`` only when its body template sends them (``{{ tools }}``). ``tool_warnings`` says what would pass or answer
nothing for want of seeing the target's tool calls (docs/hermetic.md)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path as FsPath
from typing import TYPE_CHECKING, Any

from ..errors import Problem
from ..otel import may_emit_spans
from ..patterns import pattern_problems
from ..scorers import ScorerSpec
from ..targets import Adapter
from ..tools import MATCHES, RESERVED, UNMOCKED, Answer, Mock, ToolsConfig
from ..tools.spec import ALL, ServerMock
from .items import Item
from .located import Located
from .yamlsrc import Path, Positions, did_you_mean
from .yamlvalues import typed

if TYPE_CHECKING:  # seeded faults are imported by a dataset that gives some (docs/performance.md)
    from ..tools.faults import Faults

ENTRY_KEYS = ("when", "returns", "raises", "sequence", "delay", "faults")
FAULT_KEYS = ("error_rate", "malformed_rate", "latency", "timeout", "seed")
FAULTS_EXAMPLE = "write e.g. 'faults: {error_rate: 0.2, latency: {p50: 0.2, p99: 2}, malformed_rate: 0.05, seed: 7}'"
ANSWER_KEYS = ("returns", "raises", "delay")
EXAMPLE = "write e.g. 'get_weather: {returns: {temp: 12}}', or a list of '- when: {city: London}' entries"


def parse_tools(raw: Any, at: Path, pos: Positions, label: str, problems: list[Problem]) -> ToolsConfig | None:
    """A ``tools:`` mapping as a ``ToolsConfig`` (``None``, with problems added, when it is wrong)."""
    before = len(problems)
    if not isinstance(raw, dict):
        problems.append(pos.problem(at, f"{label}: 'tools' must be a mapping of tool names to mocks", EXAMPLE))
        return None
    mocks: dict[str, tuple[Mock, ...]] = {}
    faults: dict[str, Faults] = {}
    servers: dict[str, ServerMock] = {}
    for name, value in raw.items():
        if name in RESERVED:
            continue
        if isinstance(value, dict) and "mcp" in value:
            server = _server_mock(value, (*at, name), pos, f"{label}: tools.{name}", problems)
            if server is not None:
                servers[server.server] = server
            continue
        found = _tool_faults(name, value, at, pos, label, problems)
        if found is not None:
            faults[str(name)] = found
        if name == ALL or (isinstance(value, dict) and set(value) <= {"faults"}):
            continue  # faults only: the tool's answers come from elsewhere (a tape, the live tool)
        entries = value if isinstance(value, list) else [value]
        if isinstance(value, list) and not value:
            problems.append(pos.problem((*at, name), f"{label}: tools.{name} has no entries", EXAMPLE))
            continue
        parsed = [_entry(e, (*at, name, i) if isinstance(value, list) else (*at, name), pos,
                         f"{label}: tools.{name}" + (f"[{i}]" if isinstance(value, list) else ""), problems)
                  for i, e in enumerate(entries)]
        # only the first entry without `when` ever answers (docs/hermetic.md, "Which entry answers"): a later one
        # would be a mock the dataset writes and no call ever gets
        catch_all = [i for i, m in enumerate(parsed) if m is not None and m.when is None]
        problems.extend(pos.problem((*at, name, i), f"{label}: tools.{name}[{i}] is never used: tools.{name}"
                                                    f"[{catch_all[0]}] has no 'when' either, and answers every call "
                                                    "no 'when' matches", "give this entry a 'when', or remove it")
                        for i in catch_all[1:])
        first: dict[str, int] = {}  # and one whose `when` an earlier entry already has
        for i, m in enumerate(parsed):
            key = None if m is None or m.when is None else json.dumps(m.when, sort_keys=True, default=str)
            if key is not None and first.setdefault(key, i) != i:
                problems.append(pos.problem((*at, name, i), f"{label}: tools.{name}[{i}] is never used: tools.{name}"
                                                            f"[{first[key]}] has the same 'when' and answers first",
                                            "merge the two entries (a 'sequence' answers the nth call), or remove it"))
        mocks[str(name)] = tuple(m for m in parsed if m is not None)
    replay, match = raw.get("replay"), raw.get("match", "exact")
    if "match" in raw and match not in MATCHES:
        problems.append(pos.problem((*at, "match"), f"{label}: tools.match is one of {', '.join(MATCHES)}, not "
                                                    f"{match!r}", "write 'match: exact' (same tool and arguments) or "
                                                                  "'match: name' (same tool, in order)"))
    if "match" in raw and "replay" not in raw:
        problems.append(pos.problem((*at, "match"), f"{label}: tools.match needs tools.replay",
                                    "name the tape: 'replay: tapes/weather.tape.jsonl'", key=True))
    if replay is not None and (not isinstance(replay, str) or not replay.strip()):
        problems.append(pos.problem((*at, "replay"), f"{label}: tools.replay is the path of a tape",
                                    "write 'replay: tapes/weather.tape.jsonl' (relative to the dataset file)"))
    if len(problems) > before:
        return None
    return ToolsConfig(mocks, replay, str(match), faults=faults, servers=servers)


def _server_mock(raw: dict[str, Any], at: Path, pos: Positions, label: str,
                 problems: list[Problem]) -> ServerMock | None:
    """``{mcp: NAME, from_tape: PATH}``: a whole MCP server answered from a tape (docs/hermetic.md, "MCP tools")."""
    example = "write e.g. '{mcp: weather, from_tape: tapes/weather.tape.jsonl}'"
    if set(raw) != {"mcp", "from_tape"}:
        problems.append(pos.problem(at, f"{label}: a whole MCP server's mock is {{mcp: NAME, from_tape: PATH}} (it has "
                                        f"{', '.join(map(str, raw))})", example))
        return None
    if not all(isinstance(raw[k], str) and raw[k].strip() for k in ("mcp", "from_tape")):
        problems.append(pos.problem(at, f"{label}: 'mcp' is the server's name and 'from_tape' the path of a tape",
                                    example))
        return None
    return ServerMock(raw["mcp"], raw["from_tape"])


def _tool_faults(name: Any, value: Any, at: Path, pos: Positions, label: str,
                 problems: list[Problem]) -> Faults | None:
    """The ``faults:`` of one tool (in its mapping, or in one entry of its list), or of ``'*'`` (docs/hermetic.md)."""
    if name == ALL and not (isinstance(value, dict) and set(value) == {"faults"}):
        problems.append(pos.problem((*at, name), f"{label}: tools.'*' holds only 'faults' (the faults every tool "
                                                 "without its own gets)",
                                    "write e.g. \"'*': {faults: {error_rate: 0.2, seed: 7}}\"", key=True))
        return None
    where = [((*at, name), value)] if isinstance(value, dict) else \
        [((*at, name, i), e) for i, e in enumerate(value) if isinstance(e, dict)] if isinstance(value, list) else []
    given = [(path, entry["faults"]) for path, entry in where if "faults" in entry]
    if len(given) > 1:
        problems.append(pos.problem((*given[1][0], "faults"), f"{label}: tools.{name}: 'faults' is given twice",
                                    "give the tool's faults once: they hold for every call of the tool", key=True))
    return _faults(given[0][1], (*given[0][0], "faults"), pos, f"{label}: tools.{name}.faults", problems) \
        if given else None


def _faults(raw: Any, at: Path, pos: Positions, label: str, problems: list[Problem]) -> Faults | None:
    if not isinstance(raw, dict):
        problems.append(pos.problem(at, f"{label} is a mapping of {', '.join(FAULT_KEYS)}", FAULTS_EXAMPLE))
        return None
    before = len(problems)
    for key in raw:
        if key not in FAULT_KEYS:
            problems.append(pos.problem((*at, key), f"{label}: unknown key '{key}'{did_you_mean(str(key), FAULT_KEYS)}",
                                        f"faults have {', '.join(FAULT_KEYS)}", key=True))

    def number(key: str, value: Any, low: float, high: float | None, what: str) -> float:
        if not finite(value) or value < low or (high is not None and value > high):
            problems.append(pos.problem((*at, key), f"{label}: '{key}' is {what}, not {value!r}", FAULTS_EXAMPLE))
            return 0.0
        return float(value)

    rate = "a share of the calls (a number from 0 to 1)"
    error_rate = number("error_rate", raw.get("error_rate", 0), 0, 1, rate)
    malformed_rate = number("malformed_rate", raw.get("malformed_rate", 0), 0, 1, rate)
    p50 = p99 = 0.0
    latency = raw.get("latency")
    if latency is not None:
        if not isinstance(latency, dict) or set(latency) - {"p50", "p99"} or "p50" not in latency:
            problems.append(pos.problem((*at, "latency"), f"{label}: 'latency' is {{p50: SECONDS, p99: SECONDS}}",
                                        "write e.g. 'latency: {p50: 0.2, p99: 2}' (the median and the 99th "
                                        "percentile)"))
        else:
            p50 = number("latency", latency["p50"], 0, None, "seconds (p50 >= 0)")
            p99 = number("latency", latency.get("p99", p50), p50, None, "seconds, at least p50")
            if p50 == 0 and p99 > 0:
                problems.append(pos.problem((*at, "latency"), f"{label}: 'latency' with p99 {p99:g}s needs a p50 above "
                                                              "0 (the median of the calls' waits)",
                                            "write e.g. 'latency: {p50: 0.05, p99: 2}', or leave latency out"))
    timeout = raw.get("timeout")
    if timeout is not None and (not finite(timeout) or timeout <= 0):
        problems.append(pos.problem((*at, "timeout"), f"{label}: 'timeout' is seconds (> 0), not {timeout!r}",
                                    "write e.g. 'timeout: 1.5'"))
    seed = raw.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        problems.append(pos.problem((*at, "seed"), f"{label}: 'seed' is a whole number, not {seed!r}",
                                    "write e.g. 'seed: 7'"))
    if len(problems) > before:
        return None
    from ..tools.faults import Faults

    return Faults(error_rate, malformed_rate, p50, p99, None if timeout is None else float(timeout), int(seed))


def _entry(raw: Any, at: Path, pos: Positions, label: str, problems: list[Problem]) -> Mock | None:
    if not isinstance(raw, dict):
        problems.append(pos.problem(at, f"{label} must be a mapping with 'returns', 'raises' or 'sequence'", EXAMPLE))
        return None
    unknown = [k for k in raw if k not in ENTRY_KEYS]
    for key in unknown:
        problems.append(pos.problem((*at, key), f"{label}: unknown key '{key}'{did_you_mean(str(key), ENTRY_KEYS)}",
                                    f"an entry has {', '.join(ENTRY_KEYS)}", key=True))
    given = [k for k in ("returns", "raises", "sequence") if k in raw]
    if len(given) != 1:
        said = "none" if not given else " and ".join(given)
        problems.append(pos.problem(at, f"{label} needs exactly one of 'returns', 'raises' or 'sequence' (it has "
                                        f"{said})", EXAMPLE))
        return None
    when = raw.get("when")
    if "when" in raw and not isinstance(when, dict):
        problems.append(pos.problem((*at, "when"), f"{label}: 'when' is a mapping of argument names to values",
                                    "write 'when: {city: London}' (a string '/.../' is a regular expression)"))
        return None
    for key, value in (when or {}).items():
        for problem in pattern_problems(value, f"when.{key}"):
            problems.append(pos.problem((*at, "when", key), f"{label}: {problem}",
                                        "fix the regular expression, or write the value without the enclosing '/'"))
    delay = _delay(raw, at, pos, label, problems)
    if "sequence" in raw:
        steps = raw["sequence"]
        if not isinstance(steps, list) or not steps:
            problems.append(pos.problem((*at, "sequence"), f"{label}: 'sequence' is a non-empty list of answers",
                                        "write 'sequence: [{returns: page 1}, {raises: rate limited}]'"))
            return None
        answers = [_answer(s, (*at, "sequence", i), pos, f"{label}.sequence[{i}]", problems, delay)
                   for i, s in enumerate(steps)]
        if unknown or any(a is None for a in answers) or delay is None:
            return None
        return Mock(tuple(a for a in answers if a is not None), when, at)
    answer = _answer({k: raw[k] for k in ANSWER_KEYS if k in raw}, at, pos, label, problems, 0.0)
    if unknown or answer is None:
        return None
    return Mock((answer,), when, at)


def _answer(raw: Any, at: Path, pos: Positions, label: str, problems: list[Problem],
            default_delay: float | None) -> Answer | None:
    if not isinstance(raw, dict) or len([k for k in ("returns", "raises") if k in raw]) != 1 or \
            any(k not in ANSWER_KEYS for k in raw):
        problems.append(pos.problem(at, f"{label} must be {{returns: VALUE}} or {{raises: MESSAGE}} (with an "
                                        "optional delay)", "write e.g. '{returns: page 1}' or '{raises: rate limited}'"))
        return None
    if "raises" in raw and (not isinstance(raw["raises"], str) or not raw["raises"].strip()):
        problems.append(pos.problem((*at, "raises"), f"{label}: 'raises' is the error's message",
                                    "write e.g. 'raises: no seats left'"))
        return None
    delay = _delay(raw, at, pos, label, problems) if "delay" in raw else default_delay
    if delay is None:
        return None
    return Answer(raw.get("returns"), raw.get("raises"), delay)


def _delay(raw: dict[str, Any], at: Path, pos: Positions, label: str, problems: list[Problem]) -> float | None:
    value = typed(raw.get("delay", 0))
    if not finite(value) or value < 0:
        problems.append(pos.problem((*at, "delay"), f"{label}: 'delay' is seconds (a number >= 0), not {value!r}",
                                    "write e.g. 'delay: 2.5'"))
        return None
    return float(value)


def finite(value: Any) -> bool:
    """Whether a YAML value is a finite number (not a bool, ``.nan`` or ``.inf``): what every rate and every seconds
    value of ``tools:`` must be (a ``.inf`` latency or delay would wait forever, a ``.nan`` rate never fires)."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def resolve_tape(config: ToolsConfig | None, at: Path, pos: Positions, label: str, folder: FsPath,
                 problems: list[Problem]) -> ToolsConfig | None:
    """The block with its tape's path resolved against the dataset's folder (a problem when there is no such file)."""
    if config is not None and config.servers:
        config = replace(config, servers={name: _server_tape(mock, at, pos, label, folder, problems)
                                          for name, mock in config.servers.items()})
    if config is None or config.replay is None:
        return config
    path = folder / config.replay
    if path.is_dir():
        problems.append(pos.problem((*at, "replay"), f"{label}: tape '{config.replay}' is a folder, not a tape",
                                    f"name the tape file in it, e.g. '{FsPath(config.replay) / 'NAME.tape.jsonl'}' "
                                    "(--record-tools DIR writes DIR/<dataset stem>.tape.jsonl)"))
        return config
    if not path.is_file():
        problems.append(pos.problem((*at, "replay"), f"{label}: tape '{config.replay}' not found",
                                    "record one with 'evalcli run DATASET --record-tools DIR', and give its path "
                                    "relative to the dataset file"))
        return config
    from ..tools import TapeError, read_tape  # only a dataset that replays a tape reads one

    try:
        tape = read_tape(path)
    except TapeError as exc:
        problems.append(Problem(exc.where(path), f"{label}: tape '{config.replay}': "
                                                                                  f"{exc.message}",
                                "record it again with --record-tools DIR"))
        return config
    return replace(config, replay=str(path), tape=tape.calls, tape_digest=tape.digest)


def _server_tape(mock: ServerMock, at: Path, pos: Positions, label: str, folder: FsPath,
                 problems: list[Problem]) -> ServerMock:
    from ..tools import TapeError, read_tape

    path = folder / mock.from_tape
    try:
        tape = read_tape(path)
    except TapeError as exc:
        where = exc.where(path) if exc.line else pos.where(at)
        problems.append(Problem(where, f"{label}: the MCP server {mock.server}'s tape '{mock.from_tape}': "
                                       f"{exc.message}", "record it with 'evalcli run DATASET --record-tools DIR'"))
        return mock
    return replace(mock, from_tape=str(path), calls=tape.calls, digest=tape.digest)


def parse_unmocked(raw: Any, at: Path, pos: Positions, label: str, problems: list[Problem]) -> str | None:
    """``unmocked: live|error``."""
    if raw not in UNMOCKED:
        problems.append(pos.problem(at, f"{label}: 'unmocked' is one of {', '.join(UNMOCKED)}, not {raw!r}",
                                    "write 'unmocked: live' (run the real tool) or 'unmocked: error' (a call no mock "
                                    "answers is the conversation's error)"))
        return None
    return str(raw)


def target_problems(config: ToolsConfig, at: Path, pos: Positions, label: str, adapter: Adapter) -> list[Problem]:
    """What is wrong with a ``tools:`` block for this target: a service's tools cannot be mocked (unless its body
    sends ``{{ tools }}``); a tool the agent does not have; a ``when`` key that is not one of its parameters."""
    if not adapter.tools_mockable:
        return [pos.problem(at, f"{label}: the {adapter.name} target's tools run in the service, so 'tools:' cannot "
                                "mock them", adapter.tools_hint, key=True)]
    problems = []
    known = adapter.tool_names()
    servers = adapter.mcp_servers()
    for name in config.servers:
        if servers is None or name not in servers:
            listed = sorted(servers or ())
            problems.append(pos.problem(at, f"{label}: tools: the agent has no MCP server '{name}'"
                                            f"{did_you_mean(name, listed)}",
                                        f"its MCP servers are: {', '.join(listed) or 'none'}"))
        elif len(places := adapter.mcp_server_places(name)) > 1:
            problems.append(pos.problem(at, f"{label}: tools: {len(places)} of the agent's MCP servers are named "
                                            f"'{name}' ({'; '.join(places)}): {{mcp: {name}}} would answer all of them",
                                        "give each server a name of its own (evalcli.Agent: 'name' in its mcp entry; "
                                        "a framework's toolset: its id or name)"))
    named = {**{name: () for name in config.faults if name != ALL}, **config.mocks}
    for name, mocks in named.items():
        if known is not None and name not in known:
            problems.append(pos.problem((*at, name), f"{label}: tools.{name}: the agent has no tool '{name}'"
                                                     f"{did_you_mean(name, known)}",
                                        f"its tools are: {', '.join(sorted(known)) or 'none'}", key=True))
            continue
        parameters = adapter.tool_parameters(name)
        if parameters is None:
            continue
        for mock in mocks:
            for key in mock.when or {}:
                if key not in parameters:
                    message = (f"{label}: tools.{name}: 'when' names '{key}', which is not a parameter of {name}"
                               f"{did_you_mean(str(key), parameters)}")
                    problems.append(pos.problem((*mock.path, "when", key), message,
                                                f"its parameters are: {', '.join(parameters) or 'none'}", key=True))
    return problems


def checked_tools(tools: ToolsConfig | None, items: list[Item], located: Located,
                   adapter: Any, folder: FsPath, pos: Positions,
                   problems: list[Problem]) -> tuple[ToolsConfig | None, list[Item]]:
    """Every ``tools:`` block with its tape found, checked against the target (docs/hermetic.md)."""
    def check(config: ToolsConfig | None, at: Path, where: Positions, label: str) -> ToolsConfig | None:
        config = resolve_tape(config, at, where, label, folder, problems)
        if config is not None and adapter is not None:
            problems.extend(target_problems(config, at, where, label, adapter))
        return config

    tools = check(tools, ("tools",), pos, "dataset")
    out = []
    for item in items:
        if item.tools is None and not any(turn.tools is not None for turn in item.turns or ()):
            out.append(item)
            continue
        _, where, at = located[item.index]
        label = f"item {item.index} ({item.id})"
        own = check(item.tools, (*at, "tools"), where, label)
        turns = [replace(turn, tools=check(turn.tools, (*at, "turns", t, "tools"), where, f"{label} turn {t}"))
                 if turn.tools is not None else turn for t, turn in enumerate(item.turns or ())]
        out.append(replace(item, tools=own, turns=turns if item.turns is not None else None))
    return tools, out


UNFAILING = ("did_not_call", "no_tool_errors", "used_no_tools", "max_tool_calls")
"""Checks that pass when there are no tool calls: on a target that never reports any, they cannot fail."""


def tool_warnings(adapter: Adapter, specs: Iterable[ScorerSpec], tools: ToolsConfig | None,
                  items: list[Item]) -> list[str]:
    """What ``validate`` warns about the dataset's tools (docs/hermetic.md): a check that cannot fail because the
    target never reports its tool calls (nor do spans, docs/otel.md); a tool ``tools:`` mocks that evalcli cannot
    intercept (a plain callable's function no ``@evalcli.tool`` names), whose call is then the conversation's error,
    never a silent live one."""
    warnings = []
    if adapter.reports_tool_calls is False and not may_emit_spans():
        for spec_id in dict.fromkeys(s.id for s in specs if s.kind in UNFAILING):
            warnings.append(f"{spec_id}: the target {adapter.spec} never reports its tool calls (its replies are text, "
                            "and no @evalcli.tool call passes through evalcli), so this check cannot fail; decorate "
                            "its tools with @evalcli.tool, or return the turn's messages")
    blocks = [tools, *(i.tools for i in items), *(t.tools for i in items for t in i.turns or ())]
    named = dict.fromkeys(name for block in blocks if block is not None for name in block.mocks)
    for name in named:
        if adapter.interceptable(name) is False:
            warnings.append(f"tools.{name}: evalcli cannot intercept {name}: no @evalcli.tool named '{name}' was defined "
                            f"when the target {adapter.spec} was imported, so the mock answers nothing; a reply that "
                            "shows the tool ran is the conversation's error (decorate the tool function with "
                            "@evalcli.tool)")
    return warnings
