"""A loopback OpenAI-compatible chat-completions server that answers after a fixed latency.

Run as ``python bench/openai_server.py --latency 0.05``: it binds 127.0.0.1 on a free port and
prints ``PORT <n>`` on stdout once it listens. ``POST /v1/chat/completions`` answers with one
assistant message (or, with ``"stream": true``, the same message as server-sent events, which is
what the AI SDK's chat model asks for). Nothing leaves the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable

from aiohttp import web

ANSWER = "It is 21°C and clear in Brooklyn."


def _usage() -> dict[str, int]:
    return {"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21}


async def completions(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    latency: float = request.app["latency"]
    if latency > 0:
        await asyncio.sleep(latency)
    model = str(body.get("model", "bench"))
    created = int(time.time())
    if not body.get("stream"):
        return web.json_response({
            "id": "chatcmpl-bench", "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": ANSWER}}],
            "usage": _usage(),
        })
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": created, "model": model}
    chunks = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ANSWER}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": _usage()},
    ]
    for chunk in chunks:
        await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def serve(handler: Handler, latency: float = 0.0) -> None:
    """Serve ``handler`` at ``/v1/chat/completions`` on 127.0.0.1 (a free port, printed as ``PORT <n>`` once it
    listens; ``request.app["latency"]`` holds ``latency``) until the process is stopped."""
    app = web.Application()
    app["latency"] = latency
    app.router.add_post("/v1/chat/completions", handler)
    app.router.add_post("/chat/completions", handler)

    async def run() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        print(f"PORT {port}", flush=True)
        await asyncio.Event().wait()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        sys.exit(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds before each answer")
    serve(completions, parser.parse_args().latency)


if __name__ == "__main__":
    main()
