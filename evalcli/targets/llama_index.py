"""The ``llama_index`` adapter: a LlamaIndex ``FunctionAgent``, ``ReActAgent`` (any ``BaseWorkflowAgent``) or an
``AgentWorkflow`` as sessions (docs/targets/llama-index.md).

LlamaIndex keeps a conversation in a workflow ``Context`` (its memory and state): each conversation gets its own
``Context``, made from evalcli's copy of the user's workflow, and every turn is ``handler = workflow.run(user_msg=text,
ctx=ctx, **options)``, its events streamed and the handler awaited. The copy differs from the user's object in one
thing: its ``_call_tool`` asks the conversation's tool plan (``evalcli.tools.acall``) before calling the tool, so
mocks, tapes and ``--hermetic`` hold; the ``handoff`` tool of an ``AgentWorkflow`` is bookkeeping and always runs.

This turn's messages come from its events: each ``AgentOutput`` is an assistant message (its text and the tool calls
the model chose), each ``ToolCallResult`` a tool result (``is_error`` when LlamaIndex's ``ToolOutput`` says so: a tool
that raised, an unknown tool). The last ``AgentOutput`` is the answer; its ``structured_response`` (an agent with
``output_cls``) is the turn's ``structured`` result. Usage is read from the LLM's own end-of-call events
(LlamaIndex's instrumentation, ``LLMChatEndEvent``): the tokens the server reported on the response (a streaming
agent's server reports them when asked, e.g. OpenAI's ``stream_options: {include_usage: true}``).
"""

from __future__ import annotations

import contextvars
import copy
import json
import threading
import warnings
from collections.abc import Mapping
from typing import Any

from llama_index.core import Settings
from llama_index.core.agent.workflow import AgentOutput, ToolCallResult
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events.llm import LLMChatEndEvent
from llama_index.core.llms import ChatMessage
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.core.tools import ToolOutput
from workflows import Context
from workflows.context.state_store import UnserializableKeyWarning

from ..messages import Message
from ..tools import MockedToolError, acall
from .openai_format import assistant, jsonable, tool_call, tool_result
from .session import Adapter, Calls, ConversationOptions, ItemInfo, Reply, Thread, TurnFailed
from .usage import count, record_target_call

RUN_OPTIONS = ("max_iterations", "early_stopping_method")
"""What ``workflow.run`` takes beside the message and the context."""
HANDOFF = "handoff"
"""An ``AgentWorkflow``'s tool that passes the conversation to another agent: bookkeeping, never mocked."""

TURN: contextvars.ContextVar[int | None] = contextvars.ContextVar("evalcli_llama_index_turn", default=None)
"""The turn being played, for the usage handler (the workflow's steps run in tasks that inherit it)."""


