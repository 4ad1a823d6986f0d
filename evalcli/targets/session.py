"""The session protocol and adapters' common ground: one small protocol over every kind of agent (SPEC §2, §3, §12).

A conversation opens a ``Session`` on the target's adapter, sends each user message with ``send``
(which returns only this turn's response messages, in OpenAI format) and closes it. The runner and
the conversation drivers know nothing else about the agent. Each adapter lives in its own module
here and imports its framework only inside itself; an agent object is recognised by the qualified
class names in its MRO, so recognising one never imports a framework the user did not import.
"""

from __future__ import annotations

import importlib
import os
import random
import uuid
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from ..errors import TargetError
from ..messages import Message

if TYPE_CHECKING:
    from ..llm import LLMClient

RESERVED_OPTIONS = ("memory", "adapter", "keep_checkpointer")
"""``target_options`` keys evalcli reads itself; the rest go to the agent's call."""


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
    """The agent's run ended with an exception; ``messages`` are those it produced before it."""

    def __init__(self, cause: BaseException, messages: list[Message]) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.messages = messages


@dataclass
class Reply:
    """One turn's answer: this turn's new response messages (assistant and tool, OpenAI format, SPEC §2), and
    what else an agent reports about the turn (adapters that know more add it here)."""

    messages: list[Message]


class Session(Protocol):
    """One conversation with the agent: its own thread, never shared with another conversation."""

    thread_id: str | None
    resource_id: str | None

    async def send(self, text: str) -> Reply:
        """Send one user message; return this turn's reply."""
        ...

    async def close(self) -> None:
        """Release what the conversation held (its history, session or checkpoint thread)."""
        ...


class Calls(Protocol):
    """How adapters call into user code: sync functions off the event loop, all under the turn timeout; and the
    run's LLM client, for targets that are a model."""

    async def call_sync(self, fn: Any, *args: Any, **kwargs: Any) -> Any: ...

    async def call_async(self, awaitable: Any) -> Any: ...

    def llm(self) -> LLMClient: ...


@dataclass(frozen=True)
class ItemInfo:
    """What an adapter may read about the item whose conversation it opens (the ``http`` target's templates do)."""

    id: str
    metadata: dict[str, Any]


@dataclass(frozen=True)
class Thread:
    """The memory scope of one conversation."""

    thread: str | None
    resource: str | None


_THREAD_IDS = random.Random(int.from_bytes(os.urandom(16), "big"))
"""Thread ids need to be unique, not secret: ``uuid4()`` reads the kernel's random source on every call,
which costs tens of microseconds per conversation on some machines."""


def fresh_thread(options: dict[str, Any]) -> Thread:
    """A new thread (a UUID); the resource is ``target_options.memory.resource`` if pinned, else the thread."""
    thread = str(uuid.UUID(int=_THREAD_IDS.getrandbits(128), version=4))
    memory = options.get("memory")
    pinned = memory.get("resource") if isinstance(memory, dict) else None
    return Thread(thread, str(pinned) if pinned else thread)


class Adapter(ABC):
    """Turns one agent object into sessions. A subclass names itself (``name``) and the run call its options go to
    (``run_call``), and may ``prepare`` what it holds for the whole run."""

    name: ClassVar[str]
    """What ``target_options.adapter`` calls it (and the key of its framework in ``RECOGNISED`` and ``EXTRAS``)."""
    run_call: ClassVar[str] = ""
    """The framework's run call, as option errors name it (``PydanticAI's agent.run``)."""
    memory_hint: ClassVar[str] = "give the target a 'memory' attribute, e.g. evalcli.Memory"
    """What the memory warning tells a user whose target has no memory (SPEC §2)."""

    def __init__(self, spec: str, obj: Any, options: dict[str, Any]) -> None:
        self.spec = spec
        self.obj = obj
        self.options = dict(options)
        self.call_options = {k: v for k, v in options.items() if k not in RESERVED_OPTIONS}
        self.prepare()

    def prepare(self) -> None:  # noqa: B027 - most adapters hold nothing but their options
        """Make what the adapter holds for the whole run (run options, a copied graph, ...)."""

    @property
    def has_memory(self) -> bool:
        """Framework agents always recall: evalcli gives each conversation its thread."""
        return True

    @classmethod
    def fits(cls, obj: Any) -> bool:
        """Whether ``obj`` is an agent of this adapter's kind (by class names only, importing nothing)."""
        known = RECOGNISED.get(cls.name, ())
        return bool(known) and any(name in known for name in mro_names(obj))

    @classmethod
    def accepted_options(cls, obj: Any) -> list[str]:
        """The option names the framework's run call takes (those evalcli sets itself left out)."""
        return []

    @classmethod
    def option_problems(cls, obj: Any, options: dict[str, Any]) -> list[str]:
        """Options the framework does not take, or whose values do not fit, as messages (empty when all are fine)."""
        problems = unknown_options(list(options), cls.accepted_options(obj), cls.run_call) if cls.run_call else []
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
    def open(self, *, multi_turn: bool, calls: Calls, item: ItemInfo | None = None) -> Session:
        """A session for one conversation (``multi_turn`` for ``inputs``/``turns``/``simulate`` items) of ``item``."""

    async def aclose(self) -> None:  # noqa: B027 - most adapters hold nothing for the whole run
        """Release what the adapter holds for the whole run."""


