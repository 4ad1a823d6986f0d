"""One conversation's tool plan (docs/hermetic.md): what answers each tool call, and the record of every call.

The conversation puts its ``ToolPlan`` in the ``CURRENT`` context variable around each turn; every wrapped tool
(``evalcli.Agent``'s, the framework adapters', ``@evalcli.tool`` functions) asks it through ``acall``/``call``.
The variable belongs to the conversation's task (and is copied into the threads that run its sync code and, by
``threads``, into those its turn starts), so two conversations running at once never see each other's plan, and the
agent object is never changed. Outside a conversation (``CURRENT`` is ``None``) a wrapped tool is a plain call.

A conversation of a dataset that does not control tools still has a plan, one that only watches (``controls`` is
false): every call that passes through it runs live and is recorded, so the turn's record holds the calls evalcli
saw (docs/hermetic.md, "Tool calls evalcli saw").
"""

from __future__ import annotations

import asyncio
import contextvars
import re
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import field
from typing import TYPE_CHECKING, Any, TypeVar

from ..records import record
from .spec import ALL, Answer, Mock, ToolsConfig, canonical, jsonable, matches, tape_arguments

if TYPE_CHECKING:  # seeded faults are imported by the first call they may hit (docs/performance.md)
    from .faults import Draw, Faults

T = TypeVar("T")

CURRENT: contextvars.ContextVar[ToolPlan | None] = contextvars.ContextVar("evalcli_tool_plan", default=None)
"""The plan of the conversation whose turn is running (``None``: no plan, every tool runs as it is)."""

LEASE: contextvars.ContextVar[int | None] = contextvars.ContextVar("evalcli_tool_plan_lease", default=None)
"""In a thread (or a pool's task) that carries a plan (``threads``): the plan's ``epoch`` when it was started, so the
plan holds only until the turn that started it ends (``None``: the conversation's own code, never stale)."""

_HERMETIC_RUNS = [0]
"""How many ``--hermetic`` runs this process is playing: a tool call tied to no conversation is then refused."""


class MockedToolError(Exception):
    """A mocked or replayed tool call that fails (``raises``): adapters report it as their framework reports a
    tool's error."""


class ToolRefused(MockedToolError):
    """A call that may not run (``unmocked: error``, ``--hermetic``): the conversation's error, named by the plan."""


@record
class ToolCall:
    """One tool call of a conversation, as the record (and a tape) keeps it."""

    turn: int
    index: int
    """Its place among the conversation's calls (0-based)."""
    tool: str
    arguments: dict[str, Any]
    source: str
    result: Any = None
    """What the tool returned (made JSON only when a tape is written)."""
    error: str | None = None
    call_id: str | None = None
    refused: bool = False
    """No mock or tape answered it and it did not run (``--hermetic``, ``unmocked: error``): never on a tape."""
    fault: str | None = None
    """The fault ``faults:`` injected (``error``, ``timeout``, ``malformed``): its source is then ``fault``. A tape
    records the world, faults are put on top of it: a failure or timeout (which never ran) is never on a tape, a
    malformed answer is, as ``world``."""
    world: Any = None
    """A malformed answer's whole answer, as the tool, the mock or the tape gave it: what a tape records."""

    def tape_line(self, identity: str) -> dict[str, Any]:
        line = {"identity": identity, "turn": self.turn, "call": self.index, "tool": self.tool,
                "arguments": self.arguments}
        if self.error is not None:
            line["error"] = self.error
        else:
            line["result"] = jsonable(self.world if self.fault == "malformed" else self.result)
        return line


@record
class Recorded:
    """A call read from a tape: its tool, canonical arguments, and result or error."""

    tool: str
    arguments: str
    result: Any = None
    error: str | None = None


