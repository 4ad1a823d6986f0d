"""OpenTelemetry both ways (docs/otel.md), second adversarial round: what the first (tests/test_adversarial_57.py) did
not try. Trace files written by the real opentelemetry-sdk as users write them (its own console exporter sent to a
file, ``MessageToJson`` requests appended, OpenLLMetry's flattened ``gen_ai.prompt.N.*`` attributes, a batch job's
span around several sessions, a tool's result only an MCP client's span under it holds), agents instrumented with the
real SDK played through the real CLI (a float attribute that is NaN, exported to a real loopback OTLP/HTTP receiver
and to ``--otel-file``), runs appended to one ``--otel-file`` and read back. Each test failed before its fix."""

from __future__ import annotations

import asyncio
import json
import math
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from google.protobuf.json_format import MessageToJson
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode, Tracer

from tests.conftest import REPO, CliResult, run_cli
from tests.reliability_helpers import SUBPROCESS_TIMEOUT
from tests.test_adversarial_57 import SECRET, Receiver, _handle, export, never_printed
from tests.test_adversarial_57 import receiver as receiver


def score(tmp_path: Path, data_file: str, gates: str, *args: str) -> CliResult:
    (tmp_path / "s.yaml").write_text(f"data_file: {data_file}\ngates: {gates}\n")
    done = run_cli(["run", str(tmp_path / "s.yaml"), "--db", str(tmp_path / "s.db"), *args], REPO, {},
                   timeout=SUBPROCESS_TIMEOUT)
    return CliResult(done.code, done.stdout, done.stderr, tmp_path)


def parts(role: str, part: dict[str, Any]) -> str:
    return json.dumps([{"role": role, "parts": [part]}])


def weather_run(tracer: Tracer, conversation: str = "conv-1", *, failed: bool = False) -> None:
    """One agent run as PydanticAI writes it (GenAI conventions), emitted through the real SDK."""
    with tracer.start_as_current_span("invoke_agent weather", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": conversation}):
        with tracer.start_as_current_span("chat m", attributes={
                "gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 3,
                "gen_ai.input.messages": parts("user", {"type": "text", "content": "Paris?"}),
                "gen_ai.output.messages": parts("assistant", {"type": "tool_call", "id": "c1", "name": "get_weather",
                                                              "arguments": {"city": "Paris"}})}):
            pass
        with tracer.start_as_current_span("execute_tool get_weather", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.id": "c1", "gen_ai.tool.call.arguments": '{"city": "Paris"}'}) as tool:
            if failed:
                tool.set_status(Status(StatusCode.ERROR, "weather service down"))
            else:
                tool.set_attribute("gen_ai.tool.call.result", '{"temp_c": 18}')
        with tracer.start_as_current_span("chat m", attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.output.messages": parts("assistant", {"type": "text", "content": "Paris: 18C."})}):
            pass


def recorded_spans(emit: Any) -> tuple[ReadableSpan, ...]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()  # the test's own, never the global one
    provider.add_span_processor(SimpleSpanProcessor(memory))
    emit(provider.get_tracer("app"))
    provider.shutdown()
    return memory.get_finished_spans()


def otlp_line(spans: tuple[ReadableSpan, ...]) -> str:
    """An ``ExportTraceServiceRequest`` as the SDK's own encoder makes it, in protobuf's JSON (base64 ids, int64 as
    strings, enums by name), on one line."""
    return MessageToJson(encode_spans(spans), indent=None)


def turns(done: CliResult) -> dict[str, list[tuple[Any, list[Any]]]]:
    return {item["id"]: [(t["input"], t["output"]) for t in item["turns"]] for item in done.json["items"]}


def test_the_sdks_own_console_exporter_writing_to_a_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "spans.json"
    with path.open("w") as handle:  # ConsoleSpanExporter(out=file): each span's to_json(), 0x ids, over many lines
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=handle)))
        weather_run(provider.get_tracer("app"), failed=True)
        provider.shutdown()
    assert path.read_text().count('"trace_id": "0x') == 4
    done = score(tmp_path, "spans.json", "[{called_tool: get_weather}, {scorer: no_tool_errors, id: clean}]",
                 "--json", "-")
    # before: exit 2, "not valid JSON: Extra data" (hint: "cut short or edited by hand"); one span a line, each span
    # was "no valid trace_id and span_id"
    assert done.code == 1, done.stdout + done.stderr
    [(question, output)] = turns(done)["conv-1"]
    assert question == "Paris?"
    assert output[1] == {"role": "tool", "tool_call_id": "c1", "name": "get_weather",
                         "content": "Error: weather service down", "is_error": True}
    assert {gate["id"]: gate["passed"] for gate in done.json["gate_results"]} == {
        "called_tool(get_weather)": True, "clean": False}


