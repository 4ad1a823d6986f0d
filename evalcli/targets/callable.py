"""The ``callable`` adapter: evalcli's own protocol (SPEC §2), ``generate(input, *, memory=None, **options)``.

The target is an object with a ``generate`` method or a plain callable, sync or async. Sync ones run
in the run's target threads, so a slow one never blocks the event loop. evalcli owns the thread of
multi-turn conversations; a single-turn item gets the caller's ``target_options.memory`` unchanged.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from ..errors import TargetError
from ..messages import Message
from .session import Adapter, Calls, ItemInfo, Reply, Thread, fresh_thread

RESPONSE_ROLES = ("assistant", "tool")


class BadReply(Exception):
    """The target returned something that is not a response."""


class CallableAdapter(Adapter):
    """Any object with ``generate`` or any callable taking ``(input, *, memory=None, **options)``."""

    name = "callable"

    def prepare(self) -> None:
        obj = self.obj
        method = getattr(obj, "generate", None)
        if callable(method):
            self.fn: Callable[..., Any] = method
        elif callable(obj):
            self.fn = obj
        else:
            raise TargetError(f"target '{self.spec}' is a {type(obj).__name__}: it has no generate() and is not callable",
                              "point at an object with a generate(input, *, memory=None, **options) method, a "
                              "function, or an agent of PydanticAI, the OpenAI Agents SDK or LangGraph")
        self.is_async = is_async_callable(self.fn)
        self.accepts = accepted_keywords(self.fn)
        memory = self.options.get("memory")
        self.caller_memory = memory if isinstance(memory, dict) else None

    @classmethod
    def fits(cls, obj: Any) -> bool:
        return callable(getattr(obj, "generate", None)) or callable(obj)

    @property
    def has_memory(self) -> bool:
        """A ``memory`` attribute that is present and not ``None``/``False`` counts (an empty store starts empty)."""
        memory = getattr(self.obj, "memory", None)
        return memory is not None and memory is not False

    def open(self, *, multi_turn: bool, calls: Calls, item: ItemInfo | None = None) -> CallableSession:
        if multi_turn:
            thread = fresh_thread(self.options)
            memory: dict[str, Any] | None = {**(self.caller_memory or {}), "thread": thread.thread,
                                             "resource": thread.resource}
        else:
            memory = self.caller_memory
            thread = Thread((memory or {}).get("thread"), (memory or {}).get("resource"))
        kwargs = dict(self.call_options)
        if memory is not None:
            kwargs["memory"] = memory
        if self.accepts is not None:
            kwargs = {k: v for k, v in kwargs.items() if k in self.accepts}
        return CallableSession(self, thread, kwargs, calls)


class CallableSession:
    """One conversation over a ``generate`` callable: the same memory dict on every turn."""

    def __init__(self, adapter: CallableAdapter, thread: Thread, kwargs: dict[str, Any], calls: Calls) -> None:
        self.adapter = adapter
        self.thread_id = thread.thread
        self.resource_id = thread.resource
        self.kwargs = kwargs
        self.calls = calls

    async def send(self, text: str) -> Reply:
        fn = self.adapter.fn
        if self.adapter.is_async:
            reply = await self.calls.call_async(fn(text, **self.kwargs))
        else:
            reply = await self.calls.call_sync(fn, text, **self.kwargs)
            if inspect.isawaitable(reply):
                reply = await self.calls.call_async(reply)
        return Reply(normalise(reply))

    async def close(self) -> None:
        pass


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
        if hasattr(message, "model_dump"):
            message = message.model_dump(exclude_none=True)
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise BadReply(f"response message {i} is {type(message).__name__}, not a message dict with a 'role'")
        if message["role"] in RESPONSE_ROLES:
            result.append(message)
    return result
