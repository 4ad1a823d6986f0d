"""What a framework agent did is what is recorded (docs/targets/index.md): its model calls counted, PydanticAI retries, Agents SDK
guardrails and sessions, LangGraph subgraphs and resumes. The real CLI against the loopback scripted model, each agent
written as its framework's docs write it."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.framework_agents import KEY
from tests.llm_server import LLMServer, Reply, Request, text, tool_call

FRAMEWORKS = ["pydantic_ai", "openai_agents", "langgraph"]
MODEL = "gpt-4o-mini"
"""A model litellm's table prices (the scripted server answers as whichever model was asked for)."""

AGENTS = f'''
import os
from typing import Any

URL, KEY = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]


def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {{key}}"


def pydantic_ai_agent() -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    return Agent(OpenAIChatModel("{MODEL}", provider=OpenAIProvider(base_url=URL, api_key=KEY)), tools=[lookup])


def openai_agents_agent() -> Any:
    from agents import Agent, OpenAIChatCompletionsModel, function_tool
    from openai import AsyncOpenAI

    model = OpenAIChatCompletionsModel(model="{MODEL}", openai_client=AsyncOpenAI(base_url=URL, api_key=KEY))
    return Agent(name="a", model=model, tools=[function_tool(lookup)])


def langgraph_agent() -> Any:
    from langchain.agents import create_agent
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    return create_agent(ChatOpenAI(model="{MODEL}", base_url=URL, api_key=KEY, use_responses_api=False),
                        tools=[tool(lookup)])


agent = globals()[os.environ["FRAMEWORK"] + "_agent"]()
'''


def env(server: LLMServer, **extra: str) -> dict[str, str]:
    return {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": KEY, "OPENAI_AGENTS_DISABLE_TRACING": "1",
            "NO_PROXY": "127.0.0.1", **extra}


def write(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(body).lstrip("\n"))
    return path


