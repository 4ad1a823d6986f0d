"""Adversarial try (adv22) of ``--workers``, streamed JSONL items and ``merge`` as a user meets them
(docs/performance.md#workers, docs/ci.md "Sharding and merging"): the real CLI, real SQLite files, real processes."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.reliability_helpers import (
    SUBPROCESS_TIMEOUT,
    cli_env,
    query,
    run_cli,
    start_cli,
    wait_for_lines,
    write_project,
)

LEAVES_A_HELPER = """
import os, pathlib

HERE = pathlib.Path(__file__).parent

def generate(input, **options):
    if input == "q1":  # a helper left running, as an agent's dev server or browser is: its output goes elsewhere
        os.system(f"(sleep 30; touch {HERE / 'helper.ended'}) >/dev/null 2>&1 </dev/null & echo $! > {HERE / 'helper.pid'}")
    return "answer " + input
"""


def test_a_process_the_target_leaves_running_does_not_hold_up_a_workers_run(tmp_path: Path) -> None:
    """The target starts a helper and leaves it running (its stdio elsewhere). One process ends its run at once; a
    workers run waited for the helper to end (it held the worker's result pipe open: 21.6 s against 0.8 s with a
    ``sleep 20``, and for ever with a server), so it ended after the helper, not before."""
    data = "".join(f"  - {{id: i{n}, input: q{n}}}\n" for n in range(4))
    write_project(tmp_path, agent=LEAVES_A_HELPER,
                  dataset="target: agent:generate\ngates: [{includes: answer}]\ndata:\n" + data)
    process = start_cli(["run", "ds.yaml", "--db", "runs.db", "--workers", "2", "-q"], tmp_path, cli_env())
    pid = tmp_path / "helper.pid"
    try:
        _, stderr = process.communicate(timeout=SUBPROCESS_TIMEOUT)
        still_running = not (tmp_path / "helper.ended").exists()  # the run ended before the helper, as one process's
    finally:
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pid.read_text()), signal.SIGKILL)
    assert process.returncode == 0, stderr
    assert still_running
    assert query(tmp_path / "runs.db", "SELECT count(*) FROM items") == [(4,)]


ERRS = """
def generate(input, **options):
    if input == "boom":
        raise RuntimeError("the agent failed on purpose")
    return "answer " + input
"""


def test_merge_refuses_shards_run_with_another_exit_rule(tmp_path: Path) -> None:
    """Shards run with --max-errors 3 and without it are not one run: merge took the first shard's rule, so the same
    shards merged exit 0 named one way round and 4 the other. It refuses them (exit 2, naming both rules), as it
    refuses another --repeat; the same rule merges."""
    data = "".join(f"  - {{id: i{n}, input: {'boom' if n == 5 else f'q{n}'}}}\n" for n in range(12))
    write_project(tmp_path, agent=ERRS, dataset="target: agent:generate\ngates: [{includes: answer}]\ndata:\n" + data)
    for db, args in (("a.db", ["--shard", "1/2", "--max-errors", "3"]), ("b.db", ["--shard", "2/2", "--max-errors", "3"]),
                     ("c.db", ["--shard", "1/2"]), ("d.db", ["--shard", "2/2"])):
        done = run_cli(["run", "ds.yaml", "-q", "--db", db, *args], tmp_path, cli_env())
        assert done.returncode in (0, 4), done.stderr
    codes = {}
    for name, dbs in (("ad", ["a.db", "d.db"]), ("da", ["d.db", "a.db"]), ("cb", ["c.db", "b.db"])):
        merged = run_cli(["merge", *dbs, "--out", f"{name}.db"], tmp_path, cli_env())
        codes[name] = merged.returncode
        assert merged.returncode == 2, (name, merged.stdout, merged.stderr)
        assert "--max-errors 3" in merged.stderr and "--max-errors 0" in merged.stderr, merged.stderr
        assert not (tmp_path / f"{name}.db").exists() or \
            query(tmp_path / f"{name}.db", "SELECT count(*) FROM runs") == [(0,)]
    assert run_cli(["merge", "a.db", "b.db", "--out", "ab.db"], tmp_path, cli_env()).returncode == 0  # 1 error of 3
    assert run_cli(["merge", "c.db", "d.db", "--out", "cd.db"], tmp_path, cli_env()).returncode == 4


IN_FLIGHT = """
import pathlib, time, uuid

