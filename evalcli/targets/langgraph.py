"""The ``langgraph`` adapter: a compiled LangGraph graph (``Pregel``) as sessions (docs/targets/frameworks.md).

Graphs from ``langchain.agents.create_agent`` and ``langgraph.prebuilt.create_react_agent`` included.
One turn is ``await graph.ainvoke({"messages": [HumanMessage(text)], **input}, config, **options)`` with
``config.configurable.thread_id`` = the conversation's thread and ``user_id`` = its resource (the
user's own ``configurable.user_id`` pins it, like ``memory.resource``). A graph whose input is a list
of messages (the functional API's ``@entrypoint``) is sent ``[HumanMessage(text)]``. The thread lives
in a checkpointer: a graph without one gets an in-memory ``InMemorySaver`` (on a copy of the graph,
never on the user's object), and a graph's own checkpointer is replaced the same way for the run, so
eval threads never land in a user's persistent store, unless ``target_options.keep_checkpointer: true``.
evalcli deletes each conversation's thread from its own saver when the conversation ends.

LangGraph has no "new messages" API: the thread's message ids are remembered after every turn and this
turn's messages are those with ids not seen before (never a slice by length, which trimming and
``RemoveMessage`` would break), minus the user's own message. ``ToolMessage(status="error")`` is
``is_error: true``. When ``ainvoke`` raises, the turn keeps the new messages of the checkpointer's
state after the failure, those of the subgraphs whose run failed with it included (read from
``aget_state(config, subgraphs=True)``: a subgraph's messages are in its own checkpoint until it finishes).
A turn that ends in ``interrupt()`` records the interrupt and an assistant message holding its value
(``"interrupt": true``); the next user message resumes it as ``Command(resume=...)``. The final state
without ``messages`` is the turn's ``structured`` result.
"""

from __future__ import annotations

import collections.abc
import json
import typing
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, convert_to_openai_messages
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from ..messages import Message
from ..results import Interrupt
from .langgraph_tools import graph_tools, planned_graph
from .openai_format import RESPONSE_ROLES, jsonable, keyword_names
from .session import (
    RESERVED_OPTIONS,
    Adapter,
    Calls,
    ConversationOptions,
    ItemInfo,
    Reply,
    Thread,
    TurnFailed,
    TurnRejected,
    new_thread_id,
    pinned_resource,
)
from .usage import count, record_target_call

OWNED = ("input", "stream_mode", "print_mode", "output_keys", "version")
"""Parameters of ``graph.ainvoke`` that evalcli sets itself (the input, and the shape of what comes back)."""
INTERRUPT_KEY = "__interrupt__"
"""Where ``ainvoke``'s output holds the interrupts a run stopped on."""


