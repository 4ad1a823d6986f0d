"""Loopback HTTP agents for the ``http`` target's tests: the example agent server in a subprocess, and a scripted
one in a thread that records every request and answers as a test tells it to.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.conftest import REPO


@contextmanager
def example_agent(latency: float = 0.0) -> Iterator[str]:
    """``examples/targets/agent_server.py`` on a free port; yields its base URL."""
    process = subprocess.Popen([sys.executable, "-m", "examples.targets.agent_server", "--port", "0",
                                "--latency", str(latency)], cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("PORT "), line
        yield f"http://127.0.0.1:{int(line.split()[1])}"
    finally:
        process.terminate()
        process.wait(timeout=10)


@dataclass
class Seen:
    """One request the scripted agent received."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Answer:
    status: int = 200
    body: Any = None
    """A JSON value, or ``str`` sent as it is (``text/plain``)."""
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class ScriptedAgent:
    """``answer(seen)`` decides each reply (default: ``{"text": "ok"}``); ``requests`` holds what arrived."""

    answer: Callable[[Seen], Answer] = lambda seen: Answer(body={"text": "ok"})
    requests: list[Seen] = field(default_factory=list)

    def __post_init__(self) -> None:
        agent = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode(errors="replace")
                seen = Seen(self.command, self.path, dict(self.headers.items()), body)
                agent.requests.append(seen)
                reply = agent.answer(seen)
                if reply.delay:
                    time.sleep(reply.delay)
                text = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
                data = text.encode()
                self.send_response(reply.status)
                self.send_header("Content-Type", "text/plain" if isinstance(reply.body, str) else "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_GET = do_POST = do_PUT = do_PATCH = _serve

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
