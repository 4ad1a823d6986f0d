"""The ``smolagents`` adapter: a smolagents ``ToolCallingAgent`` or ``CodeAgent`` as sessions (docs/targets/smolagents.md).

A smolagents agent keeps its conversation in itself (``agent.memory``; a ``CodeAgent`` also its executor's variables),
so one object cannot serve two conversations. Each conversation gets a shallow copy of the user's agent with a fresh
memory, state, monitor and (for a ``CodeAgent``) a fresh Python executor, its model and tools kept; one turn is
``copy.run(text, reset=False)`` off the event loop. The user's agent is never changed.

Every tool of the copy (``final_answer`` aside: the framework's own bookkeeping) is a copy whose ``forward`` asks the
conversation's tool plan (``evalcli.tools.call``), so mocks, tapes and ``--hermetic`` hold wherever the tool runs: a
``ToolCallingAgent``'s worker threads, a ``CodeAgent``'s executor (its code's calls, on the executor's timeout
thread). The same wrapper records each call, and this turn's messages are built from the memory's new steps: a
``ToolCallingAgent``'s step is its model's tool calls (their ids) and the results the tools gave, a call that never
reached its tool (an unknown tool, arguments that do not fit) an error result with the step's error; a
``CodeAgent``'s step is the tool calls its code made, in order. The final answer is the last assistant message (a
non-text answer is also the turn's ``structured`` result). Each step's ``token_usage`` is a ``target`` call.
smolagents' console output (rich panels on stdout) is turned off on the copy.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping
from typing import Any

from smolagents.memory import ActionStep, AgentMemory, CallbackRegistry, PlanningStep
from smolagents.monitoring import AgentLogger, LogLevel, Monitor

from ..messages import Message
from ..records import record
from ..tools import call
from .calls import FirstTurnGate
from .openai_format import as_text, assistant, jsonable, keyword_names, tool_call, tool_result
from .session import Adapter, Calls, ConversationOptions, ItemInfo, Reply, Thread, TurnFailed, TurnSession
from .usage import count, record_target_call

FINAL_ANSWER = "final_answer"
"""smolagents' own tool that ends a run: its argument is the answer, not a tool the agent uses."""
OWNED = ("task", "stream", "reset", "images", "return_full_result")
"""Parameters of ``agent.run`` that evalcli sets itself."""


@record
class Used:
    """One call of a tool of the conversation's copy: the step it ran in, and its result or error."""

    step: int
    name: str
    arguments: dict[str, Any]
    result: Any = None
    error: str | None = None
    owner: Any = None
    """The copy whose tool (or managed agent) it is: only its own steps report it."""
    steps: list[Any] | None = None
    """A managed agent's call: the steps it ran (their model calls are the conversation's usage)."""
    model: str = ""


class SmolagentsAdapter(Adapter):
    """A ``smolagents`` ``MultiStepAgent``: ``ToolCallingAgent`` or ``CodeAgent``."""

    name = "smolagents"
    run_call = "smolagents' agent.run"

    def prepare(self) -> None:
        # The openai SDK builds its response models on first use, and first uses on several threads at once race in
        # pydantic ("ChatCompletionMessage has no attribute __pydantic_core_schema__"): the run's first turn plays
        # alone, the others wait for it (once per run; building every model up front costs seconds).
        self.first_turn = FirstTurnGate()

    @classmethod
    def accepted_options(cls, obj: Any) -> list[str]:
        return keyword_names(obj.run, OWNED)

    def tool_schemas(self) -> dict[str, Any] | None:
        return {name: {"type": "object", "properties": dict(getattr(tool, "inputs", None) or {})}
                for name, tool in (getattr(self.obj, "tools", None) or {}).items() if name != FINAL_ANSWER}

    def interceptable(self, name: str) -> bool | None:
        return name in (self.tool_schemas() or {})

    def uncontrolled(self) -> str | None:
        kind = getattr(self.obj, "executor_type", "local")
        if kind != "local":
            return f"the CodeAgent runs its code in a {kind} executor, where evalcli cannot answer its tool calls"
        return None

    def open(self, *, multi_turn: bool, calls: Calls, conversation: ConversationOptions | None = None,
             item: ItemInfo | None = None) -> SmolagentsSession:
        thread = conversation.thread if conversation is not None else self.thread(self.options, multi_turn=True)
        options = self.call_options if conversation is None or conversation.options is None else \
            {k: v for k, v in conversation.options.items() if k in self.accepted_options(self.obj)}
        return SmolagentsSession(self, thread, calls, options)


