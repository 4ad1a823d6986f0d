"""The run loop's defects, each caused for real: a target's own TimeoutError, runs left 'running', hung sync
targets starving healthy ones, one dataset running another's module, scorers outliving their conversation,
stdout polluted under --json -, unwritable outputs found late, history commands creating databases, SQLite
stalling the event loop, and secrets surviving JSON escaping."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from evalcli.results import ItemResult
from evalcli.run import Events, RunOptions, run_evals
from evalcli.store.store import Store
from tests.conftest import REPO, CliResult
from tests.reliability_helpers import SUBPROCESS_TIMEOUT

TIMEOUTS = '''
import asyncio

def sync_timeout(input, **kw):
    raise TimeoutError("the upstream API timed out")

async def async_timeout(input, **kw):
    raise TimeoutError("the upstream API timed out")
'''


@pytest.mark.parametrize("target", ["sync_timeout", "async_timeout"])
@pytest.mark.parametrize("flags", [[], ["--turn-timeout", "5"]])
def test_a_targets_own_timeout_error_is_that_conversations_error(target: str, flags: list[str],
                                                                  write: Callable[..., Path],
                                                                  cli: Callable[..., CliResult]) -> None:
    write("timeouts.py", TIMEOUTS)
    write("d.yaml", f"target: timeouts:{target}\nscorers: [{{includes: x}}]\ndata: [{{id: a, input: q}}]\n")
    result = cli("run", "d.yaml", "--json", "-", *flags)
    assert result.code == 4, result.stderr
    item = result.json["items"][0]
    assert item["status"] == "error"
    assert item["error"] == "turn 0: the target raised TimeoutError: the upstream API timed out"
    assert "internal error" not in result.stderr


class ExplodingEvents(Events):
    """Events whose ``item_done`` raises: a bug outside the conversations, in the middle of a run."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def item_done(self, result: ItemResult) -> None:
        raise self.error


@pytest.mark.parametrize(("error", "status", "code"), [(RuntimeError("a bug"), "failed", 70),
                                                       (KeyboardInterrupt(), "interrupted", 130)])
def test_a_run_that_dies_never_stays_running(error: BaseException, status: str, code: int, workdir: Path,
                                              write: Callable[..., Path]) -> None:
    path = write("d.yaml", "target: agents:echo\nscorers: [{includes: said}]\ndata: [{input: a}, {input: b}]\n")
    store = Store(workdir / "runs.db")
    with pytest.raises(type(error)):
        run_evals(path, store=store, options=RunOptions(concurrency=1), events=ExplodingEvents(error))
    store.close()
    row = sqlite3.connect(workdir / "runs.db").execute(
        "SELECT status, exit_code, finished_at, total_items FROM runs").fetchone()
    assert row[0] == status and row[1] == code and row[2] is not None
    assert row[3] == 1  # the conversation that finished before the failure is counted


HANGING = '''
import time

def generate(input, **kw):
    if input.startswith("hang"):
        time.sleep(20)
    return "answer " + input
'''


