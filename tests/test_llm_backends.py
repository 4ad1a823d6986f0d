"""docs/models.md: one client, two ways to an OpenAI-compatible model. evalcli's own Chat Completions client (the default)
and litellm (``EVALCLI_LLM_BACKEND=litellm``) send the same requests, read the same answers, price them alike from
litellm's table, word failures alike, and share the response cache; a run whose models are all OpenAI-compatible
never imports litellm, and one with another provider's model does. Real loopback HTTP, real litellm."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evalcli.errors import EvalcliError
from evalcli.llm import LLMClient, LLMError, LLMSettings, UsageSink, catalog
from evalcli.llm import litellm_backend as via_litellm
from tests.llm_server import LLMServer, Reply, Request, malformed, slow, status, text
from tests.reliability_helpers import SUBPROCESS_TIMEOUT, cli_env, closed_port, load_json, write_project

USER = [{"role": "user", "content": "hi"}]


def fast(backend: str, **kwargs: Any) -> LLMSettings:
    return LLMSettings(retries=0, timeout=kwargs.pop("timeout", 10.0), backoff_base=0.01, backoff_max=0.05,
                       backend=backend, **kwargs)


def call(client: LLMClient, server: LLMServer | str, model: str = "openai/test-model", **kwargs: Any) -> Any:
    base = server if isinstance(server, str) else server.url

    async def go() -> Any:
        sink = UsageSink()
        response = await client.complete(model=model, messages=kwargs.pop("messages", USER), purpose="test",
                                         api_base=base, usage_sink=sink, **kwargs)
        return response, sink.records[0]

    return asyncio.run(go())


# -- which path a model takes -------------------------------------------------------------------------------


@pytest.mark.parametrize(("model", "api_base", "path"), [
    ("openai/gpt-4o-mini", None, "openai"),
    ("openai/my-finetune", "http://127.0.0.1:1/v1", "openai"),
    ("gpt-4o-mini", None, "openai"),
    ("hosted_vllm/Qwen/Qwen2.5-7B", "http://127.0.0.1:1/v1", "openai"),
    ("hosted_vllm/Qwen/Qwen2.5-7B", None, "litellm"),  # no base URL: litellm says what is missing
    ("my-model", "http://127.0.0.1:1/v1", "openai"),  # any model at an api_base
    ("my-model", None, "litellm"),
    ("anthropic/claude-haiku-4-5", None, "litellm"),
    ("ollama/llama3.1", "http://127.0.0.1:11434", "litellm"),  # another provider's API, even at an api_base
    ("claude-haiku-4-5", "http://127.0.0.1:1/v1", "litellm"),
    ("openai/gpt-5-pro", None, "litellm"),  # served by the Responses API only: litellm bridges it
    ("local/gemma-3-270m", None, "local"),
])
def test_each_model_takes_its_path(model: str, api_base: str | None, path: str) -> None:
    assert LLMClient(LLMSettings(backend="auto")).path(model, api_base) == path
    assert LLMClient(LLMSettings(backend="litellm")).path(model, api_base) == "litellm"


def test_the_backend_setting_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALCLI_LLM_BACKEND", "LiteLLM")
    assert LLMSettings.from_env().backend == "litellm" and LLMSettings().backend == "litellm"
    monkeypatch.delenv("EVALCLI_LLM_BACKEND")
    assert LLMSettings.from_env().backend == "auto"
    with pytest.raises(EvalcliError, match="EVALCLI_LLM_BACKEND='openai' is not a backend") as caught:
        LLMSettings.from_env({"EVALCLI_LLM_BACKEND": "openai"})
    assert "EVALCLI_LLM_BACKEND=litellm" in caught.value.hint


# -- the same request, the same answer ----------------------------------------------------------------------

TOOLS = [{"type": "function", "function": {"name": "f", "description": "d", "strict": True, "parameters": {
    "type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": False}}}]
SCHEMA = {"type": "json_schema", "json_schema": {"name": "v", "strict": True, "schema": {
    "type": "object", "properties": {"x": {"type": "boolean"}}, "required": ["x"], "additionalProperties": False}}}
CONVERSATION = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi", "name": None},
                {"role": "assistant", "content": None,
                 "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "r", "is_error": True}]
PARAMETERS = [{"temperature": 0, "response_format": SCHEMA}, {"temperature": 0.7, "max_tokens": 20, "seed": 3, "tools": TOOLS},
              {"temperature": 1}, {"response_format": {"type": "json_object"}, "max_tokens": 5}, {}]
FAMILIES = ["openai/gpt-4o-mini", "openai/gpt-4", "gpt-3.5-turbo", "openai/o1", "openai/o3-mini", "openai/o4-mini",
            "openai/gpt-5", "openai/gpt-5-mini", "openai/gpt-5.1", "openai/gpt-5-chat-latest", "openai/gpt-5-search-api",
            "openai/gpt-4o-search-preview", "openai/computer-use-preview", "openai/ft:gpt-4o-mini-2024-07-18:org::x1",
            "openai/gpt-6-unreleased", "openai/o9-unknown", "openai/judge-model", "hosted_vllm/gpt-4", "hosted_vllm/qwen",
            "my-model"]


def test_both_backends_send_the_same_request_to_every_model_family(llm_server: LLMServer) -> None:
    llm_server.responder = lambda request: text("ok")
    bodies: dict[str, list[Any]] = {}
    for backend in ("auto", "litellm"):
        client = LLMClient(fast(backend))
        for model in FAMILIES:
            for parameters in PARAMETERS:
                call(client, llm_server, model, messages=CONVERSATION, **parameters)
        bodies[backend] = [(r.path, r.body, r.headers.get("authorization")) for r in llm_server.requests]
        llm_server.requests.clear()
    assert len(bodies["auto"]) == len(FAMILIES) * len(PARAMETERS)
    for (model, parameters), ours, theirs in zip([(m, p) for m in FAMILIES for p in PARAMETERS], bodies["auto"],
                                                 bodies["litellm"], strict=True):
        assert ours == theirs, (model, parameters)


def test_capabilities_are_litellms_for_every_model_in_its_table() -> None:
    """``response_format`` is chosen from them, and it is part of the judge's cache key: old entries still hit."""
    names = [k for k, v in catalog.table().models.items() if v.get("litellm_provider") == "openai"]
    models = [*names, *(f"openai/{n}" for n in names), *(f"hosted_vllm/{n}" for n in names[::7]),
              "openai/judge-model", "hosted_vllm/qwen", "my-model", "GPT-4O-MINI", "openai/claude-xyz-5"]
    assert len(names) > 100
    for model in models:
        if catalog.provider_and_name(model) is None and "/" in model:
            continue
        assert catalog.supports_json_schema(model) == via_litellm.supports_json_schema(model), model
        assert catalog.supports_json_mode(model) == via_litellm.supports_json_mode(model), model


