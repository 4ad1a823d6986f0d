"""The ``pydantic_ai`` adapter: a PydanticAI agent (any ``AbstractAgent``) as sessions (SPEC §12).

One turn is ``await agent.run(text, message_history=H, **options)``. H, the thread's messages, is kept
by the session, never on the agent (one agent object serves every conversation at once): each
conversation starts from an empty history and a turn that succeeds replaces H with
``result.all_messages()``. The resource is not used.

This turn's messages are ``result.new_messages()`` (or, when the run raises, what
``capture_run_messages()`` caught beyond H) in OpenAI format. Bookkeeping is left out: the user prompt,
system prompts and instructions, and the output tool (``final_result``), whose validated output becomes
the assistant's text instead. Tool results whose outcome is ``failed``, ``retried`` (``ModelRetry``,
invalid arguments) or ``interrupted``, and legacy retry prompts tied to a tool, are ``is_error: true``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_ai import capture_run_messages
from pydantic_core import to_jsonable_python

from ..messages import Message
from .openai_format import assistant, keyword_names, tool_call, tool_result
from .session import RESERVED_OPTIONS, Adapter, Calls, ItemInfo, Reply, TurnFailed, fresh_thread

OWNED = ("user_prompt", "message_history", "conversation", "conversation_id")
"""Parameters of ``agent.run`` that evalcli sets itself: the prompt and the thread's history."""
OUTPUT_TOOL = "final_result"
"""PydanticAI's default output tool name (``final_result``, or ``final_result_<Type>`` for unions)."""
ERROR_OUTCOMES = frozenset({"failed", "retried", "interrupted"})
"""Tool-return outcomes that are failures: the tool raised or asked for a retry, or never produced a result."""


class PydanticAIAdapter(Adapter):
    """A ``pydantic_ai.Agent`` or any other ``AbstractAgent``."""

    name = "pydantic_ai"
    run_call = "PydanticAI's agent.run"

    def prepare(self) -> None:
        self.run_options = run_options(self.obj, self.call_options)
        self.output_tools = output_tool_names(self.obj)

    @classmethod
    def accepted_options(cls, obj: Any) -> list[str]:
        return keyword_names(obj.run, OWNED)

    @classmethod
    def check_values(cls, obj: Any, options: dict[str, Any]) -> None:
        run_options(obj, options)

    def open(self, *, multi_turn: bool, calls: Calls, item: ItemInfo | None = None) -> PydanticAISession:
        return PydanticAISession(self, fresh_thread(self.options).thread, calls)


class PydanticAISession:
    """One conversation: its own message history, passed to every ``agent.run`` of the thread."""

    def __init__(self, adapter: PydanticAIAdapter, thread: str | None, calls: Calls) -> None:
        self.adapter = adapter
        self.thread_id = thread
        self.resource_id: str | None = None
        self.calls = calls
        self.history: list[Any] = []

    async def send(self, text: str) -> Reply:
        messages: list[Message] = await self.calls.call_async(self._turn(text))
        return Reply(messages)

    async def _turn(self, text: str) -> list[Message]:
        adapter = self.adapter
        with capture_run_messages() as captured:
            try:
                result = await adapter.obj.run(text, message_history=self.history, **adapter.run_options)
            except Exception as exc:
                known = {id(m) for m in self.history}
                partial = [m for m in captured if id(m) not in known]
                raise TurnFailed(exc, to_openai(partial, adapter.output_tools)) from exc
        self.history = list(result.all_messages())
        new = list(result.new_messages())
        messages = to_openai(new, adapter.output_tools)
        if used_output_tool(new, adapter.output_tools):
            messages.append(assistant(json.dumps(to_jsonable_python(result.output), ensure_ascii=False)))
        return messages

    async def close(self) -> None:
        self.history = []


