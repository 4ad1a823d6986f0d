"""``--otel-endpoint`` (docs/otel.md): one OTLP/HTTP request (protobuf, as every receiver takes it) per run.

The URL is the option's, else ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (used as it is), else
``OTEL_EXPORTER_OTLP_ENDPOINT`` + ``/v1/traces``; headers come from ``OTEL_EXPORTER_OTLP_TRACES_HEADERS`` or
``OTEL_EXPORTER_OTLP_HEADERS`` (``key=value,key=value``, URL-encoded) and the timeout from ``..._TIMEOUT``
(milliseconds). The protobuf encoding comes from ``opentelemetry-proto`` (``pip install 'evalcli[otel]'``).

A URL or timeout that cannot work is a usage error before anything runs (``check``); a receiver that cannot be
reached, refuses the spans or does not answer in time is ``SendFailed``: the run is already stored, so the caller
reports it as a warning and keeps the run's exit code. No message holds a header, and a URL's credentials are
redacted.
"""

from __future__ import annotations

import base64
import http
import http.client
import importlib.util
import os
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from ..errors import EvalcliError, UsageError
from ..secrets import redact_url

DEFAULT_TIMEOUT_MS = 10000


class SendFailed(EvalcliError):
    """The receiver did not take the run's spans (unreachable, an HTTP error, no answer in time)."""


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


def headers(env: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ) if env is None else env
    raw = env.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or env.get("OTEL_EXPORTER_OTLP_HEADERS") or ""
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
    for resource in request["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    message = ParseDict(request, ExportTraceServiceRequest())
    return bytes(message.SerializeToString())


def check(url: str, env: dict[str, str] | None = None) -> None:
    """Refuse, before the run, an endpoint that cannot work: not an http(s) URL with a host, or a timeout that is not
    a positive number of milliseconds."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"--otel-endpoint {redact_url(url)} is not an http(s) URL with a host",
                         "give the OTLP/HTTP receiver's URL, e.g. --otel-endpoint http://localhost:4318")
    timeout_seconds(env)
    if importlib.util.find_spec("opentelemetry.proto") is None or importlib.util.find_spec("google.protobuf") is None:
        raise UsageError("--otel-endpoint needs opentelemetry-proto", "pip install 'evalcli[otel]'")


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
    """Send the request; ``SendFailed`` says why the receiver did not take it (never with a header's value)."""
    timeout = timeout_seconds()
    body = protobuf(request)
    sent = urllib.request.Request(url, data=body, method="POST",
                                  headers={"Content-Type": "application/x-protobuf", **headers()})
    shown = redact_url(url)
    try:
        with urllib.request.urlopen(sent, timeout=timeout) as answer:
            answer.read()
    except urllib.error.HTTPError as exc:  # the status's own phrase, never what the receiver wrote back
        raise SendFailed(f"--otel-endpoint {shown} refused the run's spans: HTTP {exc.code} {_phrase(exc.code)}",
                         "check the URL (an OTLP/HTTP receiver takes POST /v1/traces) and the headers in "
                         "OTEL_EXPORTER_OTLP_HEADERS") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(exc, TimeoutError) or isinstance(reason, TimeoutError):
            raise SendFailed(f"--otel-endpoint {shown} did not answer within {timeout:g} s",
                             "check the receiver, or allow it longer with OTEL_EXPORTER_OTLP_TIMEOUT "
                             "(milliseconds)") from None
        raise SendFailed(f"--otel-endpoint {shown} cannot be reached: {reason}",
                         "start the receiver, or check the URL") from None


def _phrase(code: int) -> str:
    try:
        return http.HTTPStatus(code).phrase
    except ValueError:
        return ""