HERE = pathlib.Path(__file__).parent

def generate(input, **options):
    calls = HERE / "in_flight"
    calls.mkdir(exist_ok=True)
    me = calls / uuid.uuid4().hex
    me.touch()
    time.sleep(0.3)
    with open(HERE / "seen.txt", "a") as out:
        out.write(f"{len(list(calls.iterdir()))}\\n")
    me.unlink()
    return "answer " + input
"""


@pytest.mark.parametrize(("concurrency", "workers"), [(1, 3), (5, 4)])
def test_workers_keep_to_the_runs_concurrency(tmp_path: Path, concurrency: int, workers: int) -> None:
    """``concurrency: 1`` (an agent that must not be called twice at once) played with --workers 3 had 3 calls in
    flight (each worker played ceil(1 / 3) = 1 at a time); concurrency 5 over 4 workers had 8. The run's concurrency
    bounds the conversations in flight in all its workers."""
    data = "".join(f"  - {{id: i{n}, input: q{n}}}\n" for n in range(16))
    write_project(tmp_path, agent=IN_FLIGHT, dataset=f"target: agent:generate\nconcurrency: {concurrency}\n"
                                                      "gates: [{includes: answer}]\ndata:\n" + data)
    done = run_cli(["run", "ds.yaml", "--db", "runs.db", "--workers", str(workers), "-q"], tmp_path, cli_env())
    assert done.returncode == 0, done.stderr
    seen = [int(line) for line in (tmp_path / "seen.txt").read_text().split()]
    assert len(seen) == 16
    assert max(seen) <= concurrency, seen


TWO_TARGETS = """
def generate(input, **options):
    return "answer " + input

def other(input, **options):
    return "answer from other " + input
"""

API_SCRIPT = """
import sys
import evalcli
from evalcli.run import RunOptions
from evalcli.store import Store

