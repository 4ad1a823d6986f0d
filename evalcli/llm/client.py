"""Every LLM call in evalcli (docs/models.md): one client with retries, back-off, a response cache and usage records.

Each model takes one of three paths: OpenAI-compatible endpoints are spoken to directly over a pooled aiohttp
session (``openai_compat``), the embedded model runs in-process (``local_model``), every other provider goes
through litellm (``litellm_backend``, imported only then); ``EVALCLI_LLM_BACKEND=litellm`` sends every call
through litellm. Retries, the per-model 429 pause, timeouts, error messages, the cache, usage and cost are
the same whichever path a call takes. ``import evalcli.llm`` imports none of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..errors import EvalcliError, ExitCode, describe
from ..messages import Message
from .budget import purpose_group
from .cache import ResponseCache
from .local_model import is_local
from .preflight import model_problem
from .ratelimit import AdaptiveLimit, Slots, retry_after
from .settings import LLMSettings
from .usage import CallRecord, UsageSink, current_usage

EVALCLI_ONLY_KEYS = frozenset({"is_error", "source"})
"""Message keys evalcli uses itself; they are stripped before messages reach a provider."""

RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529})
PARAMS = ("temperature", "max_tokens", "seed", "tools", "response_format")


class LLMError(EvalcliError):
    """A model call failed for good (after retries, or with an error retrying cannot fix)."""

    exit_code = ExitCode.ERRORED


class BudgetSpent(LLMError):
    """A call that was not started: the budget of its purpose (``--max-cost``, ``--max-tokens``) is spent."""

    exit_code = ExitCode.BUDGET


def import_litellm() -> Any:
    """litellm, imported on first use with the local cost map and the embedded local model registered."""
    from .litellm_backend import import_litellm as imported

    return imported()


def reply_text(response: dict[str, Any]) -> str | None:
    """The text content of the first choice of a chat-completion response (``content_text``)."""
    try:
        content = response["choices"][0]["message"].get("content")
    except (KeyError, IndexError, TypeError, AttributeError):
        return None
    return content_text(content)


def content_text(content: Any) -> str | None:
    """A message's text: its ``content`` string, or its text parts joined when a server sends content as a list of
    parts (``[{"type": "text", "text": ...}]``, as some OpenAI-compatible servers do); ``None`` when it has none."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [part["text"] for part in content if isinstance(part, dict) and part.get("type") in ("text", None)
                 and isinstance(part.get("text"), str)]
        return "".join(texts) if texts else None
    return None


def reply_refusal(response: dict[str, Any]) -> str | None:
    """The words of a refusal (OpenAI's ``message.refusal``, sent with no content), when the first choice is one."""
    try:
        refusal = response["choices"][0]["message"].get("refusal")
    except (KeyError, IndexError, TypeError, AttributeError):
        return None
    return refusal if isinstance(refusal, str) and refusal.strip() else None


def provider_messages(messages: list[Message]) -> list[Message]:
    """Copies of the messages without the keys only evalcli uses (``is_error``, ...)."""
    return [{k: v for k, v in m.items() if k not in EVALCLI_ONLY_KEYS} for m in messages]


def redact(text: str) -> str:
    """The text with every secret known replaced (docs/secrets.md)."""
    from ..secrets import redact_text

    return redact_text(text)


def _status(exc: BaseException) -> int | None:
    code = getattr(exc, "status_code", None)
    return code if isinstance(code, int) else None


def _retryable(exc: BaseException) -> bool:
    retryable = getattr(exc, "retryable", None)
    if isinstance(retryable, bool):
        return retryable
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError, ConnectionError)):
        return True
    status = _status(exc)
    if status is not None:
        return status in RETRYABLE_STATUS or status >= 500
    name = type(exc).__name__
    return name in {"APIConnectionError", "Timeout", "APITimeoutError", "ServiceUnavailableError"}


