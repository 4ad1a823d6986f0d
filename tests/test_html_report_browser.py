"""The HTML report in a real browser: headless Chromium opens it from file:// with the network blocked.

Each test makes its runs through the real CLI (an LLM judge answering from the loopback server),
opens the report, asserts that nothing but the file itself was requested and nothing was logged as
an error, and then uses the page as a person would: filters, opens transcripts, reads the baseline.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalcli.cli.commands import report_command
from tests.browser import OpenedPage, chromium, chromium_missing, open_report, screenshot
from tests.conftest import CliResult, run_cli
from tests.llm_server import LLMServer
from tests.report_fixtures import JUDGE_NO, JUDGE_YES, env, run_ids, write_project

pytestmark = pytest.mark.skipif(chromium_missing() is not None, reason=chromium_missing() or "")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def project(tmp_path: Path, llm_server: LLMServer) -> Path:
    write_project(tmp_path, llm_server)
    return tmp_path


def _run(project: Path, server: LLMServer, mode: str, *args: str) -> CliResult:
    result = run_cli(["run", "d.yaml", *args], project, env(server, mode))
    assert result.code == 1, result.stderr  # paris or brooklyn misses the gate, rome-turns a turn gate
    return result


def _clean(opened: OpenedPage) -> None:
    """Nothing but the report file was requested, nothing was blocked, no error was logged."""
    assert opened.requests == [opened.url]
    assert opened.blocked == []
    assert opened.errors == []


def _choose(opened: OpenedPage, select: str, label_start: str) -> None:
    """Pick the option of ``select`` whose label starts with ``label_start``."""
    options = opened.page.eval_on_selector_all(f"{select} option", "os => os.map(o => [o.value, o.textContent])")
    value = next(value for value, label in options if label.startswith(label_start))
    opened.page.select_option(select, value)


def _clear(opened: OpenedPage) -> None:
    opened.page.click("#f-clear")


def _open(opened: OpenedPage, item_id: str) -> str:
    """Open a conversation's transcript and return its text."""
    row = opened.page.locator("#conversation-list tr.conv", has=opened.page.locator(f"button.open:text-is('{item_id}')"))
    row.locator("button.open").click()
    detail = row.locator("xpath=following-sibling::tr[1]")
    assert detail.get_attribute("class") == "detail"
    return str(detail.inner_text())


