"""Adversarial try (adv32) of ``--workers``, streamed runs, shards and ``merge`` as users meet them
(docs/performance.md#workers, docs/ci.md "Sharding and merging", docs/reliability.md): the real CLI, real SQLite
files, real processes (a worker ended by a segfault, a target calling ``sys.exit()``)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tests.conftest import CliResult
from tests.reliability_helpers import SUBPROCESS_TIMEOUT, cli_env, query, start_cli, wait_for_lines
from tests.test_workers import rows

AGENT = '''
import ctypes, pathlib, sys

HERE = pathlib.Path(__file__).parent


def answer(input, **options):
    flag = HERE / "crash.flag"
    if input == "crash" and flag.exists():
        flag.unlink()
        if (HERE / "segfault").exists():
            ctypes.string_at(0)  # the worker playing this conversation dies of SIGSEGV
        sys.exit(5)
    if input == "boom":
        raise RuntimeError("the agent fell over")
    return f"answer {input} " + "x" * (len(input) % 4)
'''


def dataset(count: int = 24) -> str:
    lines = ["target: agent:answer", "concurrency: 2", "gates: [{includes: answer}]",
             "scorers: [{similarity: answer q3 xx}]", "data:"]
    lines += [f"  - {{id: c{n}, input: {'crash' if n == 5 else f'q{n}'}}}" for n in range(count)]
    return "\n".join(lines) + "\n"


def run_id(result: CliResult, out: str) -> str:
    return str(json.loads((result.cwd / out).read_text())["run_id"])


def hinted_command(stderr: str) -> list[str]:
    """The ``evalcli run ... --resume RUN`` command the error's hint says to type, as a shell splits it."""
    line = next(line for line in stderr.splitlines() if "--resume" in line)
    return shlex.split(line[line.index("evalcli run"):])[1:]


def crash_then_resume(write: Callable[..., Path], cli: Callable[..., CliResult], *args: str,
                      segfault: bool) -> None:
    """A run into a database that is not the default one (a CI shard's ``--db shard-2.db``) stops when a
    conversation ends its process; typing the command its error names plays the rest into that database, and the
    resumed run stores what one uninterrupted run stores."""
    write("agent.py", AGENT)
    write("ds.yaml", dataset())
    write("crash.flag", "")
    if segfault:
        write("segfault", "")
    stopped = cli("run", "ds.yaml", "--db", "shard-2.db", "-q", *args)
    assert stopped.code == 70, stopped.stderr
    hinted = hinted_command(stopped.stderr)
    assert hinted[hinted.index("--resume") + 2:] == ["--db", "shard-2.db"], stopped.stderr
    resumed = cli(*hinted, "-q", "--json", "resumed.json")
    assert resumed.code == 0, resumed.stderr
    whole = cli("run", "ds.yaml", "--db", "shard-2.db", "-q", "--json", "whole.json")
    assert whole.code == 0, whole.stderr
    db = whole.cwd / "shard-2.db"
    assert rows(db, run_id(resumed, "resumed.json")) == rows(db, run_id(whole, "whole.json"))


