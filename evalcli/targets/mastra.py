"""The ``mastra`` target (docs/targets/http.md): an agent served by a Mastra server, with exactly ``runEvals``' memory semantics.

Each turn is ``POST {url}/api/agents/{agent}/generate`` with this turn's user message alone and, for a
conversation that owns a thread, ``memory: {...target_options.memory, thread: T, resource: R}`` (T evalcli's
thread, R the pinned resource or T): Mastra loads the thread's history itself. A single-turn item sends
``memory`` only when ``target_options.memory`` gives both a thread and a resource (Mastra refuses a thread
without a resource), unchanged. Other ``target_options`` go into the body (``maxSteps``, ...).

The reply's ``response.messages`` (AI SDK model messages) become OpenAI format: assistant text and
``tool_calls``, ``role: tool`` results with ``tool_call_id``, an ``error-text``/``error-json`` output marked
``is_error: true``. ``totalUsage`` is recorded as the target's tokens. Before anything runs the agent is
looked up (``GET /api/agents/{agent}``): an unknown agent or a server that cannot be reached is a
validation error. Whether the agent has memory is asked (``GET /api/memory/status``) only by a run with
multi-turn conversations.
"""

from __future__ import annotations

import json
import time
import urllib.error
from typing import Any
from urllib.parse import quote as quote_path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..messages import Message
from ..records import record
from ..secrets import Redactor, redact_url
from .forms import FormContext
from .openai_format import assistant, tool_call, tool_result
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
from .replies import History, TurnReplies
from .session import Calls, ConfigProblem, ConversationOptions, ItemInfo, Thread, TurnSession

PROBE_TIMEOUT = 10.0
"""Seconds the look-ups before a run may take (at most the target's own ``timeout``)."""
ERROR_OUTPUTS = frozenset({"error-text", "error-json", "execution-denied"})


class MastraResponse(BaseModel):
    """``response: {history: ...}``: whether the server's replies repeat the earlier turns (docs/targets/index.md)."""

    model_config = ConfigDict(extra="forbid")
    history: History = Field(default="detect", description="full: every reply holds the whole conversation; turn: "
                                                           "only this turn's messages; detect (default): told by the "
                                                           "reply.")


class MastraConfig(BaseModel):
    """``target: {mastra: {url, agent, headers, timeout}}``."""

    model_config = ConfigDict(extra="forbid")
    url: str = Field(min_length=1, description="The Mastra server (e.g. http://127.0.0.1:4111).")
    agent: str = Field(min_length=1, description="The agent's id on that server.")
    headers: dict[str, str | int | float] = Field(default_factory=dict, description="Request headers (never stored or "
                                                                                     "shown).")
    timeout: float = Field(default=60, gt=0, description="Seconds per request (default 60).")
    response: MastraResponse = Field(default_factory=lambda: MastraResponse(),
                                     description="How replies are read ({history: detect|full|turn}).")

    @field_validator("url")
    @classmethod
    def http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"'{redact_url(value)}' is not an http:// or https:// URL")
        return value.rstrip("/").removesuffix("/api")


@record
class MastraTarget:
    """A ``mastra`` target, looked up on its server."""

    config: MastraConfig
    headers: dict[str, str]
    secrets: Redactor

    @property
    def base(self) -> str:
        return self.config.url

    @property
    def agent_path(self) -> str:
        return f"{self.base}/api/agents/{quote_path(self.config.agent, safe='')}"


def _get(target: MastraTarget, url: str) -> tuple[int, str]:
    """A blocking GET for the look-ups before a run (no event loop yet); (status, body). Proxies are not used, as
    for the run's own requests; credentials in the URL (``user:password@``) are sent as Basic auth, as the run's are."""
    request = look_up_request(url, {**target.headers, "Accept": "application/json"})
    opener = look_up_opener()
    try:
        with opener.open(request, timeout=min(PROBE_TIMEOUT, target.config.timeout)) as response:
            return int(response.status), response.read().decode("utf-8", errors="replace")
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode("utf-8", errors="replace")


