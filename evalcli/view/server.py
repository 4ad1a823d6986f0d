"""The ``evalcli view`` web server (docs/view.md): an aiohttp application serving the page, its script and style
(files of this package: no CDN, no build step) and the JSON API the page reads.

Each request reads the database on a connection of its own, in a worker thread, read-only: a run writing the file
never blocks a page (SQLite's WAL lets readers go on beside a writer). Only saving a label writes, in its own short
transaction. Every response is redacted (docs/secrets.md). Bound to loopback unless ``--host`` is given, and then
every request must carry the ``--token``; on loopback, a request naming another host (DNS rebinding) is refused.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import logging
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.typedefs import Handler, Middleware

from ..errors import EvalcliError, StoreError, UsageError
from ..records import record
from ..secrets import Redactor
from ..store import Store
from ..store.browse import MAX_PAGE, MAX_PAGE_SIZE, PAGE_SIZE, ConversationQuery, RunFilter, progress
from ..store.connection import write_back
from ..store.labels import DatabaseBusy, NewLabel, add_label, label_value
from . import data

STATIC = Path(__file__).resolve().parent / "static"
TOKEN_COOKIE = "evalcli_view_token"


@record(frozen=True)
class ViewSettings:
    """How ``evalcli view`` serves: the database, where it listens, the token and who labels."""

    db: Path
    host: str = "127.0.0.1"
    port: int = 8765
    token: str | None = None
    reviewer: str = "reviewer"


def host_name(header: str) -> str:
    """The host of a ``Host`` header, without its port: ``[::1]:8765`` and ``[::1]`` are ``::1``, ``localhost.``
    is ``localhost``."""
    header = header.strip()
    if header.startswith("["):
        inside, _, rest = header[1:].partition("]")
        return inside if not rest or (rest.startswith(":") and rest[1:].isdigit()) else header
    name = header.rsplit(":", 1)[0] if header.count(":") == 1 else header
    return name.rstrip(".").lower()


def loopback(host: str) -> bool:
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_settings(settings: ViewSettings) -> None:
    """A host other than loopback needs a token (anyone who reaches it could read every transcript)."""
    if not loopback(settings.host) and not (settings.token or "").strip():
        raise UsageError(f"--host {settings.host} serves the history beyond this machine: give --token",
                         "add --token SECRET (every request must then carry it), or leave out --host")


class View:
    """The application's state: settings, the redactor of every response."""

    def __init__(self, settings: ViewSettings) -> None:
        self.settings = settings
        self.redact = Redactor(extra={settings.token} if settings.token else ())
        self.path = str(settings.db)

    async def read(self, read: Callable[[Store], Any]) -> web.Response:
        """``read`` of a fresh read-only store, in a worker thread, as a redacted JSON response."""
        def work() -> Any:
            store = Store(self.path, readonly=True)
            try:
                store.conn.execute("PRAGMA busy_timeout = 2000")
                return read(store)
            finally:
                store.close()

        try:
            result = await asyncio.to_thread(work)
        except EvalcliError as exc:
            return self.json({"error": exc.message, "hint": exc.hint}, status=404 if isinstance(exc, StoreError) else 400)
        return self.json(result)

    def json(self, value: Any, status: int = 200) -> web.Response:
        return web.Response(text=self.redact.dumps(value, ensure_ascii=False, default=str), status=status,
                            content_type="application/json")


def _int(request: web.Request, name: str, default: int) -> int:
    """``page`` or ``size``: a whole number (ASCII digits, maybe a minus), else a 400; brought within 1 and its largest
    (docs/view.md), and so answered: ``page=-1`` served the first page and said ``"page": -1``."""
    raw = request.query.get(name)
    if not raw:
        return default
    digits = raw.removeprefix("-")
    if not (digits.isascii() and digits.isdigit()):
        raise web.HTTPBadRequest(text=f"{name} must be a whole number, not '{raw}'")
    return min(max(int(raw), 1), MAX_PAGE if name == "page" else MAX_PAGE_SIZE)


MAX_INDEX = 2**63 - 1
"""The largest index SQLite's INTEGER holds; a larger one names no conversation."""


def conversation_index(raw: str) -> int | None:
    """A conversation's index in a path: ASCII digits only (``str.isdigit`` also takes ``²`` and ``٣``), within
    SQLite's 64 bits; else None (docs/view.md: anything else is a 400)."""
    if not (raw.isascii() and raw.isdigit()) or int(raw) > MAX_INDEX:
        return None
    return int(raw)