def test_the_resume_a_dead_worker_names_opens_the_runs_own_database(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    """A worker killed by a segfault (a C extension's crash) ends the run with exit 70 and 'play the rest with:
    evalcli run ds.yaml --resume RUN'; without the run's ``--db`` that command looked in evalcli.db and said there
    was no such run. It names the database now, as an interrupted run's line does."""
    crash_then_resume(write, cli, "--workers", "2", segfault=True)


def test_the_resume_a_sys_exit_names_opens_the_runs_own_database(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    """The same for a target calling ``sys.exit()`` in one process (docs/reliability.md)."""
    crash_then_resume(write, cli, segfault=False)


def test_show_and_report_of_a_run_a_dead_worker_stopped_do_not_call_it_passed(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    """A worker died after a few conversations: the run is stored ``failed`` (exit 70) with the conversations that
    finished, all of which passed. ``show`` printed 'verdict: passed   conversations: 9   errors: 0', the HTML
    report a green 'passed' badge and nothing said that the rest never played or how to play it, where an
    interrupted run says 'INTERRUPTED after 9 of 24 conversations; continue with: ...'. Both say it now."""
    write("agent.py", AGENT)
    write("ds.yaml", dataset())
    write("crash.flag", "")
    write("segfault", "")
    stopped = cli("run", "ds.yaml", "--db", "runs.db", "-q", "--workers", "2")
    assert stopped.code == 70, stopped.stderr
    (run, status, played), = query(stopped.cwd / "runs.db", "SELECT id, status, completed_items FROM runs")
    assert status == "failed" and played < 24
    shown = cli("show", run, "--db", "runs.db")
    assert shown.code == 0, shown.stderr
    assert f"FAILED after {played} of 24 conversations" in shown.stdout, shown.stdout
    assert f"evalcli run ds.yaml --resume {run} --db runs.db" in shown.stdout, shown.stdout
    reported = cli("report", run, "--db", "runs.db", "--html", "report.html")
    assert reported.code == 0, reported.stderr
    html = (reported.cwd / "report.html").read_text()
    assert 'class="verdict v-passed"' not in html and "did not finish" in html



def test_the_show_commands_a_shards_run_names_open_its_database(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    """A CI shard run with ``--db shard-2.db`` lists its errored conversations, each with the command that shows
    it: 'evalcli show RUN c1', which opened evalcli.db and said there was no such run (and so did '... and 3 more
    (evalcli show RUN -v lists more)'). They name the database now, as the resume and compare hints do."""
    write("agent.py", AGENT)
    items = "".join(f"  - {{id: c{n}, input: boom}}\n" for n in range(13))
    write("ds.yaml", "target: agent:answer\ngates: [{includes: answer}]\ndata:\n" + items)
    done = cli("run", "ds.yaml", "--db", "shard-2.db", "-q")
    assert done.code == 4, done.stderr
    hints = [shlex.split(line.strip()) for line in done.stdout.splitlines() if line.strip().startswith("evalcli show")]
    assert len(hints) == 10 and all(hint[-2:] == ["--db", "shard-2.db"] for hint in hints), done.stdout
    shown = cli(*hints[0][1:])
    assert shown.code == 0 and "the agent fell over" in shown.stdout, shown.stderr
    assert "evalcli show" in done.stdout and "-v --db shard-2.db lists more" in done.stdout, done.stdout


LONG_ANSWERS = '''
import os, threading, time

lock = threading.Lock()
calls = 0


def answer(input, **options):
    """Every answer 50 KB long; with SLOW_FIRST set, the first conversation answers once every other one did."""
    global calls
    with lock:
        calls += 1
    if input == "q0" and os.environ.get("SLOW_FIRST"):
        while calls < int(os.environ["CONVERSATIONS"]):
            time.sleep(0.05)
        time.sleep(1.0)  # the others are scored and folded meanwhile
    return "answer " + "x" * 50_000
'''


def peak_rss_mb(folder: Path, env: dict[str, str], *args: str) -> float:
    """Peak resident memory of ``evalcli ARGS`` run to its end in a fresh interpreter (``os.wait4``'s rusage)."""
    process = subprocess.Popen([sys.executable, "-m", "evalcli", *args], cwd=folder, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    hang = threading.Timer(SUBPROCESS_TIMEOUT, process.kill)
    hang.start()
    try:
        _, status, usage = os.wait4(process.pid, 0)
    finally:
        hang.cancel()
    process.returncode = os.waitstatus_to_exitcode(status)
    assert process.returncode == 0, process.returncode
    return usage.ru_maxrss / 1024


def test_a_slow_first_conversation_does_not_make_the_run_hold_every_later_one(tmp_path: Path) -> None:
    """Means are folded in dataset order, so a result that finishes before an earlier conversation waits for it. It
    waited whole, messages and all: with the first of 1,500 conversations answering last (a slow agent, a retried
    call, a worker far behind), the run held every other one, 70 MB more here (a 100,000-conversation run held them
    all: the flat memory of docs/performance.md#memory gone). Only the outcomes folding reads wait now."""
    count = 1500
    (tmp_path / "agent.py").write_text(LONG_ANSWERS)
    (tmp_path / "ds.yaml").write_text("target: agent:answer\nconcurrency: 64\ngates: [{includes: answer}]\ndata:\n"
                                      + "".join(f"  - {{id: c{n}, input: q{n}}}\n" for n in range(count)))
    env = cli_env(CONVERSATIONS=str(count))
    steady = peak_rss_mb(tmp_path, env, "run", "ds.yaml", "--db", "a.db", "-q")
    slow_first = peak_rss_mb(tmp_path, {**env, "SLOW_FIRST": "1"}, "run", "ds.yaml", "--db", "b.db", "-q")
    assert slow_first < steady + 20, (steady, slow_first)


def test_the_resume_show_prints_is_a_command_a_shell_runs_for_a_dataset_named_with_a_space(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    """``show`` of a run that stopped (and the line an interrupted run ends with) says 'continue with: evalcli run
    my evals.yaml --resume RUN --db 'my runs.db'': the database quoted, the dataset not, so the command pasted
    into a shell named two datasets, 'my' and 'evals.yaml'. Both are quoted now, and the command plays the rest."""
    write("agent.py", AGENT)
    write("my evals.yaml", dataset(8))
    write("crash.flag", "")
    stopped = cli("run", "my evals.yaml", "--db", "my runs.db", "-q")
    assert stopped.code == 70, stopped.stderr
    (run,), = query(stopped.cwd / "my runs.db", "SELECT id FROM runs")
    shown = cli("show", run, "--db", "my runs.db")
    hinted = hinted_command(shown.stdout)
    assert hinted == ["run", "my evals.yaml", "--resume", run, "--db", "my runs.db"], shown.stdout
    resumed = cli(*hinted, "-q")
    assert resumed.code == 0, resumed.stderr


CANCELLING_AGENT = '''
import asyncio


async def answer(input, **options):
    if input == "cancel":
        raise asyncio.CancelledError()  # a library's cancel scope that leaked out of the agent
    return f"answer {input}"


def answer_sync(input, **options):
    if input == "cancel":
        raise asyncio.CancelledError()
    return f"answer {input}"
'''


def test_a_target_raising_cancelled_error_is_its_conversations_error_with_or_without_workers(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    """An agent that raises ``asyncio.CancelledError`` (a BaseException since Python 3.8) when nothing cancelled it
    ended the whole run: in one process a traceback, exit 1 and the run stored 'interrupted' though no one interrupted
    it; in a worker 'internal error in a worker: CancelledError ... a bug in evalcli', exit 70. It is that
    conversation's error now, as any exception the target raises, and the run the same with or without workers."""
    write("agent.py", CANCELLING_AGENT)
    items = "".join(f"  - {{id: c{n}, input: {'cancel' if n == 3 else f'q{n}'}}}\n" for n in range(8))
    for target in ("agent:answer", "agent:answer_sync"):
        write("ds.yaml", f"target: {target}\nconcurrency: 2\ngates: [{{includes: answer}}]\ndata:\n{items}")
        one = cli("run", "ds.yaml", "-q", "--json", "one.json")
        two = cli("run", "ds.yaml", "-q", "--json", "two.json", "--workers", "2")
        assert one.code == two.code == 4, (target, one.stderr, two.stderr)
        assert "c3  error: turn 0: the target raised CancelledError" in one.stdout, one.stdout
        db = one.cwd / "evalcli.db"
        assert rows(db, run_id(one, "one.json")) == rows(db, run_id(two, "two.json"))


LINGERING_AGENT = '''
import pathlib, threading, time

HERE = pathlib.Path(__file__).parent


def _linger():
    threading.main_thread().join()  # the process is exiting
    (HERE / "exiting").write_text("x")
    time.sleep(2)  # a helper thread the agent left: the interpreter waits for it as it exits


def answer(input, **options):
    with open(HERE / "calls.txt", "a") as f:
        f.write(input + "\\n")
    if input == "q0":
        threading.Thread(target=_linger, daemon=False).start()
    time.sleep(0.1)
    return "answer " + input
'''


def test_a_second_interrupt_as_an_interrupted_run_exits_is_held(tmp_path: Path) -> None:
    """Ctrl-C during the conversations is taken by the run (it finishes those in flight, stores the run interrupted,
    exit 130); a second Ctrl-C as the process exits met the default handler again: a KeyboardInterrupt traceback
    from Python's shutdown ('Exception ignored in: <module 'threading'>'), or, a moment later in the shutdown, the
    process killed by SIGINT instead of exit 130 (what made tests/test_adversarial_48.py's second-interrupt test
    fail one run in three). Every later interrupt is held once a run was interrupted, as after one the command took."""
    (tmp_path / "agent.py").write_text(LINGERING_AGENT)
    (tmp_path / "ds.yaml").write_text("target: agent:answer\nconcurrency: 2\ngates: [{includes: answer}]\ndata:\n"
                                      + "".join(f"  - {{id: c{n}, input: q{n}}}\n" for n in range(40)))
    run = start_cli(["run", "ds.yaml", "--db", "r.db", "-q"], tmp_path, cli_env())
    try:
        wait_for_lines(tmp_path / "calls.txt", 4)
        run.send_signal(signal.SIGINT)
        deadline = time.monotonic() + SUBPROCESS_TIMEOUT
        while not (tmp_path / "exiting").exists() and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        run.send_signal(signal.SIGINT)
    finally:
        _, err = run.communicate(timeout=SUBPROCESS_TIMEOUT)
    assert run.returncode == 130 and "Traceback" not in err and "KeyboardInterrupt" not in err, (run.returncode, err)
    assert query(tmp_path / "r.db", "SELECT status, exit_code FROM runs") == [("interrupted", 130)]
