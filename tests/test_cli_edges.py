"""The command line tells the truth at its edges: output paths are really checked before anything runs, run-id
prefixes are text (never SQL patterns), --quiet keeps what it promises, and Ctrl-C or SIGTERM after the
conversations still ends in 130 with the run marked interrupted."""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult
from tests.reliability_helpers import SUBPROCESS_TIMEOUT, cli_env, query, start_cli, wait_for_lines

SLOW = '''
import os, time

def answer(input, **kw):
    with open(os.environ["CALLS_FILE"], "a") as f:
        f.write(input + "\\n")
    time.sleep(0.3)
    return "ok " + input
'''


@pytest.mark.parametrize(("option", "path"), [("--junit", "nowhere/dir/j.xml"), ("--json", "/proc/x.json"),
                                              ("--html", "/proc/x.html"), ("--markdown", "/sys/x.md")])
def test_every_output_is_checked_by_writing_it_before_anything_runs(option: str, path: str, workdir: Path,
                                                                    write: Callable[..., Path],
                                                                    cli: Callable[..., CliResult]) -> None:
    write("slow.py", SLOW)
    write("d.yaml", "target: slow:answer\nscorers: [{includes: ok}]\ndata: [{input: a}]\n")
    result = cli("run", "d.yaml", option, path, env={"CALLS_FILE": str(workdir / "calls.txt")})
    assert result.code == 2, result.stderr
    assert f"{option} {path}" in result.stderr and "Traceback" not in result.stderr
    assert not (workdir / "calls.txt").exists() and not (workdir / "evalcli.db").exists()
    assert not (workdir / "nowhere").exists()  # no folder is created where a typo points
    existing = write("kept.json", "keep me")  # an existing file is checked without being changed
    assert cli("run", "d.yaml", "--junit", str(existing), env={"CALLS_FILE": str(workdir / "c2.txt")}).code == 0
    assert existing.read_text().startswith("<?xml")


def test_run_id_prefixes_are_text_not_patterns(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", "target: agents:echo\nscorers: [{includes: said}]\ndata: [{input: a}]\n")
    run_id = cli("run", "d.yaml", "--json", "-").json["run_id"]
    for pattern in ("%", "_", run_id[:3] + "%", "_" * 26):
        shown = cli("diff", pattern, "latest")
        assert shown.code == 2 and f"no run '{pattern}'" in shown.stderr, (pattern, shown.stderr)
    assert cli("show", run_id[:6]).code == 0


def test_another_programs_sqlite_file_is_refused_untouched(write: Callable[..., Path], workdir: Path,
                                                          cli: Callable[..., CliResult]) -> None:
    write("d.yaml", "target: agents:echo\nscorers: [{includes: said}]\ndata: [{input: a}]\n")
    foreign = workdir / "app.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE users (id INTEGER)")
    before = foreign.read_bytes()
    assert cli("run", "d.yaml", "--db", "d.db", "--shard", "1/1").code == 0
    for args in (["run", "d.yaml", "--db", "app.db"], ["runs", "--db", "app.db"], ["labels", "export", "--db", "app.db"],
                 ["merge", "app.db", "--out", "merged.db"], ["merge", "d.db", "--out", "app.db"]):
        result = cli(*args)
        assert result.code == 2 and "it is not an evalcli database" in result.stderr, (args, result.stderr)
    assert foreign.read_bytes() == before  # no evalcli tables added, its journal mode not switched to WAL
    assert not (workdir / "app.db-wal").exists()


def test_quiet_keeps_errors_and_a_resume_command_that_works(tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text(SLOW + "\ndef broken(input, **kw):\n    raise ValueError('no answer today')\n")
    (tmp_path / "e.yaml").write_text("target: slow:broken\nscorers: [{includes: ok}]\ndata: [{id: lost, input: a}]\n")
    env = cli_env(CALLS_FILE=str(tmp_path / "calls.txt"))
    from tests.reliability_helpers import run_cli

    errors = run_cli(["run", "e.yaml", "-q", "--db", "other.db"], tmp_path, env)
    assert errors.returncode == 4
    assert "lost  error: turn 0: the target raised ValueError: no answer today" in errors.stdout, errors.stdout
    items = "".join(f"  - {{id: q{n}, input: q{n}}}\n" for n in range(6))
    (tmp_path / "d.yaml").write_text(f"target: slow:answer\nconcurrency: 1\nscorers: [{{includes: ok}}]\ndata:\n{items}")
    process = start_cli(["run", "d.yaml", "-q", "--db", "other.db"], tmp_path, env)
    wait_for_lines(tmp_path / "calls.txt", 2)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=SUBPROCESS_TIMEOUT)
    assert process.returncode == 130, err
    run_id = query(tmp_path / "other.db", "SELECT id FROM runs ORDER BY id DESC LIMIT 1")[0][0]
    assert f"continue with: evalcli run d.yaml --resume {run_id} --db other.db" in out, out
    resumed = run_cli(["run", "d.yaml", "--resume", run_id, "--db", "other.db", "-q"], tmp_path, env)
    assert resumed.returncode == 0, resumed.stderr


def completed(db: Path) -> bool:
    try:
        return db.exists() and bool(query(db, "SELECT 1 FROM runs WHERE status = 'completed'"))
    except sqlite3.OperationalError:  # the schema is not written yet
        return False


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_while_reports_are_written_is_130_and_marks_the_run(sig: signal.Signals, tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text(SLOW)
    (tmp_path / "d.yaml").write_text("target: slow:answer\nscorers: [{includes: ok}]\ndata: [{id: a, input: a}]\n")
    pipe = tmp_path / "junit.xml"
    os.mkfifo(pipe)  # writing the JUnit report blocks until someone reads it: the interrupt comes then
    process = start_cli(["run", "d.yaml", "--junit", str(pipe)], tmp_path, cli_env(CALLS_FILE=str(tmp_path / "c.txt")))
    deadline = time.monotonic() + SUBPROCESS_TIMEOUT
    while not completed(tmp_path / "evalcli.db") and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # past the terminal report, blocked opening the pipe
    process.send_signal(sig)
    out, err = process.communicate(timeout=SUBPROCESS_TIMEOUT)
    assert process.returncode == 130, (out, err)
    assert "Aborted" not in err and "Traceback" not in err
    run_id = query(tmp_path / "evalcli.db", "SELECT id FROM runs")[0][0]
    assert f"INTERRUPTED while finishing run {run_id}" in out and f"evalcli run d.yaml --resume {run_id}" in out
    assert query(tmp_path / "evalcli.db", "SELECT status, exit_code FROM runs") == [("interrupted", 130)]
