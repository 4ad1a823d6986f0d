"""The session protocol and adapters' common ground: one small protocol over every kind of agent (docs/targets/index.md,
docs/datasets.md, docs/targets/frameworks.md).

A conversation opens a ``Session`` on the target's adapter, sends each user message with ``send``
(which returns only this turn's response messages, in OpenAI format) and closes it. The runner and
the conversation drivers know nothing else about the agent. Each adapter lives in its own module
and imports its framework only inside itself; its declaration (``registry.AdapterDeclaration``, found
through the ``evalcli.adapters`` entry points) recognises an agent object by the qualified class names
in its MRO, so recognising one never imports a framework the user did not import (docs/extending.md).
"""

from __future__ import annotations

import os
import random
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import field
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

from ..messages import Message
from ..records import record
from ..results import Guardrail, Interrupt

if TYPE_CHECKING:
    from ..llm import LLMClient

RESERVED_OPTIONS = ("memory", "adapter", "keep_checkpointer", "setup", "spans", "instrument")
"""``target_options`` keys evalcli reads itself; the rest go to the agent's call."""
DATASET_ONLY_OPTIONS = ("adapter", "keep_checkpointer", "instrument")
"""Options that hold for the whole run: an item's ``target_options`` may not set them."""


class ConfigProblem(ValueError):
    """A mistake in a target's mapping (``target: {http: ...}``); ``at`` is where, inside that target's settings."""

    def __init__(self, at: tuple[str | int, ...], message: str, hint: str = "") -> None:
        super().__init__(message)
        self.at = at
        self.message = message
        self.hint = hint


class TurnTimedOut(Exception):
    """evalcli's ``--turn-timeout`` expired (never the target's own ``TimeoutError``)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"the target did not answer within {seconds:g}s")
        self.seconds = seconds


class TurnFailed(Exception):
    """The agent's run ended with an exception; ``messages`` are those it produced before it (and
    ``output_retries`` the rejections of its output it had counted)."""

    def __init__(self, cause: BaseException, messages: list[Message], *, output_retries: int = 0) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.messages = messages
        self.output_retries = output_retries


class TurnRejected(Exception):
    """The turn cannot be sent as the dataset wrote it (a ``resume`` with no interrupt pending): the
    conversation's error, with this message."""


@record
class Reply:
    """One turn's answer: this turn's new response messages (assistant and tool, OpenAI format, docs/targets/index.md), and
    what else an agent reports about the turn (adapters that know more add it here)."""

    messages: list[Message]
    structured: Any = None
    """The turn's structured result as JSON (not text), when the agent has one (docs/targets/frameworks.md)."""
    interrupt: Interrupt | None = None
    """The interrupt the turn ended in: the agent waits for the user (LangGraph ``interrupt()``)."""
    resume: Any = None
    """The value this turn resumed a pending interrupt with (``None`` when it did not resume one)."""
    output_retries: int = 0
    """How many times the agent's output was rejected and asked for again on this turn."""
    guardrail: Guardrail | None = None
    """The guardrail that tripped on this turn (an outcome of the turn: the conversation goes on)."""


class Session(Protocol):
    """One conversation with the agent: its own thread, never shared with another conversation."""

    thread_id: str | None
    resource_id: str | None

    async def send(self, text: str, *, resume: Any = None) -> Reply:
        """Send one user message; return this turn's reply. With ``resume``, resume the interrupt the previous turn
        ended in with that value (``text`` is what the turn records as the user's input): only ever given to a
        session whose adapter ``resumes`` (loading refuses a ``resume`` turn for any other target)."""
        ...

    async def close(self) -> None:
        """Release what the conversation held (its history, session or checkpoint thread)."""
        ...


class Calls(Protocol):
    """How adapters call into user code: sync functions off the event loop, all under the turn timeout; and the
    run's LLM client, for targets that are a model."""

    async def call_sync(self, fn: Any, *args: Any, **kwargs: Any) -> Any: ...

    def call_async(self, awaitable: Any) -> Awaitable[Any]: ...

    def llm(self) -> LLMClient: ...


A = TypeVar("A", bound="Adapter")


class TurnSession(Generic[A]):
    """A session whose turn is its response messages, made by ``_turn`` under the conversation's ``calls`` (off
    the loop or not, always under the turn timeout); it keeps its adapter and its thread's ids."""

    def __init__(self, adapter: A, thread: Thread, calls: Calls) -> None:
        self.adapter = adapter
        self.thread_id = thread.thread
        self.resource_id = thread.resource
        self.calls = calls

    async def send(self, text: str, *, resume: Any = None) -> Reply:
        messages: list[Message] = await self.calls.call_async(self._turn(text))
        return Reply(messages)

    async def _turn(self, text: str) -> list[Message]:
        raise NotImplementedError