def routes(view: View) -> web.RouteTableDef:
    table = web.RouteTableDef()

    @table.get("/")
    async def index(request: web.Request) -> web.StreamResponse:
        response = web.FileResponse(STATIC / "index.html")
        token = request.query.get("token")
        if token and view.settings.token:
            response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="Strict")
        return response

    @table.get("/static/{name}")
    async def static(request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        if name not in {"view.js", "view.css"}:
            raise web.HTTPNotFound()
        return web.FileResponse(STATIC / name)

    @table.get("/api/runs")
    async def runs(request: web.Request) -> web.Response:
        q = request.query
        where = RunFilter(q.get("dataset") or None, q.get("target") or None, q.get("verdict") or None,
                          q.get("since") or None, q.get("until") or None)
        page, size = _int(request, "page", 1), _int(request, "size", PAGE_SIZE)
        return await view.read(lambda store: data.runs_page(store, where, page, size))

    @table.get("/api/runs/{run}")
    async def run(request: web.Request) -> web.Response:
        return await view.read(lambda store: data.run_summary(store, request.match_info["run"]))

    @table.get("/api/runs/{run}/progress")
    async def run_progress(request: web.Request) -> web.Response:
        return await view.read(lambda store: progress(store, request.match_info["run"]))

    @table.get("/api/runs/{run}/conversations")
    async def conversations(request: web.Request) -> web.Response:
        q = request.query
        query = ConversationQuery(q.get("sort") or "failures", q.get("desc") == "1", q.get("status") or None,
                                  q.get("q") or None)
        page, size = _int(request, "page", 1), _int(request, "size", PAGE_SIZE)
        return await view.read(lambda store: data.conversations_page(store, request.match_info["run"], query, page,
                                                                     size))

    @table.get("/api/runs/{run}/conversations/{index}")
    async def conversation(request: web.Request) -> web.Response:
        index = conversation_index(request.match_info["index"])
        if index is None:
            return view.json({"error": "a conversation's index is a whole number", "hint": "0 is the first"}, 400)
        return await view.read(lambda store: data.conversation(store, request.match_info["run"], index))

    @table.post("/api/runs/{run}/conversations/{index}/labels")
    async def label(request: web.Request) -> web.Response:
        return await save_label(view, request)

    @table.get("/api/compare/{a}/{b}")
    async def compare(request: web.Request) -> web.Response:
        return await view.read(lambda store: data.comparison(store, request.match_info["a"], request.match_info["b"]))

    @table.get("/api/compare/{a}/{b}/conversation")
    async def compare_one(request: web.Request) -> web.Response:
        identity = request.query.get("identity", "")
        return await view.read(lambda store: data.compared_conversation(store, request.match_info["a"],
                                                                        request.match_info["b"], identity))

    return table


async def save_label(view: View, request: web.Request) -> web.Response:
    """``{"scorer": ID or "", "value": "pass"|"fail"|0..1, "note": TEXT}`` on a conversation, by this reviewer."""
    if request.content_type != "application/json":  # a form posted from another site cannot send JSON
        raise web.HTTPUnsupportedMediaType(text="send JSON")
    index = conversation_index(request.match_info["index"])
    try:
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or index is None:
            raise UsageError("a label is {scorer, value, note} on a conversation's index (a whole number)", "")
        for name in ("scorer", "note"):
            if not isinstance(body.get(name) or "", str):
                raise UsageError(f"a label's {name} is text, not {type(body[name]).__name__}",
                                 'send e.g. {"scorer": "", "value": "pass", "note": "why"}')
        label = NewLabel(request.match_info["run"], index, str(body.get("scorer") or ""),
                         label_value(body.get("value")), str(body.get("note") or ""), view.settings.reviewer)

        def work() -> dict[str, Any]:
            store = Store(view.path, readonly=True)
            try:
                run_id = store.require_run(label.run_id)["id"]
                data.check_label_target(store, run_id, label.scorer_id)
            finally:
                store.close()
            return add_label(view.path, NewLabel(run_id, label.item_index, label.scorer_id, label.score, label.note,
                                                 label.reviewer), view.redact)

        row = await asyncio.to_thread(work)
    except EvalcliError as exc:
        return view.json({"error": exc.message, "hint": exc.hint}, status=503 if isinstance(exc, DatabaseBusy) else 400)
    return view.json(row)


def bearer(header: str) -> str:
    """The token of ``Authorization: Bearer TOKEN``, the scheme in any case (RFC 9110); "" for any other header."""
    scheme, _, token = header.strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def refused(request: web.Request, status: int, text: str) -> web.Response:
    """A request without the token: JSON ``{error, hint}`` to the API (docs/view.md), text to a page."""
    if request.path.startswith("/api/"):
        return web.json_response({"error": text, "hint": ""}, status=status)
    return web.Response(status=status, text=text)


def guard(view: View) -> Middleware:
    """The token on every request when one is set; on loopback without one, only requests naming a loopback host."""
    token = view.settings.token

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if token:
            given = (request.query.get("token") or request.cookies.get(TOKEN_COOKIE)
                     or bearer(request.headers.get("Authorization", "")))
            if not hmac.compare_digest(given.encode(), token.encode()):
                return refused(request, 401, "evalcli view: this server needs its token: open it with ?token=TOKEN "
                                             "(the --token it was started with)")
        elif not loopback(host_name(request.host or "")):
            return web.Response(status=403, text="evalcli view answers only requests to 127.0.0.1 or localhost")
        try:
            response = await handler(request)
        except web.HTTPException as exc:  # the API answers JSON, its errors too (docs/view.md: The JSON API)
            if exc.status < 400 or not request.path.startswith("/api/"):
                raise
            response = view.json(api_error(request, exc), status=exc.status)
        response.headers["Cache-Control"] = "no-store"
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Content-Security-Policy"] = ("default-src 'self'; img-src 'self' data:; "
                                                       "frame-ancestors 'none'")
        return response

    return middleware