def mro_names(obj: Any) -> list[str]:
    """``module.QualName`` of every class in the object's MRO."""
    return [f"{cls.__module__}.{cls.__qualname__}" for cls in type(obj).__mro__]


ADAPTERS: dict[str, str] = {
    "pydantic_ai": "evalcli.targets.pydantic_ai:PydanticAIAdapter",
    "openai_agents": "evalcli.targets.openai_agents:OpenAIAgentsAdapter",
    "langgraph": "evalcli.targets.langgraph:LangGraphAdapter",
    "callable": "evalcli.targets.callable:CallableAdapter",
}
"""Every adapter by name, as an import path; a module is imported only when its adapter is asked about."""

RECOGNISED: dict[str, tuple[str, ...]] = {
    "pydantic_ai": ("pydantic_ai.agent.abstract.AbstractAgent", "pydantic_ai.agent.AbstractAgent",
                    "pydantic_ai.agent.Agent", "pydantic_ai.Agent"),
    "openai_agents": ("agents.agent.Agent", "agents.agent.AgentBase"),
    "langgraph": ("langgraph.pregel.main.Pregel", "langgraph.pregel.Pregel"),
}
"""Class names that identify a framework agent, checked without importing its adapter or framework."""

EXTRAS = {"pydantic_ai": "pydantic-ai", "openai_agents": "openai-agents", "langgraph": "langgraph"}
FRAMEWORK_MODULES = {"pydantic_ai": "pydantic_ai", "agents": "openai_agents", "langgraph": "langgraph",
                     "langchain": "langgraph", "langchain_core": "langgraph", "langchain_openai": "langgraph"}
"""Top-level modules of each framework, to name the extra when an import fails for want of one."""


def adapter_class(name: str) -> type[Adapter]:
    """The adapter class registered under ``name`` (its module imported now)."""
    path = ADAPTERS.get(name)
    if path is None:
        raise TargetError(f"unknown adapter '{name}'", f"target_options.adapter is one of: {', '.join(ADAPTERS)}")
    module_name, _, attribute = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        extra = EXTRAS.get(name)
        raise TargetError(f"the {name} adapter needs a package that is not installed ({exc.name})",
                          f"pip install 'evalcli[{extra}]'" if extra else "reinstall evalcli") from None
    adapter: type[Adapter] = getattr(module, attribute)
    return adapter


def recognise(obj: Any) -> str:
    """The adapter name for an agent object: a known framework class in its MRO, else ``callable``."""
    names = set(mro_names(obj))
    for adapter, known in RECOGNISED.items():
        if names.intersection(known):
            if adapter == "openai_agents" and not _is_openai_agents(obj):
                continue
            return adapter
    return "callable"


def _is_openai_agents(obj: Any) -> bool:
    """``agents`` is a generic module name: the class must come from the ``openai-agents`` distribution."""
    import sys

    module = sys.modules.get("agents")
    return module is not None and hasattr(module, "Runner") and hasattr(module, "function_tool")


def make_adapter(spec: str, obj: Any, options: dict[str, Any]) -> Adapter:
    """The adapter for a resolved target object: forced by ``target_options.adapter`` or recognised."""
    forced = options.get("adapter")
    if forced is not None and not isinstance(forced, str):
        raise TargetError("target_options.adapter must be a name", f"one of: {', '.join(ADAPTERS)}")
    name = forced or recognise(obj)
    cls = adapter_class(name)
    if forced and not cls.fits(obj):
        raise TargetError(f"target '{spec}' is a {type(obj).__module__}.{type(obj).__qualname__}, "
                          f"which the {name} adapter does not take",
                          f"remove target_options.adapter (evalcli recognised it as '{recognise(obj)}')")
    problems = cls.option_problems(obj, options)
    if problems:
        raise TargetError(f"target_options for {spec}: {'; '.join(problems)}",
                          "remove the options the agent does not take")
    return cls(spec, obj, options)


def extra_hint(missing_module: str | None) -> str | None:
    """``pip install 'evalcli[X]'`` when a failed import is of a framework evalcli has an extra for."""
    if not missing_module:
        return None
    adapter = FRAMEWORK_MODULES.get(missing_module.split(".")[0])
    return f"pip install 'evalcli[{EXTRAS[adapter]}]'" if adapter else None


def unknown_options(given: Sequence[str], accepted: Sequence[str], framework: str) -> list[str]:
    """For adapters' ``option_problems``: one message per option a framework's run call does not take, naming those it does."""
    return [f"'{name}' is not an option of {framework} (it takes: {', '.join(accepted) or 'none'})"
            for name in given if name not in accepted and name not in RESERVED_OPTIONS]
