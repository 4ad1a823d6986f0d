"""Trying to break ``evalcli view`` as its users would (docs/view.md): the real CLI's server in a process of its own,
a database made by a real ``evalcli run``, real HTTP to loopback. A conversation's index that is a digit but not a
plain number, a date filter that is not a date, and the token's ``Authorization`` header as HTTP writes it."""

from __future__ import annotations

import sqlite3
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.view_helpers import ViewServer, view_server

AGENT = '''
def agent(input, **kw):
    return "hello " + input
'''
DATASET = """
target: agent:agent
scorers:
  - scorer: {includes: hello}
    id: says-hello
data:
  - {id: a, input: hi there}
  - {id: b, input: again}
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("adv62")
    (folder / "agent.py").write_text(AGENT)
    (folder / "d.yaml").write_text(DATASET)
    assert run_cli(["run", "d.yaml"], folder).code == 0
    return folder


@pytest.fixture(scope="module")
def view(project: Path) -> Iterator[ViewServer]:
    with view_server(project / "evalcli.db") as served:
        yield served


def _run_id(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        return str(conn.execute("SELECT id FROM runs ORDER BY id DESC").fetchone()[0])


def _labels(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM labels").fetchone()[0])


@pytest.mark.parametrize("index", ["%C2%B2", "%D9%A3", "99999999999999999999999"])
def test_an_index_that_is_not_a_plain_number_is_a_400_not_a_server_error(project: Path, view: ViewServer,
                                                                          index: str) -> None:
    """``²`` and ``٣`` are digits to ``str.isdigit`` (``int('²')`` raises), and a number past SQLite's 64 bits
    overflowed in the query: each was a 500 with a traceback in the server's output."""
    run = _run_id(project / "evalcli.db")
    status, body = view.get(f"/api/runs/{run}/conversations/{index}")
    assert status == 400, (status, body)
    assert "whole number" in str(body)
    before = _labels(project / "evalcli.db")
    status, body = view.post(f"/api/runs/{run}/conversations/{index}/labels", {"value": "pass"})
    assert status == 400, (status, body)
    assert _labels(project / "evalcli.db") == before  # nothing written
    assert not any("Traceback" in line for line in view.output), "".join(view.output)


@pytest.mark.parametrize("field", ["since", "until"])
def test_a_date_filter_that_is_not_a_date_is_refused_not_an_empty_list(view: ViewServer, field: str) -> None:
    """``since=yesterday`` compared as text with ``started_at`` listed no run at all, silently (or, for ``until``,
    every run): a bad filter must say what is wrong."""
    status, body = view.get(f"/api/runs?{field}=yesterday")
    assert status == 400, (status, body)
    assert field in body["error"] and "2026-05-01" in body["hint"]
    for good in ("2020", "2020-05", "2020-05-01", "2020-05-01T08:00"):
        status, body = view.get(f"/api/runs?since={good}")
        assert status == 200 and body["total"] == 1, (good, body)


def _status(url: str, headers: dict[str, str]) -> int:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_the_bearer_scheme_is_read_as_http_writes_it(project: Path) -> None:
    """RFC 9110: the scheme of ``Authorization`` is case-insensitive (``bearer TOKEN`` was refused), and a header
    without the ``Bearer`` scheme is not the documented form (the bare token was let in)."""
    with view_server(project / "evalcli.db", "--host", "127.0.0.1", "--token", "s3cr3t") as served:
        url = served.url.rstrip("/") + "/api/runs"
        assert _status(url, {"Authorization": "Bearer s3cr3t"}) == 200
        assert _status(url, {"Authorization": "bearer s3cr3t"}) == 200
        assert _status(url, {"Authorization": "BEARER  s3cr3t"}) == 200
        assert _status(url, {"Authorization": "s3cr3t"}) == 401
        assert _status(url, {"Authorization": "Basic s3cr3t"}) == 401
        assert _status(url, {}) == 401


