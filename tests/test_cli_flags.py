"""The remaining ``evalcli run`` flags, each through the real CLI: what they change, observably."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult
from tests.llm_server import InFlight, LLMServer, Reply, verdict

MANY = "target: agents:scripted\ngates: [{excludes: bad}]\ndata:\n" + "\n".join(
    f"  - {{id: item-{i}, input: 'q=>{'bad' if i in (3, 7) else 'good'} {i}'}}" for i in range(60)) + "\n"


def test_quiet_prints_only_the_verdict_line_and_verbose_every_row(write: Callable[..., Path],
                                                                 cli: Callable[..., CliResult]) -> None:
    write("d.yaml", MANY)
    quiet = cli("run", "d.yaml", "--quiet")
    assert quiet.code == 1
    assert quiet.stdout.startswith("verdict: failed") and "Conversations" not in quiet.stdout
    normal = cli("run", "d.yaml")
    assert "... 10 more passing conversations" in normal.stdout
    assert "item-3 " in normal.stdout and "item-7 " in normal.stdout  # failures always shown
    verbose = cli("run", "d.yaml", "--verbose")
    assert "more passing" not in verbose.stdout and "item-59" in verbose.stdout


CHATTY = """
import logging, sys

logging.basicConfig(level=logging.INFO, format="LOG %(levelname)s %(message)s")  # a handler holding sys.stderr
log = logging.getLogger("chatty")

def agent(input, **kw):
    log.info("thinking about %s", input)
    print("PRINTED to stderr", file=sys.stderr)
    if "boom" in input:
        raise ValueError("kaboom")
    return "fine " + input
