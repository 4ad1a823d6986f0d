"""Every play is kept (docs/identity.md): with ``--repeat k`` each play's turns are stored under its play index, ``show RUN
ITEM`` shows every play (failing ones first; ``--play N`` for one), a reason is the reason of the play whose score it
explains, and per-turn gates get pass@k and pass^k. All through the real CLI, on an agent that skips its tool
every third call."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalcli.results import ItemResult, Outcome, TurnRecord
from evalcli.run.repeat import PassRates, mean_outcomes, reduce_repeats
from tests.conftest import CliResult

AGENT = '''
import json
from pathlib import Path

def generate(input, **kw):
    counter = Path(__file__).with_name("calls.txt")
    calls = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(calls))
    if calls % 3 == 0:  # every third call skips the tool
        return "no idea"
    return {"messages": [
        {"role": "assistant", "content": None, "tool_calls": [{"id": f"c{calls}", "type": "function",
            "function": {"name": "lookup", "arguments": json.dumps({"q": input})}}]},
        {"role": "tool", "tool_call_id": f"c{calls}", "content": "sunny"},
        {"role": "assistant", "content": f"found it: sunny (call {calls})"}]}
'''

DATASET = """
target: agent:generate
gates: [{called_tool: lookup}]
data:
  - id: ask
    turns:
      - input: weather in Paris?
        gates: [{includes: found}]
