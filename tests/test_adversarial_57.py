"""OpenTelemetry both ways (docs/otel.md) tried as real users would, through the real CLI: a run exported to a real
loopback OTLP/HTTP receiver (aiohttp, started here, counting every request and decoding every body with
opentelemetry-proto) that redirects, answers a byte at a time, rejects spans in a ``partial_success``, or wants the
credentials of its URL; a resumed run's export; trace files as exporters really write them (a batch delivered twice,
spans of the GenAI conventions 1.26, a gzip-compressed export); and an agent instrumented with the real
opentelemetry-sdk writing 1.26 spans. Each test failed before its fix."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.conftest import REPO, CliResult, run_cli
from tests.reliability_helpers import SUBPROCESS_TIMEOUT
from tests.test_otel_export_errors import DATASET as EXPORTED

SECRET = "sk-otlp-57-header-secret-abcdef0123"
PASSWORD = "pw-57-url-secret-0123456789"

DATASET = EXPORTED % "get_weather"
"""A recorded conversation, the export tests' own (one tool call, a gate on it)."""


@dataclass
class Receiver:
    """A loopback OTLP/HTTP receiver: every request it got (method, path, headers, decoded spans) and how it answers
    (``mode``: ``ok``, ``redirect``, ``trickle`` a byte at a time, ``partial`` rejecting every span)."""

    mode: str = "ok"
    requests: list[dict[str, Any]] = field(default_factory=list)
    port: int = 0

    def spans(self) -> list[Any]:
        return [span for r in self.requests for span in r["spans"]]


async def _handle(state: Receiver, request: web.Request) -> web.StreamResponse:
    body = await request.read()
    spans: list[Any] = []
    if request.method == "POST" and body:
        decoded = ExportTraceServiceRequest()
        decoded.ParseFromString(body)
        spans = [s for r in decoded.resource_spans for scope in r.scope_spans for s in scope.spans]
    state.requests.append({"method": request.method, "path": request.path, "headers": dict(request.headers),
                           "spans": spans})
    if state.mode == "redirect" and request.path == "/v1/traces":
        raise web.HTTPMovedPermanently(f"http://127.0.0.1:{state.port}/elsewhere")
    if state.mode == "trickle":  # a proxy that answers, slowly, forever (well past any timeout)
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/x-protobuf"})
        await response.prepare(request)
        for _ in range(120):
            await response.write(b"\0")
            await asyncio.sleep(0.25)
        return response
    answer = ExportTraceServiceResponse()
    if state.mode == "partial":
        answer.partial_success.rejected_spans = len(spans)
        answer.partial_success.error_message = f"rejected, {request.headers.get('Authorization')}"
    return web.Response(body=answer.SerializeToString(), content_type="application/x-protobuf")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    state = Receiver()
    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", lambda request: _handle(state, request))
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


def export(tmp_path: Path, url: str, env: dict[str, str] | None = None) -> CliResult:
    path = tmp_path / "d.yaml"
    path.write_text(textwrap.dedent(DATASET).lstrip("\n"))
    done = run_cli(["run", str(path), "--db", str(tmp_path / "e.db"), "--otel-endpoint", url], REPO,
                   {"OTEL_EXPORTER_OTLP_HEADERS": f"x-api-key={SECRET}", **(env or {})}, timeout=SUBPROCESS_TIMEOUT)
    return CliResult(done.code, done.stdout, done.stderr, tmp_path)


def never_printed(done: CliResult) -> None:
    assert "Traceback" not in done.stderr
    for secret in (SECRET, PASSWORD, base64.b64encode(f"alice:{PASSWORD}".encode()).decode()):
        assert secret not in done.stdout + done.stderr


def test_a_receiver_that_redirects_is_a_warning_naming_where_and_nothing_follows_it(receiver: Receiver,
                                                                                    tmp_path: Path) -> None:
    receiver.mode = "redirect"
    done = export(tmp_path, f"http://127.0.0.1:{receiver.port}")
    assert done.code == 0, done.stderr
    never_printed(done)
    # before: urllib turned the POST into a GET of /elsewhere (no spans, the header sent along) and the run said
    # nothing: its spans were lost without a word
    assert [(r["method"], r["path"]) for r in receiver.requests] == [("POST", "/v1/traces")]
    assert "answered HTTP 301 Moved Permanently, redirecting to " in done.stderr, done.stderr
    assert f"http://127.0.0.1:{receiver.port}/elsewhere" in done.stderr
    assert "was not exported" in done.stderr


