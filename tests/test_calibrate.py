"""``evalcli calibrate`` (docs/recorded.md) through the real CLI, against a loopback judge whose verdicts depend on the
conversation it reads (and, for a panel, on the model asked): accuracy, Cohen's kappa, the confusion matrix, MAE,
Fleiss' kappa, the disagreements with their reasons, --min-agreement, and the calibrations table. Every expected
figure is worked out by hand here and checked again with an independent formula."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from evalcli.run.agreement import Confusion, agrees, binary_labels, cohen_kappa, fleiss_kappa, mean_absolute_error
from tests.conftest import CliResult
from tests.llm_server import LLMServer, Reply, Request, status, text

ENV = {"OPENAI_API_KEY": "sk-test-not-a-real-key-0123456789", "NO_PROXY": "127.0.0.1", "EVALCLI_LLM_RETRIES": "0"}


def answered(request: Request) -> str:
    """Which conversation a judge request is about: the ``ANSWER-<id>`` the assistant said in it."""
    found = re.search(r"ANSWER-([\w-]+)", request.messages[-1]["content"])
    assert found is not None
    return found.group(1)


def verdict(satisfied: bool, why: str) -> Reply:
    return text(json.dumps({"satisfied": satisfied, "reasoning": why}))


def item(name: str, labels: dict[str, Any] | None) -> str:
    label = f"\n    labels: {json.dumps(labels)}" if labels is not None else ""
    return (f"  - id: {name}\n    transcript: [{{role: user, content: \"Question {name}?\"}}, "
            f"{{role: assistant, content: ANSWER-{name}}}]{label}\n")


def independent_kappa(a: int, b: int, c: int, d: int) -> float:
    """Cohen's kappa of a 2x2 table written another way: 2(ad - bc) / ((a+b)(b+d) + (a+c)(c+d))."""
    return 2 * (a * d - b * c) / ((a + b) * (b + d) + (a + c) * (c + d))


def independent_fleiss(passes: list[int], raters: int) -> float:
    """Fleiss' kappa for two categories written another way: 1 - sum x(n-x) / (N n (n-1) p q), x = raters saying pass."""
    n, subjects = raters, len(passes)
    p = sum(passes) / (subjects * n)
    return 1 - sum(x * (n - x) for x in passes) / (subjects * n * (n - 1) * p * (1 - p))


# Ten conversations: the judge says satisfied for the six in JUDGED_PASS; the labels pass the five in LABELLED_PASS.
# label pass & judged pass: c1 c2 c3 c4 (4); label pass & judged fail: c5 (1); label fail & judged pass: c6 c7 (2);
# label fail & judged fail: c8 c9 c10 (3). Accuracy 7/10. Chance agreement ((5*6) + (5*4)) / 100 = 0.5, observed
# 0.7: kappa (0.7 - 0.5) / (1 - 0.5) = 0.4.
JUDGED_PASS = {"c1", "c2", "c3", "c4", "c6", "c7"}
LABELLED_PASS = {"c1", "c2", "c3", "c4", "c5"}
NAMES = [f"c{n}" for n in range(1, 11)]

REGISTRY = """
scorers:
  fair-judge:
    multi_turn_judge:
      model: openai/judge-a
      api_base: {url}
      criterion: The assistant answered.
  panel-judge:
    multi_turn_judge:
      models: [openai/judge-a, openai/judge-b, openai/judge-c]
      api_base: {url}
      criterion: The assistant answered well.
  share-judge:
    rubric:
      model: openai/judge-a
      api_base: {url}
      criteria: [First, Second]
"""


@pytest.fixture
def registry(llm_server: LLMServer, write: Callable[..., Path]) -> LLMServer:
    write("scorers.yaml", REGISTRY.format(url=llm_server.url))
    return llm_server


