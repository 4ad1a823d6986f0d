"""Issue 49's start-up work (docs/performance.md "Start-up and finish") tried as users would: a new run's
fingerprint made by the writer thread beside the first turns, the plain items' fast path, the lazy imports. Each
test runs the real CLI."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from tests.conftest import CliResult

SELF_INTERRUPTING = '''
import os, signal

def agent(message, **kw):
    if message == "q 100":  # the user presses Ctrl-C once a hundred conversations have played
        os.kill(os.getpid(), signal.SIGINT)
    return "the weather in Brooklyn"


def touch(info):
    info.metadata["seen_by_setup"] = True  # a per-conversation setup noting something in the item's metadata
    return {}
'''


def test_a_setup_writing_into_metadata_does_not_stop_the_run_from_resuming(workdir: Path,
                                                                         cli: Callable[..., CliResult]) -> None:
    """A setup (docs/targets/frameworks.md) is handed the item's ``metadata`` mapping; one that writes into it (the
    items without metadata share one mapping) wrote into what the writer thread was still walking to make the run's
    fingerprint, now made beside the first turns instead of before them: the fingerprint kept metadata the dataset
    never had, and ``--resume`` of the interrupted run was refused ("data[N].metadata.seen_by_setup (removed)",
    every conversation listed) although nothing had changed. Before (096f73f) the run resumed."""
    (workdir / "selfstop.py").write_text(SELF_INTERRUPTING)
    (workdir / "d.yaml").write_text(
        "target: selfstop:agent\ntarget_options: {setup: selfstop:touch}\nscorers: [{includes: Brooklyn}]\n"
        "concurrency: 1\ndata:\n" + "".join(f"  - {{id: c{i}, input: 'q {i}'}}\n" for i in range(3000)))
    first = cli("run", "d.yaml", "--db", "e.db", "-q")
    assert first.code == 130, first.stderr
    with sqlite3.connect(workdir / "e.db") as db:
        (run_id, status), = db.execute("SELECT id, status FROM runs").fetchall()
    assert status == "interrupted"
    resumed = cli("run", "d.yaml", "--db", "e.db", "-q", "--resume", run_id)
    assert resumed.code == 0, resumed.stderr[:600]
    with sqlite3.connect(workdir / "e.db") as db:
        assert db.execute("SELECT count(*), count(DISTINCT item_index) FROM items").fetchone() == (3000, 3000)
        assert db.execute("SELECT id, status FROM runs").fetchall() == [(run_id, "completed")]
