"""What the ``http`` and ``mastra`` targets share (docs/targets/http.md): one pooled aiohttp session per run, requests whose
every failure is a sentence naming the URL and status and quoting the reply, and secrets kept out of all of it.

A URL is shown with its credentials (``user:pass@``, the value of a query parameter named like a key or
token) replaced by ``[redacted]``; header values are never shown. What a reply says is quoted to its first 300
characters, with every secret (``evalcli.secrets``: the target's own and every other) redacted first.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..records import record
from ..secrets import Redactor, header_secrets, redact_url, remember, secret_name, url_secrets
from .callable import BadReply
from .forms import FormAdapter
from .session import ConfigProblem, Thread, caller_thread
from .usage import record_target_call

if TYPE_CHECKING:
    import urllib.request

    import aiohttp

QUOTE_CHARS = 300
"""How much of a reply an error quotes."""
MAX_REPLY_BYTES = 32 * 1024 * 1024
"""The largest reply body read (32 MiB): a bigger one, or an endless stream, is the turn's error, not the run's memory."""
REDIRECTS = frozenset({301, 302, 303, 307, 308})
MAX_REDIRECTS = 10


class ReplyFailed(BadReply):
    """No usable reply: a status that is not 2xx, a refused connection, a timeout, or a body the mapping cannot read.
    Its message is the conversation's error as it should read (it names the URL and quotes the reply)."""


def target_redactor(config: Any) -> Redactor:
    """The redactor of a target's own secrets (docs/secrets.md: secret-named header values and URL credentials, whatever
    their length), beside every other secret known; they are remembered for every later output of the process."""
    found = RemoteAdapter.secrets(config)
    remember(found)
    return Redactor(found)


_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
"""A header name as HTTP allows it (a token)."""
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
"""Characters no header value may hold (a line break would start another header)."""


def check_headers(config: Any) -> None:
    """What would fail every request, found when the dataset loads (a ``ConfigProblem``, exit 2) instead: a header name
    HTTP does not allow, a value holding a line break or another control character (a secret pasted with its newline),
    and credentials both in the URL (``user:password@``, sent as Basic auth) and in an ``Authorization`` header."""
    for name, value in config.headers.items():
        if not _HEADER_NAME.fullmatch(name):
            raise ConfigProblem(("headers", name), f"'{name}' cannot be an HTTP header name",
                                "use letters, digits and - only (e.g. X-Api-Key)")
        bad = _CONTROL.search(str(value))
        if bad is not None:  # the value is never quoted: it may be a secret
            what = {"\n": "a line break", "\r": "a carriage return"}.get(bad.group(), "a control character")
            raise ConfigProblem(("headers", name), f"the value of header '{name}' holds {what} "
                                                   f"({bad.group()!a}), which no HTTP request can send",
                                "remove it from the value (a secret read from a file or pasted into CI often ends with "
                                "a newline)")
    if "@" in urlsplit(config.url).netloc and any(k.lower() == "authorization" for k in config.headers):
        raise ConfigProblem(("headers",), "the url holds credentials (user:password@) and the headers an "
                                          "Authorization: give them one way", "keep one of the two")


def _origin(url: str) -> tuple[str, str | None, int | None]:
    parts = urlsplit(url)
    return parts.scheme, parts.hostname, parts.port or {"http": 80, "https": 443}.get(parts.scheme)


def look_up_opener() -> urllib.request.OpenerDirector:
    """The opener of the blocking look-ups before a run (a Mastra agent, an A2A card): no proxies, as for the run's
    own requests, and no credential carried to another origin by a redirect (as ``redirected`` for the run's)."""
    import urllib.request

    class CredentialsStay(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any,
                             newurl: str) -> urllib.request.Request | None:
            new = super().redirect_request(req, fp, code, msg, headers, newurl)
            if new is not None and _origin(new.full_url) != _origin(req.full_url):
                for name in [name for name in new.headers if secret_name(name)]:
                    new.remove_header(name)
            return new

    return urllib.request.build_opener(urllib.request.ProxyHandler({}), CredentialsStay())


