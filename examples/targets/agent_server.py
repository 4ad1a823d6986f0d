"""The demo weather agent served over HTTP, to try the ``http`` target offline (docs/targets/http.md).

``python -m examples.targets.agent_server --port 8000`` serves ``POST /chat`` on 127.0.0.1:

    request:  {"message": "What is the weather in Brooklyn?", "session_id": "...", "user": "..."}
    reply:    {"reply": "Today in Brooklyn: sunny, 72°F.", "messages": [...OpenAI-format messages...],
               "usage": {"prompt_tokens": 9, "completion_tokens": 8}}

``input`` is taken for ``message`` and ``text`` repeats ``reply``, so ``--target http:URL`` (which sends
``{"input": ...}`` and reads ``text``) works against it too, without a session.

It is ``examples.weather_agent`` (a ``get_weather`` tool, memory per session) behind an endpoint, as any
agent written in any language would be: it remembers a session's favourite city and last city asked about
by ``session_id``, so "What about tomorrow?" works only when the request carries the session. ``--port 0``
picks a free port; it prints ``PORT <n>`` once it listens. ``--latency S`` waits that long before each
reply (the benchmark's agent). Nothing leaves the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from examples.weather_agent import WeatherAgent


def make_app(latency: float = 0.0) -> web.Application:
    agent = WeatherAgent()

    async def chat(request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError:
            return web.json_response({"error": "the body must be JSON"}, status=400)
        message = body.get("message", body.get("input")) if isinstance(body, dict) else None
        if not isinstance(message, str):
            return web.json_response({"error": "'message' (a string) is required"}, status=422)
        if latency > 0:
            await asyncio.sleep(latency)
        session = body.get("session_id")
        memory = {"thread": session, "resource": body.get("user") or session} if session else None
        messages: list[dict[str, Any]] = agent.generate(message, memory=memory)
        reply = next((m["content"] for m in reversed(messages) if m["role"] == "assistant" and m.get("content")), "")
        usage = {"prompt_tokens": len(message.split()), "completion_tokens": len(reply.split())}
        return web.json_response({"reply": reply, "text": reply, "messages": messages, "usage": usage},
                                 dumps=lambda v: json.dumps(v, ensure_ascii=False))

    app = web.Application()
    app.router.add_post("/chat", chat)
    return app


async def serve(port: int, latency: float) -> None:
    runner = web.AppRunner(make_app(latency), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port, backlog=1024)
    await site.start()
    bound = runner.addresses[0][1]
    print(f"PORT {bound}", flush=True)
    print(f"weather agent on http://127.0.0.1:{bound}/chat", file=sys.stderr, flush=True)
    await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds to wait before each reply")
    args = parser.parse_args()
    try:
        asyncio.run(serve(args.port, args.latency))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
