"""A framework agent's own MCP servers, as evalcli sees them (docs/hermetic.md, "MCP tools").

Each server object a framework holds (the Agents SDK's ``MCPServerStdio``/``MCPServerStreamableHttp``, PydanticAI's
``MCPToolset``, ADK's ``McpToolset``) is described as an ``evalcli.mcp.McpServer`` (its command or URL) and listed
once, when the target is checked, by the same client that lists ``evalcli.Agent``'s servers: so a server that does
not start is a validation error naming its command or URL, and ``tools:`` is checked against the tools the servers
really list ("did you mean"). A server evalcli cannot describe (an in-process server, a custom transport) is named
but not listed: its tools are then unknown, and not checked.

At call time the adapters pass ``server=`` (``server_of``) to the one tool-plan call, ``evalcli.tools.acall``, so
mocks, tapes, faults, ``--hermetic`` and ``{mcp: NAME, from_tape: PATH}`` apply to every framework alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..mcp import McpServer, McpTool, list_tools_now, mcp_server


def described(server: Any, name: str | None = None) -> McpServer | None:
    """A framework's MCP server object as an ``McpServer`` (``None``: not one evalcli can start on its own)."""
    params = getattr(server, "params", None)  # the Agents SDK (a StdioServerParameters, or a dict with url)
    transport = getattr(getattr(server, "client", None), "transport", None)  # PydanticAI's MCPToolset (FastMCP)
    connection = getattr(server, "_connection_params", None) or getattr(server, "connection_params", None)  # ADK
    for source in (params, transport, connection):
        found = _from_parts(source, name)
        if found is not None:
            return found
    return None


def _from_parts(source: Any, name: str | None) -> McpServer | None:
    if source is None:
        return None
    inner = getattr(source, "server_params", None)  # ADK's StdioConnectionParams wraps StdioServerParameters
    if inner is not None:
        source = inner
    def get(key: str) -> Any:
        return source.get(key) if isinstance(source, Mapping) else getattr(source, key, None)

    raw: dict[str, Any] = {"name": name} if name else {}
    url, command = get("url"), get("command")
    if isinstance(url, str):
        return mcp_server({**raw, "url": url, "headers": dict(get("headers") or {})})
    if isinstance(command, str) and command:
        env = get("env")
        return mcp_server({**raw, "command": [command, *map(str, get("args") or ())],
                           **({"env": dict(env)} if env else {}),
                           **({"cwd": str(get("cwd"))} if get("cwd") else {})})
    return None


class ServerTools:
    """The agent's MCP servers by name and the tools each lists (``None``: not listed), listed at construction
    (an ``McpError`` naming a server that does not start)."""

    def __init__(self, servers: Iterable[tuple[str, McpServer | None]]) -> None:
        self.tools: dict[str, list[McpTool] | None] = {}
        for name, server in servers:
            if name not in self.tools or self.tools[name] is None:
                self.tools[name] = None if server is None else list_tools_now(server)

    def __bool__(self) -> bool:
        return bool(self.tools)

    def names(self) -> dict[str, list[str]]:
        """Each server's tool names, by the server's name (what ``{mcp: NAME}`` is checked against)."""
        return {name: [t.name for t in tools or ()] for name, tools in self.tools.items()}

    def schemas(self) -> dict[str, Any] | None:
        """Every listed tool's input schema, by name; ``None`` when a server's tools are unknown."""
        if any(tools is None for tools in self.tools.values()):
            return None
        return {t.name: t.schema for tools in self.tools.values() for t in tools or ()}

    def server_of(self, tool: str) -> str | None:
        """The name of the server that lists ``tool`` (``None``: none does, or it is not known)."""
        return next((name for name, tools in self.tools.items() if any(t.name == tool for t in tools or ())), None)
