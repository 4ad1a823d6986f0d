"""The scorer library through the real CLI: inline, registered, as gates, per turn and with thresholds; judges
answered by the loopback server; ``evalcli validate``, ``scorers`` and ``schema`` on the new kinds."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from tests.conftest import REPO, CliResult, run_cli
from tests.llm_server import LLMServer, Reply, Request, text

AGENT = '''
import json

def _call(name, args, call_id):
    return [{"role": "assistant", "content": None, "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]},
            {"role": "tool", "tool_call_id": call_id, "content": json.dumps({"temp": 22, "city": args.get("city")})}]

def agent(input, **kw):
    """'weather CITY' calls get_weather; 'json' answers in JSON; anything else is small talk."""
    if input.startswith("weather"):
        city = input.split()[-1]
        return {"messages": _call("get_weather", {"city": city}, "w-" + city)
                + [{"role": "assistant", "content": f"It is 22C in {city}."}]}
    if input == "json":
        return '```json\\n{"city": "Paris", "temp": 22}\\n```'
    return "Hello!"
'''

NEGATIVE = {"satisfied": False, "met": False, "in_role": False, "supported": False, "lapse": True}


def judge(request: Request) -> Reply:
    """Answers any library judge in the shape its prompt asks for; an item whose text holds NOPE gets a 'no'."""
    prompt = str(request.messages[-1]["content"])
    shape = prompt.rsplit("in this shape:\n", 1)[-1] if "in this shape:" in prompt else prompt.rsplit(
        "Reply with JSON only:", 1)[-1]
    if '"intentions"' in shape:
        return text(json.dumps({"intentions": ["Know the weather"]}))
    if '"facts"' in shape:
        first = re.search(r"User turn (\d+):", prompt)
        assert first is not None, prompt
        return text(json.dumps({"facts": [{"fact": "The user asked about a city", "turn": int(first.group(1))}]}))
    if '"claims"' in shape:
        return text(json.dumps({"claims": ["It is 22C"]}))
    if '"category"' in shape:
        return text(json.dumps({"reasoning": "same", "category": "C"}))
    if '"verdicts"' not in shape:
        return text(json.dumps({"satisfied": "NOPE" not in prompt, "reasoning": "ok"}))
    asked = re.search(r"for each of (?:criteria|intentions|claims|assistant turns) (\d+(?:(?:, | and )\d+)*)", prompt,
                      re.IGNORECASE)
    assert asked is not None, prompt
    key, flag = re.findall(r'"(\w+)" \(its number\)', shape)[0], re.findall(r'"(\w+)" \(true or false\)', shape)[0]
    verdicts = []
    for n in map(int, re.findall(r"\d+", asked.group(1))):
        item = re.search(rf"^(?:{n}\. |Assistant turn {n}: )(.*)$", prompt, re.MULTILINE)
        negative = item is not None and "NOPE" in item.group(1)
        verdicts.append({key: n, "reasoning": "ok", flag: NEGATIVE[flag] if negative else not NEGATIVE[flag]})
    return text(json.dumps({"verdicts": verdicts}))


REGISTRY = """
scorers:
  grounded-judge: {{grounded: {{model: openai/judge-model, api_base: "{url}"}}}}
  goal-judge: {{goal_achieved: {{model: openai/judge-model, api_base: "{url}"}}}}
  role-judge: {{role_adherence: {{role: A weather assistant, model: openai/judge-model, api_base: "{url}"}}}}
  memory-judge: {{knowledge_retention: {{model: openai/judge-model, api_base: "{url}"}}}}
  paris-args: {{tool_args: {{name: get_weather, args: {{city: Paris}}}}}}
"""

DATASET = """
target: trip:agent
gates:
  - trajectory: [get_weather]
  - scorer: {{rubric: {{criteria: [Gives a temperature], model: openai/judge-model, api_base: "{url}"}}}}
    id: temp-rubric
scorers:
  - paris-args
  - scorer: {{tool_f1: [get_weather, search]}}
    threshold: 0.7
  - json_output
  - grounded-judge
  - scorer: {{factuality: {{model: openai/judge-model, api_base: "{url}"}}}}
    threshold: 0.5
  - goal-judge
data:
  - id: paris
    input: weather Paris
    ground_truth: It is 22C in Paris.
    expected_outcome: The user learnt the temperature in Paris.
  - id: two
    turns:
      - input: weather Paris
        gates: [{{tool_args: get_weather}}, role-judge]
        scorers:
          - scorer: {{completeness: {{model: openai/judge-model, api_base: "{url}"}}}}
            threshold: 1
      - input: weather Rome
        gates: [{{trajectory: {{expected: [get_weather], mode: strict}}}}]
        scorers: [{{scorer: memory-judge, threshold: 1}}, json_output]
