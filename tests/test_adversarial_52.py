"""Adversarial tests of round 52's changes (issue 49): ``evalcli view`` stopped by a signal writing its labels back
into the database file (``view/server.py``, ``store/connection.py: write_back``), content digests made at the first
read (``dataset/contents.py``), one JSON encoder made once (``secret_references.c_encoder``) and the report's
modules imported on the progress thread (``cli/progress.py``).

The first tests show defects (they failed on the build they were written against, 9143378); the rest are cases that
hold and are kept so that they keep holding. Everything is real: YAML files, CLI subprocesses, SQLite files, signals,
loopback HTTP."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from .conftest import cli_base_env, run_cli
from .reliability_helpers import SUBPROCESS_TIMEOUT

AGENT = '''
def agent(input, **kw):
    return "hello " + input
'''
DATASET = """
target: agent:agent
gates: [{includes: hello}]
data:
  - {id: a, input: hi there}
  - {id: b, input: again}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "d.yaml").write_text(DATASET)
    assert run_cli(["run", "d.yaml"], tmp_path).code == 0
    return tmp_path


def _run_id(db: Path) -> str:
    with sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True) as conn:
        return str(conn.execute("SELECT id FROM runs ORDER BY id DESC").fetchone()[0])


@contextmanager
def _view(db: Path, prefix: tuple[str, ...] = ()) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``evalcli view --db DB --port 0`` started, with its address once printed; killed if a test leaves it running."""
    process = subprocess.Popen([*prefix, sys.executable, "-m", "evalcli", "view", "--db", db.name, "--port", "0"],
                               cwd=db.parent, env={**cli_base_env(), "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if " at http://" not in line:
            _, err = process.communicate(timeout=SUBPROCESS_TIMEOUT)
            raise AssertionError(f"evalcli view did not start: {line!r} {err!r}")
        yield process, line.split(" at ", 1)[1].split(";")[0]
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=SUBPROCESS_TIMEOUT)


def _stop(process: subprocess.Popen[str], sig: int) -> tuple[int, str]:
    process.send_signal(sig)
    _, err = process.communicate(timeout=SUBPROCESS_TIMEOUT)
    return process.returncode, err


def _label(url: str, run_id: str, value: str = "fail") -> None:
    request = urllib.request.Request(url + f"api/runs/{run_id}/conversations/0/labels", method="POST",
                                     data=json.dumps({"value": value}).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=SUBPROCESS_TIMEOUT) as answer:
        assert answer.status == 200


def _labels_in_the_file_alone(db: Path) -> int:
    copy = db.parent / "copy.db"
    shutil.copyfile(db, copy)  # the file only, as a CI artifact or a `cp` takes it
    with sqlite3.connect(copy) as conn:
        return int(conn.execute("SELECT count(*) FROM labels").fetchone()[0])


def _as_a_plain_user() -> tuple[str, ...]:
    """A command prefix under which file permissions hold: as root, drop the capabilities that override them."""
    if os.geteuid() != 0:
        return ()
    setpriv = shutil.which("setpriv")
    assert setpriv, "setpriv (util-linux) is needed to test read-only files as root"
    drop = "-dac_override,-dac_read_search"
    return (setpriv, f"--inh-caps={drop}", f"--bounding-set={drop}", "--")


# --- defects -------------------------------------------------------------------------------------------------------


def test_a_closed_terminal_sighup_stops_the_view_with_its_labels_written_back(project: Path) -> None:
    """DEFECT (view/server.py ``serve``): the code and tests/test_view.py say SIGTERM covers "a closed terminal", but
    closing the terminal a view runs in sends SIGHUP, which killed the view at once: a label saved while another
    program read the file stayed in the WAL, and a copy of evalcli.db alone had no label (as before the change)."""
    db = project / "evalcli.db"
    run_id = _run_id(db)
    reader = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None)
    try:
        reader.execute("BEGIN")  # a read under way while the label is saved
        reader.execute("SELECT count(*) FROM runs").fetchone()
        with _view(db) as (process, url):
            _label(url, run_id)
            reader.close()
            code, err = _stop(process, signal.SIGHUP)
    finally:
        reader.close()
    assert (code, err) == (0, "")
    assert _labels_in_the_file_alone(db) == 1


def test_sigterm_as_soon_as_the_address_is_printed_stops_the_view_as_ctrl_c_does(project: Path) -> None:
    """DEFECT (view/server.py ``serve``): the SIGTERM handler was set after the address was printed, so a supervisor
    that waits for that line and then stops the view (a CI step, a test harness) killed it with the default SIGTERM
    (exit -15, nothing written back) every time here, where Ctrl-C at that moment stops it cleanly (exit 0)."""
    db = project / "evalcli.db"
    for _ in range(3):
        with _view(db) as (process, _url):
            assert _stop(process, signal.SIGTERM) == (0, "")


def test_a_view_stopped_after_its_database_was_moved_makes_no_empty_database(project: Path) -> None:
    """DEFECT (store/connection.py ``write_back``): it opened the path with ``sqlite3.connect``, which makes the
    file; a database moved or deleted while the view ran (an artifact uploaded, a clean-up) left an empty 0-byte
    evalcli.db behind once the view stopped, where the old build made none."""
    db = project / "evalcli.db"
    with _view(db) as (process, url):
        with urllib.request.urlopen(url + "api/runs", timeout=SUBPROCESS_TIMEOUT) as answer:
            assert answer.status == 200
        db.rename(project / "moved.db")
        assert _stop(process, signal.SIGINT) == (0, "")
    assert not db.exists()


def test_a_view_of_a_database_in_a_read_only_folder_works_and_stops_cleanly(project: Path) -> None:
    """DEFECT, older than this round (view/data.py ``check_database``): a database in a read-only folder without its
    ``-wal`` and ``-shm`` (a CI artifact unpacked read-only) was refused: "is not an evalcli database: attempt to write
    a readonly database" (a WAL file opened ``mode=ro`` needs its ``-shm``), though every other reader of the view
    (``store/connection.py: open_readonly``) reads it as immutable."""
    with sqlite3.connect(project / "evalcli.db") as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    folder = project / "artifact"
    folder.mkdir()
    shutil.copyfile(project / "evalcli.db", folder / "evalcli.db")
    db = folder / "evalcli.db"
    run_id = _run_id(project / "evalcli.db")
    folder.chmod(0o555)
    try:
        with _view(db, _as_a_plain_user()) as (process, url):
            with urllib.request.urlopen(url + f"api/runs/{run_id}/conversations", timeout=SUBPROCESS_TIMEOUT) as page:
                assert page.status == 200 and '"a"' in page.read().decode()
            assert _stop(process, signal.SIGTERM) == (0, "")
        assert sorted(p.name for p in folder.iterdir()) == ["evalcli.db"]  # nothing made beside it
    finally:
        folder.chmod(0o755)
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_a_label_on_a_read_only_database_is_a_clear_error_not_a_server_error(project: Path) -> None:
    """DEFECT, older than this round (store/labels.py ``add_label``): a label saved on a database the view cannot
    write (a read-only file, or one in a read-only folder) answered "500 Internal Server Error" with SQLite's
    traceback on the view's stderr, where every other refusal is a 400 with what was wrong."""
    db = project / "evalcli.db"
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    run_id = _run_id(db)
    db.chmod(0o444)
    try:
        with _view(db, _as_a_plain_user()) as (process, url):
            with pytest.raises(urllib.error.HTTPError) as refused:
                _label(url, run_id)
            assert refused.value.code == 400
            body = json.loads(refused.value.read())
            assert "read-only" in body["error"] or "readonly" in body["error"], body
            assert _stop(process, signal.SIGTERM) == (0, "")
    finally:
        db.chmod(0o644)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM labels").fetchone() == (0,)
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


