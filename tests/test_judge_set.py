"""The labelled set shipped in datasets/judges/ (docs/recorded.md): a dataset of recorded, labelled conversations for the
demo judge and for every library judge, each judge as registered in scorers.yaml, and ``evalcli calibrate`` on it
measuring a judge model (here a loopback judge that answers as the labels say: full agreement)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from evalcli.dataset import load_dataset, load_registry
from evalcli.messages import assistant_texts
from evalcli.scorers import all_kinds
from tests.conftest import REPO, run_cli
from tests.llm_server import LLMServer, Request, text

JUDGES = REPO / "datasets" / "judges"


def datasets() -> list[Path]:
    return sorted(JUDGES.glob("*.yaml"))


def test_every_judge_has_a_labelled_set_with_both_outcomes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("EVALCLI_JUDGE_MODEL", raising=False)
    kinds = set()
    for path in datasets():
        dataset = load_dataset(path)
        (spec,) = dataset.scorers
        kinds.add(spec.kind)
        assert spec.registered and dataset.target is None and len(dataset.items) >= 9
        assert all(i.recorded and set(i.labels) == {spec.id} for i in dataset.items)
        labels = [i.labels[spec.id] for i in dataset.items]
        assert 1.0 in labels and 0.0 in labels, path.name  # full marks, and none
    assert kinds == {k.name for k in all_kinds() if k.group == "judge"}
    root = load_registry(REPO / "scorers.yaml").scorers
    demo = yaml.safe_load((REPO / "datasets" / "weather.yaml").read_text())["scorers"]
    assert "weather-judge" in demo and root["weather-judge"].kind == "multi_turn_judge"


def test_calibrate_on_the_weather_judge_set_with_a_judge_that_agrees(llm_server: LLMServer, tmp_path: Path) -> None:
    lines = [json.loads(line) for line in (JUDGES / "weather-judge.jsonl").read_text().splitlines()]
    last = {assistant_texts(line["messages"])[-1].splitlines()[0]: line["labels"]["weather-judge"] for line in lines}
    assert len(last) == len(lines) == 12  # each conversation's last words are its own

    def judge(request: Request) -> object:
        prompt = request.messages[-1]["content"]
        (label,) = [label for words, label in last.items() if f": {words}\n" in prompt]
        return text(json.dumps({"satisfied": label == "pass", "reasoning": "as labelled"}))

    llm_server.responder = judge  # type: ignore[assignment]
    env = {"EVALCLI_JUDGE_MODEL": "openai/agreeable", "OPENAI_API_BASE": llm_server.url,
           "OPENAI_API_KEY": "sk-test-not-a-real-key-0123456789", "NO_PROXY": "127.0.0.1", "EVALCLI_LLM_RETRIES": "0"}
    result = run_cli(["calibrate", "datasets/judges/weather-judge.yaml", "--db", str(tmp_path / "c.db"), "--json", "-",
                      "--min-agreement", "1"], REPO, env)
    assert result.code == 0, result.stderr
    (judge_row,) = result.json["scorers"]
    assert (judge_row["id"], judge_row["model"], judge_row["compared"], judge_row["accuracy"], judge_row["kappa"]) == (
        "weather-judge", "openai/agreeable", 12, 1.0, 1.0)
    assert judge_row["confusion"] == {"label_pass": {"judged_pass": 6, "judged_fail": 0},
                                      "label_fail": {"judged_pass": 0, "judged_fail": 6}}
    assert len(llm_server.requests) == 12
