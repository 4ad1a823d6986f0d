"""Every model call an Agents SDK run makes, counted (docs/targets/index.md), named after the agent that made it.

A conversation's own ``Runner.run`` gets :class:`CountingHooks`: the SDK calls ``on_llm_end`` with the agent and its
``ModelResponse`` after each model call, so a call after a handoff is priced on the model of the agent it went to,
and a run that raises (a tripped guardrail, a tool error) has its finished calls counted already.

An app also calls ``Runner.run`` itself inside a run: a guardrail that asks a guardrail agent (as the SDK's guide
writes them), an agent used as a tool. Those runs are the conversation's model calls too. The SDK reads its default
runner (``agents.run.DEFAULT_AGENT_RUNNER``) at each ``Runner.run``; :func:`count_nested_runs` wraps it once per
process with :class:`NestedCounting`, which gives every run started inside a conversation's turn the same hooks
(around the app's own). Outside a conversation it passes every call through unchanged.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from agents import RunConfig, RunHooks

from ..records import record
from .usage import count, record_target_call

HOOK_NAMES = ("on_agent_start", "on_agent_end", "on_handoff", "on_tool_start", "on_tool_end", "on_llm_start")
"""The ``RunHooks`` methods that only pass through to the app's own hooks (``on_llm_end`` also counts)."""


@record(frozen=True)
class Counting:
    """The turn being played and the run configuration of the conversation's own run."""

    turn: int
    config: RunConfig


counting_turn: ContextVar[Counting | None] = ContextVar("evalcli_agents_counting", default=None)
"""Set while a conversation's turn runs; the runs its guardrails and tools start see it (asyncio copies it)."""


class CountingHooks(RunHooks):
    """Records each model call as a ``target`` call of the turn, then calls the app's own hooks, if any."""

    def __init__(self, theirs: Any, turn: int, config: RunConfig) -> None:
        self.theirs = theirs
        self.turn = turn
        self.config = config
        self.responses: list[tuple[Any, Any]] = []
        """Each model call's agent and ``ModelResponse``, in order: what the model said when the run raises before
        it became a run item (a call of a tool the agent does not have)."""

    async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
        self.responses.append((agent, response))
        usage = getattr(response, "usage", None)
        details = getattr(usage, "input_tokens_details", None)
        record_target_call(model_of(agent, self.config), count(getattr(usage, "input_tokens", 0)),
                           count(getattr(usage, "output_tokens", 0)), turn_index=self.turn,
                           cached_tokens=count(getattr(details, "cached_tokens", 0)))
        if self.theirs is not None:
            await self.theirs.on_llm_end(context, agent, response)


def _passing(name: str) -> Any:
    async def hook(self: CountingHooks, *args: Any, **kwargs: Any) -> None:
        if self.theirs is not None:
            await getattr(self.theirs, name)(*args, **kwargs)

    hook.__name__ = name
    return hook


for _name in HOOK_NAMES:
    setattr(CountingHooks, _name, _passing(_name))


def counting_hooks(theirs: Any, turn: int, config: RunConfig) -> CountingHooks:
    """The hooks a conversation's own run is given (``theirs``: the ``hooks`` option, if the app gave one)."""
    return CountingHooks(theirs, turn, config)


def model_of(agent: Any, config: RunConfig | None) -> str:
    """The name of the model a call of ``agent`` went to: the run config's model overrides the agent's, and an agent
    without one uses the SDK's default model."""
    for model in (getattr(config, "model", None), getattr(agent, "model", None)):
        name = model_name(model)
        if name:
            return name
    try:
        from agents.models import get_default_model

        return str(get_default_model())
    except Exception:  # noqa: BLE001 - an SDK without it: the call is counted, unpriced
        return ""


def model_name(model: Any) -> str:
    """A model's name: as written (``"gpt-4o-mini"``), or the one a ``Model`` object holds."""
    if isinstance(model, str):
        return model
    name = getattr(model, "model", None)
    return name if isinstance(name, str) else ""


def _with_hooks(kwargs: dict[str, Any]) -> dict[str, Any]:
    """A nested run's arguments with counting hooks, when it starts inside a conversation's turn."""
    playing = counting_turn.get()
    hooks = kwargs.get("hooks")
    if playing is None or isinstance(hooks, CountingHooks):
        return kwargs
    config = kwargs.get("run_config")
    return {**kwargs, "hooks": CountingHooks(hooks, playing.turn, config if isinstance(config, RunConfig) else
                                             RunConfig())}


class NestedCounting:
    """The SDK's default runner, wrapped: a run started inside a conversation's turn counts its model calls."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def run(self, starting_agent: Any, input: Any, **kwargs: Any) -> Any:
        return await self.inner.run(starting_agent, input, **_with_hooks(kwargs))

    def run_sync(self, starting_agent: Any, input: Any, **kwargs: Any) -> Any:
        return self.inner.run_sync(starting_agent, input, **_with_hooks(kwargs))

    def run_streamed(self, starting_agent: Any, input: Any, **kwargs: Any) -> Any:
        return self.inner.run_streamed(starting_agent, input, **_with_hooks(kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def count_nested_runs() -> None:
    """Wrap the SDK's default runner (once per process; an SDK without one: nested runs go uncounted)."""
    try:
        from agents import run as sdk_run
    except ImportError:  # pragma: no cover - the SDK is imported by the adapter before this
        return
    current = getattr(sdk_run, "DEFAULT_AGENT_RUNNER", None)
    setter = getattr(sdk_run, "set_default_agent_runner", None)
    if current is None or setter is None or isinstance(current, NestedCounting):
        return
    setter(NestedCounting(current))


def unkept_reply(responses: list[tuple[Any, Any]], recorded: set[str]) -> list[tuple[Any, str | None]]:
    """The output items of the last model reply a run's hooks saw, each with its agent's name, when none of its tool
    calls is among the ``recorded`` call ids (docs/targets/frameworks.md): the SDK raises on a call of a tool the agent
    does not have before the reply becomes a run item, yet the model made those calls (each has no result, so it is a
    failed call). Empty when the reply called no tool or is recorded already."""
    if not responses:
        return []
    agent, response = responses[-1]
    items = [item.model_dump() if hasattr(item, "model_dump") else item
             for item in getattr(response, "output", None) or ()]
    items = [item for item in items if isinstance(item, dict)]
    calls = {str(item.get("call_id")) for item in items if str(item.get("type") or "").endswith("_call")}
    if not calls or calls & recorded:
        return []
    name = getattr(agent, "name", None)
    return [(item, name if isinstance(name, str) else None) for item in items]
