"""Rate limits (docs/budgets.md): 429s retried after their Retry-After, and adaptive concurrency per (provider, model),
through the real CLI against a loopback provider that allows a few calls in flight and answers 429 above them,
on both client paths (evalcli's own Chat Completions client and litellm). The server measures what evalcli did."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalcli.llm.ratelimit import GROWTH_EVERY, AdaptiveLimit, Ticket
from tests.conftest import CliResult
from tests.llm_server import LLMServer, RateLimited, Reply, Request, completion


def echo(request: Request) -> Reply:
    users = [m["content"] for m in request.messages if m["role"] == "user"]
    return Reply(body=completion(f"ok: {users[-1]}", prompt_tokens=10, completion_tokens=3))


def model_dataset(url: str, n: int, concurrency: int) -> str:
    lines = ["target:", "  model: openai/rl-model", f"  api_base: {url}", f"concurrency: {concurrency}",
             "scorers: [{includes: ok}]", "data:"]
    lines += [f"  - {{id: c{i}, input: question {i}}}" for i in range(n)]
    return "\n".join(lines) + "\n"


@pytest.mark.usefixtures("llm_backend")
def test_a_run_that_met_429s_adapts_and_ends_without_errors_or_duplicates(
        write: Callable[..., Path], cli: Callable[..., CliResult], llm_server: LLMServer) -> None:
    provider = RateLimited(echo, allowed=4, delay=0.05, retry_after=0.1)
    llm_server.responder = provider
    write("d.yaml", model_dataset(llm_server.url, 60, 16))
    result = cli("run", "d.yaml", "--json", "-", env={"EVALCLI_LLM_RETRIES": "1"})
    assert result.code == 0, result.stderr
    assert result.json["summary"]["errors"] == 0
    assert {i["status"] for i in result.json["items"]} == {"ok"}
    # every conversation was answered exactly once: the 429s were retried, nothing was sent twice
    assert provider.duplicates == 0 and len(provider.answered) == 60
    assert provider.rejected > 0 and provider.calls == 60 + provider.rejected and provider.peak <= 4
    # halving on each round of 429s settles under the provider's limit: a few rounds of them, not one per call
    assert provider.rejected < 40, provider.rejected
    assert "openai/rl-model is rate limited (HTTP 429): throttled to" in result.stderr
    rows = result.db().execute("SELECT purpose, COUNT(*) FROM llm_calls GROUP BY purpose").fetchall()
    assert [tuple(r) for r in rows] == [("target", 60)]


@pytest.mark.usefixtures("llm_backend")
def test_a_retry_after_longer_than_the_timeout_is_the_conversations_error_at_once(
        write: Callable[..., Path], cli: Callable[..., CliResult], llm_server: LLMServer) -> None:
    provider = RateLimited(echo, allowed=0, delay=0, retry_after=30)
    llm_server.responder = provider
    write("d.yaml", model_dataset(llm_server.url, 1, 1))
    # a Retry-After of 30 s against a 10 s timeout: long enough that a busy machine's slow first call (litellm's own
    # set-up) is never itself a timeout and retried
    result = cli("run", "d.yaml", "--json", "-", env={"EVALCLI_LLM_TIMEOUT": "10"})
    assert result.code == 4, result.stderr
    error = result.json["items"][0]["error"]
    assert "failed after 1 attempt: RateLimitError: Rate limit reached" in error, error
    assert provider.calls == 1


def test_limits_halve_once_per_round_and_grow_by_one_every_ten_successes() -> None:
    now = [0.0]
    rule = AdaptiveLimit(16, clock=lambda: now[0])
    tickets = [rule.start() for _ in range(16)]
    for ticket in tickets[4:]:
        assert rule.finish(ticket, "rate_limited") is (ticket is tickets[4])  # one halving for the whole round
    assert rule.limit == 8 and rule.throttled
    for ticket in tickets[:4]:
        rule.finish(ticket, "ok")
    round_two = [rule.start() for _ in range(8)]
    rule.finish(round_two[-1], "rate_limited")
    assert rule.limit == 4 and rule.too_many == 8
    for ticket in round_two[:-1]:
        rule.finish(ticket, "ok")
    for _ in range(GROWTH_EVERY * 10):
        rule.finish(rule.start(), "ok")
    assert rule.limit == 7  # one below the calls in flight that met the last 429, for a while
    now[0] += 31
    for _ in range(GROWTH_EVERY * 20):
        rule.finish(rule.start(), "ok")
    assert rule.limit == 16 and not rule.throttled  # then back up to the configured concurrency


@settings(max_examples=300, deadline=None)
@given(ceiling=st.integers(1, 64),
       steps=st.lists(st.tuples(st.sampled_from(["start", "ok", "rate_limited", "failed", "tick"]),
                                st.integers(0, 1000)), max_size=300))
def test_the_limit_stays_between_one_and_the_configured_concurrency(ceiling: int,
                                                                     steps: list[tuple[str, int]]) -> None:
    now = [0.0]
    rule = AdaptiveLimit(ceiling, clock=lambda: now[0])
    running: list[Ticket] = []
    for action, pick in steps:
        if action == "tick":
            now[0] += pick / 10
        elif action == "start":
            if rule.admits():
                running.append(rule.start())
                assert rule.in_flight <= rule.limit  # a call never starts above the limit
        elif running:
            rule.finish(running.pop(pick % len(running)), action)
        assert 1 <= rule.limit <= ceiling
        assert rule.in_flight == len(running)