def run_options(agent: Any, options: dict[str, Any]) -> dict[str, Any]:
    """The options for ``agent.run``: ``deps`` validated into the agent's ``deps_type`` when it declares one,
    ``usage_limits`` given as a mapping made a ``UsageLimits``; the rest as written."""
    kwargs = {k: v for k, v in options.items() if k not in RESERVED_OPTIONS}
    deps_type = getattr(agent, "deps_type", None)
    if "deps" in kwargs and isinstance(deps_type, type) and deps_type is not type(None):
        kwargs["deps"] = as_deps(deps_type, kwargs["deps"])
    if isinstance(kwargs.get("usage_limits"), dict):
        from pydantic_ai.usage import UsageLimits

        try:
            kwargs["usage_limits"] = UsageLimits(**kwargs["usage_limits"])
        except TypeError as exc:
            raise ValueError(f"'usage_limits': {exc}") from None
    return kwargs


def as_deps(deps_type: type, value: Any) -> Any:
    """``deps`` as written in YAML, validated into the agent's ``deps_type`` (a dataclass, a model...)."""
    try:
        return TypeAdapter(deps_type).validate_python(value)
    except ValidationError as exc:
        found = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors())
        raise ValueError(f"'deps' does not fit the agent's deps_type {deps_type.__name__} ({found})") from None


def output_tool_names(agent: Any) -> frozenset[str]:
    """The names of the agent's output tools (bookkeeping, not tools the agent calls)."""
    toolset = getattr(agent, "_output_toolset", None)  # no public accessor; the default name covers the rest
    definitions = getattr(toolset, "_tool_defs", None) or ()
    return frozenset({OUTPUT_TOOL, *(d.name for d in definitions if isinstance(getattr(d, "name", None), str))})


def is_output_tool(name: Any, output_tools: frozenset[str]) -> bool:
    return isinstance(name, str) and (name in output_tools or name.startswith(f"{OUTPUT_TOOL}_"))


def used_output_tool(messages: Iterable[Any], output_tools: frozenset[str]) -> bool:
    """Whether the run's output came through an output tool (then it has no text of its own)."""
    return any(part.part_kind == "tool-return" and is_output_tool(part.tool_name, output_tools)
               and getattr(part, "outcome", "success") == "success"
               for message in messages for part in getattr(message, "parts", ()))


def to_openai(messages: Iterable[Any], output_tools: frozenset[str]) -> list[Message]:
    """PydanticAI messages (``ModelRequest``/``ModelResponse``) as OpenAI response messages, keyed on ``part_kind``."""
    out: list[Message] = []
    for message in messages:
        if getattr(message, "kind", None) == "response":
            out.extend(_response(message.parts, output_tools))
        else:
            out.extend(_request(getattr(message, "parts", ()), output_tools))
    return out


def _response(parts: Iterable[Any], output_tools: frozenset[str]) -> list[Message]:
    texts: list[str] = []
    calls: list[Message] = []
    results: list[Message] = []
    for part in parts:
        kind = part.part_kind
        if kind == "text" and part.content:
            texts.append(part.content)
        elif kind in ("tool-call", "builtin-tool-call") and not is_output_tool(part.tool_name, output_tools):
            calls.append(tool_call(part.tool_call_id, part.tool_name, part.args_as_json_str()))
        elif kind == "builtin-tool-return":
            results.append(_result(part))
    if not texts and not calls:
        return results
    return [assistant("\n\n".join(texts), calls), *results]


def _request(parts: Iterable[Any], output_tools: frozenset[str]) -> list[Message]:
    """Tool results only: user prompts, system prompts, instructions and retry feedback are bookkeeping."""
    out: list[Message] = []
    for part in parts:
        kind = part.part_kind
        name = getattr(part, "tool_name", None)
        if kind == "tool-return" and not is_output_tool(name, output_tools):
            out.append(_result(part))
        elif kind == "retry-prompt" and name and not is_output_tool(name, output_tools):
            out.append(tool_result(part.tool_call_id, part.model_response(), name=name, is_error=True))
    return out


def _result(part: Any) -> Message:
    try:
        content = part.model_response_str(wrap_if_error=False)
    except TypeError:  # PydanticAI v1: no error wrapping to turn off
        content = part.model_response_str()
    failed = getattr(part, "outcome", "success") in ERROR_OUTCOMES
    return tool_result(part.tool_call_id, content, name=part.tool_name, is_error=failed)