dataset = evalcli.load_dataset("ds.yaml", target="agent:other")  # another target than the file's, as --target gives
result = evalcli.run_evals(dataset, store=Store("runs.db"), options=RunOptions(workers=int(sys.argv[1])))
print(result.summary.verdict)
"""


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_dataset_loaded_with_another_target_plays_it_in_workers(tmp_path: Path, workers: str) -> None:
    """``load_dataset(path, target=...)`` then ``run_evals`` with workers: each worker loaded the file's own target,
    and the run failed with 'ds.yaml changed while the run started its workers' (nothing had changed). The workers
    play the target the dataset was loaded with, as one process does."""
    data = "".join(f"  - {{id: i{n}, input: q{n}}}\n" for n in range(6))
    write_project(tmp_path, agent=TWO_TARGETS,
                  dataset="target: agent:generate\ngates: [{includes: answer}]\ndata:\n" + data)
    (tmp_path / "script.py").write_text(API_SCRIPT, encoding="utf-8")
    done = subprocess.run([sys.executable, "script.py", workers], cwd=tmp_path, env=cli_env(), capture_output=True,
                          text=True, timeout=SUBPROCESS_TIMEOUT)
    assert done.returncode == 0 and "passed" in done.stdout, done.stderr
    assert query(tmp_path / "runs.db", "SELECT target FROM runs") == [("agent:other",)]
    outputs = [row[0] for row in query(tmp_path / "runs.db", "SELECT output FROM turns")]
    assert len(outputs) == 6 and all("answer from other" in output for output in outputs), outputs


def _shard_with(ids: list[str], count: int, wanted: int) -> str:
    """The first id of ``ids`` in shard ``wanted`` of ``count``."""
    from evalcli.dataset.select import shard_of

    return next(item_id for item_id in ids if shard_of(item_id, count) == wanted)


def test_merge_of_all_but_the_shard_that_failed_does_not_pass(tmp_path: Path) -> None:
    """docs/ci.md: 'let every shard finish and upload its database, and gate on the merge'. A shard job that died
    before uploading (its database never made) leaves `merge shard-*.db` the other two: the merged run covers two
    thirds of the dataset and exits 0, though the conversation that fails was in the missing shard."""
    ids = [f"i{n}" for n in range(12)]
    failing = _shard_with(ids, 3, 2)
    data = "".join(f"  - {{id: {i}, input: {'boom' if i == failing else 'q-' + i}}}\n" for i in ids)
    write_project(tmp_path, agent=ERRS, dataset="target: agent:generate\ngates: [{includes: answer}]\ndata:\n" + data)
    for shard in (1, 3):
        done = run_cli(["run", "ds.yaml", "-q", "--shard", f"{shard}/3", "--db", f"shard-{shard}.db"], tmp_path,
                       cli_env())
        assert done.returncode == 0, done.stderr
    merged = run_cli(["merge", "shard-1.db", "shard-3.db", "--out", "all.db"], tmp_path, cli_env())
    assert "2/3" in merged.stdout + merged.stderr  # it names the missing shard (it does)
    assert merged.returncode == 2, (merged.stdout, merged.stderr)
    assert "shard 2/3 of " in merged.stderr and "is missing: it holds conversations" in merged.stderr, merged.stderr
    assert "--shard 2/3 --db" in merged.stderr
    assert not (tmp_path / "all.db").exists()


def test_merge_without_the_shards_that_hold_no_conversation_is_the_whole_run(tmp_path: Path) -> None:
    # more shards than conversations: the empty ones store no run (docs/ci.md), so their databases are no loss
    ids = ["a", "b"]
    write_project(tmp_path, agent=ERRS, dataset="target: agent:generate\ngates: [{includes: answer}]\ndata:\n"
                  + "".join(f"  - {{id: {i}, input: q-{i}}}\n" for i in ids))
    from evalcli.dataset.select import shard_of

    held = sorted({shard_of(i, 5) for i in ids})
    for shard in held:
        done = run_cli(["run", "ds.yaml", "-q", "--shard", f"{shard}/5", "--db", f"shard-{shard}.db"], tmp_path,
                       cli_env())
        assert done.returncode == 0, done.stderr
    merged = run_cli(["merge", *[f"shard-{n}.db" for n in held], "--out", "all.db"], tmp_path, cli_env())
    assert merged.returncode == 0 and "missing" not in merged.stdout + merged.stderr, (merged.stdout, merged.stderr)


JUDGED = """
target: agent:generate
gates: [{includes: answer}]
scorers:
  - judge:
      criterion: The assistant answered.
      model: ${JUDGE_MODEL}
      api_base: {url}
data:
"""


def test_merge_refuses_shards_judged_by_another_model(tmp_path: Path) -> None:
    """docs/ci.md: 'merge refuses shards of different datasets or configurations, naming them'. The dataset names its
    judge through ${JUDGE_MODEL}; one shard job ran with another model in its environment (a CI variable set per
    job). The same file, another configuration: merged without a word, the judge's scores of two models averaged."""
    from tests.llm_server import LLMServer, verdict

    server = LLMServer().start()
    server.responder = lambda request: verdict(True)
    try:
        data = "".join(f"  - {{id: i{n}, input: q{n}}}\n" for n in range(8))
        write_project(tmp_path, agent=ERRS, dataset=JUDGED.replace("{url}", server.url) + data)
        for shard, model in ((1, "openai/judge-a"), (2, "openai/judge-b")):
            done = run_cli(["run", "ds.yaml", "-q", "--shard", f"{shard}/2", "--db", f"shard-{shard}.db"], tmp_path,
                           cli_env(JUDGE_MODEL=model, OPENAI_API_KEY="sk-test-not-a-real-key-0123456789"))
            assert done.returncode == 0, done.stderr
        assert {r.body["model"] for r in server.requests} == {"judge-a", "judge-b"}
    finally:
        server.stop()
    merged = run_cli(["merge", "shard-1.db", "shard-2.db", "--out", "all.db"], tmp_path, cli_env())
    assert merged.returncode == 2, (merged.stdout, merged.stderr)
    assert "resolved another configuration" in merged.stderr and ".model" in merged.stderr, merged.stderr
    assert not (tmp_path / "all.db").exists()


