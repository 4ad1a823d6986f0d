"""Trying to break ``evalcli view`` and the reports a second time, as their users would (docs/view.md,
docs/html-report.md, docs/ci.md): databases made by real ``evalcli run``s of a callable in a temp folder, the real
CLI's server in a process of its own, real HTTP to loopback. A conversation a limit stopped, a run whose process was
killed mid-run, and the JSON API's answers to addresses and queries it does not know."""

from __future__ import annotations

import html
import json
import re
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import cli_base_env, run_cli
from tests.reliability_helpers import SUBPROCESS_TIMEOUT
from tests.view_helpers import ViewServer, view_server

AGENT = '''
def agent(input, **kw):
    if "boom" in input:
        raise RuntimeError("kaboom")
    if "bad" in input:
        return "nope"
    return "hello " + input
'''
DATASET = """
target: agent:agent
target_has_memory: true
gates:
  - scorer: {includes: hello}
    id: says-hello
scorers:
  - scorer: {includes: there}
    id: says-there
    threshold: 0.3
data:
  - {id: a, input: hi there}
  - {id: b, input: bad}
  - {id: c, input: boom}
  - id: e
    turns: [{input: x there}, {input: y}, {input: z}]
    limits: {turns: 1}
  - {id: f, input: hello again}
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run of every kind of conversation: passed (a, f), failed a gate (b), errored (c), limited (e)."""
    folder = tmp_path_factory.mktemp("adv75")
    (folder / "agent.py").write_text(AGENT)
    (folder / "d.yaml").write_text(DATASET)
    result = run_cli(["run", "d.yaml", "--json", "out.json", "--junit", "junit.xml", "--markdown", "summary.md",
                      "--html", "run.html"], folder)
    assert result.code == 1, result.stderr
    (folder / "terminal.txt").write_text(result.stdout)
    assert run_cli(["report", "latest", "--html", "report.html"], folder).code == 0
    return folder


@pytest.fixture(scope="module")
def view(project: Path) -> Iterator[ViewServer]:
    with view_server(project / "evalcli.db") as served:
        yield served


def _run_id(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        return str(conn.execute("SELECT id FROM runs ORDER BY id DESC").fetchone()[0])


def _text(page: str) -> str:
    """What a reader of an HTML page sees, without its script and style."""
    page = re.sub(r"<(script|style)\b.*?</\1>", "", page, flags=re.S)
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)))


def test_a_limited_conversation_reads_limited_in_every_report_and_the_view(project: Path, view: ViewServer) -> None:
    """docs/budgets.md: a limited conversation is shown as ``limited``, never as ``error`` (the word for a target or
    scorer that failed), though it counts as errored. ``show`` and the JSON said ``limited``; the HTML report's list,
    the view's list and transcript said ``error``, and the terminal's, Markdown's and the view's "why" said ``error:
    limited by turns ...``. The counts stay those of the errored (the filters, the verdict's words)."""
    data = json.loads((project / "out.json").read_text())
    assert {i["id"]: i["status"] for i in data["items"]} == {"a": "ok", "b": "ok", "c": "error", "e": "limited",
                                                             "f": "ok"}
    words = "failed on 3 of 5 conversations; 1 errored, 1 limited"  # the verdict words count it apart (docs/budgets.md)
    assert data["summary"]["errors"] == 2 and data["verdict"] == "failed"
    for name in ("run.html", "report.html"):  # the report the run wrote and the one of the stored run: the same
        page = (project / name).read_text()
        row = re.search(r'<tr class="conv"[^>]*data-status="error"[^>]*>.*?</tr>', page[page.index(">e<") - 600:],
                        flags=re.S)
        assert row is not None, name
        cells = _text(row.group(0))
        assert " limited " in f" {cells} " and "error" not in cells.replace("errored", ""), (name, cells)
        text = _text(page)
        assert words in text and "5: 2 passed , 1 failed , 2 errored" in text, name
        assert "errored (2)" in text, name  # the filter still counts it with the errored
    assert "e  limited by turns after 1 turn(s)" in (project / "terminal.txt").read_text()
    assert "- `e`: limited by turns after 1 turn(s)" in (project / "summary.md").read_text()
    assert words in (project / "summary.md").read_text() and words in (project / "junit.xml").read_text()
    run = _run_id(project / "evalcli.db")
    status, body = view.get(f"/api/runs/{run}/conversations")
    assert status == 200 and body["total"] == 5
    rows = {r["id"]: (r["status"], r["why"]) for r in body["rows"]}
    assert rows["e"][0] == "limited" and rows["e"][1].startswith("limited by turns"), rows
    assert rows["c"] == ("error", "error: turn 0: the target raised RuntimeError: kaboom"), rows
    assert [r["id"] for r in body["rows"]] == ["c", "e", "b", "a", "f"]  # failures first: errored and limited first
    status, body = view.get(f"/api/runs/{run}/conversations?status=error")
    assert sorted(r["id"] for r in body["rows"]) == ["c", "e"]
    status, body = view.get(f"/api/runs/{run}/conversations/3")
    assert status == 200 and body["transcript"]["status"] == "limited" and body["transcript"]["stop"] == "turns"
    status, body = view.get(f"/api/runs/{run}/progress")
    assert (body["stored"], body["passed"], body["errors"], body["selected"]) == (5, 2, 2, 5)
    show = run_cli(["show", run, "--json", "-"], project)
    assert json.loads(show.stdout)["summary"] == data["summary"]


