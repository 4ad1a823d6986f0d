"""``--workers N`` (docs/performance.md#workers): one run played by several processes is the run one process plays
(its rows in the database, its verdict, its exit code), a worker that dies leaves its conversations to ``--resume``,
and what cannot work with workers is refused before anything runs."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

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

AGENT = """
import os, pathlib

HERE = pathlib.Path(__file__).parent

def generate(input, **options):
    if input == "boom":
        raise RuntimeError("the agent failed on purpose")
    if input == "die" and (HERE / "die.flag").exists():
        (HERE / "die.flag").unlink()
        os.kill(os.getpid(), 9)  # the worker playing this conversation is killed, as kill -9 would
    words = input.split()
    return f"answer {' '.join(reversed(words))} {len(words) * 'x'}"
"""

SCORERS = """
scorers:
  says-answer:
    includes: answer
  close:
    similarity: answer three two one xxx
"""

ITEMS = 30


def dataset(die: bool = False) -> str:
    lines = ["target: agent:generate", "concurrency: 3", "gates: [says-answer]", "scorers: [close]", "data:"]
    for n in range(ITEMS):
        words = " ".join(["one", "two", "three", "four"][: 1 + n % 4])
        if n == 7:
            lines.append(f"  - {{id: i{n}, input: boom}}")
        elif n == 12 and die:
            lines.append(f"  - {{id: i{n}, input: die}}")
        elif n % 3:
            lines.append(f"  - {{id: i{n}, input: '{words} {n}'}}")
        else:
            lines.append(f"  - {{id: i{n}, inputs: ['{words}', 'again {n}']}}")
    return "\n".join(lines) + "\n"


def rows(db: Path, run_id: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row the run wrote, but for what differs between any two runs (ids, timings, new thread ids)."""
    kept = {"items": "item_index, item_id, tags, form, status, error, input, gate_scores, "
                     "scores, passed, outcomes, stop_reason, metadata, repeats, gate_plays, identity, content",
            "turns": "item_index, turn_index, input, output, gate_scores, scores, simulated, "
                     "passed, outcomes, structured",
            "scores": "item_index, turn_index, scorer_id, role, score, reason, agreement, samples",
            "runs": "dataset, dataset_hash, target, status, verdict, exit_code, total_items, completed_items, "
                    "errors, scores, summary"}
    found = {}
    for table, columns in kept.items():
        key = "id" if table == "runs" else "run_id"
        order = "" if table == "runs" else " ORDER BY item_index, " + ("turn_index" if table != "items" else "1") + \
            (", scorer_id" if table == "scores" else "")
        found[table] = query(db, f"SELECT {columns} FROM {table} WHERE {key} = ?{order}", (run_id,))
    return found


def run(folder: Path, db: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    done = run_cli(["run", "ds.yaml", "--db", str(db), "--json", "out.json", "-q", *args], folder, cli_env())
    result = load_json((folder / "out.json").read_text()) if (folder / "out.json").exists() else {}
    return done, result


def test_two_workers_store_the_run_one_process_stores(tmp_path: Path) -> None:
    write_project(tmp_path, agent=AGENT, dataset=dataset(), scorers=SCORERS)
    db = tmp_path / "runs.db"
    one, alone = run(tmp_path, db)
    two, shared = run(tmp_path, db, "--workers", "2")
    assert one.returncode == two.returncode == 4, (one.stderr, two.stderr)  # i7 errored in both
    assert rows(db, alone["run_id"]) == rows(db, shared["run_id"])
    assert len(rows(db, shared["run_id"])["items"]) == ITEMS
    assert shared["summary"] == alone["summary"] and shared["scores"] == alone["scores"]
    assert query(db, "SELECT count(*) FROM runs") == [(2,)]  # one run id for the two workers


def test_auto_is_one_worker_a_core(tmp_path: Path) -> None:
    write_project(tmp_path, agent=AGENT, dataset=dataset(), scorers=SCORERS)
    done, result = run(tmp_path, tmp_path / "runs.db", "--workers", "auto")
    assert done.returncode == 4, done.stderr
    assert len(result["items"]) == ITEMS


def test_a_killed_worker_leaves_its_conversations_to_resume(tmp_path: Path) -> None:
    write_project(tmp_path, agent=AGENT, dataset=dataset(die=True), scorers=SCORERS)
    db = tmp_path / "runs.db"
    (tmp_path / "die.flag").touch()
    killed, _ = run(tmp_path, db, "--workers", "2")
    assert killed.returncode == 70, killed.stderr
    assert "killed by signal 9" in killed.stderr and "--resume" in killed.stderr, killed.stderr
    assert "Traceback" not in killed.stderr
    (run_id, status), = query(db, "SELECT id, status FROM runs")
    assert status == "failed"
    stored = query(db, "SELECT count(*) FROM items WHERE run_id = ?", (run_id,))[0][0]
    assert 0 < stored < ITEMS  # what the workers finished is kept, the rest is not
    resumed, _ = run(tmp_path, db, "--workers", "2", "--resume", run_id)
    assert resumed.returncode == 4, resumed.stderr
    fresh, alone = run(tmp_path, db)
    assert fresh.returncode == 4, fresh.stderr
    assert rows(db, run_id) == rows(db, alone["run_id"])


@pytest.mark.parametrize("workers", ["0", "65", "many", "-1"])
def test_a_number_of_workers_out_of_range_is_refused(tmp_path: Path, workers: str) -> None:
    write_project(tmp_path, agent=AGENT, dataset=dataset(), scorers=SCORERS)
    done, _ = run(tmp_path, tmp_path / "runs.db", "--workers", workers)
    assert done.returncode == 2, done.stderr
    assert f"--workers {workers}" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "runs.db").exists() or query(tmp_path / "runs.db", "SELECT count(*) FROM runs") == [(0,)]