# --- holds ---------------------------------------------------------------------------------------------------------


def test_a_view_started_with_nohup_outlives_its_terminal_and_still_stops_on_sigterm(project: Path) -> None:
    """SIGHUP stops the view only where it is not ignored: ``nohup evalcli view`` keeps serving once its terminal
    is closed, and SIGTERM still stops it cleanly."""
    db = project / "evalcli.db"
    with _view(db, ("nohup",)) as (process, url):
        process.send_signal(signal.SIGHUP)
        with urllib.request.urlopen(url + "api/runs", timeout=SUBPROCESS_TIMEOUT) as answer:
            assert answer.status == 200
        assert process.poll() is None
        code, err = _stop(process, signal.SIGTERM)
    assert code == 0 and "Traceback" not in err


def test_labels_saved_while_a_run_writes_the_same_file_all_reach_the_file_and_the_run_loses_nothing(
        tmp_path: Path) -> None:
    """A live run writing the database, a view saving labels on its conversations and stopped by SIGTERM while the
    run goes on: no "database is locked", every conversation and label stored, the file alone holds the labels."""
    (tmp_path / "slow.py").write_text("import time\n\ndef agent(input, **kw):\n    time.sleep(0.05)\n"
                                      "    return 'echo ' + 'x' * 2000 + input\n")
    rows = "".join(f"  - {{id: c{i}, input: q{i}}}\n" for i in range(120))
    (tmp_path / "d.yaml").write_text(f"target: slow:agent\ngates: [{{includes: echo}}]\ndata:\n{rows}")
    db = tmp_path / "evalcli.db"
    run = subprocess.Popen([sys.executable, "-m", "evalcli", "run", "d.yaml", "--quiet", "--workers", "2"],
                           cwd=tmp_path, env=cli_base_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while run.poll() is None:  # until the run has stored a conversation
            try:
                with sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True) as conn:
                    if conn.execute("SELECT count(*) FROM items").fetchone()[0]:
                        break
            except sqlite3.Error:
                pass
        run_id = _run_id(db)
        with _view(db) as (process, url):
            for _ in range(10):
                _label(url, run_id, "pass")
            assert _stop(process, signal.SIGTERM) == (0, "")
        _, err = run.communicate(timeout=SUBPROCESS_TIMEOUT)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate(timeout=SUBPROCESS_TIMEOUT)
    assert run.returncode == 0, err
    assert "locked" not in err
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM items").fetchone() == (120,)
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert _labels_in_the_file_alone(db) == 10
