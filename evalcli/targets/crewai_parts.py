"""The ``crewai`` adapter's parts (docs/targets/crewai.md): a conversation's copy of an agent or crew (its tools behind
the tool plan, its LLMs counting usage), the tools as the model sees them, and a turn's messages in OpenAI format.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterable
from typing import Any, Protocol

from crewai import Crew
from crewai.llms.base_llm import BaseLLM
from crewai.tools.agent_tools.ask_question_tool import AskQuestionTool
from crewai.tools.agent_tools.delegate_work_tool import DelegateWorkTool
from crewai.types.usage_metrics import UsageMetrics
from crewai.utilities.string_utils import sanitize_tool_name

from ..messages import Message
from ..tools import call
from .openai_format import as_text, assistant, jsonable, tool_call, tool_result
from .usage import count, record_target_call


class TurnOf(Protocol):
    """What a copy's tools and LLMs need of their conversation (a ``CrewAISession``): the turn being played."""

    turn: int


DELEGATION = frozenset(sanitize_tool_name(str(tool.model_fields["name"].default))
                       for tool in (DelegateWorkTool, AskQuestionTool))
"""The tools CrewAI gives a manager (and an agent with ``allow_delegation``) inside ``kickoff``, by the names the
model sees (``delegate_work_to_coworker``, ``ask_question_to_coworker``): a handoff between the crew's own agents,
not a tool of the world (docs/targets/crewai.md, "Delegation")."""

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_\- ]*)\}")
"""An input in a task's or an agent's text (``{topic}``), as CrewAI interpolates it."""


def agents_of(obj: Any) -> list[Any]:
    """The agents of a crew (its manager too), or the agent itself."""
    if not isinstance(obj, Crew):
        return [obj]
    return [*obj.agents, *([obj.manager_agent] if obj.manager_agent is not None else [])]


def tools_of(obj: Any) -> list[Any]:
    """Every tool of an agent, or of a crew's agents and tasks."""
    found = [t for agent in agents_of(obj) for t in agent.tools or ()]
    if isinstance(obj, Crew):
        found += [t for task in obj.tasks for t in task.tools or ()]
    return found


def tool_schemas(obj: Any) -> dict[str, Any]:
    """Each tool's arguments' JSON schema, by the name the model sees."""
    schemas: dict[str, Any] = {}
    for tool in tools_of(obj):
        schema = getattr(tool, "args_schema", None)
        try:
            schemas[sanitize_tool_name(tool.name)] = schema.model_json_schema() if schema is not None else None
        except Exception:  # noqa: BLE001 - a schema pydantic cannot render: known by name only
            schemas[sanitize_tool_name(tool.name)] = None
    return schemas


def placeholders(crew: Any) -> list[str]:
    """The inputs a crew's tasks and agents name (``{topic}``), in order of first use."""
    texts = [getattr(task, "_original_description", None) or task.description for task in crew.tasks]
    texts += [getattr(task, "_original_expected_output", None) or task.expected_output for task in crew.tasks]
    for agent in crew.agents:
        texts += [getattr(agent, f"_original_{name}", None) or getattr(agent, name, "") for name in
                  ("role", "goal", "backstory")]
    found: list[str] = []
    for text in texts:
        for name in PLACEHOLDER.findall(text or ""):
            if name not in found:
                found.append(name)
    return found


def planned_copy(obj: Any, session: TurnOf) -> Any:
    """The conversation's copy of an agent or crew (CrewAI's ``copy()``): its agents' and tasks' tools ask the
    conversation's tool plan, its agents' LLMs record each call's usage."""
    clone = obj.copy()
    planned: dict[int, Any] = {}

    def plan(tools: Iterable[Any] | None) -> list[Any] | None:
        if tools is None:
            return None
        for tool in tools:
            if id(tool) not in planned:
                planned[id(tool)] = planned_tool(tool)
        return [planned[id(t)] for t in tools]

    for agent in agents_of(clone):
        agent.tools = plan(agent.tools) or []
        for name in ("llm", "function_calling_llm"):
            llm = getattr(agent, name, None)
            if isinstance(llm, BaseLLM):
                setattr(agent, name, counted_llm(llm, session))
    if isinstance(clone, Crew):
        if isinstance(clone.manager_llm, BaseLLM):
            clone.manager_llm = counted_llm(clone.manager_llm, session)
        for task in clone.tasks:
            if task.tools:
                task.tools = plan(task.tools)
    return clone