def test_run_html_in_the_browser(browser: Any, project: Path, llm_server: LLMServer) -> None:
    _run(project, llm_server, "a", "--html", "report.html")
    report = project / "report.html"
    with open_report(browser, report) as opened:
        _clean(opened)
        page = opened.page
        assert "d.yaml" in page.inner_text("header") and "failed" in page.inner_text("header .verdict")
        assert "7: 4 passed, 2 failed, 1 errored" in page.inner_text("header")
        assert page.locator("#charts svg").count() >= 3  # a distribution per scorer, per-turn means, history
        assert opened.visible_ids() == ["brooklyn", "paris", "boom", "hostile", "atlantis", "chat", "rome-turns"]

        _choose(opened, "#f-status", "failed: missed a gate")
        assert opened.visible_ids() == ["paris", "rome-turns"]
        assert page.inner_text("#f-count") == "showing 2 of 7 conversations"
        _choose(opened, "#f-status", "errored")
        assert opened.visible_ids() == ["boom"]
        _choose(opened, "#f-status", "failed or errored")
        assert opened.visible_ids() == ["paris", "boom", "rome-turns"]
        _clear(opened)

        _choose(opened, "#f-gate", "turn 1: called_tool(get_weather)")
        assert opened.visible_ids() == ["rome-turns"]
        _choose(opened, "#f-gate", "excludes(FORBIDDEN)")
        assert opened.visible_ids() == ["paris"]
        _clear(opened)
        _choose(opened, "#f-tag", "weather")
        assert opened.visible_ids() == ["brooklyn", "paris"]
        _choose(opened, "#f-tag", "smoke")
        assert opened.visible_ids() == ["brooklyn", "chat"]
        _clear(opened)

        for text, expected in (("kaboom", ["boom"]), ("FAHRENHEIT", ["brooklyn", "paris", "rome-turns"]),
                               ('"city not found"', ["atlantis"]), ("brooklyn FAHRENHEIT", ["brooklyn"]),
                               ('"no temperature appears"', ["hostile", "atlantis", "chat"]),
                               ("Brooklyn 72F", ["brooklyn"]), ("nothing like this anywhere", [])):
            opened.page.fill("#f-text", text)
            page.wait_for_timeout(300)  # the text filter waits for typing to pause
            assert opened.visible_ids() == expected, text
        _clear(opened)
        assert len(opened.visible_ids()) == 7

        brooklyn = _open(opened, "brooklyn")
        assert "tool call get_weather" in brooklyn
        assert '"city": "Brooklyn"' in brooklyn and '"unit": "fahrenheit"' in brooklyn
        assert "tool result get_weather" in brooklyn and '"temp": 72' in brooklyn
        assert "Assistant: It is 72F and sunny in Brooklyn." in brooklyn
        assert JUDGE_YES in brooklyn and "gave-temperature" in brooklyn
        assert "User: What is the weather in Brooklyn?" in brooklyn

        atlantis = _open(opened, "atlantis")
        assert "tool result ERROR lookup" in atlantis and "city not found" in atlantis
        assert JUDGE_NO in atlantis

        rome = _open(opened, "rome-turns")
        assert "turn 0" in rome and "turn 1" in rome and "FAIL" in rome

        boom = _open(opened, "boom")
        assert "kaboom from the agent" in boom and "Traceback" in boom

        hostile = _open(opened, "hostile")
        assert '<script>window.__pwned = 1; document.title = "pwned"</script>' in hostile
        assert page.evaluate("window.__pwned") is None and page.title().startswith("evalcli report")
        assert page.locator("#conversation-list b").count() == 0  # the reply's markup stayed text
        _clean(opened)  # opening transcripts loaded nothing either (the <img> in the reply never became one)
        path = screenshot(page, "report.png")
    assert path.stat().st_size > 10_000


def test_baseline_regressions_in_the_browser(browser: Any, project: Path, llm_server: LLMServer) -> None:
    _run(project, llm_server, "a")
    _run(project, llm_server, "b")
    first, second = run_ids(project / "evalcli.db")
    (project / "out").mkdir()  # an output's folder must exist (nothing is created before the run can start)
    result = run_cli(["report", second[:10], "--baseline", first, "--html", "out/compare.html"], project)
    assert result.code == 0, result.stderr
    assert f"compared with run {first}" in result.stdout
    with open_report(browser, project / "out" / "compare.html") as opened:
        _clean(opened)
        page = opened.page
        baseline = page.inner_text("#baseline")
        assert first in baseline
        assert "item brooklyn: passed in A, fails in B" in page.inner_text("#regressions")
        assert "1 regressed, 1 improved" in baseline
        changed = page.inner_text("#baseline-conversations")
        assert "brooklyn\tregressed\tpassed -> FAILED" in changed and "paris\timproved\tFAILED -> passed" in changed
        _choose(opened, "#f-change", "regressed")
        assert opened.visible_ids() == ["brooklyn"]
        _choose(opened, "#f-change", "improved")
        assert opened.visible_ids() == ["paris"]
        page.click("#baseline-conversations a:text-is('brooklyn')")  # the link opens its transcript
        page.wait_for_selector("#conversation-list tr.detail")
        assert len(opened.visible_ids()) == 7  # the filter that hid it was cleared
        assert page.inner_text("#f-count") == "showing 7 of 7 conversations"
        assert "FORBIDDEN" in page.inner_text("#conversation-list tr.detail")
        history = page.inner_text("#charts")
        assert "gave-temperature" in history and "No earlier run" not in history
        screenshot(page, "report-baseline.png")


