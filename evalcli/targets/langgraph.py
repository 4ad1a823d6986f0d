"""The ``langgraph`` adapter: a compiled LangGraph graph (``Pregel``) as sessions (SPEC §12).

Graphs from ``langchain.agents.create_agent`` and ``langgraph.prebuilt.create_react_agent`` included.
One turn is ``await graph.ainvoke({"messages": [HumanMessage(text)]}, config, **options)`` with
``config.configurable.thread_id`` = the conversation's thread and ``user_id`` = its resource. The
thread lives in a checkpointer: a graph without one gets an in-memory ``InMemorySaver`` (on a copy of
the graph, never on the user's object), and a graph's own checkpointer is replaced the same way for
the run, so eval threads never land in a user's persistent store, unless
``target_options.keep_checkpointer: true``. evalcli deletes each conversation's thread from its own
saver when the conversation ends.

LangGraph has no "new messages" API: the thread's message ids are remembered after every turn and this
turn's messages are those with ids not seen before (never a slice by length, which trimming and
``RemoveMessage`` would break), minus the user's own message. ``ToolMessage(status="error")`` is
``is_error: true``. When ``ainvoke`` raises, the turn keeps the new messages of the checkpointer's
state after the failure.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, convert_to_openai_messages
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from ..messages import Message
from .openai_format import keyword_names
from .session import RESERVED_OPTIONS, Adapter, Calls, ItemInfo, Reply, Thread, TurnFailed, fresh_thread

OWNED = ("input", "stream_mode", "print_mode", "output_keys", "version")
"""Parameters of ``graph.ainvoke`` that evalcli sets itself (the input, and the shape of what comes back)."""
RESPONSE_ROLES = ("assistant", "tool")


class LangGraphAdapter(Adapter):
    """A compiled graph: ``CompiledStateGraph`` or any other ``Pregel``."""

    name = "langgraph"
    run_call = "LangGraph's graph.ainvoke"

    def prepare(self) -> None:
        self.graph, self.saver = with_checkpointer(self.obj, self.options.get("keep_checkpointer") is True)
        self.run_options = {k: v for k, v in self.call_options.items() if k != "config"}
        self.config: dict[str, Any] = dict(self.call_options.get("config") or {})

    @classmethod
    def accepted_options(cls, obj: Any) -> list[str]:
        return [name for name in keyword_names(obj.ainvoke, OWNED) if name not in RESERVED_OPTIONS]

    @classmethod
    def option_problems(cls, obj: Any, options: dict[str, Any]) -> list[str]:
        problems = super().option_problems(obj, options)
        if not isinstance(options.get("keep_checkpointer", False), bool):
            problems.append("'keep_checkpointer' is true or false")
        if not isinstance(options.get("config", {}), dict):
            problems.append("'config' is a mapping (e.g. {recursion_limit: 25})")
        return problems

    def open(self, *, multi_turn: bool, calls: Calls, item: ItemInfo | None = None) -> LangGraphSession:
        return LangGraphSession(self, fresh_thread(self.options), calls)


class LangGraphSession:
    """One conversation: a checkpointer thread of its own, and the message ids it already holds."""

    def __init__(self, adapter: LangGraphAdapter, thread: Thread, calls: Calls) -> None:
        self.adapter = adapter
        self.thread_id = thread.thread
        self.resource_id = thread.resource
        self.calls = calls
        configurable = {**(adapter.config.get("configurable") or {}), "thread_id": thread.thread,
                        "user_id": thread.resource}
        self.config = {**adapter.config, "configurable": configurable}
        self.seen: set[str] = set()

    async def send(self, text: str) -> Reply:
        messages: list[Message] = await self.calls.call_async(self._turn(text))
        return Reply(messages)

    async def _turn(self, text: str) -> list[Message]:
        graph = self.adapter.graph
        human = HumanMessage(text, id=str(uuid.uuid4()))
        try:
            output = await graph.ainvoke({"messages": [human]}, self.config, **self.adapter.run_options)
        except Exception as exc:
            raise TurnFailed(exc, self._new(await self._state_messages(), human.id)) from exc
        messages = output.get("messages") if isinstance(output, dict) else None
        if not isinstance(messages, list):  # a graph whose output leaves the messages out
            messages = await self._state_messages()
        return self._new(messages, human.id)

    async def _state_messages(self) -> list[Any]:
        try:
            state = await self.adapter.graph.aget_state(self.config)
        except Exception:  # noqa: BLE001 - the turn's error is the graph's, not the state read's
            return []
        messages = state.values.get("messages") if isinstance(state.values, dict) else None
        return messages if isinstance(messages, list) else []

    def _new(self, messages: Sequence[Any], human_id: str | None) -> list[Message]:
        """Messages with ids this thread has not held before, the user's own left out; remembers them all."""
        ids = [getattr(m, "id", None) for m in messages]
        after_human = ids.index(human_id) if human_id in ids else len(ids)
        new = [m for i, (m, mid) in enumerate(zip(messages, ids, strict=True))
               if (mid not in self.seen and mid != human_id if mid else i > after_human)]
        self.seen.update(mid for mid in ids if mid)
        return to_openai([m for m in new if isinstance(m, BaseMessage)])

    async def close(self) -> None:
        saver = self.adapter.saver
        if saver is not None and self.thread_id:
            await saver.adelete_thread(self.thread_id)


def with_checkpointer(graph: Any, keep: bool) -> tuple[Any, InMemorySaver | None]:
    """The graph to run and the saver evalcli owns: the graph's own checkpointer only when kept, else a copy
    of the graph with a fresh in-memory one."""
    if keep and isinstance(getattr(graph, "checkpointer", None), BaseCheckpointSaver):
        return graph, None
    saver = InMemorySaver()
    return graph.copy(update={"checkpointer": saver}), saver


def to_openai(messages: list[BaseMessage]) -> list[Message]:
    """LangChain messages as OpenAI response messages, keeping ``ToolMessage.status`` as ``is_error``."""
    out: list[Message] = []
    for original in messages:
        converted = convert_to_openai_messages(original)
        for message in converted if isinstance(converted, list) else [converted]:
            if message.get("role") not in RESPONSE_ROLES:
                continue
            if message["role"] == "assistant" and message.get("tool_calls") and not message.get("content"):
                message["content"] = None
            if message["role"] == "tool" and getattr(original, "status", None) == "error":
                message["is_error"] = True
            out.append(message)
    return out
