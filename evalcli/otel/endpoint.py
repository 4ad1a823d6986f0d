"""``--otel-endpoint`` (docs/otel.md): one OTLP/HTTP request (protobuf, as every receiver takes it) per run.

The URL is the option's, else ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (used as it is), else
``OTEL_EXPORTER_OTLP_ENDPOINT`` + ``/v1/traces``; headers come from ``OTEL_EXPORTER_OTLP_TRACES_HEADERS`` or
``OTEL_EXPORTER_OTLP_HEADERS`` (``key=value,key=value``, URL-encoded) and the timeout from ``..._TIMEOUT``
(milliseconds). The protobuf encoding comes from ``opentelemetry-proto`` (``pip install 'evalcli[otel]'``).
"""

from __future__ import annotations

import base64
import os
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from ..errors import UsageError
from ..secrets import redact_url


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


def check_endpoint(url: str, env: dict[str, str] | None = None) -> None:
    """Before anything runs: the URL is an http(s) one with a host, and the timeout a number of milliseconds (a
    mistake found after the run would lose its export)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"--otel-endpoint {redact_url(url)} is not an http:// or https:// URL",
                         "give the OTLP/HTTP receiver's URL, e.g. --otel-endpoint http://localhost:6006")
    timeout_ms(env)


def timeout_ms(env: dict[str, str] | None = None) -> float:
    """``OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`` or ``OTEL_EXPORTER_OTLP_TIMEOUT`` (milliseconds; default 10 s)."""
    env = dict(os.environ) if env is None else env
    name = next((n for n in ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT") if env.get(n)), None)
    if name is None:
        return 10000.0
    try:
        value = float(env[name])
    except ValueError:
        value = -1.0
    if not value > 0:
        raise UsageError(f"{name}={env[name]!r} is not a number of milliseconds above 0",
                         "set it to e.g. 10000, or unset it (then 10 s)")
    return value


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


def post(url: str, request: dict[str, Any]) -> None:
    """Send the request; a receiver that refuses it, or cannot be reached, is the user's error to fix."""
    timeout = timeout_ms() / 1000
    body = protobuf(request)
    sent = urllib.request.Request(url, data=body, method="POST",
                                  headers={"Content-Type": "application/x-protobuf", **headers()})
    try:
        with urllib.request.urlopen(sent, timeout=timeout) as answer:
            answer.read()
    except urllib.error.HTTPError as exc:
        raise UsageError(f"--otel-endpoint {redact_url(url)} refused the run's spans: HTTP {exc.code}",
                         "check the URL (an OTLP/HTTP receiver takes POST /v1/traces) and its headers") from None
    except (urllib.error.URLError, OSError) as exc:
        raise UsageError(f"--otel-endpoint {redact_url(url)} cannot be reached: {getattr(exc, 'reason', exc)}",
                         "start the receiver, or check the URL") from None
