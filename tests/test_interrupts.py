"""Real signals to a real ``evalcli run``: SIGINT/SIGTERM keep what finished and exit 130; --resume
runs only what is missing and gives the uninterrupted result; SIGKILL leaves a valid database."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.reliability_helpers import (
    SUBPROCESS_TIMEOUT,
    cli_env,
    essentials,
    load_json,
    query,
    run_cli,
    start_cli,
    wait_for_lines,
    write_project,
)

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="POSIX signals")

AGENT = """
import os, time

def generate(input, **options):
    with open(os.environ["CALLS_FILE"], "a") as f:
        f.write(input + "\\n")
    if "hang" in input and os.path.exists(os.environ["HANG_FLAG"]):
        time.sleep(120)
    time.sleep(float(os.environ.get("TURN_SECONDS", "0.25")))
    with open(os.environ["CALLS_FILE"] + ".done", "a") as f:
        f.write(input + "\\n")
    return f"answer to {input}"
"""

ITEMS = 12


def dataset(hang_at: int | None = None) -> str:
    lines = ["target: agent:generate", "concurrency: 2", "gates:", "  - includes: answer", "scorers:",
             "  - scorer: {includes: q1}", "    threshold: 0", "  - scorer: {similarity: answer to q}",
             "    threshold: {min: 0.1}", "data:"]
    for n in range(ITEMS):
        word = "hang" if n == hang_at else "please"
        if n % 3 == 0:
            lines.append(f"  - {{id: q{n}, tags: [single], input: 'q{n} {word}'}}")
        elif n % 3 == 1:
            lines.append(f"  - {{id: q{n}, inputs: ['q{n} {word}', 'q{n} again']}}")
        else:
            lines += [f"  - id: q{n}", "    turns:", f"      - input: q{n} {word}",
                      "        gates: [{includes: answer}]", f"      - input: q{n} more",
                      "        scorers: [{scorer: {includes: more}, threshold: 1}]"]
    return "\n".join(lines) + "\n"


TOTAL_CALLS = sum(1 if n % 3 == 0 else 2 for n in range(ITEMS))


def project(tmp_path: Path, hang_at: int | None = None) -> tuple[Path, dict[str, str]]:
    write_project(tmp_path, agent=AGENT, dataset=dataset(hang_at))
    env = cli_env(CALLS_FILE=str(tmp_path / "calls.txt"), HANG_FLAG=str(tmp_path / "hang.flag"))
    return tmp_path, env


def calls(folder: Path, name: str = "calls.txt") -> list[str]:
    path = folder / name
    return path.read_text().splitlines() if path.exists() else []


def item_of(call: str) -> str:
    return call.split()[0]


def reference(tmp_path: Path) -> dict[str, object]:
    """The same dataset run without interruption, in its own folder and database."""
    folder, env = project(tmp_path / "reference")
    done = run_cli(["run", "ds.yaml", "--json", "-"], folder, env)
    assert done.returncode == 0, done.stderr
    return essentials(load_json(done.stdout))


def run_row(db: Path) -> tuple[str, str, int, int]:
    rows = query(db, "SELECT id, status, exit_code, completed_items FROM runs")
    assert len(rows) == 1
    return rows[0]


@pytest.mark.timing
def test_sigint_keeps_finished_conversations_and_resume_gives_the_uninterrupted_result(tmp_path: Path) -> None:
    folder, env = project(tmp_path / "run")
    process = start_cli(["run", "ds.yaml", "--json", "out.json"], folder, env)
    wait_for_lines(folder / "calls.txt.done", 5)
    process.send_signal(signal.SIGINT)
    started = time.monotonic()
    stdout, stderr = process.communicate(timeout=15)
    assert time.monotonic() - started < 5, "in-flight conversations should finish well within the grace period"
    assert process.returncode == 130, stderr

    run_id, status, code, completed = run_row(folder / "evalcli.db")
    assert (status, code) == ("interrupted", 130)
    stored = query(folder / "evalcli.db", "SELECT item_id, status FROM items")
    assert stored and all(s == "ok" for _, s in stored)
    assert 0 < len(stored) < ITEMS and completed == len(stored)
    # every conversation whose calls all finished was written (in-flight ones were allowed to finish)
    done = calls(folder, "calls.txt.done")
    started_items = {item_of(c) for c in calls(folder)}
    assert {i for i, _ in stored} == started_items
    assert f"INTERRUPTED after {len(stored)} of {ITEMS} conversations" in stdout
    assert f"--resume {run_id}" in stdout
    assert "interrupted" in stderr
    partial = load_json((folder / "out.json").read_text())
    assert partial["summary"]["total_items"] == len(stored)

    before = len(calls(folder))
    assert before == len(done)
    resumed = run_cli(["run", "ds.yaml", "--resume", run_id, "--json", "-"], folder, env)
    assert resumed.returncode == 0, resumed.stderr
    result = load_json(resumed.stdout)
    assert result["run_id"] == run_id
    new_calls = calls(folder)[before:]
    assert {item_of(c) for c in new_calls}.isdisjoint({i for i, _ in stored}), "finished conversations re-ran"
    assert len(calls(folder)) == TOTAL_CALLS, "every turn ran exactly once over both processes"
    assert essentials(result) == reference(tmp_path)
    assert run_row(folder / "evalcli.db")[1:3] == ("completed", 0)


@pytest.mark.timing
def test_second_sigterm_cancels_a_hung_conversation_at_once_and_resume_reruns_it(tmp_path: Path) -> None:
    folder, env = project(tmp_path, hang_at=4)
    (folder / "hang.flag").write_text("hang")
    process = start_cli(["run", "ds.yaml"], folder, env)
    wait_for_lines(folder / "calls.txt.done", 8)
    assert "q4 hang" in calls(folder)
    process.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    process.send_signal(signal.SIGTERM)
    started = time.monotonic()
    stdout, stderr = process.communicate(timeout=15)
    assert time.monotonic() - started < 3, "a second signal must stop at once, not wait for the hung call"
    assert process.returncode == 130, stderr
    run_id, status, _, completed = run_row(folder / "evalcli.db")
    assert status == "interrupted"
    stored = {i for (i,) in query(folder / "evalcli.db", "SELECT item_id FROM items")}
    assert "q4" not in stored and len(stored) == completed >= 4
    assert f"INTERRUPTED after {completed} of {ITEMS}" in stdout

    (folder / "hang.flag").unlink()
    before = len(calls(folder))
    resumed = run_cli(["run", "ds.yaml", "--resume", run_id, "--json", "-"], folder, env)
    assert resumed.returncode == 0, resumed.stderr
    assert {item_of(c) for c in calls(folder)[before:]} == {f"q{n}" for n in range(ITEMS)} - stored
    result = load_json(resumed.stdout)
    assert result["summary"] == {"total_items": ITEMS, "errors": 0, "not_scorable": {}}
    assert [i["id"] for i in result["items"]] == [f"q{n}" for n in range(ITEMS)]


def test_sigkill_loses_at_most_the_conversations_in_flight_and_the_db_stays_valid(tmp_path: Path) -> None:
    folder, env = project(tmp_path)
    env["TURN_SECONDS"] = "0.1"
    process = start_cli(["run", "ds.yaml"], folder, env)
    wait_for_lines(folder / "calls.txt.done", 6)
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=SUBPROCESS_TIMEOUT)
    assert process.returncode == -signal.SIGKILL

    db = folder / "evalcli.db"
    assert query(db, "PRAGMA integrity_check") == [("ok",)]
    assert query(db, "PRAGMA foreign_key_check") == []
    run_id, status, _, _ = run_row(db)
    assert status == "running"
    stored = {i for (i,) in query(db, "SELECT item_id FROM items")}
    finished = {item_of(c) for c in calls(folder, "calls.txt.done")}
    # an item is stored only whole (its turns with it), and at most `concurrency` finished ones are lost
    for item_id in stored:
        n = int(item_id[1:])
        assert len(query(db, "SELECT 1 FROM turns t JOIN items i USING (run_id, item_index) WHERE i.item_id = ?",
                         [item_id])) == (1 if n % 3 == 0 else 2)
    assert stored <= finished and len(finished - stored) <= 2

    resumed = run_cli(["run", "ds.yaml", "--resume", run_id, "--json", "-"], folder, env)
    assert resumed.returncode == 0, resumed.stderr
    result = load_json(resumed.stdout)
    assert result["summary"]["total_items"] == ITEMS and result["verdict"] == "passed"
    assert query(db, "SELECT status FROM runs") == [("completed",)]
    assert query(db, "PRAGMA integrity_check") == [("ok",)]


# A signal that arrives while the run puts its signal handlers back (between the event loop's removal of its own and
# the restore of the command's) waits for the restore: it met SIGTERM's default before, which ended the process at once.
SIGNAL_IN_THE_WINDOW = """
import asyncio, os, signal, sys
from evalcli.run.runner import Runner
seen = []
signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
async def main():
    loop = asyncio.get_running_loop()
    real = loop.remove_signal_handler
    def removing(sig):
        removed = real(sig)
        if sig == signal.SIGTERM:
            os.kill(os.getpid(), sig)
        return removed
    loop.remove_signal_handler = removing
    restore = Runner._install_signals(object.__new__(Runner))
    restore()
asyncio.run(main())
print("handled", seen)
"""


def test_a_signal_while_the_run_puts_its_handlers_back_reaches_the_command(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", SIGNAL_IN_THE_WINDOW], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=SUBPROCESS_TIMEOUT)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.strip() == f"handled [{int(signal.SIGTERM)}]"
