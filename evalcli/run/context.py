"""What one run holds, closed when it ends (``RunContext``): target threads, the store's writer thread, the LLM
client and its response cache; and the interpreter's switch interval, shortened while runs are in progress."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..store import Store, StoreWriter
from ..targets import TargetCalls, TargetThreads
from .options import RunOptions

if TYPE_CHECKING:
    from ..llm import LLMClient, LLMSettings

SWITCH_INTERVAL = 0.0005
"""Seconds a thread may hold the GIL while another waits, during a run (Python's default is 5 ms): the
writer and target threads share the GIL with the event loop, and a long hand-over would make every
timer and every reply wait behind them."""

WRITE_BACKLOG = 512
"""Item writes queued at most: conversations that outrun SQLite wait for the writer (bounded memory)."""
FIRST_BACKLOG = 64
"""Item writes queued at most while the writer still makes the run's row (its fingerprint, a walk of every
conversation): what waits behind it does not add to the walk's own memory (docs/performance.md#the-first-turn)."""


_switch_lock = threading.Lock()
_switch_runs = 0
_switch_saved = 0.0


def _hold_switch_interval() -> None:
    """Shorten the interpreter's switch interval while at least one run is in progress in this process."""
    global _switch_runs, _switch_saved
    with _switch_lock:
        if _switch_runs == 0:
            _switch_saved = sys.getswitchinterval()
            sys.setswitchinterval(min(_switch_saved, SWITCH_INTERVAL))
        _switch_runs += 1


def _release_switch_interval() -> None:
    """The last run to end restores the interval it found (runs may overlap: threads, or one event loop)."""
    global _switch_runs
    with _switch_lock:
        _switch_runs -= 1
        if _switch_runs == 0:
            sys.setswitchinterval(_switch_saved)


def _import_quietly(settings: LLMSettings, models: list[str], notice: Callable[[str | None], None],
                    routes: list[tuple[str, str | None]] | None = None) -> None:
    """Import litellm when one of the run's models goes through it (OpenAI-compatible models and the embedded one
    never do, and then it is never imported); finding each model's path reads the model table here too. Load the
    embedded model when the run uses it, saying so: it takes seconds, more the first time its file is assembled."""
    from ..llm import LLMClient, import_litellm, load_local_model, local_model_pending

    with contextlib.suppress(Exception):  # an import that fails is each model call's error, as without warming up
        paths = LLMClient(settings)
        if any(paths.path(model, base) == "litellm" for model, base in (routes or [(m, None) for m in models])):
            import_litellm()
    for model in dict.fromkeys(m for m in models if local_model_pending(m)):
        notice(f"loading the local model {model} (llama.cpp on the CPU) ...")
        try:
            with contextlib.suppress(Exception):  # a model that cannot load is each call's error, as without this
                load_local_model(model)
        finally:
            notice(None)


