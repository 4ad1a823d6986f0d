"""Judges you can trust (docs/judges.md#confirm-on-fail, docs/judges.md#calibrated-gates): a judge asked again only
after a failing verdict, and gates that refuse to run on a judge nobody measured. Through the real CLI against the
loopback judge, whose verdicts the tests script (by the conversation it reads and the sample's seed) and count."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.conftest import CliResult
from tests.llm_server import LLMServer, Reply, Request, text

ENV = {"OPENAI_API_KEY": "sk-test-not-a-real-key-0123456789", "NO_PROXY": "127.0.0.1", "EVALCLI_LLM_RETRIES": "0"}


def scripted(verdicts: dict[str, dict[int | None, bool]]) -> Callable[[Request], Reply]:
    """The judge's verdict by the assistant's words it reads (a key of ``verdicts``) and the sample's seed."""
    def reply(request: Request) -> Reply:
        shown = json.dumps(request.body["messages"])
        said = next(word for word in verdicts if word in shown)
        seed = request.body.get("seed")
        return text(json.dumps({"satisfied": verdicts[said][seed], "reasoning": f"{said} seed {seed}"}))
    return reply


def calls_for(server: LLMServer, word: str) -> list[int | None]:
    """The seeds the judge was asked with about the conversation where the assistant said ``word``."""
    return sorted(r.body.get("seed") for r in server.requests if word in json.dumps(r.body["messages"]))


CONFIRMED = """
gates:
  - scorer: {{judge: {{criterion: The assistant gave a forecast., model: openai/judge-a, api_base: "{url}",
              samples: {{n: 3, when: fail}}}}}}
    id: forecast
data:
  - id: sure
    transcript: [{{role: user, content: Weather}}, {{role: assistant, content: Sunny.}}]
  - id: confirmed-fail
    transcript: [{{role: user, content: Weather}}, {{role: assistant, content: Rainy.}}]
  - id: overturned
    transcript: [{{role: user, content: Weather}}, {{role: assistant, content: Cloudy.}}]
"""


def test_confirm_on_fail_asks_again_only_after_a_failing_verdict(llm_server: LLMServer, write: Callable[..., Path],
                                                                  cli: Callable[..., CliResult]) -> None:
    llm_server.responder = scripted({"Sunny": {1: True, 2: False, 3: False},
                                     "Rainy": {1: False, 2: True, 3: False},
                                     "Cloudy": {1: False, 2: True, 3: True}})
    write("d.yaml", CONFIRMED.format(url=llm_server.url))
    result = cli("run", "d.yaml", "--json", "-", env=ENV)
    assert result.code == 1, result.stderr
    assert calls_for(llm_server, "Sunny") == [1]  # passed at once: never asked again
    assert calls_for(llm_server, "Rainy") == [1, 2, 3]
    assert calls_for(llm_server, "Cloudy") == [1, 2, 3]
    items = {i["id"]: i["outcomes"]["gates"]["forecast"] for i in result.json["items"]}
    assert (items["sure"]["score"], items["sure"]["agreement"]) == (1.0, "1/1")
    assert [s["seed"] for s in items["sure"]["samples"]] == [1]
    assert "the other 2 samples were not asked" in items["sure"]["reason"]
    assert (items["confirmed-fail"]["score"], items["confirmed-fail"]["agreement"]) == (0.0, "2/3")
    assert (items["overturned"]["score"], items["overturned"]["agreement"]) == (1.0, "2/3")
    # the record keeps every verdict, the failing first one included
    assert [(s["seed"], s["score"]) for s in items["overturned"]["samples"]] == [(1, 0.0), (2, 1.0), (3, 1.0)]
    assert "the first verdict failed, so 2 more were asked" in items["overturned"]["reason"]
    stored = result.db().execute("SELECT outcomes FROM items WHERE item_id = 'overturned'").fetchone()
    assert [s["seed"] for s in json.loads(stored["outcomes"])["gates"]["forecast"]["samples"]] == [1, 2, 3]
    assert [i["passed"] for i in result.json["items"]] == [True, False, True]


