"""The ``pydantic_ai`` adapter: a PydanticAI agent (any ``AbstractAgent``) as sessions (docs/targets/frameworks.md).

One turn is ``await agent.run(text, message_history=H, **options)``. H, the thread's messages, is kept
by the session, never on the agent (one agent object serves every conversation at once): each
conversation starts from an empty history and a turn that succeeds replaces H with
``result.all_messages()``. The resource is not used.

This turn's messages are ``result.new_messages()`` (or, when the run raises, what
``capture_run_messages()`` caught beyond H) in OpenAI format. Bookkeeping is left out: the user prompt,
system prompts and instructions, and the output tool (``final_result``), whose validated output becomes
the assistant's text instead. Tool results whose outcome is ``failed``, ``retried`` (``ModelRetry``,
invalid arguments) or ``interrupted``, and legacy retry prompts tied to a tool, are ``is_error: true``.

Each conversation gets its own ``deps`` (docs/targets/frameworks.md): a mapping written in YAML is validated into the agent's
``deps_type`` anew for every conversation (a type that cannot be built from YAML is a validation error that
says to use ``setup``). A turn's output that is not text is its ``structured`` result; rejections of the
output (an output validator's ``ModelRetry``, output that fails validation) are its ``output_retries``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic_ai import ModelRetry, capture_run_messages
from pydantic_ai.capabilities import AbstractCapability

from ..messages import Message
from ..tools import MockedToolError, acall
from .framework_mcp import Listed, ServerTools, described
from .openai_format import as_option, assistant, jsonable, keyword_names, tool_call, tool_result, type_name
from .session import RESERVED_OPTIONS, Adapter, Calls, ConversationOptions, ItemInfo, Reply, Thread, TurnFailed, new_thread_id
from .usage import count, record_target_call

OWNED = ("user_prompt", "message_history", "conversation", "conversation_id")
"""Parameters of ``agent.run`` that evalcli sets itself: the prompt and the thread's history."""
OUTPUT_TOOL = "final_result"
"""PydanticAI's default output tool name (``final_result``, or ``final_result_<Type>`` for unions)."""
NOT_EXECUTED = "Tool not executed - a final result was already processed."
"""The stub result PydanticAI writes for a call it did not run (``end_strategy="early"``, a final result in the same
reply): the tool never ran, so it is no successful result."""
ERROR_OUTCOMES = frozenset({"failed", "retried", "interrupted"})
"""Tool-return outcomes that are failures: the tool raised or asked for a retry, or never produced a result."""


class PydanticAIAdapter(Adapter):
    """A ``pydantic_ai.Agent`` or any other ``AbstractAgent``."""

    name = "pydantic_ai"
    run_call = "PydanticAI's agent.run"

    def prepare(self) -> None:
        self.deps_type = declared_deps_type(self.obj)
        self.run_options = run_options(self.obj, self.call_options, typed_deps=False)
        self.output_tools = output_tool_names(self.obj)
        self.tool_plan: ToolPlanCapability | None = None
        self.servers = ServerTools(mcp_toolsets(self.obj))
        """The agent's MCP toolsets and their tools, listed once (docs/hermetic.md, "MCP tools")."""

    def control_tools(self) -> None:
        """Every run gets a capability whose ``wrap_tool_execute`` asks the conversation's tool plan (a per-run
        capability: the agent itself is not changed)."""
        self.tool_plan = ToolPlanCapability(self.output_tools, self.servers)

    def tool_schemas(self) -> dict[str, Any] | None:
        own, listed = function_tools(self.obj), self.servers.schemas()
        return None if own is None or listed is None else {**own, **listed}

    def mcp_servers(self) -> dict[str, list[str]] | None:
        return self.servers.names()

    def mcp_server_places(self, name: str) -> list[str]:
        return self.servers.places.get(name, [])

    @classmethod
    def accepted_options(cls, obj: Any) -> list[str]:
        return keyword_names(obj.run, OWNED)

    @classmethod
    def check_values(cls, obj: Any, options: dict[str, Any]) -> None:
        run_options(obj, options)

    def thread(self, options: Mapping[str, Any], *, multi_turn: bool) -> Thread:
        """A fresh thread; the resource is not used."""
        return Thread(new_thread_id(), None)

    def warnings(self, conversations: Sequence[tuple[Mapping[str, Any], bool]]) -> list[str]:
        """An agent that declares ``deps_type`` but whose conversations get no ``deps`` and no ``setup``."""
        if self.deps_type is None:
            return []
        bare = sum(1 for options, has_setup in conversations if "deps" not in options and not has_setup)
        if not bare:
            return []
        every = "every conversation" if bare == len(conversations) else f"{bare} of {len(conversations)} conversations"
        return [f"target {self.spec} declares deps_type {type_name(self.deps_type)} but {every} gets no deps "
                "(they run with deps=None); give target_options.deps (a mapping) or a target_options.setup that "
                "returns {'deps': ...}"]

    def open(self, *, multi_turn: bool, calls: Calls,
             conversation: ConversationOptions | None = None, item: ItemInfo | None = None) -> PydanticAISession:
        if conversation is None or conversation.options is None:
            options = self.run_options  # the YAML's own deps are validated anew for each conversation below
            yaml_deps = "deps" in options
        else:
            options = run_options(self.obj, conversation.options, typed_deps=False)
            yaml_deps = "deps" in options and "deps" not in conversation.from_setup
        if "deps" in options and (yaml_deps or isinstance(options["deps"], dict)):
            deps = options["deps"]
            options = {**options, "deps": as_option(self.deps_type, deps, "deps", "deps_type") if self.deps_type is not None
                       else copy.deepcopy(deps)}
        thread = conversation.thread.thread if conversation is not None else new_thread_id()
        return PydanticAISession(self, thread, calls, options)


