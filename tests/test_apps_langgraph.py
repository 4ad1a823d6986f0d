"""LangGraph graphs run the way their apps run them (docs/targets/frameworks.md): interrupts and resume on a custom-state graph
whose
tool returns ``Command(update=...)``, a ``create_react_agent`` whose state requires ``user_id`` (``input``, the
input-schema warning, ``config.configurable.user_id`` as the resource), and the functional API's ``@entrypoint``."""

from __future__ import annotations

import json
import sqlite3
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, CliResult, run_cli
from tests.llm_server import LLMServer, Reply, Request, completion, text

KEY = "sk-test-not-a-real-key-0123456789"
ASKED = {"question": "Is this correct?", "name": "LangGraph", "birthday": "Jan 17, 2024"}


def call(name: str, arguments: dict[str, Any], call_id: str) -> Reply:
    return Reply(body=completion(None, tool_calls=[{"id": call_id, "type": "function",
                                                   "function": {"name": name, "arguments": json.dumps(arguments)}}]))


def graph_model(request: Request) -> Reply:
    """Asks a human to check the release date when the user asks for it; answers from tool results; else echoes."""
    messages = request.messages
    last = messages[-1]
    if last["role"] == "tool":
        return text(f"Noted: {last['content']}")
    if "released" in str(last.get("content")):
        return call("human_assistance", {"name": "LangGraph", "birthday": "Jan 17, 2024"}, f"ask{len(messages)}")
    if "orders" in str(last.get("content")):
        return call("my_orders", {}, f"orders{len(messages)}")
    said = [m["content"] for m in messages if m["role"] == "user"]
    return text(f"You said: {' | '.join(said)}")


def run(tmp_path: Path, server: LLMServer, body: str, command: str = "run") -> CliResult:
    path = tmp_path / "d.yaml"
    path.write_text(textwrap.dedent(body).lstrip("\n"))
    db = ["--db", str(tmp_path / "e.db"), "--json", "-"] if command == "run" else []
    return run_cli([command, str(path), *db], REPO, {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": KEY,
                                                      "NO_PROXY": "127.0.0.1",
                                                      "EVALCLI_TEST_RECORD": str(tmp_path / "record.jsonl")})


