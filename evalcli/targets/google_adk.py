"""The ``google_adk`` adapter: a Google ADK agent (``LlmAgent`` / ``Agent``, workflow agents, any ``BaseAgent``) or an
ADK ``App`` as sessions (docs/targets/google-adk.md).

One turn is ``async for event in runner.run_async(user_id=R, session_id=T, new_message=..., **options)``: the
runner is evalcli's own ``Runner`` over the user's agent (never changed), with an ``InMemorySessionService`` (or the
app's own session, memory and artifact services, when a ``setup`` returns them). Each conversation is one ADK
session: its id is the conversation's thread, its ``user_id`` the resource (``memory.resource`` pins it), its
initial ``state`` the ``state`` option (a new copy for each conversation); evalcli deletes the session from its own
service when the conversation ends.

This turn's messages are its events in OpenAI format: an event's text (thoughts left out) and function calls are an
assistant message named after the agent that wrote it (``name``); its function responses are ``role: tool``
results, ``is_error`` when the tool failed (its exception went to the agent's ``on_tool_error_callback``, or the
model named a tool that does not exist). ``transfer_to_agent`` results are handoffs (``handoff: true``). An
exception that ends the run (a tool that raises with no error callback), or an error event, is the conversation's
error, the turn keeping the events before it. Every event with ``usage_metadata`` is a model call of the target,
counted with its tokens and named after its agent's model. Tools are answered from the conversation's tool plan by
a runner plugin (``google_adk_tools``). ADK's own log lines are kept out of evalcli's output.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from typing import Any

from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types

from ..messages import Message
from .framework_mcp import ServerTools
from .google_adk_tools import FAILED, TRANSFER, TURN_SESSION, ToolPlanPlugin, agent_tree, mcp_toolsets, tool_schemas
from .openai_format import assistant, keyword_names, quiet_logs, tool_call, tool_result
from .session import RESERVED_OPTIONS, Adapter, Calls, ConversationOptions, ItemInfo, Reply, Thread, TurnFailed, fresh_thread
from .usage import count, record_target_call

OWNED = ("user_id", "session_id", "invocation_id", "new_message", "yield_user_message", "abort_signal")
"""Parameters of ``Runner.run_async`` that evalcli sets itself."""
SERVICES = ("session_service", "memory_service", "artifact_service", "credential_service")
"""The app's own services, which only a setup can give (objects): the conversation's runner uses them."""
OWN = ("state", "app_name", *SERVICES)
NOT_FOUND = "failed as no tool with that name is available"
"""ADK's answer to a call of a tool that does not exist (a failed call, answered to the model)."""


