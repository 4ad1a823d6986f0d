"""A real OpenAI-compatible chat-completions server on loopback, scripted by the tests.

It speaks ``POST /v1/chat/completions`` over HTTP (stdlib ``ThreadingHTTPServer`` in a thread),
answers from a script of ``Reply`` objects (text, tool calls, JSON verdicts, error statuses with
``Retry-After``, delays, malformed bodies, empty replies; as server-sent events when a request asks for a stream)
and records every request it receives,
with the moment it arrived. litellm reaches it as ``openai/<name>`` with ``api_base=server.url``.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from examples.loopback import sse


@dataclass
class Reply:
    """One scripted answer: an HTTP status, a JSON body (or raw text), headers and a delay."""

    status: int = 200
    body: dict[str, Any] | str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    """Its HTTP headers, names lower-cased."""
    delay: float = 0.0


@dataclass
class Request:
    """One request the server received."""

    body: dict[str, Any]
    path: str
    at: float
    """``time.monotonic()`` when the request arrived."""
    peer: tuple[str, int] | None = None
    """The client's address: one per connection (a pooled client reuses a few)."""
    headers: dict[str, str] = field(default_factory=dict)
    """Its HTTP headers, names lower-cased."""

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])


Responder = Callable[[Request], Reply]


def completion(
    content: str | None = None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    prompt_tokens: int = 11,
    completion_tokens: int = 7,
) -> dict[str, Any]:
    """An OpenAI chat-completion body with one choice."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "scripted",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def text(content: str, **usage: int) -> Reply:
    """An assistant text answer."""
    return Reply(body=completion(content, **usage))


def verdict(satisfied: Any, reasoning: str = "Because.") -> Reply:
    """A judge verdict as JSON text."""
    return text(json.dumps({"satisfied": satisfied, "reasoning": reasoning}))


def tool_call(name: str, arguments: dict[str, Any], call_id: str = "call_1") -> Reply:
    """An assistant message calling one tool."""
    return tool_calls([(name, arguments, call_id)])


def tool_calls(calls: list[tuple[str, dict[str, Any], str]]) -> Reply:
    """An assistant message calling several tools: (name, arguments, call id) each."""
    return Reply(
        body=completion(
            None,
            tool_calls=[
                {"id": cid, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                for n, a, cid in calls
            ],
        )
    )


def status(code: int, *, retry_after: float | None = None, message: str = "scripted error") -> Reply:
    """An HTTP error (429, 500, ...) with an OpenAI-style error body."""
    headers = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else {}
    return Reply(status=code, body={"error": {"message": message, "type": "scripted"}}, headers=headers)


def malformed() -> Reply:
    """A 200 whose body is not JSON."""
    return Reply(body="{this is not json")


def empty() -> Reply:
    """An assistant answer with empty content."""
    return text("")


def slow(reply: Reply, seconds: float) -> Reply:
    """The same reply, sent after a delay."""
    return Reply(reply.status, reply.body, dict(reply.headers), seconds)


class _WideServer(ThreadingHTTPServer):
    request_queue_size = 256  # the default backlog of 5 drops bursts of connections (retried a second later)


class LLMServer:
    """The scripted server. Use ``push`` to queue replies; ``requests`` holds what arrived."""

    def __init__(self) -> None:
        self.script: deque[Reply] = deque()
        self.requests: list[Request] = []
        self.responder: Responder | None = None
        """Answers when the script is empty (default: a 500 saying the script ran out)."""
        self._lock = threading.Lock()
        self._httpd = _WideServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """The ``api_base`` to give litellm."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> LLMServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def push(self, *replies: Reply) -> None:
        with self._lock:
            self.script.extend(replies)

    def _next(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self.script:
                return self.script.popleft()
        if self.responder is not None:
            return self.responder(request)
        return status(500, message="the test script has no more replies")

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                arrived = time.monotonic()
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_unparseable": raw.decode("utf-8", "replace")}
                reply = server._next(Request(body=body, path=self.path, at=arrived, peer=self.client_address[:2],
                                             headers={k.lower(): v for k, v in self.headers.items()}))
                if reply.delay:
                    time.sleep(reply.delay)
                payload = reply.body
                if isinstance(payload, dict) and "model" in payload and isinstance(body, dict):
                    payload = {**payload, "model": body.get("model", payload["model"])}
                streamed = reply.status == 200 and isinstance(payload, dict) and "choices" in payload \
                    and isinstance(body, dict) and bool(body.get("stream"))
                data = sse(payload) if streamed else (  # type: ignore[arg-type]
                    payload if isinstance(payload, str) else json.dumps(payload or {})).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "text/event-stream" if streamed else "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

        return Handler



# -- helpers for the framework adapters' tests (docs/targets/frameworks.md) ------------------------------------------


def scripted_weather(request: Request) -> Reply:
    """A responder playing the examples' model from the request's own messages and tools only
    (``examples/frameworks/scripted_model.py``), in the API the request was made in (Chat Completions or the
    Responses API): recall works only if the agent sent the earlier turns."""
    from examples.frameworks.scripted_model import answer

    return Reply(body=answer(request.path, request.body))


class InFlight:
    """Wraps a responder: holds each answer ``delay`` seconds and counts the requests in flight (``peak``)."""

    def __init__(self, responder: Responder, delay: float) -> None:
        self.responder = responder
        self.delay = delay
        self.now = 0
        self.peak = 0
        self._lock = threading.Lock()

    def __call__(self, request: Request) -> Reply:
        with self._lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        try:
            time.sleep(self.delay)
            return self.responder(request)
        finally:
            with self._lock:
                self.now -= 1


class BusyLLMServer(LLMServer):
    """The scripted server with a listen backlog for many simultaneous connections (``socketserver`` keeps 5)."""

    def __init__(self) -> None:
        super().__init__()
        self._httpd.socket.listen(1024)


class RateLimited:
    """Wraps a responder as a provider that allows ``allowed`` calls in flight: a call above that is answered at once
    with a 429 and ``Retry-After`` (seconds; sent as ``retry-after-ms`` too, as OpenAI does). It measures what the
    client did: the most calls answered at once (``peak``), every call (``calls``), the 429s (``rejected``), and the
    requests answered more than once (``duplicates``: the same messages, answered twice)."""

    def __init__(self, responder: Responder, allowed: int, delay: float, retry_after: float = 0.2) -> None:
        self.responder = responder
        self.allowed = allowed
        self.delay = delay
        self.retry_after = retry_after
        self.now = self.peak = self.calls = self.rejected = 0
        self.answered: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, request: Request) -> Reply:
        with self._lock:
            self.calls += 1
            if self.now >= self.allowed:
                self.rejected += 1
                reply = status(429, retry_after=self.retry_after, message="Rate limit reached: too many requests")
                reply.headers["retry-after-ms"] = f"{self.retry_after * 1000:g}"
                return reply
            self.now += 1
            self.peak = max(self.peak, self.now)
        try:
            time.sleep(self.delay)
            answer = self.responder(request)
            if answer.status == 200:
                key = json.dumps(request.messages, sort_keys=True)
                with self._lock:
                    self.answered[key] = self.answered.get(key, 0) + 1
            return answer
        finally:
            with self._lock:
                self.now -= 1

    @property
    def duplicates(self) -> int:
        return sum(n - 1 for n in self.answered.values())
