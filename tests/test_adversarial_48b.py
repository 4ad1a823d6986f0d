"""``evalcli run --workers N`` broken as users would (issue 48, second pass): agents that emit OpenTelemetry spans
(every framework agent, an MCP client), what a worker's target prints, and more, each through the real CLI against
the same run in one process (docs/performance.md#workers)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.agent_server import Answer, ScriptedAgent
from tests.conftest import CliResult
from tests.llm_server import LLMServer, RateLimited, verdict
from tests.test_rate_limits import echo, model_dataset

SPAN_AGENT = '''
from opentelemetry import trace

tracer = trace.get_tracer("adv48b")


def answer(input, **kw):
    with tracer.start_as_current_span("adv48b.step") as span:
        span.set_attribute("adv48b.input", input)
        return f"ok {input}"
'''


def items(count: int, word: str = "hi") -> str:
    return "".join(f"  - {{id: c{n}, input: {word} {n}}}\n" for n in range(count))


def rows(db: Path, run_id: str) -> dict[str, list[tuple[Any, ...]]]:
    """What a run stored of its conversations, without what differs between two runs (ids, timings, thread ids)."""
    with sqlite3.connect(db) as conn:
        return {"items": conn.execute("SELECT item_index, item_id, status, error, gate_scores, scores, passed, "
                                      "outcomes FROM items WHERE run_id = ? ORDER BY item_index", [run_id]).fetchall(),
                "turns": conn.execute("SELECT item_index, turn_index, input, output, gate_scores FROM turns WHERE "
                                      "run_id = ? ORDER BY item_index, turn_index", [run_id]).fetchall(),
                "run": conn.execute("SELECT status, verdict, exit_code, total_items, completed_items, errors, scores "
                                    "FROM runs WHERE id = ?", [run_id]).fetchall()}


def run_id(result: CliResult, out: str) -> str:
    return str(json.loads((result.cwd / out).read_text())["run_id"])


def test_an_agent_that_emits_spans_plays_in_workers_and_its_spans_are_exported(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    """An agent whose code imports OpenTelemetry (every framework agent, the MCP client) has its spans captured each
    turn; a worker sent the capture over the pipe as it was (SDK spans, locks, a context token) and every worker died
    on 'cannot pickle _thread.lock'. Now the spans travel as plain records: the run is the one process's, and
    ``--otel-file`` exports the agent's spans as it does without workers."""
    write("spanagent.py", SPAN_AGENT)
    write("d.yaml", "target: spanagent:answer\ngates: [{includes: ok}]\ndata:\n" + items(5))
    one = cli("run", "d.yaml", "-q", "--json", "one.json", "--otel-file", "one.otlp.json")
    two = cli("run", "d.yaml", "-q", "--json", "two.json", "--otel-file", "two.otlp.json", "--workers", "2")
    assert one.code == 0, one.stderr
    assert two.code == 0, two.stderr
    db = two.cwd / "evalcli.db"
    assert rows(db, run_id(one, "one.json")) == rows(db, run_id(two, "two.json"))
    for name in ("one.otlp.json", "two.otlp.json"):
        exported = (two.cwd / name).read_text()
        assert exported.count('"adv48b.step"') == 5, name  # each turn's own span, in both
        assert exported.count('"adv48b.input"') == 5, name


def http_dataset(url: str, conversations: int) -> str:
    return (f"target:\n  http:\n    url: {url}/chat\n    headers: {{Authorization: \"Bearer ${{AGENT_TOKEN}}\"}}\n"
            "    body: {message: \"{{ input }}\", session_id: \"{{ thread }}\"}\n"
            "    response: {text: reply, usage: usage}\ngates: [{includes: ok}]\ndata:\n" +
            "".join(f"  - {{id: h{n}, inputs: [hi {n}, again {n}]}}\n" for n in range(conversations)))


