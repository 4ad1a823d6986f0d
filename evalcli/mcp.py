"""MCP servers for ``evalcli.Agent`` (docs/hermetic.md, "MCP tools"): a stdio command or a streamable-HTTP URL whose
tools the agent offers the model, each call passing through the conversation's tool plan like a function tool's.

A server is listed once (its tools and their schemas), when the agent is first checked or run, all of an agent's
servers at once under one timeout; the servers that do not start, or do not answer, are one ``McpError`` naming
each one's command or URL. A turn opens each server it really calls
once (``Connections``), and closes it when the turn ends.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import math
import os
import shlex
import sys
import threading
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

from .errors import EvalcliError, ExitCode
from .records import record
from .secrets import environment_secrets, header_secrets, remember, secret_name, url_secrets

START_TIMEOUT = 60.0
"""Seconds an agent's servers have, together, to start and list their tools, unless ``EVALCLI_MCP_TIMEOUT`` says."""


class McpError(EvalcliError):
    """An MCP server that could not be reached: what it is (command or URL), and why."""

    exit_code = ExitCode.BAD_INPUT


@record(frozen=True)
class McpServer:
    """One ``mcp:`` entry: ``command`` (stdio, with ``env`` and ``cwd``) or ``url`` (streamable HTTP, with
    ``headers``), and the ``name`` a dataset mocks it by."""

    name: str
    command: tuple[str, ...] = ()
    url: str | None = None
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    prefix: str = ""
    """Offered to the model as ``PREFIX_NAME`` (two servers listing a tool of one name: docs/hermetic.md)."""

    @property
    def where(self) -> str:
        return f"the MCP server {self.url}" if self.url else f"the MCP server '{shlex.join(self.command)}'"


def remember_secrets(*, url: str | None = None, headers: Mapping[str, Any] | None = None,
                     env: Mapping[str, Any] | None = None, args: Sequence[Any] = ()) -> None:
    """Make the secrets an MCP server's configuration holds secrets of every output of this process (docs/secrets.md):
    its secret-named headers' values (``Authorization: Bearer X``), its URL's credentials, and the values of its
    secret-named environment variables (``WEATHER_API_KEY``, as long as a key: the environment's own rule), however
    the agent's code got them (a file, a vault), so a tool that echoes one never puts it in a tape, the database or a
    report (docs/hermetic.md, "MCP tools"); and the values of a stdio command's secret-named options (``--api-key
    X``, ``--token=X``), which its errors would otherwise print with the command."""
    found = header_secrets(headers or {}) | (url_secrets(url) if url else set()) | argument_secrets(args)
    found |= environment_secrets({str(k): str(v) for k, v in (env or {}).items() if v is not None})
    remember(found)


def argument_secrets(words: Sequence[Any]) -> set[str]:
    """The values of a command's options named like a secret (``secret_name``): ``--api-key X``, ``--token=X``."""
    found: set[str] = set()
    words = [str(word) for word in words]
    for i, word in enumerate(words):
        if not word.startswith("-"):
            continue
        name, equals, value = word.lstrip("-").partition("=")
        if not secret_name(name):
            continue
        if equals:
            found.add(value)
        elif i + 1 < len(words) and not words[i + 1].startswith("-"):
            found.add(words[i + 1])
    return {value for value in found if value}


def mcp_server(raw: Any) -> McpServer:
    """An ``mcp:`` entry as written: ``{command: "python server.py" | [..], args, env, cwd, name}`` or ``{url, headers,
    name}`` (the name defaults to the command's script or module, or the URL's host). Its secrets are remembered
    (``remember_secrets``)."""
    if isinstance(raw, McpServer):
        remember_secrets(url=raw.url, headers=raw.headers, env=raw.env, args=raw.command)
        return raw
    server = _parsed_server(raw)
    remember_secrets(url=server.url, headers=server.headers, env=server.env, args=server.command)
    return server


STDIO_KEYS = ("command", "args", "env", "cwd", "name", "prefix")
HTTP_KEYS = ("url", "headers", "name", "prefix")


