"""The ``http`` target (docs/targets/http.md) end to end: the real CLI against loopback agent servers."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.agent_server import Answer, ScriptedAgent, Seen, example_agent
from tests.conftest import REPO, CliResult, run_cli

TOKEN = "tok-9f8e7d6c5b4a"
"""A header secret that must never be stored or shown (short of the 8 characters generic redaction needs too)."""


@pytest.fixture
def agent() -> Iterator[ScriptedAgent]:
    server = ScriptedAgent()
    try:
        yield server
    finally:
        server.stop()


def everything_written(result: CliResult, db: str = "evalcli.db", folder: Path | None = None) -> str:
    """Every row of every table, the CLI's output and any JSON file, as one text."""
    conn = result.db(db)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    rows = [str(tuple(row)) for table in tables for row in conn.execute(f"SELECT * FROM {table}")]
    files = [p.read_text() for p in (folder or result.cwd).glob("*.json")]
    return "\n".join([result.stdout, result.stderr, *rows, *files])


def test_the_example_agent_over_http_with_memory_usage_and_no_secret_stored(tmp_path: Path) -> None:
    with example_agent() as url:
        result = run_cli(["run", str(REPO / "datasets/targets/http.yaml"), "--db", str(tmp_path / "evalcli.db"),
                          "--json", str(tmp_path / "out.json")], cwd=REPO,
                         env={"AGENT_URL": url, "AGENT_TOKEN": TOKEN})
    assert result.code == 0, result.stderr
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["target"] == f"http:{url}/chat"
    assert out["verdict"] == "passed"
    favourite = out["items"][1]
    assert favourite["turns"][1]["output"][-1]["content"] == "Today in Brooklyn: sunny, 72°F."  # the session remembered
    assert favourite["turns"][1]["output"][0]["tool_calls"][0]["function"]["name"] == "get_weather"
    db = result.db(str(tmp_path / "evalcli.db"))
    calls = db.execute("SELECT purpose, model, prompt_tokens, completion_tokens, turn_index FROM llm_calls "
                       "ORDER BY id").fetchall()
    assert len(calls) == 5 and {c["purpose"] for c in calls} == {"target"}
    assert calls[0]["prompt_tokens"] == len("What is the weather in Brooklyn?".split())
    assert sorted(c["turn_index"] for c in calls) == [0, 0, 0, 1, 1]
    assert TOKEN not in everything_written(result, str(tmp_path / "evalcli.db"), tmp_path)


def dataset(write: Callable[..., Path], http: str, *, data: str | None = None) -> Path:
    """``d.yaml`` with ``target: {http: ...}`` (``http``: its settings, one a line, unindented)."""
    settings = "\n".join("    " + line.strip() for line in http.strip().splitlines())
    items = data or "  - id: one\n    input: hello\n  - id: two\n    inputs: [first, second]"
    path = write("d.yaml", "")
    path.write_text(f"target:\n  http:\n{settings}\nscorers:\n  - includes: ok\ndata:\n{items}\n")
    return path


def test_body_templates_keep_json_types_and_see_the_conversation(write: Callable[..., Path],
                                                                 cli: Callable[..., CliResult],
                                                                 agent: ScriptedAgent) -> None:
    write("d.yaml", f"""
        target:
          http:
            url: {agent.url}/sessions/{{{{ thread }}}}/turns?n={{{{ turn }}}}
            headers: {{X-Api-Key: {TOKEN}}}
            body:
              message: "{{{{ input }}}}"
              history: "{{{{ history }}}}"
              turn: "{{{{ turn }}}}"
              meta: "{{{{ metadata }}}}"
              label: "item {{{{ item_id }}}}, turn {{{{ turn + 1 }}}}"
              who: ["{{{{ resource }}}}", 7, null, true]
              messages: "{{{{ history + [{{'role': 'user', 'content': input}}] }}}}"
        scorers:
          - includes: ok
        data:
          - id: two
            metadata: {{customer: 42}}
            inputs: [first, second]
        """)
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 0, result.stderr
    item = result.json["items"][0]
    first, second = agent.requests
    assert first.path == f"/sessions/{item['thread_id']}/turns?n=0" and second.path.endswith("?n=1")
    assert first.headers["X-Api-Key"] == TOKEN
    assert first.body["history"] == [] and first.body["turn"] == 0 and first.body["meta"] == {"customer": 42}
    assert first.body["label"] == "item two, turn 1"
    assert first.body["who"] == [item["resource_id"], 7, None, True]
    assert second.body["history"] == [{"role": "user", "content": "first"}, {"role": "assistant", "content": "ok"}]
    assert second.body["messages"][-1] == {"role": "user", "content": "second"}
    assert second.body["turn"] == 1
    assert TOKEN not in everything_written(result)


