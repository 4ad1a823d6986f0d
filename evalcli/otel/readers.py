"""What a span says, in the three dialects agents speak (docs/otel.md, "What is read from a span").

- GenAI semantic conventions: ``gen_ai.operation.name`` (``chat``, ``text_completion``, ``generate_content``,
  ``execute_tool``, ``invoke_agent``), ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (parts), the deprecated
  per-message events (``gen_ai.user.message``, ``gen_ai.assistant.message``, ``gen_ai.tool.message``,
  ``gen_ai.choice``), ``gen_ai.usage.*``, ``gen_ai.tool.*``;
- OpenInference: ``openinference.span.kind`` (``LLM``, ``TOOL``, ``AGENT``, ``CHAIN``), ``llm.*`` (flattened
  ``llm.input_messages.N.message.*``), ``tool.*``, ``input.value`` / ``output.value``;
- Google ADK: ``gcp.vertex.agent.llm_request`` / ``llm_response`` (Gemini contents) and
  ``gcp.vertex.agent.tool_call_args`` / ``tool_response``.

``read`` turns one span into a ``ModelCall``, a ``ToolUse`` or ``None`` (any other span: an agent, a chain, an HTTP
request). Messages come out in OpenAI format (docs/recorded.md), as every other part of evalcli reads them.
"""

from __future__ import annotations

import json
from dataclasses import field
from typing import Any

from ..messages import Message
from ..records import record
from .gemini import gemini_messages
from .spans import Span, attribute_int, attribute_json, attribute_text

MODEL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "completion"})


@record
class ModelCall:
    """One call of a model: what it was sent and answered (OpenAI format), and its tokens."""

    span: Span
    model: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0
    input: list[Message] = field(default_factory=list)
    output: list[Message] = field(default_factory=list)


@record
class ToolUse:
    """One tool call: its name, id, arguments, and its result (the span's text, or its value) or error."""

    span: Span
    name: str
    call_id: str | None
    arguments: dict[str, Any]
    result: Any = None
    error: str | None = None


def read(span: Span, *, messages: bool = True) -> ModelCall | ToolUse | None:
    """What ``span`` was, in whichever dialect it speaks (the first that recognises it), or ``None``; without
    ``messages`` a model call's messages are left unread (capture needs only its tokens)."""
    attributes = span.attributes
    kind = attributes.get("openinference.span.kind")
    if isinstance(kind, str):
        kind = kind.upper()
        if kind == "LLM":
            return _openinference_model(span, messages)
        if kind == "TOOL":
            return _openinference_tool(span)
        return None
    operation = attributes.get("gen_ai.operation.name")
    if operation == "execute_tool" or "gcp.vertex.agent.tool_call_args" in attributes:
        return _genai_tool(span)
    if operation in MODEL_OPERATIONS or "gcp.vertex.agent.llm_request" in attributes or (
            operation is None and ("gen_ai.usage.input_tokens" in attributes or "gen_ai.usage.prompt_tokens" in attributes
                                   or _has_message_events(span))):
        return _genai_model(span, messages)
    return None


def _genai_model(span: Span, messages: bool = True) -> ModelCall:
    a = span.attributes
    model = attribute_text(a, "gen_ai.response.model") or attribute_text(a, "gen_ai.request.model") or ""
    call = ModelCall(span, model, attribute_int(a, "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens"),
                     attribute_int(a, "gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens"),
                     attribute_int(a, "gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens"))
    if not messages:
        return call
    if "gen_ai.input.messages" in a or "gen_ai.output.messages" in a:
        call.input = genai_messages(attribute_json(a, "gen_ai.input.messages"))
        call.output = genai_messages(attribute_json(a, "gen_ai.output.messages"))
    elif _flattened(a, "gen_ai.prompt.") or _flattened(a, "gen_ai.completion."):  # OpenLLMetry's own form
        call.input, call.output = _flat_messages(a, "gen_ai.prompt"), _flat_messages(a, "gen_ai.completion")
    elif "gcp.vertex.agent.llm_request" in a:
        request = attribute_json(a, "gcp.vertex.agent.llm_request")
        response = attribute_json(a, "gcp.vertex.agent.llm_response")
        call.input = gemini_messages(request.get("contents") if isinstance(request, dict) else None)
        content = response.get("content") if isinstance(response, dict) else None
        call.output = gemini_messages([content] if content else None)
        if not model and isinstance(request, dict):
            call.model = str(request.get("model") or "")
    else:
        call.input, call.output = _event_messages(span)
    return call