def test_a_target_warning_counts_the_whole_run_not_each_workers_share(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    """The http target counts the replies its ``usage`` path found nothing in and says it once, after the run. Each
    worker said its own share ('in 6 replies', 'in 8 replies'), and two workers with the same count were said once:
    with 3 workers, 14 replies became '4' and '6'. Now the workers send their counts and the run says the total."""
    agent = ScriptedAgent(lambda seen: Answer(body={"reply": f"ok {seen.body['message']}"}))
    try:
        write("d.yaml", http_dataset(agent.url, 7))
        env = {"AGENT_TOKEN": "tok-48b-never-shown-5150"}
        one = cli("run", "d.yaml", env=env)
        three = cli("run", "d.yaml", "--workers", "3", env=env)
    finally:
        agent.stop()
    assert one.code == three.code == 0, (one.stderr, three.stderr)
    assert len(agent.requests) == 2 * 14  # every turn once, in both runs
    assert {r.headers.get("Authorization") for r in agent.requests} == {"Bearer tok-48b-never-shown-5150"}
    said = [[line for line in run.stderr.splitlines() if "found no usage" in line] for run in (one, three)]
    assert said[0] == said[1] and len(said[1]) == 1 and "in 14 replies" in said[1][0], said
    assert "tok-48b" not in one.stdout + one.stderr + three.stdout + three.stderr


PRINTING_AGENT = '''
import logging, sys

def answer(input, *, token=None, **kw):
    print(f"agent stdout sees {token}")
    print(f"agent stderr sees {token}", file=sys.stderr)
    logging.getLogger("agent").warning("agent log sees %s", token)
    if "raise" in input:
        raise RuntimeError(f"auth failed with {token}")
    return f"ok {input}"
'''


def test_what_a_workers_target_prints_is_redacted_as_in_one_process(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    """The command redacts everything it prints, the target's own prints and logging included; a worker printed
    them to the same terminal unredacted (the token in clear, once per conversation). Now a worker's output is
    redacted as the run's own process redacts it."""
    write("printing.py", PRINTING_AGENT)
    write("d.yaml", "target: printing:answer\ntarget_options: {token: \"${API_TOKEN}\"}\ngates: [{includes: ok}]\n"
          "data:\n  - {id: a, input: hi}\n  - {id: b, input: raise}\n  - {id: c, input: hi again}\n")
    env = {"API_TOKEN": "sk-48b-printed-secret-9931"}
    one = cli("run", "d.yaml", "--json", "one.json", env=env)
    two = cli("run", "d.yaml", "--json", "two.json", "--workers", "2", env=env)
    assert one.code == two.code == 4, (one.stderr, two.stderr)  # b errored, in both
    for run in (one, two):
        said = run.stdout + run.stderr
        assert "sk-48b-printed" not in said
        for line in ("agent stdout sees [redacted]", "agent stderr sees [redacted]", "agent log sees [redacted]"):
            assert said.count(line) == 3, (line, said)
    assert not [p for p in two.cwd.rglob("*") if p.is_file() and b"sk-48b-printed" in p.read_bytes()]


CALIBRATED = """
gates:
  - scorer:
      judge:
        criterion: The assistant gave a forecast.
        model: openai/judge-model
        api_base: {url}
    id: forecast
    calibrated: {{min_labels: 3, min_accuracy: 0.9}}
data:
  - transcript: [{{role: user, content: 'Weather in Paris?'}}, {{role: assistant, content: Sunny and 18C.}}]
    labels: {{forecast: pass}}
  - transcript: [{{role: user, content: 'Weather in Rome?'}}, {{role: assistant, content: I cannot say.}}]
    labels: {{forecast: fail}}
  - transcript: [{{role: user, content: 'Weather in Oslo?'}}, {{role: assistant, content: Sunny and 3C.}}]
    labels: {{forecast: pass}}
"""


def test_a_calibrated_gate_gates_a_workers_run_as_it_gates_one_process(
        llm_server: LLMServer, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    """A gate whose judge must be calibrated is checked against the calibrations in the run's database. Each worker
    planned its share again without a database and refused it ('no database: pass --db PATH'), so a calibrated gate
    could never run with workers (exit 2, after the run began). Now only the run's process checks, once."""
    llm_server.responder = lambda request: verdict("Sunny" in json.dumps(request.body), "because")
    write("d.yaml", CALIBRATED.format(url=llm_server.url))
    env = {"OPENAI_API_KEY": "sk-test-not-a-real-key-0123456789", "NO_PROXY": "127.0.0.1", "EVALCLI_LLM_RETRIES": "1"}
    assert cli("calibrate", "d.yaml", "--scorer", "forecast", env=env).code == 0
    one = cli("run", "d.yaml", "-q", "--no-cache", "--json", "one.json", env=env)
    two = cli("run", "d.yaml", "-q", "--no-cache", "--json", "two.json", "--workers", "2", env=env)
    assert one.code == two.code == 1, (one.stderr, two.stderr)  # Rome's transcript gives no forecast: the gate fails
    assert rows(two.cwd / "evalcli.db", run_id(one, "one.json")) == rows(two.cwd / "evalcli.db", run_id(two, "two.json"))
    assert len(llm_server.requests) == 3 + 3 + 3  # calibrate, then each run judged every conversation once


def test_a_workers_model_that_met_429s_is_said_throttled(
        write: Callable[..., Path], cli: Callable[..., CliResult], llm_server: LLMServer) -> None:
    """A model that answers 429s is throttled, and the run says so ('throttled to N'); a worker's throttling was never
    passed on (its events had no such message), so a workers run said nothing. Now it is said as one process says
    it."""
    provider = RateLimited(echo, allowed=2, delay=0.05, retry_after=0.1)
    llm_server.responder = provider
    write("d.yaml", model_dataset(llm_server.url, 60, 16))
    result = cli("run", "d.yaml", "--workers", "2", env={"EVALCLI_LLM_RETRIES": "1"})
    assert result.code == 0, result.stderr
    assert provider.rejected > 0 and provider.duplicates == 0 and len(provider.answered) == 60
    assert "openai/rl-model is rate limited (HTTP 429): throttled to" in result.stderr


FATAL_AGENT = '''
class Fatal(BaseException):
    pass

def answer(input, *, token=None, **kw):
    if "raise" in input:
        raise Fatal(f"fatal auth failed with {token}")
    return f"ok {input}"
'''


def test_a_worker_ended_by_the_agent_is_named_without_its_secret(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    """(Held.) An agent raising a BaseException ends its worker; the message naming the worker quotes the exception,
    the token in it redacted, and nothing the run wrote holds it."""
    write("fatal.py", FATAL_AGENT)
    write("d.yaml", "target: fatal:answer\ntarget_options: {token: \"${API_TOKEN}\"}\ngates: [{includes: ok}]\n"
          "data:\n  - {id: a, input: hi}\n  - {id: b, input: raise}\n  - {id: c, input: hi again}\n")
    done = cli("run", "d.yaml", "--workers", "2", "--json", "out.json", env={"API_TOKEN": "sk-48b-fatal-secret-4711"})
    assert done.code == 70, done.stderr
    assert "fatal auth failed with [redacted]" in done.stderr and "--resume" in done.stderr
    assert "sk-48b-fatal" not in done.stdout + done.stderr
    assert not [p for p in done.cwd.rglob("*") if p.is_file() and b"sk-48b-fatal" in p.read_bytes()]
