"""``evalcli view`` without a browser: the real server's answers to what is wrong (a file that is not evalcli's, an
older or newer database, a host without a token), its guards (token, loopback host, JSON-only writes), secrets
redacted, labels exported, and pages that answer in under a second on a run of 100,000 conversations."""

from __future__ import annotations

import shutil
import sqlite3
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import run_cli
from tests.view_helpers import view_server

AGENT = '''
def agent(input, **kw):
    if "boom" in input:
        raise ValueError("kaboom")
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
  - {id: c, input: boom}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "d.yaml").write_text(DATASET)
    assert run_cli(["run", "d.yaml"], tmp_path).code == 1  # b misses the gate, c errored
    return tmp_path


def _run_id(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        return str(conn.execute("SELECT id FROM runs ORDER BY id DESC").fetchone()[0])


def test_a_file_that_is_not_an_evalcli_database_is_a_clear_error(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    result = run_cli(["view", "--db", str(other)], tmp_path)
    assert result.code == 2
    assert "other.db is not an evalcli database: it has no 'runs' and 'migrations' tables" in result.stderr
    assert "Traceback" not in result.stderr
    with sqlite3.connect(other) as conn:  # and it was left as it was
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")] == ["notes"]
    (tmp_path / "text.db").write_text("just some text, not SQLite at all\n" * 20)
    result = run_cli(["view", "--db", "text.db"], tmp_path)
    assert result.code == 2 and "text.db is not an evalcli database: file is not a database" in result.stderr
    result = run_cli(["view", "--db", "missing.db"], tmp_path)
    assert result.code == 2 and "no database at missing.db" in result.stderr


def test_an_older_database_is_migrated_a_newer_one_refused(project: Path) -> None:
    db = project / "evalcli.db"
    with sqlite3.connect(db) as conn:  # as an evalcli before labels left it
        conn.execute("DROP TABLE labels")  # and with it its indexes; then the items' indexes of the same migration
        conn.execute("DROP INDEX items_run_view")
        conn.execute("DROP INDEX items_run_repeats")
        conn.execute("DELETE FROM migrations WHERE name = '009_labels'")
    with view_server(db) as view:
        assert any(f"migrated {db} to this evalcli (009_labels)" in line for line in view.output), view.output
        status, body = view.post(f"/api/runs/{_run_id(db)}/conversations/0/labels", {"value": "pass"})
        assert status == 200 and body["score"] == 1.0
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO migrations (name, applied_at) VALUES ('999_from_the_future', 'later')")
    result = run_cli(["view", "--db", str(db)], project)
    assert result.code == 2 and "was written by a newer evalcli (its schema has 999_from_the_future)" in result.stderr


def test_another_host_needs_a_token_and_every_request_carries_it(project: Path) -> None:
    result = run_cli(["view", "--host", "0.0.0.0"], project)
    assert result.code == 2 and "--host 0.0.0.0 serves the history beyond this machine: give --token" in result.stderr
    token = "view-token-7f3a9c2e51"
    with view_server(project / "evalcli.db", "--host", "0.0.0.0", "--token", token) as view:
        url = view.url.replace("0.0.0.0", "127.0.0.1")
        view.url = url
        assert view.get("/api/runs")[0] == 401
        assert view.get("/")[0] == 401
        assert view.get(f"/api/runs?token={token}")[0] == 200
        assert view.get("/api/runs", {"Authorization": f"Bearer {token}"})[0] == 200
        assert view.get("/api/runs", {"Authorization": "Bearer wrong"})[0] == 401
        import urllib.request

        with urllib.request.urlopen(url + f"?token={token}", timeout=30) as page:  # the page keeps it in a cookie
            cookie = page.headers["Set-Cookie"].split(";")[0]
            assert "HttpOnly" in page.headers["Set-Cookie"] and "SameSite=Strict" in page.headers["Set-Cookie"]
        assert view.get("/api/runs", {"Cookie": cookie})[0] == 200
        assert view.get("/static/view.js", {"Cookie": cookie})[0] == 200
        assert token not in "".join(view.output)


def test_on_loopback_only_requests_to_a_loopback_host_and_writes_only_as_json(project: Path) -> None:
    with view_server(project / "evalcli.db") as view:
        status, body = view.get("/api/runs", {"Host": "attacker.example:80"})  # DNS rebinding
        assert status == 403 and "only requests to 127.0.0.1 or localhost" in body
        assert view.get("/api/runs", {"Host": "localhost"})[0] == 200
        for host in ("[::1]", "[::1]:8765", "LOCALHOST:1", "127.0.0.2"):  # IPv6 without a port was refused
            assert view.get("/api/runs", {"Host": host})[0] == 200, host
        for host in ("[::1].attacker.example", "localhost.attacker.example:80", "0.0.0.0"):
            assert view.get("/api/runs", {"Host": host})[0] == 403, host
        run_id = _run_id(project / "evalcli.db")
        status, body = view.post(f"/api/runs/{run_id}/conversations/0/labels", {"value": 1.5})
        assert status == 400 and body["error"] == "label 1.5 is not pass, fail or a score from 0 to 1"
        status, body = view.post(f"/api/runs/{run_id}/conversations/99/labels", {"value": "pass"})
        assert status == 400 and body["error"] == f"run {run_id} has no conversation 99"
        import urllib.error
        import urllib.request

        form = urllib.request.Request(view.url + f"api/runs/{run_id}/conversations/0/labels", data=b"value=pass",
                                      method="POST", headers={"Content-Type": "application/x-www-form-urlencoded"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(form, timeout=30)
        assert refused.value.code == 415
        assert view.get("/api/runs/nope")[0] == 404
        assert view.get(f"/api/runs/{run_id}/conversations?sort=bogus")[1]["error"].startswith("sort 'bogus' is not")


def test_secrets_are_redacted_in_every_answer(project: Path) -> None:
    secret = "sk-live-abcdef0123456789zz"
    db = project / "evalcli.db"
    with sqlite3.connect(db) as conn:  # a file written by something that did not redact (an older evalcli)
        conn.execute("UPDATE turns SET output = ? WHERE item_id = 'a'",
                     [f'[{{"role": "assistant", "content": "the key is {secret}"}}]'])
        conn.execute("UPDATE items SET input = ? WHERE item_id = 'a'", [f"hi {secret}"])
    run_id = _run_id(db)
    with view_server(db, env={"PAYMENTS_API_KEY": secret}) as view:
        status, body = view.get(f"/api/runs/{run_id}/conversations/0")
        assert status == 200 and secret not in str(body)
        assert "the key is [redacted]" in str(body)
        status, page = view.get(f"/api/runs/{run_id}/conversations")
        assert status == 200 and secret not in str(page)
        status, saved = view.post(f"/api/runs/{run_id}/conversations/0/labels", {"value": "fail", "note": f"leaks {secret}"})
        assert status == 200 and saved["note"] == "leaks [redacted]"
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT note FROM labels").fetchall() == [("leaks [redacted]",)]


def test_labels_export_writes_the_labels_a_dataset_item_takes(project: Path) -> None:
    db = project / "evalcli.db"
    run_id = _run_id(db)
    with view_server(db, "--reviewer", "bob") as view:
        assert view.post(f"/api/runs/{run_id}/conversations/0/labels", {"scorer": "says-hello", "value": 0.7})[0] == 200
        assert view.post(f"/api/runs/{run_id}/conversations/0/labels", {"scorer": "says-hello", "value": "fail",
                                                                          "note": "on second thought"})[0] == 200
        assert view.post(f"/api/runs/{run_id}/conversations/1/labels", {"value": "pass"})[0] == 200
        assert view.post(f"/api/runs/{run_id}/conversations/2/labels", {"scorer": "says-hello", "value": 0.25})[0] == 200
    result = run_cli(["labels", "export", "--db", str(db), "--out", "labels.yaml"], project)
    assert result.code == 0, result.stderr
    text = (project / "labels.yaml").read_text()
    assert text.startswith("# labels made in evalcli view")
    (entry,) = yaml.safe_load(text)["labels"]
    assert entry["dataset"].endswith("d.yaml")
    conversations = {c["id"]: c for c in entry["conversations"]}
    assert conversations["a"]["labels"] == {"says-hello": "fail"}  # the newest label wins
    by = conversations["a"]["by"]["says-hello"]
    assert by.startswith("bob ") and by.endswith(": on second thought")
    assert conversations["b"] == {"id": "b", "identity": "id:b", "review": "pass", "by": conversations["b"]["by"]}
    assert conversations["c"]["labels"] == {"says-hello": 0.25}
    assert run_cli(["labels", "export", "--db", str(db), "--dataset", "other.yaml"], project).stdout.endswith("labels: []\n")


def test_a_label_is_in_the_database_file_itself_once_view_stops(project: Path) -> None:
    """A label saved while another program reads the file stays in SQLite's WAL beside it; stopped by SIGTERM (a
    CI job, a terminal closed), the view writes it into the file, so a copy of evalcli.db alone holds every label."""
    db = project / "evalcli.db"
    run_id = _run_id(db)
    reader = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None)
    try:
        reader.execute("BEGIN")  # a read under way: the label cannot be written into the file before it ends
        reader.execute("SELECT count(*) FROM runs").fetchone()
        with view_server(db, "--reviewer", "bob") as view:
            assert view.post(f"/api/runs/{run_id}/conversations/0/labels", {"value": "fail"})[0] == 200
            reader.close()
    finally:
        reader.close()
    copy = project / "copy.db"
    shutil.copyfile(db, copy)  # the file only, as a CI artifact or a `cp` takes it
    with sqlite3.connect(copy) as conn:
        assert conn.execute("SELECT item_id, score FROM labels").fetchall() == [("a", 0.0)]


def _grow(db: Path, conversations: int) -> str:
    """A run of ``conversations`` conversations made of the latest real run's rows, repeated (ids made unique)."""
    template = _run_id(db)
    big = template[:-4] + "BIG0"
    with sqlite3.connect(db) as conn:
        count = conn.execute("SELECT COUNT(*) FROM items WHERE run_id = ?", [template]).fetchone()[0]

        def columns(table: str) -> list[str]:
            return [r[1] for r in conn.execute(f"PRAGMA table_info({table})") if r[1] != "id"]

        seq = f"WITH RECURSIVE seq(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM seq WHERE n < {conversations - 1}) "
        run_columns = columns("runs")
        conn.execute(f"INSERT INTO runs (id, {', '.join(run_columns)}) SELECT ?, {', '.join(run_columns)} "
                     "FROM runs WHERE id = ?", [big, template])
        renamed = {"run_id": "?", "item_index": "seq.n", "item_id": "t.item_id || '-' || seq.n",
                   "identity": "'id:' || t.item_id || '-' || seq.n"}
        for table in ("items", "turns", "scores", "llm_calls"):
            names = columns(table)
            chosen = [renamed.get(name, f"t.{name}") for name in names]
            conn.execute(f"{seq}INSERT INTO {table} ({', '.join(names)}) SELECT {', '.join(chosen)} FROM seq JOIN "
                         f"{table} t ON t.run_id = ? AND t.item_index = seq.n % {count}", [big, template])
        conn.execute("UPDATE runs SET total_items = ?, completed_items = ? WHERE id = ?", [conversations, conversations, big])
    return big


@pytest.mark.slow
@pytest.mark.timing
def test_pages_answer_in_under_a_second_on_100000_conversations(project: Path) -> None:
    db = project / "evalcli.db"
    big = _grow(db, 100_000)
    with view_server(db) as view:
        paths = ["/api/runs", f"/api/runs/{big}", f"/api/runs/{big}/conversations",
                 f"/api/runs/{big}/conversations?page=1500", f"/api/runs/{big}/conversations?sort=score:says-hello&desc=1",
                 f"/api/runs/{big}/conversations?sort=cost", f"/api/runs/{big}/conversations?status=passed&page=20",
                 f"/api/runs/{big}/conversations?q=b-10000", f"/api/runs/{big}/conversations/99999",
                 f"/api/runs/{big}/progress"]
        timings = {}
        for path in paths:
            view.get(path)  # the first read warms the page cache, as a person's first click does
            began = time.perf_counter()
            status, body = view.get(path)
            timings[path] = time.perf_counter() - began
            assert status == 200, (path, body)
        print({path: f"{seconds * 1000:.0f} ms" for path, seconds in timings.items()})
        assert all(seconds < 1.0 for seconds in timings.values()), timings
        status, page = view.get(f"/api/runs/{big}/conversations")
        assert page["total"] == 100_000 and [r["status"] for r in page["rows"][:1]] == ["error"]
        assert len(page["rows"]) == 50
        assert view.get(f"/api/runs/{big}/conversations?q=b-10000")[1]["total"] == 1
        assert view.get(f"/api/runs/{big}/conversations/99999")[1]["transcript"]["id"].endswith("-99999")


def test_failures_first_and_the_filters_read_only_the_view_index(tmp_path: Path) -> None:
    """The order ``failures`` sorts by is the expression migration 009 indexed, written the same: SQLite walks the index
    in order (no sort of the whole run) and never reads the rows."""
    from evalcli.store import Store
    from evalcli.store.browse import ConversationQuery

    store = Store(tmp_path / "evalcli.db")
    for query in (ConversationQuery(), ConversationQuery(status="failed", search="x"), ConversationQuery("id")):
        where, params = query.where()
        order, order_params = query.order()
        plan = " ".join(str(row[3]) for row in store.conn.execute(
            f"EXPLAIN QUERY PLAN SELECT item_index FROM items WHERE run_id = ?{where} ORDER BY {order} LIMIT 50",
            ["r", *params, *order_params]))
        assert "USING COVERING INDEX items_run_view" in plan, plan
        if query.sort == "failures":
            assert "TEMP B-TREE" not in plan, plan
    store.close()


@pytest.fixture(scope="module")
def listed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of 23 conversations of every status, with durations and scores that tie."""
    folder = tmp_path_factory.mktemp("pages")
    (folder / "agent.py").write_text(AGENT)
    rows = "".join(f"  - {{id: n{n:02d}, input: {['hi', 'FORBIDDEN', 'boom'][n % 3]} {n}}}\n" for n in range(23))
    (folder / "d.yaml").write_text(DATASET.split("data:")[0] + "data:\n" + rows)
    assert run_cli(["run", "d.yaml"], folder).code == 1
    return folder / "evalcli.db"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sort=st.sampled_from(["failures", "index", "id", "duration", "cost", "stability", "score:says-hello",
                             "score:excludes(FORBIDDEN)"]),
       descending=st.booleans(), status=st.sampled_from([None, "error", "failed", "passed"]),
       search=st.sampled_from([None, "", "n1", "boom", "%", "_"]), size=st.integers(1, 30))
def test_pages_cover_a_run_once_in_one_order(listed: Path, sort: str, descending: bool, status: str | None,
                                             search: str | None, size: int) -> None:
    """Whatever the order, filter and page size, the pages of a run's conversations, read one after another, hold
    each matching conversation exactly once, in the order the first page of one big page gives."""
    from evalcli.store import Store
    from evalcli.store.browse import ConversationQuery, conversations

    store = Store(listed, readonly=True)
    try:
        run_id = store.runs(1)[0]["id"]
        query = ConversationQuery(sort, descending, status, search)
        whole = conversations(store, run_id, query, 1, 500)
        paged: list[int] = []
        for page in range(1, whole.total // size + 2):
            paged += [item.index for item in conversations(store, run_id, query, page, size).items]
        assert paged == [item.index for item in whole.items]
        assert len(paged) == whole.total == len(set(paged))
        if sort == "failures":
            rank = [0 if i.status != "ok" else 1 if not i.passed else 2 for i in whole.items]
            assert rank == sorted(rank, reverse=descending)
        if search:
            assert all(search in i.id or search in i.turns[0].input for i in whole.items)
    finally:
        store.close()
