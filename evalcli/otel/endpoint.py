"""``--otel-endpoint`` (docs/otel.md): one OTLP/HTTP request (protobuf, as every receiver takes it) per run.

The URL is the option's, else ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (used as it is), else
``OTEL_EXPORTER_OTLP_ENDPOINT`` + ``/v1/traces``; headers come from ``OTEL_EXPORTER_OTLP_TRACES_HEADERS`` or
``OTEL_EXPORTER_OTLP_HEADERS`` (``key=value,key=value``, URL-encoded) and the timeout from ``..._TIMEOUT``
(milliseconds). The protobuf encoding comes from ``opentelemetry-proto`` (``pip install 'evalcli[otel]'``).

A URL or timeout that cannot work is a usage error before anything runs (``check``); a receiver that cannot be
reached, refuses the spans, redirects, rejects spans in its answer or has not answered in time is ``SendFailed``:
the run is already stored, so the caller reports it as a warning and keeps the run's exit code. No message holds a
header, and a URL's credentials are redacted (they are sent as ``Basic`` credentials).
"""

from __future__ import annotations

import base64
import http
import http.client
import importlib.util
import json
import os
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

from ..errors import EvalcliError, UsageError
from ..secrets import redact_url

DEFAULT_TIMEOUT_MS = 10000


class SendFailed(EvalcliError):
    """The receiver did not take the run's spans (unreachable, an HTTP error, no answer in time)."""


class Busy(SendFailed):
    """The receiver answered 429, 502, 503 or 504: OTLP's transient answers, sent again after a pause."""

    retry_after: float | None = None
    """The pause the receiver asked for (its ``Retry-After`` in seconds), if it did."""


RETRYABLE = frozenset({429, 502, 503, 504})
"""The HTTP answers OTLP/HTTP says to retry, with exponential backoff (and the receiver's ``Retry-After``)."""
ATTEMPTS = 4
"""How often one request is sent to a receiver that keeps answering one of ``RETRYABLE``."""
BACKOFF_S = 0.5
"""The first pause before a request is sent again (doubled each time, a ``Retry-After`` of up to 5 s instead)."""


def traces_url(option: str | None, env: dict[str, str] | None = None) -> str | None:
    """Where the spans go: the option's URL (``/v1/traces`` added to a bare host), else the environment's."""
    env = dict(os.environ) if env is None else env
    if option:
        return option if urllib.parse.urlsplit(option).path.rstrip("/") else option.rstrip("/") + "/v1/traces"
    if env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
    if env.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return env["OTEL_EXPORTER_OTLP_ENDPOINT"].rstrip("/") + "/v1/traces"
    return None


HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""A header name HTTP can carry (RFC 9110's token)."""
HEADER_VALUE = re.compile(r"[\t\x20-\x7e\x80-\xff]*")
"""A header value HTTP can carry: no line break or other control character, nothing beyond Latin-1."""


def headers_variable(env: dict[str, str] | None = None) -> str:
    """The variable the headers come from: ``OTEL_EXPORTER_OTLP_TRACES_HEADERS`` when set, else
    ``OTEL_EXPORTER_OTLP_HEADERS``."""
    env = dict(os.environ) if env is None else env
    return "OTEL_EXPORTER_OTLP_TRACES_HEADERS" if env.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") else \
        "OTEL_EXPORTER_OTLP_HEADERS"


def check_headers(env: dict[str, str] | None = None) -> None:
    """Refuse, before the run, a header HTTP cannot carry (a value with a line break: a token pasted with its
    newline), naming the header, never its value: urllib would refuse it only after the run, quoting the value."""
    for name, value in headers(env).items():
        if not HEADER_NAME.fullmatch(name):
            problem = f"the header name {name!r} holds a character a header name cannot"
        elif not HEADER_VALUE.fullmatch(value):
            problem = (f"the value of header {name!r} holds a line break, a control character or a character beyond "
                       "Latin-1, which HTTP headers cannot carry")
        else:
            continue
        raise UsageError(f"{headers_variable(env)}: {problem}",
                         "fix the variable: key=value pairs, comma-separated, URL-encoded (%20 for a space)")


def headers(env: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ) if env is None else env
    raw = env.get(headers_variable(env)) or ""
    out = {}
    for pair in raw.split(","):
        key, sep, value = pair.partition("=")
        if sep and key.strip():
            out[urllib.parse.unquote(key.strip())] = urllib.parse.unquote(value.strip())
    return out


def protobuf(request: dict[str, Any]) -> bytes:
    """An OTLP JSON request as protobuf bytes (ids go from hex to base64, protobuf's JSON form of bytes)."""
    try:
        from google.protobuf.json_format import ParseDict  # type: ignore[import-untyped]
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    except ImportError:
        raise UsageError("--otel-endpoint needs opentelemetry-proto", "pip install 'evalcli[otel]'") from None
    request = {"resourceSpans": [  # copies: the request is left as it is (it may be sent again, docs/otel.md)
        {**resource, "scopeSpans": [{**scope, "spans": [
            {**span, **{key: base64.b64encode(bytes.fromhex(span[key])).decode()
                        for key in ("traceId", "spanId", "parentSpanId") if key in span}}
            for span in scope["spans"]]} for scope in resource["scopeSpans"]]}
        for resource in request["resourceSpans"]]}
    message = ParseDict(request, ExportTraceServiceRequest())
    return bytes(message.SerializeToString())


def endpoint_variable(env: dict[str, str] | None = None) -> str:
    """The variable ``--otel-endpoint -`` takes the URL from (``traces_url``)."""
    env = dict(os.environ) if env is None else env
    return "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" if env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") else \
        "OTEL_EXPORTER_OTLP_ENDPOINT"


def check(url: str, env: dict[str, str] | None = None, *, from_env: bool = False) -> None:
    """Refuse, before the run, an endpoint that cannot work: not an http(s) URL with a host, a timeout that is not
    a positive number of milliseconds, or a header HTTP cannot carry. ``from_env``: the URL is the environment's
    (``--otel-endpoint -``), and the message names the variable and its value, not a URL the user never wrote."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        if from_env:
            name = endpoint_variable(env)
            value = (dict(os.environ) if env is None else env).get(name, "")
            raise UsageError(f"--otel-endpoint -: {name}={_not_a_url(value)} is not an http(s) URL with a host",
                             f"set {name} to the OTLP/HTTP receiver's URL, e.g. http://localhost:4318")
        raise UsageError(f"--otel-endpoint {_not_a_url(url)} is not an http(s) URL with a host",
                         "give the OTLP/HTTP receiver's URL, e.g. --otel-endpoint http://localhost:4318")
    timeout_seconds(env)
    check_headers(env)
    if importlib.util.find_spec("opentelemetry.proto") is None or importlib.util.find_spec("google.protobuf") is None:
        raise UsageError("--otel-endpoint needs opentelemetry-proto", "pip install 'evalcli[otel]'")


def _not_a_url(value: str) -> str:
    """A value that is not an http(s) URL, as printed: what comes before an ``@`` with no ``/`` before it is a URL's
    userinfo written without its scheme (``user:password@host:4318``), redacted as a URL's is (docs/secrets.md)."""
    return re.sub(r"^[^/@]*@", "[redacted]@", redact_url(value))


def timeout_seconds(env: dict[str, str] | None = None) -> float:
    """``OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`` / ``OTEL_EXPORTER_OTLP_TIMEOUT`` (milliseconds) in seconds, 10 s unset."""
    env = dict(os.environ) if env is None else env
    for name in ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"):
        raw = env.get(name)
        if raw:
            try:
                value = float(raw)
            except ValueError:
                value = -1.0
            if not value > 0:
                raise UsageError(f"{name}={raw!r} is not a positive number of milliseconds",
                                 f"set it to e.g. {DEFAULT_TIMEOUT_MS}, or unset it")
            return value / 1000
    return DEFAULT_TIMEOUT_MS / 1000


def post(url: str, request: dict[str, Any]) -> None:
    """Send the request, in requests of at most ``BATCH_SPANS`` spans (a receiver limits a request's size: a run of
    thousands of conversations is never refused whole); ``SendFailed`` says why the receiver did not take them all
    (never with a header's value), and how many requests it had taken. A receiver that took a request but rejected
    spans (OTLP's ``partial_success``) did not take the run."""
    batches = list(_batches(request, BATCH_SPANS))
    rejected = 0
    for n, batch in enumerate(batches):
        try:
            rejected += _sent(url, batch)
        except SendFailed as failed:
            if n == 0:
                raise
            raise SendFailed(f"{failed.message} (after {n} of its {len(batches)} requests of at most {BATCH_SPANS} "
                             "spans had been taken)", failed.hint) from None
    if rejected:
        total = sum(len(scope["spans"]) for resource in request["resourceSpans"] for scope in resource["scopeSpans"])
        raise SendFailed(f"--otel-endpoint {redact_url(url)} took the request but rejected {rejected} of the run's "
                         f"{total} spans (its answer's partial_success)",
                         "the receiver's own log says why (evalcli prints nothing it wrote back)")


BATCH_SPANS = 512
"""The most spans one request holds (the OpenTelemetry SDKs' default batch)."""

Batch = dict[tuple[int, int], tuple[dict[str, Any], dict[str, Any], list[Any]]]
"""Spans by (resource, scope) index, with their resource and scope."""


def _batches(request: dict[str, Any], size: int) -> Iterator[dict[str, Any]]:
    """The request cut into requests of at most ``size`` spans, each span under its own resource and scope."""
    batch: Batch = {}
    count = 0
    for r, resource in enumerate(request["resourceSpans"]):
        for c, scope in enumerate(resource["scopeSpans"]):
            for span in scope["spans"]:
                batch.setdefault((r, c), (resource, scope, []))[2].append(span)
                count += 1
                if count == size:
                    yield _request(batch)
                    batch, count = {}, 0
    if count:
        yield _request(batch)


def _request(batch: Batch) -> dict[str, Any]:
    resources: dict[int, dict[str, Any]] = {}
    for (r, _), (resource, scope, spans) in batch.items():
        resources.setdefault(r, {**resource, "scopeSpans": []})["scopeSpans"].append({**scope, "spans": spans})
    return {"resourceSpans": list(resources.values())}


def _sent(url: str, request: dict[str, Any]) -> int:
    """``_post``, sent again after a pause while the receiver answers one of OTLP's transient answers (a collector
    starting, a proxy shedding load), ``ATTEMPTS`` times in all."""
    pause = BACKOFF_S
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return _post(url, request)
        except Busy as busy:
            if attempt == ATTEMPTS:
                raise SendFailed(f"{busy.message} ({ATTEMPTS} times)", busy.hint) from None
            time.sleep(min(busy.retry_after, 5.0) if busy.retry_after is not None else pause)
            pause *= 2
    raise AssertionError("unreachable")  # pragma: no cover


def _post(url: str, request: dict[str, Any]) -> int:
    """Send one request; how many spans the receiver said it rejected. The whole exchange is bounded by the timeout
    (a receiver answering a byte at a time is cut off too); a redirect is not followed (it would resend the headers
    elsewhere, or turn the POST into a GET that drops the spans)."""
    timeout = timeout_seconds()
    body = protobuf(request)
    target, basic = _without_userinfo(url)
    sent = {"Content-Type": "application/x-protobuf", **headers()}
    if basic is not None and not any(key.lower() == "authorization" for key in sent):
        sent["Authorization"] = basic  # as the OpenTelemetry SDKs send a URL's credentials
    shown = redact_url(url)
    outcome: dict[str, Any] = {}

    def exchange() -> None:
        try:
            outcome["answer"] = _exchange(target, body, sent, timeout)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, raised there
            outcome["error"] = exc

    worker = threading.Thread(target=exchange, name="evalcli-otlp-export", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive() or _timed_out(outcome.get("error")):
        raise SendFailed(f"--otel-endpoint {shown} did not answer within {timeout:g} s",
                         "check the receiver, or allow it longer with OTEL_EXPORTER_OTLP_TIMEOUT "
                         "(milliseconds)")
    error = outcome.get("error")
    if isinstance(error, urllib.error.HTTPError):  # the status's own phrase, never what the receiver wrote back
        if 300 <= error.code < 400:
            location = error.headers.get("Location") if error.headers is not None else None
            raise SendFailed(f"--otel-endpoint {shown} answered HTTP {error.code} {_phrase(error.code)}, redirecting "
                             f"to {redact_url(str(location or '(no Location)'))}: the run's spans were not sent there",
                             "give the URL it redirects to as --otel-endpoint (evalcli follows no redirect: it would "
                             "send the headers elsewhere, or drop the spans)")
        failed = SendFailed if error.code not in RETRYABLE else Busy
        refused = failed(f"--otel-endpoint {shown} refused the run's spans: HTTP {error.code} {_phrase(error.code)}",
                         f"a request holds at most {BATCH_SPANS} spans, and one of them is larger than the receiver "
                         "takes: raise its limit (the OpenTelemetry collector's max_request_body_size)"
                         if error.code == 413 else "check the URL (an OTLP/HTTP receiver takes POST /v1/traces) and "
                         "the headers in OTEL_EXPORTER_OTLP_HEADERS")
        if isinstance(refused, Busy) and error.headers is not None:
            refused.retry_after = _seconds(error.headers.get("Retry-After"))
        raise refused
    if isinstance(error, (urllib.error.URLError, OSError, http.client.HTTPException)):
        raise SendFailed(f"--otel-endpoint {shown} cannot be reached: {getattr(error, 'reason', error)}",
                         "start the receiver, or check the URL")
    if error is not None:
        raise error
    return _rejected(*outcome["answer"])


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # the 3xx is then an HTTPError: post() says where it pointed


def _exchange(url: str, body: bytes, sent: dict[str, str], timeout: float) -> tuple[str, bytes]:
    """POST the body; the answer's content type and its first MiB (what ``partial_success`` is read from)."""
    opener = urllib.request.build_opener(_NoRedirect)
    with opener.open(urllib.request.Request(url, data=body, method="POST", headers=sent), timeout=timeout) as answer:
        return str(answer.headers.get("Content-Type") or ""), answer.read(1 << 20)


def _timed_out(error: BaseException | None) -> bool:
    return isinstance(error, TimeoutError) or isinstance(getattr(error, "reason", None), TimeoutError)


def _without_userinfo(url: str) -> tuple[str, str | None]:
    """The URL without its ``user:password@`` and the ``Basic`` credentials made of them (``None`` when it has
    none): urllib would take ``user:password@host`` for a host name."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, host = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    token = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}".encode()
    return urllib.parse.urlunsplit(parts._replace(netloc=host)), "Basic " + base64.b64encode(token).decode()


def _rejected(content_type: str, answer: bytes) -> int:
    """How many spans the receiver's answer says it rejected (OTLP ``partial_success.rejected_spans``), 0 when it
    says none or cannot be read."""
    if not answer:
        return 0
    try:
        if "json" in content_type:
            found = json.loads(answer).get("partialSuccess", {}).get("rejectedSpans", 0)
            return int(found or 0)
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

        response = ExportTraceServiceResponse()
        response.ParseFromString(answer)
        return int(response.partial_success.rejected_spans)
    except Exception:  # noqa: BLE001 - an answer that is not OTLP (a proxy's page): taken, nothing says otherwise
        return 0


def _seconds(value: str | None) -> float | None:
    """A ``Retry-After`` of seconds (an HTTP date is not waited for: the backoff stands)."""
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


def _phrase(code: int) -> str:
    try:
        return http.HTTPStatus(code).phrase
    except ValueError:
        return ""
