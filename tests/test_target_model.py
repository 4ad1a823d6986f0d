"""The ``model`` target (docs/targets/http.md): one chat completion per turn through evalcli's LLM layer, against the loopback
OpenAI-compatible server; the history kept per thread, usage and cost recorded with purpose ``target``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.conftest import CliResult
from tests.llm_server import LLMServer, Reply, Request, completion, status


def answer_with_turns(request: Request) -> Reply:
    """Says how many user messages it was sent, and the last one."""
    users = [m["content"] for m in request.messages if m["role"] == "user"]
    return Reply(body=completion(f"ok {len(users)}: {users[-1]}", prompt_tokens=10 * len(request.messages),
                                 completion_tokens=3))


def test_each_turn_sends_the_system_prompt_and_this_conversations_history(
        write: Callable[..., Path], cli: Callable[..., CliResult], llm_server: LLMServer) -> None:
    llm_server.responder = answer_with_turns
    write("d.yaml", f"""
        target:
          model: openai/scripted
          system: You are terse.
          temperature: 0
          max_tokens: 50
          api_base: {llm_server.url}
        concurrency: 1
        scorers: [{{includes: ok}}]
        data:
          - id: one
            inputs: [first, second]
          - id: two
            input: alone
        """)
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 0, result.stderr
    first, second, alone = (r.body for r in llm_server.requests)
    assert first["messages"] == [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "first"}]
    assert second["messages"] == [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "first"},
                                  {"role": "assistant", "content": "ok 1: first"},
                                  {"role": "user", "content": "second"}]
    assert alone["messages"][1:] == [{"role": "user", "content": "alone"}]  # nothing of the other conversation
    assert first["temperature"] == 0 and first["max_tokens"] == 50 and "tools" not in first
    items = result.json["items"]
    assert items[0]["turns"][1]["output"] == [{"role": "assistant", "content": "ok 2: second"}]
    assert result.json["target"] == "model:openai/scripted (system='You are terse.', temperature=0)"
    calls = result.db().execute("SELECT purpose, model, prompt_tokens, completion_tokens, turn_index, cache_hit "
                                "FROM llm_calls ORDER BY item_index, turn_index").fetchall()
    assert [tuple(c) for c in calls] == [("target", "openai/scripted", 20, 3, 0, 0),
                                         ("target", "openai/scripted", 40, 3, 1, 0),
                                         ("target", "openai/scripted", 20, 3, 0, 0)]
    again = cli("run", "d.yaml", "--json", "-")  # the model under test is asked again, never read from the cache
    assert again.code == 0 and len(llm_server.requests) == 6


def test_system_file_options_and_the_command_line(write: Callable[..., Path], cli: Callable[..., CliResult],
                                                  llm_server: LLMServer) -> None:
    llm_server.responder = answer_with_turns
    write("prompts/travel.md", "You are a travel assistant.\n")
    write("d.yaml", f"""
        target: {{model: openai/scripted, system_file: prompts/travel.md, temperature: 0.5, api_base: {llm_server.url}}}
        target_options: {{temperature: 0, seed: 7}}
        scorers: [{{includes: ok}}]
        data: [{{input: hello}}]
        """)
    result = cli("run", "d.yaml")
    assert result.code == 0, result.stderr
    body = llm_server.requests[-1].body
    assert body["messages"][0] == {"role": "system", "content": "You are a travel assistant.\n"}
    assert body["temperature"] == 0 and body["seed"] == 7
    write("plain.yaml", """
        target: agents:echo
        scorers: [{includes: ok}]
        data: [{input: hello}]
        """)
    result = cli("run", "plain.yaml", "--target", "model:openai/scripted", "--json", "-",
                 env={"OPENAI_API_BASE": llm_server.url, "OPENAI_BASE_URL": llm_server.url})
    assert result.code == 0, result.stderr
    assert result.json["target"] == "model:openai/scripted"
    assert result.json["items"][0]["turns"][0]["output"] == [{"role": "assistant", "content": "ok 1: hello"}]


def test_model_target_mistakes_are_validation_errors(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", """
        target:
          model: openai/x
          system: a
          system_file: b.md
        scorers: [{includes: ok}]
        data: [{input: hi}]
        """)
    result = cli("validate", "d.yaml")
    assert result.code == 2 and "d.yaml:2:3: the model target: give 'system' or 'system_file', not both" in result.stderr
    write("d.yaml", """
        target: {model: openai/x, system_file: missing.md}
        scorers: [{includes: ok}]
        data: [{input: hi}]
        """)
    result = cli("validate", "d.yaml")
    assert result.code == 2 and "d.yaml:1:40: cannot read system_file 'missing.md'" in result.stderr
    write("d.yaml", """
        target: {model: openai/x}
        target_options: {deps: 1}
        scorers: [{includes: ok}]
        data: [{input: hi}]
        """)
    result = cli("validate", "d.yaml")
    assert result.code == 2
    assert "'deps' is not an option of the model target (it takes: temperature, max_tokens, seed)" in result.stderr
    write("d.yaml", """
        target: model:openai/x
        scorers: [{includes: ok}]
        data: [{input: hi}]
        """)
    result = cli("validate", "d.yaml")
    assert result.code == 2 and "for a model target write a mapping, e.g. 'target: {model: openai/x}'" in result.stderr


def test_a_provider_failure_is_that_conversations_error(write: Callable[..., Path], cli: Callable[..., CliResult],
                                                        llm_server: LLMServer) -> None:
    llm_server.push(status(400, message="model not found"))
    llm_server.responder = answer_with_turns
    write("d.yaml", f"""
        target: {{model: openai/scripted, api_base: {llm_server.url}}}
        concurrency: 1
        scorers: [{{includes: ok}}]
        data: [{{id: a, input: one}}, {{id: b, input: two}}]
        """)
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 4
    first, second = result.json["items"]
    assert first["status"] == "error" and "model openai/scripted failed" in first["error"]
    assert "model not found" in first["error"]
    assert second["status"] == "ok"
