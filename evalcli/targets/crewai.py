"""The ``crewai`` adapter: a CrewAI ``Agent`` (its ``kickoff``) or a ``Crew`` whose inputs come from the user message,
as sessions (docs/targets/crewai.md).

CrewAI keeps state on its objects (an agent's executor, tool cache and usage counters, a crew's task outputs), so each
conversation runs on its own copy, made with CrewAI's own ``copy()`` when the conversation opens: the user's object is
never run or changed. On the copy, each tool (an agent's and a task's) is a copy whose ``_run`` asks the conversation's
tool plan (``evalcli.tools.call``) under the name the model sees (CrewAI's ``sanitize_tool_name``: ``Search the
internet`` is ``search_the_internet``), so mocks, tapes and ``--hermetic`` hold; each agent's LLM is a copy that
records every model call's tokens as a ``target`` call (``crewai_parts.planned_llm``).

- An ``Agent``: one turn is ``copy.kickoff(history + [user message])``; the conversation keeps its own history (the
  ``history`` option first, then every turn's user message and the messages the agent added), so two conversations
  never share one. This turn's messages are those the agent's executor added after the request.
- A ``Crew``: one turn is ``copy.kickoff(inputs={**inputs, inputs_from: user message})``; this turn's messages are
  each task's (its agent's tool calls, their results, its answer), the crew's answer last.

A tool result is ``is_error`` when CrewAI recorded the call as a failure (``tool_failures``: the tool raised, it is
unknown, its arguments do not fit, its usage limit is spent). A turn's ``pydantic``/``json_dict`` output is its
``structured`` result. CrewAI's console output (its event listener's panels, verbose agents) is suppressed in the
turn, its loggers kept out of evalcli's output, and its telemetry and trace upload turned off.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from crewai import Crew
from crewai.events.utils.console_formatter import set_suppress_console_output

from ..messages import Message
from .calls import FirstTurnGate
from .crewai_parts import agents_of, failed_calls, new_messages, placeholders, planned_copy, to_openai, tool_schemas
from .openai_format import assistant, build_openai_models, jsonable, quiet_logs
from .session import Adapter, Calls, ConversationOptions, ItemInfo, Reply, Thread, TurnFailed, TurnSession

QUIET = {"CREWAI_DISABLE_TELEMETRY": "true", "CREWAI_DISABLE_TRACKING": "true", "CREWAI_TRACING_ENABLED": "false",
         "CREWAI_DISABLE_VERSION_CHECK": "true"}
"""CrewAI's telemetry, trace upload and version check: off in evalcli's process unless the user set them."""
OWN = ("history", "inputs", "inputs_from")
FIRST_KICKOFF = FirstTurnGate()
"""Set once the process's first kickoff has ended (docs/targets/crewai.md: concurrent first turns)."""


def check_inputs_from(known: list[str], key: str) -> None:
    """The rule for a crew's ``inputs_from`` (docs/targets/crewai.md): an input its tasks or agents name, else the
    user message would reach no task (a crew naming no input at all included)."""
    if key not in known:
        names = ", ".join(known) or f"none: write {{{key}}} in a task's description"
        raise ValueError(f"'inputs_from: {key}' is not an input of the crew, so the user message would reach no task "
                         f"(its inputs: {names})")


