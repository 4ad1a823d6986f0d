"""The Chat Completions API spoken by evalcli itself, over one pooled aiohttp session per event loop (docs/models.md).

``route`` says whether a model is reached this way: ``openai/...`` models (and bare names litellm sends to
OpenAI, such as ``gpt-4o-mini``), ``hosted_vllm/...``, and any model without a provider prefix given an
``api_base``. Everything else (another provider's prefix, OpenAI models only served by the Responses API)
goes through litellm. The request is the one litellm would send: the same endpoint, key and headers, the
same model name, and litellm's parameter rules for OpenAI's reasoning models (``max_completion_tokens``;
a temperature they refuse dropped; system messages as user messages where the model takes none) and for
vLLM's tool schemas. Failures come back as ``ProviderError`` named as litellm names them
(``RateLimitError``, ``InternalServerError``, ...), with the provider's message and its ``Retry-After``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import weakref
from collections.abc import AsyncIterator, Mapping
from typing import Any

from ..records import record
from . import catalog

OPENAI_BASE = "https://api.openai.com/v1"
STATUS_NAMES = {400: "BadRequestError", 401: "AuthenticationError", 404: "NotFoundError", 408: "Timeout",
                422: "BadRequestError", 429: "RateLimitError", 500: "InternalServerError", 502: "BadGatewayError",
                503: "ServiceUnavailableError", 504: "Timeout"}
"""The litellm exception each HTTP status becomes (any other status: ``APIError``)."""


class ProviderError(Exception):
    """One failed attempt: ``kind`` is litellm's name for it, ``status_code`` the HTTP status (if any)."""

    def __init__(self, kind: str, message: str, status_code: int | None = None, *, retryable: bool = False,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status_code = status_code
        self.retryable = retryable
        self.response_headers = {k.lower(): v for k, v in (headers or {}).items()}

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}" if self.message else self.kind


@record(frozen=True)
class Route:
    """How one model is reached over Chat Completions."""

    provider: str
    """``openai`` or ``hosted_vllm``: whose parameter rules and prices apply."""
    name: str
    """The model name sent in the request."""
    url: str
    headers: dict[str, str]
    """Secret (the API key): never shown or stored."""
    api_base: str
    proxy: str | None = None
    """The proxy the environment names for this URL (``HTTPS_PROXY``, ``NO_PROXY``...), found once."""

    def __repr__(self) -> str:
        return f"Route({self.provider!r}, {self.name!r}, {self.url!r})"


def is_custom_name(model: str) -> bool:
    """A bare model name litellm knows nothing about (``my-model``): OpenAI-compatible when given an ``api_base``."""
    return "/" not in model and catalog.table().key(model) is None and not catalog.routed_elsewhere(model)


def speaks_openai(model: str) -> bool:
    """Whether the model's capabilities are answered from the table (no litellm needed to know them)."""
    return catalog.provider_and_name(model) is not None or is_custom_name(model)


def route(model: str, api_base: str | None, env: Mapping[str, str] | None = None) -> Route | None:
    """The model's Chat Completions route, or ``None`` when litellm must reach it."""
    source = os.environ if env is None else env
    resolved = catalog.provider_and_name(model)
    if resolved is None and api_base and is_custom_name(model):
        resolved = (catalog.OPENAI, model)
    if resolved is None:
        return None
    provider, name = resolved
    if provider == catalog.OPENAI:
        info = catalog.model_info(name, provider)
        if info is not None and info.get("mode", "chat") != "chat":
            return None  # Responses-only models (deep research, pro, codex): litellm bridges them
        base = api_base or source.get("OPENAI_BASE_URL") or source.get("OPENAI_API_BASE") or OPENAI_BASE
        key = source.get("OPENAI_API_KEY")
        headers = {"OpenAI-Organization": source.get("OPENAI_ORG_ID", ""),
                   "OpenAI-Project": source.get("OPENAI_PROJECT_ID", "")}
    else:
        base = api_base or source.get("HOSTED_VLLM_API_BASE") or ""
        if not base:
            return None  # litellm says what is missing
        key = source.get("HOSTED_VLLM_API_KEY") or "fake-api-key"
        headers = {}
    headers = {k: v for k, v in headers.items() if v}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    headers.update({"Content-Type": "application/json", "Accept": "application/json", "User-Agent": "evalcli"})
    url = base.rstrip("/") + "/chat/completions"
    return Route(provider, name, url, headers, base, _proxy_for(url, source))


