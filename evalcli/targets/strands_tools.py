"""The ``strands`` adapter's tools (docs/targets/strands.md): listing a Strands agent's tools, and answering them from
the conversation's tool plan (docs/hermetic.md).

Strands asks its hooks before every tool call (``BeforeToolCallEvent``), and a hook may choose the tool that runs:
the conversation's copy of the agent gets a hook that puts ``PlannedTool`` in front of the tool the model called
(the user's agent and its tool registry are not changed). ``PlannedTool`` asks the plan: a live call streams the
tool as Strands would (its error result, a failed call, is recorded as the call's error); a mock's or a tape's value
is the tool's result (text: JSON for anything but a string); a mock's ``raises``, or a call ``--hermetic`` refuses,
raises in the tool, which Strands reports to the model as a failed tool, as it reports the tool's own exception.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from strands.types.tools import AgentTool

from ..tools import acall, as_text


def tool_schemas(agent: Any) -> dict[str, Any]:
    """Each tool's input JSON schema, by name, from the agent's tool registry."""
    tools: dict[str, Any] = {}
    for name, tool in agent.tool_registry.registry.items():
        try:
            schema = tool.tool_spec.get("inputSchema", {})
        except Exception:  # noqa: BLE001 - a tool whose spec cannot be read: its schema is unknown
            schema = None
        tools[name] = schema.get("json", schema) if isinstance(schema, dict) else None
    return tools


def plan_tools(event: Any) -> None:
    """A ``BeforeToolCallEvent`` hook: the tool the model called runs behind the tool plan."""
    tool = event.selected_tool
    if tool is not None and not isinstance(tool, PlannedTool):
        event.selected_tool = PlannedTool(tool)


class _Failed(Exception):
    """A live call whose result is an error (the tool raised; Strands made it an error result)."""

    def __init__(self, text: str, events: list[Any]) -> None:
        super().__init__(text)
        self.events = events


class PlannedTool(AgentTool):  # type: ignore[misc,unused-ignore]  # Any where the framework is not installed
    """The tool the model called, behind the conversation's tool plan."""

    def __init__(self, tool: Any) -> None:
        super().__init__()
        self.tool = tool

    @property
    def tool_name(self) -> str:
        return str(self.tool.tool_name)

    @property
    def tool_spec(self) -> Any:
        return self.tool.tool_spec

    @property
    def tool_type(self) -> str:
        return str(self.tool.tool_type)

    async def stream(self, tool_use: Any, invocation_state: dict[str, Any], **kwargs: Any) -> AsyncGenerator[Any, None]:
        from strands.types._events import ToolResultEvent

        events: list[Any] = []

        async def live() -> Any:
            seen = [event async for event in self.tool.stream(tool_use, invocation_state, **kwargs)]
            result = result_of(seen)
            if isinstance(result, dict) and result.get("status") == "error":
                raise _Failed(content_text(result), seen)
            events.extend(seen)
            return result

        arguments = tool_use.get("input")
        try:
            value = await acall(self.tool_name, arguments if isinstance(arguments, dict) else {}, live,
                                call_id=tool_use.get("toolUseId"), record_as=_recorded)
        except _Failed as failed:
            for event in failed.events:
                yield event
            return
        if events:
            for event in events:
                yield event
            return
        yield ToolResultEvent({"toolUseId": str(tool_use.get("toolUseId")), "status": "success",
                               "content": [{"text": as_text(value)}]})


def result_of(events: list[Any]) -> Any:
    """The tool result a tool's events end with (a ``ToolResultEvent``'s, else the last raw value)."""
    if not events:
        return None
    last = events[-1]
    found = getattr(last, "tool_result", None)
    return found if found is not None else last


def content_text(result: Any) -> str:
    """A ``ToolResult``'s content as text (its text blocks; JSON blocks as JSON)."""
    if not isinstance(result, dict):
        return as_text(result)
    parts = []
    for block in result.get("content") or ():
        if isinstance(block, dict) and "text" in block:
            parts.append(str(block["text"]))
        elif isinstance(block, dict) and "json" in block:
            parts.append(as_text(block["json"]))
    return "\n".join(parts)


def _recorded(result: Any) -> Any:
    """What a tape keeps of a live call: its result's content as text."""
    return content_text(result) if isinstance(result, dict) and "content" in result else result