@record(frozen=True)
class ItemInfo:
    """What an adapter may read about the item whose conversation it opens (the ``http`` target's templates do)."""

    id: str
    metadata: dict[str, Any]


@record(frozen=True)
class Thread:
    """The memory scope of one conversation."""

    thread: str | None
    resource: str | None


_THREAD_IDS = random.Random()
"""Thread ids need to be unique, not secret: ``uuid4()`` reads the kernel's random source on every call,
which costs tens of microseconds per conversation on some machines. Seeded from the kernel once per process, and
again in a forked child, which would otherwise repeat its parent's ids (and a service keeping threads would take one
run's conversations for another's)."""


def _seed_thread_ids() -> None:
    _THREAD_IDS.seed(int.from_bytes(os.urandom(16), "big"))


_seed_thread_ids()
os.register_at_fork(after_in_child=_seed_thread_ids)


def new_thread_id() -> str:
    """A fresh thread id (a UUID)."""
    return uuid4_text(_THREAD_IDS.getrandbits(128))


_VARIANT_VERSION_CLEAR = ~((0xC000 << 48) | (0xF000 << 64))
_VARIANT_VERSION_SET = (0x8000 << 48) | (4 << 76)


def uuid4_text(bits: int) -> str:
    """``str(uuid.UUID(int=bits, version=4))`` without building the ``UUID``: the variant and version bits set, the
    hex digits grouped 8-4-4-4-12 (a conversation's thread id; docs/performance.md)."""
    text = "%032x" % ((bits & _VARIANT_VERSION_CLEAR) | _VARIANT_VERSION_SET)
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def pinned_resource(options: Mapping[str, Any]) -> str | None:
    """``target_options.memory.resource``, when given."""
    memory = options.get("memory")
    pinned = memory.get("resource") if isinstance(memory, dict) else None
    return str(pinned) if pinned else None


def fresh_thread(options: Mapping[str, Any]) -> Thread:
    """A new thread (a UUID); the resource is ``target_options.memory.resource`` if pinned, else the thread."""
    thread = new_thread_id()
    return Thread(thread, pinned_resource(options) or thread)


def caller_thread(options: Mapping[str, Any], *, multi_turn: bool) -> Thread:
    """The thread of a conversation of a target that keeps no thread of its own: a fresh one for a multi-turn item;
    for a single-turn one, ``target_options.memory``'s ``thread`` and ``resource`` (possibly none)."""
    if multi_turn:
        return fresh_thread(options)
    memory = options.get("memory")
    caller = memory if isinstance(memory, dict) else {}
    return Thread(caller.get("thread"), caller.get("resource"))