def _parsed_server(raw: Any) -> McpServer:
    if not isinstance(raw, Mapping) or ("command" in raw) == ("url" in raw):
        raise ValueError(f"an mcp server is {{command: ...}} (stdio) or {{url: ...}} (streamable HTTP), not {raw!r}")
    known = HTTP_KEYS if "url" in raw else STDIO_KEYS
    unknown = [str(key) for key in raw if key not in known]
    if unknown:  # a misspelt `env` or `headers` would otherwise start the server without them, silently
        raise ValueError(f"an mcp server has no key {unknown[0]!r}: a {'url' if 'url' in raw else 'command'} server "
                         f"takes {', '.join(known)}")
    prefix = str(raw.get("prefix") or "")
    if "url" in raw:
        url = str(raw["url"])
        return McpServer(str(raw.get("name") or urlsplit(url).hostname or url), url=url,
                         headers={str(k): str(v) for k, v in (raw.get("headers") or {}).items()}, prefix=prefix)
    command = raw["command"]
    words = tuple(shlex.split(command) if isinstance(command, str) else map(str, command))
    words += tuple(map(str, raw.get("args") or ()))
    if not words:
        raise ValueError("an mcp server's command is empty")
    default = Path(words[-1]).name.removesuffix(".py").rsplit(".", 1)[-1]  # server.py, or -m package.server
    env = raw.get("env")
    return McpServer(str(raw.get("name") or default), words,
                     env=None if env is None else {str(k): str(v) for k, v in env.items()},
                     cwd=None if raw.get("cwd") is None else str(raw["cwd"]), prefix=prefix)


@record(frozen=True)
class McpTool:
    """A tool an MCP server lists: its name (as the model sees it: with its server's prefix), description and input
    schema, its server, and its name on the server (``remote``, when a prefix makes them differ)."""

    name: str
    description: str
    schema: dict[str, Any]
    server: McpServer
    remote: str = ""

    def openai_schema(self) -> dict[str, Any]:
        function: dict[str, Any] = {"name": self.name, "parameters": self.schema or {"type": "object", "properties": {}}}
        if self.description:
            function["description"] = self.description
        return {"type": "function", "function": function}


@contextlib.asynccontextmanager
async def session(server: McpServer, printed: Printed | None = None) -> AsyncIterator[Any]:
    """An initialized ``mcp.ClientSession`` with the server. ``printed``: a stdio server's stderr goes through it (and
    on to this process's stderr, as every server's does), so its last lines can say why it did not start."""
    from mcp import ClientSession

    async with contextlib.AsyncExitStack() as stack:
        if server.url is not None:
            from mcp.client.streamable_http import (  # type: ignore[attr-defined]  # re-exported by mcp 2.x
                create_mcp_http_client,
                streamable_http_client,
            )

            client = await stack.enter_async_context(create_mcp_http_client(headers=dict(server.headers)))
            streams = await stack.enter_async_context(streamable_http_client(server.url, http_client=client))
        else:
            from mcp.client.stdio import StdioServerParameters, stdio_client

            params = StdioServerParameters(command=server.command[0], args=list(server.command[1:]),
                                           env={**os.environ, **(server.env or {})}, cwd=server.cwd)
            errlog = _errlog() if printed is None else await stack.enter_async_context(printed)
            streams = await stack.enter_async_context(stdio_client(params, errlog=errlog))
        read, write = streams[0], streams[1]
        client_session = await stack.enter_async_context(ClientSession(read, write))
        await client_session.initialize()
        yield client_session


_ERRLOG: list[TextIO] = []
_ERRLOG_LOCK = threading.Lock()


def _errlog() -> TextIO:
    """Where a stdio server's stderr goes: a pipe whose lines this process writes to its own ``sys.stderr``, so the
    redaction of every output (docs/secrets.md) covers what a server prints (the key its env holds, in a log line);
    one pipe, read by one thread, for every server of the process."""
    with _ERRLOG_LOCK:
        if not _ERRLOG:
            read, write = os.pipe()
            reader = os.fdopen(read, "r", encoding="utf-8", errors="replace")
            threading.Thread(target=_relay, args=(reader,), name="evalcli-mcp-stderr", daemon=True).start()
            _ERRLOG.append(os.fdopen(write, "w", encoding="utf-8"))
        return _ERRLOG[0]