@pytest.mark.timing  # the run must finish at the timeout, not when the receiver stops answering (30 s)
def test_a_receiver_answering_a_byte_at_a_time_is_cut_off_at_the_timeout(receiver: Receiver, tmp_path: Path) -> None:
    receiver.mode = "trickle"
    started = time.monotonic()
    done = export(tmp_path, f"http://127.0.0.1:{receiver.port}", {"OTEL_EXPORTER_OTLP_TIMEOUT": "1000"})
    took = time.monotonic() - started
    assert done.code == 0, done.stderr
    never_printed(done)
    # before: 30 s and no warning (urllib's timeout bounds each read, and a byte came every 0.25 s)
    assert "did not answer within 1 s" in done.stderr, done.stderr
    assert took < 20, took


def test_spans_the_receiver_rejected_are_a_warning_saying_how_many(receiver: Receiver, tmp_path: Path) -> None:
    receiver.mode = "partial"
    done = export(tmp_path, f"http://127.0.0.1:{receiver.port}")
    assert done.code == 0, done.stderr
    never_printed(done)
    [request] = receiver.requests
    assert len(request["spans"]) == 3
    # before: nothing said, though the receiver kept none of the run's spans
    assert "rejected 3 of the run's 3 spans" in done.stderr, done.stderr
    assert "rejected, " not in done.stderr  # what the receiver wrote back is never printed


def test_credentials_in_the_endpoint_url_are_sent_as_basic_auth_and_never_printed(receiver: Receiver,
                                                                                  tmp_path: Path) -> None:
    done = export(tmp_path, f"http://alice:{PASSWORD}@127.0.0.1:{receiver.port}/v1/traces",
                  {"OTEL_EXPORTER_OTLP_HEADERS": ""})
    assert done.code == 0, done.stderr
    never_printed(done)
    # before: "cannot be reached: [Errno -2] Name or service not known" (urllib took alice:...@127.0.0.1 for a host)
    assert "not exported" not in done.stderr, done.stderr
    [request] = receiver.requests
    token = base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
    assert request["headers"]["Authorization"] == f"Basic {token}"
    assert len(request["spans"]) == 3
    with done.db("e.db") as db:
        for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
            assert PASSWORD not in repr(db.execute(f"SELECT * FROM [{table}]").fetchall())


