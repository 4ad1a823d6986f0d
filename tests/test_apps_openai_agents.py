"""An Agents SDK customer-service triage agent with two handoffs, run the way its app runs it (docs/targets/frameworks.md): a typed
context from YAML (the on_handoff that reads it works), later turns continue with the agent that answered, every
assistant message names its agent, ``answered_by``, structured final outputs."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, CliResult, run_cli
from tests.llm_server import LLMServer, Reply, Request, completion, text

KEY = "sk-test-not-a-real-key-0123456789"


def call(name: str, arguments: dict[str, Any], call_id: str) -> Reply:
    return Reply(body=completion(None, tool_calls=[{"id": call_id, "type": "function",
                                                   "function": {"name": name, "arguments": json.dumps(arguments)}}]))


def tools_of(request: Request) -> list[str]:
    return [t["function"]["name"] for t in request.body.get("tools") or ()]


def airline_model(request: Request) -> Reply:
    """Plays each agent from the tools it is offered: the triage hands over, the seat agent moves the seat, the FAQ
    agent answers in JSON (its output type)."""
    messages, tools = request.messages, tools_of(request)
    said = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    last = messages[-1]
    n = len(messages)
    if "update_seat" in tools:
        if last["role"] == "tool" and last["tool_call_id"].startswith("seat"):
            return text(f"Done: {last['content']}.")
        return call("update_seat", {"seat": said.split()[-1].rstrip(".")}, f"seat{n}")
    if "transfer_to_seat_booking_agent" in tools and "seat" in said.lower():
        return call("transfer_to_seat_booking_agent", {}, f"h{n}")
    if "transfer_to_faq_agent" in tools and "?" in said:
        return call("transfer_to_faq_agent", {}, f"h{n}")
    if request.body.get("response_format"):  # the FAQ agent's structured output
        return text(json.dumps({"topic": "baggage", "answer": "One bag of 23 kg."}))
    return text("How can I help?")


def run(tmp_path: Path, server: LLMServer, body: str, command: str = "run") -> CliResult:
    path = tmp_path / "d.yaml"
    path.write_text(textwrap.dedent(body).lstrip("\n"))
    db = ["--db", str(tmp_path / "e.db"), "--json", "-"] if command == "run" else []
    return run_cli([command, str(path), *db], REPO, {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": KEY,
                                                      "OPENAI_AGENTS_DISABLE_TRACING": "1", "NO_PROXY": "127.0.0.1",
                                                      "EVALCLI_TEST_RECORD": str(tmp_path / "record.jsonl")})


DATASET = """
    target: tests.app_agents.airline_openai_agents:triage_agent
    target_options:
      context: {{passenger: Ada, confirmation: ABC123}}
      {continue_with}
    data:
      - id: seats
        turns:
          - input: I want to change my seat to 12A
            gates: [{{called_tool: transfer_to_seat_booking_agent}}, {{answered_by: Seat Booking Agent}}]
          - input: Actually make my seat 14C
            gates: [{{did_not_call: transfer_to_seat_booking_agent}}, {{answered_by: Seat Booking Agent}},
                    {{includes: FLT-ABC123}}]
      - id: faq
        target_options: {{context: {{passenger: Bo, confirmation: XYZ}}}}
        turns:
          - input: How much baggage can I bring?
            gates: [{{answered_by: FAQ Agent}}, {{structured_output: {{expected: {{topic: baggage}}}}}}]
    """


def test_later_turns_continue_with_the_agent_that_answered_and_each_message_names_its_agent(
        llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = airline_model
    done = run(tmp_path, llm_server, DATASET.format(continue_with=""))
    assert done.code == 0, done.stderr[-3000:]
    items = {item["id"]: item for item in done.json["items"]}
    first, second = items["seats"]["turns"]
    assert [(m["role"], m.get("name")) for m in first["output"]] == [
        ("assistant", "Triage Agent"), ("tool", None), ("assistant", "Seat Booking Agent"), ("tool", None),
        ("assistant", "Seat Booking Agent")]
    assert first["output"][-1]["content"] == "Done: Ada is now in 12A on FLT-ABC123."  # on_handoff read the context
    assert second["output"][-1]["content"] == "Done: Ada is now in 14C on FLT-ABC123."
    # what the model was sent on turn 2: the seat agent's request (its tools), never the triage's
    turn2 = [r for r in llm_server.requests if any(m["role"] == "user" and m["content"] == "Actually make my seat 14C"
                                                   for m in r.messages)]
    assert turn2 and all("update_seat" in tools_of(r) for r in turn2)
    faq = items["faq"]["turns"][0]
    assert faq["structured"] == {"topic": "baggage", "answer": "One bag of 23 kg."}
    assert faq["output"][-1]["name"] == "FAQ Agent"
    shown = run_cli(["show", "latest", "seats", "--db", str(tmp_path / "e.db")], REPO)
    assert "Assistant (Seat Booking Agent): Done: Ada is now in 12A on FLT-ABC123." in shown.stdout
    records = [json.loads(line) for line in (tmp_path / "record.jsonl").read_text().splitlines()]
    assert [(r["passenger"], r["flight"], r["seat"]) for r in records] == [("Ada", "FLT-ABC123", "12A"),
                                                                          ("Ada", "FLT-ABC123", "14C")]


def test_starting_agent_restarts_every_turn_at_the_target(llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = airline_model
    done = run(tmp_path, llm_server, DATASET.format(continue_with="continue_with: starting_agent"))
    assert done.code == 1, done.stderr[-3000:]
    seats = done.json["items"][0]
    gates = seats["turns"][1]["outcomes"]["gates"]
    assert gates["did_not_call(transfer_to_seat_booking_agent)"]["passed"] is False  # the triage handed over again
    assert gates["answered_by(Seat Booking Agent)"]["passed"] is True


def test_answered_by_reads_the_last_answer_with_text(llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = airline_model
    done = run(tmp_path, llm_server, """
        target: tests.app_agents.airline_openai_agents:triage_agent
        target_options: {context: {passenger: Ada, confirmation: A1}}
        gates:
          - answered_by: Triage Agent
        data: [{id: seat, input: change my seat to 3B}]
        """)
    assert done.code == 1
    reason = done.json["items"][0]["outcomes"]["gates"]["answered_by(Triage Agent)"]["reason"]
    assert reason == ("the last answer (\"Done: Ada is now in 3B on FLT-A1.\") was written by 'Seat Booking Agent', "
                      "which is not 'Triage Agent'")


@pytest.mark.parametrize(("body", "message"), [
    ("target_options: {context: {passenger: Ada}}", "'context' does not fit the agent's context type AirlineContext "
                                                   "(confirmation: Field required)"),
    ("target_options: {continue_with: first_agent}", "'continue_with' is one of: last_agent, starting_agent"),
    ("target: tests.app_agents.airline_openai_agents:connected_agent\ntarget_options: {context: {conn: x}}",
     "the agent's context type ConnectedContext cannot be built from YAML"),
    ("data: [{input: hi, target_options: {deps: 1}}]", "'deps' is not an option of the Agents SDK's Runner.run"),
])
def test_a_context_or_option_that_does_not_fit_is_a_validation_error(body: str, message: str, llm_server: LLMServer,
                                                                    tmp_path: Path) -> None:
    head = {"target": "target: tests.app_agents.airline_openai_agents:triage_agent",
            "data": "data: [{input: hi}]"}
    lines = body.splitlines()
    for line in lines:
        head[line.split(":")[0]] = line
    done = run(tmp_path, llm_server, "\n".join([*head.values(), "gates: [used_no_tools]"]) + "\n", "validate")
    assert done.code == 2, done.stderr
    assert message in done.stderr and "d.yaml:" in done.stderr and "Traceback" not in done.stderr
    if "cannot be built" in message:
        assert "target_options.setup: module:function" in done.stderr
