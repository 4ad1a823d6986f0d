"""A PydanticAI support agent run the way its app runs it (docs/targets/frameworks.md): deps holding a live sqlite3 connection made
by a setup per conversation, a structured output with an output validator (retries counted), typed deps from YAML
(a fresh object per conversation), and the validation errors and warnings around deps."""

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


def env(server: LLMServer, tmp_path: Path) -> dict[str, str]:
    return {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": KEY, "EVALCLI_TEST_RECORD": str(tmp_path / "record.jsonl"),
            "NO_PROXY": "127.0.0.1"}


def records(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "record.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def tools_of(request: Request) -> list[str]:
    return [t["function"]["name"] for t in request.body.get("tools") or ()]


def call(name: str, arguments: dict[str, Any], call_id: str) -> Reply:
    return Reply(body=completion(None, tool_calls=[{"id": call_id, "type": "function",
                                                   "function": {"name": name, "arguments": json.dumps(arguments)}}]))


def support_model(request: Request) -> Reply:
    """Asks for the balance, then answers with a structured output the validator rejects once, then a good one."""
    messages = request.messages
    last = messages[-1]
    if last["role"] == "user":
        return call("customer_balance", {"include_pending": False}, f"bal{len(messages)}")
    turn = messages[max(i for i, m in enumerate(messages) if m["role"] == "user"):]
    finals = [c for m in turn for c in m.get("tool_calls") or () if c["function"]["name"] == "final_result"]
    balance = next(m["content"] for m in turn if m["role"] == "tool")
    risk = 8 if finals else 2  # the first answer blocks the card at a low risk: the output validator says retry
    return call("final_result", {"advice": f"Seen: {balance}", "block_card": True, "risk": risk}, f"fin{len(messages)}")


def run(tmp_path: Path, server: LLMServer, body: str, *args: str) -> CliResult:
    path = tmp_path / "d.yaml"
    path.write_text(textwrap.dedent(body).lstrip("\n"))
    command = args[0] if args else "run"
    db = ["--db", str(tmp_path / "e.db")] if command == "run" else []
    return run_cli([command, str(path), *db, *args[1:]], REPO, env(server, tmp_path))


SUPPORT = """
    target: tests.app_agents.support_pydantic_ai:agent
    target_options:
      setup: tests.app_agents.support_pydantic_ai:{setup}
    gates:
      - called_tool: customer_balance
      - structured_output: {{expected: {{block_card: true, risk: 8}}, schema: {{type: object, required: [advice]}}}}
    data:
      - id: ada
        tags: [bank]
        metadata: {{customer_id: 123, name: Ada, balance: 123.45}}
        ground_truth: {{risk: high}}
        input: I lost my card!
      - id: bo
        metadata: {{customer_id: 7, name: Bo, balance: 9.5}}
        turns:
          - input: What is my balance?
          - input: And now?
            gates: [{{structured_output: {{expected: {{advice: "Seen: Bo has $9.50"}}}}}}]
    """


@pytest.mark.parametrize("setup", ["bank", "async_bank"])
def test_deps_with_a_live_connection_come_from_a_setup_per_conversation(setup: str, llm_server: LLMServer,
                                                                        tmp_path: Path) -> None:
    llm_server.responder = support_model
    done = run(tmp_path, llm_server, SUPPORT.format(setup=setup), "run", "--json", "-")
    assert done.code == 0, done.stderr[-3000:]
    items = {item["id"]: item for item in done.json["items"]}
    [turn] = items["ada"]["turns"]
    assert turn["structured"] == {"advice": "Seen: Ada has $123.45", "block_card": True, "risk": 8}
    assert turn["output_retries"] == 1  # the validator rejected the first answer
    assert turn["output"][-1] == {"role": "assistant", "content": json.dumps(turn["structured"])}
    assert [t["output_retries"] for t in items["bo"]["turns"]] == [1, 1]
    # what the model was sent: each conversation's own customer, from its own database
    sent = [m["content"] for r in llm_server.requests for m in r.messages if m["role"] == "tool"]
    assert "Ada has $123.45" in sent and "Bo has $9.50" in sent
    seen = records(tmp_path)
    setups = {r["item"]: r for r in seen if r["event"] == "setup"}
    assert setups["ada"]["thread"] == items["ada"]["thread_id"] and setups["ada"]["resource"] is None
    assert setups["ada"]["tags"] == ["bank"] and setups["ada"]["ground_truth"] == {"risk": "high"}
    cleanups = {r["item"]: r["audited"] for r in seen if r["event"] == "cleanup"}
    assert cleanups == {"ada": 1, "bo": 2}  # the tool's writes, seen by the cleanup before it closed the database
    conn = sqlite3.connect(tmp_path / "e.db")
    conn.row_factory = sqlite3.Row
    rows = conn.execute("SELECT item_id, turn_index, structured, output_retries FROM turns ORDER BY item_index, "
                        "turn_index").fetchall()
    assert [(r["item_id"], r["output_retries"]) for r in rows] == [("ada", 1), ("bo", 1), ("bo", 1)]
    assert json.loads(rows[0]["structured"])["risk"] == 8
    shown = run_cli(["show", "latest", "ada", "--db", str(tmp_path / "e.db")], REPO)
    assert "structured output" in shown.stdout and '"block_card": true' in shown.stdout
    assert "output retries: 1" in shown.stdout


def test_structured_output_fails_and_is_not_scorable_as_it_should(llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = support_model
    done = run(tmp_path, llm_server, """
        target: tests.app_agents.support_pydantic_ai:agent
        target_options: {setup: "tests.app_agents.support_pydantic_ai:bank"}
        gates:
          - scorer: {structured_output: {expected: {risk: 3}}}
            id: wrong-risk
          - scorer: {structured_output: {schema: {type: object, required: [missing_key]}}}
            id: wrong-shape
          - scorer: {structured_output: {expected: {risk: 8, advice: "Seen: Ada has $123.45"}, mode: exact}}
            id: exact-missing-a-key
        data:
          - {id: ada, metadata: {customer_id: 1, name: Ada, balance: 123.45}, input: Help}
        """, "run", "--json", "-")
    assert done.code == 1, done.stderr[-3000:]
    outcomes = done.json["items"][0]["outcomes"]["gates"]
    assert outcomes["wrong-risk"]["score"] == 0 and "risk: 8 (expected 3)" in outcomes["wrong-risk"]["reason"]
    assert outcomes["wrong-shape"]["score"] == 0 and "'missing_key' is a required property" in \
        outcomes["wrong-shape"]["reason"]
    assert outcomes["exact-missing-a-key"]["score"] == 0 and "unexpected block_card" in \
        outcomes["exact-missing-a-key"]["reason"]


def test_deps_written_in_yaml_become_a_new_object_for_every_conversation(llm_server: LLMServer,
                                                                         tmp_path: Path) -> None:
    def counting(request: Request) -> Reply:
        last = request.messages[-1]
        return call("count", {}, f"c{len(request.messages)}") if last["role"] == "user" else text(last["content"])

    llm_server.responder = counting
    items = "\n".join(f"  - {{id: c{i}, inputs: [one, two]}}" for i in range(4))
    done = run(tmp_path, llm_server, "target: tests.app_agents.support_pydantic_ai:counter_agent\n"
                                     "target_options: {deps: {name: shared}}\nconcurrency: 4\n"
                                     f"gates: [{{called_tool: count}}]\ndata:\n{items}\n", "run", "--json", "-")
    assert done.code == 0, done.stderr[-3000:]
    for item in done.json["items"]:
        assert [t["output"][-1]["content"] for t in item["turns"]] == ["shared call 1", "shared call 2"]
    counts = [r for r in records(tmp_path) if r["event"] == "count"]
    assert len({r["deps"] for r in counts}) == 4  # one deps object per conversation, shared by its turns


def test_deps_yaml_cannot_build_is_a_validation_error_that_says_to_use_setup(tmp_path: Path,
                                                                             llm_server: LLMServer) -> None:
    done = run(tmp_path, llm_server, """
        target: tests.app_agents.support_pydantic_ai:agent
        target_options:
          deps: {customer_id: 1, db: "sqlite:///bank.db"}
        gates: [used_no_tools]
        data: [{input: hi}]
        """, "validate")
    assert done.code == 2, done.stderr
    assert "d.yaml:2:1:" in done.stderr and "the agent's deps_type SupportDeps cannot be built from YAML" in done.stderr
    assert "target_options.setup: module:function" in done.stderr and "Traceback" not in done.stderr
    done = run(tmp_path, llm_server, """
        target: tests.app_agents.support_pydantic_ai:counter_agent
        gates: [used_no_tools]
        data:
          - {input: hi, target_options: {deps: {calls: not-a-number}}}
        """, "validate")
    assert done.code == 2 and "d.yaml:4:" in done.stderr and "'deps' does not fit the agent's deps_type Counter" in \
        done.stderr


def test_an_agent_that_declares_deps_and_gets_none_is_a_warning(tmp_path: Path, llm_server: LLMServer) -> None:
    body = """
        target: tests.app_agents.support_pydantic_ai:counter_agent
        gates: [used_no_tools]
        data:
          - {id: bare, input: hi}
          - {id: given, input: hi, target_options: {deps: {name: x}}}
        """
    done = run(tmp_path, llm_server, body, "validate")
    assert done.code == 0, done.stderr
    assert ("declares deps_type Counter but 1 of 2 conversations gets no deps (they run with deps=None)"
            in done.stderr)
    llm_server.responder = lambda request: text("hello")
    done = run(tmp_path, llm_server, body, "run")
    assert done.code == 0 and done.stderr.count("declares deps_type Counter") == 1
    quiet = run(tmp_path, llm_server, body.replace("target_options: {deps: {name: x}}",
                                                   "target_options: {deps: {name: x}}")
                .replace("{id: bare, input: hi}", "{id: bare, input: hi, target_options: {deps: {name: y}}}"),
                "validate")
    assert quiet.code == 0 and "deps_type" not in quiet.stderr