class GoogleADKAdapter(Adapter):
    """A ``google.adk`` agent (any ``BaseAgent``) or ``App``."""

    name = "google_adk"
    run_call = "ADK's Runner.run_async"
    own_options = OWN

    def prepare(self) -> None:
        quiet_logs("google_adk")  # hundreds of lines a run at DEBUG, a traceback for every failed node
        self.app = self.obj if _is_app(self.obj) else None
        self.agent = self.app.root_agent if self.app is not None else self.obj
        self.app_name = str(self.options.get("app_name") or (self.app.name if self.app is not None else self.agent.name))
        self.run_options = run_options(self.call_options)
        self.servers = ServerTools(mcp_toolsets(self.agent))
        """The agent tree's MCP toolsets and their tools, listed once (docs/hermetic.md, "MCP tools")."""
        self.plugin = ToolPlanPlugin(self.servers)
        self.sessions = InMemorySessionService()
        self.runner = self._runner({})
        self.models = agent_models(self.agent)

    def _runner(self, services: Mapping[str, Any]) -> Runner:
        session_service = services.get("session_service") or self.sessions
        others = {k: v for k, v in services.items() if k in SERVICES and k != "session_service"}
        if self.app is not None:
            app = self.app.model_copy(update={"plugins": [self.plugin, *self.app.plugins]})
            return Runner(app=app, session_service=session_service, **others)
        return Runner(app_name=self.app_name, agent=self.agent, plugins=[self.plugin], session_service=session_service,
                      **others)

    def tool_schemas(self) -> dict[str, Any] | None:
        return tool_schemas(self.agent, self.servers)

    def mcp_servers(self) -> dict[str, list[str]] | None:
        return self.servers.names()

    def mcp_server_places(self, name: str) -> list[str]:
        return self.servers.places.get(name, [])

    @classmethod
    def accepted_options(cls, obj: Any) -> list[str]:
        return keyword_names(Runner.run_async, OWNED)

    @classmethod
    def option_problems(cls, obj: Any, options: dict[str, Any]) -> list[str]:
        given = [name for name in SERVICES if name in options]
        if given:
            return [f"'{given[0]}' cannot be written in YAML: a setup (target_options.setup: module:function) may return "
                    f"the app's own service object as '{given[0]}' (e.g. {{'session_service': DatabaseSessionService(...)}})"]
        return super().option_problems(obj, options)

    @classmethod
    def check_values(cls, obj: Any, options: dict[str, Any]) -> None:
        if not isinstance(options.get("state", {}), dict):
            raise ValueError("'state' is a mapping: the session's initial state (e.g. {customer_id: '123'})")
        run_options({k: v for k, v in options.items() if k not in OWN})

    def returned_problems(self, returned: Mapping[str, Any]) -> list[str]:
        """A setup may also return the app's own services."""
        return super().returned_problems({k: v for k, v in returned.items() if k not in SERVICES})

    def thread(self, options: Mapping[str, Any], *, multi_turn: bool) -> Thread:
        """A fresh thread (the ADK session id); the resource (``user_id``) is ``memory.resource``, else the thread."""
        return fresh_thread(options)

    def open(self, *, multi_turn: bool, calls: Calls, conversation: ConversationOptions | None = None,
             item: ItemInfo | None = None) -> GoogleADKSession:
        raw = self.options if conversation is None or conversation.options is None else conversation.options
        options = self.run_options if raw is self.options else run_options(
            {k: v for k, v in raw.items() if k not in RESERVED_OPTIONS and k not in OWN})
        services = {k: raw[k] for k in SERVICES if raw.get(k) is not None}
        runner = self._runner(services) if services else self.runner
        thread = conversation.thread if conversation is not None else fresh_thread(self.options)
        state = copy.deepcopy(raw.get("state") or {})  # each conversation's own session state
        return GoogleADKSession(self, runner, thread, calls, options, state, own_runner=bool(services))


class GoogleADKSession:
    """One conversation: its ADK session (created before the first turn) on the run's runner or its own."""

    def __init__(self, adapter: GoogleADKAdapter, runner: Runner, thread: Thread, calls: Calls, options: dict[str, Any],
                 state: dict[str, Any], *, own_runner: bool) -> None:
        self.adapter = adapter
        self.runner = runner
        self.thread_id = thread.thread
        self.resource_id = thread.resource
        self.user_id = str(thread.resource or thread.thread or "user")
        self.session_id = str(thread.thread)
        self.calls = calls
        self.options = options
        self.state = state
        self.own_runner = own_runner
        self.created = False
        self.turn = 0

    async def send(self, text: str, *, resume: Any = None) -> Reply:
        reply: Reply = await self.calls.call_async(self._turn(text))
        return reply

    async def _turn(self, text: str) -> Reply:
        turn, self.turn = self.turn, self.turn + 1
        service = self.runner.session_service
        if not self.created:
            found = await service.get_session(app_name=self.runner.app_name, user_id=self.user_id,
                                              session_id=self.session_id)
            if found is None:
                await service.create_session(app_name=self.runner.app_name, user_id=self.user_id,
                                             session_id=self.session_id, state=self.state)
            self.created = True
        message = types.Content(role="user", parts=[types.Part(text=text)])
        events: list[Any] = []
        failed: list[Any] = []
        token = FAILED.set(failed)
        models = self.adapter.models
        inner = TURN_SESSION.set((self.session_id, lambda agent, usage: record_usage(usage, models.get(agent, ""), turn)))
        try:
            async for event in self.runner.run_async(user_id=self.user_id, session_id=self.session_id,
                                                     new_message=message, **self.options):
                events.append(event)
        except Exception as exc:
            record_calls(events, turn, self.adapter.models)
            cause = _unwrapped(exc)
            raise TurnFailed(cause, with_failed_calls(to_openai(events, failed), failed, cause)) from exc
        finally:
            FAILED.reset(token)
            TURN_SESSION.reset(inner)
        record_calls(events, turn, self.adapter.models)
        messages = to_openai(events, failed)
        error = next((e for e in events if getattr(e, "error_code", None)), None)
        if error is not None:
            cause = RuntimeError(f"{error.error_code}: {error.error_message or 'the run failed'}")
            raise TurnFailed(cause, messages)
        return Reply(messages)

    async def close(self) -> None:
        if self.created and self.runner.session_service is self.adapter.sessions:
            await self.adapter.sessions.delete_session(app_name=self.runner.app_name, user_id=self.user_id,
                                                       session_id=self.session_id)
        if self.own_runner:
            await self.runner.close()