def look_up_then_answer(request: Request) -> Reply:
    """Calls ``lookup`` once, then answers from its result."""
    last = request.messages[-1]
    if last.get("role") == "tool":
        return text(f"Found: {last.get('content')}", prompt_tokens=20, completion_tokens=5)
    return Reply(body={**tool_call("lookup", {"key": "k1"}).body, "usage": {  # type: ignore[dict-item]
        "prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}})


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_framework_agents_model_calls_are_counted_as_the_targets_usage(framework: str, llm_server: LLMServer,
                                                                        tmp_path: Path) -> None:
    from evalcli.llm import price_of

    llm_server.responder = look_up_then_answer
    write(tmp_path, "fw_agent.py", AGENTS)
    data = write(tmp_path, "d.yaml", """
        target: fw_agent:agent
        concurrency: 1
        gates: [{called_tool: lookup}]
        data:
          - {id: one, input: look k1 up}
          - {id: two, inputs: [look k1 up, and again]}
        """)
    runs = [run_cli(["run", str(data), "--db", str(tmp_path / "e.db"), "--json", str(tmp_path / f"{n}.json")],
                    tmp_path, {**env(llm_server), "FRAMEWORK": framework}) for n in (1, 2)]
    assert all(r.code == 0 for r in runs), runs[0].stderr
    db = runs[0].db(str(tmp_path / "e.db"))
    calls = db.execute("SELECT purpose, model, prompt_tokens, completion_tokens, cost, turn_index FROM llm_calls "
                       "WHERE run_id = (SELECT MIN(id) FROM runs) ORDER BY id").fetchall()
    assert len(calls) == 6 and {c["purpose"] for c in calls} == {"target"}  # 3 turns, 2 model calls each
    assert {c["model"] for c in calls} == {MODEL}
    assert sorted((c["prompt_tokens"], c["completion_tokens"]) for c in calls) == [(10, 3)] * 3 + [(20, 5)] * 3
    assert sorted(c["turn_index"] for c in calls) == [0, 0, 0, 0, 1, 1]
    expected = 3 * (price_of(MODEL, {"prompt_tokens": 10, "completion_tokens": 3})
                    + price_of(MODEL, {"prompt_tokens": 20, "completion_tokens": 5}))
    assert expected > 0 and sum(c["cost"] for c in calls) == pytest.approx(expected)
    assert "tokens: 90 in / 24 out" in runs[0].stdout, runs[0].stdout
    target = json.loads((tmp_path / "1.json").read_text())["usage"]["purposes"]["target"]
    assert (target["calls"], target["prompt_tokens"], target["completion_tokens"]) == (6, 90, 24)
    assert target["cost"] == pytest.approx(expected)
    compare = run_cli(["compare", "--db", str(tmp_path / "e.db"), *[f"{row['id']}" for row in
                       db.execute("SELECT id FROM runs ORDER BY id")]], tmp_path)
    assert compare.code == 0, compare.stderr
    line = next(line for line in compare.stdout.splitlines() if "target tokens" in line)
    assert line.count("114") == 2, compare.stdout
    cost_line = next(line for line in compare.stdout.splitlines() if "target cost" in line)
    assert cost_line.count(f"${expected:.4f}") == 2, compare.stdout


RETRYING = '''
import os
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

agent = Agent(OpenAIChatModel("m", provider=OpenAIProvider(base_url=os.environ["OPENAI_BASE_URL"],
                                                           api_key=os.environ["OPENAI_API_KEY"])))


@agent.tool_plain
def lookup(key: str) -> str:
    """Look a key up (the key must be upper-case)."""
    if key != key.upper():
        raise ModelRetry("write the key in upper case")
    return f"value of {key}"
'''


def retry_then_succeed(request: Request) -> Reply:
    """``lookup`` with a lower-case key, then (told to retry) an upper-case one, then the answer."""
    tools = [m for m in request.messages if m.get("role") == "tool"]
    if not tools:
        return tool_call("lookup", {"key": "k1"}, call_id="c1")
    if len(tools) == 1:
        return tool_call("lookup", {"key": "K1"}, call_id="c2")
    return text("Found it.")


def test_a_model_retry_the_model_recovers_from_is_not_a_tool_error(llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = retry_then_succeed
    write(tmp_path, "retrying.py", RETRYING)
    data = write(tmp_path, "d.yaml", """
        target: retrying:agent
        gates: [no_tool_errors]
        scorers: [tool_retries, {tool_retries: 1}]
        data: [{id: one, input: look k1 up}]
        """)
    done = run_cli(["run", str(data), "--db", str(tmp_path / "e.db"), "--json", "-", "--html",
                    str(tmp_path / "r.html")], tmp_path, env(llm_server))
    assert done.code == 0, done.stderr
    output = done.json["items"][0]["turns"][0]["output"]
    results = [m for m in output if m["role"] == "tool"]
    assert [r.get("is_error", False) for r in results] == [False, False]
    assert results[0]["retried"] is True and results[1]["retries"] == 1
    assert done.json["scores"] == {"tool_retries": 0.0, "tool_retries(max=1)": 1.0}
    assert done.json["gate_results"][0]["passed"] is True
    shown = run_cli(["show", "latest", "one", "--db", str(tmp_path / "e.db")], tmp_path).stdout
    results = [line for line in shown.splitlines() if "tool result" in line or line.strip().startswith(
        ("retried:", "succeeded after"))]
    assert [line.strip() for line in results] == [
        "tool result lookup  (id c1)",
        "retried: the tool asked the model to try again, and a later call succeeded",
        "tool result lookup  (id c2)",
        "succeeded after 1 retry"], shown
    html = (tmp_path / "r.html").read_text()
    assert "succeeded after 1 retry" in html and "a later call succeeded" in html


HANDING_OFF = f'''
import json
import os
from typing import Any

from agents import Agent, OpenAIChatCompletionsModel, RunHooks
from openai import AsyncOpenAI

client = AsyncOpenAI(base_url=os.environ["OPENAI_BASE_URL"], api_key=os.environ["OPENAI_API_KEY"], max_retries=0)
billing = Agent(name="Billing", instructions="You answer billing questions.",
                model=OpenAIChatCompletionsModel(model="gpt-4o", openai_client=client))
triage = Agent(name="Triage", instructions="You send each question to the right agent.", handoffs=[billing],
               model=OpenAIChatCompletionsModel(model="{MODEL}", openai_client=client))


class AppHooks(RunHooks):
    """The app's own hooks: each model call's agent, written to a file."""

    async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
        with open(os.environ["HOOKS_FILE"], "a") as out:
            out.write(json.dumps({{"event": "llm_end", "agent": agent.name}}) + "\\n")

    async def on_handoff(self, context: Any, from_agent: Any, to_agent: Any) -> None:
        with open(os.environ["HOOKS_FILE"], "a") as out:
            out.write(json.dumps({{"event": "handoff", "agent": to_agent.name}}) + "\\n")


def setup(info: Any) -> dict[str, Any]:
    return {{"hooks": AppHooks()}}
'''


def hand_off_then_answer(request: Request) -> Reply:
    """Triage hands off to Billing (10 in / 3 out); Billing answers (20 in / 5 out)."""
    system = next((m["content"] for m in request.messages if m["role"] == "system"), "")
    if system.startswith("You send"):
        return Reply(body={**tool_call("transfer_to_billing", {}).body, "usage": {  # type: ignore[dict-item]
            "prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}})
    return text("Your invoice is paid.", prompt_tokens=20, completion_tokens=5)


def test_a_call_after_a_handoff_is_priced_on_the_model_of_the_agent_it_went_to(llm_server: LLMServer,
                                                                              tmp_path: Path) -> None:
    from evalcli.llm import price_of

    llm_server.responder = hand_off_then_answer
    write(tmp_path, "handing_off.py", HANDING_OFF)
    data = write(tmp_path, "d.yaml", """
        target: handing_off:triage
        target_options: {setup: handing_off:setup}
        gates: [{includes: invoice}]
        data: [{id: one, input: "Is my invoice paid?"}]
        """)
    hooks = tmp_path / "hooks.jsonl"
    done = run_cli(["run", str(data), "--db", str(tmp_path / "e.db"), "--json", "-"], tmp_path,
                   env(llm_server, HOOKS_FILE=str(hooks)))
    assert done.code == 0, done.stderr
    calls = done.db("e.db").execute("SELECT model, prompt_tokens, completion_tokens, cost FROM llm_calls "
                                    "WHERE purpose = 'target' ORDER BY id").fetchall()
    assert [(c["model"], c["prompt_tokens"], c["completion_tokens"]) for c in calls] == [
        (MODEL, 10, 3), ("gpt-4o", 20, 5)]
    assert calls[0]["cost"] == pytest.approx(price_of(MODEL, {"prompt_tokens": 10, "completion_tokens": 3}))
    assert calls[1]["cost"] == pytest.approx(price_of("gpt-4o", {"prompt_tokens": 20, "completion_tokens": 5}))
    assert calls[1]["cost"] > calls[0]["cost"] * 2  # gpt-4o is the dearer model: not priced as the first one
    # the app's own hooks still see every call and the handoff
    seen = [json.loads(line) for line in hooks.read_text().splitlines()]
    assert seen == [{"event": "llm_end", "agent": "Triage"}, {"event": "handoff", "agent": "Billing"},
                    {"event": "llm_end", "agent": "Billing"}]
