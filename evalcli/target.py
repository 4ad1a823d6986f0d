"""The target: resolving ``module:attribute``, calling it (sync or async), normalising its reply."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import importlib
import inspect
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from pathlib import Path
from typing import Any

from .errors import TargetError

Message = dict[str, Any]
RESPONSE_ROLES = ("assistant", "tool")


def resolve_import(spec: str, search_paths: Sequence[Path], what: str = "target") -> Any:
    """Import ``module:attribute`` with ``search_paths`` put on ``sys.path`` first."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise TargetError(f"{what} '{spec}' is not an import path", "write it as module:attribute, e.g. examples.agent:agent")
    for folder in reversed([str(p.resolve()) for p in search_paths]):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import-time failure is the user's to see, shortened
        raise TargetError(f"{what} '{spec}' does not import: {type(exc).__name__}: {exc}",
                          f"check that module '{module_name}' exists and imports cleanly "
                          f"(searched the dataset's folder and the current directory)") from None
    value: Any = module
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise TargetError(f"{what} '{spec}': module '{module_name}' has no attribute '{attribute}'",
                              "check the name after the colon") from None
    return value


class Target:
    """A resolved target: knows how to call it and whether it has memory."""

    def __init__(self, spec: str, obj: Any) -> None:
        self.spec = spec
        self.obj = obj
        method = getattr(obj, "generate", None)
        if callable(method):
            self.fn: Callable[..., Any] = method
        elif callable(obj):
            self.fn = obj
        else:
            raise TargetError(f"target '{spec}' is a {type(obj).__name__}: it has no generate() and is not callable",
                              "point at an object with a generate(input, *, memory=None, **options) method, or a function")
        self.is_async = _is_async(self.fn)
        self.accepts = _accepted_keywords(self.fn)

    @property
    def has_memory(self) -> bool:
        """A target whose ``memory`` attribute is missing or falsy cannot recall earlier turns."""
        return bool(getattr(self.obj, "memory", None))

    async def call(self, input: str, memory: dict[str, Any] | None, options: dict[str, Any],
                   executor: Executor | None) -> list[Message]:
        """Call the target once and return its response messages."""
        kwargs = dict(options)
        if memory is not None:
            kwargs["memory"] = memory
        if self.accepts is not None:
            kwargs = {k: v for k, v in kwargs.items() if k in self.accepts}
        if self.is_async:
            reply = await self.fn(input, **kwargs)
        else:
            loop = asyncio.get_running_loop()
            context = contextvars.copy_context()
            call = functools.partial(context.run, self.fn, input, **kwargs)
            reply = await loop.run_in_executor(executor, call)
            if inspect.isawaitable(reply):
                reply = await reply
        return normalise(reply)


def _is_async(fn: Callable[..., Any]) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    # an object whose __call__ is async is an async target too
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(type(fn), "__call__", None))  # noqa: B004


def _accepted_keywords(fn: Callable[..., Any]) -> set[str] | None:
    """Keyword names the target takes, or ``None`` when it takes ``**kwargs`` (then pass everything)."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    return {p.name for p in parameters if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)}


class BadReply(Exception):
    """The target returned something that is not a response."""


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