SLOW = """
import pathlib, time

HERE = pathlib.Path(__file__).parent

def generate(input, **options):
    with open(HERE / "calls.txt", "a") as out:
        out.write(input + "\\n")
    time.sleep(0.2)
    return "answer " + input if input != "q3" else "no"
"""


def test_show_of_a_run_whose_process_was_killed_says_it_did_not_finish(tmp_path: Path) -> None:
    """The run's process killed with SIGKILL (a CI job's hard timeout, the OOM killer) leaves its run 'running'.
    `show` of it said 'verdict: failed' and 'exit code 0', as if it had ended so; it says the run did not
    finish, has no exit code yet, and how to continue it."""
    data = "".join(f"  - {{id: i{n}, input: q{n}}}\n" for n in range(40))
    write_project(tmp_path, agent=SLOW, dataset="target: agent:generate\nconcurrency: 2\n"
                                                "gates: [{includes: answer}]\ndata:\n" + data)
    process = start_cli(["run", "ds.yaml", "--db", "runs.db", "--workers", "2", "-q"], tmp_path, cli_env())
    try:
        wait_for_lines(tmp_path / "calls.txt", 10)
    finally:
        process.kill()
        process.communicate(timeout=SUBPROCESS_TIMEOUT)
    (run_id, status), = query(tmp_path / "runs.db", "SELECT id, status FROM runs")
    assert status == "running"
    shown = run_cli(["show", run_id, "--db", "runs.db"], tmp_path, cli_env())
    assert shown.returncode == 0, shown.stderr
    assert "exit code 0" not in shown.stdout and "(exit 0)" not in shown.stdout, shown.stdout
    assert "NOT FINISHED" in shown.stdout and f"--resume {run_id}" in shown.stdout, shown.stdout


def test_resume_of_a_run_still_playing_is_refused(tmp_path: Path) -> None:
    """`--resume RUN` while RUN's own process still plays it (a second CI step, a user who saw it 'running' in
    `evalcli runs`): both processes played the conversations not yet stored, each agent call twice; and the run's
    llm_calls held the judge calls of both."""
    data = "".join(f"  - {{id: i{n}, input: q{n}}}\n" for n in range(40))
    write_project(tmp_path, agent=SLOW, dataset="target: agent:generate\nconcurrency: 2\n"
                                                "gates: [{includes: answer}]\ndata:\n" + data)
    process = start_cli(["run", "ds.yaml", "--db", "runs.db", "-q"], tmp_path, cli_env())
    try:
        wait_for_lines(tmp_path / "calls.txt", 4)
        (run_id,), = query(tmp_path / "runs.db", "SELECT id FROM runs")
        resumed = run_cli(["run", "ds.yaml", "--db", "runs.db", "-q", "--resume", run_id], tmp_path, cli_env())
    finally:
        process.communicate(timeout=SUBPROCESS_TIMEOUT)
    calls = (tmp_path / "calls.txt").read_text().split()
    assert len(calls) == len(set(calls)) == 40, sorted(calls)  # each conversation played once
    assert resumed.returncode == 2 and "running" in resumed.stderr, (resumed.stdout, resumed.stderr)
    assert f"process {process.pid}" in resumed.stderr or "is playing it now" in resumed.stderr, resumed.stderr
    assert not list(tmp_path.glob("runs.db.*.playing"))  # its lock's file goes with the run


