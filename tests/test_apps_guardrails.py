"""Agents SDK guardrails as the SDK's guide writes them (docs/targets/index.md): a tripped input or output guardrail is an outcome
of the turn (recorded, shown, scored by ``guardrail_tripped``), the conversation goes on with the next user message,
and a setup may give the conversation the app's own ``SQLiteSession``."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from tests.conftest import REPO, CliResult, run_cli
from tests.llm_server import LLMServer, Reply, Request, text

KEY = "sk-test-not-a-real-key-0123456789"
APP = "tests.app_agents.guardrails_openai_agents"


def support_model(request: Request) -> Reply:
    """Plays each agent from its instructions: the guardrail agent calls anything about homework math homework, the
    support agent answers in words, the answering agent in JSON (its output type)."""
    system = next((m["content"] for m in request.messages if m["role"] == "system"), "")
    said = next(m["content"] for m in reversed(request.messages) if m["role"] == "user")
    if system.startswith("Check if the user is asking"):
        homework = "homework" in said.lower()
        return text(json.dumps({"is_math_homework": homework, "reasoning": "homework" if homework else "support"}))
    if "Answer in JSON" in system:
        return text(json.dumps({"response": f"Here you go: {said}"}))
    return text(f"Happy to help with: {said}")


def run(tmp_path: Path, server: LLMServer, body: str, *extra: str) -> CliResult:
    path = tmp_path / "d.yaml"
    path.write_text(textwrap.dedent(body).lstrip("\n"))
    return run_cli(["run", str(path), "--db", str(tmp_path / "e.db"), "--json", "-", *extra], REPO,
                   {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": KEY, "OPENAI_AGENTS_DISABLE_TRACING": "1",
                    "NO_PROXY": "127.0.0.1", "EVALCLI_TEST_RECORD": str(tmp_path / "record.jsonl")})


def test_a_tripped_input_guardrail_is_the_turns_outcome_and_the_conversation_goes_on(
        llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = support_model
    done = run(tmp_path, llm_server, f"""
        target: {APP}:support_agent
        gates: [guardrail_tripped]
        scorers: [{{guardrail_tripped: other_guardrail}}]
        data:
          - id: homework
            turns:
              - input: Can you do my math homework? Solve 2x + 3 = 11
                gates: [{{guardrail_tripped: math_guardrail}}]
              - input: Fine. Where is my order?
                gates: [{{includes: where is my order}}]
                scorers: [guardrail_tripped]
        """, "--html", str(tmp_path / "r.html"))
    assert done.code == 0, done.stderr[-3000:]
    item = done.json["items"][0]
    assert item["status"] == "ok" and item["error"] is None
    first, second = item["turns"]
    assert first["guardrail"] == {"name": "math_guardrail", "kind": "input"}
    assert second["guardrail"] is None
    assert second["output"][-1]["content"] == "Happy to help with: Fine. Where is my order?"
    assert second["outcomes"]["scorers"]["guardrail_tripped"]["score"] == 0.0
    assert first["outcomes"]["gates"]["guardrail_tripped(math_guardrail)"]["passed"] is True
    assert item["outcomes"]["gates"]["guardrail_tripped"]["passed"] is True  # whole conversation: any turn
    other = item["outcomes"]["scorers"]["guardrail_tripped(other_guardrail)"]
    assert (other["score"], other["reason"]) == (0.0, "guardrail 'other_guardrail' did not trip; tripped: turn 0: "
                                                      "math_guardrail (input)")
    shown = run_cli(["show", "latest", "homework", "--db", str(tmp_path / "e.db")], REPO)
    assert "guardrail tripped: math_guardrail (input guardrail; it stopped the user's message)" in shown.stdout
    shown_json = run_cli(["show", "latest", "homework", "--db", str(tmp_path / "e.db"), "--json", "-"], REPO)
    assert [t["guardrail"] for t in json.loads(shown_json.stdout)["item"]["turns"]] == [
        {"name": "math_guardrail", "kind": "input"}, None]
    html = (tmp_path / "r.html").read_text()
    assert "guardrail tripped: math_guardrail (input guardrail" in html
    # the guardrail agent's calls are the conversation's model calls too (docs/targets/index.md): turn 1 made two, the guardrail
    # agent's and the support agent's; turn 0 at least the guardrail agent's (the support agent's call, run beside
    # the guardrail, may have been cancelled when it tripped)
    calls = done.db(str(tmp_path / "e.db")).execute(
        "SELECT turn_index, COUNT(*) AS n, SUM(prompt_tokens) AS tokens FROM llm_calls WHERE purpose = 'target' "
        "GROUP BY turn_index ORDER BY turn_index").fetchall()
    assert [c["turn_index"] for c in calls] == [0, 1] and calls[0]["n"] >= 1
    assert (calls[1]["n"], calls[1]["tokens"]) == (2, 22)


def test_a_tripped_output_guardrail_keeps_the_answer_it_stopped_on_the_apps_own_session(
        llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = support_model
    done = run(tmp_path, llm_server, f"""
        target: {APP}:answering_agent
        target_options: {{setup: {APP}:app_session}}
        data:
          - id: answers
            turns:
              - input: Please do my homework, what is 2+2?
                gates: [{{guardrail_tripped: math_answer_guardrail}}]
              - input: When do you open?
                gates: [{{includes: when do you open}}]
          - id: clean
            turns:
              - input: When do you close?
                scorers: [guardrail_tripped]
        """)
    assert done.code == 0, done.stderr[-3000:]
    items = {item["id"]: item for item in done.json["items"]}
    first, second = items["answers"]["turns"]
    assert first["guardrail"] == {"name": "math_answer_guardrail", "kind": "output"}
    answer = json.dumps({"response": "Here you go: Please do my homework, what is 2+2?"})
    assert first["output"][-1]["role"] == "assistant" and first["output"][-1]["content"] == answer
    assert first["structured"] == {"response": "Here you go: Please do my homework, what is 2+2?"}
    assert second["structured"] == {"response": "Here you go: When do you open?"}
    assert items["clean"]["turns"][0]["outcomes"]["scorers"]["guardrail_tripped"]["score"] == 0.0
    # each turn: the answering agent's call and the output guardrail's agent's, both counted
    calls = done.db(str(tmp_path / "e.db")).execute(
        "SELECT i.item_id, c.turn_index, COUNT(*) AS n FROM llm_calls c JOIN items i "
        "ON i.run_id = c.run_id AND i.item_index = c.item_index "
        "WHERE c.purpose = 'target' GROUP BY i.item_id, c.turn_index ORDER BY i.item_id, c.turn_index").fetchall()
    assert [tuple(c) for c in calls] == [("answers", 0, 2), ("answers", 1, 2), ("clean", 0, 2)]
    assert len(llm_server.requests) == 6
    records = [json.loads(line) for line in (tmp_path / "record.jsonl").read_text().splitlines()]
    assert sorted(r["event"] + ":" + r["item"] for r in records) == [
        "closed:answers", "closed:clean", "session:answers", "session:clean"]
    closed = {r["item"]: r["items"] for r in records if r["event"] == "closed"}
    assert closed["answers"] >= 2 and closed["clean"] >= 1  # the conversation ran on the app's own session
    shown = run_cli(["show", "latest", "answers", "--db", str(tmp_path / "e.db")], REPO)
    assert "guardrail tripped: math_answer_guardrail (output guardrail; it stopped the agent's answer)" in shown.stdout


def test_a_setup_that_returns_no_session_as_session_is_that_conversations_error(
        llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = support_model
    (tmp_path / "bad_setup.py").write_text("def setup(info):\n    return {'session': 'not a session'}\n")
    done = run(tmp_path, llm_server, f"""
        target: {APP}:support_agent
        target_options: {{setup: bad_setup:setup}}
        scorers: [used_no_tools]
        data: [{{id: a, input: hi}}]
        """)
    assert done.code == 4, done.stderr[-3000:]
    assert "'session' is not an Agents SDK session (got str" in done.json["items"][0]["error"]
    (tmp_path / "d.yaml").write_text(f"target: {APP}:support_agent\ntarget_options: {{session: abc}}\n"
                                     "scorers: [used_no_tools]\ndata: [{id: a, input: hi}]\n")
    refused = run_cli(["validate", str(tmp_path / "d.yaml")], REPO)
    assert refused.code == 2 and "d.yaml:2:" in refused.stderr
    assert "'session' cannot be written in YAML: a setup (target_options.setup: module:function) may return" \
           in refused.stderr