def _proxy_for(url: str, env: Mapping[str, str]) -> str | None:
    """The proxy for ``url`` as httpx (litellm's client) reads the environment: ``HTTPS_PROXY``/``HTTP_PROXY``/
    ``ALL_PROXY`` (any case), unless ``NO_PROXY`` covers the host (``*``, the host, or a domain it is in)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    proxies = {k.lower()[: -len("_proxy")]: v for k, v in env.items() if k.lower().endswith("_proxy") and v}
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    host = (parts.hostname or "").lower()
    if not proxy or not host:
        return None
    for entry in (e.strip().lower() for e in proxies.get("no", "").split(",")):
        entry = entry.rsplit(":", 1)[0] if entry.count(":") == 1 else entry  # host:port names the host
        if entry == "*" or (entry and (host == entry.lstrip(".") or host.endswith("." + entry.lstrip(".")))):
            return None
    return proxy


# -- the request ----------------------------------------------------------------------------------------


def request_body(route: Route, messages: list[dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
    """The JSON body litellm would send for these messages and (non-``None``) parameters."""
    params = dict(params)
    name = route.name
    messages = [{k: v for k, v in m.items() if v is not None} for m in messages]  # litellm drops unset keys
    if route.provider == catalog.HOSTED_VLLM:
        if params.get("tools"):
            params["tools"] = _without_strict(params["tools"])
    elif catalog.is_o_series(name):
        messages, params = _o_series(name, messages, params)
    elif catalog.is_gpt5_series(name):
        params = _gpt5(name, params)
    if name in ("gpt-4", "gpt-3.5-turbo-16k") and not catalog.is_o_series(name):
        params.pop("response_format", None)  # these two take none; litellm drops it
    return {"model": name, "messages": messages, **params}


def _max_completion_tokens(params: dict[str, Any]) -> None:
    if "max_tokens" in params:
        params["max_completion_tokens"] = params.pop("max_tokens")


def _o_series(name: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    _max_completion_tokens(params)
    if params.get("temperature") is not None and params["temperature"] != 1:
        params.pop("temperature")
    if not catalog.supports(name, "supports_function_calling"):
        params.pop("tools", None)
    if not catalog.supports(name, "supports_response_schema"):
        params.pop("response_format", None)
    if not catalog.supports(name, "supports_system_messages"):
        messages = [{"content": m.get("content"), "role": "user"} if m.get("role") == "system" else m for m in messages]
    return messages, params


def _gpt5(name: str, params: dict[str, Any]) -> dict[str, Any]:
    _max_completion_tokens(params)
    if "gpt-5" in name and "search" in name:
        allowed = {"max_completion_tokens", "response_format"}
        return {k: v for k, v in params.items() if k in allowed}
    temperature = params.pop("temperature", None)
    if temperature is not None and (temperature == 1 or _effort_is_none(name)):
        params["temperature"] = temperature
    return params


def _effort_is_none(name: str) -> bool:
    """Whether a gpt-5 model reasons at effort ``none`` by default (then it takes any temperature)."""
    if not catalog.supports(name, "supports_none_reasoning_effort"):
        return False
    default = catalog.declared(name, "default_reasoning_effort")
    if default is not None:
        return bool(default == "none")
    return not catalog.catalogue_declares_default_effort()


def _without_strict(value: Any) -> Any:
    """vLLM's tool schemas: litellm removes ``additionalProperties: false`` and ``strict``."""
    if isinstance(value, dict):
        return {k: _without_strict(v) for k, v in value.items()
                if k != "strict" and not (k == "additionalProperties" and v is False)}
    if isinstance(value, list):
        return [_without_strict(v) for v in value]
    return value


# -- the response ---------------------------------------------------------------------------------------


def read_response(status: int, headers: Mapping[str, str], data: bytes) -> dict[str, Any]:
    """The completion in a response, or the ``ProviderError`` litellm would raise for it."""
    if status >= 400:
        kind = STATUS_NAMES.get(status, "APIError")
        raise ProviderError(kind, _error_message(status, data), status, headers=headers,
                            retryable=status in RETRYABLE_STATUS or status >= 500)
    try:
        body = json.loads(data)
    except ValueError as exc:
        raise ProviderError("InternalServerError", str(exc), 500, retryable=True) from None
    if not isinstance(body, dict):
        raise ProviderError("InternalServerError", f"Empty or invalid response from LLM endpoint. Received: {body!r}. "
                            "Check the reverse proxy or model server configuration.", 500, retryable=True)
    choices = body.get("choices")
    if choices is None and isinstance(body.get("error"), (dict, str)) and "choices" not in body:
        raise ProviderError("BadRequestError", _message_of(body) or "Error code: 400", 400)
    if not isinstance(choices, list):
        what = "a response with no 'choices'" if "choices" not in body else \
            f"'choices' that is not a list ({type(choices).__name__})"
        raise ProviderError("InternalServerError", f"provider returned {what}. Raw keys: {sorted(body)}", 500,
                            retryable=True)
    if any(not isinstance(c, dict) or not isinstance(c.get("message"), dict) for c in choices):
        raise ProviderError("InternalServerError", "Invalid response object: a choice has no 'message'", 500,
                            retryable=True)
    return body


RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529})


def _message_of(body: Any) -> str | None:
    if not isinstance(body, dict):
        return None
    error = body.get("error")
    message = error.get("message") if isinstance(error, dict) else None
    if not isinstance(message, str):
        message = body.get("message")
    return message if isinstance(message, str) else None


def _error_message(status: int, data: bytes) -> str:
    try:
        message = _message_of(json.loads(data))
    except ValueError:
        message = None
    return message or f"Error code: {status}"


# -- the transport ---------------------------------------------------------------------------------------


class Transport:
    """One aiohttp session (a pool of keep-alive connections) for one event loop."""

    def __init__(self) -> None:
        import aiohttp

        self._aiohttp = aiohttp
        connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
        # the environment's proxies are read once per route (trust_env would look them and ~/.netrc up in a
        # thread on every request)
        self.session = aiohttp.ClientSession(connector=connector, trust_env=False, auto_decompress=True,
                                             skip_auto_headers=("User-Agent",))
        self._keeper: AsyncIterator[None] | None = _closer(self)

    async def start(self) -> None:
        # an async generator the loop finalises at shutdown (asyncio.run's shutdown_asyncgens) closes the session
        assert self._keeper is not None
        await anext(self._keeper)

    async def post(self, route: Route, body: dict[str, Any], timeout: float) -> dict[str, Any]:
        """One attempt: the completion, or a ``ProviderError``."""
        data = json.dumps(body, ensure_ascii=False).encode()
        errors = self._aiohttp
        options: dict[str, Any] = {"ssl": _ssl_context()} if route.url.startswith("https:") else {}
        if route.proxy:
            options["proxy"] = route.proxy
        for fresh in (False, True):
            try:
                async with asyncio.timeout(timeout):
                    async with self.session.post(route.url, data=data, headers=route.headers, **options) as response:
                        raw = await response.read()
                        return read_response(response.status, response.headers, raw)
            except TimeoutError:
                raise ProviderError("Timeout", f"request timed out after {timeout:g} s", retryable=True) from None
            except errors.ServerDisconnectedError:
                if not fresh:
                    continue  # a pooled connection the server had closed: once more on a new one
                raise ProviderError("APIConnectionError", "Connection error.", retryable=True) from None
            except (errors.ClientConnectionError, errors.ClientPayloadError, OSError):
                raise ProviderError("APIConnectionError", "Connection error.", retryable=True) from None
            except errors.InvalidURL as exc:
                raise ProviderError("APIConnectionError", f"invalid URL {exc}") from None
        raise AssertionError("unreachable")

    async def close(self) -> None:
        await self.session.close()


async def _closer(transport: Transport) -> AsyncIterator[None]:
    """Closes the transport's session when the loop shuts down (and forgets it, so nothing keeps the loop)."""
    try:
        yield
    finally:
        await transport.session.close()
        loop = asyncio.get_running_loop()
        if _transports.get(loop) is transport:
            del _transports[loop]


@functools.cache
def _ssl_context() -> Any:
    """Certificates from ``SSL_CERT_FILE``, else certifi's bundle (as httpx and the openai SDK use), else the system's."""
    import ssl

    cafile = os.environ.get("SSL_CERT_FILE")
    if not cafile:
        try:
            import certifi

            cafile = certifi.where()
        except ImportError:
            cafile = None
    return ssl.create_default_context(cafile=cafile)


_transports: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Transport] = weakref.WeakKeyDictionary()


async def transport() -> Transport:
    """The running loop's transport (made on first use)."""
    loop = asyncio.get_running_loop()
    found = _transports.get(loop)
    if found is None or found.session.closed:
        found = _transports[loop] = Transport()
        await found.start()
    return found


async def close_transport() -> None:
    """Close the running loop's transport, if it has one."""
    found = _transports.pop(asyncio.get_running_loop(), None)
    if found is not None:
        await found.close()
