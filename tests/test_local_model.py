"""Smoke test: the embedded offline model, end to end through litellm, the client and the judge."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from evalcli.llm.client import LLMClient, LLMSettings, UsageSink, current_usage
from evalcli.llm.local_model import chat_messages, gemma_prompt, grammar_for, load
from evalcli.results import Outcome
from evalcli.scorers.base import ScorerRun
from evalcli.scorers.judges.criterion import VERDICT_SCHEMA, JudgeArgs, MultiTurnJudge

T = TypeVar("T")

pytestmark = pytest.mark.usefixtures("llm_backend")  # every test on both backends (docs/models.md)

MODEL = "local/gemma-3-270m"


def in_thread(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run off the main thread, as evalcli runs the model (llama.cpp's decode is several times slower on Python's
    main thread here: measured 18-32 s against 3 s for the same completion)."""
    return asyncio.run(asyncio.to_thread(function, *args, **kwargs))


def test_local_model_completes_and_judges() -> None:
    client = LLMClient(LLMSettings(retries=0, timeout=300))
    sink = UsageSink()
    schema_format = {"type": "json_schema", "json_schema": {"name": "verdict", "schema": VERDICT_SCHEMA}}

    async def go() -> tuple[dict[str, Any], Outcome]:
        current_usage.set(sink)
        response = await client.complete(
            model=MODEL,
            messages=[{"role": "system", "content": "Answer in JSON."}, {"role": "user", "content": "Is 2 > 1?"}],
            purpose="test",
            temperature=0,
            max_tokens=48,
            response_format=schema_format,
        )
        judge = MultiTurnJudge(
            JudgeArgs(model=MODEL, criterion="The assistant gave a weather forecast for Brooklyn."),
            scorer_id="smoke",
            llm=client,
        )
        run = ScorerRun(input="", output=[{"role": "assistant", "content": "Brooklyn: sunny, 22C today."}])
        return response, await judge.score(run)

    response, outcome = asyncio.run(go())
    assert response["model"] == MODEL
    content = response["choices"][0]["message"]["content"]
    assert isinstance(json.loads(content), dict)  # the grammar makes even a tiny model emit JSON
    assert sink.records[0].model == MODEL and sink.records[0].completion_tokens > 0
    # a verdict came back (0 or 1), or, if the small model produced nothing readable, an error: never a silent pass
    if outcome.error is None:
        assert outcome.score in (0.0, 1.0)
        assert (outcome.reason or "").startswith(("Criterion satisfied.", "Criterion not satisfied."))
    else:
        assert outcome.score is None


def test_messages_are_shaped_for_the_gemma_template() -> None:
    shaped = chat_messages([
        {"role": "system", "content": "Rules."},
        {"role": "user", "content": "Q"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c", "content": "42"},
        {"role": "user", "content": "and?"},
    ])
    assert shaped == [
        {"role": "user", "content": "Rules.\n\nQ"},
        {"role": "assistant", "content": "Called f({})"},
        {"role": "user", "content": "Tool result: 42\n\nand?"},
    ]
    assert gemma_prompt([{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}]) == (
        "<start_of_turn>user\nQ<end_of_turn>\n<start_of_turn>model\nA<end_of_turn>\n<start_of_turn>model\n")


def test_a_response_format_becomes_a_grammar_that_holds_the_model_to_the_schema() -> None:
    assert grammar_for({"type": "text"}) is None and grammar_for(None) is None
    schema = {"type": "object", "properties": {"verdict": {"type": "string", "enum": ["yes", "no"]}},
              "required": ["verdict"], "additionalProperties": False}
    grammar = grammar_for({"type": "json_schema", "json_schema": {"name": "v", "schema": schema}})
    assert grammar is not None and '"\\"yes\\""' in grammar  # the enum's values are the only strings allowed
    engine = load()
    text, prompt_tokens, completion_tokens = in_thread(
        engine.complete,
        gemma_prompt([{"role": "user", "content": "Is the sky green? Answer yes or no."}]),
        temperature=0, max_tokens=24, seed=0, grammar=grammar)
    assert json.loads(text)["verdict"] in ("yes", "no") and set(json.loads(text)) == {"verdict"}
    assert prompt_tokens > 5 and 0 < completion_tokens <= 24
    free, _, _ = in_thread(engine.complete, gemma_prompt([{"role": "user", "content": "Say hi."}]), temperature=0,
                           max_tokens=8, seed=0, grammar=None)
    again, _, _ = in_thread(engine.complete, gemma_prompt([{"role": "user", "content": "Say hi."}]), temperature=0,
                            max_tokens=8, seed=0, grammar=None)
    assert free == again  # greedy decoding on a cleared context is deterministic


def test_calls_queued_for_the_local_model_are_not_timed_while_they_wait() -> None:
    """The embedded model answers one call at a time: eight judges waiting for it are not eight timeouts, and a
    completion whose caller timed out stops instead of holding the model."""
    engine = load()
    messages = [{"role": "user", "content": "Count to ten."}]
    client = LLMClient(LLMSettings(retries=0, timeout=20))  # a one-token completion, even on a loaded machine

    async def after_a_long_wait() -> dict[str, Any]:
        # a first call pays for what a path loads once (litellm's provider setup, the weights paged in)
        await client.complete(model=MODEL, messages=messages, purpose="test", temperature=0, max_tokens=1)
        turn = client._turn_of(MODEL)  # the model busy with another call for longer than the timeout
        await turn.__aenter__()
        call = asyncio.ensure_future(client.complete(model=MODEL, messages=messages, purpose="test", temperature=0,
                                                     max_tokens=1, seed=1))
        await asyncio.sleep(25)
        await turn.__aexit__(None, None, None)
        return await call

    reply = asyncio.run(after_a_long_wait())
    assert reply["usage"]["completion_tokens"] == 1  # it waited 25 s for its turn, then had its own 20 s

    cancelled = threading.Event()
    cancelled.set()
    prompt = gemma_prompt(messages)
    with pytest.raises(TimeoutError):
        in_thread(engine.complete, prompt, temperature=0, max_tokens=16, seed=0, grammar=None, cancelled=cancelled)
    text, _, _ = in_thread(engine.complete, prompt, temperature=0, max_tokens=4, seed=0, grammar=None)  # usable
    assert isinstance(text, str)
