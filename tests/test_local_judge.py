"""The embedded offline judge through the real CLI (docs/models.md, "The embedded model's answers"): its reasoning
opens with a quote of the conversation (llama.cpp's grammar holds it to that), never the prompt's own text, and an
agent that answered with an error is not scored as having done the thing. One judge call: the model is slow."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from evalcli.scorers.judges.copies import is_prompt_text
from evalcli.scorers.judges.criterion import judge_messages
from tests.conftest import CliResult, run_cli

pytestmark = pytest.mark.slow  # the embedded model: a minute of CPU on a busy machine

CRITERION = "The agent confirmed the new seat."
ERROR = "An error occurred while running the tool"
AGENT = f"""
def seat(input, **options):
    return {ERROR!r}
"""
DATASET = f"""
target: seat:seat
scorers:
  - judge: {{criterion: "{CRITERION}", model: local/gemma-3-270m}}
data:
  - {{id: seat, input: Move me to seat 14C.}}
"""


def test_the_offline_judges_reason_quotes_the_conversation_and_an_error_is_not_a_pass(
        write: Callable[..., Path], workdir: Path) -> None:
    write("seat.py", AGENT)
    write("d.yaml", DATASET)
    # the model loaded, then up to three answers, on a CPU other tests share
    done: CliResult = run_cli(["run", "d.yaml", "--json", "-", "--no-cache"], workdir, timeout=900)
    (item,) = done.json["items"]
    outcome = item["outcomes"]["scorers"][f"judge({CRITERION})"]
    if item["status"] == "error":  # no usable answer in three: the judge's error, never a score
        assert "repeated the prompt's own text" in item["error"], item["error"]
        return
    # old main: score 1, reasoning "one or two sentences" (the prompt's placeholder)
    assert outcome["score"] == 0.0, outcome
    reasoning = outcome["reason"].split("\n\n", 2)[2]
    assert reasoning.startswith(f"Assistant turn 1: {ERROR}"), reasoning
    messages = judge_messages(CRITERION, [{"role": "assistant", "content": ERROR}])
    assert not is_prompt_text(reasoning, messages), reasoning
    assert "one or two sentences" not in json.dumps(done.json)