class RunContext:
    """Everything one run holds, closed when it ends: target threads, the writer, the LLM client and cache.

    It runs with the LLM settings its plan read and checked (``plan_run``), and takes nothing it would leave behind
    if it fails."""

    def __init__(self, store: Store | None, options: RunOptions, settings: LLMSettings, concurrency: int | None = None,
                 on_throttle: Callable[[str, int, int], None] | None = None) -> None:
        self.model_concurrency = max(concurrency or options.concurrency or 0, options.judge_concurrency, 1)
        """Calls in flight to one (provider, model) at most: the run's concurrency (or the judges', if larger)."""
        self.on_throttle = on_throttle
        self.settings = settings
        self.store = store
        self.options = options
        self.writer: StoreWriter | None = store.writer() if store is not None else None
        self.threads = TargetThreads()
        self.calls = TargetCalls(self.threads, options.turn_timeout, self.llm)
        self._llm: LLMClient | None = None
        self._queued: deque[Future[Any]] = deque(maxlen=WRITE_BACKLOG)
        self._first: Future[Any] | None = None
        """The run's row while the writer makes it (``write_first``)."""
        self._write_error: BaseException | None = None
        self._warming: asyncio.Future[None] | None = None
        _hold_switch_interval()  # last: nothing after it can fail, and aclose gives it back

    def llm(self) -> LLMClient:
        """The run's LLM client (made on first use), with the response cache of the run's database."""
        if self._llm is None:
            from ..llm import LLMClient  # a run that calls no model never imports it (docs/performance.md)

            settings = replace(self.settings)
            settings.judge_concurrency = self.options.judge_concurrency
            settings.cache = self.options.use_cache
            settings.model_concurrency = self.model_concurrency
            cache = None
            if self.store is not None and self.options.use_cache:
                cache = self.store.response_cache(self.writer)
            self._llm = LLMClient(settings, cache)
            self._llm.on_throttle = self.on_throttle
        return self._llm

    async def write(self, build: Callable[[], list[Any]]) -> None:
        """Statements built and written by the writer thread; the caller waits without blocking the loop."""
        if self.writer is not None:
            await asyncio.wrap_future(self.writer.statements(build))

    def write_first(self, build: Callable[[], list[Any]]) -> Future[Any] | None:
        """Statements handed to the writer thread ahead of everything queued after them (a new run's row: its
        conversations' rows follow it); the future says how they went (``None``: no database). Until they are
        written, at most ``FIRST_BACKLOG`` writes wait behind them (``keep_up``)."""
        self._first = self.writer.statements(build) if self.writer is not None else None
        return self._first

    def write_later(self, build: Callable[[], list[Any]], then: Callable[[Any], Any] | None = None) -> None:
        """Statements handed to the writer thread (``then`` run after them, on its connection); nobody waits (errors
        surface when the run closes)."""
        if self.writer is not None:
            self._queued.append(self.writer.statements(build, then))

    async def keep_up(self) -> None:
        """Wait while ``WRITE_BACKLOG`` writes are queued, so results cannot pile up in memory faster than
        SQLite takes them (with a zero-latency target the conversations outrun the writer)."""
        if len(self._queued) == WRITE_BACKLOG and not self._queued[0].done():
            with contextlib.suppress(Exception):  # a failed write is raised by the writer's close (its first error)
                await asyncio.wrap_future(self._queued[0])
        first = self._first
        if first is not None and len(self._queued) >= FIRST_BACKLOG and not first.done():
            with contextlib.suppress(Exception):  # the row's error stops the run (Runner._row_done)
                await asyncio.wrap_future(first)

    def warm_up(self, models: list[str], notice: Callable[[str | None], None],
                routes: list[tuple[str, str | None]] | None = None) -> None:
        """When the run will call ``models``, start importing what they need (litellm, for a provider evalcli does
        not speak to itself) in a worker thread as conversations start: the first import takes seconds of CPU, and
        made on the event loop at the first judge or simulator call it stalled every conversation's timers (and
        Ctrl-C). Model calls wait for it with ``llm_ready``."""
        if models and self._warming is None:
            loop = asyncio.get_running_loop()

            def on_loop(text: str | None) -> None:  # told from the worker thread, shown by the loop
                loop.call_soon_threadsafe(notice, text)

            self._warming = asyncio.ensure_future(asyncio.to_thread(_import_quietly, self.settings, models, on_loop,
                                                                    routes))

    async def llm_ready(self) -> None:
        """Wait, without blocking the event loop, until the LLM layer the run started importing is imported."""
        if self._warming is not None and not self._warming.done():
            await asyncio.shield(self._warming)

    async def aclose(self) -> BaseException | None:
        """Flush and stop the writer (off the loop), close the cache, let idle target threads end. Returns the
        first write that failed (the run's result stands; what could not be stored is reported beside it)."""
        try:
            if self.writer is not None:
                try:
                    await asyncio.to_thread(self.writer.close)
                except Exception as exc:  # noqa: BLE001 - a failed write is reported with the result, not instead of it
                    self._write_error = self._write_error or exc
        finally:
            if self._llm is not None:
                await self._llm.aclose()
                if self._llm.cache is not None:
                    self._llm.cache.close()
            self.threads.close()
            _release_switch_interval()
        return self._write_error