def records(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "record.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


INTERRUPTS = """
    target: tests.app_agents.langgraph_apps:state_graph
    gates: [no_tool_errors]
    scorers: [{python: "turn_scorer:seen"}]
    data:
      - id: scripted
        turns:
          - input: When was LangGraph released?
            gates: [no_tool_errors, {called_tool: human_assistance}, {includes: "Is this correct?"}]
          - input: yes, that is right
            gates: [{includes: "Noted: Correct"}, {structured_output: {expected: {name: LangGraph}}}]
      - id: resume-value
        turns:
          - input: When was LangGraph released?
          - resume: {correct: no, name: LangGraph 1.0}
            gates: [{structured_output: {expected: {name: LangGraph 1.0, birthday: "Jan 17, 2024"}, mode: exact}}]
    """


TURN_SCORER = '''
from evalcli import Score


def seen(run):
    """What a custom scorer receives of each turn."""
    return Score(1.0, repr([(t.interrupt, t.resume, t.structured) for t in run.turns]))
'''


def test_an_interrupt_is_recorded_and_the_next_message_resumes_it(llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = graph_model
    (tmp_path / "turn_scorer.py").write_text(TURN_SCORER)
    done = run(tmp_path, llm_server, INTERRUPTS)
    assert done.code == 0, done.stderr[-3000:]
    items = {item["id"]: item for item in done.json["items"]}
    assert items["scripted"]["outcomes"]["scorers"]["python(turn_scorer:seen)"]["reason"] == repr(
        [(ASKED, None, None), (None, "yes, that is right", {"name": "LangGraph", "birthday": "Jan 17, 2024"})])
    asked, answered = items["scripted"]["turns"]
    assert asked["interrupt"] == ASKED and asked["resume"] is None and asked["structured"] is None
    [call_message, interrupt_message] = asked["output"]
    assert call_message["tool_calls"][0]["function"]["name"] == "human_assistance"
    assert interrupt_message == {"role": "assistant", "content": json.dumps(ASKED), "interrupt": True}
    assert asked["outcomes"]["gates"]["no_tool_errors"]["score"] == 1  # the pending call is not a tool error
    assert answered["interrupt"] is None and answered["resume"] == "yes, that is right"
    assert answered["input"] == "yes, that is right"
    pending = call_message["tool_calls"][0]["id"]
    assert [m.get("tool_call_id") for m in answered["output"] if m["role"] == "tool"] == [pending]
    assert answered["structured"] == {"name": "LangGraph", "birthday": "Jan 17, 2024"}
    resumed = [r["answer"] for r in records(tmp_path) if r["event"] == "resumed"]
    assert sorted(resumed, key=str) == sorted(["yes, that is right", {"correct": False, "name": "LangGraph 1.0"}],
                                              key=str)  # YAML `no` is false
    second = items["resume-value"]["turns"][1]
    assert second["resume"] == {"correct": False, "name": "LangGraph 1.0"}
    assert second["input"] == json.dumps({"correct": False, "name": "LangGraph 1.0"})
    conn = sqlite3.connect(tmp_path / "e.db")
    rows = conn.execute("SELECT interrupt, resume, structured FROM turns WHERE item_id = 'scripted' "
                        "ORDER BY turn_index").fetchall()
    assert json.loads(rows[0][0]) == ASKED and rows[0][1] is None and rows[0][2] is None
    assert rows[1][0] is None and json.loads(rows[1][1]) == "yes, that is right"
    shown = run_cli(["show", "latest", "scripted", "--db", str(tmp_path / "e.db")], REPO)
    assert "Assistant (interrupt): " in shown.stdout and "User (resumes the interrupt): yes, that is right" in \
        shown.stdout


def test_resume_with_no_interrupt_pending_is_the_conversations_error(llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = graph_model
    done = run(tmp_path, llm_server, """
        target: tests.app_agents.langgraph_apps:state_graph
        gates: [no_tool_errors]
        data:
          - id: nothing-pending
            turns: [{input: Hello}, {resume: yes}]
        """)
    assert done.code == 4, done.stderr[-3000:]
    [item] = done.json["items"]
    assert item["error"] == "turn 1: 'resume' was given, but no interrupt is pending (the previous turn did not end " \
                            "in interrupt())"


@pytest.mark.parametrize(("target", "turns", "message"), [
    ("langgraph_apps:state_graph", "[{input: a}, {input: b, resume: yes}]", "turn 1 gives both 'input' and 'resume'"),
    ("langgraph_apps:state_graph", "[{resume: yes}]", "turn 0 cannot resume"),
    ("langgraph_apps:state_graph", "[{input: a}, {resume: null}]", "turn 1: 'resume' needs a value"),
    ("support_pydantic_ai:counter_agent", "[{input: a}, {resume: yes}]",
     "turn 1 gives 'resume', but a pydantic_ai target never waits on an interrupt"),
])
def test_a_resume_that_cannot_work_is_a_validation_error(target: str, turns: str, message: str,
                                                         llm_server: LLMServer, tmp_path: Path) -> None:
    done = run(tmp_path, llm_server, f"target: tests.app_agents.{target}\ngates: [used_no_tools]\n"
                                     f"data:\n  - turns: {turns}\n", "validate")
    assert done.code == 2, done.stderr
    assert message in done.stderr and "d.yaml:4:" in done.stderr and "Traceback" not in done.stderr


def test_state_keys_the_input_lacks_are_a_warning_not_an_error(llm_server: LLMServer, tmp_path: Path) -> None:
    body = """
        target: tests.app_agents.langgraph_apps:react_agent
        {options}
        gates: [{{called_tool: my_orders}}]
        data:
          - {{id: u, input: Show my orders, metadata: {{user: meta-user}}}}
        """
    bare = run(tmp_path, llm_server, body.format(options=""), "validate")
    assert bare.code == 0, bare.stderr
    assert "the graph's input schema has 'user_id', which no conversation supplies" in bare.stderr
    given = run(tmp_path, llm_server, body.format(options="target_options: {input: {user_id: u-7}}"), "validate")
    assert given.code == 0 and "input schema" not in given.stderr
    llm_server.responder = graph_model
    done = run(tmp_path, llm_server, body.format(options="target_options: {input: {user_id: u-7}}"))
    assert done.code == 0, done.stderr[-3000:]
    assert "input schema" not in done.stderr
    assert done.json["items"][0]["turns"][0]["structured"] == {"user_id": "u-7"}
    seen = [r for r in records(tmp_path) if r["event"] == "orders"]
    assert seen[-1]["user_id"] == "u-7"  # the tool read it from the graph's state
    done = run(tmp_path, llm_server, body.format(options="target_options: {setup: "
                                                         "'tests.app_agents.langgraph_apps:shop_user'}"))
    assert done.code == 0 and "input schema" not in done.stderr, done.stderr[-3000:]
    assert [r for r in records(tmp_path) if r["event"] == "orders"][-1]["user_id"] == "meta-user"
    warned = run(tmp_path, llm_server, body.format(options=""))
    assert warned.code == 0 and warned.stderr.count("which no conversation supplies") == 1


def test_a_users_own_user_id_is_the_resource_and_thread_id_is_refused(llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = graph_model
    done = run(tmp_path, llm_server, """
        target: tests.app_agents.langgraph_apps:react_agent
        target_options:
          input: {user_id: u-1}
          config: {configurable: {user_id: customer-9}, recursion_limit: 12}
        gates: [{called_tool: my_orders}]
        data:
          - {id: one, inputs: [Show my orders, Again orders]}
          - {id: two, input: Show my orders, target_options: {config: {configurable: {user_id: customer-3}}}}
        """)
    assert done.code == 0, done.stderr[-3000:]
    items = {item["id"]: item for item in done.json["items"]}
    assert items["one"]["resource_id"] == "customer-9" and items["two"]["resource_id"] == "customer-3"
    assert {r["configured"] for r in records(tmp_path) if r["event"] == "orders"} == {"customer-9", "customer-3"}
    refused = run(tmp_path, llm_server, """
        target: tests.app_agents.langgraph_apps:react_agent
        target_options: {input: {user_id: u}, config: {configurable: {thread_id: mine}}}
        gates: [used_no_tools]
        data: [{input: hi}]
        """, "validate")
    assert refused.code == 2 and "d.yaml:2:1:" in refused.stderr
    assert "'config.configurable.thread_id' cannot be set: evalcli gives every conversation a thread of its own" in \
        refused.stderr


def test_the_functional_api_gets_a_list_of_messages_and_keeps_its_thread(llm_server: LLMServer,
                                                                         tmp_path: Path) -> None:
    llm_server.responder = graph_model
    done = run(tmp_path, llm_server, """
        target: tests.app_agents.langgraph_apps:functional
        gates: [used_no_tools]
        data:
          - {id: a, inputs: [one, two]}
          - {id: b, inputs: [three]}
        """)
    assert done.code == 0, done.stderr[-3000:]
    items = {item["id"]: item for item in done.json["items"]}
    assert [t["output"] for t in items["a"]["turns"]] == [
        [{"role": "assistant", "content": "You said: one"}], [{"role": "assistant", "content": "You said: one | two"}]]
    assert items["b"]["turns"][0]["output"][0]["content"] == "You said: three"  # its own thread
    assert all(t["structured"] is None for t in items["a"]["turns"])


def test_a_simulated_users_next_message_resumes_the_interrupt(llm_server: LLMServer, tmp_path: Path) -> None:
    from tests.sim_helpers import serve, sim_env

    def user(heard: str | None, request: Request) -> str:
        if heard is not None and "Is this correct?" in heard:
            return "yes, all correct"
        return "###STOP###"

    serve(llm_server, user, other=graph_model)
    path = tmp_path / "d.yaml"
    path.write_text("target: tests.app_agents.langgraph_apps:state_graph\ngates: [no_tool_errors]\ndata:\n"
                    "  - id: sim\n    simulate: {goal: check the release date, opening: 'When was LangGraph released?'}\n")
    done = run_cli(["run", str(path), "--db", str(tmp_path / "e.db"), "--json", "-"], REPO,
                   {**sim_env(llm_server), "OPENAI_BASE_URL": llm_server.url,
                    "EVALCLI_TEST_RECORD": str(tmp_path / "record.jsonl")})
    assert done.code == 0, done.stderr[-3000:]
    first, second = done.json["items"][0]["turns"][:2]
    assert first["interrupt"] == ASKED and second["simulated"] is True
    assert second["resume"] == "yes, all correct" and second["output"][-1]["content"] == "Noted: Correct"


def orders_model(request: Request) -> Reply:
    """Looks the order up, then refunds it (the refund tool raises inside the subgraph)."""
    last = request.messages[-1]
    if last["role"] == "tool" and "shipped" in last["content"]:
        return call("refund_order", {"order_id": "A7"}, "refund1")
    if last["role"] == "tool":
        return text(f"Noted: {last['content']}")
    return call("lookup_order", {"order_id": "A7"}, "lookup1")


def test_a_tool_raising_inside_a_subgraph_keeps_the_messages_made_before_it(llm_server: LLMServer,
                                                                            tmp_path: Path) -> None:
    llm_server.responder = orders_model
    done = run(tmp_path, llm_server, """
        target: tests.app_agents.langgraph_apps:support_graph
        gates: [no_tool_errors]
        data:
          - id: refund
            input: Please refund order A7
        """)
    assert done.code == 4, done.stderr[-3000:]
    [item] = done.json["items"]
    assert item["error"].startswith("turn 0: the target raised RuntimeError: the refunds service is down")
    [turn] = item["turns"]
    calls = [(c["id"], c["function"]["name"]) for m in turn["output"] for c in m.get("tool_calls") or ()]
    assert calls == [("lookup1", "lookup_order"), ("refund1", "refund_order")]
    results = [(m["tool_call_id"], m["content"]) for m in turn["output"] if m["role"] == "tool"]
    assert results == [("lookup1", "order A7: shipped")]
    assert not any(m["role"] == "user" for m in turn["output"])


def test_resume_after_turns_with_nothing_pending_errors_that_conversation_only(llm_server: LLMServer,
                                                                                tmp_path: Path) -> None:
    llm_server.responder = graph_model
    done = run(tmp_path, llm_server, """
        target: tests.app_agents.langgraph_apps:state_graph
        concurrency: 3
        scorers: [no_tool_errors]
        data:
          - id: after-two-turns
            turns: [{input: Hello}, {input: "How are you?"}, {resume: yes}, {input: never sent}]
          - id: after-a-resumed-interrupt
            turns: [{input: "When was LangGraph released?"}, {resume: "yes"}, {resume: again}]
          - id: beside
            turns: [{input: Hello}, {input: Bye}]
        """)
    assert done.code == 4, done.stderr[-3000:]
    items = {item["id"]: item for item in done.json["items"]}
    message = "'resume' was given, but no interrupt is pending (the previous turn did not end in interrupt())"
    assert items["after-two-turns"]["error"] == f"turn 2: {message}"
    assert [t["input"] for t in items["after-two-turns"]["turns"]][:2] == ["Hello", "How are you?"]
    assert len(items["after-two-turns"]["turns"]) == 3  # the turn after the error is never sent
    assert items["after-a-resumed-interrupt"]["error"] == f"turn 2: {message}"
    assert items["after-a-resumed-interrupt"]["turns"][1]["output"][-1]["content"] == "Noted: Correct"
    beside = items["beside"]
    assert beside["status"] == "ok" and beside["turns"][1]["output"][-1]["content"] == "You said: Hello | Bye"
    assert done.json["summary"]["errors"] == 2