USAGES = [{"prompt_tokens": 1000, "completion_tokens": 500},
          {"prompt_tokens": 1000, "completion_tokens": 500, "prompt_tokens_details": {"cached_tokens": 600}},
          {"prompt_tokens": 1000, "completion_tokens": 500, "completion_tokens_details": {"reasoning_tokens": 300}},
          {"prompt_tokens": 300_000, "completion_tokens": 500, "prompt_tokens_details": {"cached_tokens": 1000}},
          {"prompt_tokens": 900, "completion_tokens": 40, "prompt_tokens_details": {"audio_tokens": 100},
           "completion_tokens_details": {"audio_tokens": 10}}]


def test_prices_are_litellms_for_every_openai_chat_model() -> None:
    from litellm.litellm_core_utils.llm_cost_calc.utils import generic_cost_per_token
    from litellm.types.utils import Usage

    via_litellm.import_litellm()
    names = [k for k, v in catalog.table().models.items() if v.get("litellm_provider") == "openai" and v.get("mode") == "chat"]
    for name in names:
        info = catalog.model_info(name, "openai")
        assert info is not None, name
        for usage in USAGES:
            for tier in (None, "priority", "flex"):
                for residency in (None, "eu", "fedramp"):
                    theirs = sum(generic_cost_per_token(model=name, usage=Usage(**usage), custom_llm_provider="openai",
                                                        service_tier=tier, data_residency=residency))
                    assert catalog.cost(info, usage, tier, residency) == theirs, (name, usage, tier, residency)


