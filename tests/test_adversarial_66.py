"""Adversarial try (adv33) of tool mocks and tapes, comparisons and budgets as users meet them (docs/hermetic.md,
docs/history.md#comparisons-that-know-the-noise, docs/budgets.md): the real CLI, real SQLite files, real loopback
model servers. Each test failed on the main this branch started from."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult
from tests.llm_server import LLMServer, Reply, Request, completion

AGENT = '''
import json
import os

import evalcli


@evalcli.tool
def lookup(query: str, n: float = 1, deep: list | None = None) -> dict:
    """Look something up (the live service: never called when TOOL_DISABLED is set)."""
    if os.environ.get("TOOL_DISABLED"):
        raise RuntimeError("the live service must not be called")
    return {"echo": query, "n": n}


def agent(input: str) -> str:
    try:
        return "done " + json.dumps(lookup(**json.loads(input)))
    except Exception as exc:  # noqa: BLE001 - told to the user
        return f"failed: {exc}"
'''


def tool_dataset(arguments: str, replay: str | None = None) -> str:
    tools = f"tools: {{replay: {replay}}}\n" if replay else ""
    return (f"target: adv66_tools:agent\n{tools}gates:\n  - includes: done\ndata:\n"
            f"  - {{id: a, input: '{arguments}'}}\n")


@pytest.fixture
def tools_dir(workdir: Path) -> Path:
    (workdir / "adv66_tools.py").write_text(AGENT)
    return workdir


def test_exact_replay_matches_numbers_by_value_as_every_other_match_does(
        tools_dir: Path, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    # recorded when the model wrote 1.0; replayed when it writes 1 (or the tape's 1.0 edited to 1 by hand): the
    # same call by the one value rule (docs/checks.md "Arguments": 1 equals 1.0), so the tape answers it
    write("d.yaml", tool_dataset('{"query": "x", "n": 1.0, "deep": [2.0, {"k": 3.0}]}'))
    recorded = cli("run", "d.yaml", "--record-tools", "tapes")
    assert recorded.code == 0, recorded.stderr
    line = json.loads((tools_dir / "tapes" / "d.tape.jsonl").read_text())
    assert line["arguments"] == {"query": "x", "n": 1.0, "deep": [2.0, {"k": 3.0}]}
    write("r.yaml", tool_dataset('{"query": "x", "n": 1, "deep": [2, {"k": 3}]}', replay="tapes/d.tape.jsonl"))
    replayed = cli("run", "r.yaml", "--hermetic", "--json", "-", env={"TOOL_DISABLED": "1"})
    assert replayed.code == 0, replayed.stdout[-2000:] + replayed.stderr
    item = replayed.json["items"][0]
    assert item["status"] == "ok" and item["passed"], item["error"]
    sources = [m.get("source") for m in item["turns"][0]["output"] if m["role"] == "tool"]
    assert sources == ["replay"]
    # values stay values: 1.5 is not 1, and true is not 1
    write("r2.yaml", tool_dataset('{"query": "x", "n": 1.5, "deep": [2, {"k": 3}]}', replay="tapes/d.tape.jsonl"))
    missed = cli("run", "r2.yaml", "--hermetic", "--json", "-", env={"TOOL_DISABLED": "1"})
    assert missed.code == 4, missed.stderr
    # and the refusal shows what the tape has for this conversation, to compare with
    assert ('has no mock (and the tape has no answer for it: this conversation\'s recordings not yet replayed are '
            'lookup({"deep":[2,{"k":3}],"n":1,"query":"x"}))') in missed.json["items"][0]["error"]


def test_a_tape_line_with_neither_result_nor_error_is_a_located_error_not_a_null_answer(
        tools_dir: Path, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", tool_dataset('{"query": "x"}'))
    assert cli("run", "d.yaml", "--record-tools", "tapes").code == 0
    tape = tools_dir / "tapes" / "d.tape.jsonl"
    # a hand edit that misspells the key (or a line cut off before its answer and closed again)
    tape.write_text(tape.read_text().replace('"result"', '"reslt"'))
    write("r.yaml", tool_dataset('{"query": "x"}', replay="tapes/d.tape.jsonl"))
    replayed = cli("run", "r.yaml", "--hermetic", "--db", "r.db", env={"TOOL_DISABLED": "1"})
    assert replayed.code == 2, replayed.stdout
    assert "Traceback" not in replayed.stderr
    assert "tapes/d.tape.jsonl:1" in replayed.stderr
    assert "has a 'result'" in replayed.stderr and "neither" in replayed.stderr and "reslt" in replayed.stderr
    assert not (tools_dir / "r.db").exists()
    # a tool that returned null is recorded with "result": null and replays as it did
    tape.write_text(tape.read_text().replace('"reslt": {"echo": "x", "n": 1}', '"result": null'))
    again = cli("run", "r.yaml", "--hermetic", "--json", "-", env={"TOOL_DISABLED": "1"})
    assert again.code == 0, again.stderr
    assert again.json["items"][0]["turns"][0]["output"][-1]["content"] == "done null"


def test_a_replay_miss_says_why_the_tape_did_not_answer(
        tools_dir: Path, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    # an item without an id, edited after the recording, is another conversation: the refusal said only "the tape
    # has no answer for it", with the call, though the tape held no line of that conversation at all
    write("d.yaml", "target: adv66_tools:agent\ngates:\n  - includes: done\ndata:\n"
                    "  - input: '{\"query\": \"x\"}'\n  - {id: named, input: '{\"query\": \"y\"}'}\n")
    assert cli("run", "d.yaml", "--record-tools", "tapes").code == 0
    write("r.yaml", "target: adv66_tools:agent\ntools: {replay: tapes/d.tape.jsonl}\ngates:\n  - includes: done\n"
                    "data:\n  - input: '{\"query\": \"x\", \"n\": 2}'\n  - {id: named, input: '{\"query\": \"z\"}'}\n")
    replayed = cli("run", "r.yaml", "--hermetic", "--json", "-", env={"TOOL_DISABLED": "1"})
    assert replayed.code == 4, replayed.stderr
    edited, named = (item["error"] for item in replayed.json["items"])
    assert "it has no recording of this conversation (" in edited
    assert "an item without an id is known by its content, so an edited one is another conversation" in edited
    assert "record it again, or give items ids" in edited
    assert named.endswith('(and the tape has no answer for it: this conversation\'s recordings not yet replayed are '
                          'lookup({"query":"y"}))')
    # unmocked: error says the same
    write("u.yaml", "target: adv66_tools:agent\ntools: {replay: tapes/d.tape.jsonl}\nunmocked: error\n"
                    "gates:\n  - includes: done\ndata:\n  - {id: named, input: '{\"query\": \"z\"}'}\n")
    unmocked = cli("run", "u.yaml", "--json", "-", env={"TOOL_DISABLED": "1"})
    assert unmocked.json["items"][0]["error"].endswith(
        'has no mock or recorded answer: this conversation\'s recordings not yet replayed are lookup({"query":"y"})')


def test_a_tape_saved_with_a_byte_order_mark_and_crlf_lines_replays(
        tools_dir: Path, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    # a tape opened and saved in a Windows editor (UTF-8 with BOM, CRLF): datasets and trace files read past the
    # BOM, a tape was "not valid JSON: Unexpected UTF-8 BOM" at line 1
    write("d.yaml", tool_dataset('{"query": "x"}'))
    assert cli("run", "d.yaml", "--record-tools", "tapes").code == 0
    tape = tools_dir / "tapes" / "d.tape.jsonl"
    tape.write_bytes(b"\xef\xbb\xbf" + tape.read_bytes().replace(b"\n", b"\r\n"))
    write("r.yaml", tool_dataset('{"query": "x"}', replay="tapes/d.tape.jsonl"))
    replayed = cli("run", "r.yaml", "--hermetic", "--json", "-", env={"TOOL_DISABLED": "1"})
    assert replayed.code == 0, replayed.stderr
    assert replayed.json["items"][0]["turns"][0]["output"][-1]["content"] == 'done {"echo": "x", "n": 1}'
    mocks = cli("mocks", "from-tape", "tapes/d.tape.jsonl")
    assert mocks.code == 0, mocks.stderr
    assert "lookup" in mocks.stdout


def answer(request: Request) -> Reply:
    """Every call 100 tokens in and 10 out: gpt-4o-mini prices that at $0.000021."""
    return Reply(body=completion(f"ok: {request.messages[-1]['content']}", prompt_tokens=100, completion_tokens=10))


def limited_dataset(url: str, model: str, cost: float) -> str:
    return (f"target:\n  model: {model}\n  api_base: {url}\nlimits: {{cost: {cost:.6f}}}\nscorers:\n  - includes: ok\n"
            "data:\n  - id: long\n    inputs: [one, two, three, four]\n")


def test_a_cost_limit_over_a_model_without_a_price_is_refused_before_anything_runs(
        workdir: Path, write: Callable[..., Path], cli: Callable[..., CliResult], llm_server: LLMServer) -> None:
    # docs/budgets.md: a cost bound needs prices. --max-cost was refused over an unpriced model, but a conversation's
    # limits: {cost} was silently never reached: every turn played, exit 0, the limit a no-op
    llm_server.responder = answer
    write("d.yaml", limited_dataset(llm_server.url, "openai/house-model", 0.000001))
    refused = cli("run", "d.yaml")
    assert refused.code == 2, refused.stdout + refused.stderr
    assert "Traceback" not in refused.stderr
    assert "d.yaml: limits.cost cannot be counted: litellm's price table has no price for openai/house-model" \
        in refused.stderr
    assert "limits: {tokens: N}" in refused.stderr
    assert llm_server.requests == [] and not (workdir / "evalcli.db").exists()
    # a priced model: the limit ends the conversation, and its error says what was spent (never "$0.0000")
    write("p.yaml", limited_dataset(llm_server.url, "openai/gpt-4o-mini", 0.00003))
    priced = cli("run", "p.yaml", "--json", "-")
    assert priced.code == 4, priced.stderr
    item = priced.json["items"][0]
    assert item["status"] == "limited" and len(item["turns"]) == 2
    assert "turn 2 not played: $4.2e-05 was spent (limit $3e-05)" in item["error"]
    assert len(llm_server.requests) == 2


def no_usage(request: Request) -> Reply:
    """A self-hosted server that leaves ``usage`` out of its responses."""
    body = completion(f"ok: {request.messages[-1]['content']}")
    body.pop("usage", None)
    return Reply(body=body)


def test_a_token_budget_over_calls_that_report_no_usage_says_it_could_not_count_them(
        write: Callable[..., Path], cli: Callable[..., CliResult], llm_server: LLMServer) -> None:
    # --max-tokens 100 over a server that reports no usage: every call counted 0 tokens, all 6 conversations played,
    # "completed", exit 0, and nothing said that the budget never held
    llm_server.responder = no_usage
    write("d.yaml", f"target:\n  model: openai/target-m\n  api_base: {llm_server.url}\nconcurrency: 1\n"
                    "scorers:\n  - includes: ok\ndata:\n" + "".join(f"  - {{id: c{i}, input: q{i}}}\n" for i in range(6)))
    result = cli("run", "d.yaml", "--max-tokens", "100", "--json", "-")
    assert len(llm_server.requests) == 6
    assert result.code == 0 and result.json["status"] == "completed"
    assert ("warning: --max-tokens could not count 6 LLM call(s) whose response reported no token usage: "
            "openai/target-m (6 calls); they counted as 0 tokens and $0") in result.stderr
    # without a bound there is nothing to warn about
    plain = cli("run", "d.yaml", "--json", "-")
    assert plain.code == 0 and "reported no token usage" not in plain.stderr
    # a conversation's token limit is such a bound too
    write("l.yaml", (result.cwd / "d.yaml").read_text().replace("concurrency: 1\n", "concurrency: 1\nlimits: {tokens: 50}\n"))
    limited = cli("run", "l.yaml", "--json", "-")
    assert "limits.tokens could not count 6 LLM call(s)" in limited.stderr


def test_a_cost_budget_over_an_agent_whose_model_has_no_price_says_it_could_not_price_its_calls(
        write: Callable[..., Path], cli: Callable[..., CliResult], agent_env: dict[str, str],
        llm_server: LLMServer) -> None:
    # an evalcli.Agent's model is not checked before the run (only a model target's is): its calls cost $0 against
    # --max-cost 0.0001, every conversation played, "completed", and nothing said the budget never held
    write("d.yaml", "target: tool_agents:agent\nconcurrency: 1\nscorers:\n  - includes: F\ndata:\n"
                    + "".join(f"  - {{id: c{i}, input: What is the weather in Paris}}\n" for i in range(3)))
    result = cli("run", "d.yaml", "--max-cost", "0.0001", "--json", "-", env=agent_env)
    assert result.code == 0, result.stderr
    calls = result.json["usage"]["purposes"]["target"]["calls"]
    assert calls == len(llm_server.requests) >= 3
    assert (f"warning: --max-cost could not price {calls} LLM call(s): litellm's price table has no price for "
            f"openai/scripted ({calls} calls); they counted as $0") in result.stderr
    # tokens were counted: a token budget has nothing to say
    tokens = cli("run", "d.yaml", "--max-tokens", "1000000", "--json", "-", env=agent_env)
    assert tokens.code == 0 and "could not" not in tokens.stderr


def test_a_limit_written_with_an_exponent_yaml_reads_as_text_says_how_to_write_it(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    # yaml.safe_load reads 1e-6 as the string "1e-6": the error said "Input should be a valid number" and "fix the
    # value on that line" of a value that is a number to everyone but YAML 1.1
    write("d.yaml", "target: agents:echo\nlimits: {cost: 1e-6, turns: 1e1}\nscorers:\n  - includes: x\n"
                    "data:\n  - {id: a, input: x}\n")
    refused = cli("validate", "d.yaml")
    assert refused.code == 2 and "Traceback" not in refused.stderr
    assert "d.yaml:2:16: dataset: 'limits.cost': Input should be a valid number" in refused.stderr
    assert "hint: YAML reads 1e-6 as text, not a number" in refused.stderr and "write 1.0e-06" in refused.stderr
    assert "hint: YAML reads 1e1 as text, not a number" in refused.stderr and "write 10\n" in refused.stderr
    # what the hint says to write is read as the number
    write("d.yaml", "target: agents:echo\nlimits: {cost: 1.0e-06, turns: 10}\nscorers:\n  - includes: x\n"
                    "data:\n  - {id: a, input: x}\n")
    assert cli("validate", "d.yaml").code == 0


BLOCKING_AGENT = '''
import os

import evalcli


@evalcli.tool
def lookup(query: str) -> str:
    """Look something up."""
    return "R:" + query


def agent(input: str) -> str:
    # while the run plays, something takes the tape's place (a folder of that name): checked before the run, the
    # path was free
    os.makedirs(os.path.join("tapes", "d.tape.jsonl"), exist_ok=True)
    return "done " + lookup(query=input)
'''


def test_a_tape_that_cannot_be_written_at_the_end_is_said_beside_the_verdict_not_an_internal_error(
        workdir: Path, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    # the run played and stored its conversations, then the tape's write failed: "internal error ... this is a bug in
    # evalcli", exit 70, the run marked failed
    (workdir / "adv66_blocking.py").write_text(BLOCKING_AGENT)
    write("d.yaml", "target: adv66_blocking:agent\ngates:\n  - includes: done\ndata:\n  - {id: a, input: q}\n")
    result = cli("run", "d.yaml", "--record-tools", "tapes")
    assert result.code == 0, result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr
    assert "error: --record-tools could not write the tape tapes/d.tape.jsonl: IsADirectoryError" in result.stderr
    assert "the verdict and exit code are the run's own" in result.stderr
    assert "verdict: passed" in result.stdout
    row = result.db().execute("SELECT status, exit_code FROM runs").fetchone()
    assert tuple(row) == ("completed", 0)
    assert sorted(p.name for p in (workdir / "tapes").iterdir()) == ["d.tape.jsonl"]  # no half-written file beside it


def test_a_second_mock_entry_without_when_is_a_validation_error_not_a_mock_no_call_gets(
        tools_dir: Path, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    # only the first entry without `when` ever answers: the third entry (meant as "after that, 3") was accepted and
    # silently never used
    write("d.yaml", """
        target: adv66_tools:agent
        tools:
          lookup:
            - returns: {echo: first}
            - when: {query: x}
              returns: {echo: by-when}
            - returns: {echo: never}
        gates:
          - includes: done
        data:
          - {id: a, input: '{"query": "y"}'}
        """)
    result = cli("run", "d.yaml", "--db", "d.db")
    assert result.code == 2, result.stdout
    assert ("d.yaml:7:7: dataset: tools.lookup[2] is never used: tools.lookup[0] has no 'when' either, and answers "
            "every call no 'when' matches") in result.stderr
    assert "give this entry a 'when', or remove it" in result.stderr
    assert not (tools_dir / "d.db").exists()
    # so is a `when` an earlier entry already has
    write("e.yaml", """
        target: adv66_tools:agent
        tools:
          lookup:
            - when: {query: x}
              returns: {echo: first}
            - when: {query: x}
              returns: {echo: second}
        gates:
          - includes: done
        data:
          - {id: a, input: '{"query": "x"}'}
        """)
    same = cli("validate", "e.yaml")
    assert same.code == 2
    assert "e.yaml:6:7: dataset: tools.lookup[1] is never used: tools.lookup[0] has the same 'when'" in same.stderr


FLIPPING_AGENT = '''
import os


def agent(input: str) -> str:
    return "nope" if input in os.environ.get("FAIL", "").split(",") else "ok"
'''


def test_a_tiny_detect_is_printed_as_the_change_asked_for_never_zero_points(
        workdir: Path, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    (workdir / "adv66_flip.py").write_text(FLIPPING_AGENT)
    write("d.yaml", "target: adv66_flip:agent\ngates:\n  - includes: ok\ndata:\n"
                    + "".join(f"  - {{id: c{i}, input: c{i}}}\n" for i in range(10)))
    first = cli("run", "d.yaml", "--json", "-")
    second = cli("run", "d.yaml", "--json", "-", env={"FAIL": "c0,c1,c2"})
    a, b = first.json["run_id"], second.json["run_id"]
    diff = cli("diff", a, b, "--detect", "0.0004")
    # "to detect 0.0 points: 5887500 conversations" said a change of nothing needs millions
    assert "to detect 0.04 points: " in diff.stdout, diff.stdout
    assert "to detect 0.0 points" not in diff.stdout
    assert "to detect 5.0 points: " in cli("diff", a, b, "--detect", "0.05").stdout


def test_a_conversation_a_budget_stopped_is_shown_as_limited_in_the_table_and_in_show(
        write: Callable[..., Path], cli: Callable[..., CliResult], llm_server: LLMServer) -> None:
    # docs/budgets.md: its status is `limited`, shown as such; the JSON said limited, the run's table and `show` said
    # "error", as for a target that raised
    llm_server.responder = answer
    write("d.yaml", f"target:\n  model: openai/gpt-4o-mini\n  api_base: {llm_server.url}\nconcurrency: 1\n"
                    "scorers:\n  - includes: ok\ndata:\n" + "".join(f"  - {{id: c{i}, input: q{i}}}\n" for i in range(3)))
    result = cli("run", "d.yaml", "--max-tokens", "200")
    assert result.code == 5, result.stderr
    assert any(line.startswith("│ c2 ") and "│ limited" in line for line in result.stdout.splitlines()), result.stdout
    shown = cli("show", "latest", "c2")
    assert "stopped: budget)  status limited  FAILED" in shown.stdout, shown.stdout
    table = cli("show", "latest")
    assert any(line.startswith("│ c2 ") and "│ limited" in line for line in table.stdout.splitlines()), table.stdout


def test_a_change_for_the_better_beyond_the_noise_is_said_not_only_not_worse(
        workdir: Path, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    # six conversations fixed and none lost: McNemar's p = 2/64 = 0.031 (scipy.stats.binomtest(0, 6) by hand), the
    # gate's interval [+0.3, +0.9] wholly above 0 with Wilcoxon's p 0.031; the last line said only "B is not
    # significantly worse than A", the words it prints for one conversation flipping
    (workdir / "adv66_flip.py").write_text(FLIPPING_AGENT)
    write("d.yaml", "target: adv66_flip:agent\ngates:\n  - includes: ok\ndata:\n"
                    + "".join(f"  - {{id: c{i}, input: c{i}}}\n" for i in range(10)))
    before = cli("run", "d.yaml", "--json", "-", env={"FAIL": "c0,c1,c2,c3,c4,c5"}).json["run_id"]
    after = cli("run", "d.yaml", "--json", "-").json["run_id"]
    fixed = cli("diff", before, after, "--alpha", "0.05")
    assert fixed.code == 0
    assert "McNemar exact p = 0.0312" in fixed.stdout
    assert fixed.stdout.rstrip().endswith("B is better than A beyond the noise (alpha 0.05): exit 0"), fixed.stdout
    compared = cli("compare", before, after, "--alpha", "0.05")
    assert compared.code == 0
    assert f"better beyond the noise: {after}: exit 0" in compared.stdout
    # at 0.01 it is noise again, and the other way it is a regression
    assert cli("diff", before, after, "--alpha", "0.01").stdout.rstrip().endswith(
        "B is not significantly worse than A (alpha 0.01): exit 0")
    worse = cli("diff", after, before, "--alpha", "0.05")
    assert worse.code == 1 and worse.stdout.rstrip().endswith("B is worse than A beyond the noise (alpha 0.05): exit 1")
