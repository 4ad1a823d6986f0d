"""Export to a real OTLP receiver (docs/otel.md): a run with a captured instrumented agent sent with
``--otel-endpoint`` to Arize Phoenix (``tests/phoenix_server.py``), read back through Phoenix's API: the ids, the
nesting, every evaluation event, nothing secret; and Phoenix's own export read back with ``data_file:``."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO, CliResult, run_cli
from tests.llm_server import LLMServer, scripted_weather
from tests.phoenix_server import REQUIRE, PhoenixServer, Unavailable

KEY = "sk-test-not-a-real-key-0123456789"


@pytest.fixture
def phoenix(tmp_path: Path):  # type: ignore[no-untyped-def]
    work = tmp_path / "phoenix"
    work.mkdir()
    try:
        with PhoenixServer(work) as server:
            yield server
    except Unavailable as why:
        if os.environ.get(REQUIRE):
            pytest.fail(f"{REQUIRE} is set and Phoenix is unavailable: {why}")
        pytest.skip(str(why))


def cli(tmp_path: Path, env: dict[str, str], body: str, *args: str) -> CliResult:
    path = tmp_path / "d.yaml"
    path.write_text(textwrap.dedent(body).lstrip("\n"))
    done = run_cli(["run", str(path), "--db", str(tmp_path / "e.db"), *args], REPO,
                   {"OPENAI_API_KEY": KEY, "NO_PROXY": "127.0.0.1", **env})
    return CliResult(done.code, done.stdout, done.stderr, tmp_path)


def test_a_run_sent_to_phoenix_reads_back_with_its_nesting_and_evaluations(phoenix: PhoenixServer,
                                                                            llm_server: LLMServer,
                                                                            tmp_path: Path) -> None:
    llm_server.responder = scripted_weather
    done = cli(tmp_path, {"OPENAI_BASE_URL": llm_server.url, "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix.url}, f"""
        target: tests.otel_agents.pydantic_spans:ask
        gates: [{{called_tool: get_weather}}]
        scorers: [no_tool_errors]
        data:
          - id: london
            input: 'What is the weather in London? My key is {KEY}'
          - id: atlantis
            input: 'What is the weather in Atlantis?'
        """, "--otel-endpoint", "-")
    assert done.code == 0, done.stderr
    spans = phoenix.spans(wanted=13)["data"]  # every span: run, 2 conversations, 2 turns, 2 agent runs, 4 model calls, 2 tools
    assert KEY not in json.dumps(spans)
    by_id = {s["context"]["span_id"]: s for s in spans}
    assert len({s["context"]["trace_id"] for s in spans}) == 1
    [run] = [s for s in spans if s["name"].startswith("evalcli.run")]
    conversations = {s["attributes"]["evalcli.item.id"]: s for s in spans
                     if s["name"].startswith("evalcli.conversation")}
    assert set(conversations) == {"london", "atlantis"}
    for item, conversation in conversations.items():
        assert conversation["parent_id"] == run["context"]["span_id"]
        [turn] = [s for s in spans if s["name"] == "evalcli.turn 0" and s["attributes"]["evalcli.item.id"] == item]
        assert turn["parent_id"] == conversation["context"]["span_id"]
        [agent] = [s for s in spans if s["name"].startswith("invoke_agent") and s["parent_id"] ==
                   turn["context"]["span_id"]]
        [tool] = [s for s in spans if s["name"] == "execute_tool get_weather" and by_id[s["parent_id"]] is agent]
        assert item.title() in json.dumps(tool["attributes"])
        events = {e["attributes"]["gen_ai.evaluation.name"]: e["attributes"] for e in conversation["events"]
                  if e["name"] == "gen_ai.evaluation.result"}
        assert set(events) == {"called_tool(get_weather)", "no_tool_errors"}
        assert events["called_tool(get_weather)"]["gen_ai.evaluation.score.label"] == "pass"
    atlantis = {e["attributes"]["gen_ai.evaluation.name"]: e["attributes"] for e in conversations["atlantis"]["events"]}
    assert atlantis["no_tool_errors"]["gen_ai.evaluation.score.value"] == 0.0
    assert atlantis["no_tool_errors"]["gen_ai.evaluation.score.label"] == "fail"

    (tmp_path / "traces.json").write_text(json.dumps({"data": spans}))
    again = cli(tmp_path, {}, "gates: [{called_tool: get_weather}]\ndata_file: traces.json\n", "--json", "-")
    assert again.code == 0, again.stderr
    items = {i["id"]: i for i in again.json["items"]}
    assert set(items) == {conversations["london"]["attributes"]["gen_ai.conversation.id"],
                          conversations["atlantis"]["attributes"]["gen_ai.conversation.id"]}