def _usage(response: dict[str, Any]) -> tuple[int, int]:
    """The prompt and completion tokens the provider reported: ``usage`` is its report, read leniently (a server that
    sends it in another shape, or a count that is not a whole number of tokens, counts 0: the call's answer stands)."""
    usage = response.get("usage")
    if not isinstance(usage, dict):
        return 0, 0
    return _token_count(usage.get("prompt_tokens")), _token_count(usage.get("completion_tokens"))


def _token_count(value: Any) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    elif isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


class LLMClient:
    """Makes model calls (each on its model's path) with retries, adaptive back-off, judge limits and caching."""

    def __init__(self, settings: LLMSettings | None = None, cache: ResponseCache | None = None) -> None:
        self.settings = settings or LLMSettings()
        self.cache = cache
        self._paused_until: dict[str, float] = {}
        """Per model: the ``time.monotonic()`` moment before which no call starts (after a 429)."""
        self._local_turn: asyncio.Lock | None = None
        self._limits: dict[tuple[str, str], Slots] = {}
        """Per (provider, model): the calls in flight to it, adapted to its 429s."""
        self.on_throttle: Callable[[str, int, int], None] | None = None
        """Told (model, limit, configured concurrency) each time a model's limit of calls in flight moves."""
        self._judge_slots: asyncio.Semaphore | None = None
        self._judge_loop: asyncio.AbstractEventLoop | None = None
        self._reachability: dict[str, str | None] = {}
        self.unpriced: set[str] = set()
        """Models litellm has no price for (it said so once): asking again would raise on every call."""
        self._paths: dict[tuple[str, str | None], Any] = {}
        """Per (model, api_base): its ``openai_compat.Route``, ``"local"`` or ``"litellm"``."""
        self._prices: dict[tuple[str, str, Any], tuple[dict[str, Any], str | None] | None] = {}
        """Per (model, provider, model that answered): the table entry pricing it and the region, if priced."""
        self._in_flight: dict[tuple[int, str], asyncio.Future[None]] = {}
        """Per (event loop, cache key): a cacheable call being made; the same request waits for it, then reads its reply
        from the cache (docs/models.md, "Cache")."""

    def path(self, model: str, api_base: str | None = None) -> str:
        """Which path calls to this model take: ``openai`` (Chat Completions spoken by evalcli), ``local`` (the
        embedded model, in-process) or ``litellm``."""
        found = self._route(model, api_base)
        return found if isinstance(found, str) else "openai"

    def _route(self, model: str, api_base: str | None) -> Any:
        key = (model, api_base)
        if key not in self._paths:
            from .openai_compat import route

            if self.settings.backend == "litellm":
                self._paths[key] = "litellm"
            elif is_local(model):
                self._paths[key] = "local"
            else:
                self._paths[key] = route(model, api_base) or "litellm"
        return self._paths[key]

    async def aclose(self) -> None:
        """Close the running loop's pooled connections (they are also closed when the loop shuts down)."""
        from .openai_compat import close_transport

        await close_transport()

    def _judge_semaphore(self) -> asyncio.Semaphore:
        # a semaphore belongs to one event loop: a client used again by a later run gets a fresh one
        loop = asyncio.get_running_loop()
        if self._judge_slots is None or self._judge_loop is not loop:
            self._judge_slots = asyncio.Semaphore(max(1, self.settings.judge_concurrency))
            self._judge_loop = loop
        return self._judge_slots

    async def complete(
        self,
        *,
        model: str,
        messages: list[Message],
        purpose: str,
        temperature: float | None = None,
        max_tokens: int | None = None,
        seed: int | None = None,
        tools: list[dict[str, Any]] | None = None,
        response_format: dict[str, Any] | None = None,
        api_base: str | None = None,
        cache_key: str | None = None,
        accept: Callable[[dict[str, Any]], bool] | None = None,
        usage_sink: UsageSink | None = None,
        turn_index: int | None = None,
    ) -> dict[str, Any]:
        """One chat completion as a plain OpenAI-format dict.

        With ``cache_key`` and a cache, a stored response is returned (recorded as a cache hit) and a
        fresh one is stored, but only when ``accept`` (if given) approves it. Every call is recorded
        in ``current_usage`` and in ``usage_sink``, with ``turn_index`` when the call was made for a turn.
        """
        started = time.monotonic()
        cache = self.cache if cache_key else None
        flight: tuple[int, str] | None = None
        mine: asyncio.Future[None] | None = None
        if cache is not None and cache_key is not None:
            flight = (id(asyncio.get_running_loop()), cache_key)
            if (making := self._in_flight.get(flight)) is not None:
                # the same request is being made: its reply is this one's once cached; if it brings none (it failed,
                # or was not accepted) this one is made at once, beside any other that waited (never one at a time)
                await asyncio.wait([making])
            cached = cache.get(cache_key)
            if cached is not None and (accept is None or accept(cached)):
                self._record(CallRecord(purpose, model, 0, 0, 0.0, True, _ms(started), turn_index), usage_sink)
                return cached
            if making is None:
                mine = self._in_flight[flight] = asyncio.get_running_loop().create_future()
        try:
            return await self._complete(model, messages, purpose, temperature, max_tokens, seed, tools,
                                        response_format, api_base, cache_key, accept, usage_sink, turn_index, started)
        finally:
            if mine is not None and flight is not None:
                if self._in_flight.get(flight) is mine:
                    del self._in_flight[flight]
                mine.set_result(None)

    async def _complete(self, model: str, messages: list[Message], purpose: str, temperature: float | None,
                        max_tokens: int | None, seed: int | None, tools: list[dict[str, Any]] | None,
                        response_format: dict[str, Any] | None, api_base: str | None, cache_key: str | None,
                        accept: Callable[[dict[str, Any]], bool] | None, usage_sink: UsageSink | None,
                        turn_index: int | None, started: float) -> dict[str, Any]:
        """``complete`` past the cache: the call, its record, and its reply cached when accepted."""
        cache = self.cache if cache_key else None
        kwargs: dict[str, Any] = {"model": model, "messages": provider_messages(messages)}
        optional = {
            "temperature": temperature,
            "max_tokens": max_tokens,
            "seed": seed,
            "tools": tools or None,
            "response_format": response_format,
            "api_base": api_base,
        }
        kwargs.update({k: v for k, v in optional.items() if v is not None})
        slots = self._judge_semaphore() if purpose == "judge" else contextlib.nullcontext()
        async with slots:
            response, cost = await self._call_with_retries(kwargs, purpose)
        prompt_tokens, completion_tokens = _usage(response)
        self._record(
            CallRecord(purpose, model, prompt_tokens, completion_tokens, cost, False, _ms(started), turn_index),
            usage_sink,
        )
        if cache is not None and cache_key is not None and (accept is None or accept(response)):
            cache.put(cache_key, model, response)
        return response

    def _record(self, rec: CallRecord, extra: UsageSink | None) -> None:
        sink = current_usage.get()
        if sink is not None:
            sink.record(rec)
        if extra is not None and extra is not sink:
            extra.record(rec)

    def _unreachable(self, model: str) -> str | None:
        """A missing package or key for this model (checked once per model): retrying cannot fix it."""
        if model not in self._reachability:
            self._reachability[model] = model_problem(model)
        return self._reachability[model]

    async def _call_with_retries(self, kwargs: dict[str, Any], purpose: str) -> tuple[dict[str, Any], float]:
        model = str(kwargs["model"])
        problem = self._unreachable(model)
        if problem:
            raise LLMError(problem, "install what it names, or choose another model")
        attempt_once = self._attempt(model, kwargs)
        slots = self._slots(model, kwargs.get("api_base"))
        failures = attempt = 0
        waited = 0.0
        last: BaseException | None = None
        too_long: float | None = None
        """A ``Retry-After`` longer than the call's timeout: the call ends at once, saying so."""
        while True:
            attempt += 1
            await self._wait_for_model(model)
            ticket = await slots.acquire() if slots is not None else None
            outcome = "failed"
            try:
                async with self._turn_of(model):
                    # the budget is asked when the call is sent, after every wait (judge slot, model slot, 429
                    # pause, the local model's turn): a run passes it by at most the calls already in flight
                    _check_budget(purpose, model)
                    # asyncio.timeout, unlike wait_for, does not wrap every call in a task of its own
                    async with asyncio.timeout(self.settings.timeout + 1):
                        answer = await attempt_once()
                outcome = "ok"
                return answer
            except BudgetSpent:
                outcome = "unsent"  # says nothing of the model's rate
                raise
            except Exception as exc:  # noqa: BLE001 - a provider may raise anything; classified below
                last = exc
                if _status(exc) == 429:
                    outcome = "rate_limited"
                    # a 429 is retried after its Retry-After for as long as the call's timeout allows in all,
                    # whatever the retry count: a run whose calls met 429s and then succeeded has no errors
                    pause = self._rate_pause(exc, attempt)
                    if waited + pause > self.settings.timeout:
                        too_long = pause if pause > self.settings.timeout else None
                        break
                    waited += max(pause, 0.05)  # a Retry-After of 0, again and again, still ends
                    # every call to this model waits until then: the provider said when it may resume
                    until = time.monotonic() + pause
                    self._paused_until[model] = max(self._paused_until.get(model, 0.0), until)
                    continue
                failures += 1
                if not _retryable(exc) or failures > self.settings.retries:
                    break
                # a server error's Retry-After is bounded by the call's timeout as a 429's is (docs/models.md): a 503
                # asking for an hour would otherwise hold the run that long, on every retry
                asked = retry_after(exc)
                if asked is not None and asked > self.settings.timeout:
                    too_long = asked
                    break
                delay = self._backoff(exc, failures)
            finally:
                if slots is not None and ticket is not None:
                    slots.release(ticket, outcome)
            await asyncio.sleep(delay)
        assert last is not None
        note = "" if too_long is None else (f" (it asked to retry after {too_long:g} s, longer than the call's timeout "
                                            f"({self.settings.timeout:g} s))")
        raise LLMError(
            f"model {model} failed after {attempt} attempt{'s' if attempt != 1 else ''}: "
            f"{_describe(last, self.settings.timeout)}{note}",
            "check the model name, the provider's API key variable and base URL; "
            "EVALCLI_LLM_RETRIES and EVALCLI_LLM_TIMEOUT tune retries and timeouts",
        ) from None

    def _slots(self, model: str, api_base: str | None) -> Slots | None:
        """The calls in flight to this (provider, model), adapted to its 429s (docs/budgets.md); the embedded model has its
        own turn instead."""
        if is_local(model):
            return None
        key = (api_base or "", model)
        found = self._limits.get(key)
        if found is None:
            found = self._limits[key] = Slots(AdaptiveLimit(self.settings.model_concurrency),
                                              lambda rule: self._throttle_changed(model, rule))
        return found

    def _throttle_changed(self, model: str, rule: AdaptiveLimit) -> None:
        if self.on_throttle is not None:
            with contextlib.suppress(Exception):  # whoever watches cannot break a model call
                self.on_throttle(model, rule.limit, rule.ceiling)

    def throttled(self) -> dict[str, tuple[int, int]]:
        """The models whose calls in flight are held below the configured concurrency: (limit, concurrency)."""
        return {model: (s.rule.limit, s.rule.ceiling) for (_, model), s in self._limits.items() if s.rule.throttled}

    def _turn_of(self, model: str) -> contextlib.AbstractAsyncContextManager[Any]:
        """The embedded model runs one completion at a time: a call waits for its turn before its timeout starts
        (eight judges queued behind each other are not eight timeouts)."""
        if not is_local(model):
            return contextlib.nullcontext()
        if self._local_turn is None:
            self._local_turn = asyncio.Lock()
        return self._local_turn

    def _attempt(self, model: str, kwargs: dict[str, Any]) -> Callable[[], Awaitable[tuple[dict[str, Any], float]]]:
        """One attempt on the model's path: the response as a plain dict, and its cost."""
        found = self._route(model, kwargs.get("api_base"))
        timeout = self.settings.timeout
        if found == "litellm":
            from .litellm_backend import acompletion, import_litellm

            import_litellm()  # its seconds of import are no attempt's: they never count against the timeout
            return lambda: acompletion(kwargs, timeout, self.unpriced)
        params = {k: kwargs[k] for k in PARAMS if k in kwargs}
        if found == "local":
            return lambda: _local(model, kwargs["messages"], params)
        from .openai_compat import request_body, transport

        body = request_body(found, kwargs["messages"], params)

        async def direct() -> tuple[dict[str, Any], float]:
            response = await (await transport()).post(found, body, timeout)
            return response, self._cost(found, response)

        return direct

    def _cost(self, found: Any, response: dict[str, Any]) -> float:
        """The response priced from litellm's table as litellm prices it (0 for a model it has no price for)."""
        from . import catalog

        served = response.get("model")
        key = (found.name, found.provider, served)
        if key not in self._prices:
            info = catalog.pricing_info(found.name, served if isinstance(served, str) else None, found.provider)
            self._prices[key] = (info, catalog.data_residency(found.provider, found.api_base)) if info else None
        priced = self._prices[key]
        usage = response.get("usage")
        if priced is None or not isinstance(usage, dict):
            return 0.0
        return catalog.cost(priced[0], usage, response.get("service_tier"), priced[1])

    def _backoff(self, exc: BaseException, failures: int) -> float:
        return max(self._delay(failures), retry_after(exc) or 0.0)

    def _delay(self, failures: int) -> float:
        base = min(self.settings.backoff_max, self.settings.backoff_base * 2.0 ** (failures - 1))
        return base * (0.5 + random.random() / 2)

    def _rate_pause(self, exc: BaseException, attempt: int) -> float:
        """How long a 429 asks to wait: its ``Retry-After``, else the back-off."""
        asked = retry_after(exc)
        return asked if asked is not None else self._delay(attempt)

    async def _wait_for_model(self, model: str) -> None:
        while True:
            remaining = self._paused_until.get(model, 0.0) - time.monotonic()
            if remaining <= 0:
                return
            await asyncio.sleep(remaining)


