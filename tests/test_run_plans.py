"""Several datasets and targets from Python, as ``evalcli run`` runs them (docs/python-api.md): ``plan_runs`` checks
and plans every run once, ``run_planned`` makes them with the same reports; the CLI is a thin layer over the two."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from evalcli.dataset import Selection
from evalcli.errors import DatasetError, ExitCode, UsageError
from evalcli.evaluate import Reporter, plan_runs, run_planned
from evalcli.run import RunOptions, RunPlan
from evalcli.store import Comparison
from tests.conftest import AGENTS, CliResult

# a module name of its own: the library runs import it into the test process (``agents`` is the OpenAI Agents SDK)
FIRST = """
target: plan_agents:tool_agent
gates:
  - called_tool: get_weather
scorers:
  - scorer: {includes: sunny}
    threshold: 1
data:
  - id: one
    input: What is the weather?
  - id: two
    turns:
      - input: And tomorrow?
        gates: [{called_tool: get_weather}]
"""
SECOND = """
target: plan_agents:echo
scorers: [{includes: said}]
data:
  - id: hello
    input: hello
  - id: again
    inputs: [hi, there]
"""
TARGETS = ["plan_agents:tool_agent", "plan_agents:echo"]
RUN_COLUMNS = "dataset_path, target, status, verdict, exit_code, total_items, completed_items, errors"


@pytest.fixture
def project(workdir: Path, write: Callable[..., Path], monkeypatch: pytest.MonkeyPatch) -> Path:
    (workdir / "plan_agents.py").write_text(AGENTS)
    write("a.yaml", FIRST)
    write("b.yaml", SECOND)
    (workdir / "out").mkdir()
    monkeypatch.chdir(workdir)
    return workdir


def stored(db: Path) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    """The runs' rows and their conversations' rows, without ids and times, in the order they were made."""
    conn = sqlite3.connect(db)
    runs = conn.execute(f"SELECT id, {RUN_COLUMNS} FROM runs ORDER BY rowid").fetchall()
    order = {row[0]: n for n, row in enumerate(runs)}
    items = conn.execute("SELECT run_id, item_index, item_id, status, passed FROM items").fetchall()
    conn.close()
    return [row[1:] for row in runs], sorted((order[row[0]], *row[1:]) for row in items)


def junit_files(folder: Path, prefix: str) -> dict[str, str]:
    """Each JUnit file's name after the prefix, and its text with run ids and durations made comparable."""
    found = {}
    for path in sorted(folder.glob(f"{prefix}.*.xml")):
        text = re.sub(r'name="run_id" value="[^"]+"', 'name="run_id" value="RUN"', path.read_text())
        found[path.name.removeprefix(prefix)] = re.sub(r'time="[0-9.]+"', 'time="T"', text)
    return found


def test_the_library_runs_several_datasets_and_targets_as_the_cli_does(project: Path,
                                                                      cli: Callable[..., CliResult]) -> None:
    command = cli("run", "a.yaml", "b.yaml", "--target", TARGETS[0], "--target", TARGETS[1], "--junit",
                  "out/cli.xml", "--db", "cli.db")
    plans = plan_runs(["a.yaml", "b.yaml"], RunOptions(), targets=TARGETS, db="lib.db", junit="out/lib.xml")
    assert [(Path(p.dataset.path).name, p.target) for p in plans.runs] == [
        ("a.yaml", TARGETS[0]), ("a.yaml", TARGETS[1]), ("b.yaml", TARGETS[0]), ("b.yaml", TARGETS[1])]
    runs = run_planned(plans)
    assert command.code == runs.exit_code == ExitCode.FAILED, command.stderr  # echo calls no tool: a gate misses
    assert stored(project / "lib.db") == stored(project / "cli.db")
    assert len(stored(project / "cli.db")[0]) == 4
    cli_files, lib_files = junit_files(project / "out", "cli"), junit_files(project / "out", "lib")
    assert sorted(lib_files) == [".a.plan_agents-echo.xml", ".a.plan_agents-tool_agent.xml",
                                 ".b.plan_agents-echo.xml", ".b.plan_agents-tool_agent.xml"]
    assert lib_files == cli_files
    assert [c.columns[0].run.target for c in runs.comparisons] == [TARGETS[0], TARGETS[0]]  # one per dataset
    assert "Comparison of 2 runs of a.yaml" in command.stdout and "Comparison of 2 runs of b.yaml" in command.stdout


