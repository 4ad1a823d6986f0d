"""The ``a2a`` target (docs/targets/a2a.md) against a real A2A agent made with ``a2a-sdk``
(``examples/a2a_weather_agent.py``), through the real CLI: the agent card, ``message/send``, the conversation's
``contextId``, tasks polled to completion, artifacts as the reply, auth headers, and a card that cannot be read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO, CliResult
from tests.reliability_helpers import serving

TOKEN = "a2a-token-0123456789abcdef"


@pytest.fixture
def a2a_agent() -> Iterator[str]:
    with serving("examples.a2a_weather_agent", env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "A2A_TOKEN": TOKEN}) as port:
        yield f"http://127.0.0.1:{port}"


def said(result: CliResult) -> dict[str, list[str]]:
    return {item["id"]: [m["content"] for turn in item["turns"] for m in turn["output"] if m["role"] == "assistant"]
            for item in result.json["items"]}


@pytest.mark.parametrize("blocking", [True, False])
def test_an_a2a_agent_keeps_each_conversation_by_its_context(blocking: bool, a2a_agent: str,
                                                              write: Callable[..., Path],
                                                              cli: Callable[..., CliResult]) -> None:
    write("d.yaml", f"""
        target:
          a2a: {{url: "{a2a_agent}", headers: {{Authorization: "Bearer {TOKEN}"}}, blocking: {str(blocking).lower()},
                 poll_interval: 0.1}}
        concurrency: 2
        data:
          - id: london
            inputs: ["What is the weather in London?", "What about tomorrow?"]
          - id: paris
            inputs: ["What is the weather in Paris?", "What about tomorrow?"]
        scorers:
          - includes: "°F"
    """)
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 0, result.stderr
    assert said(result) == {"london": ["Today in London: windy, 61°F.", "Tomorrow in London: windy, 61°F."],
                            "paris": ["Today in Paris: windy, 61°F.", "Tomorrow in Paris: windy, 61°F."]}
    assert TOKEN not in result.stdout + result.stderr
    target = result.json["usage"]["purposes"]["target"]  # the tokens the agent reported on its status message
    assert (target["calls"], target["prompt_tokens"], target["completion_tokens"]) == (4, 48, 28)


def test_an_unreadable_card_or_a_refused_token_is_named(a2a_agent: str, write: Callable[..., Path],
                                                        cli: Callable[..., CliResult]) -> None:
    write("gone.yaml", 'target: {a2a: "http://127.0.0.1:9"}\ndata:\n  - input: hi\nscorers:\n  - includes: x\n')
    result = cli("validate", "gone.yaml")
    assert result.code == 2
    assert "gone.yaml:1:15: cannot read the A2A agent card of http://127.0.0.1:9 (http://127.0.0.1:9/.well-known/" \
           "agent-card.json: Connection refused" in result.stderr
    write("denied.yaml", f'target: {{a2a: "{a2a_agent}"}}\ndata:\n  - input: hi\nscorers:\n  - includes: x\n')
    result = cli("validate", "denied.yaml")
    assert result.code == 2 and f"cannot read the A2A agent card of {a2a_agent}" in result.stderr
    assert "401" in result.stderr and "Traceback" not in result.stderr
    write("hermetic.yaml", f'target: {{a2a: {{url: "{a2a_agent}", headers: {{Authorization: "Bearer {TOKEN}"}}}}}}\n'
                           "data:\n  - input: What is the weather in Rome?\nscorers:\n  - includes: x\n")
    result = cli("run", "hermetic.yaml", "--hermetic")
    assert result.code == 2 and "--hermetic cannot hold: an A2A agent runs its tools itself" in result.stderr


def test_a_base_url_with_a_query_token_reads_the_card_under_its_path_with_the_query_kept(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    # a gateway that takes its key as ?key=...: the card path goes after the base's path, the query after it
    import http.server
    import json
    import threading

    seen: list[str] = []

    class Gateway(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            ok = self.path == "/gw/.well-known/agent-card.json?key=gw-key-0123456789"
            body = json.dumps({"name": "gateway agent", "url": "http://127.0.0.1:9/rpc"} if ok else {}).encode()
            self.send_response(200 if ok else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Gateway)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/gw/?key=gw-key-0123456789"
        write("d.yaml", f'target: {{a2a: "{url}"}}\ndata:\n  - input: hi\nscorers:\n  - includes: x\n')
        result = cli("validate", "d.yaml")
    finally:
        server.shutdown()
    assert result.code == 0, result.stderr
    assert seen == ["/gw/.well-known/agent-card.json?key=gw-key-0123456789"]