def test_confirm_on_fail_is_validated_with_its_place(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", """
        gates:
          - judge: {criterion: ok, model: openai/a, samples: {n: 2, when: fail}}
          - judge: {criterion: fine, model: openai/a, samples: {n: 3, when: sometimes}}
        data: [{transcript: [{role: user, content: hi}]}]
        """)
    result = cli("validate", "d.yaml")
    assert result.code == 2
    assert "d.yaml:2:" in result.stderr and "samples must be an odd number from 1 to 9" in result.stderr
    assert "d.yaml:3:" in result.stderr and "samples' when must be 'fail' or 'always', got 'sometimes'" in result.stderr


CALIBRATED = """
gates:
  - scorer: {{judge: {{criterion: "{criterion}", model: openai/judge-a, api_base: "{url}"}}}}
    id: forecast
    calibrated: {{min_kappa: 0.6, min_labels: 4}}
data:
  - id: sunny
    transcript: [{{role: user, content: Weather}}, {{role: assistant, content: Sunny.}}]
    labels: {{forecast: pass}}
  - id: rainy
    transcript: [{{role: user, content: Weather}}, {{role: assistant, content: Rainy.}}]
    labels: {{forecast: pass}}
  - id: dunno
    transcript: [{{role: user, content: Weather}}, {{role: assistant, content: Dunno.}}]
    labels: {{forecast: fail}}
  - id: busy
    transcript: [{{role: user, content: Weather}}, {{role: assistant, content: Busy.}}]
    labels: {{forecast: fail}}
"""
RIGHT = {"Sunny": {None: True}, "Rainy": {None: True}, "Dunno": {None: False}, "Busy": {None: False}}


def test_a_calibrated_gate_refuses_to_run_until_its_exact_judge_is_measured(
        llm_server: LLMServer, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    llm_server.responder = scripted(RIGHT)
    write("d.yaml", CALIBRATED.format(url=llm_server.url, criterion="The assistant gave a forecast."))
    refused = cli("run", "d.yaml", env=ENV)
    assert refused.code == 2 and llm_server.requests == []  # refused before any judge was asked
    assert "d.yaml:2:5" in refused.stderr and 'the gate "forecast" may not gate this run' in refused.stderr
    assert "calibrated {min_kappa: 0.6, min_labels: 4}" in refused.stderr
    assert "never calibrated in this configuration" in refused.stderr
    assert "evalcli calibrate d.yaml --scorer forecast --db evalcli.db" in refused.stderr
    assert "Traceback" not in refused.stderr
    listed = cli("judges", "d.yaml", "--json")
    assert listed.code == 0, listed.stderr
    judge, = json.loads(listed.stdout)["datasets"][0]["judges"]
    assert (judge["id"], judge["role"], judge["may_gate"], judge["calibration"]) == ("forecast", "gate", False, None)

    calibrated = cli("calibrate", "d.yaml", env=ENV)  # the bar never stops the measuring
    assert calibrated.code == 0, calibrated.stderr
    asked = len(llm_server.requests)
    assert asked == 4
    passed = cli("run", "d.yaml", "--json", "-", env=ENV)
    assert passed.code == 1, passed.stderr  # it gated: two conversations fail the judge
    assert [i["passed"] for i in passed.json["items"]] == [True, True, False, False]
    table = cli("judges", "d.yaml")
    assert "forecast" in table.stdout and "4 labels, accuracy 1.000, kappa 1.000" in table.stdout
    assert "yes" in table.stdout

    # another criterion is another judge: measured afresh before it may gate
    write("d.yaml", CALIBRATED.format(url=llm_server.url, criterion="The assistant named a city."))
    again = cli("run", "d.yaml", env=ENV)
    assert again.code == 2 and "never calibrated in this configuration" in again.stderr


def test_a_calibration_below_the_bar_is_refused_with_its_figures(
        llm_server: LLMServer, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    llm_server.responder = scripted({**RIGHT, "Busy": {None: True}})  # one disagreement: kappa 0.5
    write("d.yaml", CALIBRATED.format(url=llm_server.url, criterion="The assistant gave a forecast."))
    assert cli("calibrate", "d.yaml", env=ENV).code == 0
    refused = cli("run", "d.yaml", env=ENV)
    assert refused.code == 2
    assert "kappa 0.500, below min_kappa 0.6" in refused.stderr and "labels compared" not in refused.stderr
    listed = json.loads(cli("judges", "d.yaml", "--json").stdout)["datasets"][0]["judges"][0]
    assert listed["may_gate"] is False and listed["lacks"] == ["kappa 0.500, below min_kappa 0.6"]
    assert listed["calibration"]["compared"] == 4 and listed["calibration"]["kappa"] == 0.5


def test_calibrated_on_a_check_or_a_scorer_is_a_located_error(write: Callable[..., Path],
                                                              cli: Callable[..., CliResult]) -> None:
    write("d.yaml", """
        gates:
          - scorer: {includes: sunny}
            calibrated: {min_kappa: 0.6}
        scorers:
          - scorer: {judge: {criterion: ok, model: openai/a}}
            calibrated: {min_kappa: 0.6}
          - scorer: {judge: {criterion: fine, model: openai/a}}
            calibrated: {min_kapa: 0.6, min_labels: 0}
        data: [{transcript: [{role: user, content: hi}]}]
        """)
    result = cli("validate", "d.yaml")
    assert result.code == 2
    assert "d.yaml:3:5: 'calibrated' is set on the gate \"includes(sunny)\", which is the check 'includes'" \
        in result.stderr
    assert "d.yaml:6:5: 'calibrated' is set on the scorer \"judge(ok)\"" in result.stderr
    assert "d.yaml:8:5" in result.stderr  # the wrong keys of a scorer's bar are reported with it being a scorer