def _check_budget(purpose: str, model: str) -> None:
    """Raise ``BudgetSpent`` when the run's budget of ``purpose`` is spent (docs/reliability.md, Budgets): asked by
    every call, of every purpose, at the moment it would be sent."""
    sink = current_usage.get()
    refused = sink.refusal(purpose) if sink is not None else None
    if refused is not None:
        raise BudgetSpent(f"no {purpose_group(purpose)} call to {model} was started: {refused}",
                          "--resume the run with a larger --max-cost or --max-tokens to continue it")


def _ms(started: float) -> float:
    return (time.monotonic() - started) * 1000


async def _local(model: str, messages: list[Message], params: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """The embedded model, called in-process (one completion at a time, off the event loop); it is free."""
    from .local_model import run

    cancelled = threading.Event()
    try:
        return await asyncio.to_thread(run, model, messages, params, cancelled), 0.0
    except asyncio.CancelledError:
        cancelled.set()  # a timed-out completion stops at its next token instead of holding the model
        raise
    except Exception as exc:  # noqa: BLE001 - llama.cpp may raise anything; litellm's custom provider retries it too
        from .openai_compat import ProviderError

        raise ProviderError("APIConnectionError", describe(exc), retryable=True) from None


def _describe(exc: BaseException, timeout: float) -> str:
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        text = f"Timeout: request timed out after {timeout:g} s"
    elif type(exc).__name__ == "ProviderError":
        text = str(exc)
    else:
        from .litellm_backend import describe_error

        text = describe_error(exc, timeout)
    text = redact(text)  # before it is cut: a secret across the cut would leave its start (docs/secrets.md)
    return text[:500] + "..." if len(text) > 500 else text
