"""Gates, thresholds, per-turn results and verdicts (docs/verdicts.md), ported from Mastra's own runEvals scenarios.

Scores come from custom Python scorers that read them from each item's ground truth, so every
scenario of the reference ("a scorer that returns .85") is one small dataset.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalcli.aggregate import Aggregator, exit_code, verdict
from evalcli.results import GateResult, ItemResult, Outcome, Plan, ThresholdResult, TurnResult
from evalcli.run import RunOptions, run_evals

FIXED = '''
import asyncio
from evalcli import Score, not_scorable

def _value(run, key):
    truth = run.ground_truth or {}
    value = truth.get(key)
    if isinstance(value, list):
        value = value[run.turn_index or 0]
    if value == "ns":
        return not_scorable("marked not scorable")
    if value == "raise":
        raise RuntimeError(f"{key} boom")
    if value is None:
        return not_scorable("no value")
    return value

def quality(run): return _value(run, "quality")
def filler(run): return _value(run, "filler")
def gate(run): return _value(run, "gate")
def gate2(run): return _value(run, "gate2")
async def turn(run):
    await asyncio.sleep(0)
    return _value(run, "turn")
def reason(run): return Score(0.5, "half way")
def output_len(run): return float(len(run.output))
def bad_type(run): return "high"
'''


def run_dataset(tmp_path: Path, data: dict[str, Any], **options: Any) -> dict[str, Any]:
    from tests.conftest import AGENTS

    (tmp_path / "agents.py").write_text(AGENTS)
    (tmp_path / "fixed.py").write_text(FIXED)
    path = tmp_path / "d.yaml"
    path.write_text(yaml.safe_dump({"target": "agents:scripted", **data}, sort_keys=False))
    result = run_evals(path, options=RunOptions(**options))
    out = result.to_json()
    out["exit_code"] = result.exit_code
    return out


def items(*values: dict[str, Any], key: str = "quality") -> list[dict[str, Any]]:
    return [{"input": f"question {i}", "ground_truth": v} for i, v in enumerate(values)]


Q = {"python": "fixed:quality"}
G = {"python": "fixed:gate"}


def named(ref: Any, name: str, threshold: Any = None) -> dict[str, Any]:
    entry = {"scorer": ref, "id": name}
    if threshold is not None:
        entry["threshold"] = threshold
    return entry


# -- Mastra's scenarios: gates.scenario --------------------------------------------------------------------------------

def test_passing_gate_passes(tmp_path: Path) -> None:
    out = run_dataset(tmp_path, {"gates": [named(G, "always-pass-gate")], "scorers": [named(Q, "quality")],
                                 "data": items({"gate": 1, "quality": 0.9})})
    assert out["verdict"] == "passed"
    assert out["gate_results"] == [{"id": "always-pass-gate", "passed": True, "score": 1.0}]
    assert out["scores"] == {"quality": 0.9}
    assert out["exit_code"] == 0


def test_failing_gate_fails_and_exits_1(tmp_path: Path) -> None:
    out = run_dataset(tmp_path, {"gates": [named(G, "always-fail-gate")], "scorers": [Q],
                                 "data": items({"gate": 0, "quality": 0.9})})
    assert out["verdict"] == "failed"
    assert out["gate_results"] == [{"id": "always-fail-gate", "passed": False, "score": 0.0}]
    assert out["exit_code"] == 1


def test_one_failing_gate_of_two_fails(tmp_path: Path) -> None:
    out = run_dataset(tmp_path, {"gates": [named(G, "pass"), named({"python": "fixed:gate2"}, "fail")],
                                 "scorers": [{"python": "fixed:filler"}],
                                 "data": items({"gate": 1, "gate2": 0, "filler": 0.5})})
    assert out["verdict"] == "failed"
    assert [g["passed"] for g in out["gate_results"]] == [True, False]


@pytest.mark.parametrize(("score", "threshold", "verdict_", "passed"), [
    (0.85, 0.7, "passed", True), (0.3, 0.7, "scored", False), (0.7, 0.7, "passed", True),
    (0.69, 0.7, "scored", False), (0.9, {"max": 0.3}, "scored", False), (0.1, {"max": 0.3}, "passed", True),
    (0.5, {"min": 0.3, "max": 0.7}, "passed", True), (0.9, {"min": 0.3, "max": 0.7}, "scored", False),
    (0.3, {"min": 0.3, "max": 0.7}, "passed", True), (0.71, {"min": 0.3, "max": 0.7}, "scored", False),
    (0.29, {"min": 0.3, "max": 0.7}, "scored", False), (1.5, 1, "passed", True), (0, 0, "passed", True),
])
def test_threshold_is_an_inclusive_bound_on_the_average(tmp_path: Path, score: float, threshold: Any,
                                                        verdict_: str, passed: bool) -> None:
    out = run_dataset(tmp_path, {"scorers": [named(Q, "quality", threshold)], "data": items({"quality": score})})
    assert out["verdict"] == verdict_
    assert out["threshold_results"] == [{"id": "quality", "passed": passed, "average_score": float(score),
                                         "threshold": threshold}]
    assert out["exit_code"] == 0  # scored is 0 without --strict


def test_scored_with_strict_exits_3(tmp_path: Path) -> None:
    out = run_dataset(tmp_path, {"scorers": [named(Q, "quality", 0.7)], "data": items({"quality": 0.3})},
                      strict=True)
    assert (out["verdict"], out["exit_code"]) == ("scored", 3)


@pytest.mark.parametrize(("gate", "quality", "expected"), [(1, 0.3, "scored"), (0, 0.9, "failed"), (1, 0.9, "passed")])
def test_gate_failure_dominates_thresholds(tmp_path: Path, gate: float, quality: float, expected: str) -> None:
    out = run_dataset(tmp_path, {"gates": [G], "scorers": [named(Q, "quality", 0.7)],
                                 "data": items({"gate": gate, "quality": quality})})
    assert out["verdict"] == expected


def test_no_gates_and_no_thresholds_means_no_verdict(tmp_path: Path) -> None:
    out = run_dataset(tmp_path, {"scorers": [named(Q, "quality")], "data": items({"quality": 0.8})})
    assert out["verdict"] is None
    assert out["gate_results"] == [] and out["threshold_results"] == []
    assert out["scores"] == {"quality": 0.8}
    assert out["exit_code"] == 0


def test_bare_and_thresholded_scorers_both_appear_in_scores(tmp_path: Path) -> None:
    out = run_dataset(tmp_path, {"scorers": [named(Q, "bare-scorer"), named({"python": "fixed:filler"},
                                                                            "threshold-scorer", 0.8)],
                                 "data": items({"quality": 0.75, "filler": 0.9})})
    assert out["verdict"] == "passed"
    assert out["scores"] == {"bare-scorer": 0.75, "threshold-scorer": 0.9}
    assert [t["id"] for t in out["threshold_results"]] == ["threshold-scorer"]


def test_gate_average_below_one_fails(tmp_path: Path) -> None:
    out = run_dataset(tmp_path, {"gates": [G], "data": items({"gate": 1}, {"gate": 0}, {"gate": 1})})
    assert out["verdict"] == "failed"
    assert out["gate_results"][0]["score"] == (1 + 0 + 1) / 3
    assert out["summary"]["total_items"] == 3


def test_scores_above_one_are_not_clamped_and_pass_a_gate(tmp_path: Path) -> None:
    out = run_dataset(tmp_path, {"gates": [G], "scorers": [Q], "data": items({"gate": 10, "quality": 2.5})})
    assert out["gate_results"][0] == {"id": "python(fixed:gate)", "passed": True, "score": 10.0}
    assert out["scores"] == {"python(fixed:quality)": 2.5}
    assert out["verdict"] == "passed"


def test_a_gate_that_raises_scores_zero_and_is_not_an_item_error(tmp_path: Path) -> None:
    out = run_dataset(tmp_path, {"gates": [named(G, "boom")], "data": items({"gate": "raise"})})
    assert out["gate_results"] == [{"id": "boom", "passed": False, "score": 0.0}]
    assert out["verdict"] == "failed"
    assert out["summary"]["errors"] == 0
    assert out["items"][0]["status"] == "ok"


def test_a_scorer_that_raises_is_its_own_error_left_out_of_its_mean(tmp_path: Path) -> None:
    out = run_dataset(tmp_path, {"scorers": [named(Q, "quality", 0.5)],
                                 "data": items({"quality": 1}, {"quality": "raise"}, {"quality": 0.5})})
    assert out["summary"] == {"total_items": 3, "errors": 0, "not_scorable": {}, "scorer_errors": {"quality": 1}}
    assert out["scores"] == {"quality": 0.75}
    # the conversation stands; the scorer's outcome is its error, counted in no mean
    assert out["items"][1]["status"] == "ok" and out["items"][1]["error"] is None
    assert out["items"][1]["scores"] == {"quality": None}
    assert "boom" in out["items"][1]["outcomes"]["scorers"]["quality"]["error"]
    assert out["verdict"] == "passed"
    assert out["exit_code"] == 4  # an error all the same


def test_max_errors_tolerates_item_errors(tmp_path: Path) -> None:
    data = {"scorers": [Q], "data": items({"quality": 1}, {"quality": "raise"})}
    assert run_dataset(tmp_path, data, max_errors=1)["exit_code"] == 0
    assert run_dataset(tmp_path, data, max_errors=0)["exit_code"] == 4


def test_failed_gate_outranks_item_errors(tmp_path: Path) -> None:
    out = run_dataset(tmp_path, {"gates": [G], "scorers": [Q],
                                 "data": items({"gate": 0, "quality": 1}, {"gate": 1, "quality": "raise"})})
    assert (out["verdict"], out["exit_code"]) == ("failed", 1)


def test_custom_scorer_returning_a_wrong_type_is_its_error(tmp_path: Path) -> None:
    out = run_dataset(tmp_path, {"scorers": [{"python": "fixed:bad_type"}], "data": items({})})
    assert out["items"][0]["status"] == "ok" and out["exit_code"] == 4
    assert "returned str" in out["items"][0]["outcomes"]["scorers"]["python(fixed:bad_type)"]["error"]


# -- Mastra's scenarios: averaging and not-scorable --------------------------------------------------------------------

def test_not_scorable_runs_are_left_out_of_means_and_counted(tmp_path: Path) -> None:
    out = run_dataset(tmp_path, {"scorers": [named(Q, "relevancy"), named({"python": "fixed:filler"}, "completeness"),
                                             named({"python": "fixed:gate2"}, "refund")],
                                 "data": items({"quality": 1, "filler": 0.5, "gate2": "ns"},
                                               {"quality": "ns", "filler": 1, "gate2": "ns"})})
    assert out["scores"] == {"relevancy": 1.0, "completeness": 0.75}
    assert out["summary"]["not_scorable"] == {"relevancy": 1, "refund": 2}


def test_everything_not_scorable_gives_no_verdict(tmp_path: Path) -> None:
    out = run_dataset(tmp_path, {"gates": [named(G, "nsgate")], "scorers": [named(Q, "ns", 0.5)],
                                 "data": items({"gate": "ns", "quality": "ns"}, {"gate": "ns", "quality": "ns"})})
    assert out["scores"] == {}
    assert out["summary"] == {"total_items": 2, "errors": 0, "not_scorable": {"nsgate": 2, "ns": 2}}
    assert out["gate_results"] == [] and out["threshold_results"] == [] and out["verdict"] is None


def test_partly_not_scorable_threshold(tmp_path: Path) -> None:
    out = run_dataset(tmp_path, {"scorers": [named(Q, "half", 0.5)], "data": items({"quality": "ns"},
                                                                                   {"quality": 0.4})})
    assert out["scores"] == {"half": 0.4}
    assert out["summary"]["not_scorable"] == {"half": 1}
    assert out["threshold_results"] == [{"id": "half", "passed": False, "average_score": 0.4, "threshold": 0.5}]
    assert out["verdict"] == "scored"


def test_means_are_summed_in_dataset_order_whatever_the_finishing_order(tmp_path: Path) -> None:
    values = [0.13, 0.85, 0.76, 0.26, 0.5, 0.45, 0.65, 0.79, 0.09, 0.03]
    total = 0.0
    for v in values:
        total += v
    expected = total / len(values)
    reverse = 0.0
    for v in reversed(values):
        reverse += v
    assert reverse / len(values) != expected  # the order really matters for these floats
    (tmp_path / "slow.py").write_text(textwrap.dedent("""
        import asyncio
        async def slow(input, **kw):
            await asyncio.sleep(0.3 - 0.03 * int(input.split()[-1]))  # later items finish first
            return input
    """))
    data = {"scorers": [named(Q, "q")], "data": items(*({"quality": v} for v in values)),
            "concurrency": 10}
    out = run_dataset(tmp_path, {**data, "target": "slow:slow"})
    assert out["scores"]["q"] == expected


# -- Mastra's scenarios: multi-turn ------------------------------------------------------------------------------------

def test_inputs_scorers_see_the_accumulated_output_once_per_item(tmp_path: Path) -> None:
    out = run_dataset(tmp_path, {"scorers": [named({"python": "fixed:output_len"}, "count")],
                                 "data": [{"inputs": ["a", "b", "c"]}, {"input": "single"}]})
    assert out["scores"] == {"count": (3 + 1) / 2}
    assert [len(i["turns"]) for i in out["items"]] == [3, 1]


def test_turn_results_average_by_turn_index_across_conversations(tmp_path: Path) -> None:
    turn0 = {"input": "q=>alpha", "gates": [{"includes": "alpha"}]}
    data = [
        {"turns": [turn0, {"input": "q=>beta", "scorers": [{"scorer": {"includes": "beta"}, "threshold": 0.6},
                                                              {"excludes": "zzz"}]}]},
        {"turns": [turn0, {"input": "q=>gamma", "scorers": [{"scorer": {"includes": "beta"}, "threshold": 0.6},
                                                               {"excludes": "zzz"}]}]},
    ]
    out = run_dataset(tmp_path, {"data": data})
    assert out["turn_results"] == [
        {"index": 0, "gate_results": [{"id": "includes(alpha)", "passed": True, "score": 1.0}],
         "threshold_results": [], "scores": {}},
        {"index": 1, "gate_results": [],
         "threshold_results": [{"id": "includes(beta)", "passed": False, "average_score": 0.5, "threshold": 0.6}],
         "scores": {"includes(beta)": 0.5, "excludes(zzz)": 1.0}},
    ]
    assert out["scores"] == {}
    assert out["verdict"] == "scored"


def test_a_later_turn_cannot_satisfy_an_earlier_turns_gate(tmp_path: Path) -> None:
    data = [{"turns": [{"input": "one", "gates": [{"called_tool": "get_weather"}]},
                       {"input": "two", "gates": [{"called_tool": {"name": "get_weather", "times": 2}}]}]}]
    out = run_dataset(tmp_path, {"target": "agents:tool_agent", "gates": [{"called_tool": {"name": "get_weather",
                                                                                           "times": 2}}],
                                 "data": data})
    assert out["gate_results"] == [{"id": "called_tool(get_weather, times=2)", "passed": True, "score": 1.0}]
    assert out["turn_results"][0]["gate_results"][0]["passed"] is True
    assert out["turn_results"][1]["gate_results"] == [{"id": "called_tool(get_weather, times=2)", "passed": False,
                                                        "score": 0.0}]
    assert out["verdict"] == "failed"


def test_per_turn_gate_that_raises_scores_zero(tmp_path: Path) -> None:
    data = [{"turns": [{"input": "x", "gates": [named(G, "boom")]}], "ground_truth": {"gate": "raise"}}]
    out = run_dataset(tmp_path, {"data": data})
    assert out["turn_results"][0]["gate_results"] == [{"id": "boom", "passed": False, "score": 0.0}]
    assert out["verdict"] == "failed"


def test_per_turn_gate_sees_only_its_turn(tmp_path: Path) -> None:
    data = [{"turns": [{"input": "please call the tool", "gates": [named({"includes": "call"}, "g")]},
                       {"input": "do not do anything", "gates": [named({"includes": "call"}, "g")]}]}]
    out = run_dataset(tmp_path, {"data": data})
    assert [t["gate_results"][0]["passed"] for t in out["turn_results"]] == [True, False]
    assert out["verdict"] == "failed"


def test_turn_results_present_even_without_per_turn_assertions(tmp_path: Path) -> None:
    out = run_dataset(tmp_path, {"scorers": [{"includes": "a"}], "data": [{"turns": [{"input": "a"}, {"input": "b"}]},
                                                                          {"input": "single"}]})
    assert out["turn_results"] == [{"index": i, "gate_results": [], "threshold_results": [], "scores": {}}
                                   for i in (0, 1)]


def test_turn_index_present_in_some_conversations_only_is_averaged_over_those(tmp_path: Path) -> None:
    turn = {"python": "fixed:turn"}
    data = [{"turns": [{"input": "a", "scorers": [turn]}], "ground_truth": {"turn": [0.2]}},
            {"turns": [{"input": "a", "scorers": [turn]}, {"input": "b", "scorers": [turn]}],
             "ground_truth": {"turn": [0.4, 0.9]}}]
    out = run_dataset(tmp_path, {"data": data})
    assert out["turn_results"][0]["scores"] == {"python(fixed:turn)": (0.2 + 0.4) / 2}
    assert out["turn_results"][1]["scores"] == {"python(fixed:turn)": 0.9}


def test_per_turn_not_scorable_counted_in_summary(tmp_path: Path) -> None:
    turn = {"python": "fixed:turn"}
    data = [{"turns": [{"input": "a", "gates": [named(turn, "tg")]}, {"input": "b", "scorers": [turn]}],
             "ground_truth": {"turn": ["ns", "ns"]}}]
    out = run_dataset(tmp_path, {"data": data})
    assert out["summary"]["not_scorable"] == {"tg": 1, "python(fixed:turn)": 1}
    assert out["verdict"] is None


def test_first_threshold_seen_wins_for_a_per_turn_id(tmp_path: Path) -> None:
    def conv(threshold: float) -> dict[str, Any]:
        return {"turns": [{"input": "x", "scorers": [named({"includes": "x"}, "has-x", threshold)]}]}
    out = run_dataset(tmp_path, {"data": [conv(0.2), conv(0.9)]})
    assert out["turn_results"][0]["threshold_results"][0]["threshold"] == 0.2


# -- pure verdict and exit-code rules ---------------------------------------------------------------------------

def test_verdict_rules() -> None:
    ok_gate, bad_gate = GateResult("g", True, 1.0), GateResult("g", False, 0.5)
    ok_t, bad_t = ThresholdResult("t", True, 1, 1), ThresholdResult("t", False, 0, 1)
    assert verdict([], [], []) is None
    assert verdict([ok_gate], [], []) == "passed"
    assert verdict([bad_gate], [ok_t], []) == "failed"
    assert verdict([ok_gate], [bad_t], []) == "scored"
    assert verdict([], [], [TurnResult(0, [], [], {"x": 1})]) is None
    assert verdict([ok_gate], [ok_t], [TurnResult(1, [bad_gate], [], {})]) == "failed"
    assert verdict([], [ok_t], [TurnResult(1, [], [bad_t], {})]) == "scored"


def test_exit_code_precedence() -> None:
    def summary(v: Any, errors: int) -> Any:
        agg = Aggregator(Plan([], [], {}), [])
        s = agg.summary()
        s.verdict, s.errors = v, errors
        return s
    assert exit_code(summary("failed", 3), strict=True) == 1
    assert exit_code(summary("scored", 1), strict=True) == 4
    assert exit_code(summary("scored", 0), strict=True) == 3
    assert exit_code(summary("scored", 0), strict=False) == 0
    assert exit_code(summary(None, 2), strict=False, max_errors=2) == 0
    assert exit_code(summary("passed", 0), strict=True, invalid=True) == 2


def test_aggregator_folds_out_of_order_results_in_dataset_order() -> None:
    plan = Plan([], ["s"], {})
    values = {0: 0.1, 1: 0.2, 2: 0.3}
    agg = Aggregator(plan, [0, 1, 2])
    for index in (2, 0, 1):
        agg.add(ItemResult(index, str(index), [], "input", "ok", None, None,
                           scores={"s": Outcome(score=values[index])}))
    assert agg.summary().scores["s"] == (0.1 + 0.2 + 0.3) / 3