def test_binary_labels_accuracy_kappa_confusion_and_disagreements(registry: LLMServer, write: Callable[..., Path],
                                                                 cli: Callable[..., CliResult]) -> None:
    registry.responder = lambda r: verdict(answered(r) in JUDGED_PASS, f"judged {answered(r)}")
    items = "".join(item(n, {"fair-judge": "pass" if n in LABELLED_PASS else "fail"}) for n in NAMES)
    write("d.yaml", "scorers: [fair-judge]\ndata:\n" + items + item("unlabelled", None))
    result = cli("calibrate", "d.yaml", "--json", "-", env=ENV)
    assert result.code == 0, result.stderr
    assert len(registry.requests) == 10  # the unlabelled conversation is not judged
    data = result.json
    (judge,) = data["scorers"]
    assert (judge["id"], judge["kind"], judge["model"], judge["prompt_version"]) == ("fair-judge", "multi_turn_judge",
                                                                                   "openai/judge-a", "2")
    assert (judge["labels"], judge["compared"], judge["agreed"], judge["binary"]) == (10, 10, 7, True)
    assert judge["accuracy"] == 0.7
    assert judge["confusion"] == {"label_pass": {"judged_pass": 4, "judged_fail": 1},
                                  "label_fail": {"judged_pass": 2, "judged_fail": 3}}
    assert judge["kappa"] == pytest.approx(0.4) == pytest.approx(independent_kappa(4, 1, 2, 3))
    assert judge["mae"] is None and judge["fleiss_kappa"] is None and judge["errors"] == 0
    assert [(d["id"], d["label"], d["score"]) for d in judge["disagreements"]] == [
        ("c5", 1.0, 0.0), ("c6", 0.0, 1.0), ("c7", 0.0, 1.0)]
    assert judge["disagreements"][0]["reason"] == "Criterion not satisfied.\n\nThe assistant answered.\n\njudged c5"
    assert data["conversations"] == 10 and data["passed"] is True and data["min_agreement"] is None
    # the terminal: the table, the matrix, each disagreement with its reason and the show command
    assert "fair-judge" in result.stderr and "7/10 = 70%" in result.stderr and "0.400" in result.stderr
    assert "│ labelled pass │                    4 │           1 │" in result.stderr
    assert "  c6  labelled fail, scored 1" in result.stderr and "    judged c6" in result.stderr
    assert f"evalcli show {data['run_id']} c6" in result.stderr
    # stored: the run (its conversations can be shown) and one calibrations row
    db = result.db()
    row = db.execute("SELECT * FROM calibrations").fetchone()
    assert (row["run_id"], row["scorer_id"], row["kind"], row["model"], row["prompt_version"]) == (
        data["run_id"], "fair-judge", "multi_turn_judge", "openai/judge-a", "2")
    assert row["dataset"].endswith("d.yaml")
    assert (row["labels"], row["compared"], row["agreed"], row["errors"], row["not_scorable"]) == (10, 10, 7, 0, 0)
    assert row["accuracy"] == 0.7 and row["kappa"] == pytest.approx(0.4) and row["mae"] is None
    assert json.loads(row["spec"]) == {"kind": "multi_turn_judge", "args": {
        "model": "openai/judge-a", "criterion": "The assistant answered.", "scale": 1.0, "api_base": registry.url}}
    assert json.loads(row["metrics"])["confusion"] == judge["confusion"]
    assert db.execute("SELECT COUNT(*) FROM items WHERE run_id = ?", (data["run_id"],)).fetchone()[0] == 10
    shown = cli("show", data["run_id"], "c6")
    assert shown.code == 0 and "judged c6" in shown.stdout


def test_min_agreement_is_the_exit_code(registry: LLMServer, write: Callable[..., Path],
                                        cli: Callable[..., CliResult]) -> None:
    registry.responder = lambda r: verdict(answered(r) in JUDGED_PASS, "why")
    items = "".join(item(n, {"fair-judge": "pass" if n in LABELLED_PASS else "fail"}) for n in NAMES)
    write("d.yaml", "scorers: [fair-judge]\ndata:\n" + items)
    below = cli("calibrate", "d.yaml", "--min-agreement", "0.8", env=ENV)
    assert below.code == 1
    assert "BELOW --min-agreement 80%: fair-judge (7/10 = 70%)" in below.stdout
    assert len(registry.requests) == 10
    met = cli("calibrate", "d.yaml", "--min-agreement", "0.7", "--json", "-", env=ENV)
    assert met.code == 0 and met.json["passed"] is True and met.json["min_agreement"] == 0.7
    assert len(registry.requests) == 10  # the verdicts came from the cache
    assert met.db().execute("SELECT COUNT(*) FROM calibrations").fetchone()[0] == 2
    assert cli("calibrate", "d.yaml", "--min-agreement", "1.5", env=ENV).code == 2


# A panel of three on four conversations (T = satisfied):
#        judge-a judge-b judge-c   majority  label
#   p1      T       T       T        pass     pass
#   p2      T       F       T        pass     fail
#   p3      F       F       F        fail     fail
#   p4      T       F       F        fail     fail
# Fleiss: agreement per conversation 1, 1/3, 1, 1/3 (mean 2/3); pass share 6/12 = 0.5, chance 0.5^2 + 0.5^2 = 0.5;
# kappa (2/3 - 1/2) / (1 - 1/2) = 1/3. Accuracy 3/4; Cohen: observed 0.75, chance (1*2 + 3*2) / 16 = 0.5, kappa 0.5.
PANEL = {"p1": {"judge-a", "judge-b", "judge-c"}, "p2": {"judge-a", "judge-c"}, "p3": set(), "p4": {"judge-a"}}