class PydanticAISession:
    """One conversation: its own message history (and deps), passed to every ``agent.run`` of the thread."""

    def __init__(self, adapter: PydanticAIAdapter, thread: str | None, calls: Calls, options: dict[str, Any]) -> None:
        self.adapter = adapter
        self.thread_id = thread
        self.resource_id: str | None = None
        self.calls = calls
        self.options = options
        self.history: list[Any] = []
        self.turn = 0

    async def send(self, text: str, *, resume: Any = None) -> Reply:
        reply: Reply = await self.calls.call_async(self._turn(text))
        return reply

    async def _turn(self, text: str) -> Reply:
        adapter = self.adapter
        turn, self.turn = self.turn, self.turn + 1
        options = self.options
        if adapter.tool_plan is not None:
            options = {**options, "capabilities": [*(options.get("capabilities") or ()), adapter.tool_plan]}
        with capture_run_messages() as captured:
            try:
                result = await adapter.obj.run(text, message_history=self.history, **options)
            except Exception as exc:
                known = {id(m) for m in self.history}
                partial = [m for m in captured if id(m) not in known]
                record_calls(partial, turn)
                raise TurnFailed(exc, to_openai(partial, adapter.output_tools),
                                 output_retries=output_retries(partial, adapter.output_tools)) from exc
        self.history = list(result.all_messages())
        new = list(result.new_messages())
        record_calls(new, turn)
        messages = to_openai(new, adapter.output_tools)
        output = result.output
        structured = None if isinstance(output, str) or output is None else jsonable(output)
        if used_output_tool(new, adapter.output_tools):
            messages.append(assistant(json.dumps(structured, ensure_ascii=False)))
        return Reply(messages, structured=structured, output_retries=output_retries(new, adapter.output_tools))

    async def close(self) -> None:
        self.history = []


def record_calls(messages: Iterable[Any], turn: int) -> None:
    """Each model call of the run (a ``ModelResponse``) as a ``target`` call with the tokens its ``usage`` reports."""
    for message in messages:
        if getattr(message, "kind", None) != "response":
            continue
        usage = getattr(message, "usage", None)
        record_target_call(str(getattr(message, "model_name", None) or ""), count(getattr(usage, "input_tokens", 0)),
                           count(getattr(usage, "output_tokens", 0)), turn_index=turn,
                           cached_tokens=count(getattr(usage, "cache_read_tokens", 0)))


