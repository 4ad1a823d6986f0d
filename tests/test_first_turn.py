"""A new run's fingerprint is made beside its first turns, not before them (docs/performance.md#the-first-turn): the
writer thread makes it with the run's row, which still comes before every conversation's rows; what it stores, an
error making it and an interrupt before it is made are as when it was made first."""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from evalcli.fingerprint import SALT
from evalcli.run import RunOptions, run_evals
from evalcli.store import Store
from tests.reliability_helpers import (
    SUBPROCESS_TIMEOUT,
    cli_env,
    load_json,
    query,
    run_cli,
    start_cli,
    wait_for_lines,
    write_project,
)

plan_module = importlib.import_module("evalcli.run.plan")

AGENT = """
import os, threading, time

CALLED = threading.Event()

def generate(input, **options):
    CALLED.set()
    calls = os.environ.get("CALLS_FILE")
    if calls:
        with open(calls, "a") as f:
            f.write(input + "\\n")
    time.sleep(float(os.environ.get("TURN_SECONDS", "0")))
    return f"fine: {input}"
"""


def dataset(count: int, edited: int | None = None) -> str:
    lines = ["target: agent:generate", "concurrency: 4", "gates: [{includes: fine}]", "data:"]
    lines += [f"  - {{id: q{n}, input: 'q{n} {'edited' if n == edited else 'please'}'}}" for n in range(count)]
    return "\n".join(lines) + "\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = write_project(tmp_path, agent=AGENT, dataset=dataset(20))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    sys.modules.pop("agent", None)
    return path


def run_options(db: Path) -> dict[str, Any]:
    (options,) = query(db, "SELECT options FROM runs")[0]
    value: dict[str, Any] = json.loads(options)
    return value


def test_the_first_turn_does_not_wait_for_the_fingerprint(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made = plan_module.fingerprint
    waited: list[bool] = []

    def after_the_first_turn(tree: Any, *args: Any, **kwargs: Any) -> dict[str, str]:
        # made before any conversation started (as it was), the target is never called while it waits here
        waited.append(sys.modules["agent"].CALLED.wait(10))
        return made(tree, *args, **kwargs)

    monkeypatch.setattr(plan_module, "fingerprint", after_the_first_turn)
    db = project.parent / "e.db"
    with Store(db) as store:
        result = run_evals(project, store=store)
    assert waited == [True], "the fingerprint was made before the first turn was sent"
    assert result.exit_code == 0 and result.completed == 20
    config = run_options(db)["config"]
    assert SALT in config and "data[19]" in config  # the whole configuration, stored with the run's row


def test_while_the_row_is_made_few_conversations_wait_behind_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Conversations that outrun the writer while it still makes the run's row wait once ``FIRST_BACKLOG`` of them
    are queued behind it (their rows would add to the walk's own memory), then go on; all are stored."""
    from evalcli.run.context import FIRST_BACKLOG

    path = write_project(tmp_path, agent=AGENT, dataset=dataset(300).replace("concurrency: 4", "concurrency: 16"))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    sys.modules.pop("agent", None)
    calls = tmp_path / "calls.txt"
    monkeypatch.setenv("CALLS_FILE", str(calls))
    made = plan_module.fingerprint
    played_before: list[int] = []

    def slow(tree: Any, *args: Any, **kwargs: Any) -> dict[str, str]:
        time.sleep(1.5)  # a long walk: a zero-latency target would play every conversation meanwhile
        played_before.append(len(calls.read_text().splitlines()) if calls.exists() else 0)
        return made(tree, *args, **kwargs)

    monkeypatch.setattr(plan_module, "fingerprint", slow)
    db = tmp_path / "e.db"
    with Store(db) as store:
        result = run_evals(path, store=store)
    assert result.exit_code == 0 and result.completed == 300
    assert 0 < played_before[0] <= FIRST_BACKLOG + 16, played_before  # those queued, and those in flight
    assert query(db, "SELECT count(*) FROM items") == [(300,)]


def test_a_fingerprint_that_cannot_be_made_is_the_runs_error_and_nothing_is_stored(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(tree: Any, *args: Any, **kwargs: Any) -> dict[str, str]:
        raise RuntimeError("the fingerprint failed")

    monkeypatch.setattr(plan_module, "fingerprint", broken)
    db = project.parent / "e.db"
    with Store(db) as store, pytest.raises(RuntimeError, match="the fingerprint failed"):
        run_evals(project, store=store)
    assert query(db, "SELECT count(*) FROM runs") == [(0,)]
    assert query(db, "SELECT count(*) FROM items") == [(0,)]


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="POSIX signals")
def test_an_interrupt_before_the_fingerprint_is_made_still_stores_it_whole(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made = plan_module.fingerprint

    def interrupted_first(tree: Any, *args: Any, **kwargs: Any) -> dict[str, str]:
        assert sys.modules["agent"].CALLED.wait(10)
        os.kill(os.getpid(), signal.SIGINT)  # the run stops (its handler: conversations in flight finish)
        time.sleep(0.5)
        return made(tree, *args, **kwargs)

    monkeypatch.setattr(plan_module, "fingerprint", interrupted_first)
    monkeypatch.setenv("TURN_SECONDS", "0.2")
    db = project.parent / "e.db"
    with Store(db) as store:
        result = run_evals(project, store=store, options=RunOptions(handle_signals=True))
    assert result.status == "interrupted" and 0 < result.completed < 20
    assert query(db, "SELECT status, completed_items FROM runs") == [("interrupted", result.completed)]
    config = run_options(db)["config"]
    assert SALT in config and "data[19]" in config


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="POSIX signals")
def test_an_interrupt_at_the_first_turn_keeps_a_whole_run_row_that_resumes(tmp_path: Path) -> None:
    count = 1500
    write_project(tmp_path, agent=AGENT, dataset=dataset(count))
    env = cli_env(CALLS_FILE=str(tmp_path / "calls.txt"), TURN_SECONDS="0.3")
    process = start_cli(["run", "ds.yaml"], tmp_path, env)
    wait_for_lines(tmp_path / "calls.txt", 1)  # the first turn is in the target: the fingerprint may still be made
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=SUBPROCESS_TIMEOUT)
    assert process.returncode == 130, stderr
    db = tmp_path / "evalcli.db"
    ((run_id, status, completed),) = query(db, "SELECT id, status, completed_items FROM runs")
    assert status == "interrupted" and 0 < completed < count
    config = run_options(db)["config"]
    assert SALT in config and f"data[{count - 1}]" in config

    (tmp_path / "ds.yaml").write_text(dataset(count, edited=count - 2))
    edited = run_cli(["run", "ds.yaml", "--resume", run_id], tmp_path, cli_env())
    assert edited.returncode == 2 and f"data[{count - 2}].inputs[0] (changed)" in edited.stderr, edited.stderr
    (tmp_path / "ds.yaml").write_text(dataset(count))
    resumed = run_cli(["run", "ds.yaml", "--resume", run_id, "--json", "-"], tmp_path, cli_env())
    assert resumed.returncode == 0, resumed.stderr
    result = load_json(resumed.stdout)
    assert result["run_id"] == run_id and result["summary"]["total_items"] == count
    assert query(db, "SELECT status, completed_items FROM runs") == [("completed", count)]