def test_a_panel_majority_and_its_fleiss_kappa(registry: LLMServer, write: Callable[..., Path],
                                               cli: Callable[..., CliResult]) -> None:
    registry.responder = lambda r: verdict(r.body["model"] in PANEL[answered(r)], r.body["model"])
    items = "".join(item(n, {"panel-judge": "pass" if n == "p1" else "fail"}) for n in PANEL)
    write("d.yaml", "scorers: [panel-judge]\ndata:\n" + items)
    result = cli("calibrate", "d.yaml", "--json", "-", env=ENV)
    assert result.code == 0, result.stderr
    assert len(registry.requests) == 12
    (panel,) = result.json["scorers"]
    assert panel["model"] == "openai/judge-a, openai/judge-b, openai/judge-c" and panel["raters"] == 3
    assert panel["fleiss_kappa"] == pytest.approx(1 / 3) == pytest.approx(independent_fleiss([3, 2, 0, 1], 3))
    assert panel["accuracy"] == 0.75 and panel["kappa"] == pytest.approx(0.5) == pytest.approx(
        independent_kappa(1, 0, 1, 2))
    (disagreement,) = panel["disagreements"]
    assert (disagreement["id"], disagreement["score"], disagreement["agreement"]) == ("p2", 1.0, "2/3")
    assert "2 of 3 models agree (majority: 1)." in disagreement["reason"]
    assert "0.333 (3 models)" in result.stderr
    row = result.db().execute("SELECT model, fleiss_kappa FROM calibrations").fetchone()
    assert row["model"] == "openai/judge-a, openai/judge-b, openai/judge-c"
    assert row["fleiss_kappa"] == pytest.approx(1 / 3)


# A scale judge: the rubric's share of two criteria met. Scores s1 1, s2 0.5, s3 0, s4 0.5 against labels 1, 0.5,
# 0.5, 0.6: s3 is 0.5 away (disagrees), s4 0.1 away (agrees). Accuracy 3/4; MAE (0 + 0 + 0.5 + 0.1) / 4 = 0.15.
MET = {"s1": (True, True), "s2": (True, False), "s3": (False, False), "s4": (False, True)}
SHARE_LABELS = {"s1": 1, "s2": 0.5, "s3": 0.5, "s4": 0.6}


def test_scale_labels_accuracy_within_a_tenth_and_mean_absolute_error(registry: LLMServer, write: Callable[..., Path],
                                                                      cli: Callable[..., CliResult]) -> None:
    def reply(request: Request) -> Reply:
        first, second = MET[answered(request)]
        return text(json.dumps({"verdicts": [{"criterion": 1, "reasoning": "r", "satisfied": first},
                                             {"criterion": 2, "reasoning": "r", "satisfied": second}]}))

    registry.responder = reply
    items = "".join(item(n, {"share-judge": label}) for n, label in SHARE_LABELS.items())
    write("d.yaml", "scorers: [share-judge]\ndata:\n" + items)
    result = cli("calibrate", "d.yaml", "--json", "-", env=ENV)
    assert result.code == 0, result.stderr
    (share,) = result.json["scorers"]
    assert share["binary"] is False and share["prompt_version"] == "rubric/2"
    assert (share["compared"], share["agreed"]) == (4, 3)
    assert share["mae"] == pytest.approx(0.15) and share["kappa"] is None and share["confusion"] is None
    assert [(d["id"], d["label"], d["score"]) for d in share["disagreements"]] == [("s3", 0.5, 0.0)]


def test_only_the_labelled_and_chosen_scorers_run(registry: LLMServer, write: Callable[..., Path],
                                                  cli: Callable[..., CliResult]) -> None:
    registry.responder = lambda r: verdict(True, "yes")
    write("d.yaml", "scorers:\n  - fair-judge\n  - panel-judge\n  - {scorer: {includes: ANSWER}, id: said}\ndata:\n"
          + item("a", {"fair-judge": "pass", "said": "pass"}) + item("b", {"said": 1}) + item("c", None))
    only = cli("calibrate", "d.yaml", "--scorer", "said", "--json", "-", env=ENV)
    assert only.code == 0, only.stderr
    assert [s["id"] for s in only.json["scorers"]] == ["said"] and registry.requests == []
    assert only.json["scorers"][0]["accuracy"] == 1.0 and only.json["conversations"] == 2
    both = cli("calibrate", "d.yaml", "--json", "-", env=ENV)
    assert [s["id"] for s in both.json["scorers"]] == ["fair-judge", "said"]
    # the calibrated scorers run on every conversation labelled for one of them (fair-judge on a, and on b, which
    # is labelled for said only: scored, not compared); panel-judge has no label and never runs
    assert len(registry.requests) == 2 and {answered(r) for r in registry.requests} == {"a", "b"}
    assert both.json["scorers"][0]["compared"] == 1
    unknown = cli("calibrate", "d.yaml", "--scorer", "nope", env=ENV)
    assert unknown.code == 2 and "--scorer nope: d.yaml has no gate or scorer with that id" in unknown.stderr
    unlabelled = cli("calibrate", "d.yaml", "--scorer", "panel-judge", env=ENV)
    assert unlabelled.code == 2 and "no conversation of d.yaml has a label for it" in unlabelled.stderr
    write("none.yaml", "scorers: [fair-judge]\ndata:\n" + item("a", None))
    nothing = cli("calibrate", "none.yaml", env=ENV)
    assert nothing.code == 2 and "has labels: there is nothing to calibrate" in nothing.stderr