class SmolagentsSession(TurnSession[SmolagentsAdapter]):
    """One conversation: its own copy of the agent (memory, executor), and the tool calls its turns made."""

    def __init__(self, adapter: SmolagentsAdapter, thread: Thread, calls: Calls, options: dict[str, Any]) -> None:
        super().__init__(adapter, thread, calls)
        self.options = options
        self.used: list[Used] = []
        self.lock = threading.Lock()
        self.agent = conversation_copy(adapter.obj, self)
        self.turn = 0

    async def send(self, text: str, *, resume: Any = None) -> Reply:
        # the run's first turn plays alone (``SmolagentsAdapter.prepare``); the others' wait is not their turn's time
        reply: Reply = await self.adapter.first_turn.play(self.calls, self._play_turn, text)
        return reply

    def _play_turn(self, text: str) -> Reply:
        agent = self.agent
        turn, self.turn = self.turn, self.turn + 1
        known = len(agent.memory.steps)
        with self.lock:
            self.used = []
        try:
            output = agent.run(text, reset=False, **self.options)
        except Exception as exc:
            steps = agent.memory.steps[known:]
            self.record_usage(steps, turn)
            raise TurnFailed(exc, self.messages(steps, None, answered=False)) from exc
        steps = agent.memory.steps[known:]
        self.record_usage(steps, turn)
        structured = None if isinstance(output, str) or output is None else jsonable(output)
        return Reply(self.messages(steps, output, answered=True), structured=structured)

    def use(self, used: Used) -> None:
        with self.lock:
            self.used.append(used)

    def record_usage(self, steps: list[Any], turn: int) -> None:
        """The turn's model calls: the agent's own steps', and those of every managed agent it called."""
        record_usage(str(getattr(self.agent.model, "model_id", None) or ""), steps, turn)
        with self.lock:
            managed = [u for u in self.used if u.steps]
        for used in managed:
            record_usage(used.model, used.steps or [], turn)

    def messages(self, steps: list[Any], output: Any, *, answered: bool) -> list[Message]:
        """The turn's steps as OpenAI messages; the final answer last."""
        code = is_code_agent(self.agent)
        out: list[Message] = []
        for step in steps:
            if isinstance(step, ActionStep):
                mine = [u for u in self.used if u.step == step.step_number and u.owner is self.agent]
                out.extend(code_step(step, mine) if code else calling_step(step, mine))
        if answered:
            out.append(assistant(output if isinstance(output, str) else as_text(jsonable(output))))
        return out

    async def close(self) -> None:
        cleanup = getattr(getattr(self.agent, "python_executor", None), "cleanup", None)
        if callable(cleanup):
            cleanup()


def is_code_agent(agent: Any) -> bool:
    return hasattr(agent, "python_executor")


def conversation_copy(agent: Any, session: SmolagentsSession) -> Any:
    """A shallow copy of ``agent`` with a conversation of its own: fresh memory, state, silent logger and monitor,
    its own executor, its tools asking the conversation's tool plan; managed agents copied the same way."""
    clone = copy.copy(agent)
    clone.state = dict(getattr(agent, "state", None) or {})
    clone.logger = AgentLogger(level=LogLevel.OFF)
    clone.logger.console.quiet = True  # its rich console: the live display of streamed output too
    clone.monitor = Monitor(clone.model, clone.logger)
    clone.tools = {name: tool if name == FINAL_ANSWER else planned_tool(tool, name, clone, session)
                   for name, tool in agent.tools.items()}
    clone.managed_agents = {name: managed_copy(managed, clone, session)
                            for name, managed in (getattr(agent, "managed_agents", None) or {}).items()}
    clone.memory = AgentMemory(clone.system_prompt)
    clone.step_callbacks = callbacks_for(agent, clone)
    if is_code_agent(agent):
        clone.python_executor = clone.create_python_executor()
    return clone


def managed_copy(agent: Any, parent: Any, session: SmolagentsSession) -> Any:
    """A managed agent's conversation copy whose calls (``agent(task)``, as its parent's model or code makes them)
    are recorded like a tool's, with the steps it ran for their usage."""
    clone = conversation_copy(agent, session)
    clone.__class__ = _recording_class(type(agent))
    clone.evalcli_call = (parent, session)
    return clone


_RECORDING: dict[type, type] = {}
_RECORDING_LOCK = threading.Lock()


