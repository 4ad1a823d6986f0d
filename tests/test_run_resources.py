"""What a run does with what it holds, checked by causing each fault for real: a write that fails when the writer
closes is reported beside the verdict (never instead of it); secrets are redacted in values that are not strings
and by a library caller's own ``Store()``; the event loop is never stalled by the first LLM import or by the
response cache's reads."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from evalcli import run_evals
from evalcli.store import Store
from tests.conftest import CliResult
from tests.llm_server import LLMServer, verdict


def test_a_write_that_fails_at_close_is_reported_beside_the_verdict(workdir: Path, write: Callable[..., Path],
                                                                   cli: Callable[..., CliResult]) -> None:
    write("d.yaml", "target: agents:echo\ngates: [{includes: said}]\ndata: [{id: a, input: q}, {id: b, input: r}]\n")
    assert cli("run", "d.yaml").code == 0
    with sqlite3.connect(workdir / "evalcli.db") as conn:  # the next run's conversations cannot be stored
        conn.execute("CREATE TRIGGER full_disk BEFORE INSERT ON items BEGIN SELECT RAISE(ABORT, 'the disk says no'); END")
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 0, result.stderr  # the verdict's exit code, not 70
    assert result.json["verdict"] == "passed" and "internal error" not in result.stderr
    assert "could not store all of run" in result.stderr and "the disk says no" in result.stderr
    outcome = run_evals(workdir / "d.yaml", store=Store(workdir / "evalcli.db"))
    assert outcome.verdict == "passed" and outcome.exit_code == 0
    assert outcome.store_error is not None and "the disk says no" in outcome.store_error


OBJECTS = '''
import os

class Holder:
    def __str__(self):
        return "token=" + os.environ["AGENT_TOKEN"]

def answer(input, **kw):
    return [{"role": "assistant", "content": "fine", "debug": Holder(), "stamp": {"when": Holder()}}]
'''


def test_secrets_inside_values_that_are_not_strings_are_redacted(workdir: Path, write: Callable[..., Path],
                                                                 cli: Callable[..., CliResult]) -> None:
    secret = "tok-very-secret-0123456789"
    write("objects.py", OBJECTS)
    write("d.yaml", "target: objects:answer\nscorers: [{includes: fine}]\ndata: [{id: a, input: q}]\n")
    result = cli("run", "d.yaml", "--json", "-", env={"AGENT_TOKEN": secret})
    assert result.code == 0, result.stderr
    assert secret not in result.stdout and "[redacted]" in result.stdout
    stored = b"".join(p.read_bytes() for p in workdir.glob("evalcli.db*"))
    assert secret.encode() not in stored


def test_a_library_store_redacts_the_datasets_own_secrets(tmp_path: Path, monkeypatch: object) -> None:
    import pytest

    assert isinstance(monkeypatch, pytest.MonkeyPatch)
    key = "sk-interpolated-0123456789abcdef"
    monkeypatch.setenv("MY_SETTING", key)  # not named like a secret, but shaped like a key
    # a module name of its own: this run imports it into the test process (``agents`` is the OpenAI Agents SDK)
    (tmp_path / "library_echo.py").write_text("def echo(input, **kw):\n    return 'You said: ' + input\n")
    (tmp_path / "d.yaml").write_text("target: library_echo:echo\nscorers: [{includes: said}]\n"
                                     "data: [{id: a, input: 'use ${MY_SETTING} please'}]\n")
    store = Store(tmp_path / "lib.db")
    try:
        result = run_evals(tmp_path / "d.yaml", store=store)
    finally:
        store.close()
    assert result.exit_code == 0
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("lib.db*"))
    assert key.encode() not in stored and b"[redacted]" in stored


PATIENT = """
import asyncio

async def answer(input, **kw):
    await asyncio.sleep(float(input))  # some answer at once, others in flight when the first judge call is made
    return "You said: " + input
"""


@pytest.mark.timing
def test_the_first_llm_import_never_stalls_conversations_in_flight(llm_server: LLMServer, workdir: Path,
                                                                   write: Callable[..., Path],
                                                                   cli: Callable[..., CliResult]) -> None:
    """Importing litellm takes seconds of CPU. Made on the event loop at the first judge call, it froze every other
    conversation: one whose agent answered in 1 s then 'did not answer within 2s'. The run imports it in a worker
    thread before its conversations start."""
    llm_server.responder = lambda request: verdict(True, "Answered.")
    write("patient.py", PATIENT)
    write("d.yaml", f"""
        target: patient:answer
        concurrency: 6
        gates: [{{judge: {{criterion: The agent answered., model: openai/judge-model, api_base: '{llm_server.url}'}}}}]
        data: [{{input: '0.05'}}, {{input: '1.0'}}, {{input: '1.0'}}, {{input: '0.05'}}, {{input: '1.0'}}, {{input: '1.0'}}]
    """)
    result = cli("run", "d.yaml", "--turn-timeout", "2", "--json", "-", env={"EVALCLI_LLM_RETRIES": "0"})
    assert result.code == 0, result.stderr
    assert result.json["summary"]["errors"] == 0 and result.json["verdict"] == "passed"


@pytest.mark.timing
def test_cache_reads_are_not_stalled_by_another_writer(tmp_path: Path) -> None:
    """Ruled out: the response cache reads on the event loop, but the run database is in WAL mode, so a read never
    waits for a writer, even one holding an exclusive write transaction (another process, or the run's writer)."""
    store = Store(tmp_path / "c.db")
    filling = store.response_cache()
    filling.put("key", "m", {"choices": [{"message": {"content": "cached"}}]})
    filling.close()
    writer = store.writer()
    cache = store.response_cache(writer)  # as during a run: its changes (hit counts) go through the writer
    other = sqlite3.connect(tmp_path / "c.db", isolation_level=None)
    try:
        other.execute("BEGIN EXCLUSIVE")
        other.execute("INSERT INTO llm_cache (key, model, response, created_at) VALUES ('x', 'm', '{}', 'now')")
        started = time.monotonic()
        value = cache.get("key")
        elapsed = time.monotonic() - started
    finally:
        other.execute("ROLLBACK")
        other.close()
        cache.close()
        writer.close()
        store.close()
    assert value == {"choices": [{"message": {"content": "cached"}}]}
    assert elapsed < 0.05