"""

ENV = {"OPENAI_API_KEY": "sk-test-not-a-real-key-0123456789", "NO_PROXY": "127.0.0.1", "EVALCLI_LLM_RETRIES": "0"}


def setup(server: LLMServer, write: Callable[..., Path], dataset: str = DATASET) -> None:
    server.responder = judge
    write("trip.py", AGENT)
    write("scorers.yaml", REGISTRY.format(url=server.url))
    write("d.yaml", dataset.format(url=server.url))


def test_every_kind_inline_registered_gated_per_turn_and_thresholded(llm_server: LLMServer, write: Callable[..., Path],
                                                                     cli: Callable[..., CliResult]) -> None:
    setup(llm_server, write)
    result = cli("run", "d.yaml", "--json", "-", env=ENV)
    assert result.code == 0, result.stderr
    out = result.json
    assert out["summary"]["errors"] == 0
    assert {g["id"]: g["passed"] for g in out["gate_results"]} == {"trajectory(in_order: get_weather)": True,
                                                                   "temp-rubric": True}
    scores = out["scores"]
    assert scores["paris-args"] == 1.0 and scores["json_output"] == 0.0 and scores["grounded-judge"] == 1.0
    assert abs(scores["tool_f1([get_weather, search])"] - 2 / 3) < 1e-9
    assert scores["factuality"] == 1.0 and scores["goal-judge"] == 1.0
    assert out["summary"]["not_scorable"] == {"factuality": 1, "goal-judge": 1}  # item 'two' has neither
    thresholds = {t["id"]: t["passed"] for t in out["threshold_results"]}
    assert thresholds == {"tool_f1([get_weather, search])": False, "factuality": True}
    assert out["verdict"] == "scored"
    first, second = out["turn_results"]
    assert {g["id"]: g["passed"] for g in first["gate_results"]} == {"tool_args(get_weather)": True, "role-judge": True}
    assert {t["id"]: t["passed"] for t in first["threshold_results"]} == {"completeness": True}
    assert {g["id"]: g["passed"] for g in second["gate_results"]} == {"trajectory(strict: get_weather)": True}
    assert second["scores"] == {"memory-judge": 1.0, "json_output": 0.0}
    role_prompts = [r for r in llm_server.requests if "The role the assistant must keep" in r.messages[-1]["content"]]
    assert len(role_prompts) == 1 and "Assistant turn 1: It is 22C in Paris." in role_prompts[0].messages[-1]["content"]
    assert "Rome" not in role_prompts[0].messages[-1]["content"]  # a per-turn judge reads its own turn only

    db = result.db()
    calls = db.execute("SELECT COUNT(*), SUM(prompt_tokens), MIN(purpose), MAX(purpose) FROM llm_calls").fetchone()
    assert tuple(calls) == (len(llm_server.requests), 11 * len(llm_server.requests), "judge", "judge")
    run = db.execute("SELECT llm_calls, prompt_tokens FROM runs").fetchone()
    assert tuple(run) == (len(llm_server.requests), 11 * len(llm_server.requests))
    rows = {(r["scorer_id"], r["item_id"], r["turn_index"]): r for r in
            db.execute("SELECT scorer_id, item_id, turn_index, score, reason FROM scores")}
    assert rows[("grounded-judge", "paris", None)]["reason"].startswith("1 of 1 claims supported by tool results.")
    assert rows[("paris-args", "two", None)]["score"] == 1.0
    assert rows[("role-judge", "two", 0)]["reason"].startswith("1 of 1 assistant turns in role.")
    assert rows[("memory-judge", "two", 1)]["score"] == 1.0
    strict = cli("run", "d.yaml", "--strict", env=ENV)
    assert strict.code == 3


FAILING = """
target: trip:agent
gates:
  - scorer: {{rubric: {{criteria: [Gives a temperature, NOPE polite], model: openai/judge-model, api_base: "{url}"}}}}
    id: half-rubric
  - trajectory: {{expected: [get_weather], mode: strict}}
scorers:
  - scorer: {{role_adherence: {{role: A weather assistant, model: openai/judge-model, api_base: "{url}"}}}}
    threshold: {{min: 0.9}}
data:
  - {{id: paris, input: weather Paris}}
  - {{id: chat, input: hi NOPE}}