def test_a_label_while_another_program_writes_says_busy_and_try_again_not_make_it_writable(project: Path,
                                                                                             view: ViewServer) -> None:
    """A run holding the write lock past the label's 10 s wait was reported as "cannot be written ... make the file
    and its folder writable" (400): the file is writable, only busy; it is a 503 that says to label again."""
    import threading

    db = project / "evalcli.db"
    holding, release = threading.Event(), threading.Event()

    def writer() -> None:
        conn = sqlite3.connect(db, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        holding.set()
        release.wait(30)
        conn.execute("ROLLBACK")
        conn.close()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert holding.wait(10)
        before = _labels(db)
        status, body = view.post(f"/api/runs/{_run_id(db)}/conversations/0/labels", {"value": "pass"})
    finally:
        release.set()
        thread.join()
    assert status == 503, (status, body)
    assert "busy" in body["error"] and "writable" not in body["hint"] and "again" in body["hint"], body
    assert _labels(db) == before
    status, body = view.post(f"/api/runs/{_run_id(db)}/conversations/0/labels", {"value": "pass"})
    assert status == 200 and _labels(db) == before + 1


def test_side_by_side_of_an_edited_dataset_marks_the_changed_conversation(tmp_path: Path) -> None:
    """An item whose id was kept and content edited is *changed* (docs/identity.md, ``compare`` prints ``changed
    (...): b``): the view listed it as two unmarked rows both named ``b``, as if one had been removed and another
    added. Pairing is by identity, not position: the reordered ``a`` and the id-less item still pair."""
    (tmp_path / "agent.py").write_text(AGENT)
    first = DATASET.replace("  - {id: b, input: again}", "  - {id: b, input: again}\n  - {input: no id}")
    (tmp_path / "d.yaml").write_text(first)
    assert run_cli(["run", "d.yaml"], tmp_path).code == 0
    (tmp_path / "d.yaml").write_text(DATASET.split("data:")[0] + "data:\n  - {input: new first}\n"
                                     "  - {input: no id}\n  - {id: b, input: edited}\n  - {id: a, input: hi there}\n")
    assert run_cli(["run", "d.yaml"], tmp_path).code == 0
    with sqlite3.connect(tmp_path / "evalcli.db") as conn:
        a, b = (r[0] for r in conn.execute("SELECT id FROM runs ORDER BY id"))
    with view_server(tmp_path / "evalcli.db") as served:
        status, body = served.get(f"/api/compare/{a}/{b}")
    assert status == 200, body
    pairs = {(p["name"], p["a"] and p["a"]["index"], p["b"] and p["b"]["index"]): p.get("changed") for p in body["pairs"]}
    assert pairs == {("a", 0, 3): False, ("b (changed)", 1, None): True, ("b (changed)", None, 2): True,
                     ('"no id"', 2, 1): False, ('"new first"', None, 0): False}, pairs


def test_a_request_too_long_to_parse_is_a_400_without_a_traceback_in_the_terminal(project: Path) -> None:
    """A search of 10,000 characters (or any malformed request: a port scanner, a typo in curl) was answered 400 by
    aiohttp but printed "Error handling request" and a traceback where the user runs ``evalcli view``."""
    with view_server(project / "evalcli.db") as served:
        status, body = served.get(f"/api/runs/{_run_id(project / 'evalcli.db')}/conversations?q={'x' * 10_000}")
        assert status == 400, body
        status, body = served.get("/api/runs")
        assert status == 200
        output = "".join(served.output)
    assert "Traceback" not in output and "Error handling request" not in output, output


@pytest.mark.parametrize("sort", ["score:nope", "score:"])
def test_sorting_by_a_score_the_run_lacks_is_refused_not_ignored(project: Path, view: ViewServer, sort: str) -> None:
    """``sort=score:nope`` answered 200 in dataset order, as if sorted: a typo in a script's query went unseen."""
    status, body = view.get(f"/api/runs/{_run_id(project / 'evalcli.db')}/conversations?sort={sort}")
    assert status == 400, (status, body)
    assert "says-hello" in body["hint"], body
    status, body = view.get(f"/api/runs/{_run_id(project / 'evalcli.db')}/conversations?sort=score:says-hello")
    assert status == 200 and body["total"] == 2


@pytest.mark.parametrize("body", [{"value": "pass", "note": {"x": 1}}, {"value": "pass", "note": ["a"]},
                                  {"value": "pass", "note": 7}])
def test_a_label_whose_note_is_not_text_is_refused(project: Path, view: ViewServer,
                                                             body: dict[str, object]) -> None:
    """A note ``{"x": 1}`` was stored as the Python text ``{'x': 1}`` (and exported so): a script's mistake kept."""
    before = _labels(project / "evalcli.db")
    status, answer = view.post(f"/api/runs/{_run_id(project / 'evalcli.db')}/conversations/0/labels", body)
    assert status == 400, (status, answer)
    assert _labels(project / "evalcli.db") == before


def test_the_side_by_side_page_prints_no_stray_null(project: Path) -> None:
    """In a real browser: the comparison page's figures are a list with ``null`` for a line that does not apply (no
    status changed, no conversation left out), and ``replaceChildren`` wrote each as the text "null"."""
    from tests.browser import chromium, chromium_missing
    from tests.view_helpers import open_view

    if chromium_missing() is not None:
        pytest.skip(chromium_missing() or "")
    run = _run_id(project / "evalcli.db")
    with view_server(project / "evalcli.db") as served, chromium() as browser:
        with open_view(browser, served.url, f"#/compare/{run}/{run}") as page:
            page.wait("compare")
            lines = [line.strip() for line in page.page.inner_text("#main").splitlines()]
            assert "null" not in lines and "undefined" not in lines, lines
            assert page.errors == []


def test_a_run_in_progress_says_how_many_conversations_it_selected(tmp_path: Path) -> None:
    """``/api/runs/RUN/progress`` while ``evalcli run`` plays 6 conversations answered ``selected`` equal to the
    conversations stored so far (``4 of 4``), not 6: a script polling it cannot tell how far the run has got."""
    import json
    import subprocess
    import sys
    import time

    from tests.conftest import cli_base_env
    from tests.reliability_helpers import SUBPROCESS_TIMEOUT

    (tmp_path / "agent.py").write_text("import time\ndef agent(input, **kw):\n    time.sleep(0.6)\n"
                                       "    return 'hello ' + input\n")
    (tmp_path / "d.yaml").write_text(DATASET.split("data:")[0] + "data:\n"
                                     + "".join(f"  - {{id: c{i}, input: x{i}}}\n" for i in range(6)))
    assert run_cli(["run", "d.yaml", "--limit", "1"], tmp_path).code == 0  # a database to serve
    with view_server(tmp_path / "evalcli.db") as served:
        running = subprocess.Popen([sys.executable, "-m", "evalcli", "run", "d.yaml"], cwd=tmp_path,
                                   env=cli_base_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        seen: list[tuple[int, int]] = []
        try:
            while running.poll() is None:  # the run ends by itself (six conversations of 0.6 s)
                runs = served.get("/api/runs?size=1")[1]["runs"]
                status, body = served.get(f"/api/runs/{runs[0]['id']}/progress")
                if status == 200 and body["status"] == "running" and body["stored"] > 0:
                    seen.append((body["stored"], body["selected"]))
                time.sleep(0.2)
        finally:
            running.wait(SUBPROCESS_TIMEOUT)
    assert seen, "never saw the run in progress"
    assert all(selected == 6 for _, selected in seen), json.dumps(seen)
