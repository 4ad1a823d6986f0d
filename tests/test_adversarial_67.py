"""Adversarial try 67: simulated users, agents over HTTP, Mastra servers and models as targets, recorded conversations
and labels (docs/simulated-users.md, docs/targets/http.md, docs/targets/mastra.md, docs/targets/model.md,
docs/recorded.md), broken as users would: the real CLI, real SQLite files, real loopback servers that record every
request. Each test failed on the main this branch started from.

- A 307 to another origin carried the target's ``Authorization`` (and ``X-Api-Key``) there, and a 307 to the same
  origin dropped the URL's ``user:password``.
- A Mastra url with ``user:password@`` was "cannot reach the Mastra server" (the look-up put the credentials in the
  host name); with an ``Authorization`` header as well, every conversation errored inside aiohttp; the look-up's
  redirect to another origin carried the header along.
- A reply with no end (or of hundreds of MB) was read whole into memory and stored.
- A simulated user who answered ``###STOP###`` before writing anything gave a conversation of no turns, scored ``ok``.
- The model target's failures read "the target raised LLMError / ValueError".
- A recorded tool result answering a call no assistant message made was scored silently.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.agent_server import Answer, ScriptedAgent, Seen
from tests.conftest import CliResult
from tests.llm_server import LLMServer, Reply
from tests.sim_helpers import serve, sim_env, simulator_requests

TOKEN = "tok-67-a1b2c3d4e5"
KEY = "key-67-f6e5d4c3b2"


@pytest.fixture
def agents() -> Iterator[Callable[[], ScriptedAgent]]:
    """Scripted HTTP servers on loopback, each on a port (an origin) of its own, stopped after the test."""
    started: list[ScriptedAgent] = []

    def start() -> ScriptedAgent:
        started.append(ScriptedAgent())
        return started[-1]

    try:
        yield start
    finally:
        for server in started:
            server.stop()


def headers_of(seen: Seen) -> dict[str, str]:
    return {name.lower(): value for name, value in seen.headers.items()}


def test_a_redirect_to_another_origin_never_carries_the_targets_credentials(
        agents: Callable[[], ScriptedAgent], write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    elsewhere, agent = agents(), agents()
    agent.answer = lambda seen: (Answer(status=307, headers={"Location": f"{elsewhere.url}/chat"})
                                 if seen.path == "/moved" else Answer(body={"text": "ok"}))
    write("d.yaml", f"""
        target:
          http:
            url: {agent.url}/moved
            headers: {{Authorization: "Bearer {TOKEN}", X-Api-Key: {KEY}, X-Client: evals}}
        scorers: [{{includes: ok}}]
        data: [{{id: one, input: hello}}]
        """)
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 0, result.stderr
    assert [s.path for s in agent.requests] == ["/moved"] and [s.path for s in elsewhere.requests] == ["/chat"]
    there = headers_of(elsewhere.requests[0])
    assert "authorization" not in there and "x-api-key" not in there, there
    assert there["x-client"] == "evals" and elsewhere.requests[0].body == {"input": "hello"}


def test_a_redirect_within_the_origin_keeps_the_urls_credentials(
        agents: Callable[[], ScriptedAgent], write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    agent = agents()
    agent.answer = lambda seen: (Answer(status=308, headers={"Location": "/chat"}) if seen.path == "/moved" else
                                 Answer(body={"text": "ok"}) if "authorization" in headers_of(seen) else
                                 Answer(status=401, body={"error": "who are you?"}))
    host = agent.url.removeprefix("http://")
    write("d.yaml", f"""
        target: {{http: {{url: "http://evals:{TOKEN}@{host}/moved"}}}}
        scorers: [{{includes: ok}}]
        data: [{{id: one, input: hello}}]
        """)
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 0, result.stdout + result.stderr
    assert [headers_of(s).get("authorization", "")[:6] for s in agent.requests] == ["Basic ", "Basic "]


def mastra_server(seen: Seen) -> Answer:
    """A Mastra server's agent API as docs/targets/mastra.md's reference measured it, behind Basic auth."""
    if not headers_of(seen).get("authorization", "").startswith("Basic "):
        return Answer(status=401, body={"error": "Unauthorized"})
    if seen.path == "/api/agents/weatherAgent":
        return Answer(body={"name": "Weather Agent"})
    if seen.path.startswith("/api/memory/status"):
        return Answer(body={"result": True, "memoryType": "local"})
    if seen.path == "/api/agents/weatherAgent/generate":
        return Answer(body={"text": "ok", "response": {"messages": [
            {"role": "assistant", "content": [{"type": "text", "text": f"ok: {seen.body['messages']}"}]}]}})
    return Answer(status=404, body={"error": "Not Found"})


def test_a_mastra_url_with_credentials_is_looked_up_and_played_with_them(
        agents: Callable[[], ScriptedAgent], write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    server = agents()
    server.answer = mastra_server
    host = server.url.removeprefix("http://")
    write("d.yaml", f"""
        target: {{mastra: {{url: "http://evals:{TOKEN}@{host}", agent: weatherAgent}}}}
        scorers: [{{includes: ok}}]
        data: [{{id: one, inputs: [hello, again]}}]
        """)
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 0, result.stderr
    assert [s.path.split("?")[0] for s in server.requests] == [
        "/api/agents/weatherAgent", "/api/memory/status", "/api/agents/weatherAgent/generate",
        "/api/agents/weatherAgent/generate"]
    assert {headers_of(s)["authorization"][:6] for s in server.requests} == {"Basic "}
    assert TOKEN not in result.stdout + result.stderr

    write("both.yaml", f"""
        target: {{mastra: {{url: "http://evals:{TOKEN}@{host}", agent: weatherAgent,
                           headers: {{Authorization: "Bearer {TOKEN}"}}}}}}
        scorers: [{{includes: ok}}]
        data: [{{id: one, input: hello}}]
        """)
    played = len(server.requests)
    both = cli("run", "both.yaml")
    assert both.code == 2, both.stderr
    assert "both.yaml:2:29: the url holds credentials" in both.stderr and "give them one way" in both.stderr
    assert "Traceback" not in both.stderr
    assert len(server.requests) == played, "nothing is asked of a server before the mistake is fixed"


def test_the_mastra_look_up_never_carries_the_header_to_another_origin(
        agents: Callable[[], ScriptedAgent], write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    elsewhere, server = agents(), agents()
    elsewhere.answer = lambda seen: Answer(body={"name": "Weather Agent"})
    server.answer = lambda seen: (Answer(status=302, headers={"Location": f"{elsewhere.url}{seen.path}"})
                                  if seen.method == "GET" else Answer(body={"text": "ok"}))
    write("d.yaml", f"""
        target: {{mastra: {{url: "{server.url}", agent: weatherAgent, headers: {{Authorization: "Bearer {TOKEN}"}}}}}}
        scorers: [{{includes: ok}}]
        data: [{{id: one, input: hello}}]
        """)
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 0, result.stderr
    assert [s.path for s in elsewhere.requests] == ["/api/agents/weatherAgent"]
    assert "authorization" not in headers_of(elsewhere.requests[0])
    assert headers_of(server.requests[-1])["authorization"] == f"Bearer {TOKEN}"  # its own origin keeps it


class Endless:
    """An HTTP server whose reply never ends (chunked, 1 MiB a chunk) until the client goes away; counts what it sent."""

    def __init__(self) -> None:
        self.sent = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                chunk = b"x" * (1 << 20)
                try:
                    self.wfile.write(b'a\r\n{"text": "\r\n')
                    while outer.sent < (1 << 30):
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        outer.sent += len(chunk)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def test_a_reply_that_never_ends_is_the_turns_error_not_the_runs_memory(
        agents: Callable[[], ScriptedAgent], write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    endless = Endless()
    big = agents()
    big.answer = lambda seen: Answer(status=502, body={"text": "y" * (40 << 20)})  # 40 MiB with a Content-Length
    try:
        write("d.yaml", f"""
            target: {{http: {{url: "http://127.0.0.1:{{{{ metadata.port }}}}/chat", timeout: 60}}}}
            scorers: [{{includes: ok}}]
            data:
              - {{id: endless, input: hello, metadata: {{port: {endless.url.rsplit(":", 1)[1]}}}}}
              - {{id: big, input: hello, metadata: {{port: {big.url.rsplit(":", 1)[1]}}}}}
            """)
        result = cli("run", "d.yaml", "--json", "out.json")
    finally:
        endless.stop()
    assert result.code == 4, result.stderr
    out = json.loads((result.cwd / "out.json").read_text())
    errors = {item["id"]: item["error"] for item in out["items"]}
    assert errors["endless"].startswith(f"turn 0: POST {endless.url}/chat answered with a body over 32 MiB"), errors
    assert errors["big"].startswith(f"turn 0: POST {big.url}/chat answered 502 Bad Gateway with a body over 32 MiB"), errors
    assert endless.sent < (100 << 20), "the reply was read on past the limit"
    assert (result.cwd / "evalcli.db").stat().st_size < (1 << 20)


def test_a_simulated_user_who_stops_before_saying_anything_is_the_simulators_error(
        llm_server: LLMServer, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    serve(llm_server, lambda heard, request: "###STOP###")
    write("d.yaml", """
        target: agents:echo
        target_has_memory: true
        gates: [{excludes: refund}]
        data:
          - id: silent
            simulate: {goal: Get a refund., max_turns: 4}
        """)
    result = cli("run", "d.yaml", "--json", "-", env=sim_env(llm_server))
    assert result.code == 4, result.stdout + result.stderr
    item = result.json["items"][0]
    assert (item["status"], item["stop_reason"], item["turns"]) == ("error", "error", [])
    assert item["error"].startswith("turn 0: the simulated user (model openai/sim-model) stopped (###STOP###) before "
                                    "its first message"), item["error"]
    assert len(simulator_requests(llm_server)) == 1
    assert result.json["verdict"] != "passed"


def test_the_model_targets_failures_name_the_model_not_a_raised_exception(
        llm_server: LLMServer, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    llm_server.responder = lambda request: (
        Reply(body={"id": "x", "object": "chat.completion", "model": "m", "choices": []})
        if "empty" in json.dumps(request.messages) else Reply(body="{not json"))
    write("d.yaml", """
        target: {model: openai/m, system: Be brief.}
        scorers: [{includes: ok}]
        data:
          - {id: empty, input: empty please}
          - {id: garbled, input: anything}
        """)
    result = cli("run", "d.yaml", "--json", "-", env={"OPENAI_API_BASE": llm_server.url, "EVALCLI_LLM_RETRIES": "0"})
    assert result.code == 4, result.stderr
    errors = {item["id"]: item["error"] for item in result.json["items"]}
    assert errors["empty"] == "turn 0: model openai/m answered no message (its response has no choices[0].message)"
    assert errors["garbled"].startswith("turn 0: model openai/m failed after 1 attempt: "), errors
    assert not any("the target raised" in error for error in errors.values()), errors


def test_a_recorded_tool_result_that_answers_no_call_is_a_located_mistake(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", """
        gates: [no_tool_errors]
        data:
          - id: typo
            transcript:
              - {role: user, content: Weather in Paris}
              - role: assistant
                content: null
                tool_calls: [{id: call_1, type: function, function: {name: get_weather, arguments: '{}'}}]
              - {role: tool, tool_call_id: call_l, content: '{"error": "down"}'}
              - {role: assistant, content: Sunny.}
        """)
    write("logs.yaml", "gates: [no_tool_errors]\ndata_file: logs.jsonl\n")
    lines = [{"id": "ok", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]},
             {"id": "cut", "messages": [{"role": "user", "content": "hi"},
                                        {"role": "tool", "tool_call_id": "c9", "content": "stale"},
                                        {"role": "assistant", "content": "hello"}]}]
    write("logs.jsonl", "\n".join(json.dumps(line) for line in lines) + "\n")
    result, logs = cli("run", "d.yaml"), cli("run", "logs.yaml")
    assert result.code == logs.code == 2, result.stdout + result.stderr + logs.stderr
    assert ("d.yaml:9:36: item 0 (typo) transcript[2]: the tool message answers 'call_l', a call no assistant message "
            "before it made (did you mean 'call_1'?)") in result.stderr, result.stderr
    assert "logs.jsonl:2:1: item 1 (cut) messages[1]: the tool message answers 'c9'" in logs.stderr, logs.stderr
    assert "Traceback" not in result.stderr and not (result.cwd / "evalcli.db").exists()


def test_recorded_assistant_words_and_arguments_that_are_no_text_are_located_mistakes(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", """
        scorers: [{scorer: {includes: sunny}, id: sunny}, {scorer: {tool_args: {name: w, args: {city: Paris}}}, id: args}]
        data:
          - id: exported
            transcript:
              - {role: user, content: Weather in Paris}
              - {role: assistant, content: {text: sunny}}
          - id: numbers
            transcript:
              - {role: user, content: Weather in Paris}
              - role: assistant
                content: null
                tool_calls: [{id: c1, type: function, function: {name: w, arguments: 5}}]
              - {role: tool, tool_call_id: c1, content: sunny}
        """)
    result = cli("run", "d.yaml")
    assert result.code == 2, result.stdout + result.stderr
    assert ("d.yaml:6:36: item 0 (exported) transcript[1]: an assistant message's 'content' must be its text (or null, "
            "or a list of parts), got a mapping") in result.stderr, result.stderr
    assert ("d.yaml:12:78: item 1 (numbers) transcript[1]: tool call 0's 'arguments' must be JSON text or a mapping, "
            "got int 5") in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and not (result.cwd / "evalcli.db").exists()


def test_a_redirect_to_something_that_is_no_url_names_the_request(
        agents: Callable[[], ScriptedAgent], write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    agent = agents()
    agent.answer = lambda seen: Answer(status=307, headers={"Location": "http://[broken"})
    write("d.yaml", f"""
        target: {{http: {{url: "{agent.url}/chat"}}}}
        scorers: [{{includes: ok}}]
        data: [{{id: one, input: hello}}]
        """)
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 4, result.stderr
    assert result.json["items"][0]["error"] == (f"turn 0: POST {agent.url}/chat answered 307 Temporary Redirect, a "
                                                "redirect to 'http://[broken', which is not a URL (Invalid IPv6 URL)")


def test_an_http_target_on_the_command_line_without_a_scheme_says_so(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", """
        target: agents:echo
        scorers: [{includes: ok}]
        data: [{id: one, input: hello}]
        """)
    result = cli("run", "d.yaml", "--target", "http:localhost:8000/chat")
    assert result.code == 2, result.stderr
    assert result.stderr.startswith("error: --target http:localhost:8000/chat: http:URL takes an http:// or https:// "
                                    "URL\n"), result.stderr
    assert "import" not in result.stderr and not (result.cwd / "evalcli.db").exists()


def a2a_agent(seen: Seen) -> Answer:
    """An A2A agent behind Basic auth: its card, and a Message answering every ``message/send``."""
    if not headers_of(seen).get("authorization", "").startswith("Basic "):
        return Answer(status=401, body={"error": "Unauthorized"})
    if seen.path.endswith("/.well-known/agent-card.json"):
        return Answer(body={"name": "weather", "version": "1", "capabilities": {}, "skills": []})
    return Answer(body={"jsonrpc": "2.0", "id": seen.body["id"], "result": {
        "kind": "message", "messageId": "m1", "role": "agent", "contextId": "c1",
        "parts": [{"kind": "text", "text": "ok"}]}})


def test_an_a2a_url_with_credentials_reads_its_card_with_them(
        agents: Callable[[], ScriptedAgent], write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    agent = agents()
    agent.answer = a2a_agent
    host = agent.url.removeprefix("http://")
    write("d.yaml", f"""
        target: {{a2a: "http://evals:{TOKEN}@{host}"}}
        scorers: [{{includes: ok}}]
        data: [{{id: one, input: hello}}]
        """)
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 0, result.stderr
    assert [s.method for s in agent.requests] == ["GET", "POST"]
    assert {headers_of(s)["authorization"][:6] for s in agent.requests} == {"Basic "}


def test_a_stored_label_left_out_because_its_conversation_changed_is_said(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    from tests.view_helpers import view_server

    labelled = """
        scorers: [{scorer: {includes: sunny}, id: sunny}]
        data:
          - {id: a, transcript: [{role: user, content: q}, {role: assistant, content: sunny}]}
          - {id: b, transcript: [{role: user, content: q}, {role: assistant, content: REPLY}]}
        """
    write("d.yaml", labelled.replace("REPLY", "rain"))
    run = cli("run", "d.yaml", "--json", "-")
    assert run.code == 0, run.stderr
    with view_server(run.cwd / "evalcli.db") as server:
        for index in (0, 1):
            assert server.post(f"/api/runs/{run.json['run_id']}/conversations/{index}/labels",
                               {"scorer": "sunny", "value": "pass"})[0] == 200
    write("d.yaml", labelled.replace("REPLY", "sunny at last"))  # b's messages edited since the person judged them
    result = cli("calibrate", "d.yaml", "--labels-from-db", "--json", "-")
    assert result.code == 0, result.stderr
    assert result.json["scorers"][0]["labels"] == 1
    assert ("warning: 1 label stored for d.yaml left out: b (sunny) changed since labelled (the person judged other "
            "messages); label them again in evalcli view") in " ".join(result.stderr.split()), result.stderr


@pytest.mark.parametrize("args", [[], ["--scorer", "sunnny"], ["--labels-from-db"]])
def test_a_calibration_with_nothing_to_calibrate_writes_no_database(
        args: list[str], write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", """
        scorers: [{scorer: {includes: sunny}, id: sunny}]
        data:
          - {id: a, transcript: [{role: user, content: q}, {role: assistant, content: sunny}]}
        """)
    result = cli("calibrate", "d.yaml", *args, "--json", "out.json")
    assert result.code == 2, result.stderr
    assert result.stderr.startswith("error: "), result.stderr
    assert not (result.cwd / "evalcli.db").exists() and not (result.cwd / "out.json").exists()


@pytest.mark.parametrize("stop", ["Thanks, bye! ### stop ###", "##STOP##", "Got it. ###Stop###"])
def test_a_stop_marker_the_simulator_writes_its_own_way_ends_the_conversation(
        stop: str, llm_server: LLMServer, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    serve(llm_server, lambda heard, request: "Where is my order?" if heard is None else stop)
    write("d.yaml", """
        target: agents:echo
        target_has_memory: true
        scorers: [{includes: order}]
        data:
          - id: order
            simulate: {goal: Find the order., max_turns: 4}
        """)
    result = cli("run", "d.yaml", "--json", "-", env=sim_env(llm_server))
    assert result.code == 0, result.stdout + result.stderr
    item = result.json["items"][0]
    assert item["stop_reason"] == "user_stop"
    assert [turn["input"] for turn in item["turns"]] == ["Where is my order?"], "the marker is never sent to the agent"
    assert len(simulator_requests(llm_server)) == 2


def test_a_header_no_request_can_send_is_a_located_mistake_that_never_shows_the_secret(
        agents: Callable[[], ScriptedAgent], write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    agent = agents()
    write("d.yaml", f"""
        target:
          http:
            url: {agent.url}/chat
            headers: {{Authorization: "Bearer ${{AGENT_TOKEN}}"}}
        scorers: [{{includes: ok}}]
        data: [{{id: one, input: hello}}]
        """)
    result = cli("run", "d.yaml", env={"AGENT_TOKEN": TOKEN + "\n"})  # a CI secret pasted with its newline
    assert result.code == 2, result.stdout + result.stderr
    assert result.stderr.startswith("error: d.yaml:4:30: the value of header 'Authorization' holds a line break "
                                    "('\\n'), which no HTTP request can send"), result.stderr
    assert TOKEN not in result.stderr and agent.requests == [] and not (result.cwd / "evalcli.db").exists()


def test_a_key_given_twice_on_a_jsonl_line_is_a_located_mistake_as_in_yaml(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", "scorers: [{scorer: {includes: sunny}, id: sunny}]\ndata_file: logs.jsonl\n")
    conversation = '[{"role": "user", "content": "q"}, {"role": "assistant", "content": "sunny"}]'
    write("logs.jsonl", f'{{"id": "a", "messages": {conversation}, "labels": {{"sunny": "pass"}}}}\n'
                        f'{{"id": "b", "messages": {conversation}, "labels": {{"sunny": "pass", "sunny": "fail"}}}}\n')
    result = cli("calibrate", "d.yaml")
    assert result.code == 2, result.stdout + result.stderr
    line = (result.cwd / "logs.jsonl").read_text().splitlines()[1]
    column = line.rindex('"sunny"') + 1
    assert result.stderr.startswith(f"error: logs.jsonl:2:{column}: duplicate key 'sunny'\n"), result.stderr
    assert not (result.cwd / "evalcli.db").exists()
