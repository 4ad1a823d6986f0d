"""The Agents SDK's MCP servers under the tool plan (docs/hermetic.md, "MCP tools").

A planned agent's ``mcp_servers`` are copies of the user's (``MCPServerStdio``, ``MCPServerStreamableHttp``, ...)
whose ``call_tool`` asks the conversation's tool plan first, so mocks, tapes, faults and ``--hermetic`` apply to MCP
tools by name (and ``{mcp: NAME, from_tape: PATH}`` by the server's name). A server the user has not connected is
connected once for the run, by a task that holds it open (the SDK's connection lives in the task that made it) and
closes it when the adapter closes.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from ..tools import MockedToolError, acall, as_text


class ServerHolder:
    """Connects the servers a run's agents use, each once, and keeps them open until ``close``."""

    def __init__(self) -> None:
        self.tasks: list[asyncio.Task[None]] = []
        self.stop = asyncio.Event()
        self.lock = asyncio.Lock()
        self.ready: dict[int, asyncio.Future[None]] = {}

    async def connected(self, server: Any) -> None:
        """Wait until ``server`` is connected (connecting it, the first time)."""
        async with self.lock:
            if getattr(server, "session", None) is not None and id(server) not in self.ready:
                return  # the user's app connected it
            if id(server) not in self.ready:
                ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                self.ready[id(server)] = ready
                self.tasks.append(asyncio.get_running_loop().create_task(self._hold(server, ready)))
        await asyncio.shield(self.ready[id(server)])

    async def _hold(self, server: Any, ready: asyncio.Future[None]) -> None:
        try:
            await server.connect()
        except BaseException as exc:  # noqa: BLE001 - every waiting call sees why
            ready.set_exception(exc)
            return
        ready.set_result(None)
        try:
            await self.stop.wait()
        finally:
            await server.cleanup()

    async def close(self) -> None:
        self.stop.set()
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)


def planned_server(server: Any, holder: ServerHolder) -> Any:
    """A copy of an Agents SDK MCP server whose tool calls ask the tool plan first (the user's is not changed)."""
    from mcp.types import CallToolResult, TextContent

    _remember_secrets(server)
    planned = copy.copy(server)
    original = type(server).call_tool
    list_tools = type(server).list_tools
    name = str(getattr(server, "name", "") or "mcp")

    def result(text: str, error: bool = False) -> Any:
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=error)

    async def call_tool(tool_name: str, arguments: dict[str, Any] | None, meta: dict[str, Any] | None = None) -> Any:
        async def live() -> Any:
            await holder.connected(planned)
            return await original(planned, tool_name, arguments, meta)

        try:
            value = await acall(tool_name, dict(arguments or {}), live, server=name,
                                shape=lambda value: result(as_text(value)), record_as=_recorded)
        except MockedToolError as exc:
            return result(f"Error: {exc}", True)
        return result(value) if isinstance(value, str) else value  # an injected malformed answer

    async def listed(*args: Any, **kwargs: Any) -> Any:
        await holder.connected(planned)
        return await list_tools(planned, *args, **kwargs)

    planned.call_tool = call_tool
    planned.list_tools = listed
    return planned


def _remember_secrets(server: Any) -> None:
    """The secrets of an SDK server's ``params`` (a dict for HTTP, ``StdioServerParameters`` for stdio), as those of an
    ``evalcli.Agent``'s servers (``evalcli.mcp.remember_secrets``)."""
    from ..mcp import remember_secrets

    params = getattr(server, "params", None)
    url, headers, env, args = (params.get(key) if isinstance(params, dict) else getattr(params, key, None)
                               for key in ("url", "headers", "env", "args"))
    remember_secrets(url=url if isinstance(url, str) else None, headers=headers if isinstance(headers, dict) else None,
                     env=env if isinstance(env, dict) else None, args=args if isinstance(args, list | tuple) else ())


def _recorded(value: Any) -> Any:
    """A live ``CallToolResult`` as the record (and a tape) keeps it: its structured content, else its text."""
    from ..mcp import result_value

    return result_value(value)[0]