def look_up_request(url: str, headers: dict[str, str]) -> urllib.request.Request:
    """A look-up's GET: credentials in the URL (``user:password@``) sent as Basic auth, as the run's requests send
    them (urllib would take them for part of the host name)."""
    import urllib.request

    plain = parsed(url)
    if plain.user is not None:
        import aiohttp

        url = str(plain.with_user(None))
        if not any(name.lower() == "authorization" for name in headers):
            headers = {**headers, "Authorization": aiohttp.BasicAuth(plain.user, plain.password or "").encode()}
    return urllib.request.Request(url, headers=headers)


def quote(text: str, secrets: Redactor) -> str:
    """The first ``QUOTE_CHARS`` characters of a reply, on one line (white space folded), secrets redacted."""
    # redacted before it is cut, so a secret that straddles the cut is still found
    flat = " ".join(secrets(text[: 64 * QUOTE_CHARS]).split())
    return flat[:QUOTE_CHARS] + ("..." if len(flat) > QUOTE_CHARS else "") if flat else "(an empty body)"


@record(frozen=True)
class Answer:
    """A 2xx reply: its status and body (JSON is UTF-8; other text is read as UTF-8 too)."""

    status: int
    raw: bytes

    @property
    def text(self) -> str:
        return self.raw.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body parsed as JSON (``ValueError`` when it is not)."""
        import json

        return json.loads(self.raw)


class Pool:
    """One aiohttp session (a connection pool) for a whole run, made on first use in the run's event loop."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timeouts: dict[float, aiohttp.ClientTimeout] = {}

    def session(self) -> aiohttp.ClientSession:
        import aiohttp

        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop or self._session.closed:
            # no limit of its own: conversations in flight (the run's concurrency) bound the connections
            connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(connector=connector)
            self._loop = loop
        return self._session

    async def request(self, method: str, url: Any, shown: str, *, headers: dict[str, str], body: bytes | None,
                      timeout: float, secrets: Redactor) -> Answer:
        """One request to ``url`` (text, or a ``yarl.URL`` parsed once: see ``parsed``); every failure is a
        ``ReplyFailed`` naming ``METHOD shown`` (the redacted URL)."""
        import aiohttp

        where = f"{method} {shown}"
        limit = self._timeouts.get(timeout)
        if limit is None:
            limit = self._timeouts[timeout] = aiohttp.ClientTimeout(total=timeout)
        first = url if not isinstance(url, str) else parsed(url)
        try:
            for _ in range(MAX_REDIRECTS + 1):
                async with self.session().request(method, url, headers=headers, data=body, timeout=limit,
                                                  allow_redirects=False) as response:
                    raw = await _body(response, where)
                    status, reason = response.status, response.reason or ""
                    location = response.headers.get("Location")
                    if status not in REDIRECTS or not location:
                        break
                    if status in (301, 302, 303) and method != "GET":
                        # never replayed as a body-less GET whose answer would be scored (docs/targets/index.md)
                        raise ReplyFailed(f"{where} answered {status} {reason}, a redirect to "
                                          f"{redact_url(secrets(location))}, which a {method} is not sent to again "
                                          "(give the target's url as the redirect's Location)")
                    try:
                        to = response.url.join(parsed(location))
                    except ValueError as exc:
                        raise ReplyFailed(f"{where} answered {status} {reason}, a redirect to "
                                          f"{redact_url(secrets(location))!r}, which is not a URL ({exc})") from None
                    url, headers = redirected(first, to, headers)
            else:
                raise ReplyFailed(f"{where} redirected more than {MAX_REDIRECTS} times")
        except TimeoutError:
            raise ReplyFailed(f"{where} did not answer within {timeout:g}s (the target's 'timeout')") from None
        except aiohttp.ClientConnectorError as exc:
            raise ReplyFailed(f"{where}: cannot connect ({secrets(_reason(exc))}); is the server running?") from None
        except aiohttp.ClientError as exc:
            raise ReplyFailed(f"{where} failed: {secrets(type(exc).__name__ + ': ' + str(exc))}") from None
        if not 200 <= status < 300:
            text = raw.decode("utf-8", errors="replace")
            raise ReplyFailed(f"{where} answered {status} {reason}: {quote(text, secrets)}".replace("  ", " "))
        return Answer(status, raw)

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None


