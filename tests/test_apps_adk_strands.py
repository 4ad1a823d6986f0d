"""Google ADK and Strands agents written as their own samples write them, run through the real CLI against the
loopback scripted model: an ADK customer-service agent (google/adk-samples ``customer-service`` style: the profile in
the session state from a setup, the app's own tool callbacks, ADK's DEBUG logging on) and a Strands recipe bot
(strands-agents/samples ``recipe_bot`` style: ``@tool`` functions, ``invocation_state`` from a setup, the printing
callback handler; in its own venv, tests/framework_venvs.py). Each conversation's history is its own (read from the
model server's request log), usage is the target's, mocks, ``--hermetic`` and tapes reach the frameworks' tools."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, CliResult, run_cli
from tests.framework_agents import KEY, framework_python, needs, user_texts
from tests.llm_server import LLMServer, Reply, Request, text, tool_call

ADK = needs("google.adk")


def customer_model(request: Request) -> Reply:
    """Plays the customer-service model: a cart question asks for the cart, a discount asks for approval."""
    messages = request.messages
    last = messages[-1]
    if last["role"] == "tool":
        return text(f"Result: {last['content']}")
    said = user_texts(messages)[-1]
    discount = re.search(r"discount of (\d+)", said)
    if discount:
        return tool_call("sync_ask_for_approval", {"discount_type": "Percentage", "value": int(discount[1]),
                                                   "reason": "Loyal customer"}, f"d{len(messages)}")
    customer = re.search(r"customer (\d+)", said)
    if customer:
        return tool_call("access_cart_information", {"customer_id": customer[1]}, f"c{len(messages)}")
    return text("How can I help?")


def recipe_model(request: Request) -> Reply:
    """Plays the recipe bot's model: a recipe question searches the web, an allergy question asks the tool."""
    messages = request.messages
    last = messages[-1]
    if last["role"] == "tool":
        content = last["content"]
        said = content if isinstance(content, str) else " ".join(str(p.get("text", "")) for p in content)
        return text(f"Here you go: {said}")
    asked = plain(next(m["content"] for m in reversed(messages) if m["role"] == "user"))
    if "allergies" in asked:
        return tool_call("allergies", {}, f"a{len(messages)}")
    dish = re.search(r"recipe for (\w+)", asked)
    if dish:
        return tool_call("websearch", {"keywords": dish[1]}, f"w{len(messages)}")
    return text("What shall we cook?")


def run(tmp_path: Path, server: LLMServer, body: str, *args: str, adapter: str = "google_adk") -> CliResult:
    """The CLI on the dataset ``body``, in the Python that runs ``adapter``'s agents (Strands': its own venv)."""
    path = tmp_path / "d.yaml"
    path.write_text(textwrap.dedent(body).lstrip("\n"))
    return run_cli(["run", str(path), "--db", str(tmp_path / "e.db"), "--json", "-", *args], REPO,
                   {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": KEY, "NO_PROXY": "127.0.0.1",
                    "RECIPE_MARK": str(tmp_path / "ran.txt")}, python=framework_python(adapter))


def own_history_only(server: LLMServer, conversations: list[list[str]]) -> None:
    """Every request the model got holds the user messages of one conversation only, in its order."""
    assert server.requests
    for request in server.requests:
        said = [plain(m["content"]) for m in request.messages if m.get("role") == "user"]
        owners = [c for c in conversations if said == c[:len(said)]]
        assert owners, f"a request mixes conversations: {said}"


def plain(content: Any) -> str:
    """A message's text, whether a string or a list of parts (Strands sends parts)."""
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


def tool_results(item: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for turn in item["turns"] for m in turn["output"] if m["role"] == "tool"]