def merge_options(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` merged over ``base`` key by key: two mappings merge the same way, at every level; any other value
    of ``over`` replaces the one of ``base``. Neither is changed."""
    merged = dict(base)
    for key, value in over.items():
        below = merged.get(key)
        merged[key] = merge_options(below, value) if isinstance(below, dict) and isinstance(value, dict) else value
    return merged


@record(frozen=True)
class ConversationOptions:
    """What one conversation is opened with: its thread, and its options when they are not the dataset's own
    (an item's ``target_options`` merged over the dataset's, and what its ``setup`` returned)."""

    thread: Thread
    options: dict[str, Any] | None = None
    """The conversation's whole ``target_options`` (reserved keys included); ``None``: the dataset's, as prepared."""
    from_setup: frozenset[str] = field(default_factory=frozenset)
    """The option names ``setup`` returned (their values are Python objects, not YAML)."""


class Adapter(ABC):
    """Turns one agent object into sessions. A subclass names itself (``name``) and the run call its options go to
    (``run_call``), and may ``prepare`` what it holds for the whole run, take options of its own (``own_options``),
    declare what the run call takes (``accepted_options``) and check values (``check_values``)."""

    name: ClassVar[str]
    """What ``target_options.adapter`` calls it: the name of its ``AdapterDeclaration`` (docs/extending.md)."""
    run_call: ClassVar[str] = ""
    """The framework's run call, as option errors name it (``PydanticAI's agent.run``)."""
    own_options: ClassVar[tuple[str, ...]] = ()
    """Options this adapter reads itself rather than passing to the run call (``continue_with``, LangGraph's
    ``input``)."""
    speaks_http: ClassVar[bool] = False
    """Its turns are HTTP requests evalcli makes (``http``, ``mastra``): the runner imports aiohttp before the run."""
    resumes: ClassVar[bool] = False
    """Whether its agents can stop on an interrupt and be resumed (``send(text, resume=...)``)."""
    memory_hint: ClassVar[str] = "give the target a 'memory' attribute, e.g. evalcli.Memory"
    """What the memory warning tells a user whose target has no memory (docs/targets/index.md)."""
    tools_mockable: bool = True
    """Whether ``tools:`` can reach this target's tools (not so for a service's own, docs/hermetic.md)."""
    tools_hint: ClassVar[str] = "remove 'tools:'"
    """What the error about ``tools:`` on a target whose tools cannot be mocked says to do."""
    error_results_ran: bool = False
    """Whether an error result evalcli's plan did not answer comes from a tool that ran. Not for a framework agent:
    every tool it runs passes through the plan, so such a result is the framework refusing a call it could not run
    (an unknown tool, arguments that do not fit), and nothing ran (docs/hermetic.md)."""
    also_recognised: tuple[str, ...] = ()
    """The other adapters that recognise the agent object, as ``evalcli.adapters`` entry points declare them: a
    validation warning names them, since the first one runs it (docs/extending.md "Recognising an agent object")."""
    plan_sent: bool = False
    """Whether each turn sends the conversation's tool plan to a service that answers from it (``{{ tools }}``): a
    tool result it says came from a ``mock`` or ``replay`` is taken at its word (docs/hermetic.md)."""

    @property
    def outside_hint(self) -> str:
        """What to do about a tool the target ran outside evalcli's plan, as the conversation's error says it."""
        return ("evalcli's plan answers the agent's function tools; this one (a hosted, builtin or MCP tool) is not "
                "one of them")

    @property
    def reports_tool_calls(self) -> bool | None:
        """Whether the agent's tool calls reach the turn's record, in its replies or through evalcli's plan: ``True``
        (a framework agent reports them), ``False`` (never: a check that reads them cannot fail), ``None`` (unknown,
        e.g. a callable that may return messages)."""
        return True

    def interceptable(self, name: str) -> bool | None:
        """Whether evalcli's plan can answer the agent's tool ``name`` (``None``: not known; the framework adapters
        list the tools they control, and ``tools:`` naming another is a validation error)."""
        return None

    def uncontrolled(self) -> str | None:
        """Why evalcli can neither control the target's tools nor see them run, so ``--hermetic`` cannot keep it from
        running anything live (the run is refused); ``None`` when it can (docs/hermetic.md)."""
        return None

    def __init__(self, spec: str, obj: Any, options: dict[str, Any]) -> None:
        self.spec = spec
        self.obj = obj
        self.options = dict(options)
        self.call_options = call_options(options, self.own_options)
        self.prepare()

    def prepare(self) -> None:  # noqa: B027 - most adapters hold nothing but their options
        """Make what the adapter holds for the whole run (run options, a copied graph, ...)."""

    def thread(self, options: Mapping[str, Any], *, multi_turn: bool) -> Thread:
        """The thread of a new conversation with these options: a fresh one, its resource pinned by
        ``memory.resource`` (a framework agent gets its thread even for a single-turn item)."""
        return fresh_thread(options)

    @cached_property
    def accepted(self) -> frozenset[str]:
        """The option names this agent takes (its run call's, its adapter's own, evalcli's), read once."""
        return frozenset((*self.accepted_options(self.obj), *self.own_options, *RESERVED_OPTIONS))

    def returned_problems(self, returned: Mapping[str, Any]) -> list[str]:
        """What is wrong with the options a ``setup`` returned, as messages (empty when all are fine)."""
        problems = [f"'{name}' is set by evalcli and cannot come from a setup" for name in returned
                    if name in RESERVED_OPTIONS]
        if self.run_call or self.own_options:
            accepted = sorted(self.accepted - set(RESERVED_OPTIONS))
            problems += [f"'{name}' is not an option of {self.run_call or self.name} (it takes: "
                         f"{', '.join(accepted) or 'none'})" for name in returned
                         if name not in self.accepted and name not in RESERVED_OPTIONS]
        return problems

    def warnings(self, conversations: Sequence[tuple[Mapping[str, Any], bool]]) -> list[str]:
        """Validation warnings about what conversations will run with: ``(options, has_setup)`` per conversation."""
        return []

    def run_warnings(self) -> list[str]:
        """What the adapter noticed while the run played (said once, after it), as warning lines."""
        return []

    def run_counts(self) -> dict[str, int]:
        """What ``run_warnings`` would count so far, taken (counted from nothing again): a ``--workers`` worker sends
        its counts to the run's process, which adds them up (``add_run_counts``) and says each warning once, for the
        whole run (docs/performance.md#workers)."""
        return {}

    def add_run_counts(self, counts: Mapping[str, int]) -> None:
        """Add a worker's ``run_counts`` to this adapter's, as if its conversations had played here (an adapter that
        counts nothing has nothing to add)."""
        del counts

    def tool_schemas(self) -> dict[str, Any] | None:
        """The JSON schema of each of the agent's tools, by name, when the adapter can list them (``None``: it
        cannot; a schema may be ``None`` where the tool's is unknown)."""
        return None

    def mcp_servers(self) -> dict[str, list[str]] | None:
        """The agent's MCP servers and their tools' names, by server name, when the adapter can list them (``None``:
        it cannot; docs/hermetic.md, "MCP tools")."""
        return None

    def mcp_server_places(self, name: str) -> list[str]:
        """Where each distinct MCP server of the agent named ``name`` runs (its command or URL), as far as the adapter
        knows: two or more make ``{mcp: NAME}`` ambiguous."""
        return []

    def tool_names(self) -> list[str] | None:
        """The names of the agent's tools, when the adapter can list them (``None``: it cannot)."""
        tools = self.tool_schemas()
        return None if tools is None else sorted(tools)

    def tool_parameters(self, name: str) -> list[str] | None:
        """The parameter names of one of the agent's tools, when its schema is known."""
        schema = (self.tool_schemas() or {}).get(name)
        properties = schema.get("properties") if isinstance(schema, dict) else None
        return list(properties) if isinstance(properties, dict) else None

    @property
    def target_model(self) -> str | None:
        """The model a model target calls in every turn (``model:NAME``); ``None`` for every other target."""
        return None

    def control_tools(self) -> None:  # noqa: B027 - a target whose tools evalcli cannot reach has nothing to wrap
        """From now on, run the agent's tools through each conversation's tool plan (``evalcli.tools.CURRENT``), on a
        copy or an override, never by changing the user's object (docs/hermetic.md). Called once, before the run."""

    @property
    def has_memory(self) -> bool:
        """Framework agents always recall: evalcli gives each conversation its thread."""
        return True

    @classmethod
    def fits(cls, obj: Any) -> bool:
        """Whether ``obj`` is an agent this adapter takes when ``target_options.adapter`` names it, beyond those its
        declaration recognises by class name (``AdapterDeclaration.recognises``)."""
        return False

    @classmethod
    def accepted_options(cls, obj: Any) -> list[str]:
        """The option names the framework's run call takes (those evalcli sets itself left out)."""
        return []

    @classmethod
    def option_problems(cls, obj: Any, options: dict[str, Any]) -> list[str]:
        """Options the framework does not take, or whose values do not fit, as messages (empty when all are fine)."""
        accepted = [*cls.accepted_options(obj), *cls.own_options]
        problems = unknown_options(list(options), accepted, cls.run_call) if cls.run_call else []
        return problems or cls.value_problems(obj, options)

    @classmethod
    def value_problems(cls, obj: Any, options: dict[str, Any]) -> list[str]:
        """Options it takes whose values do not fit (checked once no option is unknown), as messages."""
        try:
            cls.check_values(obj, options)
        except (ValueError, TypeError) as exc:
            return [str(exc)]
        return []

    @classmethod  # noqa: B027 - most adapters take any value
    def check_values(cls, obj: Any, options: dict[str, Any]) -> None:
        """Raise ``ValueError`` or ``TypeError`` naming an option whose value does not fit."""

    @abstractmethod
    def open(self, *, multi_turn: bool, calls: Calls, conversation: ConversationOptions | None = None,
             item: ItemInfo | None = None) -> Session:
        """A session for one conversation (``multi_turn`` for ``inputs``/``turns``/``simulate`` items) of ``item``, on
        ``conversation``'s thread and options (``None``: a fresh thread, the dataset's options)."""

    async def aclose(self) -> None:  # noqa: B027 - most adapters hold nothing for the whole run
        """Release what the adapter holds for the whole run."""


def mro_names(obj: Any) -> list[str]:
    """``module.QualName`` of every class in the object's MRO."""
    return [f"{cls.__module__}.{cls.__qualname__}" for cls in type(obj).__mro__]


def options_hint(problems: Sequence[str]) -> str:
    """The hint of an options error: remove unknown names, else fix the values (their messages say how)."""
    if any("is not an option of" in p or "takes no options" in p for p in problems):
        return "remove the options the agent does not take"
    return "fix the option as the message says"


def call_options(options: Mapping[str, Any], own: Sequence[str] = ()) -> dict[str, Any]:
    """The options that go to the agent's run call: all but evalcli's own and the adapter's."""
    return {k: v for k, v in options.items() if k not in RESERVED_OPTIONS and k not in own}


def unknown_options(given: Sequence[str], accepted: Sequence[str], framework: str) -> list[str]:
    """For adapters' ``option_problems``: one message per option a framework's run call does not take, naming those it
    does (and the one meant, when a name is close to one)."""
    import difflib

    problems = []
    for name in given:
        if name in accepted or name in RESERVED_OPTIONS:
            continue
        close = difflib.get_close_matches(name, list(accepted), n=1, cutoff=0.75)
        meant = f" (did you mean '{close[0]}'?)" if close else ""
        problems.append(f"'{name}' is not an option of {framework}{meant} (it takes: {', '.join(accepted) or 'none'})")
    return problems