@record
class ToolPlan:
    """What answers one conversation's tool calls: the dataset's and item's ``tools:`` (a turn's own over them,
    per tool), then its tape, then ``unmocked``; and every call made, in order."""

    base: ToolsConfig | None = None
    turns: Mapping[int, ToolsConfig] = field(default_factory=dict)
    unmocked: str = "live"
    hermetic: bool = False
    tape: list[Recorded] | None = None
    """The recorded calls of this conversation (``None``: nothing to replay)."""
    controls: bool = True
    """Whether the run controls tools (``tools:``, ``unmocked: error``, ``--hermetic``, ``--record-tools``); a plan
    that does not only watches: every call runs live and is recorded, and results get no ``source``."""
    identity: str = ""
    """The conversation's identity (docs/history.md): with the seed, what decides its faults."""
    turn: int = 0
    epoch: int = 0
    """Counts the turns begun and the conversation's end: a thread started in one turn holds the plan only while
    that turn runs (``current_plan``)."""
    calls: list[ToolCall] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    """Why calls were refused: the conversation's error once its turn ends."""
    _answered: dict[int, int] = field(default_factory=dict)
    _used: set[int] = field(default_factory=set)
    _tool_calls: dict[str, int] = field(default_factory=dict)
    _server_answered: dict[tuple[str, str], int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    """Tools of one turn may run on several threads at once (a framework's executor)."""

    def begin(self, turn: int) -> None:
        """A turn of the conversation starts: the threads earlier turns started no longer carry this plan."""
        with self._lock:
            self.turn, self.epoch = turn, self.epoch + 1

    def close(self) -> None:
        """The conversation is over: no thread it started carries its plan any more."""
        with self._lock:
            self.epoch += 1

    def watching(self, turn: int) -> bool:
        """Whether the plan only watched ``turn``: it controls no tool and saw none called. Such a turn's messages are
        recorded as the target reported them, and none of its calls can be outside the plan (``outside`` is ``None``
        for every tool of a plan that controls nothing): nothing to label, add or explain (docs/performance.md)."""
        return not self.controls and (not self.calls or not any(call.turn == turn for call in self.calls))

    def as_json(self) -> dict[str, Any]:
        """The plan of this turn as JSON, for a service that honours it (``{{ tools }}`` in an http body)."""
        config = self.config()
        mocks = {name: [_mock_json(m) for m in entries] for name, entries in (config.mocks if config else {}).items()}
        return {"mocks": mocks, "unmocked": self.unmocked, "hermetic": self.hermetic}

    def config(self) -> ToolsConfig | None:
        own = self.turns.get(self.turn)
        return own.over(self.base) if own is not None else self.base

    def mocks(self, tool: str) -> tuple[Mock, ...]:
        """The mocks of this turn for a tool, found by its name as the model sees it (``same_tool``)."""
        config = self.config()
        if config is None:
            return ()
        found = config.mocks.get(tool)
        if found is None:
            found = next((m for name, m in config.mocks.items() if same_tool(name, tool)), ())
        return found

    def mocked(self, tool: str) -> bool:
        """Whether this turn's ``tools:`` names the tool."""
        return bool(self.mocks(tool))

    def outside(self, tool: str, *, sent: bool = False) -> str | None:
        """Why a call of ``tool`` that the turn's messages show but that never passed through this plan (it ran in
        the agent itself) is the conversation's error, or ``None`` when it may run so (docs/hermetic.md): under
        ``--hermetic`` nothing runs live; a tool ``tools:`` mocks was meant to be answered; ``unmocked: error``
        allows no call that no mock answers. ``sent``: the plan was sent to the service that ran the tool, which
        answers for its mocks and ``unmocked`` itself; only ``--hermetic`` asks it to say where a result came from."""
        if self.hermetic and sent:
            return f"--hermetic: the service did not say its result of {tool} came from the plan it was sent"
        if self.hermetic:
            return f"--hermetic: the tool {tool} ran live, outside evalcli's control (no mock, tape or @evalcli.tool " \
                   "answered it)"
        if sent:
            return None
        if self.mocked(tool):
            return f"tools.{tool}: the mock never answered: the target's reply shows {tool} ran, but the call did " \
                   "not pass through evalcli"
        if self.unmocked == "error":
            return f"unmocked: error: the tool {tool} ran live, outside evalcli's control (no mock answered it)"
        return None

    def faults(self, tool: str) -> Faults | None:
        """The ``faults:`` of this turn for a tool (by ``same_tool``), else those of ``'*'``."""
        config = self.config()
        if config is None or not config.faults:
            return None
        found = config.faults.get(tool)
        if found is None:
            found = next((f for name, f in config.faults.items() if name != ALL and same_tool(name, tool)), None)
        return found if found is not None else config.faults.get(ALL)

    def fault(self, tool: str) -> tuple[Faults, Draw] | None:
        """What the tool's faults do to this call, the conversation's nth of that tool (``faults.draw``)."""
        with self._lock:
            nth = self._tool_calls.get(tool, 0)
            self._tool_calls[tool] = nth + 1
            found = self.faults(tool)
            if found is None:
                return None
            from .faults import draw

            return found, draw(found, self.identity, tool, nth)

    def decide(self, tool: str, arguments: Mapping[str, Any], server: str | None = None) -> tuple[str, Answer | None]:
        """Where this call's answer comes from: ``("mock" | "replay", answer)``, ``("live", None)``, or
        ``("refused", None)`` (the reason added to ``refusals``). ``server``: the MCP server the tool is one of."""
        with self._lock:
            return self._decide(tool, arguments, server)

    def _decide(self, tool: str, arguments: Mapping[str, Any], server: str | None = None) -> tuple[str, Answer | None]:
        entries = self.mocks(tool)
        chosen = next((m for m in entries if m.when is not None and matches(m.when, arguments)), None)
        chosen = chosen or next((m for m in entries if m.when is None), None)
        if chosen is not None:
            nth = self._answered.get(id(chosen), 0)
            self._answered[id(chosen)] = nth + 1
            return "mock", chosen.answer(nth)
        described = f"{tool}({canonical(dict(arguments))})"
        config = self.config()
        whole = config.servers.get(server) if config is not None and server is not None else None
        if whole is not None:
            found = self._from_server_tape(whole.calls, tool, arguments)
            if found is not None:
                return "replay", Answer(found.result, found.error)
            self.refusals.append(f"tools: the MCP server {server} is mocked from {whole.from_tape}, which has no answer "
                                 f"for {described}")
            return "refused", None
        recorded = self._replayed(tool, arguments)
        if recorded is not None:
            return "replay", Answer(recorded.result, recorded.error)
        if self.hermetic:
            missed = f" (and the tape has no answer for it{self._tape_miss(tool)})" if self.tape is not None else ""
            self.refusals.append(f"--hermetic: the tool call {described} has no mock{missed}")
            return "refused", None
        if self.unmocked == "error":
            missed = f" or recorded answer{self._tape_miss(tool)}" if self.tape is not None else ""
            self.refusals.append(f"unmocked: error: the tool call {described} has no mock{missed}")
            return "refused", None
        return "live", None

    def _tape_miss(self, tool: str) -> str:
        """Why the tape did not answer, for the person reading the refusal (docs/hermetic.md, "Tapes"): it holds no
        call of this conversation (an edited item without an ``id`` is another conversation), or the calls of this
        tool it has left (the nearest arguments to compare with), or none of this tool at all."""
        if not self.tape:
            if self.identity.startswith("id:"):
                return f": it has no tool call of this conversation ({self.identity}) at all"
            return (f": it has no recording of this conversation ({self.identity}); an item without an id is known "
                    "by its content, so an edited one is another conversation: record it again, or give items ids")
        left = [f"{r.tool}({r.arguments})" for i, r in enumerate(self.tape)
                if i not in self._used and same_tool(r.tool, tool)]
        if not left:
            return f": every recording of {tool} in this conversation has answered a call already" \
                if any(same_tool(r.tool, tool) for r in self.tape) else f": it has no call of {tool} in this conversation"
        shown = "; ".join(left[:3]) + (f"; and {len(left) - 3} more" if len(left) > 3 else "")
        return f": this conversation's recordings not yet replayed are {shown}"

    def _replayed(self, tool: str, arguments: Mapping[str, Any]) -> Recorded | None:
        if self.tape is None:
            return None
        config = self.config()
        exact = config is None or config.match == "exact"
        wanted = tape_arguments(arguments)  # as the tape holds them: secrets redacted
        for i, recorded in enumerate(self.tape):
            if i not in self._used and same_tool(recorded.tool, tool) and (not exact or recorded.arguments == wanted):
                self._used.add(i)
                return recorded
        return None

    def _from_server_tape(self, calls: Mapping[str, list[Recorded]], tool: str,
                          arguments: Mapping[str, Any]) -> Recorded | None:
        """A whole server's answer: this conversation's recording of the same call (the nth for the nth), else the
        first recording of it in any conversation."""
        wanted = tape_arguments(arguments)
        own = [r for r in calls.get(self.identity, ()) if same_tool(r.tool, tool) and r.arguments == wanted]
        nth = self._server_answered.get((tool, wanted), 0)
        self._server_answered[(tool, wanted)] = nth + 1
        if nth < len(own):
            return own[nth]
        return next((r for recorded in calls.values() for r in recorded
                     if same_tool(r.tool, tool) and r.arguments == wanted), None)

    def record(self, tool: str, arguments: Mapping[str, Any], source: str, *, result: Any = None,
               error: str | None = None, call_id: str | None = None, refused: bool = False,
               fault: str | None = None, world: Any = None) -> None:
        with self._lock:
            self.calls.append(ToolCall(self.turn, len(self.calls), tool, dict(arguments), "fault" if fault else source,
                                       None if error is not None else result, error, call_id, refused, fault, world))


_SEPARATORS = re.compile(r"[^0-9a-z]+")


def same_tool(a: Any, b: Any) -> bool:
    """Whether two names are the same tool: equal, or equal as a model sees a tool's name, case and separators aside
    (a framework that shows the model ``get_weather`` for a tool whose display name is ``Get Weather``)."""
    if a == b:
        return True
    if not isinstance(a, str) or not isinstance(b, str):
        return False
    return _SEPARATORS.sub("_", a.casefold()).strip("_") == _SEPARATORS.sub("_", b.casefold()).strip("_")


def current_plan() -> ToolPlan | None:
    """The plan a tool call made here is under: the current conversation's, unless this is a thread (or a pool's
    task) that outlived the turn that started it (a worker serving every conversation): evalcli cannot tell which
    conversation such a call belongs to, so it is under none (docs/hermetic.md, "Tools on other threads")."""
    plan = CURRENT.get()
    lease = LEASE.get()
    if plan is not None and lease is not None and lease != plan.epoch:
        return None
    return plan


class HermeticRun:
    """While a ``--hermetic`` run plays (a context manager; nests), a tool call tied to no conversation is refused
    rather than run live (``unattributed``)."""

    def __init__(self, hermetic: bool) -> None:
        self.hermetic = hermetic

    def __enter__(self) -> None:
        if self.hermetic:
            _HERMETIC_RUNS[0] += 1

    def __exit__(self, *exc: object) -> None:
        if self.hermetic:
            _HERMETIC_RUNS[0] -= 1


def unattributed(tool: str, arguments: Mapping[str, Any]) -> None:
    """A call under no plan: a plain call, except while a ``--hermetic`` run plays, where it is refused (it would run
    live, and no conversation would see it)."""
    if _HERMETIC_RUNS[0] > 0:
        raise ToolRefused(f"--hermetic: the tool call {tool}({canonical(dict(arguments))}) ran on a thread that is tied "
                          "to no conversation (one started before the run, or one that outlived the turn that started "
                          "it): submit the tool to a ThreadPoolExecutor or start its thread within the turn "
                          "(docs/hermetic.md)")


def _mock_json(mock: Mock) -> dict[str, Any]:
    answers: list[dict[str, Any]] = [{"returns": a.returns} if a.raises is None else {"raises": a.raises}
                                     for a in mock.answers]
    for entry, answer in zip(answers, mock.answers, strict=True):
        if answer.delay:
            entry["delay"] = answer.delay
    out: dict[str, Any] = {"when": dict(mock.when)} if mock.when is not None else {}
    return {**out, **(answers[0] if len(answers) == 1 else {"sequence": answers})}


async def acall(tool: str, arguments: Mapping[str, Any], live: Callable[[], Awaitable[T]], *,
                call_id: str | None = None, shape: Callable[[Any], Any] | None = None,
                record_as: Callable[[Any], Any] | None = None, server: str | None = None) -> T | Any:
    """One async tool call under the current plan: the live function (``live()``, its result recorded as
    ``record_as`` reads it), or the plan's answer (made what the framework expects of a tool's output by ``shape``).
    A mocked or replayed ``raises``, or an injected fault's failure, raises ``MockedToolError``; a refused call
    ``ToolRefused``. ``server``: the MCP server the tool is one of (a whole server may be mocked). Without a plan:
    ``live()``."""
    plan = current_plan()
    if plan is None:
        unattributed(tool, arguments)
        return await live()
    injected = plan.fault(tool)
    if injected is not None and injected[1].latency:
        await asyncio.sleep(injected[1].latency)
    fail_if_faulted(plan, tool, arguments, injected, call_id)
    source, answer = plan.decide(tool, arguments, server)
    spoiled = injected is not None and injected[1].malformed
    if source == "live":
        return await _live_async(plan, tool, arguments, live, call_id, record_as, spoiled)
    if source == "refused":
        plan.record(tool, arguments, "refused", error=plan.refusals[-1], call_id=call_id, refused=True)
        raise ToolRefused(plan.refusals[-1])
    assert answer is not None
    wait, late = answer_wait(plan, tool, arguments, injected, answer, call_id)
    if wait:
        await asyncio.sleep(wait)
    if late is not None:
        raise late
    value = answered(plan, tool, arguments, source, answer, call_id, spoiled)
    return value if shape is None or spoiled else shape(value)


def call(tool: str, arguments: Mapping[str, Any], live: Callable[[], T], *, call_id: str | None = None,
         shape: Callable[[Any], Any] | None = None, record_as: Callable[[Any], Any] | None = None) -> T | Any:
    """``acall`` for a sync tool (a ``delay`` or an injected latency sleeps the thread)."""
    plan = current_plan()
    if plan is None:
        unattributed(tool, arguments)
        return live()
    injected = plan.fault(tool)
    if injected is not None and injected[1].latency:
        time.sleep(injected[1].latency)
    fail_if_faulted(plan, tool, arguments, injected, call_id)
    source, answer = plan.decide(tool, arguments)
    spoiled = injected is not None and injected[1].malformed
    if source == "live":
        token = CURRENT.set(None)  # a wrapped tool the live one calls is a plain call, recorded once
        try:
            value = live()
        except Exception as exc:
            plan.record(tool, arguments, "live", error=str(exc) or type(exc).__name__, call_id=call_id)
            raise
        finally:
            CURRENT.reset(token)
        return live_result(plan, tool, arguments, value, call_id, record_as, spoiled)
    if source == "refused":
        plan.record(tool, arguments, "refused", error=plan.refusals[-1], call_id=call_id, refused=True)
        raise ToolRefused(plan.refusals[-1])
    assert answer is not None
    wait, late = answer_wait(plan, tool, arguments, injected, answer, call_id)
    if wait:
        time.sleep(wait)
    if late is not None:
        raise late
    value = answered(plan, tool, arguments, source, answer, call_id, spoiled)
    return value if shape is None or spoiled else shape(value)


def answer_wait(plan: ToolPlan, tool: str, arguments: Mapping[str, Any], injected: tuple[Faults, Draw] | None,
                answer: Answer, call_id: str | None) -> tuple[float, MockedToolError | None]:
    """How long a mock's or a tape's answer takes (its ``delay``), and the timeout it meets: a ``delay`` that, on top
    of the injected latency, passes the faults' ``timeout`` fails the call as timed out once the timeout is reached
    (recorded as the fault ``timeout``), as a slow service's answer is lost (docs/hermetic.md, "Faults")."""
    if injected is None or injected[0].timeout is None or not answer.delay:
        return answer.delay, None
    faults, found = injected
    assert faults.timeout is not None
    left = max(faults.timeout - found.latency, 0.0)
    if answer.delay <= left:
        return answer.delay, None
    from .faults import Draw, fault_message

    message = fault_message(tool, Draw(timed_out=True), faults.timeout)
    plan.record(tool, arguments, "fault", error=message, call_id=call_id, fault="timeout")
    return left, MockedToolError(message)


def fail_if_faulted(plan: ToolPlan, tool: str, arguments: Mapping[str, Any], injected: tuple[Faults, Draw] | None,
                    call_id: str | None) -> None:
    """An injected failure or timeout: the call never reaches the tool (nor a mock's sequence, nor the tape)."""
    if injected is None:
        return
    faults, found = injected
    if found.error or found.timed_out:
        from .faults import fault_message

        message = fault_message(tool, found, faults.timeout)
        plan.record(tool, arguments, "fault", error=message, call_id=call_id, fault=found.fault)
        raise MockedToolError(message)


async def _live_async(plan: ToolPlan, tool: str, arguments: Mapping[str, Any], live: Callable[[], Awaitable[T]],
                      call_id: str | None, record_as: Callable[[Any], Any] | None, spoiled: bool) -> T | str:
    token = CURRENT.set(None)  # a wrapped tool the live one calls is a plain call, recorded once
    try:
        value = await live()
    except Exception as exc:
        plan.record(tool, arguments, "live", error=str(exc) or type(exc).__name__, call_id=call_id)
        raise
    finally:
        CURRENT.reset(token)
    return live_result(plan, tool, arguments, value, call_id, record_as, spoiled)


def live_result(plan: ToolPlan, tool: str, arguments: Mapping[str, Any], value: T, call_id: str | None,
                record_as: Callable[[Any], Any] | None, spoiled: bool) -> T | str:
    """A live call's result, recorded (as ``record_as`` makes it); ``spoiled`` (an injected malformed answer): the
    result cut off, recorded as the fault with the world's answer beside it (every adapter's, ADK's plugin too)."""
    recorded = value if record_as is None else record_as(value)
    if spoiled:
        from .faults import malformed

        broken = malformed(recorded)
        plan.record(tool, arguments, "fault", result=broken, call_id=call_id, fault="malformed", world=recorded)
        return broken
    plan.record(tool, arguments, "live", result=recorded, call_id=call_id)
    return value


def answered(plan: ToolPlan, tool: str, arguments: Mapping[str, Any], source: str, answer: Answer,
             call_id: str | None, spoiled: bool = False) -> Any:
    """A mock's or a tape's ``answer``, recorded under ``source``: its value, its ``raises`` raised, or (``spoiled``)
    its value cut off as an injected malformed answer (every adapter's, ADK's plugin too)."""
    if answer.raises is not None:
        plan.record(tool, arguments, source, error=answer.raises, call_id=call_id)
        raise MockedToolError(answer.raises)
    if spoiled:
        from .faults import malformed

        broken = malformed(answer.returns)
        plan.record(tool, arguments, source, result=broken, call_id=call_id, fault="malformed", world=answer.returns)
        return broken
    plan.record(tool, arguments, source, result=answer.returns, call_id=call_id)
    return answer.returns
