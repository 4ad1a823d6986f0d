"""The LangGraph adapter's tools (docs/hermetic.md): listing the tools of a graph's ``ToolNode`` nodes (``create_agent`` and
``create_react_agent`` graphs hold one), and a copy of the graph whose tool nodes ask the conversation's tool plan
through ``ToolNode``'s own ``wrap_tool_call``/``awrap_tool_call`` hooks. The user's graph and its nodes are not
changed. A mock's value becomes the ``ToolMessage``; its ``raises`` a ``ToolMessage(status="error")``, as a tool
that handles its errors reports them."""

from __future__ import annotations

import copy
from typing import Any

from langchain_core.messages import ToolMessage

from ..tools import MockedToolError, acall, as_text, call


def tool_nodes(graph: Any) -> list[Any]:
    """The graph's ``ToolNode`` nodes (subclasses included)."""
    from langgraph.prebuilt import ToolNode

    nodes = getattr(graph, "nodes", None) or {}
    return [node.bound for node in nodes.values() if isinstance(getattr(node, "bound", None), ToolNode)]


def graph_tools(graph: Any) -> dict[str, Any] | None:
    """Each tool's argument schema (JSON), by name, over the graph's tool nodes; ``None`` when it has none (a custom
    graph: its tools, if any, are unknown)."""
    nodes = tool_nodes(graph)
    if not nodes:
        return None
    tools: dict[str, Any] = {}
    for node in nodes:
        for name, tool in getattr(node, "_tools_by_name", {}).items():
            try:
                schema = tool.tool_call_schema  # the arguments the model gives (injected ones left out)
                tools[name] = schema if isinstance(schema, dict) else schema.model_json_schema()
            except Exception:  # noqa: BLE001 - a schema that cannot be read is unknown, not an error
                tools[name] = None
    return tools


def planned_graph(graph: Any) -> Any:
    """A copy of the graph whose tool nodes ask the tool plan (the graph itself when it has no tool node)."""
    from langgraph.prebuilt import ToolNode

    nodes = getattr(graph, "nodes", None) or {}
    if not any(isinstance(getattr(node, "bound", None), ToolNode) for node in nodes.values()):
        return graph
    planned = {name: node.copy({"bound": planned_node(node.bound)}) if isinstance(node.bound, ToolNode) else node
               for name, node in nodes.items()}
    return graph.copy(update={"nodes": planned})


def planned_node(node: Any) -> Any:
    """A copy of a ``ToolNode`` with wrappers that ask the tool plan first, then the node's own wrappers."""
    clone = copy.copy(node)
    clone.func, clone.afunc = clone._func, clone._afunc  # the copy's own methods, not the original's
    theirs, atheirs = node._wrap_tool_call, node._awrap_tool_call

    def message(request: Any, value: Any = None, error: str | None = None) -> ToolMessage:
        tool_call = request.tool_call
        if error is not None:
            return ToolMessage(f"Error: {error}", tool_call_id=tool_call["id"], name=tool_call["name"], status="error")
        return ToolMessage(as_text(value), tool_call_id=tool_call["id"], name=tool_call["name"])

    def wrap(request: Any, execute: Any) -> Any:
        tool_call = request.tool_call
        try:
            return call(tool_call["name"], tool_call.get("args") or {},
                        lambda: theirs(request, execute) if theirs is not None else execute(request),
                        call_id=tool_call.get("id"), shape=lambda value: message(request, value), record_as=_content)
        except MockedToolError as exc:
            return message(request, error=str(exc))

    async def awrap(request: Any, execute: Any) -> Any:
        tool_call = request.tool_call

        async def live() -> Any:
            return await (atheirs(request, execute) if atheirs is not None else execute(request))

        try:
            return await acall(tool_call["name"], tool_call.get("args") or {}, live, call_id=tool_call.get("id"),
                               shape=lambda value: message(request, value), record_as=_content)
        except MockedToolError as exc:
            return message(request, error=str(exc))

    clone._wrap_tool_call = wrap
    # a node with only a sync wrapper of its own keeps running it when called async (ToolNode falls back to it)
    clone._awrap_tool_call = awrap if atheirs is not None or theirs is None else None
    return clone


def _content(result: Any) -> Any:
    """What a tape keeps of a live tool node call: the ``ToolMessage``'s content."""
    return result.content if isinstance(result, ToolMessage) else result