def completion_with(model: str, usage: dict[str, Any], **extra: Any) -> Reply:
    return Reply(body={"id": "c", "object": "chat.completion", "created": 1, "model": model, **extra, "usage": usage,
                       "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}]})


@pytest.mark.parametrize(("asked", "served", "extra"), [
    ("openai/gpt-4o-mini", "gpt-4o-mini", {}),
    ("openai/gpt-4o", "gpt-4o-2024-05-13", {}),  # the snapshot that answered is priced, at its own price
    ("openai/gpt-4o-mini", "some-proxy-alias", {}),  # an unpriced name answered: the model asked for is priced
    ("openai/gpt-4o-mini", "gpt-4o-mini", {"service_tier": "priority"}),
    ("openai/ft:gpt-4o-mini-2024-07-18:acme::abc123", "ft:gpt-4o-mini-2024-07-18:acme::abc123", {}),
    ("gpt-4.1-mini", "gpt-4.1-mini-2025-04-14", {}),
    ("openai/not-a-priced-model", "not-a-priced-model", {}),
    ("hosted_vllm/gpt-4o-mini", "gpt-4o-mini", {}),
    ("my-model", "my-model", {}),
])
def test_responses_are_priced_alike(llm_server: LLMServer, asked: str, served: str, extra: dict[str, Any]) -> None:
    records = {}
    for backend in ("auto", "litellm"):
        for usage in USAGES[:3]:
            llm_server.push(completion_with(served, usage, **extra))
            response, record = call(LLMClient(fast(backend)), llm_server, asked)
            records.setdefault(backend, []).append((record.prompt_tokens, record.completion_tokens, record.cost))
            assert response["choices"][0]["message"]["content"] == "ok"
    assert records["auto"] == records["litellm"]
    if "not-a-priced" in asked or "vllm" in asked or asked == "my-model":
        assert {cost for _, _, cost in records["auto"]} == {0.0}
    else:
        assert all(cost > 0 for _, _, cost in records["auto"])


FAULTS = {
    "500": [status(500, message="upstream exploded")],
    "503": [status(503)],
    "400": [status(400, message="bad request here")],
    "401": [status(401, message="invalid api key sk-test-not-a-real-key-0123456789")],
    "404 html": [Reply(status=404, body="<h1>nope</h1>")],
    "429": [status(429, retry_after=5, message="slow down")],  # longer than the call's timeout: no retry
    "malformed": [malformed()],
    "blank": [Reply(body="")],
    "not an object": [Reply(body="[1, 2]")],
    "no choices": [Reply(body={})],
    "error at 200": [Reply(body={"error": {"message": "bad thing"}})],
    "timeout": [slow(text("late"), 2)],
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_failures_are_worded_alike(llm_server: LLMServer, fault: str) -> None:
    messages = {}
    for backend in ("auto", "litellm"):
        # a short timeout only where the timeout is the fault: on a loaded machine litellm's first call can
        # take over a second before the request leaves, which is a timeout, not the fault under test
        client = LLMClient(fast(backend, timeout={"timeout": 1.0, "429": 4.0}.get(fault, 10.0)))
        llm_server.push(*FAULTS[fault])
        with pytest.raises(LLMError) as caught:
            call(client, llm_server, "openai/judge-model")
        messages[backend] = caught.value.message
    assert messages["auto"] == messages["litellm"]
    assert messages["auto"].startswith("model openai/judge-model failed after 1 attempt: ")
    assert "sk-test-not-a-real-key" not in messages["auto"]


def test_a_refused_connection_is_worded_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-0123456789")
    dead = f"http://127.0.0.1:{closed_port()}/v1"
    messages = set()
    for backend in ("auto", "litellm"):
        with pytest.raises(LLMError) as caught:
            call(LLMClient(fast(backend)), dead, "openai/judge-model")
        messages.add(caught.value.message)
    assert messages == {"model openai/judge-model failed after 1 attempt: APIConnectionError: Connection error."}


def test_connections_are_pooled(llm_server: LLMServer) -> None:
    llm_server.responder = lambda request: text("ok")
    client = LLMClient(fast("auto"))

    async def go() -> None:
        for _ in range(20):
            await client.complete(model="openai/m", messages=USER, purpose="test", api_base=llm_server.url)
        await asyncio.gather(*(client.complete(model="openai/m", messages=USER, purpose="test", api_base=llm_server.url)
                               for _ in range(8)))
        await client.aclose()

    asyncio.run(go())
    assert len(llm_server.requests) == 28
    assert len({r.peer for r in llm_server.requests}) <= 8  # one connection for the 20 in a row, at most 8 at once


# -- whole runs through the CLI -------------------------------------------------------------------------------

AGENT = """
import os
import evalcli

def get_weather(city: str) -> str:
    \"\"\"The weather in a city.\"\"\"
    return f"sunny in {city}"

agent = evalcli.Agent(model=os.environ.get("AGENT_MODEL", "openai/gpt-4.1-mini"), instructions="Be brief.",
                      tools=[get_weather], api_base=os.environ["OPENAI_API_BASE"])
"""
DATASET = """
target: agent:agent
concurrency: 2
scorers:
  - scorer: judge
    threshold: 1
data:
  - {id: scripted, inputs: ['What is the weather in Brooklyn?', 'And in Paris?']}
  - id: simulated
    simulate: {goal: Learn the weather in Oslo., max_turns: 3, model: openai/gpt-4o}
"""
REGISTRY = """
scorers:
  judge:
    multi_turn_judge: {model: openai/gpt-4o-mini, criterion: The assistant gave the weather.}
"""
MODULES = """
import atexit, json, os, runpy, sys
atexit.register(lambda: open(os.environ["MODULES_OUT"], "w").write(json.dumps(sorted(
    {m.split(".")[0] for m in sys.modules} & {"litellm", "openai", "httpx", "aiohttp", "cyllama"}))))
sys.argv = ["evalcli", *sys.argv[1:]]
runpy.run_module("evalcli", run_name="__main__", alter_sys=True)
"""


def scripted_model(request: Request) -> Reply:
    """Judge, simulated user and agent, answered from the request alone (so both backends see the same run)."""
    body = request.body
    model, messages = body.get("model"), request.messages
    usage = {"prompt_tokens": 900 + len(messages), "completion_tokens": 30,
             "prompt_tokens_details": {"cached_tokens": 256}, "total_tokens": 930 + len(messages)}
    if body.get("response_format") or model == "gpt-4o-mini":
        answer: dict[str, Any] = {"role": "assistant", "content": json.dumps({"satisfied": True, "reasoning": "It did."})}
    elif model == "gpt-4o":
        asked = sum(m.get("role") == "assistant" for m in messages)
        answer = {"role": "assistant", "content": "###STOP###" if asked >= 2 else f"Weather in Oslo? ({asked})"}
    elif messages[-1].get("role") == "tool":
        answer = {"role": "assistant", "content": f"It is {messages[-1]['content']}."}
    else:
        answer = {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{len(messages)}", "type": "function",
             "function": {"name": "get_weather", "arguments": json.dumps({"city": "Brooklyn"})}}]}
    return Reply(body={"id": "chatcmpl-x", "object": "chat.completion", "created": 1, "model": model, "usage": usage,
                       "choices": [{"index": 0, "message": answer,
                                    "finish_reason": "tool_calls" if answer.get("tool_calls") else "stop"}]})


def run_project(folder: Path, server: LLMServer, backend: str, *extra: str, db: str = "evalcli.db",
                agent_model: str = "openai/gpt-4.1-mini") -> tuple[dict[str, Any], list[str]]:
    env = cli_env(EVALCLI_LLM_BACKEND=backend, OPENAI_API_KEY="sk-test-not-a-real-key-0123456789",
                  OPENAI_API_BASE=server.url, EVALCLI_LLM_RETRIES="0", MODULES_OUT=str(folder / "modules.json"),
                  AGENT_MODEL=agent_model, DEEPSEEK_API_KEY="sk-test-not-a-real-key-0123456789")
    driver = folder / "driver.py"
    driver.write_text(MODULES, encoding="utf-8")
    done = subprocess.run([sys.executable, str(driver), "run", "ds.yaml", "--json", "-", "--db", db, *extra],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
    assert done.returncode == 0, done.stderr[-3000:]
    return load_json(done.stdout), json.loads((folder / "modules.json").read_text())


def calls_of(db: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        run_id = conn.execute("SELECT id FROM runs ORDER BY started_at DESC LIMIT 1").fetchone()[0]
        rows = conn.execute("SELECT item_index, turn_index, purpose, model, prompt_tokens, completion_tokens, cost, "
                            "cache_hit FROM llm_calls WHERE run_id = ? ORDER BY item_index, turn_index, purpose, "
                            "prompt_tokens", [run_id]).fetchall()
        totals = conn.execute("SELECT prompt_tokens, completion_tokens, cost, llm_calls, cache_hits FROM runs "
                              "WHERE id = ?", [run_id]).fetchone()
    return [*rows, ("totals", *totals)]


def essence(result: dict[str, Any]) -> Any:
    """What a run found, without what differs between any two runs (ids, times)."""
    return {"scores": result["scores"], "verdict": result["verdict"], "summary": result["summary"],
            "items": [{k: item[k] for k in ("id", "status", "scores", "outcomes", "stop_reason", "error")}
                      | {"turns": [{k: t[k] for k in ("input", "output", "simulated", "outcomes")} for t in item["turns"]]}
                      for item in result["items"]]}


def test_an_openai_compatible_run_never_imports_litellm(llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = scripted_model
    write_project(tmp_path, agent=AGENT, dataset=DATASET, scorers=REGISTRY)
    result, modules = run_project(tmp_path, llm_server, "auto")
    assert result["verdict"] == "passed" and result["summary"]["errors"] == 0
    assert "litellm" not in modules and "openai" not in modules and "aiohttp" in modules
    purposes = {row[2] for row in calls_of(tmp_path / "evalcli.db")[:-1]}
    assert purposes == {"agent", "judge", "simulator"}


def test_a_run_with_another_providers_model_imports_litellm(llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = scripted_model
    write_project(tmp_path, agent=AGENT, dataset=DATASET, scorers=REGISTRY)
    result, modules = run_project(tmp_path, llm_server, "auto", agent_model="deepseek/deepseek-chat")
    assert result["summary"]["errors"] == 0 and "litellm" in modules


def test_the_same_run_on_both_backends_finds_the_same_and_costs_the_same(llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = scripted_model
    found, calls = {}, {}
    for backend in ("auto", "litellm"):
        folder = tmp_path / backend
        write_project(folder, agent=AGENT, dataset=DATASET, scorers=REGISTRY)
        result, _ = run_project(folder, llm_server, backend, "--no-cache")
        found[backend], calls[backend] = essence(result), calls_of(folder / "evalcli.db")
    assert found["auto"] == found["litellm"]
    assert calls["auto"] == calls["litellm"]
    totals = calls["auto"][-1]
    assert totals[1] > 0 and totals[3] > 0 and totals[4] > 0 and totals[5] == 0  # tokens, cost, calls, no cache hits
    assert {row[2] for row in calls["auto"][:-1]} == {"agent", "judge", "simulator"}


@pytest.mark.parametrize(("first", "second"), [("auto", "litellm"), ("litellm", "auto")])
def test_each_backend_hits_the_cache_the_other_filled(llm_server: LLMServer, tmp_path: Path, first: str,
                                                      second: str) -> None:
    llm_server.responder = scripted_model
    write_project(tmp_path, agent=AGENT, dataset=DATASET, scorers=REGISTRY)
    before, _ = run_project(tmp_path, llm_server, first)
    asked = len(llm_server.requests)
    after, _ = run_project(tmp_path, llm_server, second)
    again = llm_server.requests[asked:]
    assert essence(after) == essence(before)
    assert again and all(r.body["model"] == "gpt-4.1-mini" for r in again), "judge and simulator replies are cached"
    second_calls = calls_of(tmp_path / "evalcli.db")[:-1]
    assert {row[2] for row in second_calls if row[7]} == {"judge", "simulator"}
    assert all(row[7] for row in second_calls if row[2] != "agent")



@pytest.mark.parametrize("backend", ["auto", "litellm"])
def test_the_environments_proxy_settings_are_followed(llm_server: LLMServer, monkeypatch: pytest.MonkeyPatch,
                                                      backend: str) -> None:
    llm_server.responder = lambda request: text("ok")
    for name in ("NO_PROXY", "no_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{llm_server.port}")
    call(LLMClient(fast(backend)), "http://upstream.invalid/v1", "openai/x")
    assert llm_server.requests[-1].path == "http://upstream.invalid/v1/chat/completions"  # sent to the proxy
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{closed_port()}")
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
    call(LLMClient(fast(backend)), llm_server, "openai/x")
    assert llm_server.requests[-1].path == "/v1/chat/completions"  # straight to the server