async def _body(response: aiohttp.ClientResponse, where: str) -> bytes:
    """The reply's body, at most ``MAX_REPLY_BYTES`` of it: more is a ``ReplyFailed`` (docs/targets/http.md)."""
    status = "" if 200 <= response.status < 300 else f" {response.status} {response.reason or ''}".rstrip()
    too_big = ReplyFailed(f"{where} answered{status} with a body over {MAX_REPLY_BYTES // 2**20} MiB, more than a reply "
                          "is read")
    length = response.content_length
    if length is not None and length > MAX_REPLY_BYTES:
        raise too_big
    if length is not None and "Content-Encoding" not in response.headers:  # a compressed body may grow: counted below
        return await response.read()
    chunks, size = [], 0
    async for chunk in response.content.iter_chunked(1 << 16):
        size += len(chunk)
        if size > MAX_REPLY_BYTES:
            raise too_big
        chunks.append(chunk)
    return b"".join(chunks)


def redirected(first: Any, to: Any, headers: dict[str, str]) -> tuple[Any, dict[str, str]]:
    """Where a 307/308 (or a GET's redirect) is followed, with the same method and body, and the headers sent there
    (docs/targets/http.md): credentials stay with the origin (scheme, host, port) they were given for. To another origin
    the secret-named headers (``Authorization``, ``Cookie``, ``X-Api-Key``, ...) and the URL's ``user:password`` are not
    sent, as browsers and HTTP clients do; to the same origin the URL's credentials are sent again."""
    if (to.scheme, to.host, to.port) != (first.scheme, first.host, first.port):
        return to.with_user(None), {name: value for name, value in headers.items() if not secret_name(name)}
    if first.user is not None and to.user is None:
        to = to.with_user(first.user).with_password(first.password)
    return to, headers


def parsed(url: str) -> Any:
    """A URL parsed once for every request to it (aiohttp would parse the text on each one)."""
    from yarl import URL

    return URL(url)


def _reason(exc: Any) -> str:
    cause = getattr(exc, "os_error", None)
    text = getattr(cause, "strerror", None) or str(cause or exc)
    return str(text).strip() or type(exc).__name__


def record_usage(label: str, prompt_tokens: int, completion_tokens: int, started: float, turn_index: int) -> None:
    """The tokens a target reported for one turn, recorded as an LLM call of purpose ``target`` (no price known)."""
    record_target_call(label, prompt_tokens, completion_tokens, turn_index=turn_index, priced=False,
                       duration_ms=(time.perf_counter() - started) * 1000)


def tokens(value: Any) -> int:
    """A token count from a reply (a number, or a number in a string); anything else counts 0."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, (int, float)):
        return max(0, int(value))
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, dict):  # the AI SDK v3 shape: {"total": n, ...}
        return tokens(value.get("total"))
    return 0


class RemoteAdapter(FormAdapter):
    """What the ``http`` and ``mastra`` targets share: their secrets (the URL's credentials, the header values), the
    thread of a conversation (a callable target's rule; ``http`` gives every one a fresh thread), and the run's
    connection pool (``self.pool``, made in ``prepare``)."""

    pool: Pool
    speaks_http = True
    tools_mockable = False  # its tools run in the service
    error_results_ran = True

    @property
    def outside_hint(self) -> str:
        return "its tools run in the service, where evalcli's plan cannot reach them"

    @classmethod
    def secrets(cls, config: Any) -> set[str]:
        return url_secrets(config.url) | header_secrets({k: str(v) for k, v in config.headers.items()})

    def thread(self, options: Mapping[str, Any], *, multi_turn: bool) -> Thread:
        return caller_thread(options, multi_turn=multi_turn)

    async def aclose(self) -> None:
        await self.pool.close()
