"""Tool calls evalcli saw are tool calls, and hermetic means nothing ran live (docs/hermetic.md), through the real CLI.

The targets are real: callables whose tools write a marker file when they run (so a call that was meant to be
mocked but ran is seen), and a loopback HTTP agent that reports the tool calls it made itself. The callable modules
are separate files because ``@evalcli.tool`` registers its name for the process: ``plain_tools`` has none.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.agent_server import Answer, ScriptedAgent, Seen
from tests.conftest import CliResult

PLAIN = '''
import json, pathlib

MARK = pathlib.Path(__file__).with_name("ran.txt")


def search(query: str) -> str:
    """A tool evalcli does not know: not decorated."""
    with MARK.open("a") as f:
        f.write(f"search {query}\\n")
    if query == "fail":
        raise RuntimeError("the search service is down")
    return f"results for {query}"


def reporting(input, **options):
    """Runs its own search and reports the call in its messages."""
    result = search(query=input)
    return [{"role": "assistant", "content": None, "tool_calls": [
                {"id": "s1", "type": "function", "function": {"name": "search", "arguments": json.dumps({"query": input})}}]},
            {"role": "tool", "tool_call_id": "s1", "name": "search", "content": result},
            {"role": "assistant", "content": f"found {result}"}]


def silent(input, **options) -> str:
    """Runs its own search and says only text (a wrapper around an agent)."""
    try:
        return f"found {search(query=input)}"
    except RuntimeError as exc:
        return f"sorry: {exc}"
'''

DECORATED = '''
import json, pathlib, threading, time
from concurrent.futures import ThreadPoolExecutor

import evalcli

MARK = pathlib.Path(__file__).with_name("ran.txt")
POOL = ThreadPoolExecutor(max_workers=3)  # shared by every conversation, as a framework's executor is


def mark(text):
    with MARK.open("a") as f:
        f.write(text + "\\n")


@evalcli.tool
def translate_to_italian(text: str) -> str:
    mark(f"translate {text}")
    if text == "fail":
        raise RuntimeError("the translation service is down")
    return "ciao"


def wrapper(input, **options) -> str:
    """A wrapper around an agent whose tool is decorated: it says only text."""
    try:
        return translate_to_italian(text=input)
    except Exception as exc:
        return f"sorry: {exc}"


@evalcli.tool(name="Get Weather")
def weather(city: str) -> str:
    mark(f"weather {city}")
    return "sunny"


def crew_like(input, **options):
    """Shows the model the tool's sanitised name (get_weather), as CrewAI does, while its display name is 'Get
    Weather'."""
    value = weather(city=input)
    return [{"role": "assistant", "content": None, "tool_calls": [
                {"id": "w1", "type": "function", "function": {"name": "get_weather", "arguments": json.dumps({"city": input})}}]},
            {"role": "tool", "tool_call_id": "w1", "name": "get_weather", "content": value},
            {"role": "assistant", "content": f"it is {value}"}]


@evalcli.tool
def lookup(key: str) -> str:
    mark(f"lookup {key}")
    time.sleep(0.02)
    return f"live {key}"


def threaded(input, **options) -> str:
    """Runs its tool on an executor's thread and on a thread of its own, as smolagents and CrewAI do."""
    key = input.split()[-1]
    first = POOL.submit(lookup, key=key).result()
    box = []
    worker = threading.Thread(target=lambda: box.append(lookup(key=key + "-thread")))
    worker.start()
    worker.join()
    return f"{first} / {box[0] if box else 'nothing'}"
