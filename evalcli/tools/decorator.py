"""``@evalcli.tool``: a function the current conversation's tool plan can answer (docs/hermetic.md), so a callable target
or a custom graph can have its tools mocked; outside evalcli (no plan) it is a plain call."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar, overload

from .plan import acall, call

F = TypeVar("F", bound=Callable[..., Any])

REGISTERED: dict[str, list[str] | None] = {}
"""Every ``@evalcli.tool`` function's name and its parameter names (``None``: it takes ``**kwargs``)."""


@overload
def tool(fn: F, /) -> F: ...


@overload
def tool(*, name: str | None = None) -> Callable[[F], F]: ...


def tool(fn: Any = None, /, *, name: str | None = None) -> Any:
    """Decorate a tool function (sync or async): during an evalcli conversation its calls are answered by the
    dataset's ``tools:`` mocks, tapes and ``unmocked`` policy (``name``: the name the dataset uses, default the
    function's)."""
    if fn is None:
        return lambda f: _wrap(f, name)
    return _wrap(fn, name)


def _wrap(fn: Callable[..., Any], name: str | None) -> Callable[..., Any]:
    tool_name = name or fn.__name__
    signature = inspect.signature(fn)
    parameters = signature.parameters.values()
    REGISTERED[tool_name] = None if any(p.kind is p.VAR_KEYWORD for p in parameters) else [
        p.name for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]

    def arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return dict(kwargs)
        named = dict(bound.arguments)
        for p in parameters:
            if p.kind is p.VAR_KEYWORD and p.name in named:
                named.update(named.pop(p.name))
        return named

    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            return await acall(tool_name, arguments(args, kwargs), lambda: fn(*args, **kwargs))

        async_wrapper.__evalcli_tool__ = tool_name  # type: ignore[attr-defined]
        return async_wrapper

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return call(tool_name, arguments(args, kwargs), lambda: fn(*args, **kwargs))

    wrapper.__evalcli_tool__ = tool_name  # type: ignore[attr-defined]
    return wrapper
