"""The LLM client against a real local HTTP server: retries, back-off, timeouts, usage, cache."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from typing import Any

import pytest

from evalcli.llm.cache import ResponseCache
from evalcli.llm.client import LLMClient, LLMError, LLMSettings, UsageSink, current_usage, provider_messages
from evalcli.store import Store
from tests.llm_server import LLMServer, malformed, slow, status, text

pytestmark = pytest.mark.usefixtures("llm_backend")  # every test on both backends (docs/models.md)

USER = [{"role": "user", "content": "hi"}]


def fast(retries: int = 3, timeout: float = 10.0, **kwargs: Any) -> LLMSettings:
    return LLMSettings(retries=retries, timeout=timeout, backoff_base=0.01, backoff_max=0.05, **kwargs)


def complete(client: LLMClient, server: LLMServer, model: str = "openai/test-model", **kwargs: Any) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        return await client.complete(model=model, messages=kwargs.pop("messages", USER), purpose="test",
                                     api_base=server.url, **kwargs)

    return asyncio.run(go())


def content(response: dict[str, Any]) -> str:
    return str(response["choices"][0]["message"]["content"])


def test_importing_evalcli_llm_does_not_import_litellm() -> None:
    code = "import sys, evalcli.llm, evalcli.scorers.judges.criterion, evalcli.agent; print('litellm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_retries_after_429_honouring_retry_after(llm_server: LLMServer) -> None:
    llm_server.push(status(429, retry_after=1), text("ok"))
    response = complete(LLMClient(fast()), llm_server)
    assert content(response) == "ok"
    first, second = llm_server.requests
    assert second.at - first.at >= 0.95


def test_429_pauses_every_call_to_that_model(llm_server: LLMServer) -> None:
    llm_server.push(status(429, retry_after=1))
    llm_server.responder = lambda request: text("ok")
    client = LLMClient(fast())

    async def go() -> None:
        first = asyncio.create_task(client.complete(model="openai/m", messages=USER, purpose="test",
                                                    api_base=llm_server.url))
        while not llm_server.requests:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)  # the 429 has been seen; a new call must wait for the pause too
        await asyncio.gather(first, client.complete(model="openai/m", messages=USER, purpose="test",
                                                    api_base=llm_server.url))

    asyncio.run(go())
    start = llm_server.requests[0].at
    assert len(llm_server.requests) == 3
    assert all(r.at - start >= 0.95 for r in llm_server.requests[1:])


def test_retries_after_500_and_malformed_body(llm_server: LLMServer) -> None:
    llm_server.push(status(500), malformed(), status(503), text("fine"))
    assert content(complete(LLMClient(fast()), llm_server)) == "fine"
    assert len(llm_server.requests) == 4


def test_gives_up_with_llm_error_naming_model_and_attempts(llm_server: LLMServer) -> None:
    llm_server.push(*[status(500, message="upstream exploded")] * 3)
    with pytest.raises(LLMError) as caught:
        complete(LLMClient(fast(retries=2)), llm_server)
    message = str(caught.value)
    assert "openai/test-model" in message and "3 attempts" in message and "upstream exploded" in message
    assert "sk-test" not in message
    assert caught.value.exit_code == 4
    assert len(llm_server.requests) == 3


def test_client_errors_are_not_retried(llm_server: LLMServer) -> None:
    llm_server.push(status(400, message="bad request"), text("never"))
    with pytest.raises(LLMError, match="1 attempt"):
        complete(LLMClient(fast()), llm_server)
    assert len(llm_server.requests) == 1


def test_timeout_is_retried_then_gives_up(llm_server: LLMServer) -> None:
    llm_server.push(slow(text("late"), 2), text("on time"))
    assert content(complete(LLMClient(fast(timeout=0.5)), llm_server)) == "on time"
    llm_server.push(slow(text("late"), 2), slow(text("late"), 2))
    with pytest.raises(LLMError, match="2 attempts"):
        complete(LLMClient(fast(retries=1, timeout=0.5)), llm_server)


def test_tokens_and_cost_are_recorded(llm_server: LLMServer) -> None:
    llm_server.push(text("priced", prompt_tokens=1000, completion_tokens=500), text("unpriced"))
    sink = UsageSink()
    client = LLMClient(fast())

    async def go() -> None:
        current_usage.set(sink)
        for model in ("openai/gpt-4o-mini", "openai/no-such-model-price"):
            await client.complete(model=model, messages=USER, purpose="agent", api_base=llm_server.url)

    asyncio.run(go())
    priced, unpriced = sink.records
    assert (priced.purpose, priced.model, priced.prompt_tokens, priced.completion_tokens) == (
        "agent", "openai/gpt-4o-mini", 1000, 500)
    assert priced.cost > 0 and not priced.cache_hit and priced.duration_ms > 0
    assert unpriced.cost == 0.0 and unpriced.prompt_tokens == 11
    assert sink.totals()["calls"] == 2


def test_an_unpriced_model_stays_at_cost_zero_with_the_same_request(llm_server: LLMServer) -> None:
    llm_server.push(text("one"), text("two"), text("three"))
    sink = UsageSink()
    client = LLMClient(fast())

    async def go() -> None:
        current_usage.set(sink)
        for _ in range(3):  # after the first call evalcli knows litellm has no price for it
            await client.complete(model="openai/unpriced-twice", messages=USER, purpose="agent",
                                  api_base=llm_server.url)

    asyncio.run(go())
    assert [r.cost for r in sink.records] == [0.0, 0.0, 0.0]
    assert [r.prompt_tokens for r in sink.records] == [11, 11, 11]
    bodies = [request.body for request in llm_server.requests]
    assert bodies[0] == bodies[1] == bodies[2] and "input_cost_per_token" not in bodies[2]


def test_request_shape_and_evalcli_keys_stripped(llm_server: LLMServer) -> None:
    llm_server.push(text("ok"))
    messages = [*USER, {"role": "tool", "tool_call_id": "c1", "content": "boom", "is_error": True}]
    complete(LLMClient(fast()), llm_server, messages=messages, temperature=0, max_tokens=33, seed=7)
    body = llm_server.requests[0].body
    assert body["temperature"] == 0 and body["max_tokens"] == 33 and body["seed"] == 7
    assert all("is_error" not in m for m in body["messages"])
    assert provider_messages(messages)[1] == {"role": "tool", "tool_call_id": "c1", "content": "boom"}


def test_judge_calls_are_limited_by_judge_concurrency(llm_server: LLMServer) -> None:
    llm_server.responder = lambda request: slow(text("ok"), 0.3)
    client = LLMClient(fast(judge_concurrency=1))

    async def go() -> None:
        await asyncio.gather(*(client.complete(model="openai/j", messages=USER, purpose="judge",
                                               api_base=llm_server.url) for _ in range(2)))

    asyncio.run(go())
    first, second = llm_server.requests
    assert second.at - first.at >= 0.28


def test_cache_hit_skips_the_provider_and_is_recorded(llm_server: LLMServer, llm_cache_path: str) -> None:
    llm_server.push(text("cached answer"))
    cache = Store(llm_cache_path).response_cache()
    client = LLMClient(fast(), cache)
    key = cache.key_for(model="openai/c", messages=USER, scorer_id="s", scorer_version="1")
    sink = UsageSink()

    async def go() -> list[dict[str, Any]]:
        current_usage.set(sink)
        return [await client.complete(model="openai/c", messages=USER, purpose="judge", api_base=llm_server.url,
                                      cache_key=key) for _ in range(2)]

    first, second = asyncio.run(go())
    assert first == second and content(second) == "cached answer"
    assert len(llm_server.requests) == 1
    assert [r.cache_hit for r in sink] == [False, True]
    assert cache.stats() == {"entries": 1, "hits": 1}
    with sqlite3.connect(llm_cache_path) as conn:
        stored = " ".join(str(v) for row in conn.execute("SELECT * FROM llm_cache") for v in row)
    assert "sk-test" not in stored
    assert cache.clear() == 1 and cache.get(key) is None


def test_cache_keys_change_with_every_part() -> None:
    base: dict[str, Any] = {"model": "m", "messages": USER, "temperature": 0, "scorer_id": "a", "scorer_version": "1"}
    keys = {ResponseCache.key_for(**base)}
    for change in ({"model": "n"}, {"messages": [{"role": "user", "content": "ho"}]}, {"temperature": 1},
                   {"scorer_id": "b"}, {"scorer_version": "2"}, {"response_format": {"type": "json_object"}}):
        keys.add(ResponseCache.key_for(**{**base, **change}))
    assert len(keys) == 7
    assert ResponseCache.key_for(**base) == ResponseCache.key_for(**dict(reversed(list(base.items()))))


def test_settings_from_env() -> None:
    settings = LLMSettings.from_env({"EVALCLI_LLM_RETRIES": "1", "EVALCLI_LLM_TIMEOUT": "2.5"})
    assert (settings.retries, settings.timeout, settings.judge_concurrency, settings.cache) == (1, 2.5, 8, True)
    assert LLMSettings.from_env({}).retries == 4