class LangGraphAdapter(Adapter):
    """A compiled graph: ``CompiledStateGraph`` or any other ``Pregel``."""

    name = "langgraph"
    run_call = "LangGraph's graph.ainvoke"
    own_options = ("input",)
    resumes = True

    def prepare(self) -> None:
        self.graph, self.saver = with_checkpointer(self.obj, self.options.get("keep_checkpointer") is True)
        self.takes_list, self.state_keys = input_shape(self.obj)
        self.run_options = {k: v for k, v in self.call_options.items() if k != "config"}
        self.config: dict[str, Any] = dict(self.call_options.get("config") or {})
        self.input: dict[str, Any] = dict(self.options.get("input") or {})

    def control_tools(self) -> None:
        """Conversations run on a copy of the graph whose tool nodes ask the conversation's tool plan."""
        if not getattr(self, "_planned", False):
            self.graph = planned_graph(self.graph)
            self._planned = True

    def tool_schemas(self) -> dict[str, Any] | None:
        return graph_tools(self.obj)

    @property
    def outside_hint(self) -> str:
        return "evalcli's plan answers the tools a ToolNode runs and @evalcli.tool functions: run it in a ToolNode " \
               "or decorate it with @evalcli.tool"

    @classmethod
    def accepted_options(cls, obj: Any) -> list[str]:
        return [name for name in keyword_names(obj.ainvoke, OWNED) if name not in RESERVED_OPTIONS]

    @classmethod
    def option_problems(cls, obj: Any, options: dict[str, Any]) -> list[str]:
        problems = super().option_problems(obj, options)
        if not isinstance(options.get("keep_checkpointer", False), bool):
            problems.append("'keep_checkpointer' is true or false")
        config = options.get("config", {})
        if not isinstance(config, dict):
            problems.append("'config' is a mapping (e.g. {recursion_limit: 25})")
        else:
            configurable = config.get("configurable") or {}
            if not isinstance(configurable, dict):
                problems.append("'config.configurable' is a mapping (e.g. {user_id: u-1})")
            elif "thread_id" in configurable:
                problems.append("'config.configurable.thread_id' cannot be set: evalcli gives every conversation a "
                                "thread of its own (remove it; pin the user with config.configurable.user_id or "
                                "memory.resource)")
            elif "user_id" in configurable and pinned_resource(options) not in (None, str(configurable["user_id"])):
                problems.append("'config.configurable.user_id' and 'memory.resource' name different resources: give "
                                "one of them")
        given = options.get("input")
        if given is not None:
            if not isinstance(given, dict):
                problems.append("'input' is a mapping of state keys sent beside 'messages' (e.g. {user_id: u-1})")
            elif "messages" in given:
                problems.append("'input' cannot hold 'messages': evalcli sends the user's message")
            elif input_shape(obj)[0]:
                problems.append("'input' has nowhere to go: this graph's input is a list of messages")
        return problems

    def thread(self, options: Mapping[str, Any], *, multi_turn: bool) -> Thread:
        """A fresh thread; the resource is ``memory.resource``, else the user's ``config.configurable.user_id``,
        else the thread."""
        thread = new_thread_id()
        config = options.get("config")
        configurable = config.get("configurable") if isinstance(config, dict) else None
        user = configurable.get("user_id") if isinstance(configurable, dict) else None
        return Thread(thread, pinned_resource(options) or (str(user) if user is not None else None) or thread)

    def warnings(self, conversations: Sequence[tuple[Mapping[str, Any], bool]]) -> list[str]:
        """State keys the graph's input schema marks required that ``input`` does not supply (a setup may)."""
        missing: dict[str, int] = {}
        for options, has_setup in conversations:
            if has_setup:
                continue
            given = options.get("input")
            for key in self.state_keys:
                if not isinstance(given, dict) or key not in given:
                    missing[key] = missing.get(key, 0) + 1
        if not missing:
            return []
        keys = ", ".join(f"'{k}'" for k in missing)
        count = max(missing.values())
        who = "no conversation supplies" if count == len(conversations) else \
            f"{count} of {len(conversations)} conversations do not supply"
        return [f"target {self.spec}: the graph's input schema has {keys}, which {who} (LangGraph marks every state "
                "key required, so it may be a key the graph writes itself); if the graph reads it, give it with "
                f"target_options.input (e.g. input: {{{next(iter(missing))}: ...}}) or a setup that returns "
                "{'input': {...}}"]

    def open(self, *, multi_turn: bool, calls: Calls,
             conversation: ConversationOptions | None = None, item: ItemInfo | None = None) -> LangGraphSession:
        if conversation is None or conversation.options is None:
            run_options, config, extra = self.run_options, self.config, self.input
            thread = conversation.thread if conversation is not None else self.thread(self.options, multi_turn=True)
        else:
            options = conversation.options
            run_options = {k: v for k, v in options.items()
                           if k not in RESERVED_OPTIONS and k not in self.own_options and k != "config"}
            config = dict(options.get("config") or {})
            extra = dict(options.get("input") or {})
            thread = conversation.thread
        return LangGraphSession(self, thread, calls, run_options, config, extra)


