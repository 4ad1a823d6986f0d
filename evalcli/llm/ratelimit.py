"""Calls in flight to one (provider, model), adapted to its rate limits (docs/budgets.md).

Each (provider, model) has a limit on the calls in flight to it, starting at the configured concurrency. A 429
halves it (once per round: the calls that started before the halving and meet a 429 too were already over the
old limit, and do not halve it again); every 10 successes raise it by one, up to the configured concurrency.
The number of calls in flight that drew the 429 is remembered for ``REMEMBER_SECONDS``: until then the limit
grows back to one below it and no further, so a provider that allows 8 in flight sees evalcli settle at 8
instead of probing 9, halving to 4 and climbing back every few seconds.

``AdaptiveLimit`` is the rule (plain arithmetic, no event loop; ``tests/test_rate_limits.py`` states its
invariant); ``Slots`` makes calls wait for it on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import time
from collections import deque
from collections.abc import Callable

from ..records import record

GROWTH_EVERY = 10
"""Successes that raise the limit by one."""
REMEMBER_SECONDS = 30.0
"""How long the number of calls in flight that met a 429 caps the limit's growth."""


@record(frozen=True)
class Ticket:
    """One call's slot: the round it started in, and how many were in flight with it (itself included)."""

    generation: int
    in_flight: int


class AdaptiveLimit:
    """The limit of one (provider, model): ``start`` a call when ``admits()``, ``finish`` it with its outcome."""

    def __init__(self, ceiling: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.ceiling = max(1, ceiling)
        self.limit = self.ceiling
        self.in_flight = 0
        self.successes = 0
        self.generation = 0
        self.too_many: int | None = None
        """Calls in flight when the last 429 came (growth stops one below it for a while)."""
        self._too_many_at = 0.0
        self._clock = clock

    @property
    def throttled(self) -> bool:
        """Whether the limit is below the configured concurrency."""
        return self.limit < self.ceiling

    def admits(self) -> bool:
        return self.in_flight < self.limit

    def start(self) -> Ticket:
        self.in_flight += 1
        return Ticket(self.generation, self.in_flight)

    def cap(self) -> int:
        """How far the limit may grow now."""
        if self.too_many is not None and self._clock() - self._too_many_at < REMEMBER_SECONDS:
            return max(1, min(self.ceiling, self.too_many - 1))
        return self.ceiling

    def finish(self, ticket: Ticket, outcome: str) -> bool:
        """A call ended: ``ok``, ``rate_limited`` (a 429) or ``failed`` (anything else, which says nothing about the
        rate). Whether the limit changed."""
        self.in_flight = max(0, self.in_flight - 1)
        before = self.limit
        if outcome == "ok":
            self.successes += 1
            if self.successes >= GROWTH_EVERY:
                self.successes = 0
                if self.limit < self.cap():
                    self.limit += 1
        elif outcome == "rate_limited" and ticket.generation == self.generation:
            self.too_many, self._too_many_at = ticket.in_flight, self._clock()
            self.limit = max(1, self.limit // 2)
            self.generation += 1
            self.successes = 0
        return self.limit != before


class Slots:
    """Calls wait here, on the event loop, until their (provider, model) admits one more."""

    def __init__(self, rule: AdaptiveLimit, changed: Callable[[AdaptiveLimit], None] | None = None) -> None:
        self.rule = rule
        self.changed = changed
        """Told each time the limit moves (the progress line says when a model is throttled)."""
        self._waiting: deque[asyncio.Future[None]] = deque()

    async def acquire(self) -> Ticket:
        while not self.rule.admits():
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiting.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter in self._waiting:
                    self._waiting.remove(waiter)
                elif waiter.done() and not waiter.cancelled():
                    self._wake()  # it was woken for a slot it will not take: the next one takes it
                raise
        return self.rule.start()

    def release(self, ticket: Ticket, outcome: str) -> None:
        if self.rule.finish(ticket, outcome) and self.changed is not None:
            self.changed(self.rule)
        self._wake()

    def _wake(self) -> None:
        free = self.rule.limit - self.rule.in_flight
        while free > 0 and self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                free -= 1


def retry_after(exc: BaseException) -> float | None:
    """Seconds asked for by a ``Retry-After`` (or ``retry-after-ms``) header on the error, if any."""
    response_headers = getattr(getattr(exc, "response", None), "headers", None)
    for source in (getattr(exc, "response_headers", None), getattr(exc, "litellm_response_headers", None),
                   response_headers):
        if not source:
            continue
        with contextlib.suppress(Exception):
            if source.get("retry-after-ms"):
                return max(0.0, float(source["retry-after-ms"]) / 1000)
            value = source.get("retry-after") or source.get("Retry-After")
            if value:
                try:
                    return max(0.0, float(value))
                except ValueError:
                    moment = email.utils.parsedate_to_datetime(value)
                    return max(0.0, moment.timestamp() - time.time())
    return None
