"""The ``google_adk`` adapter's tools (docs/targets/google-adk.md): listing an ADK agent tree's tools, and the runner
plugin that answers them from each conversation's tool plan (docs/hermetic.md).

ADK's ``Runner`` takes plugins, whose callbacks run for every agent of the tree before the agents' own: evalcli's
runner (never the user's agent) gets ``ToolPlanPlugin``. Its ``before_tool_callback`` asks the plan: a mock's or a
tape's value is the tool's response (ADK then skips the tool, as it does for any callback that answers); a mock's
``raises`` goes to the agent's own ``on_tool_error_callback`` as the tool's exception would, and ends the run when the
agent has none (as a live tool's exception does); a call ``--hermetic`` refuses ends the run. Seeded faults apply
first, as for every adapter: an injected failure is handled as a mock's ``raises``, a malformed answer is the mock's,
the tape's or the live tool's cut off halfway. A live call runs as ADK
runs it, the agent's own tool callbacks included, and is recorded when it returns (``after_tool_callback``) or fails
(``on_tool_error_callback``, which notes the call as failed and leaves the answer to the agent's handlers).
ADK's ``transfer_to_agent`` is a handoff, never the plan's.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from collections.abc import Callable, Iterator
from typing import Any

from google.adk.plugins.base_plugin import BasePlugin

from ..tools import MockedToolError, ToolRefused
from ..tools.plan import ToolPlan, answer_wait, answered, current_plan, fail_if_faulted, live_result, unattributed
from .framework_mcp import Listed, ServerTools, described
from .graph import walk

TRANSFER = "transfer_to_agent"
"""ADK's own tool that hands the conversation to another agent of the tree (a handoff, not the agent's tool)."""
PLUGIN_NAME = "evalcli_tool_plan"


def agent_tree(agent: Any) -> Iterator[Any]:
    """The agent and every agent below it, each once: its sub-agents, and the agents its tools wrap (an ``AgentTool``
    runs its agent on a runner of its own, which inherits evalcli's plugin: their tools are the plan's too)."""
    return walk(agent, _below)


def _below(agent: Any) -> list[Any]:
    wrapped = [getattr(tool, "agent", None) for tool in getattr(agent, "tools", None) or () if _is_agent_tool(tool)]
    return [*(getattr(agent, "sub_agents", None) or ()), *wrapped]


def _is_agent_tool(tool: Any) -> bool:
    return any(c.__name__ == "AgentTool" and c.__module__.startswith("google.adk.") for c in type(tool).__mro__)


def mcp_toolsets(agent: Any) -> list[Listed]:
    """The agent tree's MCP toolsets (``McpToolset``), each by its name (its ``tool_name_prefix``, else its command's
    script or its URL's host) and as evalcli describes it (docs/hermetic.md, "MCP tools")."""
    found: list[Listed] = []
    for each in agent_tree(agent):
        for tool in getattr(each, "tools", None) or ():
            if type(tool).__name__ == "McpToolset":
                prefix = getattr(tool, "tool_name_prefix", None) or ""
                server = described(tool, prefix or None)
                found.append((server.name if server is not None else "mcp", server, prefix))
    return found


def tool_schemas(agent: Any, servers: ServerTools) -> dict[str, Any] | None:
    """Each tool's JSON schema (of its parameters), by name, over the agent tree, its MCP toolsets' as ``servers``
    listed them; ``None`` when an agent has another toolset (OpenAPI...), whose tools are known only at run time."""
    from google.adk.tools.base_tool import BaseTool
    from google.adk.tools.base_toolset import BaseToolset

    listed = servers.schemas()
    if listed is None:
        return None
    tools: dict[str, Any] = dict(listed)
    for each in agent_tree(agent):
        for tool in getattr(each, "tools", None) or ():
            if type(tool).__name__ == "McpToolset":
                continue
            if isinstance(tool, BaseToolset):
                return None
            if isinstance(tool, BaseTool):
                tools[tool.name] = _schema(tool)
            elif callable(tool):
                from google.adk.tools.function_tool import FunctionTool

                tools[getattr(tool, "__name__", str(tool))] = _schema(FunctionTool(tool))
    return tools


def _schema(tool: Any) -> Any:
    try:
        declaration = tool._get_declaration()  # the declaration ADK sends the model (no public accessor)
    except Exception:  # noqa: BLE001 - a tool whose declaration cannot be built: its schema is unknown
        return None
    if declaration is None:
        return None
    if declaration.parameters_json_schema is not None:
        return declaration.parameters_json_schema
    parameters = declaration.parameters
    return parameters.model_dump(mode="json", exclude_none=True) if parameters is not None else None


