"""``evalcli view`` and human review as demanding users try them (docs/view.md): labels that name nothing the run
is scored by, secrets typed where a scorer id goes, bodies that are not JSON, page numbers past any run. Each
through the real CLI and real HTTP to the real server."""

from __future__ import annotations

import json
import sqlite3
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.reliability_helpers import SUBPROCESS_TIMEOUT
from tests.view_helpers import view_server

SECRET = "Zq8TopSecretValue42"
AGENT = '''
def agent(input, **kw):
    return "hello " + input
'''
DATASET = """
target: agent:agent
gates:
  - excludes: FORBIDDEN
scorers:
  - scorer: {includes: hello}
    id: says-hello
data:
  - {id: a, input: hi there}
  - {id: b, input: FORBIDDEN word}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "d.yaml").write_text(DATASET)
    assert run_cli(["run", "d.yaml"], tmp_path).code == 1
    return tmp_path


def _run_id(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        return str(conn.execute("SELECT id FROM runs ORDER BY id DESC").fetchone()[0])


def _raw_post(url: str, body: bytes) -> int:
    request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_a_label_names_the_conversation_or_a_gate_or_scorer_of_the_run_and_stores_no_secret(project: Path) -> None:
    db = project / "evalcli.db"
    run = _run_id(db)
    with view_server(db, env={"MY_API_KEY": SECRET}) as server:
        path = f"/api/runs/{run}/conversations/0/labels"
        status, answer = server.post(path, {"scorer": f"says-hello {SECRET}", "value": "pass", "note": "x"})
        assert status == 400 and "not a top-level gate or scorer" in answer["error"]
        assert SECRET not in json.dumps(answer)
        status, answer = server.post(path, {"scorer": "no-such-scorer", "value": 0.5})
        assert status == 400, answer
        assert server.post(path, {"scorer": "says-hello", "value": "fail", "note": f"token {SECRET}"})[0] == 200
        assert server.post(path, {"scorer": "", "value": "pass"})[0] == 200
    with sqlite3.connect(db) as conn:
        stored = conn.execute("SELECT scorer_id, note FROM labels ORDER BY id").fetchall()
    assert stored == [("says-hello", "token [redacted]"), ("", None)]
    exported = run_cli(["labels", "export", "--db", str(db)], project)
    assert exported.code == 0 and SECRET not in exported.stdout and "no-such-scorer" not in exported.stdout


def test_a_label_body_that_is_not_json_is_a_400_not_a_crash(project: Path) -> None:
    db = project / "evalcli.db"
    with view_server(db) as server:
        url = server.url.rstrip("/") + f"/api/runs/{_run_id(db)}/conversations/0/labels"
        assert _raw_post(url, b"{bad json") == 400
        assert _raw_post(url, b"") == 400
        assert _raw_post(url, b'"pass"') == 400


def test_a_page_number_past_any_run_is_an_empty_page_not_a_crash(project: Path) -> None:
    db = project / "evalcli.db"
    run = _run_id(db)
    with view_server(db) as server:
        for path in (f"/api/runs/{run}/conversations?page=99999999999999999999", "/api/runs?page=99999999999999999999",
                     f"/api/runs/{run}/conversations?page=-99999999999999999999&size=99999999999999999999"):
            status, answer = server.get(path)
            assert status == 200, (path, answer)
        status, answer = server.get(f"/api/runs/{run}/conversations?page=99999999999999999999")
        assert answer["rows"] == [] and answer["total"] == 2


def test_labels_export_of_a_database_that_is_not_evalcli_s_is_a_clear_error(tmp_path: Path) -> None:
    other = tmp_path / "app.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE users (name TEXT)")
    before = other.read_bytes()
    for command in (["labels", "export", "--db", str(other)], ["runs", "--db", str(other)]):
        result = run_cli(command, tmp_path)
        assert result.code == 2, (command, result.stdout)
        assert "not an evalcli database" in result.stderr and "Traceback" not in result.stderr
    assert other.read_bytes() == before


CALIBRATED = """
target: agent:agent
scorers:
  - scorer: {includes: there}
    id: there
data:
  - {id: a, input: INPUT_A}
  - {id: b, input: hi there}
"""


def test_a_label_feeds_calibrate_until_its_conversation_is_edited(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "c.yaml").write_text(CALIBRATED.replace("INPUT_A", "hi there"))
    assert run_cli(["run", "c.yaml"], tmp_path).code == 0
    db = tmp_path / "evalcli.db"
    with view_server(db) as server:
        for index in (0, 1):
            assert server.post(f"/api/runs/{_run_id(db)}/conversations/{index}/labels",
                               {"scorer": "there", "value": "fail"})[0] == 200
    same = run_cli(["calibrate", "c.yaml", "--labels-from-db"], tmp_path)
    assert same.code in (0, 1) and "a  labelled fail" in same.stdout and "b  labelled fail" in same.stdout, same.stdout
    (tmp_path / "c.yaml").write_text(CALIBRATED.replace("INPUT_A", "over there now"))
    edited = run_cli(["calibrate", "c.yaml", "--labels-from-db"], tmp_path)
    assert "b  labelled fail" in edited.stdout, edited.stdout
    assert "a  labelled fail" not in edited.stdout, edited.stdout


@pytest.mark.parametrize("token", ["", "   "])
def test_a_blank_token_does_not_open_the_server_to_other_hosts(project: Path, token: str) -> None:
    result = run_cli(["view", "--db", str(project / "evalcli.db"), "--host", "0.0.0.0", "--port", "0", "--token", token],
                     project, timeout=SUBPROCESS_TIMEOUT)
    assert result.code == 2 and "give --token" in result.stderr, result.stdout
