"""Adversarial try 71 (docs/targets/frameworks.md, "What every framework adapter does"): what a framework agent did
is what is recorded. Real agents of each framework, pointed at the loopback scripted model that records every
request; the real CLI, real SQLite files. Each test failed on the main this branch started from.

- LangGraph: a model reply calling a tool with arguments that are not JSON (LangChain's ``invalid_tool_calls``) was
  recorded as an empty assistant message: the call the model made was missing, and ``no_tool_errors`` scored 1.
- Agents SDK: a model reply calling a tool the agent does not have ends the run (``ModelBehaviorError``); the turn's
  record held no message at all, though the model's reply (and its usage) had come back.
- Google ADK with a model that reuses call ids (``call_0`` in every reply, as some local servers do): a failed call
  marked every later result of that id ``is_error``, a successful call included.
- LlamaIndex with such a model: the second call (same id) was dropped as a repeat of the first, and its result then
  showed up twice: as a result answering no call, and as an "observed" call of its own.
- (xfail) Agents SDK with such a model: the SDK ends the run (``ModelBehaviorError``) on the second reply before its
  hooks see it: that reply is neither recorded nor counted, though the server answered it with usage.
- PydanticAI with ``end_strategy="early"``: a tool call the model made beside the final result, which PydanticAI
  never ran, was recorded as a successful result ("Tool not executed - ..."): ``no_tool_errors`` scored 1.
- PydanticAI: such arguments were recorded as ``{"INVALID_JSON": "..."}``, PydanticAI's own wrapping, never what the
  model sent.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliResult, run_cli
from tests.framework_agents import KEY, framework_python, needs
from tests.llm_server import LLMServer, Reply, completion, text

AGENTS = '''
import os
from pathlib import Path

URL, KEY = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
LOG = Path(__file__).parent / "tools.log"


def lookup(key: str) -> str:
    """Look a key up."""
    with LOG.open("a") as log:
        log.write(key + "\\n")
    return f"value of {key}"


def pydantic_ai_agent():
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    return Agent(OpenAIChatModel("m", provider=OpenAIProvider(base_url=URL, api_key=KEY)), tools=[lookup])


def pydantic_ai_early_agent():
    from pydantic import BaseModel
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    class Answer(BaseModel):
        text: str

    return Agent(OpenAIChatModel("m", provider=OpenAIProvider(base_url=URL, api_key=KEY)), tools=[lookup],
                 output_type=Answer, end_strategy="early")


def openai_agents_agent():
    from agents import Agent, OpenAIChatCompletionsModel, function_tool
    from openai import AsyncOpenAI

    model = OpenAIChatCompletionsModel(model="m", openai_client=AsyncOpenAI(base_url=URL, api_key=KEY, max_retries=0))
    return Agent(name="a", model=model, tools=[function_tool(lookup)])


def langgraph_agent():
    from langchain.agents import create_agent
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    return create_agent(ChatOpenAI(model="m", base_url=URL, api_key=KEY, use_responses_api=False, max_retries=0),
                        tools=[tool(lookup)])


def google_adk_agent():
    from google.adk.agents import LlmAgent
    from google.adk.models.lite_llm import LiteLlm

    return LlmAgent(name="a", model=LiteLlm(model="openai/m", api_base=URL, api_key=KEY), tools=[lookup])


def llama_index_agent():
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.llms.openai_like import OpenAILike

    llm = OpenAILike(model="m", api_base=URL, api_key=KEY, is_chat_model=True, is_function_calling_model=True,
                     max_retries=0)
    return FunctionAgent(tools=[lookup], llm=llm)


agent = globals()[os.environ["FRAMEWORK"] + "_agent"]()
'''

DATASET = """
target: fw_agent:agent
scorers: [no_tool_errors]
data:
  - {id: a, input: go}
