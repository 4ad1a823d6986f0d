"""Scores that are what happened: pass@k and pass^k leave not-scorable plays out, a non-finite score is its
scorer's error, factuality judges the last assistant text, and a failing scorer hides no other score."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from evalcli.llm.fence import TRANSCRIPT_END, TRANSCRIPT_START
from evalcli.scorers.base import ScorerRun, TurnView
from tests.conftest import CliResult
from tests.llm_server import LLMServer

GATES = '''
import collections, pathlib
from evalcli import Score, not_scorable

_plays = collections.Counter()

def sometimes(run):
    """Not scorable on the first play of 'odd' conversations, on every play of 'never'; else it passes."""
    _plays[run.input] += 1
    if run.input == "never" or (run.input == "odd" and _plays[run.input] == 1):
        return not_scorable("nothing to check on this play")
    return Score(1.0, "checked")

def answer(input, **kw):
    here = pathlib.Path(__file__).parent
    if input == "odd" and (here / "broken").exists():
        raise RuntimeError("down")
    return "ok " + input

answer.memory = True
'''


def test_pass_at_k_leaves_not_scorable_plays_out(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("g.py", GATES)
    write("d.yaml", "target: g:answer\ngates: [{python: 'g:sometimes'}]\n"
                    "data: [{id: a, input: odd}, {id: b, input: never}, {id: c, input: plain}]\n")
    result = cli("run", "d.yaml", "--repeat", "2", "--concurrency", "1", "--json", "-")
    out = result.json
    gate = "python(g:sometimes)"
    assert out["gate_results"] == [{"id": gate, "passed": True, "score": 1.0}]
    # 'never' is never scorable: left out; 'odd' passed on its only scorable play: in pass@k and pass^k
    assert out["pass_at_k"] == {gate: 1.0} and out["pass_all_k"] == {gate: 1.0}, result.stderr
    assert result.code == 0


def test_a_resumed_repeat_run_counts_every_conversation_in_pass_at_k(workdir: Path, write: Callable[..., Path],
                                                                    cli: Callable[..., CliResult]) -> None:
    write("g.py", GATES)
    write("d.yaml", "target: g:answer\ngates: [{python: 'g:sometimes'}]\n"
                    "data: [{id: a, input: odd}, {id: c, input: plain}, {id: d, input: other}]\n")
    (workdir / "broken").write_text("")
    first = cli("run", "d.yaml", "--repeat", "3", "--json", "-")
    assert first.code == 4 and first.json["summary"]["errors"] == 1
    (workdir / "broken").unlink()
    resumed = cli("run", "d.yaml", "--resume", first.json["run_id"], "--json", "-")
    uninterrupted = cli("run", "d.yaml", "--repeat", "3", "--json", "-", "--db", "other.db")
    gate = "python(g:sometimes)"
    assert resumed.json["pass_at_k"] == uninterrupted.json["pass_at_k"] == {gate: 1.0}, resumed.stderr
    assert resumed.json["pass_all_k"] == uninterrupted.json["pass_all_k"] == {gate: 1.0}
    with resumed.db() as conn:
        rows = conn.execute("SELECT item_id, repeats, gate_plays FROM items ORDER BY item_index").fetchall()
    assert [(r[0], r[1], json.loads(r[2])) for r in rows] == [
        ("a", 3, {gate: [2, 2]}), ("c", 3, {gate: [3, 3]}), ("d", 3, {gate: [3, 3]})]


def test_factuality_judges_the_last_assistant_text_not_a_tool_calls_preamble(llm_server: LLMServer) -> None:
    from tests.test_library_judges import fenced, make, prompts, reply, score

    turn = [{"role": "assistant", "content": "PREAMBLE: Let me look that up.", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "22C"},
            {"role": "assistant", "content": "ANSWER: It is 22C in Paris."}]
    llm_server.push(reply({"reasoning": "same", "category": "C"}))
    outcome = score(make(llm_server, "factuality", {"reference": "22C in Paris"}),
                    ScorerRun("weather?", turn, turns=(TurnView(0, "weather?", turn),)))
    answer = fenced(prompts(llm_server)[0], TRANSCRIPT_START, TRANSCRIPT_END)
    assert outcome.score == 1.0 and "ANSWER: It is 22C in Paris." in answer and "PREAMBLE" not in answer


INFINITE = '''
def infinite(run):
    return float("inf") if "inf" in run.input else 1.0

def nan_score(run):
    from evalcli import Score
    return Score(float("nan"), "no idea")
'''


def test_a_non_finite_score_is_its_scorers_error_and_merge_gives_the_same_verdict(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("inf.py", INFINITE)
    write("d.yaml", "target: agents:echo\ngates: [{python: 'inf:infinite'}]\n"
                    "data: [{id: a, input: inf}, {id: b, input: fine}]\n")
    result = cli("run", "d.yaml", "--json", "-")
    out = result.json
    gate = out["items"][0]["outcomes"]["gates"]["python(inf:infinite)"]
    assert gate["score"] == 0.0 and "returned the score inf: a score must be a finite number" in gate["error"]
    assert out["gate_results"] == [{"id": "python(inf:infinite)", "passed": False, "score": 0.5}]
    merged = cli("merge", "evalcli.db", "--out", "merged.db")
    assert merged.code == result.code == 1 and "verdict failed" in merged.stdout, merged.stdout + merged.stderr
    write("n.yaml", "target: agents:echo\nscorers: [{python: 'inf:nan_score'}]\ndata: [{id: a, input: x}]\n")
    scorer = cli("run", "n.yaml", "--json", "-")
    assert scorer.code == 4 and scorer.json["items"][0]["status"] == "ok"
    assert "returned the score nan" in scorer.json["items"][0]["outcomes"]["scorers"]["python(inf:nan_score)"]["error"]


PICKY = '''
def picky(run):
    if "boom" in run.input:
        raise ValueError("cannot score this one")
    return 0.5
'''


def test_a_failing_scorer_keeps_the_scores_that_were_computed(write: Callable[..., Path],
                                                              cli: Callable[..., CliResult]) -> None:
    write("picky.py", PICKY)
    write("d.yaml", "target: agents:echo\ngates: [{includes: said}]\n"
                    "scorers: [{includes: said}, {python: 'picky:picky'}, {excludes: zzz}]\n"
                    "data: [{id: exploding, input: boom}, {id: calm, input: fine}]\n")
    result = cli("run", "d.yaml", "--json", "-", "--html", "r.html", env={"COLUMNS": "200"})
    out = result.json
    first = out["items"][0]
    assert result.code == 4 and out["verdict"] == "passed"
    assert first["status"] == "ok" and first["error"] is None  # the conversation stands
    assert first["gate_scores"] == {"includes(said)": 1.0}
    assert first["scores"] == {"includes(said)": 1.0, "python(picky:picky)": None, "excludes(zzz)": 1.0}
    assert first["outcomes"]["scorers"]["python(picky:picky)"]["error"] == "ValueError: cannot score this one"
    # the scorer's error counts in no mean, and is counted as its own
    assert out["scores"] == {"includes(said)": 1.0, "python(picky:picky)": 0.5, "excludes(zzz)": 1.0}
    assert out["summary"]["errors"] == 0 and out["summary"]["scorer_errors"] == {"python(picky:picky)": 1}
    assert "verdict: passed; 1 scorer error: python(picky:picky) (exit 4)" in result.stderr
    table = cli("show", "latest").stdout
    row = next(line for line in table.splitlines() if line.startswith("│ exploding"))
    assert [cell.strip() for cell in row.split("│")[4:9]] == ["1", "error", "1", "1/1", "ok"], row
    shown = cli("show", "latest", "exploding").stdout
    assert "scorer includes(said)  1" in shown and "scorer python(picky:picky)  error" in shown
    assert "scorer excludes(zzz)  1" in shown
    page = (result.cwd / "r.html").read_text()
    transcripts = json.loads(page.split('id="evalcli-transcripts">', 1)[1].split("</script>", 1)[0])
    scores = {o["id"]: o["score"] for o in transcripts[0]["outcomes"]}
    assert scores == {"includes(said)": "1", "python(picky:picky)": "error", "excludes(zzz)": "1"}


def test_a_tracked_judge_that_cannot_answer_leaves_the_gates_and_verdict_standing(
        write: Callable[..., Path], cli: Callable[..., CliResult], llm_server: LLMServer) -> None:
    from tests.llm_server import text

    llm_server.responder = lambda request: text("I would rather not say.")  # never a readable verdict
    write("d.yaml", f"""
        target: agents:echo
        scorers: [{{grounded: {{model: openai/judge-model, api_base: "{llm_server.url}"}}}}]
        data:
          - id: chat
            turns:
              - {{input: hello, gates: [{{includes: hello}}]}}
              - {{input: weather, gates: [{{includes: weather}}]}}
        """)
    result = cli("run", "d.yaml", "--json", "-", env={"EVALCLI_LLM_RETRIES": "0"})
    out = result.json
    item = out["items"][0]
    # old main: the conversation an error, verdict none, no turn gate in the JSON's results or in show
    assert item["status"] == "ok" and out["verdict"] == "passed", result.stderr
    assert out["summary"]["scorer_errors"] == {"grounded": 1} and out["scores"] == {}
    assert item["outcomes"]["scorers"]["grounded"]["score"] is None
    assert "no readable" in item["outcomes"]["scorers"]["grounded"]["error"]
    assert [[g["passed"] for g in t["gate_results"]] for t in out["turn_results"]] == [[True], [True]]
    assert result.code == 4  # a scorer's error is an error: never a silent pass
    assert "verdict: passed; 1 scorer error: grounded (exit 4)" in result.stderr
    shown = cli("show", "latest", "chat")
    assert "status ok" in shown.stdout and "gate includes(hello)  1  pass" in shown.stdout
    assert "gate includes(weather)  1  pass" in shown.stdout and "scorer grounded  error" in shown.stdout
    table = cli("show", "latest").stdout
    assert "verdict: passed; 1 scorer error: grounded (exit 4)" in table