@pytest.mark.timing
def test_hung_sync_targets_do_not_starve_healthy_ones(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("hanging.py", HANGING)
    items = [f"  - {{id: hang{n}, input: hang{n}}}" for n in range(4)] + \
            [f"  - {{id: ok{n}, input: ok{n}}}" for n in range(6)]
    write("d.yaml", "target: hanging:generate\nconcurrency: 2\nscorers: [{includes: answer}]\ndata:\n"
          + "\n".join(items) + "\n")
    started = time.monotonic()
    result = cli("run", "d.yaml", "--turn-timeout", "0.5", "--json", "-")
    wall = time.monotonic() - started
    assert result.code == 4, result.stderr
    status = {item["id"]: item["status"] for item in result.json["items"]}
    assert status == {**{f"hang{n}": "error" for n in range(4)}, **{f"ok{n}": "ok" for n in range(6)}}
    # (4 hanging / concurrency 2) x 0.5 s, plus start-up: nowhere near the 20 s a hung call takes
    assert wall < 8, wall


def test_two_datasets_each_run_their_own_agent_module(workdir: Path, write: Callable[..., Path],
                                                      cli: Callable[..., CliResult]) -> None:
    for name in ("one", "two"):
        write(f"{name}/agent.py", f"def generate(input, **kw):\n    return 'I am {name}'\n")
        write(f"{name}/d.yaml", "target: agent:generate\nscorers: [{includes: I am}]\ndata: [{input: who}]\n")
    result = cli("run", "one/d.yaml", "two/d.yaml", "--json", "out.json")
    assert result.code == 0, result.stderr
    assert not (workdir / "out.json").exists()
    for name in ("one", "two"):
        out = json.loads((workdir / f"out.{name}-d.json").read_text())
        assert out["dataset"] == f"{name}/d.yaml"
        assert out["items"][0]["turns"][0]["output"][0]["content"] == f"I am {name}"


def test_loading_datasets_restores_sys_path(write: Callable[..., Path]) -> None:
    from evalcli.dataset import load_dataset

    for name in ("one", "two"):
        write(f"{name}/agent.py", f"def generate(input, **kw):\n    return 'I am {name}'\n")
        write(f"{name}/d.yaml", "target: agent:generate\nscorers: [{includes: I am}]\ndata: [{input: who}]\n")
    before = list(sys.path)
    first = load_dataset(write("one/d.yaml", "target: agent:generate\nscorers: [{includes: I}]\ndata: [{input: q}]\n"))
    second = load_dataset(write("two/d.yaml", "target: agent:generate\nscorers: [{includes: I}]\ndata: [{input: q}]\n"))
    assert sys.path == before
    assert first.target.obj("q") == "I am one" and second.target.obj("q") == "I am two"
    result = run_evals(first)
    assert result.items and result.items[0].turns[0].output[0]["content"] == "I am one"
    assert sys.path == before


SIBLINGS = '''
import asyncio, os, pathlib

async def boom(run):
    await asyncio.sleep(1.0)
    raise ValueError("scorer blew up")

async def slow(run):
    await asyncio.sleep(2.5)
    pathlib.Path(os.environ["MARKER"]).write_text("still ran")
    return 1.0

async def agent(input, **kw):
    await asyncio.sleep(4 if input == "long" else 0)
    return "answer"
'''


def test_a_failing_scorer_leaves_its_siblings_scoring(workdir: Path, write: Callable[..., Path],
                                                      cli: Callable[..., CliResult]) -> None:
    write("sib.py", SIBLINGS)
    # a's boom fails at 1 s: that is its own error; its slow sibling still scores (at 2.5 s), within the conversation
    write("d.yaml", "target: sib:agent\nconcurrency: 2\nscorers:\n  - python: sib:slow\n  - python: sib:boom\n"
          "data: [{id: a, input: q}, {id: b, input: long}]\n")
    marker = workdir / "marker.txt"
    result = cli("run", "d.yaml", "--json", "-", env={"MARKER": str(marker)})
    assert result.code == 4, result.stderr
    first = result.json["items"][0]
    assert first["status"] == "ok" and first["scores"] == {"python(sib:slow)": 1.0, "python(sib:boom)": None}
    assert first["outcomes"]["scorers"]["python(sib:boom)"]["error"] == "ValueError: scorer blew up"
    assert result.json["summary"]["errors"] == 0
    assert result.json["summary"]["scorer_errors"] == {"python(sib:boom)": 2}
    assert marker.exists()


def test_a_failing_scorer_leaves_a_sibling_judge_counted(llm_server: object, workdir: Path,
                                                         write: Callable[..., Path],
                                                         cli: Callable[..., CliResult]) -> None:
    from tests.llm_server import LLMServer, slow, verdict

    assert isinstance(llm_server, LLMServer)
    llm_server.push(verdict(True, "quick"), slow(verdict(True, "late"), 3))
    write("sib.py", SIBLINGS)
    judge = "{{judge: {{criterion: {c}, model: openai/judge, api_base: '{url}'}}}}"
    write("d.yaml", "target: agents:echo\nscorers:\n"
          f"  - {judge.format(c='fast one', url=llm_server.url)}\n"
          f"  - {judge.format(c='slow one', url=llm_server.url)}\n"
          "  - python: sib:boom\ndata: [{id: a, input: q}]\n")
    result = cli("run", "d.yaml", "--no-cache", "--json", "-")
    assert result.code == 4, result.stderr
    assert list(result.json["items"][0]["scores"].values()) == [1.0, 1.0, None]
    calls = sqlite3.connect(workdir / "evalcli.db").execute("SELECT purpose, model FROM llm_calls").fetchall()
    assert calls == [("judge", "openai/judge")] * 2  # both verdicts were paid for and are counted


def test_json_on_stdout_is_one_document_whatever_the_target_prints(write: Callable[..., Path],
                                                                  cli: Callable[..., CliResult]) -> None:
    write("noisy.py", "def generate(input, **kw):\n    print('debug: thinking about', input)\n    return 'ok ' + input\n")
    write("a.yaml", "target: noisy:generate\nscorers: [{includes: ok}]\ndata: [{input: q}]\n")
    write("b.yaml", "target: noisy:generate\nscorers: [{includes: ok}]\ndata: [{input: r}, {input: s}]\n")
    one = cli("run", "a.yaml", "--json", "-")
    assert one.code == 0 and one.json["dataset"] == "a.yaml"
    assert "debug: thinking about q" in one.stderr
    both = cli("run", "a.yaml", "b.yaml", "--json", "-")
    assert both.code == 0, both.stderr
    document = both.json
    assert [run["dataset"] for run in document["runs"]] == ["a.yaml", "b.yaml"]
    assert [len(run["items"]) for run in document["runs"]] == [1, 2]


@pytest.mark.parametrize("option", ["--json", "--junit", "--markdown"])
def test_unwritable_outputs_fail_before_anything_runs(option: str, workdir: Path, write: Callable[..., Path],
                                                      cli: Callable[..., CliResult]) -> None:
    write("d.yaml", "target: agents:recorder\nscorers: [{includes: recorded}]\ndata: [{input: q}]\n")
    write("plain.txt", "a file, not a folder\n")
    (workdir / "adir").mkdir()
    for path in ("plain.txt/out.x", "adir"):
        result = cli("run", "d.yaml", option, path, "--db", "fresh.db")
        assert result.code == 2, (path, result.stderr)
        assert "internal error" not in result.stderr
        assert not (workdir / "calls.jsonl").exists(), "the target ran"
        assert not (workdir / "fresh.db").exists(), "a database was created"


@pytest.mark.parametrize("args", [["runs"], ["show", "latest"], ["diff", "a", "b"], ["cache", "info"],
                                  ["cache", "clear"], ["report", "latest", "--html", "r.html"]])
def test_history_commands_never_create_a_database(args: list[str], workdir: Path,
                                                  cli: Callable[..., CliResult]) -> None:
    result = cli(*args, "--db", "nothing.db")
    if "No such command" in result.stderr:
        pytest.skip("no report command in this build")
    assert result.code == 2, result.stderr
    assert "nothing.db" in result.stderr and "does not exist" in result.stderr
    assert not (workdir / "nothing.db").exists()


def _without_write_permission() -> list[str] | None:
    """A command prefix under which even root obeys file permissions (so read-only means read-only)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    caps = "-dac_override,-dac_read_search,-fowner"
    return [setpriv, f"--bounding-set={caps}", f"--inh-caps={caps}", "--"]


def test_a_read_only_database_can_still_be_read(tmp_path: Path, write: Callable[..., Path],
                                                cli: Callable[..., CliResult]) -> None:
    prefix = _without_write_permission()
    if prefix is None:
        pytest.skip("cannot drop root's permission override here (no setpriv)")
    write("d.yaml", "target: agents:echo\nscorers: [{includes: said}]\ndata: [{id: a, input: q}, {id: b, input: r}]\n")
    assert cli("run", "d.yaml", "--db", "ro/runs.db").code == 2  # its folder does not exist yet
    folder = tmp_path / "ro"
    folder.mkdir()
    for _ in range(2):
        assert cli("run", "d.yaml", "--db", "ro/runs.db").code == 0
    for extra in folder.iterdir():
        if extra.name != "runs.db":
            extra.unlink()  # checkpointed on close; a leftover WAL would be read-only too
    before = (folder / "runs.db").read_bytes()
    (folder / "runs.db").chmod(0o444)
    folder.chmod(0o555)
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    try:
        for args in (["runs"], ["show", "latest"], ["show", "latest", "a"], ["diff", "latest", "latest"],
                     ["cache", "info"]):
            done = subprocess.run([*prefix, sys.executable, "-m", "evalcli", *args, "--db", "ro/runs.db"],
                                  cwd=tmp_path, env=env, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
            assert done.returncode == 0, (args, done.stderr)
        denied = subprocess.run([*prefix, sys.executable, "-m", "evalcli", "cache", "clear", "--db", "ro/runs.db"],
                                cwd=tmp_path, env=env, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
        assert denied.returncode == 2 and "read-only" in denied.stderr
    finally:
        folder.chmod(0o755)
    assert (folder / "runs.db").read_bytes() == before
    assert sorted(p.name for p in folder.iterdir()) == ["runs.db"]


LOCKER = '''
import asyncio, sqlite3, threading

held = threading.Event()

def _hold(path):
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN EXCLUSIVE")
    held.set()
    threading.Event().wait(2.5)
    conn.execute("COMMIT")

async def generate(input, **kw):
    if input == "lock":
        threading.Thread(target=_hold, args=("evalcli.db",), daemon=True).start()
        held.wait(5)
        return "locked"
    if input == "hang":
        await asyncio.sleep(30)
    await asyncio.sleep(0.3)
    return "answer"
'''


@pytest.mark.timing
def test_a_locked_database_does_not_stall_conversations_or_timeouts(write: Callable[..., Path],
                                                                    cli: Callable[..., CliResult]) -> None:
    write("locker.py", LOCKER)
    items = ["  - {id: lock, input: lock}", "  - {id: hang, input: hang}"] + \
            [f"  - {{id: q{n}, input: q{n}}}" for n in range(8)]
    write("d.yaml", "target: locker:generate\nconcurrency: 10\nscorers: [{includes: a}]\ndata:\n" + "\n".join(items) + "\n")
    result = cli("run", "d.yaml", "--turn-timeout", "1", "--json", "-")
    assert result.code == 4, result.stderr
    items_by_id = {item["id"]: item for item in result.json["items"]}
    assert items_by_id["hang"]["error"] == "turn 0: the target did not answer within 1s"
    # another process held the write lock for 2.5 s from the first answer on: had writes blocked the event
    # loop, the 0.3 s conversations and the 1 s timeout would have waited for it
    assert max(items_by_id[f"q{n}"]["duration_ms"] for n in range(8)) < 1200
    assert items_by_id["hang"]["duration_ms"] < 1800


def test_secrets_with_quotes_and_backslashes_never_reach_the_json(write: Callable[..., Path],
                                                                  cli: Callable[..., CliResult]) -> None:
    secret = 'sk-quo"te\\back\\\\slash-0123456789'
    write("leaky.py", "import os\ndef generate(input, **kw):\n    return 'key: ' + os.environ['MY_SERVICE_API_KEY']\n")
    write("d.yaml", "target: leaky:generate\nscorers: [{includes: key}]\ndata: [{input: q}]\n")
    result = cli("run", "d.yaml", "--json", "-", env={"MY_SERVICE_API_KEY": secret})
    assert result.code == 0, result.stderr
    assert result.json["items"][0]["turns"][0]["output"][0]["content"] == "key: [redacted]"
    assert json.dumps(secret)[1:-1] not in result.stdout and secret not in result.stdout


def test_conversations_wait_for_a_writer_that_falls_behind(tmp_path: Path) -> None:
    """Results cannot pile up in memory faster than SQLite takes them: past WRITE_BACKLOG queued item
    writes, the next conversation waits for the writer (a zero-latency target would otherwise queue them all)."""
    import asyncio
    import threading

    from evalcli.llm import LLMSettings
    from evalcli.run.context import WRITE_BACKLOG, RunContext

    async def scenario() -> None:
        context = RunContext(Store(tmp_path / "w.db"), RunOptions(), LLMSettings())
        assert context.writer is not None
        held = threading.Event()
        context.writer.submit(lambda conn: held.wait(30))  # the writer is stuck behind this job
        context.write_later(lambda: [1 / 0])  # a write that fails: returned when the run closes, not raised here
        for _ in range(WRITE_BACKLOG - 2):
            context.write_later(lambda: [])
            await context.keep_up()  # still room: returns at once
        context.write_later(lambda: [])
        waiting = asyncio.ensure_future(context.keep_up())
        await asyncio.sleep(0.3)
        assert not waiting.done()  # full: the conversation waits for the writer
        held.set()
        await asyncio.wait_for(waiting, 10)  # returns, though the write it waited for failed
        assert isinstance(await context.aclose(), ZeroDivisionError)  # reported beside the result

    asyncio.run(scenario())