def test_merge_refuses_a_shards_rerun_failed_run(tmp_path: Path) -> None:
    """A shard whose conversation failed is played again with --rerun-failed into its database (a CI retry of the
    failed ones). merge took that run, the latest, as the shard: its one conversation for the shard's several, a
    merged run short of the rest and not a word. It refuses it, naming the --run that merges the shard's whole run."""
    ids = [f"i{n}" for n in range(12)]
    failing = _shard_with(ids, 3, 1)
    data = "".join(f"  - {{id: {i}, input: {'boom' if i == failing else 'q-' + i}}}\n" for i in ids)
    write_project(tmp_path, agent=ERRS, dataset="target: agent:generate\ngates: [{includes: answer}]\ndata:\n" + data)
    for shard in (1, 2, 3):
        done = run_cli(["run", "ds.yaml", "-q", "--shard", f"{shard}/3", "--db", f"shard-{shard}.db"], tmp_path,
                       cli_env())
        assert done.returncode == (4 if shard == 1 else 0), done.stderr
    (first,), = query(tmp_path / "shard-1.db", "SELECT id FROM runs")
    again = run_cli(["run", "ds.yaml", "-q", "--shard", "1/3", "--db", "shard-1.db", "--rerun-failed", first], tmp_path,
                    cli_env())
    assert again.returncode == 4, again.stderr
    merged = run_cli(["merge", "shard-1.db", "shard-2.db", "shard-3.db", "--out", "all.db"], tmp_path, cli_env())
    assert merged.returncode == 2, (merged.stdout, merged.stderr)
    assert "--rerun-failed" in merged.stderr and "--run" in merged.stderr, merged.stderr
    runs = [first] + [query(tmp_path / f"shard-{n}.db", "SELECT id FROM runs")[0][0] for n in (2, 3)]
    whole = run_cli(["merge", "shard-1.db", "shard-2.db", "shard-3.db", "--out", "all.db",
                     *[arg for run in runs for arg in ("--run", run)]], tmp_path, cli_env())
    assert whole.returncode == 4, whole.stderr
    assert query(tmp_path / "all.db", "SELECT total_items, errors FROM runs") == [(12, 1)]


def test_merge_names_the_two_databases_that_hold_one_shard(tmp_path: Path) -> None:
    """Shard 1 played twice, into two databases (a retried CI job uploaded under another name): merge refuses the
    overlap, but named the last database given twice ('in both run X in shard-3.db and run X in shard-3.db'). It
    names the two that hold the conversation."""
    data = "".join(f"  - {{id: i{n}, input: q{n}}}\n" for n in range(12))
    write_project(tmp_path, agent=ERRS, dataset="target: agent:generate\ngates: [{includes: answer}]\ndata:\n" + data)
    for shard, db in ((1, "shard-1.db"), (1, "retry-1.db"), (2, "shard-2.db"), (3, "shard-3.db")):
        done = run_cli(["run", "ds.yaml", "-q", "--shard", f"{shard}/3", "--db", db], tmp_path, cli_env())
        assert done.returncode == 0, done.stderr
    merged = run_cli(["merge", "shard-1.db", "retry-1.db", "shard-2.db", "shard-3.db", "--out", "all.db"], tmp_path,
                     cli_env())
    assert merged.returncode == 2, (merged.stdout, merged.stderr)
    assert "in shard-1.db and run" in merged.stderr and "in retry-1.db" in merged.stderr, merged.stderr


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_hangup_interrupts_the_run_as_sigterm_does(tmp_path: Path, workers: str) -> None:
    """SIGHUP (the terminal closed, the SSH session dropped under a long run) ended the run's process at once: its
    run was left 'running' for ever, which docs/reliability.md says only SIGKILL does, and no line said how to resume.
    It interrupts the run as SIGTERM does: 'interrupted', exit 130, resumable."""
    data = "".join(f"  - {{id: i{n}, input: q{n}}}\n" for n in range(40))
    write_project(tmp_path, agent=SLOW, dataset="target: agent:generate\nconcurrency: 2\n"
                                                "gates: [{includes: answer}]\ndata:\n" + data)
    process = start_cli(["run", "ds.yaml", "--db", "runs.db", "--workers", workers, "-q"], tmp_path, cli_env())
    try:
        wait_for_lines(tmp_path / "calls.txt", 6)
        process.send_signal(signal.SIGHUP)
    finally:
        _, stderr = process.communicate(timeout=SUBPROCESS_TIMEOUT)
    assert process.returncode == 130, stderr
    (run_id, status, code), = query(tmp_path / "runs.db", "SELECT id, status, exit_code FROM runs")
    assert (status, code) == ("interrupted", 130)
    resumed = run_cli(["run", "ds.yaml", "--db", "runs.db", "--workers", workers, "-q", "--resume", run_id], tmp_path,
                      cli_env())
    assert resumed.returncode == 1, resumed.stderr  # q3 fails its gate
    assert query(tmp_path / "runs.db", "SELECT status, completed_items FROM runs") == [("completed", 40)]