def test_readable_without_javascript(browser: Any, project: Path, llm_server: LLMServer) -> None:
    _run(project, llm_server, "a", "--html", "report.html")
    with open_report(browser, project / "report.html", javascript=False) as opened:
        _clean(opened)
        page = opened.page
        assert "failed" in page.inner_text("header .verdict")
        assert "excludes(FORBIDDEN)" in page.inner_text("#gate-results")
        assert "gave-temperature" in page.inner_text("#score-results")
        assert page.locator("#turn-results").is_visible()
        assert page.locator("#filters").is_hidden()  # the filters appear only when they work
        assert "Filters and transcripts need JavaScript" in page.inner_text("#conversations")
        rows = page.locator("#conversation-list tr.conv")
        assert rows.count() == 7 and all(rows.nth(n).is_visible() for n in range(7))
        assert "error: turn 0: the target raised ValueError: kaboom" in page.inner_text("#c-2")


LARGE_AGENT = '''
import json


def agent(input, **kw):
    city = "Brooklyn" if "7" not in input else "Paris"
    return [{"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": json.dumps({"city": city})}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": json.dumps({"temp_c": 21, "sky": "clear"})},
            {"role": "assistant", "content": f"It is 21C and clear in {city}. ({input[:20]})"}]
'''


def test_a_thousand_conversations_are_listed_filtered_and_under_ten_mb(browser: Any, tmp_path: Path) -> None:
    """1,000 conversations x 3 turns: written in process and by the CLI, under 10 MB, every conversation listed
    and filterable in the browser. How fast (targets: written and loaded in under 2 s each) is measured by
    ``python bench/run.py --only report``: speed targets live in benchmarks, not in timed tests."""
    (tmp_path / "bigagent.py").write_text(LARGE_AGENT)
    header = {"target": "bigagent:agent", "concurrency": 64, "gates": [{"called_tool": "get_weather"}],
              "scorers": [{"includes": "Brooklyn"}, {"scorer": {"max_tool_calls": 3}, "threshold": 1}]}
    lines = [json.dumps(header)]
    for n in range(1000):
        inputs = [f"Conversation {n}, turn {t}: what is the weather?" for t in range(3)]
        form = {"inputs": inputs} if n % 2 else {"turns": [{"input": i, "gates": [{"called_tool": "get_weather"}]}
                                                           for i in inputs]}
        lines.append(json.dumps({"id": f"c{n}", "tags": [f"group-{n % 5}"], **form}))
    (tmp_path / "big.jsonl").write_text("\n".join(lines) + "\n")
    assert run_cli(["run", "big.jsonl", "-q"], tmp_path).code == 0
    started = time.perf_counter()
    report_command(tmp_path / "evalcli.db", "latest", tmp_path / "big.html")  # read, render and write, in-process
    seconds = time.perf_counter() - started
    written = run_cli(["report", "latest", "--html", "big-cli.html"], tmp_path)
    assert written.code == 0, written.stderr
    assert (tmp_path / "big-cli.html").stat().st_size > 1_000_000
    size = (tmp_path / "big.html").stat().st_size
    started = time.perf_counter()
    with open_report(browser, tmp_path / "big.html") as opened:
        load = time.perf_counter() - started
        timing = opened.page.evaluate("[performance.getEntriesByType('navigation')[0].loadEventEnd, "
                                      "performance.getEntriesByName('evalcli-ready')[0].startTime]")
        _clean(opened)
        assert len(opened.visible_ids()) == 1000
        _choose(opened, "#f-tag", "group-3")
        assert len(opened.visible_ids()) == 200
    print(f"1000x3 report: written in {seconds:.2f} s, {size / 1e6:.2f} MB, "
          f"browser load event {timing[0]:.0f} ms, list ready {timing[1]:.0f} ms, open-to-ready {load:.2f} s")
    assert size < 10_000_000
