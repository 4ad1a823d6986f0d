"""A framework agent's own MCP servers, as evalcli sees them (docs/hermetic.md, "MCP tools").

Each server object a framework holds (the Agents SDK's ``MCPServerStdio``/``MCPServerStreamableHttp``, PydanticAI's
``MCPToolset``, ADK's ``McpToolset``) is described as an ``evalcli.mcp.McpServer`` (its command or URL) and listed
once, when the target is checked (all at once, under one timeout), by the same client that lists ``evalcli.Agent``'s
servers: so the servers that do not start are one validation error naming each command or URL, and ``tools:`` is
checked against the tools the servers really list ("did you mean"). A server evalcli cannot describe (an in-process
server, a custom transport) is named but not listed: its tools are then unknown, and not checked.

At call time the adapters pass ``server=`` (``server_of``) to the one tool-plan call, ``evalcli.tools.acall``, so
mocks, tapes, faults, ``--hermetic`` and ``{mcp: NAME, from_tape: PATH}`` apply to every framework alike.

A toolset with a name prefix (PydanticAI's ``.prefixed('wx')``, ADK's ``tool_name_prefix='wx'``) shows the model
``wx_get_weather`` for the server's ``get_weather``: every name here is the one the model sees, mapped to and from
the server's by ``model_name`` and ``ServerTools.server_tool`` alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from ..mcp import McpError, McpServer, McpTool, list_servers_now, mcp_server


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


def model_name(prefix: str, tool: str) -> str:
    """The name the model sees for a server's ``tool`` in a toolset with name ``prefix`` (``""``: none); both
    PydanticAI's ``PrefixedToolset`` and ADK's ``tool_name_prefix`` join them with ``_``."""
    return f"{prefix}_{tool}" if prefix else tool


Listed = tuple[str, McpServer | None] | tuple[str, McpServer | None, str]
"""A server as the adapters find it: its name, its description, and the prefix of its tools' names (if any)."""


def _one_server_each(first: tuple[str, McpServer], other: tuple[str, McpServer], tool: str) -> None:
    """An ``McpError`` when two of the agent's servers list a tool under the same name: the model, the dataset and
    the tapes could not tell their calls apart (docs/hermetic.md, "MCP tools")."""
    if first[1] is not other[1] and first[1] != other[1]:
        raise McpError(f"two of the agent's MCP servers list a tool '{tool}': {first[0]} ({first[1].where}) and "
                       f"{other[0]} ({other[1].where}); their calls cannot be told apart",
                       hint="give one toolset a name prefix (PydanticAI: toolset.prefixed('x'); "
                            "ADK: McpToolset(..., tool_name_prefix='x'))")


def _listed(servers: Iterable[McpServer | None]) -> list[list[McpTool] | None]:
    """Each server's tools (``None``: a server evalcli cannot describe), every server listed at once under one
    timeout: an ``McpError`` names all that did not answer (docs/hermetic.md, "MCP tools")."""
    given = list(servers)
    distinct = [s for i, s in enumerate(given) if s is not None and s not in given[:i]]
    listed = list_servers_now(distinct)
    return [None if s is None else listed[distinct.index(s)] for s in given]


class ServerTools:
    """The agent's MCP servers by name and the tools each lists (``None``: not listed), listed at construction
    (an ``McpError`` naming a server that does not start). Each tool is kept under the name the model sees."""

    def __init__(self, servers: Iterable[Listed]) -> None:
        self.tools: dict[str, list[McpTool] | None] = {}
        self.prefixes: dict[str, str] = {}
        self.places: dict[str, list[str]] = {}
        """Where each distinct server of a name runs (two make ``{mcp: NAME}`` ambiguous)."""
        seen: list[tuple[str, McpServer | None, str]] = []
        for name, server, *rest in servers:
            entry = (name, server, rest[0] if rest else "")
            if entry not in seen:  # the same server, met again (on a handoff agent, a sub-agent), is listed once
                seen.append(entry)
        owner: dict[str, tuple[str, McpServer]] = {}
        for (name, server, prefix), tools in zip(seen, _listed(server for _, server, _ in seen), strict=True):
            listed = None if tools is None else [replace(t, name=model_name(prefix, t.name)) for t in tools]
            for tool in listed or ():
                _one_server_each(owner.setdefault(tool.name, (name, tool.server)), (name, tool.server), tool.name)
            self.prefixes[name] = prefix
            where = "an undescribed server" if server is None else server.where
            if server is None or where not in self.places.get(name, ()):
                self.places.setdefault(name, []).append(where)
            known = self.tools.get(name)
            self.tools[name] = listed if known is None else [*known, *(listed or ())]

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
        found = self.server_tool(tool)
        return found[0] if found is not None else None

    def server_tool(self, tool: str) -> tuple[str, str] | None:
        """The server that lists the tool the model calls ``tool``, and that tool's name on the server."""
        for name, tools in self.tools.items():
            if any(t.name == tool for t in tools or ()):
                return name, tool.removeprefix(model_name(self.prefixes[name], ""))
        return None