"""


def test_a_judge_gate_needs_one(llm_server: LLMServer, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    setup(llm_server, write, FAILING)
    result = cli("run", "d.yaml", "--json", "-", env=ENV)
    assert result.code == 1, result.stderr
    out = result.json
    gates = {g["id"]: (g["passed"], g["score"]) for g in out["gate_results"]}
    assert gates == {"half-rubric": (False, 0.5), "trajectory(strict: get_weather)": (False, 0.5)}
    assert out["verdict"] == "failed"
    chat = next(i for i in out["items"] if i["id"] == "chat")
    assert chat["outcomes"]["gates"]["trajectory(strict: get_weather)"]["reason"].startswith(
        "strict: does not fit (expected 1 call, got 0)")


def test_a_judge_that_never_answers_cleanly_is_an_error_never_a_score(llm_server: LLMServer, write: Callable[..., Path],
                                                                     cli: Callable[..., CliResult]) -> None:
    setup(llm_server, write, "target: trip:agent\nscorers: [grounded-judge]\ndata: [{{input: weather Paris}}]\n")
    llm_server.responder = lambda request: text('{"claims": "not a list"}')
    result = cli("run", "d.yaml", "--json", "-", env=ENV)
    assert result.code == 4
    out = result.json
    assert out["scores"] == {} and out["summary"]["errors"] == 1
    assert "grounded-judge" in out["items"][0]["error"] and "no readable verdict" in out["items"][0]["error"]


def test_validate_reports_bad_library_arguments_with_their_place(write: Callable[..., Path],
                                                                 cli: Callable[..., CliResult]) -> None:
    write("trip.py", AGENT)
    write("bad.yaml", """
        target: trip:agent
        scorers:
          - json_output: {schema: {type: objet}}
          - trajectory: {expected: [a], mode: sideways}
          - rubric: {criteria: [{criterion: ok, weight: 0}]}
          - role_adherence: "  "
        data: [{input: hi}]
        """)
    result = cli("validate", "bad.yaml")
    assert result.code == 2
    lines = result.stderr
    assert re.search(r"bad\.yaml:3:\d+: .*not a valid JSON Schema", lines), lines
    assert re.search(r"bad\.yaml:4:\d+: .*mode", lines), lines
    assert re.search(r"bad\.yaml:5:\d+: .*weight", lines), lines
    assert re.search(r"bad\.yaml:6:\d+: .*role must not be empty", lines), lines


def test_scorers_command_lists_every_library_kind(cli: Callable[..., CliResult]) -> None:
    result = cli("scorers")
    assert result.code == 0, result.stderr
    for name, fragment in [("tool_args", "(name, args={}, mode=partial)"), ("trajectory", "maximum matching"),
                           ("tool_f1", "(names)"), ("json_output", "(schema=none)"), ("rubric", "(criteria, model="),
                           ("completeness", "met / listed"), ("knowledge_retention", "lapses"),
                           ("role_adherence", "(role, model="), ("grounded", "supported / claims"),
                           ("factuality", "(reference=none"), ("goal_achieved", "expected_outcome")]:
        line = next((line for line in result.stdout.splitlines() if f" {name} " in line), "")
        assert fragment in line or fragment in result.stdout, (name, line)


def test_schema_validates_datasets_using_the_library(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    result = cli("schema")
    assert result.code == 0
    schema = json.loads(result.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert '"$ref": "#/$defs/ExpectedCall"' not in result.stdout  # nested argument models are inlined
    validator = jsonschema.Draft202012Validator(schema)
    good: Any = yaml.safe_load(DATASET.format(url="http://127.0.0.1:1/v1"))
    assert list(validator.iter_errors(good)) == []
    for bad in ({"trajectory": {"expected": ["a"], "mode": "sideways"}}, {"json_output": {"type": "object"}},
                {"rubric": {"criteria": [{"criterion": "a", "weight": 0}]}}, {"tool_f1": "search"},
                {"factuality": {"reference": "x", "typo": 1}}, {"tool_args": {"name": "f", "args": [1]}}):
        assert list(validator.iter_errors({**good, "scorers": [bad]})), bad


def test_library_demo_dataset(tmp_path: Path) -> None:
    result = run_cli(["run", str(REPO / "datasets/library.yaml"), "--db", str(tmp_path / "d.db"), "--json", "-"],
                     cwd=REPO)
    assert result.code == 0, result.stderr
    out = result.json
    assert out["verdict"] == "passed"
    assert out["scores"] == {"tool_f1([get_weather])": 1.0, "exact-brooklyn": 0.5, "answered-in-json": 0.0}
    assert [len(t["gate_results"]) for t in out["turn_results"]] == [1, 1]
