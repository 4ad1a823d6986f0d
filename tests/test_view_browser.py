"""``evalcli view`` in a real browser: headless Chromium on the real server (``python -m evalcli view``) over runs made
by the real CLI (an LLM judge answering from the loopback server). The lists, a transcript with every play of a
repeat, a run in progress updating without a reload, two runs side by side, and a keyboard labelling session whose
labels ``labels export`` writes and ``calibrate --labels-from-db`` measures the judge against.

With ``EVALCLI_DOCS_SCREENSHOTS=1`` the screenshots go to docs/images/view/ (the pictures of docs/view.md).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.browser import chromium, chromium_missing
from tests.conftest import cli_base_env, run_cli
from tests.llm_server import LLMServer
from tests.reliability_helpers import SUBPROCESS_TIMEOUT
from tests.report_fixtures import JUDGE_NO, JUDGE_YES, env, run_ids, write_project
from tests.view_helpers import ViewPage, docs_screenshot, open_view, view_server

pytestmark = [pytest.mark.slow, pytest.mark.skipif(chromium_missing() is not None, reason=chromium_missing() or "")]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.fixture(scope="module")
def server() -> Iterator[LLMServer]:
    started = LLMServer().start()
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, server: LLMServer) -> Path:
    """Run A (paris misses the gate), run B (brooklyn does instead) and a --repeat 2 run of brooklyn."""
    folder = tmp_path_factory.mktemp("view")
    write_project(folder, server)
    for mode, extra in (("a", []), ("b", []), ("a", ["--repeat", "2", "--filter", "Brooklyn"])):
        result = run_cli(["run", "d.yaml", *extra], folder, env(server, mode))
        assert result.code in (0, 1), result.stderr
    return folder


def _runs(project: Path) -> tuple[str, str, str]:
    a, b, repeated = run_ids(project / "evalcli.db")[:3]
    return a, b, repeated


def _clean(opened: ViewPage) -> None:
    assert opened.foreign() == [], "the page asked for something besides the view's own server"
    assert opened.errors == []


def test_runs_and_a_run_sorted_filtered_failures_first(browser: Any, project: Path) -> None:
    a, b, repeated = _runs(project)
    with view_server(project / "evalcli.db") as view, open_view(browser, view.url) as opened:
        assert opened.texts("#runs tr.run td:nth-child(2)") == [repeated, b, a]  # newest first
        docs_screenshot(opened.page, "runs.png")
        opened.page.select_option("#filter-verdict", "passed")
        opened.page.click("#run-filters button[type=submit]")
        opened.wait("runs")
        assert opened.texts("#runs tr.run td:nth-child(2)") == [repeated]
        opened.goto("#/?until=2000-01-01")
        assert opened.texts("#runs tr.run") == []

        opened.page.click("a.brand")
        opened.wait("runs")
        opened.page.click(f"a[href='#/run/{b}']")
        opened.wait("run")
        statuses = opened.texts("#conversations tr.conv td:nth-child(3) .badge")
        rank = {"error": 0, "failed": 1, "passed": 2}
        assert statuses == sorted(statuses, key=rank.__getitem__) and statuses[0] == "error"
        assert opened.texts("#conversations tr.conv td:nth-child(2)")[0] == "boom"
        docs_screenshot(opened.page, "run.png")

        opened.page.click("th[data-sort='id']")
        opened.wait("run")
        ids = opened.texts("#conversations tr.conv td:nth-child(2)")
        assert ids == sorted(ids) and len(ids) == 7
        opened.page.click("th[data-sort='id']")  # again: descending
        opened.wait("run")
        assert opened.texts("#conversations tr.conv td:nth-child(2)") == sorted(ids, reverse=True)

        opened.page.select_option("#filter-status", "failed")
        opened.page.click("form.filters button[type=submit]")
        opened.wait("run")
        assert set(opened.texts("#conversations tr.conv td:nth-child(2)")) == {"brooklyn", "rome-turns"}
        _clean(opened)


def test_a_transcript_turn_by_turn_with_every_play(browser: Any, project: Path) -> None:
    _, b, repeated = _runs(project)
    with view_server(project / "evalcli.db") as view, open_view(browser, view.url, f"#/run/{b}") as opened:
        opened.page.click("#conversations a.open:text-is('brooklyn')")
        opened.wait("conversation")
        turn = opened.page.locator(".turn[data-turn='0']")
        assert "What is the weather in Brooklyn?" in turn.locator(".msg.user").inner_text()
        call = turn.locator(".call").inner_text()
        assert "get_weather" in call and '"city": "Brooklyn"' in call and '"unit": "fahrenheit"' in call
        assert '"temp": 72' in turn.locator(".result").inner_text()
        assert "FORBIDDEN" in turn.locator(".msg.assistant").inner_text()
        reasons = " ".join(opened.texts(".transcript > table.outcomes td.reason"))
        assert "'FORBIDDEN' found" in reasons and JUDGE_YES in reasons
        docs_screenshot(opened.page, "conversation.png")

        opened.goto(f"#/run/{b}")
        opened.page.click("#conversations a.open:text-is('hostile')")
        opened.wait("conversation")
        assert "<script>" in opened.page.locator(".msg.assistant").inner_text()  # shown as text, never run
        assert opened.page.evaluate("window.__pwned") is None

        opened.goto(f"#/run/{repeated}")
        assert opened.texts("#conversations tr.conv td:nth-child(2)") == ["brooklyn"]
        assert opened.texts("#conversations tr.conv td:nth-child(7)") == ["stable-pass (2/2)"]
        opened.page.click("#conversations a.open")
        opened.wait("conversation")
        assert opened.texts("details.play summary") == ["play 1: passed", "play 2: passed"]
        opened.page.click("details.play[data-play='2'] summary")
        assert JUDGE_YES in opened.page.locator("details.play[data-play='2'] .transcript").inner_text()
        _clean(opened)


def test_a_comparison_paired_as_compare_with_the_first_difference_marked(browser: Any, project: Path) -> None:
    a, b, _ = _runs(project)
    printed = run_cli(["compare", a, b], project)
    assert printed.code == 0, printed.stderr
    line = next(text for text in printed.stdout.splitlines() if "pass/fail over" in text)
    as_json = run_cli(["compare", a, b, "--json", "-"], project)
    statistics = {k: v for k, v in json.loads(as_json.stdout)["statistics"][0].items() if k not in ("a", "b")}
    with view_server(project / "evalcli.db") as view, open_view(browser, view.url) as opened:
        assert view.get(f"/api/compare/{a}/{b}")[1]["stats"] == statistics  # the same figures as compare's
        opened.page.check(f"tr.run[data-id='{a}'] input[type=checkbox]")
        opened.page.check(f"tr.run[data-id='{b}'] input[type=checkbox]")
        opened.page.click("#compare")
        opened.wait("compare")
        assert " ".join(opened.page.locator("#pass-fail").inner_text().split()) == " ".join(line.split())
        assert opened.texts("[data-side='A'] a") == [a] and opened.texts("[data-side='B'] a") == [b]

        def pair(name: str) -> list[str]:
            return opened.texts(f"#pairs tr.pair[data-identity='id:{name}'] td")

        assert pair("brooklyn") == ["brooklyn", "passed", "failed", "turn 0"]
        assert pair("paris") == ["paris", "failed", "passed", "turn 0"]
        assert pair("chat") == ["chat", "passed", "passed", "same"]
        assert "gate excludes(FORBIDDEN)" in " ".join(opened.texts("#figures td"))
        docs_screenshot(opened.page, "compare.png")
        opened.page.click("#pairs a:text-is('brooklyn')")
        opened.wait("compared-conversation")
        assert opened.page.locator("#difference").inner_text() == "The transcripts first differ at turn 0."
        for side in ("A", "B"):
            assert opened.page.locator(f"[data-side='{side}'] .turn.differs[data-turn='0']").count() == 1
        assert "FORBIDDEN" in opened.page.locator("[data-side='B'] .msg.assistant").inner_text()
        assert "FORBIDDEN" not in opened.page.locator("[data-side='A'] .msg.assistant").inner_text()
        _clean(opened)


SLOW_AGENT = '''
import time
import evalcli


@evalcli.tool
def get_weather(city: str) -> dict:
    return {"temp": -40, "live": True}


def agent(input, **kw):
    time.sleep(0.6)
    return f"forecast: {get_weather(city=input)}"
'''
SLOW_DATASET = """
target: slow:agent
concurrency: 1
tools:
  get_weather:
    returns: {temp: 20, sky: sun}
