"""A weather agent that speaks A2A, made with the ``a2a-sdk`` package, for docs/targets/a2a.md and evalcli's tests.

``python -m examples.a2a_weather_agent --port 8767`` serves its agent card at
``http://127.0.0.1:8767/.well-known/agent-card.json`` and JSON-RPC (``message/send``, ``tasks/get``) at ``/``. Each
message starts a task that works a moment, then completes with the forecast as an artifact; the agent remembers the
city of a conversation (its ``contextId``), so "What about tomorrow?" works on a later turn. With ``A2A_TOKEN`` set it
answers only requests with ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re

from a2a.helpers.proto_helpers import new_task_from_user_message, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Role, TaskState
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

CITIES: dict[str, str] = {}
"""The city each conversation (``contextId``) asked about last."""


def forecast(text: str, context: str) -> str:
    found = re.search(r"in ([A-Z][a-zA-Z]+)", text)
    if found:
        CITIES[context] = found.group(1)
    city = CITIES.get(context)
    if city is None:
        return "Which city?"
    day = "Tomorrow" if "tomorrow" in text.lower() else "Today"
    return f"{day} in {city}: windy, 61°F."


class WeatherExecutor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        task = context.current_task or new_task_from_user_message(context.message)
        if context.current_task is None:
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.update_status(TaskState.TASK_STATE_WORKING)
        await asyncio.sleep(0.3)
        answer = forecast(context.get_user_input(), task.context_id)
        await updater.add_artifact([new_text_part(answer)], name="forecast")
        done = new_text_message("done", context_id=task.context_id, task_id=task.id, role=Role.ROLE_AGENT)
        done.metadata.update({"usage": {"input_tokens": 12, "output_tokens": 7}})  # what a model-backed agent reports
        await updater.update_status(TaskState.TASK_STATE_COMPLETED, message=done)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


def app(base: str) -> Starlette:
    card = AgentCard(name="weather", description="Forecasts by city.", version="1.0",
                     supported_interfaces=[AgentInterface(url=base + "/", protocol_binding="JSONRPC",
                                                          protocol_version="0.3")],
                     capabilities=AgentCapabilities(streaming=False), default_input_modes=["text"],
                     default_output_modes=["text"],
                     skills=[AgentSkill(id="forecast", name="forecast", description="The weather in a city.",
                                        tags=["weather"])])
    handler = DefaultRequestHandler(agent_executor=WeatherExecutor(), task_store=InMemoryTaskStore(), agent_card=card)
    routes = [*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/", enable_v0_3_compat=True)]
    token = os.environ.get("A2A_TOKEN")
    return Starlette(routes=routes, middleware=[Middleware(BearerOnly, token=token)] if token else [])


class BearerOnly:
    """Answers 401 to a request without ``Authorization: Bearer <token>``."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and Request(scope).headers.get("authorization") != f"Bearer {self.token}":
            await JSONResponse({"error": "unauthorized"}, status_code=401)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=8767)
    port = parser.parse_args().port
    uvicorn.run(app(f"http://127.0.0.1:{port}"), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
