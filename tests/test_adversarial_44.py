"""The google_adk, llama_index and smolagents adapters (docs/targets/) tried as demanding users would, through the
real CLI against the loopback scripted model: the frameworks' own documented patterns (smolagents' managed agents),
many conversations at once (each one's history its own, read from the server's request log), usage under budgets.
Each test failed before its fix."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, CliResult, run_cli
from tests.framework_agents import KEY, needs
from tests.llm_server import LLMServer, Reply, Request, text, tool_call

pytestmark = pytest.mark.slow

TEAM = '''
import os
from smolagents import OpenAIServerModel, ToolCallingAgent, tool


@tool
def lookup(code: str) -> str:
    """Look a code up.

    Args:
        code: the code.
    """
    return f"code {code} is valid"


model = OpenAIServerModel(model_id="gpt-4o-mini", api_base=os.environ["OPENAI_BASE_URL"],
                          api_key=os.environ["OPENAI_API_KEY"])
# smolagents' multi-agent pattern (its "Orchestrate a multi-agent system" guide): a manager and a managed agent
searcher = ToolCallingAgent(tools=[lookup], model=model, name="searcher", description="Looks codes up.", max_steps=4)
manager = ToolCallingAgent(tools=[], model=model, managed_agents=[searcher], max_steps=4)
'''


def said(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def team_model(request: Request) -> Reply:
    """The manager hands the code to the searcher, the searcher looks it up; each answers what its tool said."""
    messages = request.messages
    tools = [t["function"]["name"] for t in request.body.get("tools") or ()]
    codes = re.findall(r"code (K\d+)", " ".join(said(m) for m in messages))
    last = said(messages[-1])
    valid = re.search(r"code K\d+ is valid", last)
    if valid:
        answer = valid[0] if "lookup" in tools else f"The team says: {valid[0]}"
        return tool_call("final_answer", {"answer": answer}, f"f{len(messages)}")
    if "lookup" in tools:
        return tool_call("lookup", {"code": codes[-1]}, f"l{len(messages)}")
    return tool_call("searcher", {"task": f"check code {codes[-1]}"}, f"s{len(messages)}")


def run(tmp_path: Path, server: LLMServer, module: str, source: str, body: str, *args: str) -> CliResult:
    (tmp_path / f"{module}.py").write_text(source)
    (tmp_path / "d.yaml").write_text(textwrap.dedent(body).lstrip("\n"))
    env = {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": KEY, "NO_PROXY": "127.0.0.1"}
    done = run_cli(["run", str(tmp_path / "d.yaml"), "--db", str(tmp_path / "e.db"), "--json", "-", *args], REPO, env)
    return CliResult(done.code, done.stdout, done.stderr, tmp_path)


def test_a_smolagents_managed_agent_call_is_recorded_with_its_report_and_its_usage(llm_server: LLMServer,
                                                                                   tmp_path: Path) -> None:
    llm_server.responder = team_model
    items = ", ".join(f"{{id: c{n}, input: 'check code K{n}'}}" for n in range(8))
    done = run(tmp_path, llm_server, "team", TEAM, f"""
        target: team:manager
        gates: [{{called_tool: searcher}}, {{called_tool: lookup}}, no_tool_errors]
        data: [{items}]
        """, "--concurrency", "8")
    # before: 1, the managed agent's call was a tool error ("the tool was not called") though it answered
    assert done.code == 0, done.stdout + done.stderr
    for item in done.json["items"]:
        n = item["id"][1:]
        output = item["turns"][0]["output"]
        [report] = [m for m in output if m["role"] == "tool" and m["name"] == "searcher"]
        assert report.get("is_error") is not True and f"code K{n} is valid" in report["content"]
        assert report["handoff"] is True  # an agent's report, not a tool's result: under --hermetic too
        assert output[-1]["content"] == f"The team says: code K{n} is valid"
    for request in llm_server.requests:  # each conversation's history is its own, the managed agent's too
        assert len(set(re.findall(r"K\d+", str(request.messages)))) == 1
    # every model call is the target's: the managed agent's too (before: 16 of the 32)
    rows = done.db("e.db").execute("SELECT item_index, COUNT(*) FROM llm_calls WHERE purpose = 'target' "
                                   "GROUP BY item_index").fetchall()
    assert {tuple(r) for r in rows} == {(i, 4) for i in range(8)}
    assert len(llm_server.requests) == 32


def test_a_smolagents_managed_agents_model_calls_count_against_the_target_budget(llm_server: LLMServer,
                                                                                 tmp_path: Path) -> None:
    llm_server.responder = team_model
    done = run(tmp_path, llm_server, "team", TEAM, """
        target: team:manager
        gates: [{called_tool: searcher}]
        data: [{id: a, input: check code K1}, {id: b, input: check code K2}, {id: c, input: check code K3}]
        """, "--concurrency", "1", "--max-tokens", "target=50")
    # each conversation makes 4 calls of 18 tokens: the first spends the budget (before: only the manager's 2 counted,
    # and the second conversation played too)
    assert done.code == 5, done.stdout + done.stderr
    assert [i["status"] for i in done.json["items"]] == ["ok", "limited"]
    assert len(llm_server.requests) == 4



def test_a_llama_index_agent_whose_server_reports_no_usage_is_told_not_silently_unbudgeted(
        llm_server: LLMServer, tmp_path: Path) -> None:
    from tests.framework_venvs import venv_or_skip
    from tests.test_adapter_llama_index import model
    from tests.test_adapter_llama_index import run as run_in_venv

    python = venv_or_skip("llama-index")

    def openai_like(request: Request) -> Reply:  # as OpenAI streams: no usage unless stream_options asks for it
        reply = model(request)
        body = request.body
        if body.get("stream") and not (body.get("stream_options") or {}).get("include_usage"):
            assert isinstance(reply.body, dict)
            reply.body = {k: v for k, v in reply.body.items() if k != "usage"}
        return reply

    llm_server.responder = openai_like
    done = run_in_venv(python, tmp_path, llm_server, """
        target: tests.app_agents.llama_index_apps:agent
        gates: [{called_tool: search_web}]
        data: [{id: sf, input: 'What is the weather in San Francisco?'}]
        """, "--max-tokens", "target=10")
    assert done.code == 0, done.stderr
    # before: nothing said; the budget of 10 tokens "held" over two uncounted model calls
    assert "2 model calls reported no token usage, so their tokens are not counted" in done.stderr, done.stderr
    assert "'stream_options': {'include_usage': True}" in done.stderr


ADK_TEAM = '''
import os
from google.adk.agents import Agent
from google.adk.models.lite_llm import LiteLlm
from google.adk.tools.agent_tool import AgentTool


def lookup(code: str) -> dict:
    """Look a code up.

    Args:
        code: the code.
    """
    return {"status": f"code {code} is valid"}


def model() -> LiteLlm:
    return LiteLlm(model="openai/gpt-4o-mini", api_base=os.environ["OPENAI_BASE_URL"],
                   api_key=os.environ["OPENAI_API_KEY"])


# ADK's agent-as-a-tool pattern (AgentTool), as adk-samples' agents call their specialists
searcher = Agent(name="searcher", model=model(), description="Looks codes up.", instruction="Look codes up.",
                 tools=[lookup])
root_agent = Agent(name="manager", model=model(), description="Manages.", instruction="Ask the searcher.",
                   tools=[AgentTool(agent=searcher)])
'''


def adk_team_model(request: Request) -> Reply:
    """The manager asks its searcher tool, the searcher looks the code up; each repeats what its tool said."""
    messages = request.messages
    tools = [t["function"]["name"] for t in request.body.get("tools") or ()]
    codes = re.findall(r"code (K\d+)", " ".join(said(m) for m in messages))
    last = messages[-1]
    if last["role"] == "tool":
        valid = re.search(r"code K\d+ is valid", said(last))
        return text(("The team says: " if "searcher" in tools else "") + (valid[0] if valid else said(last)))
    if "lookup" in tools:
        return tool_call("lookup", {"code": codes[-1]}, f"l{len(messages)}")
    return tool_call("searcher", {"request": f"check code {codes[-1]}"}, f"s{len(messages)}")


@needs("google.adk")
def test_an_adk_agent_tools_agent_has_its_tools_mocked_and_its_model_calls_counted(llm_server: LLMServer,
                                                                                  tmp_path: Path) -> None:
    llm_server.responder = adk_team_model
    done = run(tmp_path, llm_server, "adk_team", ADK_TEAM, """
        target: adk_team:root_agent
        gates: [{called_tool: searcher}, {called_tool: lookup}]
        tools:
          lookup: {returns: {status: code K9 is valid}}   # the specialist's tool (before: "the agent has no tool")
        data: [{id: a, input: check code K1}, {id: b, input: check code K2}]
        """, "--concurrency", "2")
    assert done.code == 0, done.stdout + done.stderr
    for item in done.json["items"]:
        output = item["turns"][0]["output"]
        [looked] = [m for m in output if m["role"] == "tool" and m["name"] == "lookup"]
        assert looked["source"] == "mock" and "K9" in looked["content"]
        assert output[-1]["content"] == "The team says: code K9 is valid"
    # the specialist's model calls are the target's too (before: only the manager's 2 of each conversation's 4)
    rows = done.db("e.db").execute("SELECT item_index, COUNT(*), SUM(prompt_tokens) FROM llm_calls "
                                   "WHERE purpose = 'target' GROUP BY item_index").fetchall()
    assert [tuple(r) for r in rows] == [(0, 4, 44), (1, 4, 44)]
    assert len(llm_server.requests) == 8


LLAMA_TEAM = '''
import os
from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent
from llama_index.llms.openai_like import OpenAILike


async def lookup(code: str) -> str:
    """Look a code up."""
    return f"code {code} is valid"


llm = OpenAILike(model="gpt-4o-mini", api_base=os.environ["OPENAI_BASE_URL"], api_key=os.environ["OPENAI_API_KEY"],
                 is_chat_model=True, is_function_calling_model=True, max_retries=0)
# run-llama's multi-agent AgentWorkflow: the root agent hands code questions to a specialist
front = FunctionAgent(name="front", description="Talks to users.", system_prompt="Hand code questions to checker.",
                      tools=[], llm=llm, can_handoff_to=["checker"])
checker = FunctionAgent(name="checker", description="Checks codes.", system_prompt="Check codes.", tools=[lookup],
                        llm=llm)
workflow = AgentWorkflow(agents=[front, checker], root_agent="front")
'''


def llama_team_model(request: Request) -> Reply:
    """The front agent hands off; the checker looks the code up and says what it found."""
    messages = request.messages
    tools = [t["function"]["name"] for t in request.body.get("tools") or ()]
    codes = re.findall(r"code (K\d+)", " ".join(said(m) for m in messages))
    last = messages[-1]
    if "lookup" in tools:
        if last["role"] == "tool" and "is valid" in said(last):
            return text("Checked: " + said(last))
        return tool_call("lookup", {"code": codes[-1]}, f"l{len(messages)}")
    return tool_call("handoff", {"to_agent": "checker", "reason": "a code"}, f"h{len(messages)}")


def test_a_llama_index_handoff_is_no_live_tool_under_hermetic(llm_server: LLMServer, tmp_path: Path) -> None:
    from tests.framework_venvs import venv_or_skip
    from tests.test_adapter_llama_index import run as run_in_venv

    python = venv_or_skip("llama-index")
    llm_server.responder = llama_team_model
    (tmp_path / "llama_team.py").write_text(LLAMA_TEAM)
    done = run_in_venv(python, tmp_path, llm_server, """
        target: llama_team:workflow
        gates: [{called_tool: lookup}]
        tools: {lookup: {returns: code K7 is valid}}
        data: [{id: a, input: check code K1}]
        """, "--hermetic")
    # before: 4, "--hermetic: the tool handoff ran live" though a handoff runs no tool
    assert done.code == 0, done.stdout + done.stderr
    output = done.json["items"][0]["turns"][0]["output"]
    [handoff] = [m for m in output if m.get("name") == "handoff"]
    assert handoff["handoff"] is True and "source" not in handoff
    assert output[-1]["content"] == "Checked: code K7 is valid"