def _relay(reader: TextIO, kept: collections.deque[str] | None = None) -> None:
    for line in reader:
        if kept is not None and line.strip():
            kept.append(line.strip())
        try:
            sys.stderr.write(line)
            sys.stderr.flush()
        except (OSError, ValueError):  # a closed stderr at the end of the process
            if kept is None:
                return


class Printed:
    """A stdio server's stderr while it is listed: relayed to this process's stderr like every server's (``_errlog``),
    its last lines kept, so a server that exits at start (``fatal: WEATHER_DB is not set``, exit 1) is named with what
    it said, not only with the client's "Connection closed" (docs/hermetic.md, "MCP tools"). A pipe of its own: the
    shared one cannot tell servers apart."""

    LINES = 5

    def __init__(self) -> None:
        self.lines: collections.deque[str] = collections.deque(maxlen=self.LINES)
        self._thread: threading.Thread | None = None

    async def __aenter__(self) -> TextIO:
        read, write = os.pipe()
        reader = os.fdopen(read, "r", encoding="utf-8", errors="replace")
        self._thread = threading.Thread(target=_relay, args=(reader, self.lines), name="evalcli-mcp-stderr",
                                        daemon=True)
        self._thread.start()
        self._writer = os.fdopen(write, "w", encoding="utf-8")
        return self._writer

    async def __aexit__(self, *exc: object) -> None:
        self._writer.close()  # the server is gone (stdio_client ended it): the relay reads to the end
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 2)

    def said(self) -> str:
        """What it printed last, for an error (``""``: nothing)."""
        return f" (it printed: {' | '.join(self.lines)})" if self.lines else ""


def start_timeout() -> float:
    """Seconds an agent's MCP servers have, all together, to start and list their tools: ``EVALCLI_MCP_TIMEOUT``
    (default 60; docs/hermetic.md, "MCP tools"). A value that is not a number of seconds above 0 is an ``McpError``."""
    text = os.environ.get("EVALCLI_MCP_TIMEOUT", "").strip()
    if not text:
        return START_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise McpError(f"EVALCLI_MCP_TIMEOUT={text!r} is not a number of seconds above 0 (default {START_TIMEOUT:g})",
                       "fix or unset EVALCLI_MCP_TIMEOUT")
    return value


async def list_servers(servers: Sequence[McpServer]) -> list[list[McpTool]]:
    """Each server's tools, in order. The servers are listed at once, under one timeout (``start_timeout``): N hung
    servers cost one timeout, not N. One ``McpError`` names every server that did not start or answer in time."""
    timeout = start_timeout()
    deadline = asyncio.get_running_loop().time() + timeout
    results = await asyncio.gather(*(_listed(server, deadline) for server in servers), return_exceptions=True)
    failed = [(server, result) for server, result in zip(servers, results, strict=True) if isinstance(result, BaseException)]
    if failed:
        raise _not_listed(failed, timeout)
    return [result for result in results if not isinstance(result, BaseException)]


class _NotListed(Exception):
    """A server that did not list its tools (``error``), and what it printed (``said``)."""

    def __init__(self, error: BaseException, said: str) -> None:
        super().__init__(str(error))
        self.error, self.said = error, said


async def _listed(server: McpServer, deadline: float) -> list[McpTool]:
    printed = Printed() if server.url is None else None
    try:
        async with asyncio.timeout_at(deadline):
            async with session(server, printed) as opened:
                listed = await opened.list_tools()
    except Exception as exc:
        raise _NotListed(exc, printed.said() if printed is not None else "") from exc
    return [McpTool(f"{server.prefix}_{t.name}" if server.prefix else t.name, t.description or "",
                    dict(t.input_schema or {}), server, t.name) for t in listed.tools]


def _not_listed(failed: Sequence[tuple[McpServer, BaseException]], timeout: float) -> McpError:
    hint = ("check that the command runs (or the URL answers) on its own; its tools are listed when the agent is "
            "checked (EVALCLI_MCP_TIMEOUT: the seconds they have, default 60)")
    if len(failed) == 1:
        server, exc = failed[0]
        return McpError(f"{server.where} did not start or list its tools: {_reason(exc, timeout)}", hint)
    each = "; ".join(f"{server.where}: {_reason(exc, timeout)}" for server, exc in failed)
    return McpError(f"{len(failed)} MCP servers did not start or list their tools (listed together, within "
                    f"{timeout:g}s): {each}", hint)


