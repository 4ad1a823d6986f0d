"""The one thread that writes during a run (docs/storage.md): the event loop never waits on SQLite.

Jobs (functions of a connection) are fed through a queue; those already waiting are written together in
one transaction, and if that fails each is retried on its own, so one bad job cannot take others down.
A database another process holds locked stalls only this thread: conversations, timeouts and Ctrl-C go on.
"""

from __future__ import annotations

import queue
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from ..errors import StoreError
from .connection import Job, Statement, connect, run
from .migrations import rollback

_NOTHING: dict[None, None] = {}
_NULL = _NOTHING.get
"""``None`` adapted to ``None`` (a C callable, no Python frame): binding a ``None`` parameter, ``sqlite3`` looks for an
adapter of ``NoneType``; finding none, it asks its ``PrepareProtocol`` type for ``__adapt__``, which in Python 3.11
formats an ``AttributeError`` message and drops it, ~0.6 us a ``None`` (a turn's rows bind about nine). With one
registered, the same NULL is bound without it (docs/performance.md). Registered unless someone else registered one."""
if (type(None), sqlite3.PrepareProtocol) not in sqlite3.adapters:
    sqlite3.register_adapter(type(None), _NULL)


class StoreWriter:
    """The one thread that writes during a run, fed by a queue; the event loop never waits on SQLite.

    ``submit`` hands over a job (a function of a connection, run inside a transaction) and returns a
    future. Jobs already waiting are written together in one transaction; if that fails, each is retried
    on its own so one bad job cannot take others down. The first error is kept and raised by ``close``.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._jobs: queue.SimpleQueue[tuple[Job, Future[Any]] | None] = queue.SimpleQueue()
        self._ready: Future[None] = Future()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._work, name="evalcli-writer", daemon=True)
        self._thread.start()

    def submit(self, job: Job) -> Future[Any]:
        future: Future[Any] = Future()
        self._jobs.put((job, future))
        return future

    def statements(self, build: Callable[[], list[Statement]], then: Job | None = None) -> Future[Any]:
        """Build statements in the writer thread (serialising and redacting off the loop), then write them; ``then``
        runs on the same connection right after (it reads what they wrote; in a batch, before the batch commits)."""
        def job(conn: Any) -> Any:
            run(conn, build())
            return None if then is None else then(conn)

        return self.submit(job)

    def _work(self) -> None:
        try:
            conn = connect(self.path)
        except sqlite3.Error as exc:
            self.error = exc
            conn = None
        while True:
            first = self._jobs.get()
            if first is None:
                break
            batch = [first]
            while len(batch) < 256:
                try:
                    more = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._jobs.put(None)
                    break
                batch.append(more)
            self._write(conn, batch)
        if conn is not None:
            conn.close()

    def _write(self, conn: sqlite3.Connection | None, batch: list[tuple[Job, Future[Any]]]) -> None:
        if conn is None:
            for _, future in batch:
                future.set_exception(self.error or StoreError("the database cannot be written"))
            return
        if len(batch) > 1:
            try:
                conn.execute("BEGIN IMMEDIATE")
                results = [job(_Nested(conn)) for job, _ in batch]
                conn.execute("COMMIT")
            except BaseException:  # noqa: BLE001 - retried one by one below, where the culprit is told
                rollback(conn)
            else:
                for (_, future), value in zip(batch, results, strict=True):
                    future.set_result(value)
                return
        for job, future in batch:
            try:
                future.set_result(job(conn))
            except BaseException as exc:  # noqa: BLE001 - handed to whoever waits, and kept for close()
                if self.error is None:
                    self.error = exc
                future.set_exception(exc)

    def close(self) -> None:
        """Write everything queued, stop the thread; raise the first write error, if any."""
        self._jobs.put(None)
        self._thread.join()
        if self.error is not None:
            raise self.error


class _Nested:
    """A connection inside an outer transaction: ``run`` skips its own BEGIN/COMMIT there."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.in_transaction = True

    def execute(self, sql: str, params: Any = ()) -> Any:
        if sql in ("BEGIN IMMEDIATE", "COMMIT", "ROLLBACK"):
            return None  # the batch's own transaction decides (a failing job's error reaches the batch)
        return self.conn.execute(sql, params)

    def executemany(self, sql: str, params: Any) -> Any:
        return self.conn.executemany(sql, params)
