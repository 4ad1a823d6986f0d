"""Calling user code under ``--turn-timeout``: sync targets in worker threads, async ones awaited.

The timeout measures the target's own call only. A sync call's clock starts when a worker thread
picks it up, never while it waits for one, and a call that hangs past its timeout keeps its thread
(Python cannot stop it) while the pool grows a new one, so one hung target never makes healthy
conversations wait or time out. A target that raises ``TimeoutError`` itself is reported as that
error, not as evalcli's timeout.
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from .session import Calls, TurnTimedOut

if TYPE_CHECKING:
    from ..llm import LLMClient

T = TypeVar("T")

THREAD_PREFIX = "evalcli-target"


class FirstTurnGate:
    """A framework that builds shared state on its first use, which two threads at once break, plays the first turn
    (of the run, or of the process) alone. The other conversations wait for it here, before their turn's call starts,
    so the wait never counts against their ``--turn-timeout``; they go once the first turn ended in any way: answered,
    failed, or abandoned past its own timeout (docs/targets/smolagents.md, crewai.md)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._claimed = False
        self.ended = threading.Event()

    def claim(self) -> bool:
        """True for the first caller only: it plays its turn, then calls ``end``."""
        with self._lock:
            if self._claimed:
                return False
            self._claimed = True
            return True

    def end(self) -> None:
        self.ended.set()

    async def wait(self) -> None:
        while not self.ended.is_set():  # a threading event: the run's loop, or another run's, may be waiting on it
            await asyncio.sleep(0.01)

    async def play(self, calls: Calls, fn: Callable[..., Any], *args: Any) -> Any:
        """``calls.call_sync(fn, *args)``: the first turn alone, the others once it ended."""
        if not self.ended.is_set():
            if self.claim():
                try:
                    return await calls.call_sync(fn, *args)
                finally:
                    self.end()
            await self.wait()
        return await calls.call_sync(fn, *args)


class TargetThreads:
    """Worker threads for sync user code, one per call in flight: a new one starts whenever all are busy.

    In-flight calls are bounded by the run's concurrency, so the pool is too, plus one thread for each
    call that hung. A job returns what hands its answer over (``deliver``), called only once its worker counts as idle
    again: the conversation's next call, sent as soon as that answer arrives, finds the worker free instead of starting
    a thread beside it (which grew the pool to 6-8 threads at concurrency 4). Threads are daemons: a call Python cannot
    stop never holds up the process's exit.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], Callable[[], None]] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._threads: list[threading.Thread] = []
        self._closed = False

    def submit(self, job: Callable[[], Callable[[], None]]) -> None:
        """Run ``job`` on an idle worker, or on a new one when none is idle."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the run's target threads are closed")
            if self._idle:
                self._idle -= 1  # reserve an idle worker: it is blocked in get() and takes the next job
            else:
                thread = threading.Thread(target=self._work, name=f"{THREAD_PREFIX}-{len(self._threads) + 1}",
                                          daemon=True)
                self._threads.append(thread)
                # started outside the conversation's context: a worker serves every conversation, and each job runs
                # in its own caller's context (a worker never keeps one conversation's tool plan, docs/hermetic.md)
                contextvars.Context().run(thread.start)
        self._jobs.put(job)

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            deliver = job()
            with self._lock:
                self._idle += 1
            deliver()

    def close(self) -> None:
        """Idle workers end now; a worker still in a call ends when the call returns."""
        with self._lock:
            self._closed = True
            count = len(self._threads)
        for _ in range(count):
            self._jobs.put(None)


class TargetCalls:
    """The ``Calls`` of one run: sync functions on ``TargetThreads``, coroutines awaited, both timed out; ``llm``
    gives the run's LLM client (made on first use; without one, a client of its own)."""

    def __init__(self, threads: TargetThreads, timeout: float | None = None,
                 llm: Callable[[], LLMClient] | None = None) -> None:
        self.threads = threads
        self.timeout = timeout
        self._llm = llm
        self._own_llm: LLMClient | None = None

    def llm(self) -> LLMClient:
        """The run's LLM client (for targets that are a model)."""
        if self._llm is not None:
            return self._llm()
        if self._own_llm is None:
            from ..llm import LLMClient, LLMSettings

            self._own_llm = LLMClient(LLMSettings.from_env())
        return self._own_llm

    async def call_sync(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` in a worker thread (with the caller's context variables)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        started: list[float] = []
        context = contextvars.copy_context()

        def job() -> Callable[[], None]:
            started.append(time.monotonic())
            try:
                value, error = context.run(fn, *args, **kwargs), None
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting conversation
                value, error = None, exc

            def deliver() -> None:
                try:
                    loop.call_soon_threadsafe(_settle, future, value, error)
                except RuntimeError:
                    pass  # the run ended (its loop is closed) while this call hung: nobody waits for its answer

            return deliver

        self.threads.submit(job)
        if self.timeout is None:
            return await future
        while True:
            remaining = self.timeout if not started else self.timeout - (time.monotonic() - started[0])
            if remaining <= 0:
                future.cancel()
                raise TurnTimedOut(self.timeout)
            done, _ = await asyncio.wait([future], timeout=remaining)
            if done:
                return future.result()

    def call_async(self, awaitable: Awaitable[T]) -> Awaitable[T]:
        """What to await for the target's coroutine; only evalcli's own deadline becomes ``TurnTimedOut``. Without a
        deadline that is the coroutine itself: no coroutine of evalcli's in between, which every resumption of the
        target's would pass through (docs/performance.md)."""
        return awaitable if self.timeout is None else self._within(awaitable, self.timeout)

    @staticmethod
    async def _within(awaitable: Awaitable[T], timeout: float) -> T:
        try:
            async with asyncio.timeout(timeout) as deadline:
                return await awaitable
        except TimeoutError:
            if deadline.expired():
                raise TurnTimedOut(timeout) from None
            raise


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.done():
        return  # the conversation gave up on it (timeout or cancellation)
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)