def _recording_class(base: type) -> type:
    """``base`` with a ``__call__`` that records the call (one subclass per class, its name kept)."""
    with _RECORDING_LOCK:
        found = _RECORDING.get(base)
        if found is None:
            def __call__(self: Any, task: str, **kwargs: Any) -> Any:
                parent, session = self.evalcli_call
                used = Used(getattr(parent, "step_number", 0), str(self.name), {"task": task, **kwargs},
                            owner=parent, model=str(getattr(self.model, "model_id", None) or ""))
                try:
                    used.result = base.__call__(self, task, **kwargs)
                except Exception as exc:
                    used.error = str(exc) or type(exc).__name__
                    raise
                finally:
                    used.steps = list(self.memory.steps)  # this call's: a managed agent's run resets its memory
                    session.use(used)
                return used.result

            found = _RECORDING[base] = type(base.__name__, (base,), {"__call__": __call__,
                                                                     "__qualname__": base.__qualname__,
                                                                     "__module__": base.__module__})
        return found


def callbacks_for(agent: Any, clone: Any) -> Any:
    """The user's step callbacks, with the copy's monitor in place of the original's."""
    registry = CallbackRegistry()
    for step_cls, callbacks in getattr(getattr(agent, "step_callbacks", None), "_callbacks", {}).items():
        for callback in callbacks:
            if getattr(callback, "__self__", None) is agent.monitor:
                callback = clone.monitor.update_metrics
            registry.register(step_cls, callback)
    return registry


def planned_tool(tool: Any, name: str, clone: Any, session: SmolagentsSession) -> Any:
    """A copy of a smolagents ``Tool`` whose ``forward`` asks the conversation's tool plan and records the call."""
    planned = copy.copy(tool)
    forward = tool.forward
    inputs = list(getattr(tool, "inputs", None) or {})

    def ask(*args: Any, **kwargs: Any) -> Any:
        arguments = {**dict(zip(inputs, args, strict=False)), **kwargs}
        used = Used(getattr(clone, "step_number", 0), name, arguments, owner=clone)
        try:
            used.result = call(name, arguments, lambda: forward(*args, **kwargs))
        except Exception as exc:
            used.error = str(exc) or type(exc).__name__
            raise
        finally:
            session.use(used)
        return used.result

    planned.forward = ask
    return planned


def calling_step(step: Any, used: list[Used]) -> list[Message]:
    """A ``ToolCallingAgent`` step: the model's tool calls (``final_answer`` aside) and what each tool gave."""
    message = step.model_output_message
    requested = [c for c in (getattr(message, "tool_calls", None) or ()) if c.function.name != FINAL_ANSWER]
    if not requested:
        return []
    left = list(used)
    calls, results = [], []
    for requested_call in requested:
        name, arguments = requested_call.function.name, requested_call.function.arguments
        calls.append(tool_call(requested_call.id, name, arguments))
        match = next((u for u in left if u.name == name and same_arguments(u.arguments, arguments)), None)
        match = match or next((u for u in left if u.name == name), None)
        if match is None:
            failure = str(step.error) if step.error is not None else "the tool was not called"
            results.append(tool_result(requested_call.id, failure, name=name, is_error=True))
            continue
        left.remove(match)
        results.append(used_result(requested_call.id, match))
    content = message.content if isinstance(message.content, str) else None
    return [assistant(content, calls), *results]


def code_step(step: Any, used: list[Used]) -> list[Message]:
    """A ``CodeAgent`` step: the tool calls its code made, in order, each with its result (ids made per step)."""
    if not used:
        return []
    ids = [f"call_{step.step_number}_{i}" for i in range(len(used))]
    calls = [tool_call(i, u.name, u.arguments) for i, u in zip(ids, used, strict=True)]
    return [assistant(None, calls), *(used_result(i, u) for i, u in zip(ids, used, strict=True))]


def used_result(call_id: str, used: Used) -> Message:
    if used.error is not None:
        message = tool_result(call_id, used.error, name=used.name, is_error=True)
    else:
        message = tool_result(call_id, tool_text(used.result), name=used.name)
    if used.steps is not None:  # a managed agent's report: not a tool's (its own tools' calls are under the plan)
        message["handoff"] = True
    return message


def tool_text(value: Any) -> Any:
    """A tool's result or an answer as the record holds it: text as is, else JSON data."""
    return value if isinstance(value, str) else jsonable(value)


def same_arguments(recorded: Mapping[str, Any], requested: Any) -> bool:
    import json

    if isinstance(requested, str):
        try:
            requested = json.loads(requested)
        except ValueError:
            return False
    return isinstance(requested, dict) and jsonable(dict(recorded)) == jsonable(requested)


def record_usage(model: str, steps: list[Any], turn: int) -> None:
    """Each model call of the steps (action and planning) as a ``target`` call of ``model``."""
    for step in steps:
        usage = getattr(step, "token_usage", None) if isinstance(step, (ActionStep, PlanningStep)) else None
        if usage is not None:
            record_target_call(model, count(usage.input_tokens), count(usage.output_tokens), turn_index=turn)
