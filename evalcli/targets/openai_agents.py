"""The ``openai_agents`` adapter: an OpenAI Agents SDK ``Agent`` as sessions (SPEC §12).

One turn is ``await Runner.run(agent, text, session=S, **options)``. S is the thread's own in-memory
``SQLiteSession`` (one database per conversation, closed with it), so no two conversations share
history; the resource is not used.

This turn's messages are ``result.new_items`` in OpenAI format (assistant text, tool calls, tool
results; reasoning items and the user's input left out). The SDK turns a tool's exception into the
tool's output text and goes on, with no error flag on the item: evalcli installs a
``RunConfig.tool_error_formatter`` that only records the call ids the SDK reports as failed (an
exception in the tool, a tool that does not exist) and leaves the text as it was, so those results are
``is_error: true``; the SDK's default failure text and its timeout text are recognised too. When the
run raises, the turn keeps what the session saved of it before the failure.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Iterable
from typing import Any

from agents import ModelSettings, RunConfig, Runner, SQLiteSession

from ..messages import Message
from .openai_format import assistant, keyword_names, tool_call, tool_result
from .session import RESERVED_OPTIONS, Adapter, Calls, ItemInfo, Reply, TurnFailed, fresh_thread

OWNED = ("starting_agent", "input", "session", "previous_response_id", "auto_previous_response_id",
         "conversation_id")
"""Parameters of ``Runner.run`` that evalcli sets itself, or that would thread the conversation elsewhere."""
FAILED_KINDS = frozenset({"tool_exception", "tool_not_found"})
"""Kinds of ``ToolErrorFormatterArgs`` that mean the tool failed (a rejected approval is a decision, not an error)."""
TIMEOUT_TEXT = re.compile(r"^Tool '[^']*' timed out after [\d.]+ seconds\.$")
HAS_FORMATTER = any(f.name == "tool_error_formatter" for f in dataclasses.fields(RunConfig))
"""Whether this SDK reports handled tool failures to a ``RunConfig.tool_error_formatter`` (else: the text only)."""


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

    def prepare(self) -> None:
        self.run_options, self.run_config = run_options(self.call_options)
        self.failure_text = default_failure_text()

    @classmethod
    def accepted_options(cls, obj: Any) -> list[str]:
        return keyword_names(Runner.run, OWNED)

    @classmethod
    def check_values(cls, obj: Any, options: dict[str, Any]) -> None:
        try:
            run_options(options)
        except TypeError as exc:
            raise TypeError(f"run_config: {exc}") from None

    def open(self, *, multi_turn: bool, calls: Calls, item: ItemInfo | None = None) -> OpenAIAgentsSession:
        return OpenAIAgentsSession(self, fresh_thread(self.options).thread or "", calls)


class OpenAIAgentsSession:
    """One conversation: its own SDK session, and the call ids the SDK reported as failed tools."""

    def __init__(self, adapter: OpenAIAgentsAdapter, thread: str, calls: Calls) -> None:
        self.adapter = adapter
        self.thread_id: str | None = thread
        self.resource_id: str | None = None
        self.calls = calls
        self.session = SQLiteSession(thread)
        self.failed: set[str] = set()
        self.run_config = adapter.run_config
        if HAS_FORMATTER:
            self.run_config = dataclasses.replace(adapter.run_config, tool_error_formatter=self._recorder())

    def _recorder(self) -> Any:
        """A ``tool_error_formatter`` that notes failed call ids and keeps the text (the user's own formatter's, if any)."""
        theirs = self.adapter.run_config.tool_error_formatter

        async def record(args: Any) -> str | None:
            if args.kind in FAILED_KINDS:
                self.failed.add(args.call_id)
            message = theirs(args) if theirs is not None else None
            return await message if inspect.isawaitable(message) else message

        return record

    async def send(self, text: str) -> Reply:
        messages: list[Message] = await self.calls.call_async(self._turn(text))
        return Reply(messages)

    async def _turn(self, text: str) -> list[Message]:
        adapter = self.adapter
        try:
            result = await Runner.run(adapter.obj, text, session=self.session, run_config=self.run_config,
                                      **adapter.run_options)
        except Exception as exc:
            raise TurnFailed(exc, await self._saved_since(text, exc)) from exc
        return self._convert(item.to_input_item() for item in result.new_items)

    async def _saved_since(self, text: str, exc: Exception) -> list[Message]:
        """What the run saved to the session after this turn's user message, else what the exception carries."""
        try:
            items = list(await self.session.get_items())
        except Exception:  # noqa: BLE001 - the turn's error is the run's, not the session's
            items = []
        starts = [i for i, item in enumerate(items) if item.get("role") == "user" and item.get("content") == text]
        saved = self._convert(items[starts[-1] + 1:]) if starts else []
        if saved:
            return saved
        run_data = getattr(exc, "run_data", None)
        return self._convert(item.to_input_item() for item in getattr(run_data, "new_items", None) or ())

    def _convert(self, items: Iterable[Any]) -> list[Message]:
        return to_openai(items, lambda call_id, output: call_id in self.failed or self._failure_text(output))

    def _failure_text(self, output: Any) -> bool:
        return isinstance(output, str) and (output == self.adapter.failure_text or bool(TIMEOUT_TEXT.match(output)))

    async def close(self) -> None:
        self.session.close()


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


def to_openai(items: Iterable[Any], failed: Any) -> list[Message]:
    """Responses-style input items (dicts) as OpenAI chat messages; ``failed(call_id, output)`` says which
    tool outputs are errors. Tool calls that follow an assistant message of the same response join it."""
    out: list[Message] = []
    for item in items:
        kind = item.get("type") or ("message" if "role" in item else "")
        if kind == "message" and item.get("role") == "assistant":
            out.append(assistant(_text(item.get("content"))))
        elif kind.endswith("_call"):
            call = tool_call(str(item.get("call_id") or item.get("id")), item.get("name") or kind,
                             item.get("arguments"))
            last = out[-1] if out else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                out.append(assistant(None, [call]))
        elif kind.endswith("_call_output"):
            call_id, output = str(item.get("call_id") or item.get("id")), item.get("output")
            out.append(tool_result(call_id, output, is_error=bool(failed(call_id, output))))
    return out


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = [p.get("text") or p.get("refusal") or "" for p in content or () if isinstance(p, dict)]
    return "".join(p for p in parts if isinstance(p, str))