def look_up(target: MastraTarget) -> None:
    """The agent must exist on a server that answers: else a ``ConfigProblem`` (a validation error, exit 2)."""
    shown = redact_url(target.base)
    try:
        status, text = _get(target, target.agent_path)
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        reason = getattr(reason, "strerror", None) or reason
        raise ConfigProblem(("url",), f"cannot reach the Mastra server at {shown}: {target.secrets(str(reason))}",
                            "start the server (e.g. 'mastra dev', or 'npm run dev' in your Mastra project), or fix "
                            "the url") from None
    if status == 404:
        known = _agent_ids(target)
        listed = f" (it serves: {', '.join(known)})" if known else ""
        raise ConfigProblem(("agent",), f"the Mastra server at {shown} has no agent '{target.config.agent}'{listed}",
                            "give the agent's id as registered in new Mastra({agents: {...}})")
    if not 200 <= status < 300:
        raise ConfigProblem(("url",), f"the Mastra server at {shown} answered {status} for agent "
                                      f"'{target.config.agent}': {quote(text, target.secrets)}",
                            "check the url and the headers (e.g. an Authorization the server requires)")


def _agent_ids(target: MastraTarget) -> list[str]:
    try:
        status, text = _get(target, f"{target.base}/api/agents")
        data = json.loads(text) if status == 200 else {}
    except (OSError, ValueError):
        return []
    return sorted(map(str, data)) if isinstance(data, dict) else []


class MastraAdapter(RemoteAdapter):
    """``target: {mastra: {...}}``."""

    name = "mastra"
    run_call = "the mastra target"
    memory_hint = "configure a Memory on the agent in your Mastra project: new Agent({..., memory: new Memory()})"
    config_model = MastraConfig

    @classmethod
    def option_problems(cls, obj: Any, options: dict[str, Any]) -> list[str]:
        """Any option goes into the body, as ``agent.generate``'s options (``maxSteps``, ``instructions``, ...)."""
        if "messages" in options:
            return ["'messages' is evalcli's to send (each turn's user message); remove it from target_options"]
        return []

    @classmethod
    def build(cls, config: Any, context: FormContext) -> MastraTarget:
        assert isinstance(config, MastraConfig)
        check_headers(config)
        target = MastraTarget(config, {name: str(value) for name, value in config.headers.items()},
                              target_redactor(config))
        look_up(target)
        return target

    @classmethod
    def describe(cls, config: Any) -> str:
        assert isinstance(config, MastraConfig)
        return f"mastra:{redact_url(config.url)}#{config.agent}"

    def prepare(self) -> None:
        self.target: MastraTarget = self.obj
        self.pool = Pool()
        self.headers = {**self.target.headers, "Content-Type": "application/json"}
        self.generate_url = parsed(f"{self.target.agent_path}/generate")
        self.shown_url = redact_url(f"{self.target.agent_path}/generate")
        memory = self.options.get("memory")
        self.caller_memory: dict[str, Any] | None = memory if isinstance(memory, dict) else None
        self._memory: bool | None = None

    @property
    def has_memory(self) -> bool:
        """What ``GET /api/memory/status?agentId=...`` says (asked once; a server that cannot say counts as yes)."""
        if self._memory is None:
            target = self.target
            try:
                status, text = _get(target, f"{target.base}/api/memory/status?agentId="
                                            f"{quote_path(target.config.agent, safe='')}")
                data = json.loads(text) if 200 <= status < 300 else {}
                self._memory = not (isinstance(data, dict) and data.get("result") is False)
            except (OSError, ValueError):
                self._memory = True
        return self._memory

    def open(self, *, multi_turn: bool, calls: Calls, conversation: ConversationOptions | None = None,
             item: ItemInfo | None = None) -> MastraSession:
        caller = self.caller_memory
        if conversation is not None and conversation.options is not None:
            given = conversation.options.get("memory")
            caller = given if isinstance(given, dict) else None
        thread = conversation.thread if conversation is not None else self.thread(self.options, multi_turn=multi_turn)
        memory: dict[str, Any] | None
        if multi_turn:
            memory = {**(caller or {}), "thread": thread.thread, "resource": thread.resource}
        else:
            memory = caller if caller and caller.get("thread") and caller.get("resource") else None
        return MastraSession(self, thread, memory, calls)



