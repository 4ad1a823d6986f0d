"""The ``model`` target (docs/targets/http.md): a model as the agent, for prompt and model comparisons.

Each turn is one chat completion through evalcli's LLM layer (``LLMClient.complete``, purpose ``target``, so
its usage and cost are recorded with the run's other calls): the system prompt (``system``, or the text of
``system_file``), then the conversation's history, which evalcli keeps per thread (so the model "remembers"
within a conversation and never across two), then this turn's user message. No tools. The reply is never
taken from the response cache: the model under test is asked every time.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..llm import ApiBase, BudgetSpent, LLMError, content_text, reply_refusal
from ..messages import Message
from ..records import record
from ..secrets import cut
from .callable import BadReply
from .forms import FormAdapter, FormContext
from .session import Calls, ConfigProblem, ConversationOptions, ItemInfo, Thread, TurnSession, fresh_thread

OPTIONS = ("temperature", "max_tokens", "seed")
"""``target_options`` a model target takes (per item too): they override the target's own settings."""


class ModelConfig(BaseModel):
    """``target: {model: NAME, system | system_file, temperature, max_tokens, api_base}``."""

    model_config = ConfigDict(extra="forbid")
    model: str = Field(min_length=1, description="A litellm model string (e.g. openai/gpt-4o-mini).")
    system: str | None = Field(default=None, description="The system prompt.")
    system_file: str | None = Field(default=None, description="A file holding the system prompt (relative to the "
                                                              "dataset).")
    temperature: float | None = Field(default=None, ge=0, le=2, description="Sampling temperature.")
    max_tokens: int | None = Field(default=None, ge=1, description="Longest answer, in tokens.")
    api_base: ApiBase = Field(default=None, min_length=1, description="The provider's base URL (e.g. a local "
                                                                         "OpenAI-compatible server).")

    @model_validator(mode="after")
    def one_system(self) -> ModelConfig:
        if self.system is not None and self.system_file is not None:
            raise ValueError("give 'system' or 'system_file', not both")
        return self


@record(frozen=True)
class ModelTarget:
    """A ``model`` target, built: its settings and the system prompt's text."""

    config: ModelConfig
    system: str | None


class ModelAdapter(FormAdapter):
    """``target: {model: ...}``: one chat completion per turn."""

    name = "model"
    run_call = "the model target"
    config_model = ModelConfig
    nested = False

    @property
    def reports_tool_calls(self) -> bool | None:
        """A chat completion per turn: no tool runs."""
        return False

    @classmethod
    def accepted_options(cls, obj: Any) -> list[str]:
        return list(OPTIONS)

    @classmethod
    def check_values(cls, obj: Any, options: dict[str, Any]) -> None:
        for name in OPTIONS:
            value = options.get(name)
            if value is None:
                continue
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not number or not math.isfinite(value) or (name != "temperature" and not float(value).is_integer()):
                raise ValueError(f"'{name}' must be a {'number' if name == 'temperature' else 'whole number'}, "
                                 f"got {value!r}")

    @classmethod
    def build(cls, config: Any, context: FormContext) -> ModelTarget:
        assert isinstance(config, ModelConfig)
        system = config.system
        if config.system_file is not None:
            path = context.folder / config.system_file
            try:
                system = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                why = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
                raise ConfigProblem(("system_file",), f"cannot read system_file '{config.system_file}': {why}",
                                    "give a UTF-8 text file, relative to the dataset's folder") from None
        return ModelTarget(config, system)

    @classmethod
    def resolved(cls, config: Any, built: Any) -> dict[str, Any]:
        return {**super().resolved(config, built), "system": built.system}  # system_file as read

    @classmethod
    def describe(cls, config: Any) -> str:
        assert isinstance(config, ModelConfig)
        extra = []
        if config.system_file is not None:
            extra.append(f"system_file={config.system_file}")
        elif config.system is not None:
            extra.append(f"system={cut(config.system, 40)!r}")  # redacted before it is cut (docs/secrets.md)
        if config.temperature is not None:
            extra.append(f"temperature={config.temperature:g}")
        return f"model:{config.model}" + (f" ({', '.join(extra)})" if extra else "")

    def prepare(self) -> None:
        self.target: ModelTarget = self.obj
        config = self.target.config
        self.settings: dict[str, Any] = {"temperature": config.temperature, "max_tokens": config.max_tokens,
                                         "api_base": config.api_base}
        self.settings.update({k: v for k, v in self.call_options.items() if k in OPTIONS})
        self.prefix: list[Message] = [{"role": "system", "content": self.target.system}] if self.target.system else []

    @property
    def target_model(self) -> str:
        """The model under test (``evalcli validate`` warns when it cannot be reached as configured)."""
        return self.target.config.model

    def open(self, *, multi_turn: bool, calls: Calls, conversation: ConversationOptions | None = None,
             item: ItemInfo | None = None) -> ModelSession:
        thread = conversation.thread if conversation is not None else fresh_thread(self.options)
        settings = self.settings
        if conversation is not None and conversation.options is not None:  # an item's own target_options
            settings = {**settings, **{k: v for k, v in conversation.options.items() if k in OPTIONS}}
        return ModelSession(self, thread, calls, settings)


class ModelSession(TurnSession["ModelAdapter"]):
    """One conversation: its own history (user and assistant messages), sent with every turn."""

    def __init__(self, adapter: ModelAdapter, thread: Thread, calls: Calls, settings: dict[str, Any]) -> None:
        super().__init__(adapter, thread, calls)
        self.settings = settings
        self.history: list[Message] = []

    async def _turn(self, text: str) -> list[Message]:
        adapter = self.adapter
        user: Message = {"role": "user", "content": text}
        settings = self.settings
        turn = len([m for m in self.history if m.get("role") == "user"])
        model = adapter.target.config.model
        try:
            response = await self.calls.llm().complete(
                model=model, messages=[*adapter.prefix, *self.history, user], purpose="target",
                temperature=settings["temperature"], max_tokens=settings["max_tokens"], seed=settings.get("seed"),
                api_base=settings["api_base"], turn_index=turn)
        except BudgetSpent:
            raise
        except LLMError as exc:  # the model under test failed: the turn's error names it, not "the target raised"
            raise BadReply(exc.message) from None
        reply = _assistant(response, model)
        self.history = [*self.history, user, reply]
        return [reply]

    async def close(self) -> None:
        self.history = []


def _assistant(response: dict[str, Any], model: str) -> Message:
    """The assistant message of a chat completion: its text, or the words of its refusal (OpenAI's ``refusal``, sent
    with no content), and any tool calls the model made unasked."""
    try:
        message = response["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        message = None
    if not isinstance(message, dict):
        raise BadReply(f"model {model} answered no message (its response has no choices[0].message)")
    content = content_text(message.get("content"))
    if not (isinstance(content, str) and content.strip()):  # a refusal's words come in their own field, no content
        content = reply_refusal(response) or content
    reply: Message = {"role": "assistant", "content": content if isinstance(content, str) else None}
    if message.get("tool_calls"):
        reply["tool_calls"] = message["tool_calls"]
    return reply