class LangGraphSession:
    """One conversation: a checkpointer thread of its own, the message ids it already holds, and the interrupt it
    is waiting on, if any."""

    def __init__(self, adapter: LangGraphAdapter, thread: Thread, calls: Calls, run_options: dict[str, Any],
                 config: dict[str, Any], extra: dict[str, Any]) -> None:
        self.adapter = adapter
        self.thread_id = thread.thread
        self.resource_id = thread.resource
        self.calls = calls
        self.run_options = run_options
        self.extra = extra
        configurable = {**(config.get("configurable") or {}), "thread_id": thread.thread, "user_id": thread.resource}
        self.config = {**config, "configurable": configurable}
        self.seen: set[str] = set()
        self.turn = -1
        """The index of the turn being played (the first is 0)."""
        self.pending: list[Any] = []
        """The interrupts the last turn stopped on (what the next user message resumes)."""

    async def send(self, text: str, *, resume: Any = None) -> Reply:
        reply: Reply = await self.calls.call_async(self._turn(text, resume))
        return reply

    async def _turn(self, text: str, resume: Any) -> Reply:
        graph = self.adapter.graph
        human: HumanMessage | None = None
        if resume is not None and not self.pending:
            raise TurnRejected("'resume' was given, but no interrupt is pending (the previous turn did not end in "
                               "interrupt())")
        if self.pending:
            value = text if resume is None else resume
            ids = [getattr(i, "id", None) for i in self.pending]
            graph_input: Any = Command(resume={i: value for i in ids} if len(ids) > 1 and all(ids) else value)
            resumed: Any = value
        else:
            human = HumanMessage(text, id=str(uuid.uuid4()))
            graph_input = [human] if self.adapter.takes_list else {"messages": [human], **self.extra}
            resumed = None
        human_id = human.id if human is not None else None
        self.turn += 1
        try:
            output = await graph.ainvoke(graph_input, self.config, **self.run_options)
        except Exception as exc:
            self.pending = []
            raise TurnFailed(exc, self._new(await self._state_messages(subgraphs=True), human_id)) from exc
        messages, structured, self.pending = self._read(output)
        if messages is None:  # a graph whose output leaves the messages out
            messages = await self._state_messages()
        new = self._new(messages, human_id)
        interrupt = None
        if self.pending:
            values = [getattr(i, "value", None) for i in self.pending]
            interrupt = Interrupt(values[0] if len(values) == 1 else values)
            new.append({"role": "assistant", "content": interrupt_text(interrupt.value), "interrupt": True})
        return Reply(new, structured=structured, interrupt=interrupt, resume=resumed)

    def _read(self, output: Any) -> tuple[list[Any] | None, Any, list[Any]]:
        """From ``ainvoke``'s output: its messages, the rest of the state as JSON, and the pending interrupts."""
        if isinstance(output, BaseMessage):
            return [output], None, []
        if isinstance(output, list) and all(isinstance(m, BaseMessage) for m in output):
            return output, None, []
        if not isinstance(output, dict):
            return None, None, []
        interrupts = list(output.get(INTERRUPT_KEY) or ())
        messages = output.get("messages")
        rest = {k: v for k, v in output.items() if k not in ("messages", INTERRUPT_KEY)}
        return messages if isinstance(messages, list) else None, jsonable(rest) if rest else None, interrupts

    async def _state_messages(self, *, subgraphs: bool = False) -> list[Any]:
        """The thread's messages; with ``subgraphs``, followed by those of the subgraphs still in progress (a run
        that failed inside one) that the graph's own state does not hold yet."""
        try:
            state = await self.adapter.graph.aget_state(self.config, subgraphs=subgraphs)
        except Exception:  # noqa: BLE001 - the turn's error is the graph's, not the state read's
            return []
        return with_subgraphs(state) if subgraphs else state_messages(state)

    def _new(self, messages: Sequence[Any], human_id: str | None) -> list[Message]:
        """Messages with ids this thread has not held before, the user's own left out; remembers them all."""
        ids = [getattr(m, "id", None) for m in messages]
        after_human = ids.index(human_id) if human_id is not None and human_id in ids else len(ids)
        new = [m for i, (m, mid) in enumerate(zip(messages, ids, strict=True))
               if (mid not in self.seen and mid != human_id if mid else i > after_human)]
        self.seen.update(mid for mid in ids if mid)
        record_calls(new, self.turn)
        return to_openai([m for m in new if isinstance(m, BaseMessage)])

    async def close(self) -> None:
        saver = self.adapter.saver
        if saver is not None and self.thread_id:
            await saver.adelete_thread(self.thread_id)


def state_messages(state: Any) -> list[Any]:
    """The messages a ``StateSnapshot`` holds (its ``messages``, or its value when that is the messages)."""
    values = getattr(state, "values", None)
    messages = values.get("messages") if isinstance(values, dict) else values
    if isinstance(messages, BaseMessage):
        return [messages]
    return list(messages) if isinstance(messages, list) else []