def list_servers_now(servers: Sequence[McpServer]) -> list[list[McpTool]]:
    """``list_servers`` from code that is not async (or inside a running loop: on a thread of its own)."""
    found: list[list[list[McpTool]]] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            found.append(asyncio.run(list_servers(servers)))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            failed.append(exc)

    if not servers:
        return []
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    return found[0]


def _reason(exc: BaseException, timeout: float) -> str:
    if isinstance(exc, _NotListed):
        return _reason(exc.error, timeout) + exc.said
    inner = getattr(exc, "exceptions", None)
    if inner:
        return _reason(inner[0], timeout)
    if isinstance(exc, TimeoutError):
        return f"no answer within {timeout:g}s"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def result_value(result: Any) -> tuple[Any, bool]:
    """A ``CallToolResult`` as the tool's value (its structured content, else its content blocks as text, one line
    each: ``content_text``) and whether it is an error."""
    structured = getattr(result, "structured_content", None)
    texts = [content_text(c) for c in getattr(result, "content", None) or ()]
    text = "\n".join(t for t in texts if t is not None)
    value: Any = structured if structured is not None else text
    if isinstance(value, dict) and set(value) == {"result"}:
        value = value["result"]  # a tool returning a plain value: its structured content wraps it
    return value, bool(getattr(result, "is_error", False))


def content_text(block: Any) -> str | None:
    """One content block of a tool's result as text (docs/hermetic.md, "MCP tools"): a text block's text, an embedded
    text resource's text; an image, audio or binary resource is named with its type and size (``[image: image/png,
    12 bytes]``), a resource link with its name and URI, so the model, the record and a tape see what came back
    rather than nothing."""
    text = getattr(block, "text", None)
    if isinstance(text, str):
        return text
    kind = getattr(block, "type", None)
    if kind in ("image", "audio"):
        return f"[{kind}: {getattr(block, 'mime_type', None) or 'unknown type'}, {_size(getattr(block, 'data', ''))}]"
    if kind == "resource_link":
        return f"[resource link: {getattr(block, 'name', '')}, {getattr(block, 'uri', '')}]"
    resource = getattr(block, "resource", None)
    if resource is not None:
        if isinstance(getattr(resource, "text", None), str):
            return str(resource.text)
        return f"[resource: {getattr(resource, 'uri', '')}, {getattr(resource, 'mime_type', None) or 'unknown type'}, " \
               f"{_size(getattr(resource, 'blob', ''))}]"
    return None if kind is None else f"[{kind}]"


def _size(data: Any) -> str:
    """The size of base64 ``data`` once decoded."""
    text = str(data or "").strip()
    return f"{max(len(text) * 3 // 4 - text[-2:].count('='), 0)} bytes"


class McpToolFailed(Exception):
    """An MCP tool that answered with an error result."""


class Connections:
    """The servers a turn opened (each once, on its first live call), closed when the turn ends."""

    def __init__(self) -> None:
        self.stack = contextlib.AsyncExitStack()
        self.open: dict[int, Any] = {}
        self.lock = asyncio.Lock()

    async def __aenter__(self) -> Connections:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stack.aclose()

    async def call(self, tool: McpTool, arguments: dict[str, Any]) -> Any:
        async with self.lock:
            if id(tool.server) not in self.open:
                self.open[id(tool.server)] = await self._opened(tool.server)
        result = await self.open[id(tool.server)].call_tool(tool.remote or tool.name, arguments)
        value, failed = result_value(result)
        if failed:
            raise McpToolFailed(value if isinstance(value, str) else json.dumps(value))
        return value

    async def _opened(self, server: McpServer) -> Any:
        """The server started (a stdio server: a process of this turn's) and initialized within ``start_timeout``
        seconds, as when it was listed: a server that never answers fails the call, rather than hanging the turn."""
        timeout = start_timeout()
        try:
            async with asyncio.timeout(timeout):
                return await self.stack.enter_async_context(session(server))
        except TimeoutError:
            raise McpToolFailed(f"{server.where} did not start or answer within {timeout:g}s (EVALCLI_MCP_TIMEOUT)") \
                from None