def api_error(request: web.Request, exc: web.HTTPException) -> dict[str, str]:
    """``{error, hint}`` of an API request aiohttp or a handler refused: no such address (404), another method (405),
    a body that is not JSON (415), a page that is not a number (400)."""
    default = f"{exc.status}: {exc.reason}"
    if exc.status == 404 and exc.text == default:
        return {"error": f"no API address {request.path}", "hint": "the addresses are listed in docs/view.md (The JSON API)"}
    if exc.status == 405:
        return {"error": f"{request.method} is not answered at {request.path}", "hint": "GET reads; only labels are POSTed"}
    return {"error": exc.text if exc.text and exc.text != default else exc.reason, "hint": ""}


class QuietClientErrors(logging.Filter):
    """Drops aiohttp's "Error handling request" traceback for a request it could not parse (a URL past 8 KB, a port
    scanner): the client is answered 400 and the terminal stays clean (docs/view.md). evalcli's own errors still
    log."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], HttpProcessingError))


QUIET_CLIENT_ERRORS = QuietClientErrors()


def make_app(settings: ViewSettings) -> web.Application:
    view = View(settings)
    app = web.Application(middlewares=[guard(view)])
    app.add_routes(routes(view))
    return app


async def serve(settings: ViewSettings, started: Callable[[str], None]) -> None:
    """Serve until cancelled (Ctrl-C) or sent SIGTERM or SIGHUP; ``started`` gets the address once it listens. When it stops,
    the labels saved are written into the database file itself (``write_back``)."""
    stop = asyncio.Event()
    for name in ("SIGTERM", "SIGHUP"):  # a CI job's end, a closed terminal: stopped as by Ctrl-C, labels written back;
        try:  # set before the address is printed, which a supervisor may wait for to stop it (docs/view.md)
            number = getattr(signal, name)
            if signal.getsignal(number) is not signal.SIG_IGN:  # ignored (``nohup evalcli view``): left so
                asyncio.get_running_loop().add_signal_handler(number, stop.set)
        except (AttributeError, NotImplementedError, RuntimeError, ValueError):  # Windows, or not the main thread
            pass
    logging.getLogger("aiohttp.server").addFilter(QUIET_CLIENT_ERRORS)
    runner = web.AppRunner(make_app(settings), access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, settings.host, settings.port)
        try:
            await site.start()
        except OSError as exc:
            raise UsageError(f"cannot listen on {settings.host}:{settings.port}: {exc.strerror or exc}",
                             "pick another --port (0 picks a free one)") from None
        host, port = runner.addresses[0][:2]
        shown = f"[{host}]" if ":" in str(host) else host
        started(f"http://{shown}:{port}/")
        await stop.wait()
    finally:
        await runner.cleanup()
        write_back(str(settings.db))
