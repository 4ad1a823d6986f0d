"""A run's rows in the store (docs/storage.md): its row when it begins, each conversation's as it finishes, and how
it ended. Every write goes through the run's writer thread, never the event loop; without a store, nothing is
recorded and the run is the same."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Collection
from concurrent.futures import Future
from typing import Any

from ..dataset import Dataset
from ..results import ItemResult, Summary
from ..store import StoredOptions, stored_items
from .context import RunContext


class Recorder:
    """The one owner of a run's rows: ``begin``, ``item`` per finished conversation, ``finish``."""

    def __init__(self, context: RunContext, run_id: str, registered: Collection[str] | Callable[[], Collection[str]],
                 on_stored: Callable[[ItemResult], None] | None = None) -> None:
        self.context = context
        self.store = context.store
        self.run_id = run_id
        self._registered = registered
        self.on_stored = on_stored

    @functools.cached_property
    def registered(self) -> set[str]:
        """The ids of the scorers whose scores are stored beside each conversation (``scorers.yaml``'s): given, or
        found (a scan of every turn) by the writer thread when it builds the first conversation's rows, not before
        the first turn (docs/performance.md#the-first-turn)."""
        given = self._registered
        return set(given() if callable(given) else given)

    async def begin(self, dataset: Dataset, options: StoredOptions | None, selected: int | None = None) -> None:
        """The run's row: a new one with ``options`` (what the run keeps of its options and configuration), or with
        ``None`` the resumed run's, running again; ``selected``: the conversations the run selected."""
        store, run_id = self.store, self.run_id
        if store is not None:
            await self.context.write(lambda: store.begin_statements(run_id, dataset, options, selected)
                                     if options is not None else store.resume_statements(run_id, selected))

    def begin_new(self, dataset: Dataset, options: Callable[[], StoredOptions],
                  selected: int | None = None) -> Future[Any] | None:
        """A new run's row, built and written by the writer thread, ``options`` (the configuration's fingerprint, a
        walk of every conversation) made there too, while the first conversations play
        (docs/performance.md#the-first-turn). Queued before any conversation's rows, which follow it; nobody waits:
        the future says how it went (``None``: no database). Made once, though a batch that fails is written again."""
        store, run_id = self.store, self.run_id
        if store is None:
            return None
        made: list[StoredOptions] = []

        def build() -> list[Any]:
            if not made:
                made.append(options())
            return store.begin_statements(run_id, dataset, made[0], selected)

        return self.context.write_first(build)

    def item(self, result: ItemResult) -> None:
        """A finished conversation's rows, handed to the writer (nobody waits); ``on_stored`` is called with it read
        back from them."""
        store, run_id, on_stored = self.store, self.run_id, self.on_stored
        if store is None:
            return
        self.context.write_later(lambda: store.item_statements(run_id, result, self.registered),
                                 None if on_stored is None else
                                 lambda conn: on_stored(next(stored_items(conn, run_id, index=result.index))))

    async def finish(self, summary: Summary, status: str, code: int, completed: int,
                     repeats: dict[str, Any] | None, selected: int) -> None:
        """How the run ended (``completed`` of its ``selected`` conversations), written before the run's result is
        returned (a write that fails is kept by the writer and reported with the result)."""
        store, run_id = self.store, self.run_id
        if store is not None:
            with contextlib.suppress(Exception):
                await self.context.write(lambda: store.finish_statements(run_id, summary, status, code, completed,
                                                                         repeats, selected))

    def finish_later(self, summary: Summary, status: str, code: int, completed: int,
                     repeats: dict[str, Any] | None, selected: int) -> None:
        """How the run ended when it ended by an exception: queued, never awaited (the exception goes on)."""
        store, run_id = self.store, self.run_id
        if store is not None:
            self.context.write_later(lambda: store.finish_statements(run_id, summary, status, code, completed, repeats,
                                                                     selected))
