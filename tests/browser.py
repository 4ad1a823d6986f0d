"""Open an HTML report in headless Chromium (Debian's ``/usr/bin/chromium``) through Playwright, offline.

Every request the page makes is routed: the report file itself is served from disk, anything else
is aborted and recorded, so a test can assert that nothing but the file was asked for. Console
messages of level error and uncaught page errors are recorded too.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = os.environ.get("EVALCLI_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = Path(os.environ.get("EVALCLI_TEST_ARTIFACTS", Path(__file__).resolve().parent / "artifacts"))


def chromium_missing() -> str | None:
    """Why the browser tests cannot run here, or None (only a missing browser is a reason to skip).

    With ``EVALCLI_REQUIRE_BROWSER=1`` (set by ``.ci/run``) a missing browser is no reason: the tests run and fail.
    """
    if not Path(CHROMIUM).is_file() and os.environ.get("EVALCLI_REQUIRE_BROWSER") != "1":
        return f"chromium is not installed at {CHROMIUM} (.ci/run installs it: apt-get install -y chromium)"
    return None


@dataclass
class OpenedPage:
    """A report opened from ``file://``, with what it asked for and what it complained about."""

    page: Any
    url: str
    requests: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def visible_ids(self) -> list[str]:
        """Item ids of the conversation rows currently shown."""
        return list(self.page.eval_on_selector_all(
            "#conversation-list tr.conv:not([hidden]) button.open", "buttons => buttons.map(b => b.textContent)"))


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium, closed afterwards; Playwright gives each launch a fresh temporary profile."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def open_report(browser: Any, path: Path, *, javascript: bool = True) -> Iterator[OpenedPage]:
    """Open ``path`` in a page of its own context, with the network blocked; closed afterwards."""
    url = path.resolve().as_uri()
    context = browser.new_context(java_script_enabled=javascript, viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    opened = OpenedPage(page, url)

    def route(route: Any) -> None:
        request_url = route.request.url
        if request_url == url:
            route.continue_()
        else:
            opened.blocked.append(request_url)
            route.abort()

    page.route("**/*", route)
    page.on("request", lambda request: opened.requests.append(request.url))
    page.on("console", lambda message: opened.errors.append(f"console: {message.text}")
            if message.type == "error" else None)
    page.on("pageerror", lambda error: opened.errors.append(f"page error: {error}"))
    page.goto(url, wait_until="load")
    if javascript:
        page.wait_for_selector("body[data-ready='1']", state="attached", timeout=10_000)
    try:
        yield opened
    finally:
        context.close()


def screenshot(page: Any, name: str) -> Path:
    """A full-page screenshot kept under ``tests/artifacts`` (or $EVALCLI_TEST_ARTIFACTS); the path is printed."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / ".gitignore").write_text("*\n")  # artifacts are kept for people and CI, never committed
    path = ARTIFACTS / name
    page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")
    return path