"""


def test_quiet_keeps_the_agents_own_log_lines_out(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("chatty.py", CHATTY)
    write("d.yaml", "target: chatty:agent\ngates: [{includes: fine}]\ndata: [{id: a, input: hi}, {id: b, input: boom}]\n")
    loud = cli("run", "d.yaml")
    assert "LOG INFO thinking about hi" in loud.stderr and "PRINTED to stderr" in loud.stderr  # it does log
    quiet = cli("run", "d.yaml", "--quiet")
    assert quiet.code == 4
    assert "LOG" not in quiet.stderr + quiet.stdout and "PRINTED" not in quiet.stderr + quiet.stdout  # old main: both
    assert "verdict: passed on 1 of 2 conversations; 1 errored (exit 4)" in quiet.stdout and quiet.stderr == ""
    assert "b  error: turn 0: the target raised ValueError: kaboom" in quiet.stdout
    as_json = cli("run", "d.yaml", "--quiet", "--json", "-")
    assert as_json.json["summary"]["errors"] == 1 and "LOG" not in as_json.stderr and "PRINTED" not in as_json.stderr
    assert "verdict: passed on 1 of 2 conversations; 1 errored (exit 4)" in as_json.stderr


def test_rerun_failed_runs_only_what_failed_or_errored(write: Callable[..., Path],
                                                       cli: Callable[..., CliResult]) -> None:
    write("d.yaml", MANY)
    first = cli("run", "d.yaml", "--json", "-")
    run_id = first.json["run_id"]
    again = cli("run", "d.yaml", "--rerun-failed", run_id[:12], "--json", "-")
    assert [i["id"] for i in again.json["items"]] == ["item-3", "item-7"]
    assert again.json["run_id"] != run_id and again.code == 1
    unknown = cli("run", "d.yaml", "--rerun-failed", "NOPE")
    assert unknown.code == 2 and "no run 'NOPE'" in unknown.stderr


def test_scorers_option_chooses_the_registry(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("regs/mine.yaml", "scorers:\n  is-good: {includes: good}\n")
    write("d.yaml", "target: agents:scripted\nscorers: [is-good]\ndata: [{input: 'q=>good'}]\n")
    missing = cli("run", "d.yaml")
    assert missing.code == 2 and "unknown scorer 'is-good'" in missing.stderr and "--scorers" in missing.stderr
    found = cli("run", "d.yaml", "--scorers", "regs/mine.yaml", "--json", "-")
    assert found.code == 0 and found.json["scores"] == {"is-good": 1.0}


def test_max_errors_on_the_command_line(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", "target: agents:boom\nscorers: [{includes: fine}]\ndata: [{input: ok}, {input: boom}, {input: boom!}]\n")
    assert cli("run", "d.yaml").code == 4
    assert cli("run", "d.yaml", "--max-errors", "1").code == 4
    assert cli("run", "d.yaml", "--max-errors", "2").code == 0


JUDGE_ENV = {"OPENAI_API_KEY": "sk-test-not-a-real-key-0123456789", "NO_PROXY": "127.0.0.1"}
SAME_QUESTION = [f"{{id: c{i}, input: same question}}" for i in range(6)]
"""Six conversations that ask the judge the same question."""


def write_judged(write: Callable[..., Path], llm_server: LLMServer, concurrency: int, items: list[str]) -> None:
    """``d.yaml``: ``items`` (YAML flow mappings) echoed by ``agents:echo`` at ``concurrency``, each scored by one
    judge served by ``llm_server``."""
    write("d.yaml", f"""
        target: agents:echo
        concurrency: {concurrency}
        scorers:
          - judge: {{criterion: It answered., model: openai/j, api_base: "{llm_server.url}"}}
        data: [{", ".join(items)}]
    """)


def test_judge_concurrency_bounds_judge_calls_in_flight(llm_server: LLMServer, write: Callable[..., Path],
                                                        cli: Callable[..., CliResult]) -> None:
    flight = InFlight(lambda request: verdict(True), delay=0.3)
    llm_server.responder = flight
    write_judged(write, llm_server, 8, [f"{{input: q{i}}}" for i in range(8)])
    env = JUDGE_ENV
    assert cli("run", "d.yaml", "--judge-concurrency", "2", "--no-cache", env=env).code == 0
    assert flight.peak == 2
    flight.peak = 0
    assert cli("run", "d.yaml", "--judge-concurrency", "8", "--no-cache", env=env).code == 0
    assert flight.peak > 2


def test_resume_refuses_a_dataset_that_changed(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", MANY)
    run_id = cli("run", "d.yaml", "--json", "-").json["run_id"]
    same = cli("run", "d.yaml", "--resume", run_id, "--json", "-")
    assert same.json["run_id"] == run_id and len(same.json["items"]) == 60
    write("d.yaml", MANY.replace("good 0", "changed 0"))
    changed = cli("run", "d.yaml", "--resume", run_id)
    assert changed.code == 2 and "changed since run" in changed.stderr and "data[0].inputs[0] (changed)" in changed.stderr


@pytest.mark.parametrize("concurrency", [1, 6])
def test_an_identical_judge_request_is_made_once_per_run(concurrency: int, llm_server: LLMServer,
                                                         write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    """Six conversations ask the judge the same question: one call, five cache hits, whether they play one after
    another (the reply is read before the writer thread commits it) or at once (the others wait for the first)."""
    llm_server.responder = InFlight(lambda request: verdict(True), delay=0.2)
    write_judged(write, llm_server, concurrency, SAME_QUESTION)
    env = JUDGE_ENV
    done = cli("run", "d.yaml", "--json", "-", env=env)
    assert done.code == 0, done.stderr
    assert len(llm_server.requests) == 1
    assert done.json["usage"]["cache_hits"] == 5, done.json["usage"]


def test_identical_requests_after_a_failed_one_are_made_side_by_side(llm_server: LLMServer, write: Callable[..., Path],
                                                                     cli: Callable[..., CliResult]) -> None:
    """The first of six identical judge requests fails (a 400, not retried): the five that waited for it are then made
    at once, not one after another (each waiting for the previous one to fail)."""
    flight = InFlight(lambda request: Reply(status=400, body={"error": {"message": "bad request"}}), delay=0.5)
    llm_server.responder = flight
    write_judged(write, llm_server, 6, SAME_QUESTION)
    env = JUDGE_ENV
    done = cli("run", "d.yaml", "--json", "-", env=env)
    assert done.code != 70, done.stderr
    assert len(llm_server.requests) == 6
    assert flight.peak == 5, flight.peak
