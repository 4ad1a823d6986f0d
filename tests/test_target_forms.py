"""The pieces behind docs/targets/http.md targets: ``--target`` specs, URL redaction, body templates, Mastra's messages."""

from __future__ import annotations

import pytest

from evalcli.errors import UsageError
from evalcli.secrets import Redactor, header_secrets, redact_url, url_secrets
from evalcli.targets.forms import cli_target
from evalcli.targets.mastra import from_model_messages
from evalcli.targets.remote import quote
from evalcli.targets.session import ConfigProblem
from evalcli.targets.templates import Body


def test_target_specs_on_the_command_line() -> None:
    assert cli_target("model:openai/gpt-4o-mini") == {"model": "openai/gpt-4o-mini"}
    assert cli_target("mastra:http://127.0.0.1:4111#weatherAgent") == {
        "mastra": {"url": "http://127.0.0.1:4111", "agent": "weatherAgent"}}
    assert cli_target("http:http://127.0.0.1:8000/chat") == {"http": {"url": "http://127.0.0.1:8000/chat"}}
    assert cli_target("http:https://agent.example/chat") == {"http": {"url": "https://agent.example/chat"}}
    assert cli_target("https://agent.example/chat") == {"http": {"url": "https://agent.example/chat"}}
    assert cli_target("examples.weather_agent:weather_agent") == "examples.weather_agent:weather_agent"
    for bad in ("model:", "mastra:http://x", "nothing"):
        with pytest.raises(UsageError):
            cli_target(bad)


def test_credentials_in_urls_are_redacted_and_collected() -> None:
    url = "https://bob:s3cr3t@agent.example/chat?api_key=AAA&session=1&token=BBB"
    assert redact_url(url) == "https://[redacted]@agent.example/chat?api_key=[redacted]&session=[redacted]&token=[redacted]"
    assert url_secrets(url) == {"bob", "s3cr3t", "bob:s3cr3t", "AAA", "1", "BBB"}
    assert redact_url("http://127.0.0.1:8000/chat") == "http://127.0.0.1:8000/chat"
    assert header_secrets({"Authorization": "Bearer abc123", "X-Id": "7"}) == {"Bearer abc123", "abc123"}
    secrets = Redactor({"abc123"}, env={})
    assert quote("x" * 299 + "abc123" + "tail", secrets) == "x" * 299 + "[..."
    assert quote("  two\n lines ", secrets) == "two lines" and quote("", secrets) == "(an empty body)"


def test_a_single_expression_keeps_its_type_and_others_render_text() -> None:
    body = Body.compile({"h": "{{ history }}", "n": "{{ turn }}", "s": "turn {{ turn }}", "raw": "plain", "x": 3,
                         "nested": ["{{ metadata.k }}", {"deep": "{{ input | upper }}"}], "two": "{{ turn }}{{ turn }}"})
    context = {"history": [{"role": "user", "content": "a"}], "turn": 2, "metadata": {"k": [1]}, "input": "hi",
               "thread": None, "resource": None, "item_id": "i"}
    assert body.render(context) == {"h": [{"role": "user", "content": "a"}], "n": 2, "s": "turn 2", "raw": "plain",
                                    "x": 3, "nested": [[1], {"deep": "HI"}], "two": "22"}
    assert body.names == {"history", "turn", "metadata", "input"}
    with pytest.raises(ConfigProblem) as caught:
        Body.compile({"a": ["{{ input }}", "{{ nope }}"]}, ("body",))
    assert caught.value.at == ("body", "a", 1)
    unsafe = Body.compile("{{ input.__class__.__mro__ }}")
    with pytest.raises(Exception, match=r"unsafe|not safely"):
        unsafe.render({"input": "x"})
    missing = Body.compile("{{ metadata.absent }}")
    with pytest.raises(Exception, match="absent"):
        missing.render({"metadata": {}})


def test_mastra_model_messages_become_openai_messages() -> None:
    messages = [
        {"role": "assistant", "content": [{"type": "reasoning", "text": "hmm"},
                                          {"type": "tool-call", "toolCallId": "c1", "toolName": "a", "input": {"x": 1}},
                                          {"type": "tool-call", "toolCallId": "c2", "toolName": "b", "input": {}}]},
        {"role": "tool", "content": [
            {"type": "tool-result", "toolCallId": "c1", "toolName": "a", "output": {"type": "json", "value": {"ok": 1}}},
            {"type": "tool-result", "toolCallId": "c2", "toolName": "b",
             "output": {"type": "error-json", "value": {"why": "no"}}}]},
        {"role": "tool", "content": [
            {"type": "tool-result", "toolCallId": "c3", "toolName": "c", "output": {"type": "text", "value": "t"}},
            {"type": "tool-result", "toolCallId": "c4", "toolName": "d", "output": {"type": "execution-denied"}}]},
        {"role": "assistant", "content": "Done."},
    ]
    assert from_model_messages(messages) == [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "a", "arguments": '{"x": 1}'}},
            {"id": "c2", "type": "function", "function": {"name": "b", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"ok": 1}', "name": "a"},
        {"role": "tool", "tool_call_id": "c2", "content": '{"why": "no"}', "name": "b", "is_error": True},
        {"role": "tool", "tool_call_id": "c3", "content": "t", "name": "c"},
        {"role": "tool", "tool_call_id": "c4", "content": "execution denied", "name": "d", "is_error": True},
        {"role": "assistant", "content": "Done."},
    ]