def test_response_mapping_messages_usage_and_a_transform(write: Callable[..., Path], cli: Callable[..., CliResult],
                                                         agent: ScriptedAgent) -> None:
    def answer(seen: Seen) -> Answer:
        call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
        return Answer(body={"data": {"messages": [
            {"role": "user", "content": seen.body["input"]},  # the user's own message is not a response message
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": '{"error": "no such record"}'},
            {"role": "assistant", "content": "ok, nothing found"}]}, "meta": {"tokens": {"in": 12, "out": 5}}})

    agent.answer = answer
    write("transform.py", """
        def reply(data):
            return {"messages": [{"role": "assistant", "content": "ok " + data["data"]["messages"][-1]["content"]}],
                    "usage": {"input_tokens": 3, "output_tokens": 4}}
        """)
    dataset(write, f"""    url: {agent.url}/chat
            response: {{messages: data.messages, usage: {{prompt_tokens: meta.tokens.in, completion_tokens: meta.tokens.out}}}}""",
            data="  - input: hello")
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 0, result.stderr
    output = result.json["items"][0]["turns"][0]["output"]
    assert [m["role"] for m in output] == ["assistant", "tool", "assistant"]
    usage = result.db().execute("SELECT prompt_tokens, completion_tokens, purpose FROM llm_calls").fetchall()
    assert [tuple(r) for r in usage] == [(12, 5, "target")]
    dataset(write, f"""    url: {agent.url}/chat
            response: {{transform: "transform:reply"}}""", data="  - input: hello")
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 0, result.stderr
    assert result.json["items"][0]["turns"][0]["output"] == [{"role": "assistant", "content": "ok ok, nothing found"}]
    assert [tuple(r) for r in result.db().execute("SELECT prompt_tokens, completion_tokens FROM llm_calls "
                                                  "ORDER BY id DESC LIMIT 1")] == [(3, 4)]


@pytest.mark.parametrize(("http", "where", "message"), [
    ('    url: http://127.0.0.1:1/chat\n        body: {message: "{{ input }}", who: "{{ user }}"}', "4:41",
     "template uses 'user', which is not defined"),
    ('    url: http://127.0.0.1:1/chat\n        body: {message: "{{ input "}', "4:21", "template does not parse"),
    ("    url: http://127.0.0.1:1/chat\n        response: {text: 'reply[0'}", "4:22",
     "is not a JMESPath expression: Invalid jmespath expression: Incomplete expression"),
    ("    url: http://127.0.0.1:1/chat\n        response: {text: reply, messages: data}", "4:15",
     "give one of 'text', 'messages' or 'transform', not text and messages"),
    ("    url: http://127.0.0.1:1/chat\n        method: GET\n        body: {q: x}", "5:11", "a GET request has no body"),
    ("    url: http://127.0.0.1:1/chat\n        heders: {A: b}", "4:5", "unknown key 'heders' in the http target "
                                                                     "(did you mean 'headers'?)"),
    ("    url: ftp://127.0.0.1/chat", "3:10", "is not an http:// or https:// URL"),
    ("    url: http://127.0.0.1:1/chat\n        response: {transform: 'nowhere:fn'}", "4:27",
     "response transform 'nowhere:fn' does not import"),
])
def test_mistakes_in_the_http_target_are_validation_errors_with_file_line(
        write: Callable[..., Path], cli: Callable[..., CliResult], http: str, where: str, message: str) -> None:
    dataset(write, http)
    result = cli("run", "d.yaml")
    assert result.code == 2
    assert f"d.yaml:{where}: " in result.stderr and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert not (write("x", "").parent / "evalcli.db").exists()