'''


@pytest.fixture
def agents(workdir: Path) -> Path:
    (workdir / "plain_tools.py").write_text(PLAIN)
    (workdir / "decorated_tools.py").write_text(DECORATED)
    return workdir


def marker(workdir: Path) -> str:
    path = workdir / "ran.txt"
    return path.read_text() if path.exists() else ""


def items(result: CliResult) -> dict[str, dict[str, Any]]:
    return {item["id"]: item for item in result.json["items"]}


def reasons(item: dict[str, Any]) -> dict[str, str]:
    outcomes = item["outcomes"]
    return {name: o["reason"] for kind in ("gates", "scorers") for name, o in outcomes[kind].items()}


def tool_messages(item: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for turn in item["turns"] for m in turn["output"] if m["role"] == "tool"]


def test_hermetic_refuses_a_callables_undecorated_tool(agents: Path, write: Callable[..., Path],
                                                       cli: Callable[..., CliResult]) -> None:
    write("d.yaml", """
        target: plain_tools:reporting
        data:
          - id: ran
            input: weather in Rome
        scorers:
          - includes: found
    """)
    result = cli("run", "d.yaml", "--hermetic", "--json", "-")
    assert result.code == 4, result.stderr  # the conversation is an error, never a pass on a live call
    ran = items(result)["ran"]
    assert ran["status"] == "error"
    assert "--hermetic" in ran["error"] and "search" in ran["error"] and "@evalcli.tool" in ran["error"]
    assert [m["source"] for m in tool_messages(ran)] == ["live"]


def test_a_mock_of_a_tool_evalcli_cannot_intercept_is_an_error_not_a_live_call(
        agents: Path, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", """
        target: plain_tools:reporting
        tools:
          search: {returns: mocked results}
        data:
          - id: ran
            input: weather in Rome
        scorers:
          - includes: found
    """)
    checked = cli("validate", "d.yaml")
    assert checked.code == 0, checked.stderr
    said = checked.stdout + checked.stderr
    assert "tools.search" in said and "no @evalcli.tool named 'search'" in said
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 4, result.stderr
    ran = items(result)["ran"]
    assert ran["status"] == "error"
    assert "tools.search" in ran["error"] and "did not pass through evalcli" in ran["error"], ran["error"]


def test_calls_through_evalcli_tool_are_recorded_when_the_reply_does_not_report_them(
        agents: Path, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", """
        target: decorated_tools:wrapper
        data:
          - id: live
            input: hello
          - id: failed
            input: fail
          - id: mocked
            input: good night
            tools:
              translate_to_italian: {returns: buonanotte}
        gates:
          - called_tool: translate_to_italian
        scorers:
          - did_not_call: translate_to_italian
          - no_tool_errors
          - trajectory: [translate_to_italian]
    """)
    result = cli("run", "d.yaml", "--json", "-")
    found = items(result)
    for name in ("live", "failed", "mocked"):
        assert found[name]["outcomes"]["gates"]["called_tool(translate_to_italian)"]["score"] == 1.0, found[name]
        assert found[name]["scores"]["did_not_call(translate_to_italian)"] == 0.0
        assert found[name]["scores"]["trajectory(in_order: translate_to_italian)"] == 1.0
    assert found["live"]["scores"]["no_tool_errors"] == 1.0
    assert found["failed"]["scores"]["no_tool_errors"] == 0.0  # the real tool failed: never "0 tool calls"
    assert "the translation service is down" in reasons(found["failed"])["no_tool_errors"]
    [call, answer, text] = found["mocked"]["turns"][0]["output"]
    assert call["tool_calls"][0]["function"] == {"name": "translate_to_italian",
                                                 "arguments": json.dumps({"text": "good night"})}
    assert answer["source"] == "mock" and answer["content"] == "buonanotte" and answer["observed"] is True
    assert text == {"role": "assistant", "content": "buonanotte"}
    assert [m["source"] for m in tool_messages(found["live"])] == ["live"]
    assert sorted(marker(agents).splitlines()) == ["translate fail", "translate hello"]  # the mocked one never ran
    shown = cli("show", "latest", "mocked").stdout
    assert "tool result translate_to_italian  (id evalcli_0_0, mock, seen by evalcli, not in the reply)" in shown


def test_checks_say_when_no_tool_calls_were_reported(agents: Path, write: Callable[..., Path],
                                                     cli: Callable[..., CliResult]) -> None:
    write("d.yaml", """
        target: plain_tools:silent
        data:
          - id: wrapped
            input: fail
        gates:
          - did_not_call: search
        scorers:
          - no_tool_errors
          - tool_args: {name: search, args: {query: fail}}
    """)
    checked = cli("validate", "d.yaml")
    assert checked.code == 0, checked.stderr
    said = checked.stdout + checked.stderr
    for check in ("did_not_call(search)", "no_tool_errors"):
        assert f"{check}: the target plain_tools:silent never reports its tool calls" in said, said
    result = cli("run", "d.yaml", "--json", "-")
    wrapped = items(result)["wrapped"]
    for check, reason in reasons(wrapped).items():
        assert "no tool calls were reported" in reason, (check, reason)
    assert marker(agents) == "search fail\n"


def test_a_tool_is_labelled_by_the_name_the_model_sees(agents: Path, write: Callable[..., Path],
                                                       cli: Callable[..., CliResult]) -> None:
    write("d.yaml", """
        target: decorated_tools:crew_like
        tools:
          get_weather: {returns: snowy}
        data:
          - id: crew
            input: Oslo
        gates:
          - includes: snowy
    """)
    result = cli("run", "d.yaml", "--hermetic", "--json", "-")
    assert result.code == 0, result.stderr
    crew = items(result)["crew"]
    assert [(m["name"], m["source"]) for m in tool_messages(crew)] == [("get_weather", "mock")]
    assert marker(agents) == ""


def test_a_tool_on_another_thread_is_under_its_conversations_plan(agents: Path, write: Callable[..., Path],
                                                                  cli: Callable[..., CliResult]) -> None:
    data = "\n".join(f"""
          - id: k{n}
            input: look up k{n}
            tools:
              lookup:
                - {{when: {{key: k{n}}}, returns: pooled-k{n}}}
                - {{when: {{key: k{n}-thread}}, returns: thread-k{n}}}""" for n in range(8))
    write("d.yaml", f"""
        target: decorated_tools:threaded
        concurrency: 8
        unmocked: error
        data:{data}
        gates:
          - called_tool: {{name: lookup, times: 2}}
    """)
    result = cli("run", "d.yaml", "--hermetic", "--json", "-")
    assert result.code == 0, result.stderr
    for n, item in enumerate(result.json["items"]):
        texts = [m["content"] for m in item["turns"][0]["output"] if m["role"] == "assistant" and m.get("content")]
        assert texts == [f"pooled-k{n} / thread-k{n}"], item  # each conversation's own mocks, on both threads
        assert sorted(m["source"] for m in tool_messages(item)) == ["mock", "mock"]
    assert marker(agents) == ""  # nothing ran live


def weather_reply(seen: Seen) -> Answer:
    """A service that runs its own get_weather and reports it; it says the result came from a mock only when it was
    sent a plan with one."""
    plan = seen.body.get("tools") if isinstance(seen.body, dict) else None
    mocked = bool(plan and plan.get("mocks", {}).get("get_weather"))
    result: dict[str, Any] = {"role": "tool", "tool_call_id": "w1", "name": "get_weather",
                              "content": "mocked sun" if mocked else "live sun"}
    if mocked:
        result["source"] = "mock"
    return Answer(body={"messages": [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "w1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}}]},
        result, {"role": "assistant", "content": f"it is {result['content']}"}]})


def test_hermetic_and_an_http_services_own_tools(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    agent = ScriptedAgent(answer=weather_reply)
    try:
        write("own.yaml", f"""
            target:
              http: {{url: "{agent.url}/chat", response: {{messages: messages}}}}
            data:
              - id: own
                input: weather in Rome?
            scorers:
              - includes: sun
        """)
        result = cli("run", "own.yaml", "--hermetic", "--json", "-")
        assert result.code == 4, result.stderr
        own = items(result)["own"]
        assert own["status"] == "error" and "--hermetic" in own["error"] and "get_weather" in own["error"]
        assert "{{ tools }}" in own["error"]
        # a service that is sent the plan and says its result came from the mock passes
        write("sent.yaml", f"""
            target:
              http:
                url: "{agent.url}/chat"
                body: {{input: "{{{{ input }}}}", tools: "{{{{ tools }}}}"}}
                response: {{messages: messages}}
            tools:
              get_weather: {{returns: mocked sun}}
            data:
              - id: sent
                input: weather in Rome?
            scorers:
              - includes: sun
        """)
        sent = cli("run", "sent.yaml", "--hermetic", "--json", "-")
        assert sent.code == 0, sent.stderr
        assert [m["source"] for m in tool_messages(items(sent)["sent"])] == ["mock"]
        # a service whose replies are read as text: evalcli can neither send it a plan nor see its tools
        write("text.yaml", f"""
            target:
              http: {{url: "{agent.url}/chat", response: {{text: "messages[-1].content"}}}}
            data:
              - input: weather in Rome?
            scorers:
              - includes: sun
        """)
        before = len(agent.requests)
        refused = cli("run", "text.yaml", "--hermetic")
        assert refused.code == 2, refused.stderr
        assert "--hermetic" in refused.stderr and "read as text" in refused.stderr and "{{ tools }}" in refused.stderr
        assert len(agent.requests) == before  # refused before anything was sent
        assert cli("run", "text.yaml").code == 0  # without --hermetic it runs
    finally:
        agent.stop()


NAMES = st.sampled_from(["get_weather", "Get Weather", "search", "book"])


@st.composite
def turns(draw: st.DrawFn) -> tuple[list[dict[str, Any]], Any]:
    """A turn's reported messages (tool calls and their results, then an answer) and a plan whose record holds some
    of those calls (by id or not) and calls the reply does not report."""
    from evalcli.tools import ToolPlan

    reported = draw(st.lists(st.tuples(NAMES, st.integers(0, 3)), max_size=5))
    messages: list[dict[str, Any]] = []
    for n, (name, city) in enumerate(reported):
        arguments = json.dumps({"city": city})
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"r{n}", "type": "function", "function": {"name": name, "arguments": arguments}}]})
        messages.append({"role": "tool", "tool_call_id": f"r{n}", "content": "x"})
    messages.append({"role": "assistant", "content": draw(st.sampled_from(["done", ""]))})
    plan = ToolPlan(controls=draw(st.booleans()))
    for n, (name, city) in enumerate(reported):
        if draw(st.booleans()):
            plan.record(draw(st.sampled_from([name, name.upper()])), {"city": city}, "mock",
                        result="m", call_id=f"r{n}" if draw(st.booleans()) else None)
    for name, city in draw(st.lists(st.tuples(NAMES, st.integers(0, 3)), max_size=3)):
        plan.record(name, {"city": city}, "live", result={"t": city})
    return messages, plan


@given(turns())
def test_every_call_of_a_turn_is_recorded_once_whoever_saw_it(turn: tuple[list[dict[str, Any]], Any]) -> None:
    from evalcli.tools import recorded_turn

    messages, plan = turn
    seen = recorded_turn(messages, plan, 0)
    results = [m for m in seen.messages if m["role"] == "tool"]
    # every call the plan saw is in the record once (reported, or added), and every other reported result is outside
    assert len(results) == len(plan.calls) + len(seen.outside)
    added = [m for m in seen.messages if m.get("observed")]
    assert len(added) == 2 * (len(results) - sum(m["role"] == "tool" for m in messages))
    # what the target reported is kept, in order, unchanged but for the source evalcli adds
    kept = [{k: v for k, v in m.items() if k != "source"} for m in seen.messages if not m.get("observed")]
    assert kept == messages
    assert all(("source" in m) == (plan.controls or bool(m.get("observed"))) for m in results)
    # an added call comes before the turn's answer, with its result right after it
    for i, message in enumerate(seen.messages):
        if message.get("observed") and message["role"] == "assistant":
            assert seen.messages[i + 1]["tool_call_id"] == message["tool_calls"][0]["id"]
    if messages[-1]["content"] and added:
        assert seen.messages[-1] == messages[-1]


@given(turns(), st.integers(0, 1), st.booleans())
def test_a_turn_the_plan_only_watched_is_recorded_as_reported(turn: tuple[list[dict[str, Any]], Any], index: int,
                                                              sent: bool) -> None:
    """The conversation skips ``recorded_turn`` for a turn ``watching`` says the plan only watched: that is only
    right when the record would be the reported messages, and no call of them could be outside the plan."""
    from evalcli.tools import recorded_turn

    messages, plan = turn
    seen = recorded_turn(messages, plan, index, service_sources=sent)
    if plan.watching(index):
        assert seen.messages == messages
        assert all(plan.outside(call.tool, sent=sent) is None for call in seen.outside)
    elif not plan.controls:
        assert any(call.turn == index for call in plan.calls)  # it saw a call of the turn: it may add one