def _genai_tool(span: Span) -> ToolUse:
    a = span.attributes
    name = attribute_text(a, "gen_ai.tool.name") or span.name.removeprefix("execute_tool").strip() or "unknown"
    arguments = _first_json(a, "gen_ai.tool.call.arguments", "gcp.vertex.agent.tool_call_args", "tool_arguments")
    result = _first(a, "gen_ai.tool.call.result", "gcp.vertex.agent.tool_response", "tool_response")
    if arguments is None:  # the deprecated per-message events (Strands' default): the call's input, its output
        arguments = _event_json(span, "gen_ai.tool.message", "content")
    if result is None:
        result = next((e.attributes["message"] for e in span.events
                       if e.name == "gen_ai.choice" and "message" in e.attributes), None)
    error = span.error if span.error is not None else attribute_text(a, "error.type")
    return ToolUse(span, name, attribute_text(a, "gen_ai.tool.call.id"), _mapping(arguments), blocks_text(result),
                   _error_text(span, error))


def _openinference_model(span: Span, messages: bool = True) -> ModelCall:
    a = span.attributes
    call = ModelCall(span, attribute_text(a, "llm.model_name") or "", attribute_int(a, "llm.token_count.prompt"),
                     attribute_int(a, "llm.token_count.completion"),
                     attribute_int(a, "llm.token_count.prompt_details.cache_read"))
    if messages:
        call.input, call.output = _flat_messages(a, "llm.input_messages"), _flat_messages(a, "llm.output_messages")
    return call


def _openinference_tool(span: Span) -> ToolUse:
    a = span.attributes
    arguments = _first_json(a, "tool.arguments", "input.value")
    call_id = attribute_text(a, "tool_call.id") or attribute_text(a, "tool.call_id")
    use = ToolUse(span, attribute_text(a, "tool.name") or span.name, call_id, _mapping(arguments),
                  _first(a, "output.value"), _error_text(span, span.error))
    message = _langchain_tool_message(use.result)
    if message is not None:  # LangChain's instrumentor writes the whole ToolMessage: its content is the result
        content = message.get("content")
        use.result = content if isinstance(content, str) else _text(content)
        use.call_id = use.call_id or message.get("tool_call_id")
        if message.get("status") == "error" and use.error is None:
            use.error = use.result.removeprefix("Error: ")
    return use


def _langchain_tool_message(value: Any) -> dict[str, Any] | None:
    """A serialised LangChain ``ToolMessage`` (``{"type": "tool", "data": {...}}``), as its data, else ``None``."""
    if not isinstance(value, str) or not value.startswith("{") or '"tool"' not in value[:64]:
        return None
    try:
        parsed = json.loads(value)
    except ValueError:
        return None
    data = parsed.get("data") if isinstance(parsed, dict) else None
    return data if isinstance(data, dict) else None


def _error_text(span: Span, error: str | None) -> str | None:
    if error is None:
        return None
    if error:
        return error
    for event in span.events:  # the exception event says what the status did not
        if event.name == "exception":
            return str(event.attributes.get("exception.message") or event.attributes.get("exception.type") or "error")
    return "error"