def planned_tool(tool: Any) -> Any:
    """A copy of a CrewAI tool whose function asks the conversation's tool plan, under the name the model sees: a
    ``@tool`` function's ``func`` (``Tool.run`` calls it), any other ``BaseTool``'s ``_run``."""
    clone = tool.model_copy()
    attribute = "func" if callable(getattr(tool, "func", None)) else "_run"
    live = getattr(tool, attribute)
    name = sanitize_tool_name(tool.name)
    fields = list(getattr(getattr(tool, "args_schema", None), "model_fields", None) or {})

    def run(*args: Any, **kwargs: Any) -> Any:
        def once() -> Any:
            result = live(*args, **kwargs)
            return asyncio.run(result) if asyncio.iscoroutine(result) else result

        return call(name, {**dict(zip(fields, args, strict=False)), **kwargs}, once)

    object.__setattr__(clone, attribute, run)
    return clone


def counted_llm(llm: Any, session: TurnOf) -> Any:
    """A copy of an LLM that records the tokens of each of its calls as a ``target`` call of the session's turn."""
    clone = llm.model_copy()
    model = str(getattr(llm, "model", "") or "")
    track = clone._track_token_usage_internal

    def tracked(usage: dict[str, Any]) -> None:
        track(usage)
        metrics = UsageMetrics.from_provider_dict(usage)
        if metrics is not None:
            record_target_call(model, count(metrics.prompt_tokens), count(metrics.completion_tokens),
                               turn_index=session.turn, cached_tokens=count(metrics.cached_prompt_tokens))

    object.__setattr__(clone, "_track_token_usage_internal", tracked)
    return clone


def new_messages(messages: list[Any], before: int) -> list[Any]:
    """The messages an executor added after the ones it was given: its leading system prompts and ``before`` more
    (the history and the request) skipped."""
    start = 0
    while start < len(messages) and messages[start].get("role") == "system":
        start += 1
    return list(messages[start + before:])


def failed_calls(failures: Iterable[Any]) -> list[tuple[str, str]]:
    """CrewAI's record of the calls that failed, as (tool, arguments as canonical JSON)."""
    return [(str(f.tool_name), canonical_arguments(f.tool_args)) for f in failures or ()]


def canonical_arguments(arguments: Any) -> str:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments or "{}")
        except ValueError:
            return str(arguments)
    return json.dumps(jsonable(arguments or {}), sort_keys=True)


def to_openai(messages: list[Any], failed: list[tuple[str, str]]) -> list[Message]:
    """An executor's new messages in OpenAI format: a result is ``is_error`` when CrewAI recorded its call as failed
    (matched by tool and arguments, else by tool); a delegation's result is ``handoff: true`` (``DELEGATION``)."""
    asked: dict[Any, str] = {}
    out: list[Message] = []
    left = list(failed)
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            calls = [tool_call(c["id"], c["function"]["name"], c["function"]["arguments"])
                     for c in message.get("tool_calls") or () if isinstance(c, dict) and "function" in c]
            for entry in calls:
                asked[entry["id"]] = canonical_arguments(entry["function"]["arguments"])
            content = message.get("content")
            if calls or content:
                out.append(assistant(content if isinstance(content, str) else as_text(content), calls))
        elif role == "tool":
            name = str(message.get("name") or "")
            arguments = asked.get(message.get("tool_call_id"), "")
            match = next((f for f in left if f == (name, arguments)), None) or \
                next((f for f in left if f[0] == name), None)
            if match is not None:
                left.remove(match)
            result = tool_result(str(message.get("tool_call_id")), message.get("content"), name=name,
                                 is_error=match is not None)
            if name in DELEGATION:  # a handoff, not a tool: never the plan's, never "live" (docs/hermetic.md)
                result["handoff"] = True
            out.append(result)
    return out