def _killed_mid_run(folder: Path, how: signal.Signals = signal.SIGKILL) -> str:
    """A run whose process was killed (SIGKILL) after 2 of its 6 conversations were stored: its row stays
    ``running`` (docs/reliability.md); or interrupted (SIGINT): ``interrupted``."""
    (folder / "agent.py").write_text("import time\ndef agent(input, **kw):\n    time.sleep(0.4)\n"
                                     "    return 'hello ' + input\n")
    (folder / "d.yaml").write_text(DATASET.split("data:")[0] + "data:\n"
                                   + "".join(f"  - {{id: c{i}, input: x{i}}}\n" for i in range(6)))
    running = subprocess.Popen([sys.executable, "-m", "evalcli", "run", "d.yaml", "--concurrency", "1"], cwd=folder,
                               env=cli_base_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + SUBPROCESS_TIMEOUT
        while time.monotonic() < deadline and running.poll() is None:
            try:
                with sqlite3.connect(folder / "evalcli.db") as conn:
                    if conn.execute("SELECT COUNT(*) FROM items").fetchone()[0] >= 2:
                        break
            except sqlite3.OperationalError:
                pass  # not made yet
            time.sleep(0.05)
        running.send_signal(how)
    finally:
        running.wait(SUBPROCESS_TIMEOUT)
    with sqlite3.connect(folder / "evalcli.db") as conn:
        run_id, status = conn.execute("SELECT id, status FROM runs").fetchone()
        stored = conn.execute("SELECT COUNT(*) FROM items").fetchone()[0]
    assert status == ("running" if how == signal.SIGKILL else "interrupted") and 2 <= stored < 6, (status, stored)
    return str(run_id)


def test_the_report_and_the_json_of_a_run_not_finished_say_so(tmp_path: Path) -> None:
    """``show`` of a run still playing (or whose process was killed) says ``NOT FINISHED`` and ``no exit code yet``
    (docs/reliability.md). Its HTML report said ``(running, exit code 0)`` under a plain ``scored`` badge, as if it
    had ended well; its JSON (``show --json``) said ``selected`` = the conversations stored so far, ``not_played: 0``,
    when the run selected 6 (``runs.selected``, written when it began)."""
    run = _killed_mid_run(tmp_path)
    shown = run_cli(["show", run], tmp_path)
    assert "NOT FINISHED" in shown.stdout and "no exit code yet" in shown.stdout
    result = json.loads(run_cli(["show", run, "--json", "-"], tmp_path).stdout)
    stored = result["summary"]["total_items"]
    assert result["status"] == "running"
    assert result["conversations"] == {"selected": 6, "played": stored, "not_played": 6 - stored}, result
    assert run_cli(["report", run, "--html", "r.html"], tmp_path).code == 0
    text = _text((tmp_path / "r.html").read_text())
    assert "exit code 0" not in text and "no exit code yet" in text, text[:600]
    assert f"not finished: {stored} of 6 conversations stored so far" in text, text[:600]
    assert re.search(r"evalcli report d\.yaml not finished · scored", text), text[:300]


def test_the_report_of_an_interrupted_run_says_how_far_it_got_and_how_to_go_on(tmp_path: Path) -> None:
    """The terminal and ``show`` say ``INTERRUPTED after 3 of 6 conversations; continue with: ... --resume RUN``; the
    HTML report of that run said only ``(interrupted, exit code 130)`` and ``conversations 3``, as if it had 3."""
    run = _killed_mid_run(tmp_path, signal.SIGINT)
    stored = json.loads(run_cli(["show", run, "--json", "-"], tmp_path).stdout)["summary"]["total_items"]
    assert run_cli(["report", run, "--html", "r.html"], tmp_path).code == 0
    text = _text((tmp_path / "r.html").read_text())
    assert f"interrupted after {stored} of 6 conversations; continue with --resume {run}" in text, text[:600]


def _raw(view: ViewServer, path: str, method: str = "GET", body: bytes | None = None) -> tuple[int, str, str]:
    """(status, content type, body) of a request, whatever its status."""
    request = urllib.request.Request(view.url.rstrip("/") + path, data=body, method=method,
                                     headers={"Content-Type": "application/json"} if body is not None else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.headers.get_content_type(), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get_content_type(), exc.read().decode()


@pytest.mark.parametrize("query", ["page=abc", "size=abc", "page=1.5", "page=%C2%B2", "size=1e3"])
@pytest.mark.parametrize("where", ["/api/runs", "/api/runs/RUN/conversations"])
def test_a_page_or_size_that_is_not_a_whole_number_is_a_json_400(project: Path, view: ViewServer, query: str,
                                                                  where: str) -> None:
    """``size=abc`` was answered ``400 text/plain`` "size must be a whole number" (the page's script, which reads
    ``{error}`` from JSON, showed "Bad Request"): the API's errors are JSON."""
    path = where.replace("RUN", _run_id(project / "evalcli.db"))
    status, kind, body = _raw(view, f"{path}?{query}")
    assert (status, kind) == (400, "application/json"), (status, kind, body)
    assert f"{query.split('=')[0]} must be a whole number" in json.loads(body)["error"], body


@pytest.mark.parametrize("page", ["0", "-1", "-99999999999999999999"])
def test_a_page_before_the_first_answers_the_page_it_served(project: Path, view: ViewServer, page: str) -> None:
    """``page=-1`` served the first page's rows and said ``"page": -1`` (the page's pager then read "page -1 of
    1"): the answer names the page served."""
    run = _run_id(project / "evalcli.db")
    for path in ("/api/runs", f"/api/runs/{run}/conversations"):
        status, body = view.get(f"{path}?page={page}&size=2")
        assert status == 200 and body["page"] == 1, (path, body)


@pytest.mark.parametrize(("method", "path", "code"), [
    ("GET", "/api/nothing", 404), ("GET", "/api/runs/RUN/conversations/0/extra", 404),
    ("POST", "/api/runs", 405), ("DELETE", "/api/runs/RUN", 405)])
def test_an_api_address_or_method_it_does_not_answer_is_json(project: Path, view: ViewServer, method: str, path: str,
                                                               code: int) -> None:
    """Every API answer is JSON ``{error, hint}`` (docs/view.md): an unknown address or method was ``text/plain``
    ``404: Not Found``, which a script reading the API cannot parse."""
    status, kind, body = _raw(view, path.replace("RUN", _run_id(project / "evalcli.db")), method)
    assert (status, kind) == (code, "application/json"), (status, kind, body)
    assert json.loads(body)["error"], body
    status, kind, body = _raw(view, "/nothing-here")  # the page's own addresses are not the API: left as they were
    assert status == 404


def test_the_api_without_its_token_is_a_json_401(project: Path) -> None:
    """With ``--token``, an API request without it was answered ``text/plain``: a script gets JSON as from any other
    refusal (the page itself still gets the text)."""
    with view_server(project / "evalcli.db", "--host", "127.0.0.1", "--token", "s3cr3t") as served:
        status, kind, body = _raw(served, "/api/runs")
        assert (status, kind) == (401, "application/json") and "token" in json.loads(body)["error"], body
        status, kind, body = _raw(served, "/")
        assert (status, kind) == (401, "text/plain")
        assert "s3cr3t" not in "".join(served.output)


def test_comparing_a_conversation_neither_run_has_is_a_404(project: Path, view: ViewServer) -> None:
    """``/api/compare/A/B/conversation?identity=nope`` answered 200 with two nulls (as if both runs had left it
    out), and without ``identity`` the same: an unknown conversation is a 404 as an unknown run or index is."""
    run = _run_id(project / "evalcli.db")
    status, body = view.get(f"/api/compare/{run}/{run}/conversation?identity=id:nope")
    assert status == 404 and "id:nope" in body["error"], (status, body)
    status, body = view.get(f"/api/compare/{run}/{run}/conversation")
    assert status == 400 and "identity" in body["error"], (status, body)
    status, body = view.get(f"/api/compare/{run}/{run}/conversation?identity=id:e")
    assert status == 200 and body["a"]["status"] == "limited" and body["first_difference"] is None, body


@pytest.mark.parametrize("command", [
    ["report", "latest", "--html", "evalcli.db"], ["show", "latest", "--json", "./evalcli.db"],
    ["show", "latest", "0", "--json", "evalcli.db"], ["diff", "latest", "latest", "--json", "evalcli.db"],
    ["diff", "latest", "latest", "--markdown", "evalcli.db"], ["compare", "latest", "latest", "--html", "evalcli.db"],
    ["compare", "latest", "latest", "--json", "evalcli.db"], ["compare", "latest", "latest", "--markdown", "evalcli.db"],
    ["labels", "export", "--out", "evalcli.db"]])
def test_a_report_over_the_database_it_reads_is_refused_and_the_database_kept(project: Path, tmp_path: Path,
                                                                              command: list[str]) -> None:
    """docs/ci.md: no path a command writes may be a file it reads. ``report latest --html evalcli.db`` answered
    ``wrote evalcli.db`` over every stored run (and ``show``, ``diff``, ``compare`` and ``labels export`` the same
    with their ``--json``, ``--markdown``, ``--html`` or ``--out``): exit 2 now, the database as it was."""
    import shutil

    with sqlite3.connect(project / "evalcli.db") as source, sqlite3.connect(tmp_path / "evalcli.db") as copy:
        source.backup(copy)
    shutil.copy(project / "d.yaml", tmp_path / "d.yaml")
    before = (tmp_path / "evalcli.db").read_bytes()
    result = run_cli(command, tmp_path)
    assert result.code == 2, (result.code, result.stdout, result.stderr)
    assert "is the database this command reads" in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert (tmp_path / "evalcli.db").read_bytes() == before
    with sqlite3.connect(tmp_path / "evalcli.db") as conn:
        assert conn.execute("SELECT COUNT(*) FROM items").fetchone()[0] == 5


WIDE = "() => [document.documentElement.scrollWidth, innerWidth]"


def test_a_very_long_id_and_reply_leave_the_layout_whole_and_nothing_runs(tmp_path: Path) -> None:
    """In a real browser: an id of 3,000 characters without a space made the view's list 26,000 px wide (status,
    scores and review out of sight on every row) and the HTML report's opened transcript 21,000 px (its ``evalcli
    show RUN ID`` line). Markup, RTL overrides and zero-width characters in ids and replies stay text: no dialog."""
    from tests.browser import chromium, chromium_missing, open_report
    from tests.view_helpers import open_view

    if chromium_missing() is not None:
        pytest.skip(chromium_missing() or "")
    (tmp_path / "agent.py").write_text("def agent(input, **kw):\n    return 'hello ' + input + ' ' + 'W' * 4000 + "
                                       "' <img src=x onerror=alert(1)><script>alert(2)</script> \\u202eevil\\u202c'\n")
    (tmp_path / "d.yaml").write_text(json.dumps({
        "target": "agent:agent", "gates": [{"scorer": {"includes": "hello"}, "id": "g"}],
        "data": [{"id": "L" * 3000, "input": "long id"}, {"id": "\u202eredi\u202c-\u05e9\u05dc\u05d5\u05dd", "input": "rtl"},
                 {"id": "zero\u200bwidth\u2060x", "input": "zw"}, {"id": "<img src=x onerror=alert(3)>",
                                                                    "input": "<script>alert(4)</script>"}]}))
    assert run_cli(["run", "d.yaml", "--quiet", "--html", "r.html"], tmp_path).code == 0
    run = _run_id(tmp_path / "evalcli.db")
    dialogs: list[str] = []
    with chromium() as browser:
        with open_report(browser, tmp_path / "r.html") as report:
            report.page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            for n in range(4):
                report.page.click(f"#c-{n} button.open")
            width, viewport = report.page.evaluate(WIDE)
            assert width <= viewport, ("report", width, viewport)
            assert report.errors == []
        with view_server(tmp_path / "evalcli.db") as served, open_view(browser, served.url, f"#/run/{run}") as page:
            page.page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            width, viewport = page.page.evaluate(WIDE)
            assert width <= viewport, ("the run's list", width, viewport)
            for n in range(4):
                page.goto(f"#/run/{run}/c/{n}")
                width, viewport = page.page.evaluate(WIDE)
                assert width <= viewport, (n, width, viewport)
            assert page.errors == [] and page.foreign() == []
    assert dialogs == []


def test_labels_of_two_ids_alike_once_redacted_export_each_as_the_dataset_names_it(tmp_path: Path) -> None:
    """Two ids that differ only in their secrets (``u-${TENANT_A}``, ``u-${TENANT_B}``) are two conversations
    (docs/identity.md); labelled in the view, ``labels export`` wrote both as ``id: u-[redacted]`` under a header
    that says to copy each into "the dataset item with that id": which one is which? Each is now named as the
    dataset writes it, and no secret is written."""
    env = {"TENANT_A": "acmecorp77", "TENANT_B": "globexinc88"}
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "d.yaml").write_text(DATASET.split("data:")[0].replace("target_has_memory: true\n", "secrets: [TENANT_A, "
                                     "TENANT_B]\n") + 'data:\n  - {id: "u-${TENANT_A}", input: hi}\n'
                                     '  - {id: "u-${TENANT_B}", input: bad}\n')
    assert run_cli(["run", "d.yaml", "--quiet"], tmp_path, env).code == 1
    run = _run_id(tmp_path / "evalcli.db")
    with view_server(tmp_path / "evalcli.db", env=env) as served:
        assert served.post(f"/api/runs/{run}/conversations/0/labels", {"value": "pass"})[0] == 200
        assert served.post(f"/api/runs/{run}/conversations/1/labels", {"value": "fail"})[0] == 200
    result = run_cli(["labels", "export"], tmp_path, env)
    assert result.code == 0, result.stderr
    import yaml

    entries = yaml.safe_load(result.stdout)["labels"][0]["conversations"]
    assert [(e["id"], e["review"]) for e in entries] == [("u-${TENANT_A}", "pass"), ("u-${TENANT_B}", "fail")], entries
    assert "acmecorp77" not in result.stdout and "globexinc88" not in result.stdout