def blocks_text(result: Any) -> Any:
    """A tool result given as content blocks (Strands' and Bedrock's ``[{"text": ...}]``, ``{"json": ...}`` blocks,
    MCP's ``{"type": "text", "text": ...}``; as a list or as its JSON text) as the text an adapter records for it:
    the blocks' texts, a JSON block as JSON, one a line. Any other result is left as it is."""
    blocks = result
    if isinstance(result, str) and result.startswith("[{"):
        try:
            blocks = json.loads(result)
        except ValueError:
            return result
    if not isinstance(blocks, list) or not blocks:
        return result
    texts = []
    for block in blocks:
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif isinstance(block, dict) and set(block) == {"json"}:
            texts.append(_text(block["json"]))
        else:
            return result
    return "\n".join(texts)


def _event_json(span: Span, name: str, key: str) -> Any:
    """Attribute ``key`` of the span's first ``name`` event (JSON read), or ``None``."""
    for event in span.events:
        if event.name == name and key in event.attributes:
            return attribute_json(event.attributes, key)
    return None


def _first_json(attributes: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if key in attributes:
            return attribute_json(attributes, key)
    return None


def _first(attributes: dict[str, Any], *keys: str) -> Any:
    """A tool's result as the span holds it: a text (JSON or not) stays the text the tool answered, not parsed."""
    for key in keys:
        if key in attributes:
            return attributes[key]
    return None


def _mapping(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, dict):
        return arguments
    return {} if arguments in (None, "") else {"input": arguments}


def genai_messages(raw: Any) -> list[Message]:
    """GenAI ``gen_ai.*.messages`` (role and parts) as OpenAI-format messages: text parts join into ``content``,
    ``tool_call`` parts become ``tool_calls``, each ``tool_call_response`` part a ``tool`` message."""
    out: list[Message] = []
    for message in raw if isinstance(raw, list) else ():
        if not isinstance(message, dict):
            continue
        role = str(message.get("role") or "user")
        parts = message.get("parts")
        if not isinstance(parts, list):  # some write OpenAI's own shape
            out.append(_openai_message(message, role))
            continue
        texts = [str(p.get("content", "")) for p in parts if isinstance(p, dict) and p.get("type") == "text"]
        calls = [_call(p.get("id"), p.get("name"), p.get("arguments")) for p in parts
                 if isinstance(p, dict) and p.get("type") == "tool_call"]
        for part in parts:
            if isinstance(part, dict) and part.get("type") == "tool_call_response":
                response = part.get("response", part.get("result"))
                out.append({"role": "tool", "tool_call_id": part.get("id"), "content": _text(response)})
        if role == "model":
            role = "assistant"
        if texts or calls:
            entry: Message = {"role": role, "content": "\n".join(texts) if texts else None}
            if calls:
                entry["tool_calls"] = calls
            out.append(entry)
    return out


def _openai_message(message: dict[str, Any], role: str) -> Message:
    """A message a span wrote in OpenAI's own shape, as a transcript takes it: its content as text (or ``None``), its
    tool calls only those that are calls (``tool_calls: "x"`` or a content of another type is read, never trusted)."""
    content = message.get("content")
    entry: Message = {"role": "assistant" if role == "model" else role,
                      "content": content if content is None or isinstance(content, str) else _text(content)}
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        _with_calls(entry, calls)
    if message.get("tool_call_id") is not None:
        entry["tool_call_id"] = str(message["tool_call_id"])
    return entry


def _call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments or {}, ensure_ascii=False, default=str)
    return {"id": call_id, "type": "function", "function": {"name": str(name), "arguments": text}}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


EVENT_ROLES = {"gen_ai.user.message": "user", "gen_ai.assistant.message": "assistant", "gen_ai.tool.message": "tool",
               "gen_ai.system.message": "system"}


CONTENT_EVENTS = {"gen_ai.content.prompt": ("gen_ai.prompt", 0), "gen_ai.content.completion": ("gen_ai.completion", 1)}
"""Semantic conventions 1.26 and before (no ``gen_ai.operation.name`` yet): the messages sent and answered as one event
each, their attribute a JSON list of OpenAI-format messages."""


def _has_message_events(span: Span) -> bool:
    return any(e.name in EVENT_ROLES or e.name == "gen_ai.choice" or e.name in CONTENT_EVENTS for e in span.events)


