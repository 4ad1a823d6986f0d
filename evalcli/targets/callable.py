"""The ``callable`` adapter: evalcli's own protocol (docs/targets/index.md), ``generate(input, *, memory=None, **options)``.

The target is an object with a ``generate`` method or a plain callable, sync or async. Sync ones run
in the run's target threads, so a slow one never blocks the event loop. evalcli owns the thread of
multi-turn conversations; a single-turn item gets the caller's ``target_options.memory`` unchanged.
"""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import TargetError
from ..messages import RESPONSE_ROLES, Message
from ..tools import REGISTERED, same_tool
from .session import RESERVED_OPTIONS, Adapter, Calls, ConversationOptions, ItemInfo, Reply, Thread, call_options, caller_thread


class BadReply(Exception):
    """The target returned something that is not a response."""


class CallableAdapter(Adapter):
    """Any object with ``generate`` or any callable taking ``(input, *, memory=None, **options)``."""

    name = "callable"

    def prepare(self) -> None:
        fn = target_function(self.obj)
        if fn is None:
            kind = type(self.obj).__name__
            raise TargetError(f"target '{self.spec}' is {_article(kind)} {kind}: it has no generate() and is not "
                              "callable", _not_an_agent_hint(self.obj))
        if not _takes_input(fn):
            name = getattr(fn, "__qualname__", None) or type(fn).__name__
            raise TargetError(f"target '{self.spec}': {name}() takes no argument for the user's message, so no turn "
                              "can call it", "give it one (generate(input, *, memory=None, **options)); if it builds an "
                              "agent, point at the agent it returns instead (e.g. 'agent = "
                              f"{getattr(fn, '__name__', name)}()' in your module and 'target: module:agent')")
        self.fn: Callable[..., Any] = fn
        self.is_async = is_async_callable(self.fn)
        self.accepts = accepted_keywords(self.fn)
        self.kwargs = self._kwargs(self.options)
        self.error_results_ran = self._own_tools() is None  # a plain callable's reported error is its tool's

    def _kwargs(self, options: Mapping[str, Any]) -> dict[str, Any]:
        kwargs = call_options(options)
        return {k: v for k, v in kwargs.items() if k in self.accepts} if self.accepts is not None else kwargs

    @classmethod
    def fits(cls, obj: Any) -> bool:
        return callable(getattr(obj, "generate", None)) or callable(obj)

    @classmethod
    def accepted_options(cls, obj: Any) -> list[str]:
        fn = target_function(obj)
        names = option_names(fn) if fn is not None else None
        return sorted(names) if names is not None else []

    @classmethod
    def option_problems(cls, obj: Any, options: dict[str, Any]) -> list[str]:
        """A target that takes no ``**kwargs`` only accepts the option names it declares: any other name (a typo such
        as ``temprature``) is a mistake, never dropped silently."""
        fn = target_function(obj)
        names = option_names(fn) if fn is not None else None
        if names is None:
            return []
        where = f"{getattr(fn, '__qualname__', 'the target')}()"
        return [f"'{name}' is not an option of {where}{_meant(name, names)} (it takes: {', '.join(sorted(names)) or 'none'}; "
                f"add '{name}' or **options to its signature to receive it)"
                for name in options if name not in RESERVED_OPTIONS and name not in names]

    def thread(self, options: Mapping[str, Any], *, multi_turn: bool) -> Thread:
        return caller_thread(options, multi_turn=multi_turn)

    def _own_tools(self) -> dict[str, list[str]] | None:
        """An ``evalcli.Agent``'s tools and their parameters (a plain callable's are unknown)."""
        listing = getattr(self.obj, "evalcli_tool_parameters", None)
        found = listing() if callable(listing) else None
        return found if isinstance(found, dict) else None

    def mcp_servers(self) -> dict[str, list[str]] | None:
        listing = getattr(self.obj, "evalcli_mcp_servers", None)
        found = listing() if callable(listing) else None
        return found if isinstance(found, dict) else None

    def mcp_server_places(self, name: str) -> list[str]:
        places = getattr(self.obj, "evalcli_mcp_places", None)
        found = places(name) if callable(places) else None
        return found if isinstance(found, list) else []

    def tool_names(self) -> list[str] | None:
        own = self._own_tools()
        return None if own is None else sorted(own)

    def tool_parameters(self, name: str) -> list[str] | None:
        own = self._own_tools() or {}
        if name in own:
            return own.get(name)
        registered = next((n for n in REGISTERED if same_tool(n, name)), None)
        return REGISTERED.get(registered) if registered is not None else None

    def interceptable(self, name: str) -> bool | None:
        """Whether evalcli's plan can answer the tool: an ``evalcli.Agent``'s own tools and ``@evalcli.tool`` functions
        (those defined when the target was imported) can; ``None``: not known."""
        own = self._own_tools()
        if own is not None:
            return name in own
        return any(same_tool(n, name) for n in REGISTERED)

    @property
    def outside_hint(self) -> str:
        if self._own_tools() is not None:
            return super().outside_hint
        return "decorate the tool function with @evalcli.tool, so that evalcli's plan answers it"

    @property
    def reports_tool_calls(self) -> bool | None:
        """An ``evalcli.Agent`` does; a callable annotated to return ``str`` never does, unless it may call an
        ``@evalcli.tool`` function (whose calls evalcli sees); any other callable may."""
        if self._own_tools() is not None:
            return True
        try:
            returns = inspect.signature(self.fn).return_annotation
        except (TypeError, ValueError):
            return None
        return None if returns not in (str, "str") or REGISTERED else False

    def returned_problems(self, returned: Mapping[str, Any]) -> list[str]:
        problems = [f"'{name}' is set by evalcli and cannot come from a setup" for name in returned
                    if name in RESERVED_OPTIONS]
        return problems + type(self).option_problems(self.obj, {k: v for k, v in returned.items()
                                                                if k not in RESERVED_OPTIONS})

    @property
    def has_memory(self) -> bool:
        """A ``memory`` attribute that is present and not ``None``/``False`` counts (an empty store starts empty)."""
        memory = getattr(self.obj, "memory", None)
        return memory is not None and memory is not False

    def open(self, *, multi_turn: bool, calls: Calls,
             conversation: ConversationOptions | None = None, item: ItemInfo | None = None) -> CallableSession:
        options = self.options if conversation is None or conversation.options is None else conversation.options
        thread = conversation.thread if conversation is not None else self.thread(options, multi_turn=multi_turn)
        given = options.get("memory")
        caller = given if isinstance(given, dict) else None
        memory = {**(caller or {}), "thread": thread.thread, "resource": thread.resource} if multi_turn else caller
        kwargs = dict(self.kwargs) if conversation is None or conversation.options is None else self._kwargs(options)
        if memory is not None and (self.accepts is None or "memory" in self.accepts):
            kwargs["memory"] = memory
        return CallableSession(self, thread, kwargs, calls)