class ToolPlanCapability(AbstractCapability[Any]):
    """Answers the agent's tool calls from the current conversation's tool plan (docs/hermetic.md): a mock's value is the
    tool's return; a mock's ``raises`` (or a refused call) is ``ModelRetry``, how PydanticAI reports a failed tool
    to the model. Output tools are left alone."""

    def __init__(self, output_tools: frozenset[str], servers: ServerTools) -> None:
        self.output_tools = output_tools
        self.servers = servers

    async def wrap_tool_execute(self, ctx: Any, *, call: Any, tool_def: Any, args: Any, handler: Any) -> Any:
        name = call.tool_name
        if is_output_tool(name, self.output_tools):
            return await handler(args)
        try:
            return await acall(name, call.args_as_dict(), lambda: handler(args), call_id=call.tool_call_id,
                               server=self.servers.server_of(name))
        except MockedToolError as exc:
            raise ModelRetry(str(exc)) from None


def function_tools(agent: Any) -> dict[str, Any] | None:
    """The JSON schema of each of the agent's function tools, by name (its MCP toolsets' are listed apart); ``None``
    when it has toolsets whose tools cannot be listed before a run (dynamic toolsets)."""
    from pydantic_ai.toolsets import FunctionToolset

    tools: dict[str, Any] = {}
    for toolset in getattr(agent, "toolsets", None) or ():
        if _is_mcp(toolset):
            continue
        if not isinstance(toolset, FunctionToolset):
            return None
        for name, tool in toolset.tools.items():
            tools[name] = getattr(getattr(tool, "function_schema", None), "json_schema", None)
    return tools


def _is_mcp(toolset: Any) -> bool:
    return _mcp_within(toolset) is not None


def _mcp_within(toolset: Any) -> tuple[Any, str] | None:
    """The MCP toolset a toolset is, or wraps (``.prefixed(...)``, ``.filtered(...)``...), and the prefix its
    wrappers put before its tools' names (docs/hermetic.md, "MCP tools")."""
    prefixes: list[str] = []
    while toolset is not None:
        if any(c.__name__ == "MCPToolset" and c.__module__.startswith("pydantic_ai") for c in type(toolset).__mro__):
            return toolset, "_".join(prefixes)  # outermost first: model_name("a_b", t) is a_b_t
        if type(toolset).__name__ == "PrefixedToolset":
            prefixes.append(str(toolset.prefix))
        toolset = getattr(toolset, "wrapped", None)
    return None


def mcp_toolsets(agent: Any) -> list[Listed]:
    """The agent's MCP toolsets (``pydantic_ai.mcp.MCPToolset``), each by its name (its ``id``, else its command's
    script or its URL's host) and as evalcli describes it (``None``: a transport evalcli cannot start)."""
    found: list[Listed] = []
    for toolset in getattr(agent, "toolsets", None) or ():
        within = _mcp_within(toolset)
        if within is not None:
            mcp, prefix = within
            server = described(mcp, getattr(mcp, "id", None))
            found.append((server.name if server is not None else str(getattr(mcp, "label", "mcp")), server, prefix))
    return found


def declared_deps_type(agent: Any) -> Any:
    """The agent's ``deps_type`` when it declares one (PydanticAI's default is ``object``, meaning none)."""
    deps_type = getattr(agent, "deps_type", None)
    return None if deps_type in (None, object, type(None)) else deps_type


def run_options(agent: Any, options: Mapping[str, Any], *, typed_deps: bool = True) -> dict[str, Any]:
    """The options for ``agent.run``: ``deps`` validated into the agent's ``deps_type`` when it declares one (with
    ``typed_deps``; else checked only), ``usage_limits`` given as a mapping made a ``UsageLimits``; the rest as
    written."""
    kwargs = {k: v for k, v in options.items() if k not in RESERVED_OPTIONS}
    deps_type = declared_deps_type(agent)
    if "deps" in kwargs and deps_type is not None and typed_deps:
        kwargs["deps"] = as_option(deps_type, kwargs["deps"], "deps", "deps_type")
    if isinstance(kwargs.get("usage_limits"), dict):
        from pydantic_ai.usage import UsageLimits

        try:
            kwargs["usage_limits"] = UsageLimits(**kwargs["usage_limits"])
        except TypeError as exc:
            raise ValueError(f"'usage_limits': {exc}") from None
    return kwargs


