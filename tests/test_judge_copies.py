"""A judge's answer that is the prompt's own text is no answer (docs/judges.md, "Unusable answers"): a reasoning (or a
listed claim) copied from the placeholders, the example, a rule or the criterion is asked again, then recorded as the
judge's error; never stored as a reason, never a score."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalcli.llm.fence import TRANSCRIPT_END, TRANSCRIPT_START
from evalcli.scorers.judges.copies import PIECES, is_prompt_text, own_text, words
from evalcli.scorers.judges.criterion import judge_messages
from evalcli.scorers.judges.engine import COPY_PROMPT
from tests.conftest import CliResult
from tests.llm_server import LLMServer, Reply, Request, verdict

pytestmark = pytest.mark.usefixtures("llm_backend")  # every test on both backends

CRITERION = "The agent confirmed the new seat."
AGENT = """
def seat(input, **options):
    return "An error occurred while running the tool" if "copy" in input else "Sorry, the tool failed."
"""
DATASET = """
target: seat:seat
scorers:
  - judge: {{criterion: "{criterion}", model: openai/judge-model, api_base: "{url}"}}
data:
  - {{id: copied, input: copy it}}
  - {{id: mended, input: mend it}}
"""
EXAMPLE_REASON = "Turn 1 says 'Your table for two is booked for 8 pm.': the booking is done."


def judge_replies(request: Request) -> Reply:
    prompt = str(request.messages[1]["content"])
    if "An error occurred" in prompt:
        return verdict(True, CRITERION)  # the criterion as its reasoning, every time
    if request.messages[-1]["content"] == COPY_PROMPT.format(copied=json.dumps(EXAMPLE_REASON)):
        return verdict(False, "Turn 1 says the tool failed: the seat was never changed.")
    return verdict(True, EXAMPLE_REASON)  # the prompt's example, copied


def test_a_copied_reasoning_is_asked_again_then_the_judges_error(
        llm_server: LLMServer, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    llm_server.responder = judge_replies
    write("seat.py", AGENT)
    write("d.yaml", DATASET.format(criterion=CRITERION, url=llm_server.url))
    done = cli("run", "d.yaml", "--json", "-", env={"OPENAI_API_KEY": "sk-test-0123456789", "EVALCLI_LLM_RETRIES": "0"})
    items = {item["id"]: item for item in done.json["items"]}
    # old main: both scored 1, their reasons the criterion and the prompt's example
    # the judge's failure is that scorer's error: the conversation stands, the run exits 4 (docs/verdicts.md)
    judge = f"judge({CRITERION})"
    assert items["copied"]["status"] == "ok" and done.code == 4, items["copied"]
    copied = json.dumps(items["copied"])
    assert "repeated the prompt's own text" in copied and "after 3 attempts" in copied, copied
    assert done.json["summary"]["scorer_errors"] == {judge: 1}
    assert items["mended"]["status"] == "ok" and items["mended"]["scores"][judge] == 0.0
    assert len(llm_server.requests) == 3 + 2  # every copy was asked again (the mended one once)
    stored = " ".join(str(row[0]) for row in done.db().execute("SELECT outcomes FROM items"))
    assert "the seat was never changed" in stored and "table for two" not in stored


# --- the one rule: is_prompt_text ---------------------------------------------------------------

WORDS = ["QUOKKA", "ZEPHYR", "MANGO", "OXBOW", "PIXEL", "TUNDRA", "VORTEX", "WALRUS"]
"""Words no prompt of evalcli holds: what an agent says in these tests."""


@given(st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join), min_size=1, max_size=3),
       st.randoms(use_true_random=False))
@settings(max_examples=200, deadline=None)
def test_the_prompts_own_pieces_are_copies_and_the_evidence_is_not(turns: list[str], rng: random.Random) -> None:
    messages = judge_messages(CRITERION, [{"role": "assistant", "content": turn} for turn in turns])
    pieces = [piece for piece in PIECES.split(own_text(messages)) if words(piece)]
    piece = rng.choice(pieces)
    assert is_prompt_text(piece, messages), piece
    assert is_prompt_text(f"  {piece.upper()}!", messages)  # whatever its case and punctuation
    for turn in turns:  # a quote of what the conversation said is the model's evidence, not the prompt
        assert not is_prompt_text(turn, messages) and not is_prompt_text(f"Assistant turn 1: {turn}", messages)
    assert TRANSCRIPT_START not in own_text(messages) and TRANSCRIPT_END not in own_text(messages)


def test_a_reasoning_pieced_from_the_prompt_is_a_copy_and_one_that_uses_some_of_its_words_is_not() -> None:
    messages = judge_messages(CRITERION, [{"role": "assistant", "content": "An error occurred while running the tool"}])
    assert is_prompt_text("The agent confirmed the table for two is booked for 8 pm.", messages)  # criterion + example
    assert is_prompt_text("one or two", messages) is False  # no placeholder left to copy
    assert not is_prompt_text("Turn 1 reports an error, so the new seat was not confirmed.", messages)
    assert not is_prompt_text("Assistant turn 1: An error occurred while running the tool", messages)
