"""``evalcli.Agent``: a tool-calling LLM agent over litellm, and ``evalcli.Memory``, its SQLite history.

An agent turn sends the instructions, the thread's earlier turns (with memory) and the input, runs
the tools the model asks for, sends their results back, and stops when the model answers without
calling a tool, or fails when ``max_steps`` model calls were not enough. ``generate`` returns this
turn's response messages in OpenAI format, which is what evalcli scores.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import sqlite3
import threading
import traceback
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from os import PathLike
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from .errors import EvalcliError, ExitCode
from .llm import LLMClient, LLMSettings
from .mcp import Connections, McpTool, list_servers_now, mcp_server
from .messages import Message
from .tools import MockedToolError, acall

Tool = Callable[..., Any]


class AgentError(EvalcliError):
    """An agent turn that could not finish (e.g. ``max_steps`` exhausted); the turn is an error."""

    exit_code = ExitCode.ERRORED


class Memory:
    """Message history in SQLite, per (resource, thread): a thread sees only its own earlier turns."""

    def __init__(self, path: str | PathLike[str]) -> None:
        self.path = str(path)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    @property
    def _conn(self) -> sqlite3.Connection:
        # opened on first use, so importing a module that builds an Agent creates no file
        if self._db is None:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
            conn.execute("PRAGMA busy_timeout = 30000")
            if self.path != ":memory:":
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS memory_messages ("
                " id INTEGER PRIMARY KEY, resource TEXT NOT NULL, thread TEXT NOT NULL,"
                " message TEXT NOT NULL, created_at TEXT NOT NULL)"
            )
            conn.execute("CREATE INDEX IF NOT EXISTS memory_messages_thread ON memory_messages(resource, thread, id)")
            self._db = conn
        return self._db

    def messages(self, resource: str, thread: str) -> list[Message]:
        """Every stored message of this thread of this resource, oldest first."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT message FROM memory_messages WHERE resource = ? AND thread = ? ORDER BY id",
                (resource, thread),
            ).fetchall()
        return [json.loads(row[0]) for row in rows]

    def append(self, resource: str, thread: str, messages: Sequence[Message]) -> None:
        """Store messages at the end of this thread, all or none."""
        now = datetime.now(UTC).isoformat()
        rows = [(resource, thread, json.dumps(m, default=str), now) for m in messages]
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.executemany(
                    "INSERT INTO memory_messages (resource, thread, message, created_at) VALUES (?, ?, ?, ?)", rows
                )
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:  # SQLite may have rolled it back already (a full disk, an interrupt)
                    self._conn.execute("ROLLBACK")
                raise

    def threads(self, resource: str) -> list[str]:
        """Threads with stored messages for this resource."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT DISTINCT thread FROM memory_messages WHERE resource = ? ORDER BY thread", (resource,)
            ).fetchall()
        return [row[0] for row in rows]

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


class _ToolModel(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)


class FunctionTool:
    """A Python function the model may call, with its JSON schema derived from hints and docstring."""

    def __init__(self, func: Tool) -> None:
        self.func = func
        self.name: str = func.__name__
        description, params = parse_docstring(inspect.getdoc(func) or "")
        self.description = description
        hints = get_type_hints(func)
        fields: dict[str, Any] = {}
        for name, param in inspect.signature(func).parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            default = ... if param.default is param.empty else param.default
            fields[name] = (hints.get(name, Any), Field(default, description=params.get(name)))
        self.arguments: type[BaseModel] = create_model(f"{self.name}_arguments", __base__=_ToolModel, **fields)

    def schema(self) -> dict[str, Any]:
        """The OpenAI ``tools`` entry of this function."""
        parameters = _without_titles(self.arguments.model_json_schema())
        function: dict[str, Any] = {"name": self.name, "parameters": parameters}
        if self.description:
            function["description"] = self.description
        return {"type": "function", "function": function}

    def parse(self, arguments: str | dict[str, Any] | None) -> dict[str, Any]:
        """The model's arguments (a JSON string), validated and converted to the hinted types."""
        raw = json.loads(arguments or "{}") if isinstance(arguments, str) else (arguments or {})
        values = self.arguments.model_validate(raw)
        return {name: getattr(values, name) for name in type(values).model_fields}

    async def call(self, kwargs: dict[str, Any]) -> Any:
        """Call the function (a sync one in a worker thread, so it does not block other conversations)."""
        if inspect.iscoroutinefunction(self.func):
            return await self.func(**kwargs)
        result = await asyncio.to_thread(self.func, **kwargs)
        return await result if inspect.isawaitable(result) else result


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The first paragraph, and Google-style ``Args:`` descriptions by parameter name."""
    paragraphs = re.split(r"\n\s*\n", doc.strip()) if doc.strip() else []
    summary = " ".join(paragraphs[0].split()) if paragraphs and not paragraphs[0].startswith("Args:") else ""
    params: dict[str, str] = {}
    match = re.search(r"^(?:Args|Arguments|Parameters):\s*\n((?:[ \t]+.*\n?|\s*\n)*)", doc, re.MULTILINE)
    if match:
        current: str | None = None
        for line in match.group(1).splitlines():
            item = re.match(r"^\s{1,8}(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", line)
            if item and (current is None or len(line) - len(line.lstrip()) <= _indent_of(match.group(1))):
                current = item.group(1)
                params[current] = item.group(2).strip()
            elif current and line.strip():
                params[current] = f"{params[current]} {line.strip()}".strip()
    return summary, params


def _indent_of(block: str) -> int:
    for line in block.splitlines():
        if line.strip():
            return len(line) - len(line.lstrip())
    return 0


def _without_titles(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _without_titles(v) for k, v in schema.items() if not (k == "title" and isinstance(v, str))}
    if isinstance(schema, list):
        return [_without_titles(v) for v in schema]
    return schema


class Agent:
    """An LLM agent with Python tools and optional memory; a valid evalcli target."""

    def __init__(
        self,
        model: str,
        instructions: str = "",
        tools: Sequence[Tool] = (),
        memory: Memory | None = None,
        max_steps: int = 8,
        name: str | None = None,
        api_base: str | None = None,
        llm: LLMClient | None = None,
        mcp: Sequence[Any] = (),
    ) -> None:
        if max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        self.model = model
        self.instructions = instructions
        self.tools = {t.name: t for t in (FunctionTool(f) for f in tools)}
        self.memory = memory
        self.max_steps = max_steps
        self.name = name or "agent"
        self.api_base = api_base
        self._llm = llm
        self.mcp = [mcp_server(m) for m in mcp]
        """MCP servers whose tools the agent offers too (docs/hermetic.md, "MCP tools")."""
        self._mcp_tools: dict[str, McpTool] | None = None
        self._mcp_lock = threading.Lock()

    def mcp_tools(self) -> dict[str, McpTool]:
        """The tools of the agent's MCP servers, by name: listed once, all at once (``McpError`` naming every server
        that does not start)."""
        with self._mcp_lock:
            if self._mcp_tools is None:
                found: dict[str, McpTool] = {}
                for server, tools in zip(self.mcp, list_servers_now(self.mcp), strict=True):
                    for tool in tools:
                        if tool.name in self.tools or tool.name in found:
                            other = found[tool.name].server.where if tool.name in found else "the agent's own tools"
                            raise AgentError(f"agent {self.name}: two tools are named {tool.name!r}: {other} and "
                                             f"{server.where} list one each; their calls cannot be told apart",
                                             "give one MCP server a prefix ({..., \"prefix\": \"wx\"}: its tools are "
                                             "offered as wx_NAME), or rename the function tool")
                        found[tool.name] = tool
                self._mcp_tools = found
            return self._mcp_tools

    def evalcli_mcp_servers(self) -> dict[str, list[str]]:
        """Each MCP server's tool names, by the server's name (what ``{mcp: NAME}`` in ``tools:`` is checked against)."""
        servers: dict[str, list[str]] = {s.name: [] for s in self.mcp}
        for tool in self.mcp_tools().values():
            servers[tool.server.name].append(tool.name)
        return servers

    def evalcli_mcp_places(self, name: str) -> list[str]:
        """Where each of the agent's MCP servers named ``name`` runs (two make ``{mcp: NAME}`` ambiguous)."""
        return [server.where for server in self.mcp if server.name == name]

    @property
    def llm(self) -> LLMClient:
        if self._llm is None:
            self._llm = LLMClient(LLMSettings.from_env())
        return self._llm

    async def generate(
        self,
        input: str,
        *,
        memory: dict[str, Any] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        seed: int | None = None,
        **options: Any,
    ) -> list[Message]:
        """Run one turn; returns its response messages (assistant messages and tool results)."""
        scope = self._scope(memory)
        # SQLite work happens off the event loop: a busy memory file never stalls other conversations
        history = await asyncio.to_thread(self.memory.messages, *scope) if scope and self.memory else []
        user: Message = {"role": "user", "content": input}
        system: list[Message] = [{"role": "system", "content": self.instructions}] if self.instructions else []
        mcp_tools = await asyncio.to_thread(self.mcp_tools) if self.mcp else {}
        schemas = [*(t.schema() for t in self.tools.values()), *(t.openai_schema() for t in mcp_tools.values())] or None
        async with Connections() as connections:
            return await self._turn(scope, [*system, *history, user], schemas, connections,
                                    temperature=temperature, max_tokens=max_tokens, seed=seed)

    async def _turn(self, scope: tuple[str, str] | None, sent: list[Message], schemas: list[dict[str, Any]] | None,
                    connections: Connections, **sampling: Any) -> list[Message]:
        """The model calls and tool calls of one turn (``sent``: what precedes them, the user's message last)."""
        user = sent[-1]
        produced: list[Message] = []
        for _ in range(self.max_steps):
            response = await self.llm.complete(
                model=self.model,
                messages=[*sent, *produced],
                purpose="agent",
                tools=schemas,
                api_base=self.api_base,
                **sampling,
            )
            message = _assistant_message(response)
            produced.append(message)
            if not message.get("tool_calls"):
                if scope and self.memory:
                    await asyncio.to_thread(self.memory.append, *scope, [user, *produced])
                return produced
            for call in message["tool_calls"]:
                produced.append(await self._run_tool(call, connections))
        raise AgentError(
            f"agent {self.name} did not finish within max_steps={self.max_steps} model calls",
            "raise max_steps, or check why the model keeps calling tools",
        )

    def evalcli_tool_parameters(self) -> dict[str, list[str]]:
        """Each tool's parameter names, by tool name (what a dataset's ``tools:`` is checked against)."""
        own = {name: list(tool.arguments.model_fields) for name, tool in self.tools.items()}
        return {**own, **{name: list(t.schema.get("properties") or {}) for name, t in self.mcp_tools().items()}}

    def generate_sync(self, input: str, **kwargs: Any) -> list[Message]:
        """``generate`` for code that is not async."""
        return asyncio.run(self.generate(input, **kwargs))

    def _scope(self, memory: dict[str, Any] | None) -> tuple[str, str] | None:
        thread = (memory or {}).get("thread")
        if not thread:
            return None
        resource = (memory or {}).get("resource") or thread
        return str(resource), str(thread)

    async def _run_tool(self, call: dict[str, Any], connections: Connections) -> Message:
        function = call.get("function") or {}
        name = function.get("name")
        result: Message = {"role": "tool", "tool_call_id": call["id"]}
        tool = self.tools.get(name or "")
        remote = (self._mcp_tools or {}).get(name or "")
        if tool is None and remote is not None:
            return await self._run_mcp_tool(remote, call, connections)
        if tool is None:
            known = ", ".join(self.tools) or "none"
            return {**result, "content": f"Error: unknown tool {name!r}; available: {known}", "is_error": True}
        try:
            kwargs = tool.parse(function.get("arguments"))
        except (ValidationError, ValueError) as exc:
            return {**result, "content": f"Error: invalid arguments for {name}: {exc}", "is_error": True}
        try:
            value = await acall(tool.name, _raw_arguments(function.get("arguments")), lambda: tool.call(kwargs),
                                call_id=call["id"])
        except MockedToolError as exc:  # a mock's `raises`, or a call the tool plan refuses
            return {**result, "content": f"Error: {exc}", "is_error": True}
        except Exception as exc:  # noqa: BLE001 - a failing tool is reported to the model
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            return {**result, "content": f"Error: {detail}", "is_error": True}
        content = value if isinstance(value, str) else json.dumps(value, default=str)
        return {**result, "content": content}

    async def _run_mcp_tool(self, tool: McpTool, call: dict[str, Any], connections: Connections) -> Message:
        """An MCP tool's call, through the tool plan like a function tool's (docs/hermetic.md, "MCP tools")."""
        result: Message = {"role": "tool", "tool_call_id": call["id"]}
        try:
            arguments = _raw_arguments((call.get("function") or {}).get("arguments"))
        except ValueError as exc:
            return {**result, "content": f"Error: invalid arguments for {tool.name}: {exc}", "is_error": True}
        try:
            value = await acall(tool.name, arguments, lambda: connections.call(tool, arguments), call_id=call["id"],
                                server=tool.server.name)
        except Exception as exc:  # noqa: BLE001 - a mock's `raises`, a refusal, the tool's error result: to the model
            return {**result, "content": f"Error: {exc}", "is_error": True}
        content = value if isinstance(value, str) else json.dumps(value, default=str)
        return {**result, "content": content}


def _raw_arguments(arguments: str | dict[str, Any] | None) -> dict[str, Any]:
    """The arguments as the model wrote them (what mocks match and tapes record), already known to parse."""
    raw = json.loads(arguments or "{}") if isinstance(arguments, str) else (arguments or {})
    return raw if isinstance(raw, dict) else {}


def _assistant_message(response: dict[str, Any]) -> Message:
    try:
        raw = response["choices"][0]["message"] or {}
    except (KeyError, IndexError, TypeError) as exc:
        raise AgentError(f"the model returned no message: {exc}") from None
    message: Message = {"role": "assistant", "content": raw.get("content")}
    calls = []
    for call in raw.get("tool_calls") or []:
        function = call.get("function") or {}
        calls.append(
            {
                "id": call.get("id") or f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {"name": function.get("name"), "arguments": function.get("arguments") or "{}"},
            }
        )
    if calls:
        message["tool_calls"] = calls
    return message