def test_a_budget_with_workers_is_refused(tmp_path: Path) -> None:
    write_project(tmp_path, agent=AGENT, dataset=dataset(), scorers=SCORERS)
    done, _ = run(tmp_path, tmp_path / "runs.db", "--workers", "2", "--max-tokens", "1000")
    assert done.returncode == 2, done.stderr
    assert "--max-tokens cannot be used with --workers 2" in done.stderr


SCRIPT = """
import sys
import evalcli
from evalcli.errors import EvalcliError
from evalcli.run import RunOptions

def generate(input, **options):
    return "answer " + input

if __name__ == "__main__":
    try:
        evalcli.run_evals("ds.yaml", options=RunOptions(workers=int(sys.argv[1])))
    except EvalcliError as exc:
        print(exc)
        sys.exit(2)
    print("ran")
"""


def test_a_target_defined_in_main_is_refused_with_the_fix(tmp_path: Path) -> None:
    write_project(tmp_path, agent=AGENT, dataset=dataset().replace("agent:generate", "__main__:generate"),
                  scorers=SCORERS)
    (tmp_path / "script.py").write_text(SCRIPT, encoding="utf-8")
    alone = subprocess.run([sys.executable, "script.py", "1"], cwd=tmp_path, env=cli_env(), capture_output=True,
                           text=True, timeout=SUBPROCESS_TIMEOUT)
    assert alone.returncode == 0 and "ran" in alone.stdout, alone.stderr  # one process: it imports fine
    done = subprocess.run([sys.executable, "script.py", "2"], cwd=tmp_path, env=cli_env(), capture_output=True,
                          text=True, timeout=SUBPROCESS_TIMEOUT)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "defined in __main__" in done.stdout and "move it into a module" in done.stdout


SLOW = """
import pathlib, time

HERE = pathlib.Path(__file__).parent

def generate(input, **options):
    with open(HERE / "calls.txt", "a") as out:
        out.write(input + "\\n")
    time.sleep(0.3)
    return "answer " + input
"""


def test_an_interrupt_reaches_the_workers_and_the_run_resumes(tmp_path: Path) -> None:
    lines = ["target: agent:generate", "concurrency: 2", "gates: [says-answer]", "data:"]
    write_project(tmp_path, agent=SLOW, dataset="\n".join(lines + [f"  - {{id: i{n}, input: q{n}}}"
                                                                    for n in range(40)]) + "\n", scorers=SCORERS)
    db = tmp_path / "runs.db"
    process = start_cli(["run", "ds.yaml", "--db", str(db), "--workers", "2", "-q"], tmp_path, cli_env())
    wait_for_lines(tmp_path / "calls.txt", 4)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=SUBPROCESS_TIMEOUT)
    assert process.returncode == 130, stderr
    (run_id, status), = query(db, "SELECT id, status FROM runs")
    assert status == "interrupted"
    assert query(db, "SELECT count(*) FROM items")[0][0] < 40
    resumed, _ = run(tmp_path, db, "--workers", "2", "--resume", run_id)
    assert resumed.returncode == 0, resumed.stderr
    assert query(db, "SELECT count(*), min(status), max(status) FROM items") == [(40, "ok", "ok")]