def output_retries(messages: Iterable[Any], output_tools: frozenset[str]) -> int:
    """How many times the run's output was rejected: PydanticAI's retry feedback (output validation failed, an
    output validator raised ``ModelRetry``, no usable output), an output tool's ``retried`` return, or a (v1)
    retry prompt tied to no tool or to an output tool."""
    count = 0
    for message in messages:
        for part in getattr(message, "parts", ()):
            kind = getattr(part, "part_kind", None)
            name = getattr(part, "tool_name", None)
            if kind == "retry-feedback" or (kind == "retry-prompt" and (not name or is_output_tool(name, output_tools))):
                count += 1
            elif kind == "tool-return" and is_output_tool(name, output_tools) and getattr(part, "outcome", "") == "retried":
                count += 1
    return count


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
    """PydanticAI messages (``ModelRequest``/``ModelResponse``) as OpenAI response messages, keyed on ``part_kind``;
    retries settled (``settle_retries``)."""
    out: list[Message] = []
    for message in messages:
        if getattr(message, "kind", None) == "response":
            out.extend(_response(message.parts, output_tools))
        else:
            out.extend(_request(getattr(message, "parts", ()), output_tools))
    return settle_retries(out)


def settle_retries(messages: list[Message]) -> list[Message]:
    """A tool call that asked for a retry (``ModelRetry``) and whose tool then succeeded is not a tool error
    (docs/targets/index.md): the retried results lose ``is_error`` and keep ``retried: true``; the result that succeeded records its
    ``retries``. Retries never followed by a success stay errors."""
    pending: dict[str, list[Message]] = {}
    for message in messages:
        if message.get("role") != "tool":
            continue
        name = str(message.get("name") or "")
        if message.pop("_retried", False):
            pending.setdefault(name, []).append(message)
        elif not message.get("is_error"):
            retried = pending.pop(name, [])
            for earlier in retried:
                earlier.pop("is_error", None)
                earlier["retried"] = True
            message["retries"] = len(retried)
    for left in pending.values():
        for message in left:
            message["retries_exhausted"] = True
    return messages


def _response(parts: Iterable[Any], output_tools: frozenset[str]) -> list[Message]:
    texts: list[str] = []
    calls: list[Message] = []
    results: list[Message] = []
    for part in parts:
        kind = part.part_kind
        if kind == "text" and part.content:
            texts.append(part.content)
        elif kind in ("tool-call", "builtin-tool-call") and not is_output_tool(part.tool_name, output_tools):
            calls.append(tool_call(part.tool_call_id, part.tool_name, arguments_of(part)))
        elif kind == "builtin-tool-return":
            results.append(_result(part))
    if not texts and not calls:
        return results
    return [assistant("\n\n".join(texts), calls), *results]


def arguments_of(part: Any) -> str:
    """A call's arguments as JSON text; arguments the model wrote that are not a JSON object are kept as it wrote
    them (PydanticAI's own rendering wraps them as ``{"INVALID_JSON": ...}``, which the model never sent)."""
    rendered = str(part.args_as_json_str())
    raw = part.args
    if isinstance(raw, str) and raw.strip():
        try:
            loaded = json.loads(raw)
        except ValueError:
            return raw
        if not isinstance(loaded, dict):
            return raw
    return rendered


def _request(parts: Iterable[Any], output_tools: frozenset[str]) -> list[Message]:
    """Tool results only: user prompts, system prompts, instructions and retry feedback are bookkeeping."""
    out: list[Message] = []
    for part in parts:
        kind = part.part_kind
        name = getattr(part, "tool_name", None)
        if kind == "tool-return" and not is_output_tool(name, output_tools):
            out.append(_result(part))
        elif kind == "retry-prompt" and name and not is_output_tool(name, output_tools):
            out.append({**tool_result(part.tool_call_id, part.model_response(), name=name, is_error=True),
                        "_retried": True})
    return out


def _result(part: Any) -> Message:
    try:
        content = part.model_response_str(wrap_if_error=False)
    except TypeError:  # PydanticAI v1: no error wrapping to turn off
        content = part.model_response_str()
    outcome = getattr(part, "outcome", "success")
    skipped = part.content == NOT_EXECUTED
    result = tool_result(part.tool_call_id, content, name=part.tool_name,
                         is_error=outcome in ERROR_OUTCOMES or skipped)
    if skipped:
        result["skipped"] = True
    if outcome == "retried":
        result["_retried"] = True
    return result