def test_a_run_of_thousands_of_conversations_reaches_a_receiver_that_limits_a_requests_size(receiver: Receiver,
                                                                                           tmp_path: Path) -> None:
    lines = [json.dumps({"id": f"c{n}", "messages": [
        {"role": "user", "content": f"Weather in city {n}?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "x"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"temp_c": 18}'},
        {"role": "assistant", "content": "18C"}]}) for n in range(1500)]
    (tmp_path / "big.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "big.yaml").write_text("data_file: big.jsonl\ngates: [{called_tool: get_weather}]\n")
    done = run_cli(["run", "big.yaml", "--db", "e.db", "--otel-endpoint", f"http://127.0.0.1:{receiver.port}"],
                   tmp_path, {}, timeout=SUBPROCESS_TIMEOUT)
    assert done.code == 0, done.stderr
    # before: one request of 2.6 MB, refused with HTTP 413 by aiohttp's 1 MiB limit (the collector's is 20 MiB): no
    # span of the run reached the receiver
    assert "not exported" not in done.stderr, done.stderr
    assert all(r["method"] == "POST" for r in receiver.requests) and len(receiver.requests) > 1
    names = [s.name.split()[0] for s in receiver.spans()]
    assert (names.count("evalcli.run"), names.count("evalcli.conversation"), names.count("evalcli.turn")) == (
        1, 1500, 1500)
    assert len({s.trace_id for s in receiver.spans()}) == 1


def test_a_header_http_cannot_carry_is_refused_before_the_run_without_its_value(receiver: Receiver,
                                                                               tmp_path: Path) -> None:
    done = export(tmp_path, f"http://127.0.0.1:{receiver.port}", {
        "OTEL_EXPORTER_OTLP_HEADERS": f"authorization=Bearer%20{SECRET}%0A"})  # a token pasted with its newline
    # before: the run played, then "internal error: ValueError: Invalid header value b'Bearer sk-...\\n'", exit 70
    assert done.code == 2, done.stderr
    never_printed(done)
    assert "OTEL_EXPORTER_OTLP_HEADERS: the value of header 'authorization' holds a line break" in done.stderr
    assert receiver.requests == []
    assert not (tmp_path / "e.db").exists() or not done.db("e.db").execute("SELECT * FROM runs").fetchall()


INTERRUPTING_AGENT = '''
import os


def ask(input: str) -> str:
    if input == "stop" and not os.path.exists(os.path.join(os.path.dirname(__file__), "go")):
        raise KeyboardInterrupt  # the first invocation stops here
    return "echo " + input
'''


def test_a_resumed_run_is_exported_whole(receiver: Receiver, tmp_path: Path) -> None:
    (tmp_path / "interrupting.py").write_text(INTERRUPTING_AGENT)
    (tmp_path / "r.yaml").write_text("target: interrupting:ask\ngates: [{includes: echo}]\ndata:\n"
                                     "  - {id: a, input: one}\n  - {id: b, input: two}\n"
                                     "  - {id: c, input: stop}\n  - {id: d, input: four}\n")
    args = ["run", "r.yaml", "--db", "r.db", "--concurrency", "1", "--otel-file", "r.otlp.jsonl",
            "--otel-endpoint", f"http://127.0.0.1:{receiver.port}"]
    first = run_cli(args, tmp_path, {"PYTHONPATH": f"{tmp_path}:{REPO}"}, timeout=SUBPROCESS_TIMEOUT)
    assert first.code == 130, first.stderr
    run_id = CliResult(0, "", "", tmp_path).db("r.db").execute("SELECT id FROM runs").fetchone()[0]
    (tmp_path / "go").write_text("")
    done = run_cli([*args, "--resume", run_id], tmp_path, {"PYTHONPATH": f"{tmp_path}:{REPO}"},
                   timeout=SUBPROCESS_TIMEOUT)
    assert done.code == 0, done.stderr
    [request] = receiver.requests
    sent = sorted(s.name for s in request["spans"] if s.name.startswith("evalcli.conversation"))
    # before: only c and d, the conversations the second invocation played; a and b were in no trace at all
    assert sent == ["evalcli.conversation a", "evalcli.conversation b", "evalcli.conversation c",
                    "evalcli.conversation d"]
    [line] = (tmp_path / "r.otlp.jsonl").read_text().splitlines()
    written = [s["name"] for r in json.loads(line)["resourceSpans"] for sc in r["scopeSpans"] for s in sc["spans"]]
    assert sorted(n for n in written if n.startswith("evalcli.conversation")) == sent
    events = [e for s in request["spans"] if s.name.startswith("evalcli.conversation") for e in s.events]
    assert len(events) == 4 and all(e.name == "gen_ai.evaluation.result" for e in events)


TRACE_ID = "5b8efff798038103d269b633813fc60c"


def attribute(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def weather_request() -> dict[str, Any]:
    """One agent run as PydanticAI writes it (GenAI conventions): a model call asking for get_weather, the tool, the
    answer."""
    def span(n: int, name: str, start: int, parent: int | None, *attributes: dict[str, Any]) -> dict[str, Any]:
        out = {"traceId": TRACE_ID, "spanId": f"a00000000000000{n}", "name": name, "startTimeUnixNano": str(start),
               "endTimeUnixNano": str(start + 500), "attributes": list(attributes)}
        if parent is not None:
            out["parentSpanId"] = f"a00000000000000{parent}"
        return out

    def parts(role: str, part: dict[str, Any]) -> str:
        return json.dumps([{"role": role, "parts": [part]}])

    spans = [
        span(1, "invoke_agent weather", 1000, None, attribute("gen_ai.operation.name", "invoke_agent"),
             attribute("gen_ai.conversation.id", "support-1")),
        span(2, "chat m", 2000, 1, attribute("gen_ai.operation.name", "chat"),
             attribute("gen_ai.input.messages", parts("user", {"type": "text", "content": "Paris?"})),
             attribute("gen_ai.output.messages", parts("assistant", {
                 "type": "tool_call", "id": "c1", "name": "get_weather", "arguments": {"city": "Paris"}}))),
        span(3, "execute_tool get_weather", 3000, 1, attribute("gen_ai.operation.name", "execute_tool"),
             attribute("gen_ai.tool.name", "get_weather"), attribute("gen_ai.tool.call.id", "c1"),
             attribute("gen_ai.tool.call.result", '{"temp_c": 18}')),
        span(4, "chat m", 4000, 1, attribute("gen_ai.operation.name", "chat"),
             attribute("gen_ai.output.messages", parts("assistant", {"type": "text", "content": "Paris: 18°C."}))),
    ]
    return {"resourceSpans": [{"resource": {"attributes": [attribute("service.name", "weather")]},
                               "scopeSpans": [{"scope": {"name": "pydantic-ai"}, "spans": spans}]}]}


def score(tmp_path: Path, data_file: str, gates: str, *args: str) -> CliResult:
    (tmp_path / "s.yaml").write_text(f"data_file: {data_file}\ngates: {gates}\n")
    done = run_cli(["run", str(tmp_path / "s.yaml"), "--db", str(tmp_path / "s.db"), *args], REPO, {},
                   timeout=SUBPROCESS_TIMEOUT)
    return CliResult(done.code, done.stdout, done.stderr, tmp_path)


def test_a_batch_delivered_twice_is_read_once(tmp_path: Path) -> None:
    line = json.dumps(weather_request())
    (tmp_path / "t.jsonl").write_text(f"{line}\n{line}\n")  # an exporter's retry of a batch the collector had taken
    done = score(tmp_path, "t.jsonl", "[{called_tool: get_weather}, {max_tool_calls: 1}]", "--json", "-")
    assert done.code == 0, done.stdout + done.stderr
    [item] = done.json["items"]
    # before: two turns, each with the call c1 (an id recorded in two turns), and max_tool_calls failed
    [turn] = item["turns"]
    assert turn["input"] == "Paris?"
    assert [m["role"] for m in turn["output"]] == ["assistant", "tool", "assistant"]


def test_spans_whose_root_is_in_the_next_file_are_one_turn(tmp_path: Path) -> None:
    document = weather_request()
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    del spans[0]  # the agent's root span ends last: a collector rotating its files wrote it to the next one
    (tmp_path / "t.jsonl").write_text(json.dumps(document) + "\n")
    done = score(tmp_path, "t.jsonl", "[{called_tool: get_weather}, {max_tool_calls: 1}]", "--json", "-")
    # before: three turns (one per orphan span), the call c1 in two of them, max_tool_calls failed
    assert done.code == 0, done.stdout + done.stderr
    [turn] = done.json["items"][0]["turns"]
    assert turn["input"] == "Paris?"
    assert [m["role"] for m in turn["output"]] == ["assistant", "tool", "assistant"]
    assert "span a000000000000001 is not in the file, the spans under it are: they are read as one turn" in done.stderr

    # agent runs under a session span still open (not in the file) stay a turn each
    first, second = weather_request(), weather_request()
    for n, document in enumerate((first, second)):
        for span in document["resourceSpans"][0]["scopeSpans"][0]["spans"]:
            span["spanId"] = span["spanId"][:-2] + f"{n}{span['spanId'][-1]}"
            span["startTimeUnixNano"] = str(int(span["startTimeUnixNano"]) + n * 10_000)
            if "parentSpanId" in span:
                span["parentSpanId"] = span["parentSpanId"][:-2] + f"{n}{span['parentSpanId'][-1]}"
            else:
                span["parentSpanId"] = "ffffffffffffff01"
    spans = [*first["resourceSpans"][0]["scopeSpans"][0]["spans"], *second["resourceSpans"][0]["scopeSpans"][0]["spans"]]
    first["resourceSpans"][0]["scopeSpans"][0]["spans"] = spans
    (tmp_path / "t.jsonl").write_text(json.dumps(first) + "\n")
    done = score(tmp_path, "t.jsonl", "[{called_tool: get_weather}]", "--json", "-")
    assert done.code == 0, done.stdout + done.stderr
    assert [[m["role"] for m in t["output"]] for t in done.json["items"][0]["turns"]] == [
        ["assistant", "tool", "assistant"], ["assistant", "tool", "assistant"]]


def test_a_tool_result_in_a_trace_of_model_calls_only_is_the_calls_result(tmp_path: Path) -> None:
    document = weather_request()
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    del spans[2]  # no execute_tool span: the OpenAI client's instrumentation traces model calls only
    spans[2]["attributes"].append(attribute("gen_ai.input.messages", json.dumps([
        {"role": "user", "parts": [{"type": "text", "content": "Paris?"}]},
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "get_weather",
                                         "arguments": {"city": "Paris"}}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": {"temp_c": 18}}]}])))
    (tmp_path / "t.jsonl").write_text(json.dumps(document) + "\n")
    done = score(tmp_path, "t.jsonl", "[{called_tool: get_weather}]", "--json", "-")
    assert done.code == 0, done.stdout + done.stderr
    [turn] = done.json["items"][0]["turns"]
    # before: the call c1 with no result at all, though the next model call was sent it
    assert [m["role"] for m in turn["output"]] == ["assistant", "tool", "assistant"]
    assert turn["output"][1]["tool_call_id"] == "c1"
    assert json.loads(turn["output"][1]["content"]) == {"temp_c": 18}


def semconv_126_request() -> dict[str, Any]:
    """A chat span of the GenAI conventions 1.26 (as opentelemetry-instrumentation-openai and OpenLLMetry wrote
    them): no gen_ai.operation.name, gen_ai.system, prompt_tokens, the messages in gen_ai.content.* events."""
    root = {"traceId": TRACE_ID, "spanId": "b000000000000001", "name": "agent run", "startTimeUnixNano": "1000",
            "endTimeUnixNano": "9000", "attributes": [attribute("session.id", "s-126")]}
    chat = {"traceId": TRACE_ID, "spanId": "b000000000000002", "parentSpanId": "b000000000000001",
            "name": "chat gpt-4o", "startTimeUnixNano": "2000", "endTimeUnixNano": "3000",
            "attributes": [attribute("gen_ai.system", "openai"), attribute("gen_ai.request.model", "gpt-4o"),
                           attribute("gen_ai.usage.prompt_tokens", 40), attribute("gen_ai.usage.completion_tokens", 9)],
            "events": [{"name": "gen_ai.content.prompt", "timeUnixNano": "2000", "attributes": [attribute(
                           "gen_ai.prompt", json.dumps([{"role": "user", "content": "Weather in Oslo?"}]))]},
                       {"name": "gen_ai.content.completion", "timeUnixNano": "3000", "attributes": [attribute(
                           "gen_ai.completion", json.dumps([{"role": "assistant", "content": "Oslo: rain."}]))]}]}
    return {"resourceSpans": [{"resource": {"attributes": []},
                               "scopeSpans": [{"scope": {"name": "openai"}, "spans": [root, chat]}]}]}


def test_a_chat_span_of_the_conventions_1_26_is_read(tmp_path: Path) -> None:
    (tmp_path / "t.jsonl").write_text(json.dumps(semconv_126_request()) + "\n")
    done = score(tmp_path, "t.jsonl", "[{includes: rain}]", "--json", "-")
    # before: exit 1, the turn's output empty (the span was no model call: it has no gen_ai.operation.name)
    assert done.code == 0, done.stdout + done.stderr
    [turn] = done.json["items"][0]["turns"]
    assert turn["input"] == "Weather in Oslo?"
    assert turn["output"] == [{"role": "assistant", "content": "Oslo: rain."}]


SEMCONV_126_APP = '''
import json

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

trace.set_tracer_provider(TracerProvider())  # the app's own provider, no exporter
tracer = trace.get_tracer("opentelemetry.instrumentation.openai")


async def ask(input: str) -> str:
    with tracer.start_as_current_span("chat gpt-4o", attributes={
            "gen_ai.system": "openai", "gen_ai.request.model": "gpt-4o", "gen_ai.response.model": "gpt-4o",
            "gen_ai.usage.prompt_tokens": 40, "gen_ai.usage.completion_tokens": 9}) as span:
        span.add_event("gen_ai.content.prompt", {"gen_ai.prompt": json.dumps([{"role": "user", "content": input}])})
        span.add_event("gen_ai.content.completion",
                       {"gen_ai.completion": json.dumps([{"role": "assistant", "content": "Oslo: rain."}])})
    return "Oslo: rain."
'''


def test_an_agent_emitting_spans_of_the_conventions_1_26_has_its_tokens_counted(tmp_path: Path) -> None:
    (tmp_path / "app126.py").write_text(SEMCONV_126_APP)
    (tmp_path / "d.yaml").write_text("target: app126:ask\ngates: [{includes: rain}]\n"
                                     "data: [{id: a, input: 'Weather in Oslo?'}, {id: b, input: 'And Bergen?'}]\n")
    done = run_cli(["run", "d.yaml", "--db", "e.db", "--json", "-", "--concurrency", "64"], tmp_path,
                   {"PYTHONPATH": f"{tmp_path}:{REPO}"}, timeout=SUBPROCESS_TIMEOUT)
    assert done.code == 0, done.stderr
    target = json.loads(done.stdout)["usage"]["purposes"]["target"]
    # before: 0 calls, 0 tokens (the spans were read as no model call)
    assert (target["calls"], target["prompt_tokens"], target["completion_tokens"]) == (2, 80, 18)


def test_a_gzip_compressed_trace_file_is_said_to_be_one_and_nothing_is_written(tmp_path: Path) -> None:
    (tmp_path / "t.jsonl.gz").write_bytes(gzip.compress((json.dumps(weather_request()) + "\n").encode()))
    done = score(tmp_path, "t.jsonl.gz", "[{called_tool: get_weather}]", "--otel-file", str(tmp_path / "o.jsonl"))
    assert done.code == 2, done.stderr
    assert "Traceback" not in done.stderr
    # before: "the file is not UTF-8 text (byte 0x8b)", hint "save it as UTF-8"
    assert "t.jsonl.gz:1:1: the file is gzip-compressed, not text" in done.stderr, done.stderr
    assert "gunzip -k" in done.stderr
    assert not (tmp_path / "o.jsonl").exists()
    assert not (tmp_path / "s.db").exists() or not done.db("s.db").execute("SELECT * FROM runs").fetchall()


def test_an_otel_file_or_a_report_over_a_file_the_run_reads_is_refused_before_it_runs(tmp_path: Path) -> None:
    line = json.dumps(weather_request()) + "\n"
    (tmp_path / "t.jsonl").write_text(line)
    (tmp_path / "d.yaml").write_text(textwrap.dedent(DATASET).lstrip("\n"))
    done = score(tmp_path, "t.jsonl", "[{called_tool: get_weather}]", "--otel-file", str(tmp_path / "t.jsonl"))
    # before: the run was appended to the traces it scored, and read back as a second turn of support-1 next time
    assert done.code == 2, done.stderr
    assert "--otel-file" in done.stderr and "is the data_file the dataset" in done.stderr, done.stderr
    assert (tmp_path / "t.jsonl").read_text() == line
    assert not (tmp_path / "s.db").exists()
    dataset = (tmp_path / "d.yaml").read_text()
    for option, path in (("--json", "d.yaml"), ("--otel-file", "d.yaml"), ("--markdown", "e.db")):
        done = run_cli(["run", "d.yaml", "--db", "e.db", option, path], tmp_path, {}, timeout=SUBPROCESS_TIMEOUT)
        # before: --json d.yaml wrote the report over the dataset; --otel-file appended JSON to its YAML
        assert done.code == 2, done.stderr
        assert f"{option} {path} is the " in done.stderr, done.stderr
        assert (tmp_path / "d.yaml").read_text() == dataset


def test_otel_file_dash_is_refused_not_a_file_named_dash(tmp_path: Path) -> None:
    (tmp_path / "d.yaml").write_text(textwrap.dedent(DATASET).lstrip("\n"))
    done = run_cli(["run", "d.yaml", "--db", "e.db", "--otel-file", "-"], tmp_path, {}, timeout=SUBPROCESS_TIMEOUT)
    # before: exit 0 and a file named "-" beside the dataset (every other output's "-" is stdout)
    assert done.code == 2, done.stderr
    assert "--otel-file -: the run's spans are written to a file, not to stdout" in done.stderr
    assert not (tmp_path / "-").exists() and not (tmp_path / "e.db").exists()
