"""The loopback JSON server the scripted stand-ins share (``examples/frameworks/scripted_model.py``,
``scripted_user.py`` and ``examples/targets/chat_model.py``): every ``POST``'s JSON body goes to a function of
the request's path and body, whose return is sent back as JSON (HTTP/1.1, keep-alive, a thread per connection).
A Chat Completions request that asks for a stream (``"stream": true``, as Strands' OpenAI model always does) gets
the same answer as server-sent events (``sse``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = Callable[[str, dict[str, Any]], dict[str, Any]]
"""``answer(path, body)``: the reply's JSON."""


def json_server(answer: Answer, port: int = 0) -> ThreadingHTTPServer:
    """The server on 127.0.0.1:``port`` (0: any free port), not yet serving: call ``serve_forever``."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            reply = answer(self.path, body)
            streamed = bool(body.get("stream")) and "choices" in reply
            data = sse(reply) if streamed else json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream" if streamed else "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    return server


def sse(completion: dict[str, Any]) -> bytes:
    """A Chat Completions body as the stream of chunks the API sends for ``"stream": true``: the message's text and
    tool calls, the finish reason, then the usage (``stream_options.include_usage``) and ``[DONE]``."""
    choice = completion["choices"][0]
    message = choice.get("message") or {}
    base = {"id": completion.get("id", "chatcmpl-stream"), "object": "chat.completion.chunk",
            "created": completion.get("created", 0), "model": completion.get("model", "")}
    delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]
    chunks = [{**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
              {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice.get("finish_reason", "stop")}]}]
    if completion.get("usage"):
        chunks.append({**base, "choices": [], "usage": completion["usage"]})
    return b"".join(f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chunks) + b"data: [DONE]\n\n"