def test_requests_appended_pretty_printed_are_each_read(tmp_path: Path) -> None:
    first = recorded_spans(lambda tracer: weather_run(tracer, "conv-1"))
    second = recorded_spans(lambda tracer: weather_run(tracer, "conv-2"))
    # MessageToJson's default: two lines of indentation a request, base64 ids, appended one after another
    (tmp_path / "t.json").write_text(MessageToJson(encode_spans(first)) + "\n" + MessageToJson(encode_spans(second)))
    done = score(tmp_path, "t.json", "[{called_tool: get_weather}]", "--json", "-")
    # before: exit 2, "t.json:N:1: not valid JSON: Extra data"
    assert done.code == 0, done.stdout + done.stderr
    assert sorted(turns(done)) == ["conv-1", "conv-2"]

    (tmp_path / "t.json").write_text(MessageToJson(encode_spans(first)) + "\n" + MessageToJson(encode_spans(second))[:-40])
    done = score(tmp_path, "t.json", "[{called_tool: get_weather}]")
    assert done.code == 2 and "Traceback" not in done.stderr  # the second request cut short: located where it breaks
    assert "t.json:" in done.stderr and "not valid JSON" in done.stderr, done.stderr


def openllmetry_run(tracer: Tracer) -> None:
    """An agent run as OpenLLMetry (traceloop's opentelemetry-instrumentation-openai) writes it: the messages as
    flattened ``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*`` attributes, tool calls included."""
    with tracer.start_as_current_span("weather.workflow", attributes={"traceloop.span.kind": "workflow",
                                                                      "session.id": "s-llmetry"}):
        with tracer.start_as_current_span("openai.chat", attributes={
                "gen_ai.system": "openai", "llm.request.type": "chat", "gen_ai.request.model": "gpt-4o",
                "gen_ai.usage.prompt_tokens": 30, "gen_ai.usage.completion_tokens": 7,
                "gen_ai.prompt.0.role": "system", "gen_ai.prompt.0.content": "Be brief.",
                "gen_ai.prompt.1.role": "user", "gen_ai.prompt.1.content": "Weather in Oslo?",
                "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.finish_reason": "tool_calls",
                "gen_ai.completion.0.tool_calls.0.id": "call_1", "gen_ai.completion.0.tool_calls.0.name": "get_weather",
                "gen_ai.completion.0.tool_calls.0.arguments": '{"city": "Oslo"}'}):
            pass
        with tracer.start_as_current_span("openai.chat", attributes={
                "gen_ai.system": "openai", "llm.request.type": "chat", "gen_ai.request.model": "gpt-4o",
                "gen_ai.usage.prompt_tokens": 50, "gen_ai.usage.completion_tokens": 5,
                "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "Weather in Oslo?",
                "gen_ai.prompt.1.role": "assistant", "gen_ai.prompt.1.tool_calls.0.id": "call_1",
                "gen_ai.prompt.1.tool_calls.0.name": "get_weather", "gen_ai.prompt.1.tool_calls.0.arguments": "{}",
                "gen_ai.prompt.2.role": "tool", "gen_ai.prompt.2.content": "rain", "gen_ai.prompt.2.tool_call_id": "call_1",
                "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "Oslo: rain."}):
            pass


def test_openllmetry_flattened_prompts_and_completions_are_read(tmp_path: Path) -> None:
    (tmp_path / "t.jsonl").write_text(otlp_line(recorded_spans(openllmetry_run)) + "\n")
    done = score(tmp_path, "t.jsonl", "[{called_tool: get_weather}, {tool_args: {name: get_weather, args: {city: Oslo}}}, "
                 "{includes: rain}]", "--json", "-")
    # before: exit 2, "'data' is empty: there is nothing to run" and "dataset needs 'target'": no message was read
    assert done.code == 0, done.stdout + done.stderr
    assert turns(done)["s-llmetry"] == [("Weather in Oslo?", [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "rain"},
        {"role": "assistant", "content": "Oslo: rain."}])]


def test_a_trace_file_whose_spans_make_no_conversation_says_so(tmp_path: Path) -> None:
    def http_only(tracer: Tracer) -> None:
        with tracer.start_as_current_span("GET /health", attributes={"http.request.method": "GET"}):
            pass

    (tmp_path / "t.jsonl").write_text(otlp_line(recorded_spans(http_only)) + "\n")
    done = score(tmp_path, "t.jsonl", "[{includes: x}]")
    assert done.code == 2, done.stderr
    assert "Traceback" not in done.stderr
    # before: "'data' is empty: there is nothing to run" (add '- input: ...') and "dataset needs 'target'"
    assert "t.jsonl: the trace file holds no conversation: none of its 1 span(s) is a model call" in done.stderr
    assert "dataset needs 'target'" not in done.stderr and "'data' is empty" not in done.stderr


def test_a_batch_jobs_span_around_several_sessions_is_several_conversations(tmp_path: Path) -> None:
    def batch(tracer: Tracer) -> None:
        def run(session: str, question: str, answer: str) -> None:
            with tracer.start_as_current_span("Agent", attributes={
                    "openinference.span.kind": "AGENT", "session.id": session, "input.value": question,
                    "output.value": answer}):
                with tracer.start_as_current_span("ChatOpenAI", attributes={
                        "openinference.span.kind": "LLM", "session.id": session, "llm.model_name": "gpt-4o",
                        "llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": question,
                        "llm.output_messages.0.message.role": "assistant",
                        "llm.output_messages.0.message.content": answer}):
                    pass

        with tracer.start_as_current_span("nightly batch", attributes={"openinference.span.kind": "CHAIN"}):
            run("alice", "Hi, I am Alice.", "Hello Alice.")
            run("bob", "Hi, I am Bob.", "Hello Bob.")
            run("alice", "What is my name?", "Alice.")

    (tmp_path / "t.jsonl").write_text(otlp_line(recorded_spans(batch)) + "\n")
    done = score(tmp_path, "t.jsonl", "[{includes: 'Hello'}]", "--json", "-")
    assert done.code == 0, done.stdout + done.stderr
    # before: one conversation, alice, of one turn whose answer held Bob's too; Bob's conversation was gone
    assert turns(done) == {
        "alice": [("Hi, I am Alice.", [{"role": "assistant", "content": "Hello Alice."}]),
                  ("What is my name?", [{"role": "assistant", "content": "Alice."}])],
        "bob": [("Hi, I am Bob.", [{"role": "assistant", "content": "Hello Bob."}])]}


MCP_APP = '''
import json

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

trace.set_tracer_provider(TracerProvider())
tracer = trace.get_tracer("app")


async def ask(input: str) -> str:
    # the framework's tool span holds the call; the MCP client's span under it holds the result (or the failure)
    with tracer.start_as_current_span("execute_tool get_weather", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather", "gen_ai.tool.call.id": "c1",
            "gen_ai.tool.call.arguments": json.dumps({"city": input})}):
        with tracer.start_as_current_span("tools/call get_weather", attributes={
                "gen_ai.operation.name": "execute_tool", "mcp.method.name": "tools/call",
                "gen_ai.tool.name": "get_weather"}) as call:
            if input == "Atlantis":
                call.set_status(trace.Status(trace.StatusCode.ERROR, "no such city"))
            else:
                call.set_attribute("gen_ai.tool.call.result", json.dumps({"temp_c": 18}))
    with tracer.start_as_current_span("chat gpt-4o", attributes={
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}):
        with tracer.start_as_current_span("POST /v1/chat/completions", attributes={
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                "gen_ai.usage.input_tokens": 20, "gen_ai.usage.output_tokens": 6}):
            pass  # the HTTP client's instrumentation under the framework's span holds the tokens
    return "done"
'''


def test_what_only_a_nested_span_of_the_same_call_holds_is_the_calls(tmp_path: Path) -> None:
    (tmp_path / "mcpapp.py").write_text(MCP_APP)
    (tmp_path / "d.yaml").write_text("target: mcpapp:ask\ngates: [{called_tool: get_weather}]\n"
                                     "scorers: [{scorer: no_tool_errors, id: clean}]\n"
                                     "data: [{id: paris, input: Paris}, {id: atlantis, input: Atlantis}]\n")
    done = run_cli(["run", "d.yaml", "--db", "e.db", "--json", "-"], tmp_path, {"PYTHONPATH": f"{tmp_path}:{REPO}"},
                   timeout=SUBPROCESS_TIMEOUT)
    assert done.code == 0, done.stderr
    report = json.loads(done.stdout)
    outputs = {item["id"]: item["turns"][0]["output"] for item in report["items"]}
    # before: the tool's result was "null" and the failed call no error (the nested span was left out whole), and
    # the model call counted 0 tokens
    assert outputs["paris"][1]["content"] == '{"temp_c": 18}', outputs
    assert outputs["atlantis"][1]["content"] == "Error: no such city", outputs
    assert {item["id"]: item["scores"]["clean"] for item in report["items"]} == {"paris": 1, "atlantis": 0}
    target = report["usage"]["purposes"]["target"]
    assert (target["calls"], target["prompt_tokens"], target["completion_tokens"]) == (2, 40, 12)


NAN_APP = '''
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

trace.set_tracer_provider(TracerProvider())
tracer = trace.get_tracer("app")


async def ask(input: str) -> str:
    with tracer.start_as_current_span("chat gpt-4o", attributes={
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o", "gen_ai.usage.input_tokens": 5,
            "gen_ai.usage.output_tokens": 2, "app.confidence": float("nan"), "app.budget": float("inf")}):
        pass
    return "fine"
'''


def strict_json(text: str) -> Any:
    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")
    return json.loads(text, parse_constant=refuse)


def test_a_captured_attribute_that_is_nan_is_exported_as_otlp_writes_it(receiver: Receiver, tmp_path: Path) -> None:
    (tmp_path / "nanapp.py").write_text(NAN_APP)
    (tmp_path / "d.yaml").write_text("target: nanapp:ask\ngates: [{includes: fine}]\ndata: [{id: a, input: hi}]\n")
    done = run_cli(["run", "d.yaml", "--db", "e.db", "--otel-file", "o.jsonl", "--otel-endpoint",
                    f"http://127.0.0.1:{receiver.port}"], tmp_path, {"PYTHONPATH": f"{tmp_path}:{REPO}"},
                   timeout=SUBPROCESS_TIMEOUT)
    # before: "internal error: ParseError: ... Couldn't parse NaN" after the run (nothing sent), and --otel-file held
    # the literal NaN, which no JSON reader but Python's takes
    assert done.code == 0, done.stderr
    assert "internal error" not in done.stderr and "not exported" not in done.stderr, done.stderr
    [chat] = [s for s in receiver.spans() if s.name == "chat gpt-4o"]
    values = {a.key: a.value.double_value for a in chat.attributes if a.value.HasField("double_value")}
    assert math.isnan(values["app.confidence"]) and values["app.budget"] == math.inf
    [line] = (tmp_path / "o.jsonl").read_text().splitlines()
    written = [s for r in strict_json(line)["resourceSpans"] for sc in r["scopeSpans"] for s in sc["spans"]]
    [chat_written] = [s for s in written if s["name"] == "chat gpt-4o"]
    attributes = {a["key"]: a["value"] for a in chat_written["attributes"]}
    assert attributes["app.confidence"] == {"doubleValue": "NaN"}
    assert attributes["app.budget"] == {"doubleValue": "Infinity"}
    done = score(tmp_path, "o.jsonl", "[{includes: fine}]")  # and read back
    assert done.code == 0, done.stderr
    assert "skipped" not in done.stderr and "a value is wrong" not in done.stderr, done.stderr


APP = '''
import json

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

trace.set_tracer_provider(TracerProvider())
tracer = trace.get_tracer("app")


async def ask(input: str) -> str:
    with tracer.start_as_current_span("execute_tool get_weather", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather", "gen_ai.tool.call.id": "c1",
            "gen_ai.tool.call.arguments": json.dumps({"city": input}), "gen_ai.tool.call.result": "sunny"}):
        pass
    return "sunny in " + input
'''


@pytest.fixture
def app(tmp_path: Path) -> Iterator[dict[str, str]]:
    (tmp_path / "weatherapp.py").write_text(APP)
    yield {"PYTHONPATH": f"{tmp_path}:{REPO}"}


def test_runs_appended_to_one_otel_file_read_back_are_each_conversation_once(app: dict[str, str],
                                                                            tmp_path: Path) -> None:
    (tmp_path / "d.yaml").write_text("target: weatherapp:ask\ngates: [{called_tool: get_weather}]\n"
                                     "data: [{id: a, input: Paris}, {id: b, input: Oslo}]\n")
    for _ in range(2):  # the nightly job appends each run to the same file, as docs/otel.md says it does
        done = run_cli(["run", "d.yaml", "--db", "e.db", "--otel-file", "runs.jsonl"], tmp_path, app,
                       timeout=SUBPROCESS_TIMEOUT)
        assert done.code == 0, done.stderr
    done = score(tmp_path, "runs.jsonl", "[{called_tool: get_weather}, {max_tool_calls: 1}]", "--json", "-")
    # before: exit 1, each conversation two turns (one a run), the call c1 in both, max_tool_calls failed
    assert done.code == 0, done.stdout + done.stderr
    assert {key: [question for question, _ in found] for key, found in turns(done).items()} == {
        "a": ["Paris"], "b": ["Oslo"]}
    assert done.stderr.count("are in several runs evalcli exported to this file") == 1, done.stderr
    assert "2 conversation(s) (a, b) are in several runs" in done.stderr


async def _busy(state: Receiver, request: web.Request) -> web.StreamResponse:
    """A receiver starting up or shedding load: ``busy-once`` answers the first request 503, ``busy`` every one 429
    (each with ``Retry-After: 0``); then as the first round's receiver."""
    if state.mode == "busy" or (state.mode == "busy-once" and not state.requests):
        await request.read()
        state.requests.append({"method": request.method, "path": request.path, "headers": dict(request.headers),
                               "spans": []})
        return web.Response(status=429 if state.mode == "busy" else 503, headers={"Retry-After": "0"})
    return await _handle(state, request)


@pytest.fixture
def busy_receiver() -> Iterator[Receiver]:
    state = Receiver(mode="busy-once")
    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", lambda request: _busy(state, request))
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    state.port = int(runner.addresses[0][1])
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(SUBPROCESS_TIMEOUT)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(SUBPROCESS_TIMEOUT)
        loop.close()


def test_a_receiver_busy_for_a_moment_gets_the_run_sent_again(busy_receiver: Receiver, tmp_path: Path) -> None:
    done = export(tmp_path, f"http://127.0.0.1:{busy_receiver.port}")
    assert done.code == 0, done.stderr
    never_printed(done)
    # before: "refused the run's spans: HTTP 503 Service Unavailable" and the spans lost, though OTLP/HTTP says a
    # 503 (429, 502, 504) is to be retried with backoff, as the OpenTelemetry SDKs do
    assert "not exported" not in done.stderr, done.stderr
    assert [len(r["spans"]) for r in busy_receiver.requests] == [0, 3]
    assert {k.lower(): v for k, v in busy_receiver.requests[1]["headers"].items()}["x-api-key"] == SECRET

    busy_receiver.mode, busy_receiver.requests = "busy", []
    (tmp_path / "again").mkdir()
    done = export(tmp_path / "again", f"http://127.0.0.1:{busy_receiver.port}")
    assert done.code == 0, done.stderr
    assert len(busy_receiver.requests) == 4  # sent 4 times in all, then said once
    assert done.stderr.count("was not exported") == 1, done.stderr
    assert "refused the run's spans: HTTP 429 Too Many Requests (4 times)" in done.stderr


def test_an_endpoint_without_its_scheme_is_refused_naming_where_it_came_from_never_its_password(
        tmp_path: Path) -> None:
    (tmp_path / "d.yaml").write_text("gates: [{includes: hi}]\ndata: [{id: a, transcript: [{role: user, content: x},"
                                     " {role: assistant, content: hi}]}]\n")
    password = "pw-72-endpoint-secret-0123456789"
    for args, env, said in (
            (["--otel-endpoint", f"bob:{password}@collector:4318"], {},
             "--otel-endpoint [redacted]@collector:4318 is not an http(s) URL with a host"),
            (["--otel-endpoint", "-"], {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"bob:{password}@collector:4318/v1/traces"},
             "--otel-endpoint -: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=[redacted]@collector:4318/v1/traces is not"),
            (["--otel-endpoint", "-"], {"OTEL_EXPORTER_OTLP_ENDPOINT": "localhost:4318"},
             "--otel-endpoint -: OTEL_EXPORTER_OTLP_ENDPOINT=localhost:4318 is not an http(s) URL with a host")):
        done = run_cli(["run", "d.yaml", "--db", "e.db", *args], tmp_path, env, timeout=SUBPROCESS_TIMEOUT)
        assert done.code == 2, done.stderr
        # before: the password printed whole (a URL's userinfo written without its scheme was not redacted), and
        # "--otel-endpoint localhost:4318/v1/traces", a URL the user never wrote, named for the variable's value
        assert password not in done.stdout + done.stderr
        assert said in done.stderr, done.stderr
        assert not (tmp_path / "e.db").exists()


def test_a_run_appended_to_a_file_whose_last_line_has_no_line_break_is_a_line_of_its_own(app: dict[str, str],
                                                                                        tmp_path: Path) -> None:
    earlier = otlp_line(recorded_spans(lambda tracer: weather_run(tracer, "earlier")))
    (tmp_path / "runs.jsonl").write_text(earlier)  # written by hand, or by a tool that ends no line with a break
    (tmp_path / "d.yaml").write_text("target: weatherapp:ask\ngates: [{called_tool: get_weather}]\n"
                                     "data: [{id: a, input: Paris}]\n")
    done = run_cli(["run", "d.yaml", "--db", "e.db", "--otel-file", "runs.jsonl"], tmp_path, app,
                   timeout=SUBPROCESS_TIMEOUT)
    assert done.code == 0, done.stderr
    lines = (tmp_path / "runs.jsonl").read_text().splitlines()
    # before: one line holding two JSON documents, which the collector, jq and every JSON Lines reader refuse
    assert len(lines) == 2 and lines[0] == earlier
    assert [sorted(strict_json(line)) for line in lines] == [["resourceSpans"], ["resourceSpans"]]