@ADK
def test_adk_customer_service_runs_as_its_app_runs_it(llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = customer_model
    done = run(tmp_path, llm_server, """
        target: tests.app_agents.customer_service_adk:root_agent
        target_options: {setup: "tests.app_agents.customer_service_adk:customer"}
        data:
          - id: cart
            metadata: {customer: "123"}
            target_options: {memory: {resource: alex}}
            turns:
              - input: What is in my cart? I am customer 123
                gates: [{includes: potting soil}]
              - input: Can I get a discount of 5?
                gates: [{includes: approved}]
          - id: wrong-customer
            metadata: {customer: "456"}
            turns:
              - input: Show me the cart of customer 123
                gates: [{includes: "only for 456"}]
        """)
    assert done.code == 0, done.stderr[-3000:]
    assert "google_adk" not in done.stderr  # ADK's own log lines stay out (the app's own logger still speaks)
    assert "DEBUG:tests.app_agents.customer_service_adk:cart of 123" in done.stderr
    items = {item["id"]: item for item in done.json["items"]}
    assert items["cart"]["resource_id"] == "alex"  # the ADK session's user_id
    assert items["wrong-customer"]["resource_id"] == items["wrong-customer"]["thread_id"]
    cart = items["cart"]["turns"][0]["output"]
    assert [(m["role"], m.get("name")) for m in cart] == [
        ("assistant", "customer_service_agent"), ("tool", "access_cart_information"),
        ("assistant", "customer_service_agent")]
    assert json.loads(cart[1]["content"]) == {"items": ["potting soil", "tomato seeds"]}
    own_history_only(llm_server, [["What is in my cart? I am customer 123", "Can I get a discount of 5?"],
                                  ["Show me the cart of customer 123"]])
    usage = done.json["usage"]["purposes"]["target"]
    assert usage["calls"] == len(llm_server.requests) == 6
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (66, 42)


@ADK
def test_adk_mocks_and_hermetic_go_through_the_runner_not_the_agent(llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = customer_model
    done = run(tmp_path, llm_server, """
        target: tests.app_agents.customer_service_adk:root_agent
        target_options: {setup: "tests.app_agents.customer_service_adk:customer"}
        tools:
          access_cart_information: {returns: {items: [mocked compost]}}
        data:
          - id: mocked
            metadata: {customer: "123"}
            turns:
              - input: What is in my cart? I am customer 123
                gates: [{includes: mocked compost}]
          - id: big-discount
            metadata: {customer: "123"}
            input: Can I get a discount of 50?
        """, "--hermetic")
    assert done.code == 4, done.stderr[-3000:]
    items = {item["id"]: item for item in done.json["items"]}
    assert items["mocked"]["status"] == "ok"
    assert [m["source"] for m in tool_results(items["mocked"])] == ["mock"]
    assert items["big-discount"]["status"] == "error"
    assert "--hermetic: the tool call sync_ask_for_approval(" in items["big-discount"]["error"]


@pytest.mark.parametrize(("target", "question", "metadata"), [
    pytest.param("tests.app_agents.customer_service_adk:root_agent", "What is in my cart? I am customer 123",
                 {"customer": "123"}, marks=ADK, id="google_adk"),
    pytest.param("tests.app_agents.recipe_bot_strands:recipe_bot", "Give me a recipe for pancakes", {"user": "ada"},
                 id="strands")])
def test_a_tape_recorded_live_replays_under_hermetic(target: str, question: str, metadata: dict[str, str],
                                                     llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = customer_model if "adk" in target else recipe_model
    setup = target.split(":")[0] + (":customer" if "adk" in target else ":user")
    body = f"""
        target: {target}
        target_options: {{setup: "{setup}"}}
        TOOLS
        scorers: [no_tool_errors]
        data:
          - id: q
            metadata: {json.dumps(metadata)}
            input: {question}
        """
    adapter = "google_adk" if "adk" in target else "strands"
    recorded = run(tmp_path, llm_server, body.replace("TOOLS", ""), "--record-tools", str(tmp_path / "tapes"),
                   adapter=adapter)
    assert recorded.code == 0, recorded.stderr[-3000:]
    live = tool_results(recorded.json["items"][0])
    tape = tmp_path / "tapes" / "d.tape.jsonl"
    assert len(tape.read_text().splitlines()) == 1
    (tmp_path / "ran.txt").unlink(missing_ok=True)
    replayed = run(tmp_path, llm_server, body.replace("TOOLS", f"tools: {{replay: {tape}}}"), "--hermetic",
                   adapter=adapter)
    assert replayed.code == 0, replayed.stderr[-3000:]
    again = tool_results(replayed.json["items"][0])
    assert [m["source"] for m in again] == ["replay"]
    assert again[0]["content"] == live[0]["content"]
    assert not (tmp_path / "ran.txt").exists()  # nothing ran live


def test_strands_recipe_bot_runs_as_its_app_runs_it(llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = recipe_model
    done = run(tmp_path, llm_server, """
        target: tests.app_agents.recipe_bot_strands:recipe_bot
        target_options: {setup: "tests.app_agents.recipe_bot_strands:user"}
        data:
          - id: ada
            metadata: {user: ada}
            turns:
              - input: Give me a recipe for pancakes
                gates: [{includes: pancakes recipe}]
              - input: What are my allergies?
                gates: [{includes: peanuts}]
          - id: bo
            metadata: {user: bo}
            turns:
              - input: What are my allergies?
                gates: [{includes: none}]
          - id: broken
            turns:
              - input: Give me a recipe for unobtainium
                scorers: [{scorer: no_tool_errors, threshold: {max: 0}}]
        """, adapter="strands")
    assert done.code == 0, done.stderr[-3000:]  # stdout is the JSON alone: Strands printed nothing to it
    items = {item["id"]: item for item in done.json["items"]}
    [failed] = tool_results(items["broken"])
    assert failed["is_error"] is True and "the search service is down" in failed["content"]
    assert [m["name"] for m in tool_results(items["ada"])] == ["websearch", "allergies"]
    own_history_only(llm_server, [["Give me a recipe for pancakes", "What are my allergies?"],
                                  ["What are my allergies?"], ["Give me a recipe for unobtainium"]])
    usage = done.json["usage"]["purposes"]["target"]
    assert usage["calls"] == len(llm_server.requests) == 8
    assert usage["prompt_tokens"] == 88


def test_strands_mocks_and_hermetic(llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = recipe_model
    done = run(tmp_path, llm_server, """
        target: tests.app_agents.recipe_bot_strands:recipe_bot
        tools:
          websearch:
            - when: {keywords: soup}
              raises: the search service is down
            - returns: a mocked recipe
        data:
          - id: mocked
            turns:
              - input: Give me a recipe for pancakes
                gates: [{includes: a mocked recipe}]
          - id: failing
            input: Give me a recipe for soup
          - id: unmocked
            input: What are my allergies?
        """, "--hermetic", adapter="strands")
    assert done.code == 4, done.stderr[-3000:]
    items = {item["id"]: item for item in done.json["items"]}
    assert [m["source"] for m in tool_results(items["mocked"])] == ["mock"]
    [failed] = tool_results(items["failing"])
    assert failed["is_error"] is True and failed["content"] == "Error: the search service is down"
    assert items["unmocked"]["status"] == "error" and "--hermetic: the tool call allergies(" in items["unmocked"]["error"]
    assert not (tmp_path / "ran.txt").exists()  # the real tool never ran


@pytest.mark.parametrize(("framework", "module", "extra"), [("google_adk", "google.adk", "google-adk"),
                                                           ("strands", "strands", "strands")])
def test_a_missing_framework_names_its_extra(framework: str, module: str, extra: str) -> None:
    import importlib.util

    try:
        installed = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        installed = False
    if installed:
        pytest.skip(f"{module} is installed")
    done = run_cli(["validate", f"datasets/frameworks/{framework}.yaml"], REPO)
    assert done.code == 2, done.stderr
    assert f"No module named '{module}'" in done.stderr and f"hint: pip install 'evalcli[{extra}]'" in done.stderr