class CallableSession:
    """One conversation over a ``generate`` callable: the same memory dict on every turn."""

    def __init__(self, adapter: CallableAdapter, thread: Thread, kwargs: dict[str, Any], calls: Calls) -> None:
        self.adapter = adapter
        self.thread_id = thread.thread
        self.resource_id = thread.resource
        self.kwargs = kwargs
        self.calls = calls

    async def send(self, text: str, *, resume: Any = None) -> Reply:
        fn = self.adapter.fn
        if self.adapter.is_async:
            reply = await self.calls.call_async(fn(text, **self.kwargs))
        else:
            reply = await self.calls.call_sync(_drained, fn, text, **self.kwargs)
            if inspect.isawaitable(reply):
                reply = await self.calls.call_async(reply)
            if inspect.isasyncgen(reply):  # a streaming target: an async generator of the answer's chunks
                reply = await self.calls.call_async(_streamed(reply))
        return Reply(normalise(reply))

    async def close(self) -> None:
        pass


def _drained(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``; a generator it returns (a streaming target) is read to its end here, in the target's
    thread, into the reply its chunks make (``_joined``)."""
    reply = fn(*args, **kwargs)
    return _joined(list(reply)) if inspect.isgenerator(reply) else reply


async def _streamed(chunks: Any) -> Any:
    return _joined([chunk async for chunk in chunks])


def _joined(chunks: list[Any]) -> Any:
    """A streamed reply: text chunks are one answer, joined; message dicts are the messages (docs/targets/python.md)."""
    if all(isinstance(chunk, str) for chunk in chunks):
        return "".join(chunks)
    if all(isinstance(chunk, dict) for chunk in chunks):
        return chunks
    kinds = sorted({type(chunk).__name__ for chunk in chunks})
    raise BadReply(f"the target streamed {', '.join(kinds)} chunks; stream text (str) or message dicts, one kind")


def target_function(obj: Any) -> Callable[..., Any] | None:
    """What a turn calls: the object's ``generate`` method, else the object itself when callable."""
    method = getattr(obj, "generate", None)
    if callable(method):
        return method  # type: ignore[no-any-return]
    return obj if callable(obj) else None


FRAMEWORK_PARTS = {
    "langgraph.graph.state.StateGraph": "a StateGraph is the builder of a graph: point at the compiled graph "
                                        "('graph = builder.compile()' in your module, 'target: module:graph')",
    "google.adk.runners.Runner": "evalcli runs an ADK agent with a Runner of its own: point at the agent the runner "
                                 "runs ('target: module:root_agent'; your services can come from a setup)",
}
"""Framework objects a target may name by mistake (by a class name in their MRO), with the fix."""


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def _not_an_agent_hint(obj: Any) -> str:
    """What to point at instead of an object that no adapter runs and that is not callable."""
    names = [f"{cls.__module__}.{cls.__qualname__}" for cls in type(obj).__mro__]
    part = next((FRAMEWORK_PARTS[n] for n in names if n in FRAMEWORK_PARTS), None)
    if part is not None:
        return part
    from .registry import adapter_names

    frameworks = [name for name in adapter_names() if name != "callable"]
    return ("point at an object with a generate(input, *, memory=None, **options) method, a function, or an agent "
            f"of a framework evalcli has an adapter for ({', '.join(frameworks)}: 'evalcli adapters' lists them)")


def _takes_input(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` can be called with the user's message as its one positional argument (unknown: yes)."""
    try:
        inspect.signature(fn).bind_partial(None)
    except TypeError:
        return False
    except ValueError:  # no signature to read (some builtins)
        return True
    return True


def is_async_callable(fn: Callable[..., Any]) -> bool:
    """A coroutine function, a partial of one, or an object whose ``__call__`` is one."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(type(fn), "__call__", None))  # noqa: B004


def accepted_keywords(fn: Callable[..., Any]) -> set[str] | None:
    """Keyword names the target takes, or ``None`` when it takes ``**kwargs`` (then pass everything)."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    return {p.name for p in parameters if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)}


def required_arguments(obj: Any) -> list[str]:
    """What a callable target cannot be called without but evalcli passes only when ``target_options`` names it: each
    parameter with no default but the first (the user's message), ``memory`` and ``*args``/``**kwargs``."""
    fn = target_function(obj)
    try:
        parameters = list(inspect.signature(fn).parameters.values()) if fn is not None else []
    except (TypeError, ValueError):
        return []
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    first = next((p.name for p in parameters if p.kind in positional), None)
    return [p.name for p in parameters if p.default is inspect.Parameter.empty and p.name not in (first, "memory")
            and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)]


def option_names(fn: Callable[..., Any]) -> set[str] | None:
    """The options a target declares (its keywords but the input and ``memory``); ``None`` with ``**kwargs``."""
    accepts = accepted_keywords(fn)
    if accepts is None:
        return None
    try:
        first = next((p.name for p in inspect.signature(fn).parameters.values()
                      if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)), None)
    except (TypeError, ValueError):
        first = None
    return accepts - {"memory", first}


def _meant(name: str, names: set[str]) -> str:
    close = difflib.get_close_matches(name, sorted(names), n=1, cutoff=0.75)
    return f" (did you mean '{close[0]}'?)" if close else ""


def normalise(reply: Any) -> list[Message]:
    """str -> one assistant message; ``{"messages": [...]}``, a list of messages or an object with ``.messages`` as is.

    Only response messages count (assistant and tool roles): user and system messages are dropped.
    """
    if isinstance(reply, str):
        return [{"role": "assistant", "content": reply}]
    messages = reply.get("messages") if isinstance(reply, dict) else getattr(reply, "messages", reply)
    if isinstance(reply, dict) and "messages" not in reply:
        raise BadReply(f"the target returned a dict without 'messages' (keys: {', '.join(map(str, reply)) or 'none'}); "
                       "return a string, a list of messages, or {'messages': [...]}")
    if not isinstance(messages, (list, tuple)):
        raise BadReply(f"the target returned {type(reply).__name__}, not a response; "
                       "return a string, a list of messages, or {'messages': [...]}")
    result = []
    for i, message in enumerate(messages):
        if type(message) is not dict and hasattr(message, "model_dump"):  # a plain dict has none: no lookup that fails
            message = message.model_dump(exclude_none=True)
        role = message.get("role") if isinstance(message, dict) else None
        if type(role) is not str and not isinstance(role, str):  # a plain str: one test (docs/performance.md)
            raise BadReply(f"response message {i} is {type(message).__name__}, not a message dict with a 'role'")
        if role in RESPONSE_ROLES:
            result.append(message)
    return result


def adapter_name(adapter: Adapter | None) -> str:
    """An adapter's name, as errors about what its sessions returned say it."""
    return str(getattr(adapter, "name", None) or type(adapter).__name__)


OWN = "evalcli."
"""The package of evalcli's own adapters, whose replies are made right as they are made (``normalise``): only another
package's adapter has its answers checked (``package_reply``), so a turn of a built-in target pays nothing for it."""


async def package_reply(sending: Any, adapter: Adapter | None) -> Reply:
    """A package adapter's ``session.send(...)`` awaited and checked (``checked_reply``): one that is not awaitable (a
    ``def send``) is a ``BadReply`` naming the fix, not "the target raised TypeError"."""
    if not inspect.isawaitable(sending):
        raise BadReply(f"the adapter {adapter_name(adapter)}'s session.send() returned {type(sending).__name__}, not "
                       "an awaitable: write it 'async def send(self, text)' (docs/extending.md)")
    return checked_reply(await sending, adapter_name(adapter))


def checked_reply(reply: Any, adapter: str) -> Reply:
    """A session's answer as the protocol has it (docs/extending.md "The adapter protocol"): a ``Reply`` whose messages
    are message dicts with a ``role``, else a ``BadReply``, the conversation's error. A package's adapter returning a
    plain list was an internal error that ended the run; a message that was not a dict was stored, then broke the
    scorers and ``evalcli show``."""
    if not isinstance(reply, Reply):
        raise BadReply(f"the adapter {adapter}'s session.send() returned {type(reply).__name__}, not an "
                       "evalcli.targets.Reply (return Reply(messages))")
    messages = reply.messages
    if not isinstance(messages, (list, tuple)):
        raise BadReply(f"the adapter {adapter}'s Reply holds messages of type "
                       f"{type(messages).__name__}, not a list of message dicts")
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise BadReply(f"response message {i} from the adapter {adapter} is "
                           f"{type(message).__name__}, not a message dict with a 'role' (OpenAI chat format)")
        if not isinstance(message.get("role"), str):
            raise BadReply(f"response message {i} from the adapter {adapter} has no 'role' (a message "
                           "dict in OpenAI chat format has one: 'assistant' or 'tool')")
    return reply
