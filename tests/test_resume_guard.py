"""A resumed run adds up to the run it continues, or is refused (exit 2, naming what differs): the same
configuration (scorers as resolved from scorers.yaml, target options, environment), the same run options
(restored, never taken from a new command line), and --rerun-failed only of the same dataset."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.conftest import CliResult

AGENT = '''
import os, pathlib

def flaky(input, **options):
    """Raises for inputs with 'boom' while the file 'broken' exists; records every call in calls.txt."""
    here = pathlib.Path(__file__).parent
    with open(here / "calls.txt", "a") as f:
        f.write(input + "\\n")
    if "boom" in input and (here / "broken").exists():
        raise RuntimeError("the agent is broken today")
    return f"hello, {input} " + ("temp=" + str(options["temperature"]) if "temperature" in options else "")
'''

DATASET = """
target: flaky:flaky
target_options:
  temperature: ${AGENT_TEMPERATURE:-0}
gates: [{includes: hello}]
scorers:
  - scorer: has-hello
    threshold: 1
  - scorer: {includes: "never said"}
    threshold: 1
data:
  - {id: a, input: first}
  - {id: b, input: second}
  - {id: c, input: third boom}
"""


def calls(folder: Path) -> list[str]:
    path = folder / "calls.txt"
    return path.read_text().splitlines() if path.exists() else []


def interrupted_run(workdir: Path, write: Callable[..., Path], cli: Callable[..., CliResult],
                    *flags: str) -> tuple[str, CliResult]:
    """A run whose conversation 'c' errored (so --resume has something to do); returns its id."""
    write("flaky.py", AGENT)
    write("ds.yaml", DATASET)
    write("scorers.yaml", "scorers:\n  has-hello: {includes: hello}\n")
    (workdir / "broken").write_text("")
    first = cli("run", "ds.yaml", "--json", "-", *flags)
    assert first.code == 4, first.stderr
    (workdir / "broken").unlink()
    return first.json["run_id"], first


def run_rows(result: CliResult) -> list[tuple[str, str, int]]:
    with result.db() as conn:
        return [tuple(r) for r in conn.execute("SELECT id, status, exit_code FROM runs ORDER BY id")]


def test_resume_refuses_a_scorer_changed_in_the_registry(workdir: Path, write: Callable[..., Path],
                                                         cli: Callable[..., CliResult]) -> None:
    run_id, _ = interrupted_run(workdir, write, cli)
    before = calls(workdir)
    write("scorers.yaml", "scorers:\n  has-hello: {excludes: hello}\n")
    refused = cli("run", "ds.yaml", "--resume", run_id)
    assert refused.code == 2, refused.stderr
    assert "scorers.has-hello.kind (changed)" in refused.stderr and "Traceback" not in refused.stderr
    assert calls(workdir) == before  # nothing ran
    assert run_rows(refused) == [(run_id, "completed", 4)]
    # the configuration the run began with resumes it
    write("scorers.yaml", "scorers:\n  has-hello: {includes: hello}\n")
    resumed = cli("run", "ds.yaml", "--resume", run_id, "--json", "-")
    assert resumed.code == 0, resumed.stderr
    assert resumed.json["scores"]["has-hello"] == 1.0 and resumed.json["summary"]["errors"] == 0
    with resumed.db() as conn:
        spec = conn.execute("SELECT spec FROM scorers WHERE run_id = ? AND scorer_id = 'has-hello'", [run_id]).fetchone()
    assert json.loads(spec[0]) == {"kind": "includes", "args": {"value": "hello", "ignore_case": True}}


def test_resume_refuses_target_options_changed_by_the_environment(workdir: Path, write: Callable[..., Path],
                                                                 cli: Callable[..., CliResult]) -> None:
    run_id, _ = interrupted_run(workdir, write, cli)
    refused = cli("run", "ds.yaml", "--resume", run_id, env={"AGENT_TEMPERATURE": "1"})
    assert refused.code == 2 and "target_options.temperature (changed)" in refused.stderr, refused.stderr
    # a registry entry the dataset does not use changes nothing
    write("other.yaml", "scorers:\n  has-hello: {includes: hello}\n  unused: {includes: x}\n")
    resumed = cli("run", "ds.yaml", "--resume", run_id, "--scorers", "other.yaml")
    assert resumed.code == 0, resumed.stderr


def test_resume_restores_the_runs_options_and_refuses_conflicting_flags(workdir: Path, write: Callable[..., Path],
                                                                       cli: Callable[..., CliResult]) -> None:
    run_id, first = interrupted_run(workdir, write, cli, "--repeat", "2", "--strict", "--filter", "^(a|c)$")
    assert [i["id"] for i in first.json["items"]] == ["a", "c"]
    for flags, named in ((["--repeat", "3"], "--repeat 3 (the run has --repeat 2)"),
                         (["--limit", "1"], "--limit 1 (the run has no --limit)"),
                         (["--filter", "b"], "--filter 'b' (the run has --filter '^(a|c)$')"),
                         (["--max-errors", "2"], "--max-errors 2 (the run has no --max-errors)"),
                         (["--shard", "1/2"], "--shard 1/2 (the run has no --shard)")):
        refused = cli("run", "ds.yaml", "--resume", run_id, *flags)
        assert refused.code == 2 and named in refused.stderr, (flags, refused.stderr)
    before = calls(workdir)
    resumed = cli("run", "ds.yaml", "--resume", run_id, "--filter", "^(a|c)$", "--json", "-")
    # only 'c' runs again, played twice (--repeat 2 restored); the verdict is scored and --strict makes it exit 3
    assert calls(workdir)[len(before):] == ["third boom", "third boom"]
    assert resumed.json["verdict"] == "scored" and resumed.code == 3, resumed.stderr
    assert [i["id"] for i in resumed.json["items"]] == ["a", "c"] and resumed.json["repeat"] == 2


def test_rerun_failed_refuses_a_run_of_another_dataset(workdir: Path, write: Callable[..., Path],
                                                       cli: Callable[..., CliResult]) -> None:
    run_id, _ = interrupted_run(workdir, write, cli)
    write("other.yaml", "target: flaky:flaky\ngates: [{includes: hello}]\ndata:\n  - {id: c, input: other c}\n")
    before = calls(workdir)
    refused = cli("run", "other.yaml", "--rerun-failed", run_id)
    assert refused.code == 2, refused.stderr
    assert f"run {run_id} is of dataset" in refused.stderr and "ds.yaml" in refused.stderr
    assert calls(workdir) == before and len(run_rows(refused)) == 1
    again = cli("run", "ds.yaml", "--rerun-failed", run_id, "--json", "-")
    assert again.code == 0 and [i["id"] for i in again.json["items"]] == ["c"], again.stderr