def _is_app(obj: Any) -> bool:
    return any(f"{c.__module__}.{c.__qualname__}" == "google.adk.apps.app.App" for c in type(obj).__mro__)


def _unwrapped(exc: Exception) -> BaseException:
    """The exception that ended the run: a plugin's (evalcli's mock) comes wrapped in ADK's ``RuntimeError``."""
    cause = exc.__cause__
    return cause if isinstance(exc, RuntimeError) and "Error in plugin" in str(exc) and cause is not None else exc


def run_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The options for ``run_async``: a ``run_config`` written as a mapping made a ``RunConfig``."""
    kwargs = dict(options)
    if isinstance(kwargs.get("run_config"), dict):
        from google.adk.agents.run_config import RunConfig
        from pydantic import ValidationError

        try:
            kwargs["run_config"] = RunConfig(**kwargs["run_config"])
        except ValidationError as exc:
            found = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise ValueError(f"'run_config' does not fit ADK's RunConfig ({found})") from None
    return kwargs


def agent_models(agent: Any) -> dict[str, str]:
    """Each agent's model name, by agent name (a ``LiteLlm``'s ``model``, a Gemini model's name), for pricing."""
    models: dict[str, str] = {}
    for each in agent_tree(agent):
        model = getattr(each, "model", None)
        name = model if isinstance(model, str) else getattr(model, "model", None)
        if isinstance(name, str) and name:
            models[str(getattr(each, "name", ""))] = name
    return models


def record_calls(events: Iterable[Any], turn: int, models: Mapping[str, str]) -> None:
    """Each model response of the turn (an event with ``usage_metadata``) as a ``target`` call with its tokens."""
    for event in events:
        usage = getattr(event, "usage_metadata", None)
        if usage is None or getattr(event, "partial", False):
            continue
        record_usage(usage, models.get(str(event.author)) or str(getattr(event, "model_version", None) or ""), turn)


def record_usage(usage: Any, model: str, turn: int) -> None:
    """One model response's ``usage_metadata`` as a ``target`` call."""
    record_target_call(model, count(usage.prompt_token_count), count(usage.candidates_token_count),
                       turn_index=turn, cached_tokens=count(usage.cached_content_token_count))


def to_openai(events: Iterable[Any], failed: list[Any]) -> list[Message]:
    """ADK events as OpenAI response messages (the user's own events and partial ones left out); each noted failure
    makes one result of its call id, the first not yet marked, ``is_error`` (taken off ``failed``)."""
    out: list[Message] = []
    for event in events:
        content = getattr(event, "content", None)
        if event.author == "user" or getattr(event, "partial", False) or content is None:
            continue
        texts: list[str] = []
        calls: list[Message] = []
        results: list[Message] = []
        for part in content.parts or ():
            if part.function_call is not None:
                call = part.function_call
                calls.append(tool_call(str(call.id), str(call.name), call.args or {}))
            elif part.function_response is not None:
                results.append(_result(part.function_response, failed))
            elif part.text and not part.thought:
                texts.append(part.text)
        if texts or calls:
            message = assistant("".join(texts), calls)
            message["name"] = str(event.author)
            out.append(message)
        out.extend(results)
    return out


def with_failed_calls(messages: list[Message], failed: list[Any], cause: BaseException) -> list[Message]:
    """The messages of a run a tool's exception ended: each failed call left unanswered gets its error as its result
    (ADK ends the run before it makes one)."""
    answered = {m.get("tool_call_id") for m in messages if m["role"] == "tool"}
    calls = [c for m in messages for c in m.get("tool_calls") or ()]
    return [*messages, *(tool_result(c["id"], f"Error: {cause}", name=c["function"]["name"], is_error=True)
                         for c in calls if c["id"] in failed and c["id"] not in answered)]


def _result(response: Any, failed: list[Any]) -> Message:
    value = response.response
    text = json.dumps(value, ensure_ascii=False, default=str) if not isinstance(value, str) else value
    not_found = isinstance(value, dict) and isinstance(value.get("error"), str) and NOT_FOUND in value["error"]
    noted = response.id in failed
    if noted:
        failed.remove(response.id)
    message = tool_result(str(response.id), text, name=str(response.name), is_error=noted or not_found)
    if response.name == TRANSFER:
        message["handoff"] = True
    return message
