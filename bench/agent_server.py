"""A loopback agent endpoint for the ``http`` target's benchmark: answers every ``POST`` after a fixed latency.

Run as ``python bench/agent_server.py --latency 0.05``: it binds 127.0.0.1 on a free port and prints
``PORT <n>`` once it listens. Every request (HTTP/1.1, keep-alive) gets the same JSON reply after the
latency: the benchmark's turn (a ``get_weather`` call, its result, an answer naming Brooklyn, as
``bench/targets.py`` returns) and usage. It is an asyncio protocol with canned bytes, so its own CPU per
request is small and the figures measure evalcli's client side; ``examples/targets/agent_server.py`` is the
real weather agent over HTTP.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.targets import reply

BODY = json.dumps({"messages": reply("Brooklyn"), "usage": {"prompt_tokens": 12, "completion_tokens": 9}}).encode()
HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + str(len(BODY)).encode()
        + b"\r\n\r\n")


class Agent(asyncio.Protocol):
    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].lower()
            start = head.find(b"content-length:")
            length = int(head[start + 15:].split(b"\r\n", 1)[0]) if start >= 0 else 0
            if len(self.buffer) < end + 4 + length:
                return
            self.buffer = self.buffer[end + 4 + length:]
            asyncio.get_running_loop().call_later(self.latency, self._answer)

    def _answer(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(HEAD + BODY)


async def serve(latency: float) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Agent(latency), "127.0.0.1", 0, backlog=1024)
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=0.05)
    asyncio.run(serve(parser.parse_args().latency))


if __name__ == "__main__":
    main()
