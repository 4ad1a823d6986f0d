"""The loopback JSON server the scripted stand-ins share (``examples/frameworks/scripted_model.py``,
``scripted_user.py`` and ``examples/targets/chat_model.py``): every ``POST``'s JSON body goes to a function of
the request's path and body, whose return is sent back as JSON (HTTP/1.1, keep-alive, a thread per connection)."""

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
            data = json.dumps(answer(self.path, body)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    return server
