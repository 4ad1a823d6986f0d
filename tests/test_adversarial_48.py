"""Adversarial tests of ``evalcli run --workers N|auto`` (docs/performance.md#workers): each a defect found by breaking
the feature as a user would, through the real CLI (or a real ``python script.py`` for the library)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from evalcli.run.worker_checks import _cgroup_quota
from tests.reliability_helpers import SUBPROCESS_TIMEOUT, cli_env, query, run_cli, start_cli, wait_for_lines

AGENT = '''
import os, sys, time
CALLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls.txt")

def agent(input, **kw):
    with open(CALLS, "a") as f:
        f.write(f"{os.getpid()} {input}\\n")
    time.sleep(float(os.environ.get("AGENT_DELAY", "0")))
    if input == "exit please":
        sys.exit(5)
    return "reply to " + input
'''


def project(folder: Path, count: int, *, extra: str = "") -> Path:
    """``agent.py`` (one line in calls.txt per call) and ``d.jsonl`` of ``count`` two-turn conversations."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "agent.py").write_text(AGENT)
    lines = [json.dumps({"target": "agent:agent", "gates": [{"includes": "reply"}]})]
    lines += [json.dumps({"id": f"c{i}", "inputs": [f"hello {i}", f"again {i}"]}) for i in range(count)]
    if extra:
        lines.insert(3, json.dumps({"id": "x", "inputs": [extra]}))
    (folder / "d.jsonl").write_text("\n".join(lines) + "\n")
    return folder / "d.jsonl"


def first_turns(folder: Path) -> Counter[str]:
    """How many times each conversation's first turn was played."""
    return Counter(line.split(" ", 2)[2] for line in (folder / "calls.txt").read_text().splitlines()
                   if line.split(" ")[1] == "hello")


@pytest.mark.timing
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_second_interrupt_leaves_a_workers_run_interrupted_and_resumable(tmp_path: Path, sig: int) -> None:
    """Twice Ctrl-C (or SIGTERM) stops a --workers run as it stops one process: `interrupted`, exit 130, resumable.
    It was `failed`, exit 70, '1 of 2 workers did not finish: ... exit code 130' (a worker stopped as it was told
    counted as one that died)."""
    project(tmp_path, 40)
    env = cli_env(AGENT_DELAY="0.05")
    run = start_cli(["run", "d.jsonl", "--db", "r.db", "-q", "--workers", "2", "--concurrency", "4"], tmp_path, env)
    wait_for_lines(tmp_path / "calls.txt", 10)
    run.send_signal(sig)
    time.sleep(0.3)  # the workers told of the first
    run.send_signal(sig)
    _, err = run.communicate(timeout=SUBPROCESS_TIMEOUT)
    assert run.returncode == 130, err
    assert "did not finish" not in err
    (run_id, status, code), = query(tmp_path / "r.db", "SELECT id, status, exit_code FROM runs")
    assert (status, code) == ("interrupted", 130)
    resumed = run_cli(["run", "d.jsonl", "--db", "r.db", "-q", "--workers", "2", "--resume", run_id], tmp_path, env)
    assert resumed.returncode == 0, resumed.stderr
    assert query(tmp_path / "r.db", "SELECT status, completed_items FROM runs") == [("completed", 40)]
    played = first_turns(tmp_path)
    assert set(played) == {str(i) for i in range(40)}  # nothing lost; only conversations cut short play twice
    assert sum(played.values()) - 40 <= 4


def test_an_agent_calling_sys_exit_in_a_worker_is_named_with_the_resume(tmp_path: Path) -> None:
    """A target that calls sys.exit() ends its worker: the error names the worker, what ended it and the command
    that plays the rest. It said 'internal error in a worker: SystemExit: 5', hint 'this is a bug in evalcli',
    without the worker or the resume command (one failed worker's error was taken for every worker's)."""
    project(tmp_path, 10, extra="exit please")
    done = run_cli(["run", "d.jsonl", "--db", "r.db", "-q", "--workers", "2"], tmp_path)
    assert done.returncode == 70
    run_id, = query(tmp_path / "r.db", "SELECT id FROM runs")[0]
    assert "bug in evalcli" not in done.stderr
    assert "SystemExit(5)" in done.stderr and "sys.exit()" in done.stderr
    assert "1 of 2 workers did not finish: worker " in done.stderr
    assert f"--resume {run_id}" in done.stderr