class ToolPlanPlugin(BasePlugin):  # type: ignore[misc,unused-ignore]  # Any where the framework is not installed
    """Answers the tools of every agent the runner runs from the current conversation's tool plan; notes the call ids
    of the tools that failed (``failed``, read by the session: those results are ``is_error``)."""

    def __init__(self, servers: ServerTools) -> None:
        super().__init__(name=PLUGIN_NAME)
        self.servers = servers
        self.spoiled: set[Any] = set()
        """The live calls an injected fault answers malformed (by call id): cut off when they return."""

    async def before_tool_callback(self, *, tool: Any, tool_args: dict[str, Any], tool_context: Any) -> Any:
        name = tool.name
        if name == TRANSFER:
            return None
        plan = current_plan()
        if plan is None:
            unattributed(name, tool_args)
            return None
        call_id = tool_context.function_call_id
        server = self.servers.server_of(name)
        injected = plan.fault(name)  # seeded faults, as for every adapter's tools (docs/hermetic.md, "Faults")
        if injected is not None and injected[1].latency:
            await asyncio.sleep(injected[1].latency)
        try:
            fail_if_faulted(plan, name, tool_args, injected, call_id)
        except MockedToolError as exc:
            note_failed(call_id)
            return await _handled(tool, tool_args, tool_context, exc)
        spoiled = injected is not None and injected[1].malformed
        source, answer = plan.decide(name, tool_args, server)
        if source == "live":
            if spoiled:
                self.spoiled.add(call_id)  # the live answer, cut off when it returns (after_tool_callback)
            return None
        if source == "refused":
            plan.record(name, tool_args, "refused", error=plan.refusals[-1], call_id=call_id, refused=True)
            raise ToolRefused(plan.refusals[-1])
        assert answer is not None
        wait, late = answer_wait(plan, name, tool_args, injected, answer, call_id)
        if wait:
            await asyncio.sleep(wait)
        if late is not None:
            note_failed(call_id)
            return await _handled(tool, tool_args, tool_context, late)
        if answer.raises is not None:
            plan.record(name, tool_args, source, error=answer.raises, call_id=call_id)
            note_failed(call_id)
            return await _handled(tool, tool_args, tool_context, MockedToolError(answer.raises))
        if spoiled:
            return {"result": answered(plan, name, tool_args, source, answer, call_id, spoiled)}
        plan.record(name, tool_args, source, result=answer.returns, call_id=call_id)
        return answer.returns if isinstance(answer.returns, dict) else {"result": answer.returns}

    async def after_model_callback(self, *, callback_context: Any, llm_response: Any) -> Any:
        """A model call of a runner the turn's own events never show (an ``AgentTool``'s): its usage is the turn's."""
        turn = TURN_SESSION.get()
        if turn is not None and not getattr(llm_response, "partial", False) \
                and getattr(llm_response, "usage_metadata", None) is not None \
                and callback_context.session.id != turn[0]:
            turn[1](str(callback_context.agent_name), llm_response.usage_metadata)
        return None

    async def after_tool_callback(self, *, tool: Any, tool_args: dict[str, Any], tool_context: Any,
                                  result: Any) -> Any:
        plan = current_plan()
        call_id = tool_context.function_call_id
        if plan is not None and tool.name != TRANSFER and not _answered(plan, call_id):
            if call_id in self.spoiled:  # an injected malformed answer: the live one, cut off halfway
                self.spoiled.discard(call_id)
                return {"result": live_result(plan, tool.name, tool_args, result, call_id, None, True)}
            plan.record(tool.name, tool_args, "live", result=result, call_id=call_id)
        return None

    async def on_tool_error_callback(self, *, tool: Any, tool_args: dict[str, Any], tool_context: Any,
                                     error: Exception) -> Any:
        note_failed(tool_context.function_call_id)
        plan = current_plan()
        if plan is not None:
            if tool.name != TRANSFER and not _answered(plan, tool_context.function_call_id):
                plan.record(tool.name, tool_args, "live", error=str(error) or type(error).__name__,
                            call_id=tool_context.function_call_id)
        return None  # the agent's own error handlers answer (or the run ends, as ADK does)


TURN_SESSION: contextvars.ContextVar[tuple[str, Callable[[str, Any], None]] | None] = contextvars.ContextVar(
    "evalcli_adk_turn_session", default=None)
"""The turn being played: its ADK session id, and what records a model call's usage (agent name, usage metadata) made
on another runner's session inside it (set by the session around each run)."""

FAILED: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar("evalcli_adk_failed", default=None)
"""The call ids of the tools that failed in the turn being played, once per failure, in order: set by the session
around each run (ADK runs the callbacks in the turn's context). A model that reuses call ids (``call_0`` in every
reply) makes several calls of one id: each failure marks one result."""


def note_failed(call_id: Any) -> None:
    found = FAILED.get()
    if found is not None:
        found.append(call_id)


def _answered(plan: ToolPlan, call_id: Any) -> bool:
    """Whether the plan already recorded this call (a mock or tape answered it)."""
    return call_id is not None and any(c.call_id == call_id for c in plan.calls)


async def _handled(tool: Any, args: dict[str, Any], tool_context: Any, error: MockedToolError) -> Any:
    """A mocked failure, as ADK handles a tool's exception: the agent's ``on_tool_error_callback`` answers it, else it
    ends the run."""
    invocation = getattr(tool_context, "_invocation_context", None)
    agent = getattr(invocation, "agent", None)
    for callback in getattr(agent, "canonical_on_tool_error_callbacks", None) or ():
        answer = callback(tool=tool, args=args, tool_context=tool_context, error=error)
        if inspect.isawaitable(answer):
            answer = await answer
        if answer is not None:
            return answer
    raise error
