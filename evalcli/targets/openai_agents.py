"""The ``openai_agents`` adapter: an OpenAI Agents SDK ``Agent`` as sessions (docs/targets/frameworks.md).

One turn is ``await Runner.run(agent, text, session=S, **options)``. S is the thread's own in-memory
``SQLiteSession`` (one database per conversation, closed with it), so no two conversations share
history; the resource is not used. Each later turn goes to the agent that answered the previous one
(``result.last_agent``, as the SDK's own multi-turn examples do) unless ``continue_with: starting_agent``.
A ``context`` written as a mapping becomes the agent's context type when it is known (``Agent[Ctx]``),
a new object for each conversation, shared by its turns.

This turn's messages are ``result.new_items`` in OpenAI format (assistant text, tool calls and handoffs,
tool results; reasoning items and the user's input left out), every assistant message named after the
agent that wrote it (``name``). A handoff's result is marked ``handoff: true``: it is not a tool's, so it has no
``source`` and ``--hermetic`` never counts it as a live call (docs/hermetic.md). The SDK turns a tool's exception
into the tool's output text and goes on,
with no error flag on the item: evalcli installs a ``RunConfig.tool_error_formatter`` that only records
the call ids the SDK reports as failed (an exception in the tool, a tool that does not exist) and leaves
the text as it was, so those results are ``is_error: true``; the SDK's default failure text and its
timeout text are recognised too. When the run raises, the turn keeps what it produced before the failure.
A ``final_output`` that is not text is the turn's ``structured`` result.

A tripped input or output guardrail is an outcome of the turn, not an error (docs/targets/index.md): the turn records the
guardrail, keeps what the agent had produced (an output guardrail's: the answer it stopped) and the conversation
goes on, as an app that catches ``InputGuardrailTripwireTriggered`` does. A ``setup`` may yield the app's own
session object as ``session``: the conversation runs on it (and the setup, not evalcli, closes it). Under
``--hermetic`` a turn runs with ``RunConfig.tracing_disabled``: the SDK would export its trace to OpenAI.

Every model call is counted as the target's usage, named after the agent that made it, the calls of the runs a
guardrail or a tool starts inside the turn included (``agents_usage``).
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import json
import re
import typing
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from agents import (
    InputGuardrailTripwireTriggered,
    ModelSettings,
    OutputGuardrailTripwireTriggered,
    RunConfig,
    Runner,
    SQLiteSession,
)

from ..messages import Message
from ..results import Guardrail
from ..tools import MockedToolError, acall, as_text
from ..tools.plan import current_plan
from .agents_mcp import ServerHolder, planned_server
from .agents_usage import Counting, count_nested_runs, counting_hooks, counting_turn, unkept_reply
from .framework_mcp import ServerTools, described
from .graph import walk
from .openai_format import as_option, assistant, jsonable, keyword_names, tool_call, tool_result
from .session import RESERVED_OPTIONS, Adapter, Calls, ConversationOptions, ItemInfo, Reply, Thread, TurnFailed, new_thread_id

OWNED = ("starting_agent", "input", "session", "previous_response_id", "auto_previous_response_id",
         "conversation_id")
"""Parameters of ``Runner.run`` that evalcli sets itself, or that would thread the conversation elsewhere."""
FAILED_KINDS = frozenset({"tool_exception", "tool_not_found"})
"""Kinds of ``ToolErrorFormatterArgs`` that mean the tool failed (a rejected approval is a decision, not an error)."""
TIMEOUT_TEXT = re.compile(r"^Tool '[^']*' timed out after [\d.]+ seconds\.$")
HAS_FORMATTER = any(f.name == "tool_error_formatter" for f in dataclasses.fields(RunConfig))
"""Whether this SDK reports handled tool failures to a ``RunConfig.tool_error_formatter`` (else: the text only)."""
HANDOFF_ITEMS = ("handoff_call_item", "handoff_output_item")
"""The run items of a handoff: the call that hands over and its output (not a tool's)."""
CONTINUE_WITH = ("last_agent", "starting_agent")
"""``continue_with``: which agent a later turn goes to."""


def default_failure_text() -> str:
    """The text the SDK's default failure handler gives the model (read from the SDK, not copied)."""
    try:
        from agents.tool import default_tool_error_function

        return str(default_tool_error_function(None, Exception()))  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - a version without it: fall back to the text of 0.x
        return "An error occurred while running the tool. Please try again."


class OpenAIAgentsAdapter(Adapter):
    """An ``agents.Agent`` of the OpenAI Agents SDK (``openai-agents``)."""

    name = "openai_agents"
    run_call = "the Agents SDK's Runner.run"
    own_options = ("continue_with",)

    def prepare(self) -> None:
        self.context_type = context_type(self.obj)
        self.run_options, self.run_config = run_options(self.call_options)
        self.failure_text = default_failure_text()
        count_nested_runs()
        self.start = self.obj
        """The agent a conversation starts with: the user's, or its copy whose tools ask the tool plan."""
        self.servers = ServerHolder()
        """The MCP servers evalcli connected for the run (docs/hermetic.md, "MCP tools")."""
        self.listed = ServerTools((str(getattr(s, "name", "")), described(s, str(getattr(s, "name", "")) or None))
                                  for each in agents_of(self.obj) for s in getattr(each, "mcp_servers", None) or ())
        """Those servers' tools, listed once when the target is checked."""
        if any(getattr(each, "mcp_servers", None) for each in agents_of(self.obj)):
            self.control_tools()  # its MCP servers are connected by the planned copies, once for the run

    def control_tools(self) -> None:
        """Conversations start with a copy of the agent (and of every agent it hands off to) whose function tools
        and MCP servers ask the conversation's tool plan; the user's agents are not changed."""
        if self.start is self.obj:
            self.start = planned_agent(self.obj, {}, self.servers)

    async def aclose(self) -> None:
        await self.servers.close()

    def tool_schemas(self) -> dict[str, Any] | None:
        listed = self.listed.schemas()
        return None if listed is None else {**function_tools(self.obj), **listed}

    def mcp_servers(self) -> dict[str, list[str]] | None:
        """The MCP servers of the agent and those it hands off to, by name, with the tools each lists."""
        return self.listed.names()

    def mcp_server_places(self, name: str) -> list[str]:
        return self.listed.places.get(name, [])

    @classmethod
    def accepted_options(cls, obj: Any) -> list[str]:
        return keyword_names(Runner.run, OWNED)

    @classmethod
    def option_problems(cls, obj: Any, options: dict[str, Any]) -> list[str]:
        """``session`` in YAML: a session is an object, which only a setup can give."""
        if "session" in options:
            return ["'session' cannot be written in YAML: a setup (target_options.setup: module:function) may return "
                    "the app's own session object as 'session' (e.g. {'session': SQLiteSession(...)})"]
        return super().option_problems(obj, options)

    @classmethod
    def check_values(cls, obj: Any, options: dict[str, Any]) -> None:
        if options.get("continue_with", "last_agent") not in CONTINUE_WITH:
            raise ValueError(f"'continue_with' is one of: {', '.join(CONTINUE_WITH)} (not {options['continue_with']!r})")
        try:
            run_options({k: v for k, v in options.items() if k != "continue_with"})
        except TypeError as exc:
            raise TypeError(f"run_config: {exc}") from None
        kind = context_type(obj)
        if "context" in options and kind is not None:
            as_option(kind, options["context"], "context", "context type")

    def returned_problems(self, returned: Mapping[str, Any]) -> list[str]:
        """A setup may also return ``session``: the app's own session object (e.g. ``SQLiteSession``)."""
        problems = super().returned_problems({k: v for k, v in returned.items() if k != "session"})
        session = returned.get("session")
        if "session" in returned and not (hasattr(session, "get_items") and hasattr(session, "add_items")):
            problems.append(f"'session' is not an Agents SDK session (got {type(session).__name__}; give e.g. "
                            "agents.SQLiteSession(...))")
        return problems

    def thread(self, options: Mapping[str, Any], *, multi_turn: bool) -> Thread:
        """A fresh thread; the resource is not used."""
        return Thread(new_thread_id(), None)

    def open(self, *, multi_turn: bool, calls: Calls,
             conversation: ConversationOptions | None = None, item: ItemInfo | None = None) -> OpenAIAgentsSession:
        session = None
        if conversation is None or conversation.options is None:
            options, config, raw, from_setup = self.run_options, self.run_config, self.options, False
        else:
            raw = conversation.options
            options, config = run_options(call_options_of(raw))
            from_setup = "context" in conversation.from_setup
            session = options.pop("session", None) if "session" in conversation.from_setup else None
        if "context" in options and (not from_setup or isinstance(options["context"], dict)):
            context = options["context"]  # contexts are mutable: each conversation gets its own
            options = {**options, "context": as_option(self.context_type, context, "context", "context type")
                       if self.context_type is not None else copy.deepcopy(context)}
        thread = conversation.thread.thread if conversation is not None else new_thread_id()
        starting = raw.get("continue_with", "last_agent") == "starting_agent"
        return OpenAIAgentsSession(self, thread or "", calls, options, config, restart=starting, session=session)


class OpenAIAgentsSession:
    """One conversation: its own SDK session and context, the agent that answered last, and the call ids the SDK
    reported as failed tools."""

    def __init__(self, adapter: OpenAIAgentsAdapter, thread: str, calls: Calls, options: dict[str, Any],
                 run_config: RunConfig, *, restart: bool, session: Any = None) -> None:
        self.adapter = adapter
        self.thread_id: str | None = thread
        self.resource_id: str | None = None
        self.calls = calls
        self.options = options
        self.restart = restart
        self.agent = adapter.start
        self.own_session = session is None
        """Whether evalcli made the session (and closes it); a setup's own is closed by the setup."""
        self.session = SQLiteSession(thread) if session is None else session
        self.failed: set[str] = set()
        self.turn = 0
        self.user_config = run_config
        self.run_config = run_config
        if HAS_FORMATTER:
            self.run_config = dataclasses.replace(run_config, tool_error_formatter=self._recorder())

    def _recorder(self) -> Any:
        """A ``tool_error_formatter`` that notes failed call ids and keeps the text (the user's own formatter's, if any)."""
        theirs = self.user_config.tool_error_formatter

        async def record(args: Any) -> str | None:
            if args.kind in FAILED_KINDS:
                self.failed.add(args.call_id)
            message = theirs(args) if theirs is not None else None
            return await message if inspect.isawaitable(message) else message

        return record

    async def send(self, text: str, *, resume: Any = None) -> Reply:
        reply: Reply = await self.calls.call_async(self._turn(text))
        return reply

    async def _turn(self, text: str) -> Reply:
        agent = self.adapter.start if self.restart else self.agent
        turn, self.turn = self.turn, self.turn + 1
        hooks = counting_hooks(self.options.get("hooks"), turn, self.run_config)
        options = {**self.options, "hooks": hooks}
        playing = counting_turn.set(Counting(turn, self.run_config))
        config = self.run_config
        if (plan := current_plan()) is not None and plan.hermetic:  # the SDK would export the turn to OpenAI
            config = dataclasses.replace(config, tracing_disabled=True)
        try:
            result = await Runner.run(agent, text, session=self.session, run_config=config, **options)
        except (InputGuardrailTripwireTriggered, OutputGuardrailTripwireTriggered) as exc:
            return await self._tripped(text, exc, agent)
        except Exception as exc:
            kept = await self._kept(text, exc, agent)
            raise TurnFailed(exc, kept + self._unkept(kept, hooks.responses)) from exc
        finally:
            counting_turn.reset(playing)
        self.agent = result.last_agent
        output = result.final_output
        structured = None if isinstance(output, str) or output is None else jsonable(output)
        messages = self._convert(_with_names(result.new_items))
        last = messages[-1] if messages else None
        if output is not None and output != "" and not (last and last["role"] == "assistant" and last.get("content")):
            # the run stopped at a tool's output (tool_use_behavior "stop_on_first_tool", StopAtTools, a function):
            # its final output is the answer the app shows, which no model message holds
            said = output if isinstance(output, str) else json.dumps(jsonable(output), ensure_ascii=False)
            answered = getattr(result.last_agent, "name", None)
            messages.append(_named(assistant(said), answered if isinstance(answered, str) else None))
        return Reply(messages, structured=structured)

    async def _tripped(self, text: str, exc: InputGuardrailTripwireTriggered | OutputGuardrailTripwireTriggered,
                       agent: Any) -> Reply:
        """A turn a guardrail stopped: what the agent had produced, and the guardrail (an output guardrail's agent
        answered, so a later turn continues with it)."""
        run_data = getattr(exc, "run_data", None)
        checked = exc.guardrail_result
        kind = "input" if isinstance(exc, InputGuardrailTripwireTriggered) else "output"
        messages = await self._kept(text, exc, agent)
        structured = None
        if isinstance(exc, OutputGuardrailTripwireTriggered):
            answer = exc.guardrail_result.agent_output
            answered = getattr(exc.guardrail_result.agent, "name", None)
            if not any(m["role"] == "assistant" and m.get("content") for m in messages):
                text_of = answer if isinstance(answer, str) else json.dumps(jsonable(answer), ensure_ascii=False)
                messages.append(_named(assistant(text_of), answered if isinstance(answered, str) else None))
            structured = None if isinstance(answer, str) or answer is None else jsonable(answer)
            self.agent = getattr(run_data, "last_agent", None) or exc.guardrail_result.agent or self.agent
        return Reply(messages, structured=structured, guardrail=Guardrail(checked.guardrail.get_name(), kind))

    async def _kept(self, text: str, exc: Exception, agent: Any) -> list[Message]:
        """What the run produced before it raised: the items the exception carries (each with its agent), else
        what the run saved to the session after this turn's user message."""
        run_data = getattr(exc, "run_data", None)
        items = list(getattr(run_data, "new_items", None) or ())
        if items:
            return self._convert(_with_names(items))
        try:
            saved = list(await self.session.get_items())
        except Exception:  # noqa: BLE001 - the turn's error is the run's, not the session's
            saved = []
        starts = [i for i, item in enumerate(saved) if item.get("role") == "user" and item.get("content") == text]
        return self._convert(with_agents(saved[starts[-1] + 1:], getattr(agent, "name", None))) if starts else []

    def _unkept(self, kept: list[Message], responses: list[tuple[Any, Any]]) -> list[Message]:
        """The model's last reply when the run raised before it became a run item (``agents_usage.unkept_reply``)."""
        recorded = {str(call.get("id")) for message in kept for call in message.get("tool_calls") or ()}
        return self._convert(unkept_reply(responses, recorded))

    def _convert(self, items: Iterable[tuple[Any, str | None]]) -> list[Message]:
        return to_openai(items, lambda call_id, output: call_id in self.failed or self._failure_text(output))

    def _failure_text(self, output: Any) -> bool:
        return isinstance(output, str) and (output == self.adapter.failure_text or bool(TIMEOUT_TEXT.match(output)))

    async def close(self) -> None:
        if self.own_session:
            self.session.close()


def agents_of(agent: Any) -> list[Any]:
    """The agent and every agent it can hand off to, each once."""
    return [a for a in walk(agent, handoff_targets) if hasattr(a, "tools")]


def handoff_targets(agent: Any) -> Iterator[Any]:
    """The agents ``agent`` can hand off to (a ``Handoff`` names its agent, or keeps a weak reference to it)."""
    return (getattr(h, "agent", None) or _handoff_agent(h) or h for h in getattr(agent, "handoffs", None) or ())


def _handoff_agent(handoff: Any) -> Any:
    ref = getattr(handoff, "_agent_ref", None)
    return ref() if callable(ref) else None


def function_tools(agent: Any) -> dict[str, Any]:
    """Each function tool's JSON schema, by name, over the agent and those it hands off to (their MCP servers' tools
    are listed apart, ``ServerTools``)."""
    from agents import FunctionTool

    tools: dict[str, Any] = {}
    for each in agents_of(agent):
        for tool in each.tools or ():
            if isinstance(tool, FunctionTool):
                tools[tool.name] = tool.params_json_schema
    return tools


def planned_agent(agent: Any, made: dict[int, Any], servers: ServerHolder) -> Any:
    """A copy of the agent whose function tools and MCP servers ask the tool plan, its handoffs to copies made the same
    way."""
    from agents import Agent, FunctionTool, Handoff

    if id(agent) in made:
        return made[id(agent)]
    copy_ = agent.clone()
    made[id(agent)] = copy_
    copy_.tools = [planned_tool(t) if isinstance(t, FunctionTool) else t for t in agent.tools or ()]
    copy_.mcp_servers = [planned_server(s, servers) for s in getattr(agent, "mcp_servers", None) or ()]
    handoffs: list[Any] = []
    for handoff in agent.handoffs or ():
        if isinstance(handoff, Agent):
            handoffs.append(planned_agent(handoff, made, servers))
        elif isinstance(handoff, Handoff):
            handoffs.append(planned_handoff(handoff, made, servers))
        else:
            handoffs.append(handoff)
    copy_.handoffs = handoffs
    return copy_


def planned_handoff(handoff: Any, made: dict[int, Any], servers: ServerHolder) -> Any:
    """A ``Handoff`` whose agent is the planned copy of the one it hands to."""
    original = handoff.on_invoke_handoff

    async def invoke(context: Any, arguments: str) -> Any:
        return planned_agent(await original(context, arguments), made, servers)

    return dataclasses.replace(handoff, on_invoke_handoff=invoke)


def planned_tool(tool: Any) -> Any:
    """A copy of a ``FunctionTool`` that asks the tool plan first: a mock's value is its output (text: JSON for
    anything but a string); a mock's ``raises`` fails as the tool's own failure would (its failure function's text,
    or the run's error when it has none)."""
    original = tool.on_invoke_tool

    async def invoke(context: Any, arguments: str) -> Any:
        try:
            parsed = json.loads(arguments or "{}")
        except ValueError:
            parsed = {}
        try:
            return await acall(tool.name, parsed if isinstance(parsed, dict) else {},
                               lambda: original(context, arguments), call_id=getattr(context, "tool_call_id", None),
                               shape=as_text)
        except MockedToolError as exc:
            return await failure_output(tool, context, exc)

    return dataclasses.replace(tool, on_invoke_tool=invoke)


async def failure_output(tool: Any, context: Any, error: Exception) -> Any:
    """What the SDK gives the model when this tool raises ``error``."""
    handler = getattr(tool, "_failure_error_function", None)
    if handler is None and getattr(tool, "_use_default_failure_error_function", True):
        from agents.tool import default_tool_error_function

        handler = default_tool_error_function
    if handler is None:
        raise error
    message = handler(context, error)
    return await message if inspect.isawaitable(message) else message


def call_options_of(options: Mapping[str, Any]) -> dict[str, Any]:
    """A conversation's options for ``Runner.run``: all but evalcli's own and ``continue_with``."""
    return {k: v for k, v in options.items() if k not in RESERVED_OPTIONS and k not in OpenAIAgentsAdapter.own_options}


def _with_names(items: Iterable[Any]) -> Iterable[tuple[Any, str | None]]:
    """Run items as input items, each with the name of the agent that made it; a handoff's call and output say so
    (``handoff: true``, which ``to_openai`` reads)."""
    for item in items:
        converted = item.to_input_item()
        if getattr(item, "type", None) in HANDOFF_ITEMS and isinstance(converted, dict):
            converted = {**converted, "handoff": True}
        yield converted, _agent_name(item)


def _agent_name(item: Any) -> str | None:
    name = getattr(getattr(item, "agent", None), "name", None)
    return name if isinstance(name, str) else None


def with_agents(items: list[Any], first: str | None) -> Iterable[tuple[Any, str | None]]:
    """Saved session items (which do not say which agent made them) with the agent that did: the turn's first
    agent, then after each handoff's output (``{"assistant": NAME}``, marked ``handoff``) the agent it handed to."""
    current = first
    for item in items:
        handed = handed_to(item.get("output")) if item.get("type") == "function_call_output" else None
        yield (item if handed is None else {**item, "handoff": True}), current
        current = handed or current


def handed_to(output: Any) -> str | None:
    """The agent a handoff's output (``{"assistant": NAME}``, as the SDK saves it) hands to; ``None`` for any other
    output."""
    try:
        handed = json.loads(output or "") if isinstance(output, str) else None
    except ValueError:
        return None
    if isinstance(handed, dict) and list(handed) == ["assistant"] and isinstance(handed["assistant"], str):
        return handed["assistant"]
    return None


def context_type(agent: Any) -> Any:
    """The agent's context type when it is known: ``Agent[Ctx](...)`` (the starting agent, else the first agent it
    can hand off to that says)."""
    for current in walk(agent, handoff_targets):
        args = typing.get_args(getattr(current, "__orig_class__", None))
        if args and args[0] is not typing.Any and not isinstance(args[0], typing.TypeVar):
            return args[0]
    return None


def run_options(options: dict[str, Any]) -> tuple[dict[str, Any], RunConfig]:
    """The options for ``Runner.run``, and the ``RunConfig`` kept apart (a mapping in YAML becomes one, its
    ``model_settings`` a ``ModelSettings``)."""
    kwargs = {k: v for k, v in options.items() if k not in RESERVED_OPTIONS}
    config = kwargs.pop("run_config", None)
    if isinstance(config, dict):
        config = dict(config)
        if isinstance(config.get("model_settings"), dict):
            config["model_settings"] = ModelSettings(**config["model_settings"])
        config = RunConfig(**config)
    return kwargs, config if isinstance(config, RunConfig) else RunConfig()


def to_openai(items: Iterable[tuple[Any, str | None]], failed: Any) -> list[Message]:
    """Responses-style input items (dicts), each with the name of the agent that made it, as OpenAI chat messages
    (assistant ones carrying ``name``); ``failed(call_id, output)`` says which tool outputs are errors. Tool calls
    that follow an assistant message of the same agent join it."""
    out: list[Message] = []
    for item, agent in items:
        kind = item.get("type") or ("message" if "role" in item else "")
        if kind == "message" and item.get("role") == "assistant":
            out.append(_named(assistant(_text(item.get("content"))), agent))
        elif kind.endswith("_call"):
            call = tool_call(str(item.get("call_id") or item.get("id")), item.get("name") or kind,
                             item.get("arguments"))
            last = out[-1] if out else None
            if last is not None and last["role"] == "assistant" and last.get("name") == agent:
                last.setdefault("tool_calls", []).append(call)
            else:
                out.append(_named(assistant(None, [call]), agent))
        elif kind.endswith("_call_output"):
            call_id, output = str(item.get("call_id") or item.get("id")), item.get("output")
            result = tool_result(call_id, output, is_error=bool(failed(call_id, output)))
            if item.get("handoff") is True:
                result["handoff"] = True
            out.append(result)
    return out


def _named(message: Message, agent: str | None) -> Message:
    if agent:
        message["name"] = agent
    return message


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = [p.get("text") or p.get("refusal") or "" for p in content or () if isinstance(p, dict)]
    return "".join(p for p in parts if isinstance(p, str))