"""


def call(name: str, arguments: str, call_id: str = "c1") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def run(framework: str, server: LLMServer, folder: Path, python: Path | None = None) -> tuple[CliResult, dict[str, Any]]:
    (folder / "fw_agent.py").write_text(AGENTS)
    (folder / "d.yaml").write_text(DATASET)
    env = {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": KEY, "FRAMEWORK": framework,
           "OPENAI_AGENTS_DISABLE_TRACING": "1", "NO_PROXY": "127.0.0.1"}
    done = run_cli(["run", "d.yaml", "--db", "e.db", "--json", "-"], folder, env, python=python)
    [item] = done.json["items"]
    return done, item


def tools_ran(folder: Path) -> list[str]:
    log = folder / "tools.log"
    return log.read_text().split() if log.exists() else []


def target_calls(folder: Path) -> int:
    with sqlite3.connect(folder / "e.db") as db:
        return int(db.execute("SELECT count(*) FROM llm_calls WHERE purpose = 'target'").fetchone()[0])


@needs("langgraph")
def test_langgraph_records_a_call_whose_arguments_are_not_json(llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.push(Reply(body=completion(None, tool_calls=[call("lookup", '{"key": "a"')])), text("done"))
    done, item = run("langgraph", llm_server, tmp_path)
    assert done.code == 0, done.stderr
    assert len(llm_server.requests) == 1 and tools_ran(tmp_path) == []  # the graph stops: no tool ran
    [reply] = item["turns"][0]["output"]
    assert reply["tool_calls"] == [call("lookup", '{"key": "a"')]  # the call the model made, as it wrote it
    assert item["scores"]["no_tool_errors"] == 0  # a call with no result is a failed call


@needs("agents")
def test_agents_sdk_keeps_the_reply_calling_a_tool_it_does_not_have(llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.push(Reply(body=completion("checking", tool_calls=[call("nosuch", '{"key": "a"}')])))
    done, item = run("openai_agents", llm_server, tmp_path)
    assert done.code == 4, done.stderr
    assert "ModelBehaviorError" in item["error"] and "nosuch" in item["error"]
    assert len(llm_server.requests) == 1 and target_calls(tmp_path) == 1 and tools_ran(tmp_path) == []
    [reply] = item["turns"][0]["output"]
    assert reply["role"] == "assistant" and reply["content"] == "checking"
    assert reply["tool_calls"] == [call("nosuch", '{"key": "a"}')]


@needs("pydantic_ai")
def test_pydantic_ai_records_unparsable_arguments_as_the_model_wrote_them(llm_server: LLMServer,
                                                                          tmp_path: Path) -> None:
    llm_server.push(Reply(body=completion(None, tool_calls=[call("lookup", '{"key": "a"')])), text("done"))
    done, item = run("pydantic_ai", llm_server, tmp_path)
    assert done.code == 0, done.stderr
    assert len(llm_server.requests) == 2 and target_calls(tmp_path) == 2 and tools_ran(tmp_path) == []
    called, failed, answer = item["turns"][0]["output"]
    assert called["tool_calls"] == [call("lookup", '{"key": "a"')]
    assert failed["tool_call_id"] == "c1" and failed["is_error"] is True
    assert answer == {"role": "assistant", "content": "done"}
    sent = json.loads(llm_server.requests[1].messages[1]["tool_calls"][0]["function"]["arguments"])
    assert sent == {"INVALID_JSON": '{"key": "a"'}  # what PydanticAI sent back, not what the model wrote


@needs("pydantic_ai")
def test_pydantic_ai_call_skipped_by_an_early_final_result_is_no_success(llm_server: LLMServer,
                                                                          tmp_path: Path) -> None:
    llm_server.push(Reply(body=completion(None, tool_calls=[call("final_result", '{"text": "hi"}', "c0"),
                                                            call("lookup", '{"key": "a"}', "c1")])))
    done, item = run("pydantic_ai_early", llm_server, tmp_path)
    assert done.code == 0, done.stderr
    assert len(llm_server.requests) == 1 and tools_ran(tmp_path) == []  # PydanticAI never ran lookup
    called, skipped, answer = item["turns"][0]["output"]
    assert called["tool_calls"] == [call("lookup", '{"key":"a"}')]
    assert skipped["tool_call_id"] == "c1" and skipped["is_error"] is True and skipped["skipped"] is True
    assert json.loads(answer["content"]) == {"text": "hi"}
    assert item["scores"]["no_tool_errors"] == 0


def reused_ids(first: str) -> list[Reply]:
    """A model numbering its calls per reply: the failed call and the next one are both ``call_0``."""
    return [Reply(body=completion(None, tool_calls=[call(first, '{"key": "crash"}', "call_0")])),
            Reply(body=completion(None, tool_calls=[call("lookup", '{"key": "a"}', "call_0")])), text("done")]


@needs("google.adk")
def test_google_adk_failure_marks_only_its_own_result_when_ids_repeat(llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.push(*reused_ids("nosuch"))
    done, item = run("google_adk", llm_server, tmp_path)
    assert done.code == 0, done.stderr
    assert len(llm_server.requests) == 3 and target_calls(tmp_path) == 3 and tools_ran(tmp_path) == ["a"]
    results = [m for m in item["turns"][0]["output"] if m["role"] == "tool"]
    assert [m["name"] for m in results] == ["nosuch", "lookup"]
    assert results[0]["is_error"] is True
    assert "is_error" not in results[1] and "value of a" in results[1]["content"]  # the call that succeeded


def test_llama_index_records_each_call_once_when_ids_repeat(llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.push(*reused_ids("nosuch"))
    done, item = run("llama_index", llm_server, tmp_path, framework_python("llama_index"))
    assert done.code == 0, done.stderr
    assert len(llm_server.requests) == 3 and target_calls(tmp_path) == 3 and tools_ran(tmp_path) == ["a"]
    output = item["turns"][0]["output"]
    calls = [(c["id"], c["function"]["name"]) for m in output for c in m.get("tool_calls") or ()]
    assert calls == [("call_0", "nosuch"), ("call_0", "lookup")]  # each call the model made, once
    assert [(m["name"], bool(m.get("is_error"))) for m in output if m["role"] == "tool"] == [("nosuch", True),
                                                                                              ("lookup", False)]


@needs("agents")
@pytest.mark.xfail(strict=True, reason="the Agents SDK raises on a reused call id before on_llm_end: the reply that "
                   "reused it reaches no hook, so evalcli neither records it nor counts its usage")
def test_agents_sdk_reply_reusing_a_call_id_is_recorded_and_counted(llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.push(*reused_ids("lookup"))
    done, item = run("openai_agents", llm_server, tmp_path)
    assert done.code == 4 and "reused" in item["error"]
    assert target_calls(tmp_path) == len(llm_server.requests) == 2
    calls = [c["function"]["arguments"] for m in item["turns"][0]["output"] for c in m.get("tool_calls") or ()]
    assert calls == ['{"key": "crash"}', '{"key": "a"}']