def test_an_agent_calling_sys_exit_in_one_process_fails_the_run_and_names_the_resume(tmp_path: Path) -> None:
    """The same agent in one process: the run was stored `interrupted` and the process exited 5 (asyncio took the
    SystemExit for the loop's own); now, as with workers, it is `failed`, exit 70, named, and resumable."""
    project(tmp_path, 10, extra="exit please")
    done = run_cli(["run", "d.jsonl", "--db", "r.db", "-q", "--concurrency", "1"], tmp_path)
    assert done.returncode == 70, done.stderr
    (run_id, status), = query(tmp_path / "r.db", "SELECT id, status FROM runs")
    assert status == "failed"
    assert "bug in evalcli" not in done.stderr and "Traceback" not in done.stderr
    assert "conversation x: ended by SystemExit(5)" in done.stderr and "sys.exit()" in done.stderr
    assert f"--resume {run_id}" in done.stderr
    (folder_agent := tmp_path / "agent.py").write_text(folder_agent.read_text().replace("sys.exit(5)", "pass"))
    resumed = run_cli(["run", "d.jsonl", "--db", "r.db", "-q", "--resume", run_id], tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert query(tmp_path / "r.db", "SELECT status, completed_items FROM runs") == [("completed", 11)]


@pytest.mark.parametrize("written", ["²", "٣", "1²"])
def test_workers_of_digits_int_cannot_read_are_refused(tmp_path: Path, written: str) -> None:
    """`--workers ²`: str.isdigit() accepts it, int() does not; it was an internal error (exit 70)."""
    project(tmp_path, 2)
    done = run_cli(["run", "d.jsonl", "--db", "r.db", "--workers", written], tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"--workers {written}: not a number of processes" in done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this platform")
def test_workers_auto_counts_the_cores_this_process_may_use(tmp_path: Path) -> None:
    """`--workers auto` under `taskset -c 0` (a container's cpuset) plays in one process: it started one worker per
    core of the machine (os.cpu_count()), all on the one core it may use."""
    project(tmp_path, 6)
    one = min(os.sched_getaffinity(0))
    done = subprocess.run([sys.executable, "-m", "evalcli", "run", "d.jsonl", "--db", "r.db", "-q", "--workers",
                           "auto"], cwd=tmp_path, env=cli_env(), capture_output=True, text=True,
                          timeout=SUBPROCESS_TIMEOUT, preexec_fn=lambda: os.sched_setaffinity(0, {one}))
    assert done.returncode == 0, done.stderr
    pids = {line.split()[0] for line in (tmp_path / "calls.txt").read_text().splitlines()}
    assert len(pids) == 1


def test_cgroup_quota_in_cores(tmp_path: Path) -> None:
    """cgroup v2's cpu.max as `auto` reads it: the quota's cores rounded up; none without a quota."""
    path = tmp_path / "cpu.max"
    for text, cores in [("100000 100000\n", 1), ("150000 100000", 2), ("50000 100000", 1), ("max 100000", None),
                        ("", None), ("0 0", None)]:
        path.write_text(text)
        assert _cgroup_quota(path) == cores, text
    assert _cgroup_quota(tmp_path / "missing") is None


SCRIPT = '''
import sys
sys.path.insert(0, "lib")   # the agent is importable only through this edit
from evalcli import RunOptions, run_evals
result = run_evals("d.yaml", options=RunOptions(workers=2))
print(result.status, result.exit_code, sorted(item.status for item in result.items))
'''


def test_a_target_found_through_the_scripts_sys_path_plays_in_workers(tmp_path: Path) -> None:
    """A script that puts a folder on sys.path and runs with workers: each worker imports the target as the script
    did. Every worker failed: "target 'libagent:agent' does not import: ModuleNotFoundError"."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libagent.py").write_text(AGENT)
    (tmp_path / "d.yaml").write_text("target: libagent:agent\ngates: [{includes: reply}]\ndata:\n"
                                     + "".join(f"  - {{id: c{i}, input: hello {i}}}\n" for i in range(4)))
    (tmp_path / "run_it.py").write_text(SCRIPT)
    done = subprocess.run([sys.executable, "run_it.py"], cwd=tmp_path, env=cli_env(), capture_output=True,
                          text=True, timeout=SUBPROCESS_TIMEOUT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[-2] == "completed 0 ['ok', 'ok', 'ok', 'ok']"
    assert len({line.split()[0] for line in (tmp_path / "lib" / "calls.txt").read_text().splitlines()}) == 2