def test_calibrate_plays_the_target_for_scripted_items_and_gates_can_be_labelled(
        write: Callable[..., Path], cli: Callable[..., CliResult], workdir: Path) -> None:
    write("d.yaml", "target: agents:recorder\ngates: [{scorer: {includes: recorded}, id: said}]\n"
          "scorers: [{scorer: {includes: nope}, id: nope}]\ndata:\n"
          "  - {id: a, input: one, labels: {said: pass, nope: pass}}\n  - {id: b, input: two, labels: {said: fail}}\n"
          "  - {id: c, input: three}\n")
    result = cli("calibrate", "d.yaml", "--json", "-")
    assert result.code == 0, result.stderr
    calls = [json.loads(line)["input"] for line in (workdir / "calls.jsonl").read_text().splitlines()]
    assert sorted(calls) == ["one", "two"]  # the unlabelled conversation is not played
    said, nope = result.json["scorers"]
    assert (said["id"], said["role"], said["agreed"], said["compared"]) == ("said", "gate", 1, 2)
    assert (nope["id"], nope["agreed"], nope["compared"], nope["kappa"]) == ("nope", 0, 1, 0.0)


def test_errors_are_left_out_and_counted(registry: LLMServer, write: Callable[..., Path],
                                         cli: Callable[..., CliResult]) -> None:
    registry.responder = lambda r: status(500) if answered(r) == "b" else verdict(True, "yes")
    write("d.yaml", "scorers: [fair-judge]\ndata:\n" + item("a", {"fair-judge": "pass"}) + item("b", {"fair-judge": 1}))
    result = cli("calibrate", "d.yaml", "--json", "-", env=ENV)
    assert result.code == 4
    (judge,) = result.json["scorers"]
    assert (judge["labels"], judge["compared"], judge["agreed"], judge["errors"]) == (2, 1, 1, 1)
    # the judge's failure is its own error: the conversation stands, the scorer's errors say it
    assert result.json["errors"] == 0 and "1 scorer error: fair-judge (left out of the comparison)" in result.stderr
    # unknown accuracy is below any --min-agreement, and 1 beats 4
    registry.responder = lambda r: status(500)
    write("e.yaml", "scorers: [fair-judge]\ndata:\n" + item("z", {"fair-judge": "pass"}))
    assert cli("calibrate", "e.yaml", "--min-agreement", "0.1", "--no-cache", env=ENV).code == 1


def test_the_arithmetic() -> None:
    assert binary_labels([0.0, 1.0, 1.0]) and not binary_labels([0.0, 0.5])
    assert agrees(1.0, 0.5, binary=True) and not agrees(1.0, 0.49, binary=True)
    assert agrees(0.6, 0.5, binary=False) and not agrees(0.6, 0.49, binary=False)
    everything_passes = Confusion.of([(1.0, 1.0), (1.0, 0.9)])
    assert everything_passes.pass_pass == 2 and cohen_kappa(everything_passes) is None  # chance agreement is 1
    assert cohen_kappa(Confusion()) is None and mean_absolute_error([]) is None
    assert cohen_kappa(Confusion.of([(1, 1), (0, 0)])) == 1.0 and cohen_kappa(Confusion.of([(1, 0), (0, 1)])) == -1.0
    assert fleiss_kappa([[True, True], [True, True]]) is None and fleiss_kappa([[True]]) is None
    assert fleiss_kappa([]) is None and fleiss_kappa([[True, False], [True]]) is None
    assert fleiss_kappa([[True, True, True], [False, False, False]]) == 1.0
    # the textbook example (Fleiss 1971's layout, Wikipedia's worked table: 10 subjects, 14 raters, 5 categories)
    table = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
             [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]
    subjects = [[category for category, count in enumerate(row) for _ in range(count)] for row in table]
    assert fleiss_kappa(subjects) == pytest.approx(0.210, abs=0.001)
