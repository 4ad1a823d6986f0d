"""The ``a2a`` target (docs/targets/a2a.md): an agent that speaks the A2A protocol (agent card, JSON-RPC). Before
anything runs the agent card is read (``GET {url}/.well-known/agent-card.json``, else the older ``agent.json``): a
card that cannot be read is a validation error naming the URL. Its JSON-RPC endpoint is the card's ``url`` (or its
first ``JSONRPC`` interface), else ``url`` itself. Each turn is ``message/send`` with the user's text (A2A 1.0's
``SendMessage``, with its ``A2A-Version`` header, when the card's interface says 1.0 or the agent does not know
``message/send``); the conversation's ``contextId`` is the one the agent gave on its first reply, sent back on every
later turn, so the agent keeps the thread. A reply that is a ``Message`` is the turn's answer; a ``Task`` is polled
with ``tasks/get`` until it is no longer ``submitted`` or ``working``, and its artifacts' text (then its status
message's) is the answer. A task that failed, was rejected or canceled is the turn's error, with what the agent
said. Tokens an agent reports in a ``usage`` metadata entry are recorded as the target's. ``headers`` are sent with
every request (as for ``http`` targets: never stored or shown).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..messages import Message
from ..records import record
from ..secrets import Redactor, redact_url
from .forms import FormContext
from .openai_format import assistant
from .remote import (
    Pool,
    RemoteAdapter,
    ReplyFailed,
    check_headers,
    look_up_opener,
    look_up_request,
    parsed,
    quote,
    record_usage,
    target_redactor,
    tokens,
)
from .session import Calls, ConfigProblem, ConversationOptions, ItemInfo, Thread, TurnSession

CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")
WORKING = frozenset({"submitted", "working", "unknown", "TASK_STATE_SUBMITTED", "TASK_STATE_WORKING",
                     "TASK_STATE_UNSPECIFIED"})
FAILED = frozenset({"failed", "rejected", "canceled", "TASK_STATE_FAILED", "TASK_STATE_REJECTED",
                    "TASK_STATE_CANCELED"})
WAITING = frozenset({"input-required", "auth-required", "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"})
"""A task waiting for the user: the conversation's next message answers it (sent with the task's ``taskId``)."""
_IDS = itertools.count(1)
METHOD_NOT_FOUND = -32601
V1_METHODS = {"message/send": "SendMessage", "tasks/get": "GetTask"}
"""A2A 1.0's JSON-RPC names of the methods evalcli calls (what an ``a2a-sdk`` 1.x server answers by default)."""


class A2AConfig(BaseModel):
    """``target: {a2a: URL}`` or ``target: {a2a: {url, headers, timeout, poll_interval, blocking}}``."""

    model_config = ConfigDict(extra="forbid")
    url: str = Field(min_length=1, description="The agent's base URL (its card is at /.well-known/agent-card.json).")
    headers: dict[str, str | int | float] = Field(default_factory=dict, description="Request headers (never stored or "
                                                                                     "shown).")
    timeout: float = Field(default=60, gt=0, description="Seconds per request, and for a task to finish (default 60).")
    poll_interval: float = Field(default=0.5, gt=0, description="Seconds between polls of a task still working.")
    blocking: bool = Field(default=True, description="Ask the agent to answer when the task is done (false: it may "
                                                     "answer at once with a working task, which evalcli polls).")

    @field_validator("url")
    @classmethod
    def http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"'{redact_url(value)}' is not an http:// or https:// URL")
        return value.rstrip("/")


@record
class A2ATarget:
    """An A2A agent, its card read."""

    config: A2AConfig
    headers: dict[str, str]
    secrets: Redactor
    card: dict[str, Any]
    endpoint: str