def test_two_forms_or_none_in_one_target_mapping(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", """
        target: {http: {url: "http://127.0.0.1:1"}, model: openai/x}
        scorers: [{includes: ok}]
        data: [{input: hi}]
        """)
    result = cli("validate", "d.yaml")
    assert result.code == 2 and "d.yaml:1:45: a target is one of 'a2a', 'http', 'mastra', 'model', not several" in result.stderr
    write("d.yaml", """
        target: {url: "http://127.0.0.1:1"}
        scorers: [{includes: ok}]
        data: [{input: hi}]
        """)
    result = cli("validate", "d.yaml")
    assert result.code == 2 and "a target mapping needs one of 'a2a', 'http', 'mastra', 'model'" in result.stderr


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_failed_requests_are_the_conversation_errors_naming_url_status_and_reply(
        write: Callable[..., Path], cli: Callable[..., CliResult], agent: ScriptedAgent) -> None:
    def answer(seen: Seen) -> Answer:
        text = seen.body["input"]
        if text == "500":
            return Answer(500, {"error": f"upstream failed; you sent {seen.headers['X-Token']}", "pad": "x" * 400})
        if text == "slow":
            return Answer(body={"text": "late"}, delay=3)
        if text == "plain":
            return Answer(body="a plain text reply")
        if text == "missing":
            return Answer(body={"answer": "ok"})
        return Answer(body={"text": "ok"})

    agent.answer = answer
    port = _free_port()
    secret_url = agent.url.replace("http://", f"http://alice:{TOKEN}@") + f"/chat?key={TOKEN}&v=2"
    write("down.yaml", f"""
        target: {{http: {{url: "http://127.0.0.1:{port}/chat"}}}}
        scorers: [{{includes: ok}}]
        data: [{{id: refused, input: hello}}]
        """)
    write("d.yaml", f"""
        target:
          http:
            url: "{secret_url}"
            headers: {{X-Token: "Bearer {TOKEN}"}}
            timeout: 0.5
        scorers: [{{includes: ok}}]
        data:
          - {{id: fine, input: fine}}
          - {{id: status, input: "500"}}
          - {{id: timeout, input: slow}}
          - {{id: plain, input: plain}}
          - {{id: missing, input: missing}}
        """)
    result = cli("run", "d.yaml", "--json", "out.json")
    assert result.code == 4, result.stderr
    items = {i["id"]: i for i in json.loads((result.cwd / "out.json").read_text())["items"]}
    shown = agent.url.replace("http://", "http://[redacted]@") + "/chat?key=[redacted]&v=2"
    assert items["fine"]["status"] == "ok"
    status = items["status"]["error"]
    assert status.startswith(f"turn 0: POST {shown} answered 500 Internal Server Error: ")
    assert "you sent [redacted]" in status
    assert status.endswith("...") and len(status.split("answered 500 Internal Server Error: ", 1)[1]) == 303
    assert items["timeout"]["error"] == f"turn 0: POST {shown} did not answer within 0.5s (the target's 'timeout')"
    assert items["plain"]["error"] == (f"turn 0: the reply of POST {shown} cannot be read (text: text): it is not JSON: "
                                       "a plain text reply")
    assert items["missing"]["error"] == (f"turn 0: the reply of POST {shown} cannot be read (text: text): nothing is "
                                         'there: {"answer": "ok"}')
    assert TOKEN not in everything_written(result) and "alice" not in everything_written(result)
    down = cli("run", "down.yaml", "--json", "-")
    assert down.code == 4
    error = down.json["items"][0]["error"]
    assert error.startswith(f"turn 0: POST http://127.0.0.1:{port}/chat: cannot connect (") and "is the server running?" in error


def test_a_request_without_thread_or_history_gets_the_memory_warning(write: Callable[..., Path],
                                                                    cli: Callable[..., CliResult],
                                                                    agent: ScriptedAgent) -> None:
    dataset(write, f"    url: {agent.url}/chat")
    result = cli("run", "d.yaml")
    assert result.code == 0, result.stderr
    assert (f"warning: target http:{agent.url}/chat has no memory: its 1 multi-turn conversation will run, but no "
            "turn can recall the earlier ones (send the conversation's thread or history") in result.stderr
    dataset(write, f'    url: {agent.url}/chat\n        body: {{input: "{{{{ input }}}}", s: "{{{{ thread }}}}"}}')
    assert "has no memory" not in cli("run", "d.yaml").stderr


def test_http_target_from_the_command_line_and_its_options(write: Callable[..., Path], cli: Callable[..., CliResult],
                                                           agent: ScriptedAgent) -> None:
    write("d.yaml", """
        target: agents:echo
        target_options: {memory: {resource: user-7}}
        scorers: [{includes: ok}]
        data: [{input: hello}]
        """)
    result = cli("run", "d.yaml", "--target", f"http:{agent.url}/chat", "--json", "-")
    assert result.code == 0, result.stderr
    assert result.json["target"] == f"http:{agent.url}/chat"
    assert agent.requests[0].body == {"input": "hello"} and agent.requests[0].method == "POST"
    write("d.yaml", """
        target: agents:echo
        target_options: {temperature: 0}
        scorers: [{includes: ok}]
        data: [{input: hello}]
        """)
    result = cli("run", "d.yaml", "--target", f"{agent.url}/chat")
    assert result.code == 2
    assert f"--target {agent.url}/chat: target_options for http:{agent.url}/chat: 'temperature' is not an option " \
           "of the http target" in result.stderr


def test_a_json_reply_python_will_not_read_says_why_not_that_it_is_not_json(
        write: Callable[..., Path], cli: Callable[..., CliResult], agent: ScriptedAgent) -> None:
    # a 5,000-digit integer was "it is not JSON", and JSON nested 3,000 deep "the target raised RecursionError"
    def answer(seen: Seen) -> Answer:
        text = seen.body["input"]
        if text == "long":
            return Answer(body='{"text": ' + "7" * 5000 + "}")
        if text == "deep":
            return Answer(body='{"text": ' + "[" * 3000 + "]" * 3000 + "}")
        return Answer(body={"text": "ok"})

    agent.answer = answer
    write("d.yaml", f"""
        target: {{http: {{url: "{agent.url}/chat"}}}}
        scorers: [{{includes: ok}}]
        data: [{{id: fine, input: fine}}, {{id: long, input: long}}, {{id: deep, input: deep}}]
        """)
    result = cli("run", "d.yaml", "--json", "out.json")
    assert result.code == 4, result.stderr
    items = {i["id"]: i for i in json.loads((result.cwd / "out.json").read_text())["items"]}
    where = f"turn 0: the reply of POST {agent.url}/chat cannot be read (text: text): "
    assert items["fine"]["status"] == "ok"
    assert items["long"]["error"].startswith(f"{where}its JSON cannot be read (ValueError: Exceeds the limit (4300 "
                                             "digits) for integer string conversion"), items["long"]["error"]
    assert items["deep"]["error"].startswith(f"{where}its JSON nests arrays and objects too deeply to be read: "
                                             '{"text": [[['), items["deep"]["error"]
