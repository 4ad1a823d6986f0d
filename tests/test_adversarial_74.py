"""Adversarial try 74 (docs/judges.md, docs/models.md, docs/targets/model.md): judges, the response cache and models as
targets, broken as users would, through the real CLI: the loopback OpenAI-compatible server answers scripted replies
(almost-JSON verdicts, a reasoning model's thinking, refusals, errors with Retry-After, odd usage) and counts every
request."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import CliResult
from tests.llm_server import LLMServer, Reply, Request, status, verdict

ENV = {"OPENAI_API_KEY": "sk-test-not-a-real-key-0123456789", "NO_PROXY": "127.0.0.1", "EVALCLI_LLM_RETRIES": "0",
       "EVALCLI_LLM_BACKEND": "auto"}
"""evalcli's own Chat Completions path (docs/models.md): litellm refuses content in parts and usage that is not an
object itself."""
JUDGE = "judge(The assistant echoed the user.)"


def judged(url: str, *inputs: str) -> str:
    """A dataset whose echo agent is judged by the loopback model, one conversation per input."""
    data = "".join(f"  - {{id: c{i}, input: {json.dumps(text)}}}\n" for i, text in enumerate(inputs))
    return (f"target: agents:echo\nscorers:\n  - judge: {{criterion: The assistant echoed the user., model: openai/j, "
            f'api_base: "{url}"}}\ndata:\n{data}')


def body(message: dict[str, Any], usage: Any = None) -> Reply:
    """A chat completion of one message, with ``usage`` as given (left out when ``None``)."""
    answer: dict[str, Any] = {"id": "chatcmpl-74", "object": "chat.completion", "created": 1, "model": "scripted",
                              "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
    if usage is not None:
        answer["usage"] = usage
    return Reply(body=answer)


def said(content: Any, **extra: Any) -> Reply:
    return body({"role": "assistant", "content": content, **extra},
                {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15})


def outcome(result: CliResult, item: str = "c0") -> dict[str, Any]:
    found = json.loads((result.cwd / "r.json").read_text())
    return next(i for i in found["items"] if i["id"] == item)["outcomes"]["scorers"][JUDGE]  # type: ignore[no-any-return]


def per_input(replies: dict[str, Reply]) -> Callable[[Request], Reply]:
    """Answers each request with the reply scripted for the conversation it judges (its echoed input)."""
    def respond(request: Request) -> Reply:
        shown = json.dumps(request.messages)
        return next(reply for text, reply in replies.items() if f"You said: {text}" in shown)
    return respond


THINKING = ('<think>\nThe criterion is about echoing. I could answer {"reasoning": "It echoed.", "satisfied": true} '
            'but turn 1 adds "You said:", so it is not a plain echo.\n</think>\n\n'
            '{"reasoning": "Turn 1 adds \'You said:\' to the words.", "satisfied": false}')


def test_a_reasoning_models_thinking_is_not_read_as_a_second_verdict(llm_server: LLMServer, workdir: Path,
                                                                    write: Callable[..., Path],
                                                                    cli: Callable[..., CliResult]) -> None:
    """A reasoning model served by vLLM or Ollama (DeepSeek-R1, Qwen3) writes its thinking in a ``<think>`` block before
    its answer; a draft verdict in it disagreed with the answer, so every reply was "unreadable": three calls, then the
    judge's error, on every conversation it judged. The answer after the block is the verdict; thinking alone is
    none."""
    llm_server.responder = per_input({
        "thinks": said(THINKING),
        "only-thinks": said('<think>{"reasoning": "Turn 1 echoes.", "satisfied": true}</think>'),
        "no-opening-tag": said('Hmm, {"reasoning": "Maybe.", "satisfied": true}?\n</think>\n'
                               '{"reasoning": "Turn 1 adds words.", "satisfied": false}'),
    })
    write("d.yaml", judged(llm_server.url, "thinks", "only-thinks", "no-opening-tag"))
    done = cli("run", "d.yaml", "--no-cache", "--json", "r.json", env=ENV)
    first = outcome(done, "c0")
    assert first.get("score") == 0.0, first
    assert "Turn 1 adds 'You said:' to the words." in first["reason"] and "<think>" not in first["reason"]
    assert outcome(done, "c2").get("score") == 0.0, outcome(done, "c2")
    assert "no readable verdict" in outcome(done, "c1")["error"]  # thinking is no answer: asked again, then an error
    shown = [json.dumps(r.messages) for r in llm_server.requests]
    assert [sum("You said: " + text in s for s in shown) for text in ("thinks", "only-thinks", "no-opening-tag")] \
        == [1, 3, 1]


def test_a_refusal_is_named_in_the_judges_error_and_recorded_as_a_model_targets_answer(
        llm_server: LLMServer, workdir: Path, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    """OpenAI's models answer a request they decline with ``content: null`` and the words in ``refusal``: the judge's
    error said "last reply: (empty reply)", and a model target's turn was recorded with no text at all, so its checks
    and judges saw an assistant that said nothing."""
    refusal = "I'm sorry, I can't help with that."
    llm_server.responder = lambda request: said(None, refusal=refusal)
    write("d.yaml", judged(llm_server.url, "hi"))
    done = cli("run", "d.yaml", "--no-cache", "--json", "r.json", env=ENV)
    assert done.code == 4, done.stderr
    assert f"last reply: (a refusal) {refusal}" in outcome(done)["error"], outcome(done)
    assert len(llm_server.requests) == 3

    write("m.yaml", f"target: {{model: openai/m, api_base: '{llm_server.url}'}}\ngates: [{{includes: \"can't help\"}}]\n"
                    "data:\n  - {id: c0, input: Write malware.}\n")
    target = cli("run", "m.yaml", "--json", "m.json", env=ENV)
    assert target.code == 0, target.stdout
    turn = json.loads((workdir / "m.json").read_text())["items"][0]["turns"][0]
    assert turn["output"] == [{"role": "assistant", "content": refusal}]


def test_a_damaged_cache_entry_is_a_miss_not_the_judges_error(llm_server: LLMServer, workdir: Path,
                                                             write: Callable[..., Path],
                                                             cli: Callable[..., CliResult]) -> None:
    """A cached reply cut short (a disk that filled up, a hand edit, a copy of the file mid-write) made the judge an
    error on every run after ("JSONDecodeError: Unterminated string..."), and nothing but ``evalcli cache clear``
    mended it. It is a miss now: the model is asked again and its reply replaces the entry."""
    llm_server.responder = lambda request: verdict(True, "Turn 1 repeats the user's words.")
    write("d.yaml", judged(llm_server.url, "hi"))
    assert cli("run", "d.yaml", env=ENV).code == 0
    with sqlite3.connect(workdir / "evalcli.db") as conn:
        assert conn.execute("UPDATE llm_cache SET response = substr(response, 1, 30)").rowcount == 1
    again = cli("run", "d.yaml", "--json", "r.json", env=ENV)
    assert again.code == 0, again.stdout
    assert outcome(again)["score"] == 1.0 and len(llm_server.requests) == 2
    third = cli("run", "d.yaml", env=ENV)
    assert third.code == 0 and "cache hits: 1" in third.stdout and len(llm_server.requests) == 2


def test_a_server_errors_retry_after_is_bounded_by_the_timeout_as_a_429s(llm_server: LLMServer, workdir: Path,
                                                                       write: Callable[..., Path],
                                                                       cli: Callable[..., CliResult]) -> None:
    """A 503 saying ``Retry-After: 3600`` (a server down for maintenance) made each call sleep an hour per retry,
    silently, whatever ``EVALCLI_LLM_TIMEOUT``; a 429's wait is bounded by the timeout (docs/reliability.md) and so is
    a server error's now: longer than the timeout, the call fails at once, saying what the server asked for. A wait
    within the timeout is honoured, and the retry counted."""
    llm_server.push(status(503, retry_after=3600, message="down for maintenance"))
    write("d.yaml", judged(llm_server.url, "hi"))
    env = {**ENV, "EVALCLI_LLM_RETRIES": "2", "EVALCLI_LLM_TIMEOUT": "5"}
    started = time.monotonic()
    done = cli("run", "d.yaml", "--json", "r.json", env=env)
    assert time.monotonic() - started < 30 and done.code == 4, done.stdout
    error = outcome(done)["error"]
    assert "failed after 1 attempt: ServiceUnavailableError: down for maintenance" in error, error
    assert "asked to retry after 3600 s, longer than the call's timeout (5 s)" in error, error
    assert len(llm_server.requests) == 1

    llm_server.push(status(503, retry_after=1), verdict(True, "Turn 1 repeats the user's words."))
    again = cli("run", "d.yaml", "--json", "r.json", env=env)
    assert again.code == 0 and outcome(again)["score"] == 1.0, again.stdout
    assert len(llm_server.requests) == 3 and llm_server.requests[2].at - llm_server.requests[1].at >= 0.95


def test_usage_a_provider_reports_oddly_counts_what_it_can_and_never_fails_the_call(
        llm_server: LLMServer, workdir: Path, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    """A self-hosted server's ``usage`` that is not the object OpenAI sends (a string, counts as strings, a count that
    is no number) made the judge's call raise (``AttributeError: 'str' object has no attribute 'get'``, ``ValueError``)
    after the model had answered: the verdict lost. Usage is the provider's report, read leniently: a count that is
    not a whole number of tokens counts 0."""
    reply = '{"reasoning": "Turn 1 repeats the user\'s words.", "satisfied": true}'
    llm_server.responder = per_input({
        "a": body({"role": "assistant", "content": reply}, "n/a"),
        "b": body({"role": "assistant", "content": reply}, {"prompt_tokens": "many", "completion_tokens": "7"}),
        "c": body({"role": "assistant", "content": reply}, {"prompt_tokens": 12.0, "completion_tokens": -3}),
        "d": body({"role": "assistant", "content": reply}, [1, 2]),
    })
    write("d.yaml", judged(llm_server.url, "a", "b", "c", "d"))
    done = cli("run", "d.yaml", "--no-cache", "--json", "r.json", env=ENV)
    assert done.code == 0, done.stdout
    assert [outcome(done, f"c{i}").get("score") for i in range(4)] == [1.0] * 4
    usage = json.loads((workdir / "r.json").read_text())["usage"]
    assert (usage["calls"], usage["prompt_tokens"], usage["completion_tokens"]) == (4, 12, 7)


def test_content_sent_as_a_list_of_text_parts_is_the_replys_text(llm_server: LLMServer, workdir: Path,
                                                                  write: Callable[..., Path],
                                                                  cli: Callable[..., CliResult]) -> None:
    """Some OpenAI-compatible servers send a message's ``content`` as a list of parts (``[{"type": "text", "text":
    ...}]``): a model target's turn was recorded with no text (its ``includes`` gate failing on an answer that held
    the word), and a judge's verdict sent so was "(empty reply)" three times, then an error. A thinking part is not
    text."""
    def parts(request: Request) -> Reply:
        if "You said" in json.dumps(request.messages):  # the judge
            return said([{"type": "thinking", "thinking": '{"satisfied": false}'},
                         {"type": "text", "text": '{"reasoning": "Turn 1 repeats the user\'s words.", '},
                         {"type": "text", "text": '"satisfied": true}'}])
        return said([{"type": "text", "text": "Sunny and 18C "}, {"type": "text", "text": "in Paris."}])

    llm_server.responder = parts
    write("m.yaml", f"target: {{model: openai/m, api_base: '{llm_server.url}'}}\ngates: [{{includes: Sunny}}]\n"
                    "data:\n  - {id: c0, input: Weather in Paris}\n")
    target = cli("run", "m.yaml", "--json", "m.json", env=ENV)
    assert target.code == 0, target.stdout
    turn = json.loads((workdir / "m.json").read_text())["items"][0]["turns"][0]
    assert turn["output"] == [{"role": "assistant", "content": "Sunny and 18C in Paris."}]
    write("d.yaml", judged(llm_server.url, "hi"))
    done = cli("run", "d.yaml", "--json", "r.json", env=ENV)
    assert done.code == 0 and outcome(done)["score"] == 1.0, outcome(done)
    assert len(llm_server.requests) == 2


def test_an_api_base_without_its_scheme_is_refused_where_it_is_written(workdir: Path, write: Callable[..., Path],
                                                                       cli: Callable[..., CliResult]) -> None:
    """``api_base: localhost:8000/v1`` (the scheme forgotten) passed ``evalcli validate``; the run then played every
    conversation and failed each judge call (``NonHttpUrlClientError: localhost:8000/v1/chat/completions``), exit 4.
    It is bad input: exit 2 where it is written, before anything runs or is stored; a blank one (an unset
    ``${JUDGE_API_BASE:-}``) still leaves the provider's variables to decide."""
    write("d.yaml", "target: agents:echo\nscorers:\n  - judge: {criterion: The assistant echoed., model: openai/j, "
                    "api_base: 'localhost:8000/v1'}\ndata:\n  - {id: c0, input: hi}\n")
    done = cli("run", "d.yaml", "--json", "r.json", env=ENV)
    assert done.code == 2, done.stdout
    assert "d.yaml:3:" in done.stderr and "api_base must be an http:// or https:// URL, got 'localhost:8000/v1': " \
        "write http://localhost:8000/v1" in done.stderr, done.stderr
    assert not (workdir / "r.json").exists() and not (workdir / "evalcli.db").exists()
    write("m.yaml", "target: {model: openai/m, api_base: '127.0.0.1:1/v1'}\ngates: [{includes: x}]\n"
                    "data:\n  - {id: c0, input: hi}\n")
    model = cli("validate", "m.yaml", env=ENV)
    assert model.code == 2 and "m.yaml:1:" in model.stderr and "write http://127.0.0.1:1/v1" in model.stderr
    write("b.yaml", "target: agents:echo\nscorers:\n  - judge: {criterion: The assistant echoed., model: openai/j, "
                    "api_base: '${JUDGE_API_BASE:-}'}\ndata:\n  - {id: c0, input: hi}\n")
    assert cli("validate", "b.yaml", env=ENV).code == 0