class CrewAIAdapter(Adapter):
    """A CrewAI ``Agent`` or ``Crew``."""

    name = "crewai"
    run_call = "CrewAI's kickoff"
    own_options = OWN

    def prepare(self) -> None:
        for name, value in QUIET.items():
            os.environ.setdefault(name, value)
        quiet_logs("crewai")
        quiet_logs("crewai_core")
        build_openai_models()
        self.is_crew = isinstance(self.obj, Crew)

    @classmethod
    def accepted_options(cls, obj: Any) -> list[str]:
        return [] if isinstance(obj, Crew) else ["response_format"]

    @classmethod
    def check_values(cls, obj: Any, options: dict[str, Any]) -> None:
        history = options.get("history")
        if history is not None and not (isinstance(history, list) and all(
                isinstance(m, dict) and m.get("role") in ("user", "assistant") for m in history)):
            raise ValueError("'history' is a list of messages, each {role: user|assistant, content: ...}")
        if not isinstance(obj, Crew):
            given = [name for name in ("inputs", "inputs_from") if name in options]
            if given:
                raise ValueError(f"'{given[0]}' is for a Crew: an Agent's turn is the user message itself")
            return
        if history is not None:
            raise ValueError("'history' is for an Agent: a crew's kickoff takes inputs, not messages")
        if not isinstance(options.get("inputs", {}), Mapping):
            raise ValueError("'inputs' is a mapping: the crew's other inputs, e.g. {age: 31, trip_duration: 5 days}")
        known = placeholders(obj)
        key = options.get("inputs_from")
        if not isinstance(key, str) or not key:
            raise ValueError(f"a Crew needs 'inputs_from': the input the user message fills (its inputs: "
                             f"{', '.join(known) or 'none'})")
        check_inputs_from(known, key)


    def warnings(self, conversations: Sequence[tuple[Mapping[str, Any], bool]]) -> list[str]:
        if any(getattr(agent, "memory", None) for agent in agents_of(self.obj)) or getattr(self.obj, "memory", None):
            return ["the target has CrewAI memory: every conversation's copy shares its store (CrewAI's copy() keeps "
                    "it), so one conversation may recall another's; turn memory off for evals that must not share"]
        return []

    def tool_schemas(self) -> dict[str, Any] | None:
        return tool_schemas(self.obj)

    def interceptable(self, name: str) -> bool | None:
        return name in tool_schemas(self.obj)

    def open(self, *, multi_turn: bool, calls: Calls, conversation: ConversationOptions | None = None,
             item: ItemInfo | None = None) -> CrewAISession:
        thread = conversation.thread if conversation is not None else self.thread(self.options, multi_turn=True)
        options = self.options if conversation is None or conversation.options is None else conversation.options
        return CrewAISession(self, thread, calls, options)


class CrewAISession(TurnSession[CrewAIAdapter]):
    """One conversation: its own copy of the agent or crew, and (an agent's) its history."""

    def __init__(self, adapter: CrewAIAdapter, thread: Thread, calls: Calls, options: Mapping[str, Any]) -> None:
        super().__init__(adapter, thread, calls)
        self.turn = 0
        self.copy = planned_copy(adapter.obj, self)
        self.history: list[Any] = [dict(m) for m in options.get("history") or ()]
        self.inputs = dict(options.get("inputs") or {})
        self.inputs_from = options.get("inputs_from")
        self.kwargs = {k: v for k, v in options.items() if k in adapter.accepted_options(adapter.obj)}

    async def send(self, text: str, *, resume: Any = None) -> Reply:
        # CrewAI builds some class-level state on first use (a Flow class's definition, iterating the class's __dict__
        # while another thread adds to it): the process's first kickoff plays alone, the others' wait not timed
        reply: Reply = await FIRST_KICKOFF.play(self.calls, self._play_now, text)
        return reply

    def _play_now(self, text: str) -> Reply:
        token = set_suppress_console_output(True)
        try:
            return self._crew_turn(text) if isinstance(self.copy, Crew) else self._agent_turn(text)
        finally:
            self.turn += 1
            token.var.reset(token)

    def _agent_turn(self, text: str) -> Reply:
        sent = [*self.history, {"role": "user", "content": text}]
        try:
            output = self.copy.kickoff(sent, **self.kwargs)
        except Exception as exc:
            raise TurnFailed(exc, []) from exc
        added = new_messages(output.messages, len(sent))
        self.history = [*sent, *added]
        messages = to_openai(added, failed_calls(output.tool_failures))
        return self._reply(messages, output.raw, output.pydantic, None)

    def _crew_turn(self, text: str) -> Reply:
        inputs = {**self.inputs, str(self.inputs_from): text}
        try:
            output = self.copy.kickoff(inputs=inputs)
        except Exception as exc:
            raise TurnFailed(exc, []) from exc
        messages: list[Message] = []
        for task in output.tasks_output:
            messages += to_openai(new_messages(task.messages, 1), failed_calls(task.tool_failures))
        return self._reply(messages, output.raw, output.pydantic, output.json_dict)

    def _reply(self, messages: list[Message], raw: str, pydantic: Any, json_dict: Any) -> Reply:
        last = messages[-1] if messages else None
        content = last.get("content") if last is not None else None
        # the kickoff's raw output repeats the executor's last message, which CrewAI stored stripped: one answer
        if last is None or last.get("role") != "assistant" or last.get("tool_calls") or not isinstance(content, str) \
                or content.strip() != raw.strip():
            messages.append(assistant(raw))
        structured = pydantic if pydantic is not None else json_dict
        return Reply(messages, structured=jsonable(structured) if structured is not None else None)

    async def close(self) -> None:
        self.history = []