class Shown(Reporter):
    """A caller's own display: what it was told, in order."""

    def __init__(self) -> None:
        self.told: list[str] = []

    def reported(self, plan: RunPlan, result: object) -> None:
        self.told.append(f"reported {Path(plan.dataset.path).name} {plan.target}")

    def compared(self, comparison: Comparison, run_ids: list[str]) -> None:
        self.told.append(f"compared {len(run_ids)}")


def test_a_reporter_is_told_each_run_then_each_comparison(project: Path) -> None:
    shown = Shown()
    runs = run_planned(plan_runs(["a.yaml"], targets=TARGETS, db="e.db"), reporter=shown)
    assert shown.told == [f"reported a.yaml {TARGETS[0]}", f"reported a.yaml {TARGETS[1]}", "compared 2"]
    assert [r.target for r in runs.results] == TARGETS


def test_every_check_is_made_before_anything_runs_or_is_stored(project: Path, write: Callable[..., Path]) -> None:
    with pytest.raises(UsageError, match="--resume continues one run: name exactly one dataset"):
        plan_runs(["a.yaml", "b.yaml"], RunOptions(resume="latest"), db="e.db")
    with pytest.raises(UsageError, match="--target plan_agents:echo is given twice"):
        plan_runs(["a.yaml"], targets=[TARGETS[1], TARGETS[1]], db="e.db")
    with pytest.raises(UsageError, match=re.escape("--junit nowhere/j.xml: the folder nowhere does not exist")):
        plan_runs(["a.yaml"], junit="nowhere/j.xml", db="e.db")
    write("bad.yaml", "target: plan_agents:echo\ndata: [{input: hi}]\n")
    with pytest.raises(DatasetError, match="At least one scorer or gate must be provided"):
        plan_runs(["a.yaml", "bad.yaml"], db="e.db")
    with pytest.raises(UsageError, match="--filter 'nothing-here' matches no conversation"):
        plan_runs(["a.yaml", "b.yaml"], RunOptions(selection=Selection("nothing-here")))
    assert not (project / "e.db").exists()


def test_a_resume_is_planned_with_the_runs_own_options(project: Path) -> None:
    first = run_planned(plan_runs(["b.yaml"], RunOptions(repeat=2), db="e.db")).results[0]
    with pytest.raises(UsageError, match=r"resuming run \w+ with other options: no --repeat"):
        plan_runs(["b.yaml"], RunOptions(resume=first.run_id), db="e.db")
    plans = plan_runs(["b.yaml"], RunOptions(resume=first.run_id), db="e.db", given={})
    assert plans.runs[0].options.repeat == 2 and plans.runs[0].run_id == first.run_id
    assert set(plans.runs[0].kept) == {0, 1} and plans.runs[0].to_run == []


def test_evalcli_run_checks_a_resume_and_the_llm_settings_once(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks are made where the run is planned, never again by the runner (the CLI did each one twice)."""
    import evalcli.llm.preflight as preflight
    from evalcli.cli.app import app
    from evalcli.store import Store

    def invoke(*args: str) -> object:
        try:
            return app(["run", "b.yaml", "--db", "e.db", "--quiet", *args], standalone_mode=False)
        except SystemExit as exit_:
            return exit_.code

    assert invoke("--limit", "1") == 0
    calls: dict[str, int] = {"settings": 0, "resume": 0}
    settings_problems, stored_options = preflight.settings_problems, Store.options

    def counted_settings(*args: object, **kwargs: object) -> object:
        calls["settings"] += 1
        return settings_problems(*args, **kwargs)  # type: ignore[arg-type]

    def counted_resume(store: Store, run_id: str) -> object:
        calls["resume"] += 1  # the stored run's options, read once by each check of a resume
        return stored_options(store, run_id)

    monkeypatch.setattr(preflight, "settings_problems", counted_settings)
    monkeypatch.setattr(Store, "options", counted_resume)
    assert invoke("--resume", "latest") == 0
    assert calls == {"settings": 1, "resume": 1}


def test_the_same_runs_from_inside_an_event_loop(project: Path) -> None:
    import asyncio

    from evalcli.evaluate import arun_planned

    runs = asyncio.run(arun_planned(plan_runs(["b.yaml"], db="e.db", junit="out/b.xml")))
    assert runs.exit_code == ExitCode.OK and [r.completed for r in runs.results] == [2]
    assert '<testsuite name="b.yaml"' in (project / "out" / "b.xml").read_text()
