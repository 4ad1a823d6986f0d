"""``evalcli view`` as its users run it: the real CLI in a process of its own, listening on a free loopback port,
and pages of it opened in headless Chromium with every request recorded (nothing but the server may be asked)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import cli_base_env

START_TIMEOUT = 60.0


@dataclass
class ViewServer:
    """A running ``evalcli view``: its address, the seconds it took to listen, what it printed."""

    process: subprocess.Popen[str]
    url: str
    started_in: float
    output: list[str] = field(default_factory=list)

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
        """(status, JSON or text) of a GET of ``path``."""
        request = urllib.request.Request(self.url.rstrip("/") + path, headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                body = response.read().decode()
                status = response.status
        except urllib.error.HTTPError as exc:
            body, status = exc.read().decode(), exc.code
        try:
            return status, json.loads(body)
        except ValueError:
            return status, body

    def post(self, path: str, value: Any) -> tuple[int, Any]:
        request = urllib.request.Request(self.url.rstrip("/") + path, data=json.dumps(value).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")


@contextmanager
def view_server(db: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[ViewServer]:
    """``evalcli view --db DB --port 0 ARGS`` until the block ends (then stopped and waited for)."""
    began = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "evalcli", "view", "--db", str(db), "--port", "0", *args],
                               cwd=db.parent, env={**cli_base_env(), **(env or {})}, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    found = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if " at http://" in line:
                found.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        if not found.wait(START_TIMEOUT):
            raise AssertionError(f"evalcli view did not start: {''.join(lines)}")
        started_in = time.perf_counter() - began
        line = next(line for line in lines if " at http://" in line)
        url = line.split(" at ", 1)[1].split(" ")[0].rstrip(";")
        yield ViewServer(process, url, started_in, lines)
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(30)


@dataclass
class ViewPage:
    """A page of the view in the browser, with every URL it asked for and every error it logged."""

    page: Any
    origin: str
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def goto(self, hash_path: str) -> None:
        """Open ``#hash_path`` and wait until the page has laid it out."""
        self.page.evaluate("document.body.dataset.ready = '0'")
        self.page.evaluate(f"location.hash = {json.dumps(hash_path)}")
        self.wait()

    def wait(self, view: str | None = None) -> None:
        selector = f"body[data-ready='1'][data-view='{view}']" if view else "body[data-ready='1']"
        self.page.wait_for_selector(selector, state="attached", timeout=20_000)

    def until(self, expression: str, timeout: float = 20.0) -> None:
        """Wait until ``expression`` is true in the page (polled: the page's Content-Security-Policy forbids the
        string evaluation ``wait_for_function`` needs)."""
        deadline = time.monotonic() + timeout
        while not self.page.evaluate(expression):
            if time.monotonic() > deadline:
                raise AssertionError(f"still false after {timeout} s: {expression}")
            time.sleep(0.05)

    def texts(self, selector: str) -> list[str]:
        return list(self.page.eval_on_selector_all(selector, "nodes => nodes.map(n => n.textContent.trim())"))

    def foreign(self) -> list[str]:
        """Requests to anything but the view's own server (a CDN, a font, a tracker)."""
        return [url for url in self.requests if not url.startswith(self.origin)]


@contextmanager
def open_view(browser: Any, url: str, hash_path: str = "#/") -> Iterator[ViewPage]:
    """Open the view at ``hash_path`` in a fresh context; requests elsewhere than the server are aborted."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    origin = url.rstrip("/")
    opened = ViewPage(page, origin)

    def route(route: Any) -> None:
        if route.request.url.startswith(origin):
            route.continue_()
        else:
            route.abort()

    page.route("**/*", route)
    page.on("request", lambda request: opened.requests.append(request.url))
    page.on("console", lambda message: opened.errors.append(f"console: {message.text}")
            if message.type == "error" else None)
    page.on("pageerror", lambda error: opened.errors.append(f"page error: {error}"))
    page.goto(url + hash_path, wait_until="load")
    opened.wait()
    try:
        yield opened
    finally:
        context.close()


def docs_screenshot(page: Any, name: str) -> Path:
    """A screenshot for docs/view.md: written to docs/images/view/ when $EVALCLI_DOCS_SCREENSHOTS is set (so the
    docs' pictures are made by these tests), else beside the other test artifacts."""
    from tests.browser import screenshot

    if os.environ.get("EVALCLI_DOCS_SCREENSHOTS"):
        folder = Path(__file__).resolve().parent.parent / "docs" / "images" / "view"
        folder.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(folder / name), full_page=False)
        return folder / name
    return screenshot(page, name)