class MastraSession(TurnSession["MastraAdapter"]):
    """One conversation: the same ``memory`` on every turn; Mastra keeps the history."""

    def __init__(self, adapter: MastraAdapter, thread: Thread, memory: dict[str, Any] | None, calls: Calls) -> None:
        super().__init__(adapter, thread, calls)
        self.memory = memory
        self.replies = TurnReplies(adapter.target.config.response.history)
        """What the earlier turns recorded (a reply that repeats them has them dropped; docs/targets/http.md)."""
        self.turn = 0

    async def _turn(self, text: str) -> list[Message]:
        adapter, target = self.adapter, self.adapter.target
        body: dict[str, Any] = {**adapter.call_options, "messages": text}
        if self.memory is not None:
            body["memory"] = self.memory
        shown = adapter.shown_url
        started = time.perf_counter()
        answer = await adapter.pool.request("POST", adapter.generate_url, shown, headers=adapter.headers,
                                            body=json.dumps(body, ensure_ascii=False).encode(),
                                            timeout=target.config.timeout, secrets=target.secrets)
        turn, self.turn = self.turn, self.turn + 1
        try:
            data = answer.json()
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise ReplyFailed(f"the reply of POST {shown} is not a JSON object: {quote(answer.text, target.secrets)}")
        response = data.get("response")
        found = response.get("messages") if isinstance(response, dict) else None
        if isinstance(found, list):
            messages = from_model_messages(found)
        elif isinstance(data.get("text"), str):
            messages = [assistant(data["text"])]
        else:
            raise ReplyFailed(f"the reply of POST {shown} has neither response.messages nor text: "
                              f"{quote(answer.text, target.secrets)}")
        _, messages = self.replies.take(messages)
        usage = data.get("totalUsage") or data.get("usage")
        if isinstance(usage, dict):
            record_usage(adapter.spec, tokens(usage.get("inputTokens", usage.get("promptTokens"))),
                         tokens(usage.get("outputTokens", usage.get("completionTokens"))), started, turn)
        return messages

    async def close(self) -> None:
        pass


def from_model_messages(messages: list[Any]) -> list[Message]:
    """AI SDK model messages (a turn's ``response.messages``) as OpenAI-format response messages."""
    out: list[Message] = []
    unnamed: list[str] = []  # the ids given to calls that came without one, in order (docs/targets/mastra.md)
    answered = 0
    for message in messages:
        if not isinstance(message, dict):
            continue
        role, content = message.get("role"), message.get("content")
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        if role == "assistant":
            texts = [str(p.get("text") or "") for p in parts if isinstance(p, dict) and p.get("type") == "text"]
            calls = [tool_call(_call_id(p.get("toolCallId"), unnamed), str(p.get("toolName")),
                               p.get("input", p.get("args")))
                     for p in parts if isinstance(p, dict) and p.get("type") == "tool-call"]
            if any(texts) or calls:
                out.append(assistant("\n\n".join(t for t in texts if t), calls))
        elif role == "tool":
            for part in parts:
                if isinstance(part, dict) and part.get("type") == "tool-result":
                    content_text, failed = _output(part)
                    call_id = part.get("toolCallId")
                    if call_id is None or call_id == "":  # paired with the calls without an id, in order
                        call_id = unnamed[answered] if answered < len(unnamed) else f"{NO_ID}result-{answered + 1}"
                        answered += 1
                    out.append(tool_result(str(call_id), content_text, name=part.get("toolName"), is_error=failed))
    return out


NO_ID = "no-id-"
"""The prefix of the ids given to a reply's tool calls and results that came without a ``toolCallId``."""


def _call_id(given: Any, unnamed: list[str]) -> str:
    """A call's ``toolCallId`` as text; a call without one gets ``no-id-call-N`` (N from 1 in the reply), never the
    text ``None`` that every such call would share."""
    if given is not None and given != "":
        return str(given)
    unnamed.append(f"{NO_ID}call-{len(unnamed) + 1}")
    return unnamed[-1]


def _output(part: dict[str, Any]) -> tuple[Any, bool]:
    """A tool result's content and whether it is an error (AI SDK 5+ ``output``, or the older ``result``/``isError``)."""
    output = part.get("output")
    if not isinstance(output, dict) or "type" not in output:
        return part.get("result", output), bool(part.get("isError"))
    kind, value = output.get("type"), output.get("value")
    if kind == "execution-denied":
        return output.get("reason") or "execution denied", True
    if kind == "content" and isinstance(value, list):
        value = "\n".join(str(p.get("text", "")) for p in value if isinstance(p, dict) and p.get("type") == "text")
    return value, kind in ERROR_OUTPUTS