class LlamaIndexAdapter(Adapter):
    """A ``BaseWorkflowAgent`` (``FunctionAgent``, ``ReActAgent``, ``CodeActAgent``) or an ``AgentWorkflow``."""

    name = "llama_index"
    run_call = "LlamaIndex's workflow.run"
    own_options = ("chat_history",)

    def prepare(self) -> None:
        listen_for_usage()
        # the memory a Context cannot serialize is passed again each turn (fresh_memory): its warning is noise here
        warnings.filterwarnings("ignore", category=UnserializableKeyWarning)
        self.workflow = planned_copy(self.obj)

    @classmethod
    def accepted_options(cls, obj: Any) -> list[str]:
        return list(RUN_OPTIONS)

    @classmethod
    def check_values(cls, obj: Any, options: dict[str, Any]) -> None:
        history = options.get("chat_history")
        if history is not None and not (isinstance(history, list) and all(
                isinstance(m, ChatMessage) or (isinstance(m, dict) and "role" in m) for m in history)):
            raise ValueError("'chat_history' is a list of messages, each {role: user|assistant|system, content: ...}")

    def tool_schemas(self) -> dict[str, Any] | None:
        agents = list(getattr(self.obj, "agents", {}).values()) or [self.obj]
        tools: dict[str, Any] = {}
        for agent in agents:
            if getattr(agent, "tool_retriever", None) is not None:
                return None  # tools chosen per message: not known before a run
            for tool in getattr(agent, "tools", None) or ():
                metadata = tool.metadata
                tools[metadata.get_name()] = metadata.get_parameters_dict()
        return tools

    def interceptable(self, name: str) -> bool | None:
        tools = self.tool_schemas()
        return None if tools is None else name in tools

    def run_warnings(self) -> list[str]:
        """Model calls whose response reported no usage: not counted, and said once after the run (a budget of the
        target's tokens cannot see them)."""
        with _listening:
            count, _unreported[0] = _unreported[0], 0
        if not count:
            return []
        return [f"target {self.spec}: {count} model call{'' if count == 1 else 's'} reported no token usage, so "
                f"{'its' if count == 1 else 'their'} tokens are not counted (nor held to --max-tokens or --max-cost); "
                "a streaming agent's server reports usage when asked: OpenAILike(..., additional_kwargs="
                "{'stream_options': {'include_usage': True}}) (docs/targets/llama-index.md)"]

    def run_counts(self) -> dict[str, int]:
        with _listening:
            count, _unreported[0] = _unreported[0], 0
        return {"unreported": count} if count else {}

    def add_run_counts(self, counts: Mapping[str, int]) -> None:
        with _listening:
            _unreported[0] += counts.get("unreported", 0)

    def open(self, *, multi_turn: bool, calls: Calls, conversation: ConversationOptions | None = None,
             item: ItemInfo | None = None) -> LlamaIndexSession:
        thread = conversation.thread if conversation is not None else self.thread(self.options, multi_turn=True)
        given = self.options if conversation is None or conversation.options is None else conversation.options
        options = {k: v for k, v in given.items() if k in RUN_OPTIONS}
        return LlamaIndexSession(self, thread, calls, options, list(given.get("chat_history") or ()))


class LlamaIndexSession:
    """One conversation: its own workflow ``Context``."""

    def __init__(self, adapter: LlamaIndexAdapter, thread: Thread, calls: Calls, options: dict[str, Any],
                 history: list[Any]) -> None:
        self.adapter = adapter
        self.history = history
        self.thread_id = thread.thread
        self.resource_id = thread.resource
        self.calls = calls
        self.options = dict(options)
        self.context: Any = None
        self.turn = 0

    async def send(self, text: str, *, resume: Any = None) -> Reply:
        reply: Reply = await self.calls.call_async(self._turn(text))
        return reply

    async def _turn(self, text: str) -> Reply:
        workflow = self.adapter.workflow
        if self.context is None:
            self.context = Context(workflow)
            self.options["memory"] = fresh_memory(workflow, self.history)
        turn, self.turn = self.turn, self.turn + 1
        token = TURN.set(turn)
        events: list[Any] = []
        try:
            handler = workflow.run(user_msg=text, ctx=self.context, **self.options)
            async for event in handler.stream_events():
                if isinstance(event, (AgentOutput, ToolCallResult)):
                    events.append(event)
            result = await handler
        except Exception as exc:
            raise TurnFailed(exc, to_openai(events)) from exc
        finally:
            TURN.reset(token)
        structured = getattr(result, "structured_response", None)
        messages = to_openai(events)
        answer = getattr(getattr(result, "response", None), "content", None)
        last = messages[-1] if messages else None
        if isinstance(answer, str) and answer and not (last and last["role"] == "assistant" and last.get("content")):
            # a return_direct tool ended the run: its output is the run's answer, which no AgentOutput event carried
            messages.append(assistant(answer))
        return Reply(messages, structured=jsonable(structured) if structured is not None else None)

    async def close(self) -> None:
        self.context = None


def planned_copy(workflow: Any) -> Any:
    """A shallow copy of the user's workflow whose tool calls ask the conversation's tool plan."""
    clone = copy.copy(workflow)
    live = workflow._call_tool  # bound to the user's object: the same code, the same agents and tools

    async def call_tool(ctx: Any, tool: Any, tool_input: dict[str, Any]) -> Any:
        name = tool.metadata.get_name()
        if name == HANDOFF:
            return await live(ctx, tool, tool_input)
        failed: list[Any] = []

        async def run() -> Any:
            output = await live(ctx, tool, tool_input)
            if getattr(output, "is_error", False):  # LlamaIndex caught the tool's exception: record it as an error
                failed.append(output)
                raise RuntimeError(str(output.content))
            return output

        try:
            return await acall(name, tool_input, run, shape=lambda value: answered(name, tool_input, value),
                               record_as=lambda output: output.raw_output)
        except MockedToolError as exc:
            return answered(name, tool_input, str(exc), error=exc)
        except RuntimeError:
            if failed:
                return failed[0]
            raise

    object.__setattr__(clone, "_call_tool", call_tool)
    return clone


