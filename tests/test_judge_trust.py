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