def with_subgraphs(state: Any) -> list[Any]:
    """A snapshot's messages, then (depth first) those of its tasks' subgraph snapshots that it does not hold, each
    message once (by id)."""
    messages = state_messages(state)
    ids = {getattr(m, "id", None) for m in messages} - {None}
    for task in getattr(state, "tasks", None) or ():
        inner = getattr(task, "state", None)
        if inner is None or not hasattr(inner, "values"):  # a task that is no subgraph, or one not read
            continue
        for message in with_subgraphs(inner):
            mid = getattr(message, "id", None)
            if mid is None or mid not in ids:
                messages.append(message)
                ids.add(mid)
    return messages


def record_calls(messages: Sequence[Any], turn: int) -> None:
    """Each model call of the turn (an ``AIMessage`` with ``usage_metadata``) as a ``target`` call with its tokens,
    named after the model its ``response_metadata`` names."""
    for message in messages:
        usage = getattr(message, "usage_metadata", None)
        if not isinstance(usage, dict):
            continue
        metadata = getattr(message, "response_metadata", None) or {}
        model = metadata.get("model_name") or metadata.get("model") or ""
        details = usage.get("input_token_details") or {}
        record_target_call(str(model), count(usage.get("input_tokens")), count(usage.get("output_tokens")),
                           turn_index=turn, cached_tokens=count(details.get("cache_read")))


def interrupt_text(value: Any) -> str:
    """An interrupt's value as the assistant's words: a string as is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(jsonable(value), ensure_ascii=False)


def input_shape(graph: Any) -> tuple[bool, list[str]]:
    """Whether the graph's input is a list of messages (the functional API's ``@entrypoint``), and the state keys
    other than ``messages`` its input schema marks required."""
    try:
        fields = getattr(graph.get_input_schema(), "model_fields", None) or {}
    except Exception:  # noqa: BLE001 - a graph whose schema cannot be read is sent the usual mapping
        fields = {}
    if set(fields) == {"root"} and takes_a_list(fields["root"].annotation):  # an entrypoint over messages
        return True, []
    try:
        schema = graph.get_input_jsonschema()
    except Exception:  # noqa: BLE001 - as above (e.g. annotations it cannot resolve)
        return False, []
    required = schema.get("required") if isinstance(schema, dict) else None
    return False, [str(k) for k in required if k != "messages"] if isinstance(required, list) else []


def takes_a_list(annotation: Any) -> bool:
    """Whether an entrypoint's input annotation is a list or sequence (possibly still a string: ``list[...]``)."""
    if isinstance(annotation, typing.ForwardRef):
        annotation = annotation.__forward_arg__
    if isinstance(annotation, str):
        return annotation.replace(" ", "").split("[")[0].split(".")[-1] in ("list", "List", "Sequence")
    origin = typing.get_origin(annotation) or annotation
    return origin in (list, collections.abc.Sequence, typing.Sequence)


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
            if message["role"] == "assistant":
                invalid = unparsed_calls(original, message)
                if invalid:
                    message["tool_calls"] = [*(message.get("tool_calls") or []), *invalid]
            if message["role"] == "assistant" and message.get("tool_calls") and not message.get("content"):
                message["content"] = None
            if message["role"] == "tool" and getattr(original, "status", None) == "error":
                message["is_error"] = True
            out.append(message)
    return out


def unparsed_calls(original: BaseMessage, message: Message) -> list[Message]:
    """The calls of an ``AIMessage`` whose arguments LangChain could not parse (``invalid_tool_calls``: the model
    wrote arguments that are not JSON), as the model wrote them: the model made them, though no tool ran them."""
    known = {call.get("id") for call in message.get("tool_calls") or () if isinstance(call, dict)}
    out: list[Message] = []
    for call in getattr(original, "invalid_tool_calls", None) or ():
        call_id = call.get("id")
        if call_id in known:
            continue
        args = call.get("args")
        out.append({"id": call_id, "type": "function",
                    "function": {"name": call.get("name") or "", "arguments": args if isinstance(args, str) else ""}})
    return out