def test_a_hangup_leaves_a_run_under_nohup_alone(tmp_path: Path) -> None:
    """Under ``nohup`` (SIGHUP ignored) a hangup is not an interrupt: the run plays every conversation."""
    data = "".join(f"  - {{id: i{n}, input: q{n}}}\n" for n in range(12))
    write_project(tmp_path, agent=SLOW, dataset="target: agent:generate\nconcurrency: 2\n"
                                                "gates: [{includes: answer}]\ndata:\n" + data)
    process = subprocess.Popen([sys.executable, "-m", "evalcli", "run", "ds.yaml", "--db", "runs.db", "--workers", "2",
                                "-q"], cwd=tmp_path, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    try:
        wait_for_lines(tmp_path / "calls.txt", 2)
        process.send_signal(signal.SIGHUP)
    finally:
        _, stderr = process.communicate(timeout=SUBPROCESS_TIMEOUT)
    assert process.returncode == 1, stderr  # q3 fails its gate
    assert query(tmp_path / "runs.db", "SELECT status, completed_items FROM runs") == [("completed", 12)]


@pytest.mark.parametrize("command", [["run", "ds.yaml", "--workers", "2", "--db"], ["run", "ds.yaml", "--db"],
                                     ["merge", "shard.db", "--out"]])
def test_an_in_memory_database_is_refused_before_anything_runs(tmp_path: Path, command: list[str]) -> None:
    """`--db :memory:` (SQLite's name, tried to keep nothing) ended the run as an internal error, exit 70, 'a bug in
    evalcli' (the run's writer opened a database of its own); `merge --out :memory:` said the merged run was
    'written to :memory:', exit 0, and it was gone. Both are refused (exit 2) before anything runs."""
    data = "".join(f"  - {{id: i{n}, input: q{n}}}\n" for n in range(4))
    write_project(tmp_path, agent=ERRS, dataset="target: agent:generate\ngates: [{includes: answer}]\ndata:\n" + data)
    assert run_cli(["run", "ds.yaml", "-q", "--shard", "1/1", "--db", "shard.db"], tmp_path, cli_env()).returncode == 0
    done = run_cli([*command, ":memory:", *(["-q"] if command[0] == "run" else [])], tmp_path, cli_env())
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert ":memory:" in done.stderr and "Traceback" not in done.stderr and "bug in evalcli" not in done.stderr
    assert not (tmp_path / "calls.txt").exists()


def test_merge_of_shards_of_several_datasets_covers_every_one(tmp_path: Path) -> None:
    """docs/ci.md's first workflow: `evalcli run datasets/*.yaml --shard I/N --db evals-I.db`, then `evalcli merge
    evals-*.db --out all.db` 'to get the same scores and verdict an unsharded run gives'. The merge wrote the run of
    the last dataset played only; the first dataset, whose conversation errored, was not merged, and the merge
    exited 0."""
    (tmp_path / "datasets").mkdir()
    write_project(tmp_path, agent=ERRS, dataset="target: agent:generate\ngates: [{includes: answer}]\ndata:\n" +
                  "".join(f"  - {{id: a{n}, input: {'boom' if n == 3 else f'qa{n}'}}}\n" for n in range(6)),
                  dataset_name="datasets/a.yaml")
    (tmp_path / "datasets" / "b.yaml").write_text("target: agent:generate\ngates: [{includes: answer}]\ndata:\n" +
                                                  "".join(f"  - {{id: b{n}, input: qb{n}}}\n" for n in range(6)))
    for shard in (1, 2):
        done = run_cli(["run", "datasets/a.yaml", "datasets/b.yaml", "-q", "--shard", f"{shard}/2", "--db",
                        f"evals-{shard}.db"], tmp_path, cli_env())
        assert done.returncode in (0, 4), done.stderr
    merged = run_cli(["merge", "evals-1.db", "evals-2.db", "--out", "all.db"], tmp_path, cli_env())
    assert merged.returncode == 4, (merged.stdout, merged.stderr)  # a3 errored: the unsharded runs exit 4
    runs = query(tmp_path / "all.db", "SELECT dataset, total_items, errors, exit_code FROM runs ORDER BY dataset")
    assert [(r[0].rsplit("/", 1)[-1], *r[1:]) for r in runs] == [("a.yaml", 6, 1, 4), ("b.yaml", 6, 0, 0)], runs
