"""Export that does not get through (docs/otel.md, "When the export fails"): a receiver on a closed port, one that
answers 500, one that does not answer in time. The run is stored and reported, its exit code is its own, the
failure is one located warning (the option, the URL, the run, why, what to do), never a traceback, and the secret
in ``OTEL_EXPORTER_OTLP_HEADERS`` is sent to the receiver but never printed. An endpoint, timeout or file that
cannot work is a usage error (exit 2) before anything runs. Real loopback HTTP servers and the real CLI."""

from __future__ import annotations

import json
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import REPO, CliResult, run_cli
from tests.phoenix_server import free_port

SECRET = "sk-otlp-header-secret-0123456789abcdef"
HEADERS = f"Authorization=Bearer%20{SECRET},x-team=evals"

DATASET = """
    gates: [{called_tool: %s}]
    data:
      - id: paris
        transcript:
          - {role: user, content: 'Weather in Paris?'}
          - role: assistant
            content: null
            tool_calls: [{id: c1, type: function, function: {name: get_weather, arguments: {city: Paris}}}]
          - {role: tool, tool_call_id: c1, content: '{"temp_c": 18}'}
          - {role: assistant, content: "Paris: 18°C."}
    """


@dataclass
class Receiver:
    """A loopback OTLP/HTTP receiver that answers ``status`` after ``delay`` seconds, and keeps what it was sent."""

    status: int = 200
    delay: float = 0.0
    seen: list[dict[str, str]] = field(default_factory=list)
    port: int = 0


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    state = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            state.seen.append({k.lower(): v for k, v in self.headers.items()})
            time.sleep(state.delay)
            body = f"rejected {self.headers.get('Authorization')}".encode()  # a receiver echoing the header back
            try:
                self.send_response(state.status, f"echo {self.headers.get('Authorization')}")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except OSError:
                pass  # the client gave up waiting

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.port = int(server.server_address[1])
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def run(tmp_path: Path, *args: str, env: dict[str, str] | None = None, gate: str = "get_weather") -> CliResult:
    path = tmp_path / "d.yaml"
    path.write_text(textwrap.dedent(DATASET % gate).lstrip("\n"))
    done = run_cli(["run", str(path), "--db", str(tmp_path / "e.db"), "--json", str(tmp_path / "out.json"), *args],
                   REPO, {"OTEL_EXPORTER_OTLP_HEADERS": HEADERS, **(env or {})})
    return CliResult(done.code, done.stdout, done.stderr, tmp_path)


def stored(done: CliResult) -> str:
    """The run is stored and reported as if the export had not been asked for; its id."""
    report = json.loads((done.cwd / "out.json").read_text())
    [row] = done.db("e.db").execute("SELECT id FROM runs").fetchall()
    assert row[0] == report["run_id"]
    return str(report["run_id"])


def no_leak(done: CliResult) -> None:
    assert "Traceback" not in done.stderr
    assert SECRET not in done.stdout + done.stderr
    assert "Bearer" not in done.stdout + done.stderr


def test_a_closed_port_is_a_warning_and_the_run_keeps_its_results_and_exit_code(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    done = run(tmp_path, "--otel-endpoint", url)
    assert done.code == 0, done.stderr
    run_id = stored(done)
    assert (f"warning: run {run_id} was not exported: --otel-endpoint {url}/v1/traces cannot be reached"
            in done.stderr), done.stderr
    assert "hint: start the receiver, or check the URL" in done.stderr
    no_leak(done)


def test_a_receiver_answering_500_is_a_warning_the_header_was_sent_and_never_printed(
        tmp_path: Path, receiver: Receiver) -> None:
    receiver.status = 500
    url = f"http://127.0.0.1:{receiver.port}/v1/traces"
    done = run(tmp_path, "--otel-endpoint", url, gate="other_tool")  # a failing gate: exit 1 stands
    assert done.code == 1, done.stderr
    run_id = stored(done)
    assert (f"warning: run {run_id} was not exported: --otel-endpoint {url} refused the run's spans: HTTP 500 "
            "Internal Server Error" in done.stderr), done.stderr
    [sent] = receiver.seen
    assert sent["authorization"] == f"Bearer {SECRET}" and sent["x-team"] == "evals"
    assert sent["content-type"] == "application/x-protobuf"
    no_leak(done)
    assert "echo" not in done.stderr and "rejected" not in done.stderr  # what the receiver wrote back is not shown


@pytest.mark.timing
def test_a_receiver_that_does_not_answer_in_time_is_a_warning_naming_the_timeout(
        tmp_path: Path, receiver: Receiver) -> None:
    receiver.delay = 20.0
    url = f"http://127.0.0.1:{receiver.port}/v1/traces"
    started = time.monotonic()
    done = run(tmp_path, "--otel-endpoint", url, env={"OTEL_EXPORTER_OTLP_TIMEOUT": "500"})
    assert time.monotonic() - started < 19.0  # it gave up at the timeout, not when the receiver answered
    assert done.code == 0, done.stderr
    run_id = stored(done)
    assert (f"warning: run {run_id} was not exported: --otel-endpoint {url} did not answer within 0.5 s"
            in done.stderr), done.stderr
    assert "OTEL_EXPORTER_OTLP_TIMEOUT" in done.stderr
    no_leak(done)


def test_the_file_is_still_written_when_the_endpoint_fails(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    done = run(tmp_path, "--otel-endpoint", url, "--otel-file", str(tmp_path / "run.otlp.jsonl"))
    assert done.code == 0, done.stderr
    assert "cannot be reached" in done.stderr
    [line] = (tmp_path / "run.otlp.jsonl").read_text().splitlines()
    names = {s["name"].split()[0] for r in json.loads(line)["resourceSpans"] for sc in r["scopeSpans"]
             for s in sc["spans"]}
    assert names == {"evalcli.run", "evalcli.conversation", "evalcli.turn"}


@pytest.mark.parametrize(("args", "env", "message"), [
    (["--otel-endpoint", "ftp://127.0.0.1/v1/traces"], {},
     "error: --otel-endpoint ftp://127.0.0.1/v1/traces is not an http(s) URL with a host"),
    (["--otel-endpoint", "http://user:hunter2-password@127.0.0.1:1/v1/traces"], {"OTEL_EXPORTER_OTLP_TIMEOUT": "soon"},
     "error: OTEL_EXPORTER_OTLP_TIMEOUT='soon' is not a positive number of milliseconds"),
    (["--otel-file", "missing/run.otlp.jsonl"], {}, "missing/run.otlp.jsonl: the folder"),
])
def test_an_export_that_cannot_work_is_a_usage_error_before_the_run(
        tmp_path: Path, args: list[str], env: dict[str, str], message: str) -> None:
    done = run(tmp_path, *args, env=env)
    assert done.code == 2, done.stderr
    assert message in done.stderr, done.stderr
    assert "hint:" in done.stderr
    assert not (tmp_path / "out.json").exists()  # nothing ran
    no_leak(done)
    assert "hunter2" not in done.stderr