def _event_messages(span: Span) -> tuple[list[Message], list[Message]]:
    """The deprecated per-message events: each ``gen_ai.*.message`` is an input message, each ``gen_ai.choice`` an
    output one (their ``tool_calls`` and ``message`` as JSON text or as mappings); before them (1.26), the
    ``gen_ai.content.prompt`` / ``.completion`` events' lists (``CONTENT_EVENTS``)."""
    sent: list[Message] = []
    answered: list[Message] = []
    for event in span.events:
        a = event.attributes
        if event.name in CONTENT_EVENTS:
            key, answer = CONTENT_EVENTS[event.name]
            found = attribute_json(a, key)
            (answered if answer else sent).extend(
                _openai_message(m, str(m.get("role") or ("assistant" if answer else "user")))
                for m in (found if isinstance(found, list) else ()) if isinstance(m, dict))
        elif event.name in EVENT_ROLES:
            message: Message = {"role": EVENT_ROLES[event.name], "content": attribute_json(a, "content")}
            if event.name == "gen_ai.tool.message":
                message["tool_call_id"] = a.get("id")
            _with_calls(message, attribute_json(a, "tool_calls"))
            sent.append(message)
        elif event.name == "gen_ai.choice":
            body = attribute_json(a, "message")
            body = body if isinstance(body, dict) else {"content": attribute_json(a, "content"),
                                                         "tool_calls": attribute_json(a, "tool_calls")}
            choice: Message = {"role": "assistant", "content": body.get("content")}
            _with_calls(choice, body.get("tool_calls"))
            answered.append(choice)
    return sent, answered


def _with_calls(message: Message, calls: Any) -> None:
    if isinstance(calls, list) and calls:
        message["tool_calls"] = [_call(c.get("id"), function.get("name"), function.get("arguments"))
                                 for c in calls if isinstance(c, dict) for function in [_function(c)]]


def _function(call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function")
    return function if isinstance(function, dict) else {}


def _flattened(attributes: dict[str, Any], head: str) -> bool:
    """Whether the span holds flattened messages under ``head`` (``gen_ai.prompt.0.content``)."""
    return any(key.startswith(head) and key[len(head):len(head) + 1].isdigit() for key in attributes)


def _flat_messages(attributes: dict[str, Any], prefix: str) -> list[Message]:
    """Flattened messages as OpenAI-format messages: OpenInference's (``llm.input_messages.0.message.role``,
    ``...tool_calls.0.tool_call.function.name``) and OpenLLMetry's (``gen_ai.prompt.0.role``,
    ``gen_ai.completion.0.tool_calls.0.name``)."""
    found: dict[int, dict[str, Any]] = {}
    head = prefix + "."
    for key, value in attributes.items():
        if not key.startswith(head):
            continue
        index, _, rest = key[len(head):].partition(".")
        if index.isdigit():
            found.setdefault(int(index), {})[rest.removeprefix("message.")] = value
    out: list[Message] = []
    for _, fields in sorted(found.items()):
        message: Message = {"role": str(fields.get("role") or "user"), "content": fields.get("content")}
        if message["content"] is None:
            texts = [v for k, v in sorted(fields.items()) if k.startswith("contents.") and k.endswith(".text")]
            message["content"] = "\n".join(map(str, texts)) if texts else None
        calls: dict[int, dict[str, Any]] = {}
        for key, value in fields.items():
            if key.startswith("tool_calls."):
                index, _, rest = key[len("tool_calls."):].partition(".")
                if index.isdigit():
                    calls.setdefault(int(index), {})[rest.removeprefix("tool_call.")] = value
        if calls:
            message["tool_calls"] = [_call(c.get("id"), c.get("function.name", c.get("name")),
                                           c.get("function.arguments", c.get("arguments")))
                                     for _, c in sorted(calls.items())]
        if fields.get("tool_call_id") is not None:
            message["tool_call_id"] = fields["tool_call_id"]
        out.append(message)
    return out