def read_card(config: A2AConfig, headers: dict[str, str], secrets: Redactor) -> dict[str, Any]:
    """The agent card (a blocking read before the run); ``ConfigProblem`` naming the URL when it cannot be read."""
    opener = look_up_opener()
    reasons = []
    for path in CARD_PATHS:
        url = card_url(config.url, path)
        request = look_up_request(url, {**headers, "Accept": "application/json"})
        try:
            with opener.open(request, timeout=min(10.0, config.timeout)) as response:
                card = json.loads(response.read().decode("utf-8"))
            if isinstance(card, dict) and card.get("name"):
                return card
            reasons.append(f"{redact_url(url)}: not an agent card (a JSON object with a name)")
        except urllib.error.HTTPError as exc:
            reasons.append(f"{redact_url(url)}: {exc.code} {quote(exc.read().decode('utf-8', 'replace'), secrets)}")
        except (OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            reasons.append(f"{redact_url(url)}: {secrets(str(getattr(reason, 'strerror', None) or reason))}")
    raise ConfigProblem(("url",), f"cannot read the A2A agent card of {redact_url(config.url)} ({'; '.join(reasons)})",
                        "start the agent, or give the base URL its card is served under (/.well-known/agent-card.json)")


def card_url(base: str, path: str) -> str:
    """The card's URL under the agent's base URL: ``path`` after the base's path, its query kept (a token some
    gateways take as ``?key=...``: docs/targets/a2a.md)."""
    parts = urllib.parse.urlsplit(base)
    return urllib.parse.urlunsplit(parts._replace(path=parts.path.rstrip("/") + path))


def speaks_v1(card: dict[str, Any]) -> bool:
    """Whether the card's JSON-RPC interface says A2A 1.0 (``protocolVersion: "1.0"``): then evalcli speaks 1.0 from
    the first turn; otherwise 0.3, and 1.0 once the agent answers ``message/send`` with "method not found"."""
    for interface in card.get("supportedInterfaces") or card.get("additionalInterfaces") or ():
        if isinstance(interface, dict) and str(interface.get("protocolBinding", interface.get("transport", ""))).upper() \
                == "JSONRPC":
            return str(interface.get("protocolVersion") or "").startswith("1")
    return False


def endpoint_of(card: dict[str, Any], base: str) -> str:
    """Where JSON-RPC requests go: the card's ``url`` (A2A 0.3), its first JSON-RPC interface (1.0), else the base."""
    if isinstance(card.get("url"), str) and card["url"]:
        return str(card["url"])
    for interface in card.get("supportedInterfaces") or card.get("additionalInterfaces") or ():
        if isinstance(interface, dict) and str(interface.get("protocolBinding", interface.get("transport", ""))).upper() \
                == "JSONRPC" and interface.get("url"):
            return str(interface["url"])
    return base


class A2AAdapter(RemoteAdapter):
    """``target: {a2a: URL}``."""

    name = "a2a"
    run_call = "the a2a target"
    memory_hint = "an A2A agent keeps a conversation by its contextId, which evalcli sends back on every turn"
    config_model = A2AConfig

    @classmethod
    def option_problems(cls, obj: Any, options: dict[str, Any]) -> list[str]:
        """Options go into ``message/send``'s ``metadata``."""
        return []

    @classmethod
    def build(cls, config: Any, context: FormContext) -> A2ATarget:
        assert isinstance(config, A2AConfig)
        check_headers(config)
        headers = {name: str(value) for name, value in config.headers.items()}
        secrets = target_redactor(config)
        card = read_card(config, headers, secrets)
        return A2ATarget(config, headers, secrets, card, endpoint_of(card, config.url))

    @classmethod
    def describe(cls, config: Any) -> str:
        assert isinstance(config, A2AConfig)
        return f"a2a:{redact_url(config.url)}"

    def prepare(self) -> None:
        self.target: A2ATarget = self.obj
        self.pool = Pool()
        self.headers = {**self.target.headers, "Content-Type": "application/json"}
        self.url = parsed(self.target.endpoint)
        self.shown_url = redact_url(self.target.endpoint)
        self.v1 = speaks_v1(self.target.card)
        """Whether the agent speaks A2A 1.0 (``SendMessage``, ``GetTask``, results wrapped as ``{"task": ...}``)."""

    @property
    def has_memory(self) -> bool:
        return True

    @property
    def reports_tool_calls(self) -> bool | None:
        return False  # an A2A reply is messages and artifacts: the agent's tool calls are its own

    def uncontrolled(self) -> str | None:
        return ("an A2A agent runs its tools itself and its replies do not show them, so a tool it runs live cannot be "
                "seen")

    def open(self, *, multi_turn: bool, calls: Calls, conversation: ConversationOptions | None = None,
             item: ItemInfo | None = None) -> A2ASession:
        thread = conversation.thread if conversation is not None else self.thread(self.options, multi_turn=multi_turn)
        return A2ASession(self, thread, calls)

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        """One A2A call (``message/send``, ``tasks/get``, in 0.3's form) in the protocol the agent speaks: an agent
        that does not know ``message/send`` ("method not found") is asked again in A2A 1.0's form, and so is every
        later call (docs/targets/a2a.md). The result comes back in 0.3's form (a task or message with its ``kind``)."""
        if not self.v1:
            try:
                return await self.rpc(method, params)
            except _MethodNotFound:
                self.v1 = True
        return _from_v1(await self.rpc(V1_METHODS[method], _to_v1(method, params), version="1.0"))

    async def rpc(self, method: str, params: dict[str, Any], version: str | None = None) -> Any:
        """One JSON-RPC call; its ``result`` (an ``error`` is ``ReplyFailed`` quoting it)."""
        target = self.target
        body = {"jsonrpc": "2.0", "id": next(_IDS), "method": method, "params": params}
        headers = self.headers if version is None else {**self.headers, "A2A-Version": version}
        answer = await self.pool.request("POST", self.url, self.shown_url, headers=headers,
                                         body=json.dumps(body, ensure_ascii=False).encode(),
                                         timeout=target.config.timeout, secrets=target.secrets)
        try:
            data = answer.json()
        except ValueError:
            data = None
        if not isinstance(data, dict) or ("result" not in data and "error" not in data):
            raise ReplyFailed(f"the reply of {method} at {self.shown_url} is not JSON-RPC: "
                              f"{quote(answer.text, target.secrets)}")
        error = data.get("error")
        if version is None and method in V1_METHODS and isinstance(error, dict) \
                and error.get("code") == METHOD_NOT_FOUND:
            raise _MethodNotFound(method)
        if error is not None:
            raise ReplyFailed(f"{method} at {self.shown_url} failed: {quote(json.dumps(data['error']), target.secrets)}")
        return data["result"]


class A2ASession(TurnSession["A2AAdapter"]):
    """One conversation: the ``contextId`` the agent gave, sent back on every turn."""

    def __init__(self, adapter: A2AAdapter, thread: Thread, calls: Calls) -> None:
        super().__init__(adapter, thread, calls)
        self.context_id: str | None = None
        self.waiting: str | None = None
        """The task the agent left waiting for the user (``input-required``): the next turn continues it."""
        self.turn = 0

    async def _turn(self, text: str) -> list[Message]:
        adapter = self.adapter
        message: dict[str, Any] = {"kind": "message", "role": "user", "messageId": uuid.uuid4().hex,
                                   "parts": [{"kind": "text", "text": text}]}
        if self.context_id is not None:
            message["contextId"] = self.context_id
        if self.waiting is not None:
            message["taskId"] = self.waiting
        params: dict[str, Any] = {"message": message, "configuration": {"blocking": adapter.target.config.blocking}}
        if adapter.call_options:
            params["metadata"] = adapter.call_options
        started = time.perf_counter()
        turn, self.turn = self.turn, self.turn + 1
        result = await adapter.call("message/send", params)
        if not isinstance(result, dict):
            raise ReplyFailed(f"message/send at {adapter.shown_url} answered neither a message nor a task")
        self.context_id = str(result.get("contextId") or self.context_id or "") or None
        usage: list[dict[str, Any]] = []
        self.waiting = None
        if result.get("kind", "task" if "status" in result else "message") == "task":
            result = await self._finished(result)
            reply = _task_text(result)
            self.waiting = str(result["id"]) if _state(result) in WAITING and result.get("id") else None
        else:
            reply = _parts_text(result.get("parts"))
        for holder in (result, result.get("status", {}).get("message") if isinstance(result.get("status"), dict) else None):
            found = (holder or {}).get("metadata", {}) if isinstance(holder, dict) else {}
            if isinstance(found, dict) and isinstance(found.get("usage"), dict):
                usage.append(found["usage"])
        for reported in usage[:1]:
            record_usage(adapter.spec, tokens(reported.get("input_tokens", reported.get("inputTokens", 0))),
                         tokens(reported.get("output_tokens", reported.get("outputTokens", 0))), started, turn)
        return [assistant(reply)]

    async def _finished(self, task: dict[str, Any]) -> dict[str, Any]:
        """The task once it no longer works (polled with ``tasks/get``); a failed one is ``ReplyFailed``."""
        adapter = self.adapter
        deadline = time.monotonic() + adapter.target.config.timeout
        while _state(task) in WORKING:
            if time.monotonic() > deadline:
                raise ReplyFailed(f"the A2A task {task.get('id')} at {adapter.shown_url} was still "
                                  f"{_state(task)} after {adapter.target.config.timeout:g}s")
            await asyncio.sleep(adapter.target.config.poll_interval)
            polled = await adapter.call("tasks/get", {"id": task.get("id")})
            task = polled if isinstance(polled, dict) else task
        if _state(task) in FAILED:
            said = _parts_text((task.get("status") or {}).get("message", {}).get("parts"))
            raise ReplyFailed(f"the A2A task {task.get('id')} at {adapter.shown_url} {_state_word(task)}"
                              + (f": {quote(said, adapter.target.secrets)}" if said else ""))
        return task

    async def close(self) -> None:
        pass


class _MethodNotFound(Exception):
    """An agent that does not know a 0.3 method: it speaks A2A 1.0."""


def _to_v1(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """A call's 0.3 params in A2A 1.0's form: the message without ``kind``, its role ``ROLE_USER``, its parts without
    ``kind``; ``blocking: false`` as ``returnImmediately: true``."""
    if method != "message/send":
        return params
    message = {key: value for key, value in params["message"].items() if key != "kind"}
    message["role"] = "ROLE_USER"
    message["parts"] = [{key: value for key, value in part.items() if key != "kind"} for part in message["parts"]]
    converted: dict[str, Any] = {"message": message, "configuration": {
        "returnImmediately": not params.get("configuration", {}).get("blocking", True)}}
    if "metadata" in params:
        converted["metadata"] = params["metadata"]
    return converted


def _from_v1(result: Any) -> Any:
    """An A2A 1.0 result (``{"task": ...}`` or ``{"message": ...}``, or a bare task from ``GetTask``) in 0.3's form."""
    if isinstance(result, dict):
        for kind in ("task", "message"):
            if isinstance(result.get(kind), dict) and len(result) == 1:
                return {**result[kind], "kind": kind}
        if "status" in result and "kind" not in result:
            return {**result, "kind": "task"}
    return result


def _state(task: dict[str, Any]) -> str:
    status = task.get("status")
    return str(status.get("state", "unknown")) if isinstance(status, dict) else "unknown"


def _state_word(task: dict[str, Any]) -> str:
    """A task's state as 0.3 writes it, whichever protocol said it (``TASK_STATE_FAILED`` is ``failed``)."""
    return _state(task).removeprefix("TASK_STATE_").lower().replace("_", "-")


def _parts_text(parts: Any) -> str:
    """The text of a message's or an artifact's parts (data parts as JSON)."""
    texts = []
    for part in parts or ():
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif "data" in part:
            texts.append(json.dumps(part["data"], ensure_ascii=False))
        elif isinstance(part.get("file"), dict) or "raw" in part or "url" in part:
            texts.append(_file_text(part))
    return "\n".join(texts)


def _file_text(part: dict[str, Any]) -> str:
    """A file part named, as an MCP tool's image is (docs/targets/a2a.md): ``[file: report.pdf, application/pdf, 12
    bytes]`` for one sent inline, ``[file: report.pdf, https://...]`` for one sent by URL (0.3's ``{"kind": "file",
    "file": {...}}`` and 1.0's ``{"raw" | "url", "filename", "mediaType"}``), so an answer that is a file is not ''."""
    file = part["file"] if isinstance(part.get("file"), dict) else part
    name = file.get("name") or file.get("filename") or "unnamed"
    where = file.get("uri") or file.get("url")
    if isinstance(where, str) and where:
        return f"[file: {name}, {redact_url(where)}]"
    data = str(file.get("bytes") or file.get("raw") or "").strip()
    size = max(len(data) * 3 // 4 - data[-2:].count("="), 0)
    return f"[file: {name}, {file.get('mimeType') or file.get('mediaType') or 'unknown type'}, {size} bytes]"


def _task_text(task: dict[str, Any]) -> str:
    """A finished task's answer: its artifacts' text, else its status message's."""
    artifacts = [_parts_text(a.get("parts")) for a in task.get("artifacts") or () if isinstance(a, dict)]
    found = "\n\n".join(t for t in artifacts if t)
    if found:
        return found
    return _parts_text(((task.get("status") or {}).get("message") or {}).get("parts"))