gates:
  - called_tool: get_weather
data:
""" + "".join(f"  - {{id: city{n}, input: City {n}}}\n" for n in range(8))


def test_a_run_in_progress_updates_without_a_reload(browser: Any, tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text(SLOW_AGENT)
    (tmp_path / "live.yaml").write_text(SLOW_DATASET)
    assert run_cli(["run", "live.yaml", "--limit", "1"], tmp_path).code == 0  # a database to open
    db = tmp_path / "evalcli.db"
    with view_server(db) as view, open_view(browser, view.url) as opened:
        running = subprocess.Popen([sys.executable, "-m", "evalcli", "run", "live.yaml"], cwd=tmp_path,
                                   env=cli_base_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + SUBPROCESS_TIMEOUT
            while len(run_ids(db)) < 2:
                assert time.monotonic() < deadline and running.poll() is None, running.stderr
                time.sleep(0.1)
            run_id = run_ids(db)[-1]
            opened.goto(f"#/run/{run_id}")
            opened.page.evaluate("window.__notReloaded = true")
            seen = [len(opened.texts("#conversations tr.conv"))]
            live_badge = opened.page.locator("#live").is_visible()
            while running.poll() is None or seen[-1] < 8:
                assert time.monotonic() < deadline, f"the page stopped at {seen[-1]} conversations"
                time.sleep(0.2)
                if opened.page.evaluate("document.body.dataset.ready") == "1":
                    count = len(opened.texts("#conversations tr.conv"))
                    if count != seen[-1]:
                        seen.append(count)
                if seen[-1] == 8 and "passed" in opened.page.locator("#run-summary [data-key='verdict']").inner_text():
                    break
            assert running.wait(60) == 0, running.stderr
        finally:
            if running.poll() is None:
                running.kill()
                running.wait(30)
        assert live_badge
        assert len(seen) >= 3 and seen == sorted(seen), seen  # it grew in steps, as conversations were stored
        assert opened.page.evaluate("window.__notReloaded") is True
        opened.until("document.querySelector(\"#run-summary [data-key='verdict']\").textContent.includes('passed')")
        docs_screenshot(opened.page, "live.png")
        opened.page.click("#conversations a.open:text-is('city3')")
        opened.wait("conversation")
        result = opened.page.locator(".result").inner_text()
        assert "[mock]" in result and '"sky": "sun"' in result  # where the tool's result came from
        _clean(opened)


KEYS = [("f", "boom"), ("s", None), ("s", None), ("j", "brooklyn"), ("p", "chat"), ("n", None),
        ("note", None), ("Enter", None), ("f", "hostile"), ("f", "paris"), ("f", "rome-turns"), ("p", None)]
"""The session: atlantis failed as a whole; then the judge labelled: brooklyn pass, chat fail (with a note), hostile
fail, paris fail (the judge passes it: the one disagreement), rome-turns pass; boom skipped."""


def _heading(opened: ViewPage) -> str:
    return str(opened.page.evaluate("document.querySelector('h2') ? document.querySelector('h2').textContent : ''"))


def test_a_keyboard_labelling_session_feeds_calibrate(browser: Any, project: Path, server: LLMServer) -> None:
    a, _, _ = _runs(project)
    db = project / "evalcli.db"
    with view_server(db, "--reviewer", "alice") as view, open_view(browser, view.url, f"#/run/{a}?sort=id") as opened:
        opened.page.click("#conversations a.open:text-is('atlantis')")
        opened.wait("conversation")
        assert opened.page.locator("#label-target").inner_text() == "the conversation"
        for key, then in KEYS:
            if key == "note":
                opened.page.keyboard.type("no forecast in this one")
                continue
            opened.page.keyboard.press(key)
            if then is not None:
                opened.until(f"document.body.dataset.ready === '1' && "
                             f"document.querySelector('h2').textContent.startsWith('{then} ')")
            if key == "s":
                assert opened.page.locator("#label-target").inner_text() in ("excludes(FORBIDDEN)", "gave-temperature")
        assert _heading(opened).startswith("rome-turns")
        opened.until("document.querySelector('#flash').textContent.includes('last conversation')")
        assert opened.page.locator("#current-label").inner_text() == "pass"
        docs_screenshot(opened.page, "review.png")
        opened.goto(f"#/run/{a}?sort=id")
        reviews = dict(zip(opened.texts("#conversations tr.conv td:nth-child(2)"),
                           opened.texts("#conversations tr.conv td.label"), strict=True))
        assert reviews["atlantis"] == "fail" and reviews["chat"] == ""  # chat's label is the judge's, not its own
        _clean(opened)

    exported = run_cli(["labels", "export", "--db", str(db)], project)
    assert exported.code == 0, exported.stderr
    document = yaml.safe_load(exported.stdout)
    conversations = {c["id"]: c for c in document["labels"][0]["conversations"]}
    assert conversations["atlantis"]["review"] == "fail" and "labels" not in conversations["atlantis"]
    assert {k: c.get("labels") for k, c in conversations.items() if k != "atlantis"} == {
        "brooklyn": {"gave-temperature": "pass"}, "chat": {"gave-temperature": "fail"},
        "hostile": {"gave-temperature": "fail"}, "paris": {"gave-temperature": "fail"},
        "rome-turns": {"gave-temperature": "pass"}}
    assert conversations["chat"]["by"]["gave-temperature"].startswith("alice ")
    assert conversations["chat"]["by"]["gave-temperature"].endswith(": no forecast in this one")

    copy = project / "calibrate.db"  # calibrate stores a run: in a copy, so the other tests see three runs
    shutil.copy(db, copy)
    calibrated = run_cli(["calibrate", "d.yaml", "--labels-from-db", "--db", str(copy), "--json", "-"], project,
                         env(server, "a"))
    assert calibrated.code == 0, calibrated.stderr
    measured = json.loads(calibrated.stdout)["scorers"]
    assert [(s["id"], s["labels"], s["compared"], s["agreed"]) for s in measured] == [("gave-temperature", 5, 5, 4)]
    assert [(d["id"], d["label"], d["score"]) for d in measured[0]["disagreements"]] == [("paris", 0.0, 1.0)]
    assert JUDGE_YES in measured[0]["disagreements"][0]["reason"] and JUDGE_NO not in measured[0]["disagreements"][0]["reason"]
    without = run_cli(["calibrate", "d.yaml", "--db", str(copy)], project, env(server, "a"))
    assert without.code == 2 and "no conversation of d.yaml has labels" in without.stderr


def test_a_busy_database_never_blocks_the_page(browser: Any, project: Path) -> None:
    """A writer holding the database (as a run does between its transactions, here for the whole test) leaves
    every page readable."""
    _, b, _ = _runs(project)
    with view_server(project / "evalcli.db") as view:
        writer = sqlite3.connect(project / "evalcli.db", isolation_level=None)
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("INSERT INTO llm_cache (key, model, response, created_at) VALUES ('busy', 'm', '{}', 'now')")
        try:
            began = time.perf_counter()
            with open_view(browser, view.url, f"#/run/{b}") as opened:
                assert len(opened.texts("#conversations tr.conv")) == 7
                _clean(opened)
            assert time.perf_counter() - began < 15
        finally:
            writer.execute("ROLLBACK")
            writer.close()