def answered(name: str, tool_input: dict[str, Any], value: Any, error: Exception | None = None) -> Any:
    """A ``ToolOutput`` holding a mock's or a tape's answer (or its error, which the model sees as the tool's)."""
    return ToolOutput(content=value if isinstance(value, str) else str(jsonable(value)), tool_name=name,
                      raw_input=tool_input, raw_output=value, is_error=error is not None, exception=error)


def fresh_memory(workflow: Any, history: list[Any]) -> Any:
    """A conversation's memory, as LlamaIndex makes one by default (a ``ChatMemoryBuffer`` on the first agent's LLM),
    holding ``target_options.chat_history`` (``ChatMessage`` objects or ``{role, content}`` mappings) before the first
    turn.
    evalcli passes it to every run of the conversation: a ``Context`` that cannot serialize its memory between runs
    (llama-index-core 0.14 under pydantic 2.14) drops it and takes this one again, which holds the history."""
    agents = getattr(workflow, "agents", None)
    root = agents[workflow.root_agent] if isinstance(agents, dict) else workflow
    messages = [m if isinstance(m, ChatMessage) else ChatMessage.model_validate(m) for m in history]
    return ChatMemoryBuffer.from_defaults(chat_history=messages, llm=getattr(root, "llm", None) or Settings.llm)


def to_openai(events: list[Any]) -> list[Message]:
    """The turn's ``AgentOutput`` and ``ToolCallResult`` events as OpenAI messages, in order (the final output repeats
    the run's tool calls: each call is reported once, known by its id, name and arguments, since a model may reuse
    ids, ``call_0`` in every reply)."""
    out: list[Message] = []
    seen: set[str] = set()
    for event in events:
        if isinstance(event, AgentOutput):
            fresh = [c for c in event.tool_calls if _signature(c) not in seen]
            seen.update(_signature(c) for c in fresh)
            calls = [tool_call(c.tool_id, c.tool_name, c.tool_kwargs) for c in fresh]
            content = event.response.content if event.response is not None else None
            if content or calls:
                out.append(assistant(content, calls))
        else:
            result = event.tool_output
            message = tool_result(event.tool_id, result.content, name=event.tool_name,
                                  is_error=bool(getattr(result, "is_error", False)))
            if event.tool_name == HANDOFF:  # a handoff, not a tool: never the plan's, never "live" (docs/hermetic.md)
                message["handoff"] = True
            out.append(message)
    return out


def _signature(call: Any) -> str:
    return json.dumps([call.tool_id, call.tool_name, jsonable(call.tool_kwargs)], sort_keys=True, default=str)


_listening = threading.Lock()
_handler: list[Any] = []
_unreported = [0]
"""Model calls inside a turn whose response reported no usage (``LlamaIndexAdapter.run_warnings``)."""


def listen_for_usage() -> None:
    """Read every LLM call's usage from LlamaIndex's instrumentation (once per process)."""
    with _listening:
        if not _handler:
            _handler.append(UsageHandler())
            get_dispatcher().add_event_handler(_handler[0])


class UsageHandler(BaseEventHandler):  # type: ignore[misc]
    """Each ``LLMChatEndEvent`` inside a turn: the tokens its raw response reports, as a ``target`` call."""

    @classmethod
    def class_name(cls) -> str:
        return "EvalcliUsageHandler"

    def handle(self, event: Any, **kwargs: Any) -> None:
        turn = TURN.get()
        if turn is None or not isinstance(event, LLMChatEndEvent) or event.response is None:
            return
        raw = event.response.raw
        usage = field(raw, "usage")
        if usage is None:
            with _listening:
                _unreported[0] += 1
            return
        record_target_call(str(field(raw, "model") or ""), count(field(usage, "prompt_tokens")),
                           count(field(usage, "completion_tokens")), turn_index=turn)


def field(value: Any, name: str) -> Any:
    """A field of a raw response, an object or a mapping."""
    return value.get(name) if isinstance(value, Mapping) else getattr(value, name, None)
