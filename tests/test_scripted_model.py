"""The scripted model behind ``examples/frameworks/`` (docs/targets/frameworks.md): both OpenAI APIs, so the frameworks'
default model
classes run offline unchanged; and the example datasets that show setup, handoffs and an interrupt."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

from examples.frameworks.scripted_model import answer, chat_messages, serve
from tests.conftest import REPO, run_cli
from tests.llm_server import LLMServer, scripted_weather

KEY = "sk-test-not-a-real-key-0123456789"
EXAMPLES = {"pydantic_ai_home": "/v1/responses", "openai_agents_travel": "/v1/responses",
            "langgraph_trip": "/v1/chat/completions"}


@pytest.fixture
def scripted_model() -> Iterator[str]:
    """The example's own server, as ``python -m examples.frameworks.scripted_model`` runs it."""
    server = serve(0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def env(url: str) -> dict[str, str]:
    return {"OPENAI_BASE_URL": url, "OPENAI_API_KEY": KEY, "OPENAI_AGENTS_DISABLE_TRACING": "1",
            "EVALCLI_AGENT_MODEL": "scripted", "NO_PROXY": "127.0.0.1"}


def test_both_apis_answer_in_their_own_format() -> None:
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    chat = ChatCompletion.model_validate(answer("/v1/chat/completions", {"model": "m", "messages": ask}))
    [called] = chat.choices[0].message.tool_calls or []
    assert called.function.name == "get_weather"  # type: ignore[union-attr]
    body = {"model": "m", "instructions": "Be brief.", "tools": [{"type": "function", "name": "get_weather"}],
            "input": [{"role": "user", "content": [{"type": "input_text", "text": "What is the weather in Paris?"}]}]}
    first = Response.model_validate(answer("/v1/responses", body))
    [call] = first.output
    assert call.type == "function_call" and json.loads(call.arguments) == {"city": "Paris", "day": "today"}
    body["input"] += [{"type": "function_call", "call_id": call.call_id, "name": "get_weather", "arguments": call.arguments},
                      {"type": "function_call_output", "call_id": call.call_id,
                       "output": json.dumps({"condition": "sunny", "temperature_f": 68})}]
    assert chat_messages(body)[0] == {"role": "system", "content": "Be brief."}
    second = Response.model_validate(answer("/v1/responses", body))
    assert second.output_text == "Today in Paris: sunny, 68°F."


@pytest.mark.parametrize("target", ["pydantic_agent", "sdk_agent"])
def test_default_model_classes_run_offline_unchanged(target: str, scripted_model: str, tmp_path: Path) -> None:
    path = tmp_path / "d.yaml"
    path.write_text(f"target: tests.app_agents.default_models:{target}\ngates: [{{called_tool: get_weather}}]\n"
                    "data:\n  - {id: paris, inputs: ['What is the weather in Paris?', 'What about tomorrow?']}\n")
    done = run_cli(["run", str(path), "--db", str(tmp_path / "e.db"), "--json", "-"], REPO, env(scripted_model))
    assert done.code == 0, done.stderr[-3000:]
    [item] = done.json["items"]
    assert [t["output"][-1]["content"] for t in item["turns"]] == ["Today in Paris: sunny, 68°F.",
                                                                  "Tomorrow in Paris: sunny, 70°F."]


@pytest.mark.parametrize("example", list(EXAMPLES))
def test_the_examples_of_setup_handoffs_and_interrupts_pass(example: str, llm_server: LLMServer,
                                                            tmp_path: Path) -> None:
    llm_server.responder = scripted_weather
    done = run_cli(["run", f"datasets/frameworks/{example}.yaml", "--db", str(tmp_path / "e.db"), "--json", "-"], REPO,
                   env(llm_server.url))
    assert done.code == 0, done.stderr[-3000:]
    report = done.json
    assert report["verdict"] == "passed" and report["summary"]["errors"] == 0
    assert {r.path for r in llm_server.requests} == {EXAMPLES[example]}
    turns = [t for item in report["items"] for t in item["turns"]]
    if example == "pydantic_ai_home":
        assert all(t["structured"]["city"] in ("London", "Tokyo") for t in turns)
        assert report["items"][0]["metadata"] == {"user": "ada", "home": "London"}
    elif example == "openai_agents_travel":
        names = {m.get("name") for t in turns for m in t["output"] if m["role"] == "assistant"}
        assert names == {"Triage Agent", "Weather Agent", "Booking Agent"}
    else:
        assert turns[0]["interrupt"] == "Plan a trip to Paris? (yes/no)" and turns[1]["resume"] == "yes"


def test_the_examples_run_against_the_standalone_server(scripted_model: str, tmp_path: Path) -> None:
    paths = [f"datasets/frameworks/{example}.yaml" for example in EXAMPLES]
    done = run_cli(["run", *paths, "--db", str(tmp_path / "e.db"), "--json", "-"], REPO, env(scripted_model))
    assert done.code == 0, done.stderr[-3000:]
    assert [run["verdict"] for run in done.json["runs"]] == ["passed"] * 3
