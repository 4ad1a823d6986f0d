"""The seams are declared, each rule stated once: how a suggested command names the database (``db_option``), the
events a run reports (a base class of no-op methods), the exit codes (one enum)."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from evalcli.dbname import DEFAULT_DATABASE, db_option
from evalcli.errors import ExitCode
from evalcli.results import ItemResult
from evalcli.run import Events, RunOptions, run_evals
from tests.conftest import CliResult
from tests.test_compare import DATASET

paths = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=40)


@given(paths)
def test_a_suggested_command_names_any_database_but_the_default_as_a_shell_reads_it(path: str) -> None:
    words = shlex.split(f"evalcli show RUN ITEM{db_option(path)}")
    assert words[4:] == ([] if path == DEFAULT_DATABASE else ["--db", path])


def test_the_compare_command_suggested_after_several_targets_can_be_pasted(write: Callable[..., Path],
                                                                          cli: Callable[..., CliResult]) -> None:
    write("d.yaml", DATASET)
    (write("d.yaml", DATASET).parent / "my runs").mkdir()
    result = cli("run", "d.yaml", "--target", "agents:tool_agent", "--target", "agents:echo", "--db", "my runs/e.db")
    assert result.code == 1, result.stderr
    line = next(line for line in result.stdout.splitlines() if "evalcli compare" in line)
    words = shlex.split(line.split(": ", 1)[1])
    assert words[:2] == ["evalcli", "compare"] and words[-2:] == ["--db", "my runs/e.db"], line


class Counted(Events):
    """A watcher that overrides one event: every other one is the base class's, doing nothing."""

    def __init__(self) -> None:
        self.done: list[str] = []

    def item_done(self, result: ItemResult) -> None:
        self.done.append(result.id)


def test_a_watcher_overrides_only_what_it_needs(workdir: Path, write: Callable[..., Path]) -> None:
    path = write("d.yaml", "target: agents:echo\nscorers: [{includes: said}]\ndata: [{input: a}, {input: b}]\n")
    events = Counted()
    result = run_evals(path, options=RunOptions(concurrency=1), events=events)
    assert result.exit_code == ExitCode.OK and sorted(events.done) == ["0", "1"]


def test_an_interrupted_run_is_stored_with_the_enums_code(workdir: Path, write: Callable[..., Path]) -> None:
    from evalcli.store import Store

    path = write("d.yaml", "target: agents:echo\nscorers: [{includes: said}]\ndata: [{input: a}]\n")
    with_store = Store(workdir / "e.db")
    try:
        result = run_evals(path, store=with_store)
        with_store.mark_interrupted(result.run_id)
        row = with_store.conn.execute("SELECT status, exit_code FROM runs").fetchone()
    finally:
        with_store.close()
    assert tuple(row) == ("interrupted", ExitCode.INTERRUPTED)
