"""An A2A agent (``a2a-sdk``) whose task waits for the user, for tests/test_adversarial_47.py.

``python -m tests.a2a_waiting_agent --port PORT``: a message without a task asks "Which city?" and leaves its task
``input-required``; the next message sent with that task's ``taskId`` completes it ("Booked for London."). A message
that starts a new task while one of its conversation waits is answered "a new task: ..." (what a client that drops
the ``taskId`` gets). Each request is appended to the file ``A2A_LOG`` names.
"""

from __future__ import annotations

import argparse
import json
import os

from a2a.helpers.proto_helpers import new_task_from_user_message, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Role, TaskState
from starlette.applications import Starlette

WAITING: set[str] = set()
"""The contexts whose task waits for the user."""


class WaitingExecutor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        text = context.get_user_input()
        resumed = context.current_task is not None
        task = context.current_task or new_task_from_user_message(context.message)
        if not resumed:
            await event_queue.enqueue_event(task)
        log = os.environ.get("A2A_LOG")
        if log:
            with open(log, "a", encoding="utf-8") as f:
                f.write(json.dumps({"text": text, "task": task.id, "resumed": resumed}) + "\n")
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        if resumed:
            WAITING.discard(task.context_id)
            await updater.add_artifact([new_text_part(f"Booked for {text}.")], name="booking")
            await updater.update_status(TaskState.TASK_STATE_COMPLETED)
        elif task.context_id in WAITING:
            await updater.add_artifact([new_text_part(f"a new task: {text}")], name="lost")
            await updater.update_status(TaskState.TASK_STATE_COMPLETED)
        else:
            WAITING.add(task.context_id)
            asked = new_text_message("Which city?", context_id=task.context_id, task_id=task.id, role=Role.ROLE_AGENT)
            await updater.update_status(TaskState.TASK_STATE_INPUT_REQUIRED, message=asked)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    port = parser.parse_args().port
    base = f"http://127.0.0.1:{port}"
    card = AgentCard(name="booking", description="Books a trip.", version="1.0",
                     supported_interfaces=[AgentInterface(url=base + "/", protocol_binding="JSONRPC",
                                                          protocol_version="0.3")],
                     capabilities=AgentCapabilities(streaming=False), default_input_modes=["text"],
                     default_output_modes=["text"],
                     skills=[AgentSkill(id="book", name="book", description="Books a trip.", tags=["travel"])])
    handler = DefaultRequestHandler(agent_executor=WaitingExecutor(), task_store=InMemoryTaskStore(), agent_card=card)
    routes = [*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/", enable_v0_3_compat=True)]
    uvicorn.run(Starlette(routes=routes), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
