"""Thresholds compare with a tolerance (docs/scorers.md#thresholds-compare-with-a-tolerance): a mean within 1e-9 of
its bound reaches it, in one function (``evalcli.results.within``) that the verdict, the tables, the per-turn results,
diff, compare and the pytest plugin all use. Three scores of 0.7 average 0.6999999999999998 in floating point, and
reach 0.7 (Mastra's mean misses it: a deliberate deviation)."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalcli.aggregate import Mean
from evalcli.results import TOLERANCE, Outcome, Threshold, within
from tests.conftest import CliResult
from tests.pytest_project import run_pytest, write_project

SCORES = '''
def agent(input, **kw):
    return "ok " + input

def quality(run):
    """The score the item's ground truth names (per turn: the turn's)."""
    value = (run.ground_truth or {})["q"]
    return value[run.turn_index] if isinstance(value, list) else value
'''

DATASET = """
target: scores:agent
scorers:
  - scorer: {python: "scores:quality"}
    id: quality
    threshold: 0.7
  - scorer: {python: "scores:quality"}
    id: bounded
    threshold: {min: 0.2, max: 0.7}
data:
  - {id: a, input: a, ground_truth: {q: 0.7}}
  - {id: b, input: b, ground_truth: {q: 0.7}}
  - {id: c, input: c, ground_truth: {q: 0.7}}
"""

PER_TURN = """
target: scores:agent
data:
""" + "".join(f"""
  - id: t{n}
    ground_truth: {{q: [0.1, 0.1]}}
    turns:
      - input: one
      - input: two
        scorers: [{{scorer: {{python: "scores:quality"}}, id: turn-q, threshold: 0.1}}]
""" for n in range(10))


def test_three_scores_of_07_reach_a_07_threshold_in_the_verdict_the_table_and_strict(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    assert sum([0.7] * 3) / 3 == 0.6999999999999998  # what the run averages, exactly
    write("scores.py", SCORES)
    write("d.yaml", DATASET)
    done = cli("run", "d.yaml", "--strict", "--json", "out.json")
    assert done.code == 0, done.stdout + done.stderr
    out = (done.cwd / "out.json").read_text()
    assert '"verdict": "passed"' in out
    assert "FAIL" not in done.stdout
    row = next(line for line in done.stdout.splitlines() if line.startswith("│ quality"))
    assert [cell.strip() for cell in row.split("│")[1:5]] == ["quality", "0.7", ">= 0.7", "pass"], row

    write("t.yaml", PER_TURN)  # ten turns' 0.1 average 0.09999999999999999
    turns = cli("run", "t.yaml", "--strict", "--json", "-")
    assert turns.code == 0, turns.stdout + turns.stderr
    result = turns.json["turn_results"][1]["threshold_results"][0]
    assert (result["average_score"], result["passed"]) == (0.09999999999999999, True)
    assert turns.json["verdict"] == "passed"


def test_diff_and_compare_read_the_same_verdict(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("scores.py", SCORES)
    write("d.yaml", DATASET)
    first = cli("run", "d.yaml", "--json", "-").json["run_id"]
    second = cli("run", "d.yaml", "--json", "-").json["run_id"]
    compared = cli("compare", first, second, "--json", "-")
    assert compared.code == 0, compared.stderr
    rows = {row["id"]: row["passed"] for row in compared.json["rows"]}
    assert rows == {"quality": [True, True], "bounded": [True, True]}
    assert "FAIL" not in compared.stderr
    diffed = cli("diff", first, second, "--json", "-")
    assert diffed.code == 0 and diffed.json["verdict_a"] == diffed.json["verdict_b"] == "passed", diffed.stderr


@pytest.mark.slow
def test_pytest_reads_the_same_verdict(tmp_path: Path) -> None:
    write_project(tmp_path, {"scores.py": SCORES, "d.yaml": DATASET})
    done = run_pytest(tmp_path, "d.yaml", "--evalcli-strict", "--junitxml=junit.xml")
    assert done.code == 0, done.out
    assert done.junit()["d.yaml::verdict"] == ("passed", "")


@given(st.floats(min_value=-1e3, max_value=1e3, allow_nan=False), st.integers(min_value=1, max_value=200))
def test_equal_scores_reach_their_own_value_as_a_threshold(score: float, count: int) -> None:
    mean = Mean()
    for _ in range(count):
        mean.add(score)
    assert Threshold.from_raw(score).passed(mean.value)
    assert Threshold.from_raw({"max": score}).passed(mean.value)
    assert Threshold.from_raw({"min": score, "max": score}).passed(mean.value)


@given(st.floats(allow_nan=True, allow_infinity=True), st.one_of(st.none(), st.floats(-10, 10)),
       st.one_of(st.none(), st.floats(-10, 10)))
def test_within_is_an_inclusive_bound_with_the_tolerance(value: float, low: float | None, high: float | None) -> None:
    expected = math.isfinite(value) and (low is None or value >= low - TOLERANCE) and (
        high is None or value <= high + TOLERANCE)
    assert within(value, low, high) is expected
    threshold = Threshold(low, high, {"min": low, "max": high})
    assert threshold.passed(value) is expected
    # a gate is a threshold of 1: one conversation's gate and a run's mean read the same rule
    assert Outcome(score=value).missed_gate is not within(value, 1.0)


def test_the_tolerance_is_tiny() -> None:
    assert within(0.7 - 1e-9, 0.7) and not within(0.7 - 2e-9, 0.7)
    assert within(0.3 + 1e-9, None, 0.3) and not within(0.3 + 2e-9, None, 0.3)
    assert not within(0.69, 0.7) and not within(None, 0.0)
