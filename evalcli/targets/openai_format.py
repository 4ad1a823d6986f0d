"""Building OpenAI-format response messages, and reading a run call's options: shared by the framework adapters.

Nothing here imports a framework. Every adapter turns its framework's records into these few shapes
(docs/targets/index.md, docs/targets/frameworks.md): an assistant message (text and/or ``tool_calls``), one tool call (``id``,
``function.name``, ``function.arguments`` as a JSON string) and a ``role: tool`` result carrying its
``tool_call_id`` and, when the framework reported the tool as failed, ``is_error: true``.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable, Iterable
from typing import Any

from pydantic import PydanticSchemaGenerationError, PydanticUserError, TypeAdapter, ValidationError

from ..messages import RESPONSE_ROLES as RESPONSE_ROLES  # declared there: a plain callable's run needs only it
from ..messages import Message


def assistant(content: str | None, calls: list[Message] | None = None) -> Message:
    """An assistant message: its text (``None`` when it only calls tools) and its tool calls, if any."""
    message: Message = {"role": "assistant", "content": content or None}
    if calls:
        message["tool_calls"] = calls
    return message


def tool_call(call_id: str, name: str, arguments: Any) -> Message:
    """One entry of an assistant message's ``tool_calls``; ``arguments`` become a JSON string."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": as_json(arguments)}}


def tool_result(call_id: str, content: Any, *, name: str | None = None, is_error: bool = False) -> Message:
    """A ``role: tool`` message answering ``call_id``."""
    message: Message = {"role": "tool", "tool_call_id": call_id, "content": as_text(content)}
    if name:
        message["name"] = name
    if is_error:
        message["is_error"] = True
    return message


def as_json(arguments: Any) -> str:
    """Tool-call arguments as a JSON string (a string is taken to be JSON already; ``None`` is ``{}``)."""
    if isinstance(arguments, str):
        return arguments or "{}"
    return json.dumps({} if arguments is None else arguments, default=str, ensure_ascii=False)


def as_text(content: Any) -> str:
    """A tool result's content as text: a string as is, anything else as JSON."""
    if isinstance(content, str):
        return content
    return "" if content is None else json.dumps(content, default=str, ensure_ascii=False)


def keyword_names(fn: Callable[..., Any], owned: Iterable[str]) -> list[str]:
    """The named keyword parameters of a run call, minus those evalcli sets itself (``owned``).

    A ``**kwargs`` catch-all is not counted: an option the call only swallows would reach nothing.
    """
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    skip = {"self", *owned}
    kinds = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [p.name for p in parameters if p.kind in kinds and p.name not in skip]


def jsonable(value: Any) -> Any:
    """A structured result as JSON data: pydantic models and dataclasses dumped in JSON mode, dates as ISO text,
    anything that is not JSON as its ``repr``."""
    from pydantic_core import to_jsonable_python

    return to_jsonable_python(value, fallback=repr)


def type_name(kind: Any) -> str:
    """A type as people write it (``SupportDependencies``, ``dict[str, int]``)."""
    return kind.__name__ if isinstance(kind, type) else str(kind).replace("typing.", "")


@functools.lru_cache(maxsize=64)
def option_validator(kind: Any, option: str, what: str) -> TypeAdapter[Any]:
    """A validator for the type an option written as a mapping becomes (PydanticAI's ``deps``, the Agents SDK's
    ``context``), built once per type (building one costs far more than using it)."""
    try:
        return TypeAdapter(kind)
    except (PydanticSchemaGenerationError, PydanticUserError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"'{option}': the agent's {what} {type_name(kind)} cannot be built from YAML ({first}); "
                         f"build it in Python instead: target_options.setup: module:function, a function returning "
                         f"{{'{option}': {type_name(kind)}(...)}}") from None


def as_option(kind: Any, value: Any, option: str, what: str) -> Any:
    """An option written as a mapping (PydanticAI's ``deps``, the Agents SDK's ``context``), validated into the
    agent's ``kind`` (its ``what``: a dataclass, a model...): a new object each time. An object that already is
    one is used as it is."""
    if isinstance(kind, type) and isinstance(value, kind) and not isinstance(value, dict):
        return value
    validator = option_validator(kind, option, what)
    try:
        return validator.validate_python(value)
    except ValidationError as exc:
        found = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors())
        raise ValueError(f"'{option}' does not fit the agent's {what} {type_name(kind)} ({found})") from None


def quiet_logs(logger: str) -> None:
    """A framework's own log lines stay out of evalcli's output (docs/targets/frameworks.md): its logger stops at a
    handler that drops them, whatever the app configured at its root (evalcli reports the run's errors itself)."""
    import logging

    found = logging.getLogger(logger)
    found.propagate = False
    if not any(isinstance(h, logging.NullHandler) for h in found.handlers):
        found.addHandler(logging.NullHandler())


def build_openai_models() -> None:
    """Build the openai SDK's chat response models now, once, before turns run in threads (docs/targets/crewai.md).

    The SDK's models defer their pydantic build to first use; a framework that calls the SDK from several worker
    threads at once (CrewAI's native OpenAI provider) then builds them concurrently, and some replies fail to parse
    (``PydanticUserError: ... BaseModel cannot be instantiated directly``)."""
    import openai.types.chat
    import openai.types.completion_usage  # noqa: F401 - the chat models' usage
    from openai._models import BaseModel as OpenAIModel

    found: list[type[Any]] = []
    pending: list[type[Any]] = [OpenAIModel]
    while pending:
        for sub in pending.pop().__subclasses__():
            if sub not in found:
                found.append(sub)
                pending.append(sub)
    for model in found:
        if model.__module__.startswith(("openai.types.chat", "openai.types.completion_usage")):
            model.model_rebuild()
