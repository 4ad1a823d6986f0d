"""The parrot adapter: evalcli's session protocol over demo_parrot agents (docs/extending.md)."""

from __future__ import annotations

from typing import Any

import demo_parrot  # the framework, imported only when a target is a Parrot

from evalcli.targets import Adapter, Calls, ConversationOptions, ItemInfo, Reply, Thread, record_target_call
from evalcli.tools import MockedToolError, call


class ParrotAdapter(Adapter):
    """Runs a ``demo_parrot.Parrot``: a history of its own for each conversation."""

    name = "parrot"
    controlled = False

    def tool_schemas(self) -> dict[str, Any]:
        """The parrot's tools: datasets may mock them, and a misspelt one is a validation error."""
        return {name: {"type": "object", "properties": {}} for name in self.obj.tools}

    def control_tools(self) -> None:
        """Called once before a run whose dataset mocks tools: from now on each tool call asks the conversation's
        plan. The user's Parrot is never changed."""
        self.controlled = True

    def open(self, *, multi_turn: bool, calls: Calls, conversation: ConversationOptions | None = None,
             item: ItemInfo | None = None) -> ParrotSession:
        thread = conversation.thread if conversation is not None else self.thread(self.options, multi_turn=multi_turn)
        return ParrotSession(self, thread, calls)


class ParrotSession:
    """One conversation with the parrot: its history, never shared with another conversation."""

    def __init__(self, adapter: ParrotAdapter, thread: Thread, calls: Calls) -> None:
        self.adapter = adapter
        self.thread_id = thread.thread
        self.resource_id = thread.resource
        self.calls = calls
        self.history: list[str] = []

    async def send(self, text: str) -> Reply:
        parrot: demo_parrot.Parrot = self.adapter.obj
        planned = planned_tool if self.adapter.controlled else None
        # a sync framework call runs in the run's target threads, under the turn timeout
        run = await self.calls.call_sync(parrot.run, list(self.history), text, planned)
        turn = len(self.history)
        self.history.append(text)
        record_target_call(parrot.model, run.input_tokens, run.output_tokens, turn_index=turn, priced=False)
        return Reply(turn_messages(run, turn))

    async def close(self) -> None:
        self.history.clear()


def planned_tool(name: str, tool: demo_parrot.Tool) -> str:
    """A tool call as the conversation's plan answers it: the live tool, a mock or a replayed result."""
    try:
        return str(call(name, {}, tool))
    except MockedToolError as exc:  # a mocked `raises`: reported as the framework reports a tool's error
        return f"error: {exc}"


def turn_messages(run: demo_parrot.Run, turn: int) -> list[dict[str, Any]]:
    """The turn's response messages in OpenAI chat format: each tool call and its result, then what was said."""
    messages: list[dict[str, Any]] = []
    for index, step in enumerate(run.steps):
        if step.tool is None:
            messages.append({"role": "assistant", "content": step.text})
            continue
        call_id = f"call_{turn}_{index}"
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": step.tool, "arguments": "{}"}}]})
        messages.append({"role": "tool", "tool_call_id": call_id, "name": step.tool, "content": step.text})
    return messages
