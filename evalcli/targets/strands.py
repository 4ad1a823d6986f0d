"""The ``strands`` adapter: a Strands ``Agent`` as sessions (docs/targets/strands.md).

A Strands agent holds its conversation (``messages``, ``state``, its conversation manager's counters) and refuses a
second invocation while one runs, so one object cannot serve two conversations: each conversation runs on its own
copy of the user's agent (``conversation_agent``), made when it opens. The copy keeps the agent's model, tools (its
tool registry), executor, system prompt, hooks and plugins; it gets its own messages (the agent's initial ones),
state (the agent's initial state, with the ``state`` option over it), conversation manager and metrics. The user's
agent is never invoked or changed. A persistent session manager of the user's agent is left out of the copies (eval
conversations never land in a user's store). Strands' printing callback handler (its default, which prints the
streamed answer) is replaced by its silent one, so nothing reaches evalcli's output.

One turn is ``await copy.invoke_async(text, **options)``. This turn's messages are those Strands adds to the copy
during it (its ``MessageAddedEvent`` hook), the user's own prompt left out, in OpenAI format: text and ``toolUse``
blocks are an assistant message; ``toolResult`` blocks are ``role: tool`` results, ``is_error`` when their
``status`` is ``error`` (Strands reports a tool's exception to the model so). An exception that ends the run is the
conversation's error, keeping the messages added before it. Each model call of the turn (a cycle of the copy's
``event_loop_metrics``) is counted as the target's usage, named after the agent's model. A turn's
``structured_output`` is its ``structured`` result. Tools are answered from the conversation's tool plan through a
``BeforeToolCallEvent`` hook on the copy (``strands_tools``).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping
from typing import Any

from strands.hooks import BeforeToolCallEvent, MessageAddedEvent

from ..messages import Message
from .openai_format import assistant, jsonable, keyword_names, quiet_logs, tool_call, tool_result
from .session import RESERVED_OPTIONS, Adapter, Calls, ConversationOptions, ItemInfo, Reply, TurnFailed, fresh_thread
from .strands_tools import content_text, plan_tools, tool_schemas
from .usage import count, record_target_call

OWNED = ("prompt", "idempotency_token", "cancel_signal")
"""Parameters of ``Agent.invoke_async`` that evalcli sets itself (or that belong to one call of the app's)."""
OWN = ("state",)
LAST = 1_000
"""The order of evalcli's tool hook: after the app's own, which may choose another tool."""


class StrandsAdapter(Adapter):
    """A ``strands.Agent``."""

    name = "strands"
    run_call = "Strands' Agent.invoke_async"
    own_options = OWN

    def prepare(self) -> None:
        self.planned = False
        quiet_logs("strands")
        self.model = model_name(self.obj)

    def control_tools(self) -> None:
        """Each conversation's copy runs its tools behind the conversation's tool plan."""
        self.planned = True

    def tool_schemas(self) -> dict[str, Any] | None:
        return tool_schemas(self.obj)

    @classmethod
    def accepted_options(cls, obj: Any) -> list[str]:
        return keyword_names(obj.invoke_async, OWNED)

    @classmethod
    def check_values(cls, obj: Any, options: dict[str, Any]) -> None:
        if not isinstance(options.get("state", {}), dict):
            raise ValueError("'state' is a mapping: the agent's initial state for each conversation (e.g. {user: u-1})")
        if not isinstance(options.get("invocation_state", {}), dict):
            raise ValueError("'invocation_state' is a mapping, passed to the agent's tools (e.g. {user_id: u-1})")

    def open(self, *, multi_turn: bool, calls: Calls, conversation: ConversationOptions | None = None,
             item: ItemInfo | None = None) -> StrandsSession:
        raw = self.options if conversation is None or conversation.options is None else conversation.options
        options = {k: v for k, v in raw.items() if k not in RESERVED_OPTIONS and k not in OWN}
        if isinstance(options.get("invocation_state"), dict) and "invocation_state" not in (
                conversation.from_setup if conversation is not None else ()):
            options["invocation_state"] = copy.deepcopy(options["invocation_state"])  # each conversation's own
        thread = conversation.thread if conversation is not None else fresh_thread(self.options)
        session = StrandsSession(self, calls, options)
        session.thread_id, session.resource_id = thread.thread, thread.resource
        session.agent = conversation_agent(self.obj, raw.get("state") or {}, session.added,
                                           plan_tools if self.planned else None)
        return session


class StrandsSession:
    """One conversation: its own copy of the agent, and the messages Strands adds to it during a turn."""

    thread_id: str | None
    resource_id: str | None
    agent: Any

    def __init__(self, adapter: StrandsAdapter, calls: Calls, options: dict[str, Any]) -> None:
        self.adapter = adapter
        self.calls = calls
        self.options = options
        self.new: list[Any] = []
        self.invocations = 0
        """How many of the copy's invocation metrics are counted already."""
        self.turn = 0

    def added(self, event: Any) -> None:
        """A ``MessageAddedEvent`` hook: Strands added a message to this conversation."""
        self.new.append(event.message)

    async def send(self, text: str, *, resume: Any = None) -> Reply:
        reply: Reply = await self.calls.call_async(self._turn(text))
        return reply

    async def _turn(self, text: str) -> Reply:
        turn, self.turn = self.turn, self.turn + 1
        self.new = []
        try:
            result = await self.agent.invoke_async(text, **self.options)
        except Exception as exc:
            self._count(turn)
            raise TurnFailed(exc, to_openai(self.new, self.agent.name)) from exc
        self._count(turn)
        output = getattr(result, "structured_output", None)
        return Reply(to_openai(self.new, self.agent.name), structured=None if output is None else jsonable(output))

    def _count(self, turn: int) -> None:
        """The model calls of the invocations not counted yet (one per event-loop cycle) as the target's usage."""
        invocations = self.agent.event_loop_metrics.agent_invocations
        for invocation in invocations[self.invocations:]:
            for cycle in invocation.cycles:
                usage = cycle.usage or {}
                record_target_call(self.adapter.model, count(usage.get("inputTokens")), count(usage.get("outputTokens")),
                                   turn_index=turn, cached_tokens=count(usage.get("cacheReadInputTokens")))
        self.invocations = len(invocations)

    async def close(self) -> None:
        self.new = []


def conversation_agent(agent: Any, state: Mapping[str, Any], added: Any, tools_hook: Any) -> Any:
    """A copy of the user's agent for one conversation: what Strands keeps per conversation made anew (messages,
    state, conversation manager, metrics, hooks and plugins bound to them), what the app built once shared (model,
    tools, executor, tracer); ``state`` over the agent's initial state; evalcli's hooks added to the copy only."""
    from strands.handlers import PrintingCallbackHandler, null_callback_handler

    shared = [agent.model, agent.tool_registry, agent.tracer, agent.tool_executor,
              *(getattr(agent, name, None) for name in ("_model_router", "_aux_model", "_sandbox", "_storage",
                                                        "_session_manager", "memory_manager", "tool_watcher",
                                                        "callback_handler"))]
    memo: dict[int, Any] = {id(each): each for each in shared if each is not None}
    concurrency = agent._concurrency  # its lock cannot be copied: the copy gets its own
    memo[id(concurrency)] = type(concurrency)(agent.concurrent_invocation_mode)
    memo[id(agent.tool_caller)] = None  # bound to the agent: made again for the copy below
    for value in vars(agent).values():  # signals (a lock inside) are per invocation: the copy's own, unset
        if isinstance(value, threading.Event):
            memo[id(value)] = threading.Event()
    made = copy.deepcopy(agent, memo)
    made.tool_caller = type(agent.tool_caller)(made)
    if isinstance(agent.callback_handler, PrintingCallbackHandler):
        made.callback_handler = null_callback_handler
    if agent._session_manager is not None:
        _drop_hooks_of(made, agent._session_manager)
        made._session_manager = None
    for key, value in copy.deepcopy(dict(state)).items():
        made.state.set(key, value)
    made.hooks.add_callback(MessageAddedEvent, added)
    if tools_hook is not None:
        made.hooks.add_callback(BeforeToolCallEvent, tools_hook, order=LAST)
    return made


def _drop_hooks_of(agent: Any, owner: Any) -> None:
    """Remove the hook callbacks bound to ``owner`` (the user's session manager) from the agent's registry."""
    registered = agent.hooks._registered_callbacks  # no public way to remove a hook
    for event, entries in registered.items():
        registered[event] = [e for e in entries if getattr(e.callback, "__self__", None) is not owner]


def model_name(agent: Any) -> str:
    """The agent's model id (``model_id`` of its model's config), for pricing."""
    try:
        config = agent.model.get_config()
    except Exception:  # noqa: BLE001 - a model without a readable config: unnamed
        return ""
    found = config.get("model_id") if isinstance(config, dict) else None
    return str(found) if found else ""


def to_openai(messages: list[Any], agent_name: str | None) -> list[Message]:
    """Strands messages (Bedrock's converse shape) as OpenAI response messages; user prompts left out."""
    out: list[Message] = []
    names: dict[str, str] = {}
    for message in messages:
        blocks = [b for b in message.get("content") or () if isinstance(b, dict)]
        if message.get("role") == "assistant":
            texts = [str(b["text"]) for b in blocks if "text" in b]
            calls = []
            for block in blocks:
                use = block.get("toolUse")
                if isinstance(use, dict):
                    names[str(use.get("toolUseId"))] = str(use.get("name"))
                    calls.append(tool_call(str(use.get("toolUseId")), str(use.get("name")), use.get("input")))
            if texts or calls:
                reply = assistant("".join(texts), calls)
                if agent_name:
                    reply["name"] = agent_name
                out.append(reply)
            continue
        for block in blocks:
            result = block.get("toolResult")
            if isinstance(result, dict):
                call_id = str(result.get("toolUseId"))
                out.append(tool_result(call_id, content_text(result), name=names.get(call_id),
                                       is_error=result.get("status") == "error"))
    return out