"""


def played(write: Callable[..., Path], cli: Callable[..., CliResult]) -> CliResult:
    write("agent.py", AGENT)
    write("d.yaml", DATASET)
    result = cli("run", "d.yaml", "--repeat", "3", "--concurrency", "1", "--json", "-")
    assert result.code == 1, result.stderr
    return result


def test_every_play_is_stored_under_its_index(workdir: Path, write: Callable[..., Path],
                                              cli: Callable[..., CliResult]) -> None:
    played(write, cli)
    conn = sqlite3.connect(workdir / "evalcli.db")
    rows = conn.execute("SELECT play, passed, turns FROM plays ORDER BY play").fetchall()
    assert [(play, passed) for play, passed, _ in rows] == [(1, 1), (2, 1), (3, 0)]
    outputs = [json.loads(turns)[0]["output"] for _, _, turns in rows]
    assert outputs[2] == [{"role": "assistant", "content": "no idea"}]
    assert outputs[0][-1]["content"] == "found it: sunny (call 1)"
    per_turn = json.loads(rows[2][2])[0]["outcomes"]["gates"]["includes(found)"]
    assert per_turn["passed"] is False and per_turn["score"] == 0


def test_show_lists_the_failing_play_first_and_play_n_shows_one(write: Callable[..., Path],
                                                                cli: Callable[..., CliResult]) -> None:
    run_id = played(write, cli).json["run_id"]
    shown = cli("show", run_id, "ask")
    assert shown.code == 0, shown.stderr
    text = shown.stdout
    assert text.index("play 3 of 3: FAILED") < text.index("play 1 of 3: passed") < text.index("play 2 of 3: passed")
    assert "no idea" in text and "(call 1)" in text and "(call 2)" in text
    third = cli("show", run_id, "ask", "--play", "3")
    assert third.code == 0 and "no idea" in third.stdout and "found it" not in third.stdout
    first = cli("show", run_id, "ask", "--play", "1", "--json", "-")
    assert first.json["play"] == 1 and first.json["item"]["turns"][0]["output"][-1]["content"].endswith("(call 1)")
    everything = cli("show", run_id, "ask", "--json", "-").json
    assert [p["play"] for p in everything["plays"]] == [3, 1, 2]
    missing = cli("show", run_id, "ask", "--play", "4")
    assert missing.code == 2 and "has no play 4: it was played 3 times" in missing.stderr


def test_the_reason_beside_a_failing_mean_is_a_failing_plays(write: Callable[..., Path],
                                                             cli: Callable[..., CliResult]) -> None:
    out = played(write, cli).json
    gate = out["items"][0]["outcomes"]["gates"]["called_tool(lookup)"]
    assert round(gate["score"], 3) == 0.667 and gate["passed"] is False
    assert gate["reason"].startswith("lookup called 0 times (needs 1)")
    turn_gate = out["items"][0]["turns"][0]["outcomes"]["gates"]["includes(found)"]
    assert round(turn_gate["score"], 3) == 0.667 and turn_gate["reason"] == "'found' not found in \"no idea\""
    shown = cli("show", out["run_id"], "ask").stdout
    means = shown[shown.index("all 3 plays"):]
    assert "lookup called 0 times (needs 1)" in means and "lookup called 1 time" not in means


def test_per_turn_gates_get_pass_at_k_and_pass_all_k(write: Callable[..., Path],
                                                     cli: Callable[..., CliResult]) -> None:
    out = played(write, cli).json
    assert out["pass_at_k"] == {"called_tool(lookup)": 1.0, "includes(found)": 1.0}
    assert out["pass_all_k"] == {"called_tool(lookup)": 0.0, "includes(found)": 0.0}


def test_merge_keeps_every_play_and_play_1_is_a_single_plays_only_play(workdir: Path, write: Callable[..., Path],
                                                                       cli: Callable[..., CliResult]) -> None:
    played(write, cli)
    merged = cli("merge", "evalcli.db", "--out", "all.db")
    assert merged.code == 1, merged.stderr
    shown = cli("show", "latest", "ask", "--db", "all.db", "--play", "3")
    assert shown.code == 0 and "no idea" in shown.stdout and "found it" not in shown.stdout
    once = cli("run", "d.yaml", "--db", "once.db", "--json", "-")
    assert cli("show", once.json["run_id"], "ask", "--db", "once.db", "--play", "1").code == 0
    second = cli("show", once.json["run_id"], "ask", "--db", "once.db", "--play", "2")
    assert second.code == 2 and "it was played 1 time" in second.stderr
    alone = cli("show", once.json["run_id"], "--db", "once.db", "--play", "1")
    assert alone.code == 2 and "name the conversation" in alone.stderr


OUTCOMES = st.one_of(st.builds(Outcome, score=st.floats(0, 1), reason=st.text(max_size=3)),
                     st.builds(Outcome, not_scorable=st.just(True), reason=st.text(max_size=3)))


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])  # a busy machine is no failure
@given(st.lists(st.dictionaries(st.sampled_from(["g", "h"]), OUTCOMES), min_size=1, max_size=5))
def test_a_means_reason_is_the_reason_of_a_lowest_scoring_play(plays: list[dict[str, Outcome]]) -> None:
    for key, reduced in mean_outcomes(plays).items():
        scored = [o for p in plays if (o := p.get(key)) is not None and not o.not_scorable]
        if not scored:
            assert reduced.not_scorable
            continue
        lowest = min(o.score or 0.0 for o in scored)
        explaining = next(o for o in scored if o.score == lowest)
        assert reduced.reason == explaining.reason
        # a gate whose mean shows a failure is explained by a play that failed it
        if reduced.missed_gate:
            assert explaining.missed_gate


SCALED = st.one_of(st.builds(Outcome, score=st.sampled_from([0.0, 0.5, 1.0 - 1e-12, 1.0, 1.25, 2.0, 3.0])),
                   st.builds(Outcome, not_scorable=st.just(True)))


def _play(top: dict[str, Outcome], turns: list[dict[str, Outcome]]) -> ItemResult:
    return ItemResult(0, "c", [], "turns", "ok", None, None, gate_scores=top,
                      turns=[TurnRecord(n, "hi", [], 0.0, gate_scores=gates) for n, gates in enumerate(turns)])


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.dictionaries(st.sampled_from(["g", "h"]), SCALED),
                          st.lists(st.dictionaries(st.just("t"), SCALED), min_size=2, max_size=2)),
                min_size=2, max_size=4))
def test_passed_stability_and_pass_k_follow_one_rule_whatever_the_score_range(
        plays: list[tuple[dict[str, Outcome], list[dict[str, Outcome]]]]) -> None:
    results = [_play(top, turns) for top, turns in plays]
    reduced = reduce_repeats(results)
    every_play = all(play.passed for play in results)
    # the conversation passes exactly when every play reached every gate on every turn: stable-pass
    assert reduced.passed is every_play
    assert (reduced.stability == "stable-pass") is every_play
    assert reduced.plays_passed == sum(play.passed for play in results)
    rates = PassRates()
    rates.add(reduced)
    for gate, scorable in reduced.gate_plays.items():
        if scorable:  # pass^k of a gate is 1 exactly when no play missed it, at the top level or on any turn
            assert (rates.pass_all_k()[gate] == 1.0) is (reduced.gate_passes[gate] == scorable)
    missed = {g for outcomes in (reduced.gate_scores, *(t.gate_scores for t in reduced.turns))
              for g, o in outcomes.items() if o.missed_gate}
    assert missed == {g for g, scorable in reduced.gate_plays.items() if reduced.gate_passes[g] < scorable}
