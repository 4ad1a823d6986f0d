"""The response cache: model replies in the run database's ``llm_cache`` table (docs/judges.md, docs/simulated-users.md).

The table belongs to the store's migrations; the cache is handed a connection of its own to a migrated
database (``Store.response_cache``), and during a run makes its changes through the run's writer thread.

No secret is stored (docs/reliability.md, "Secrets"): a reply keeps each secret known by its variable as a reference,
``${NAME}``, given its value back when read (a cached simulated user says the same words as on the first run), and any
other secret redacted; a key is a digest of the request with the same references (``secret_references.digestible``),
so no guess of a secret can be confirmed against it.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from concurrent.futures import Future
from datetime import UTC, datetime
from typing import Any, Protocol

from ..secret_references import Unresolved, digestible, restored, stored
from ..secrets import redactor

REFERENCES = "evalcli_references"
"""The key under which a stored reply is kept with its secrets as references (an entry without it predates them)."""


class Writer(Protocol):
    """The run's writer thread, as the cache uses it."""

    def submit(self, job: Any) -> Future[Any]: ...


class ResponseCache:
    """Model responses in SQLite (table ``llm_cache``), keyed on everything that changes the answer.

    During a run, writes (new replies, hit counts) go through the run's writer thread, and a read waits
    only briefly for a lock (the connection's busy timeout), then counts as a miss: the event loop never
    stalls on a database another process holds.
    """

    def __init__(self, conn: sqlite3.Connection, writer: Writer | None = None) -> None:
        """``conn``: a connection of its own to a migrated run database (``Store.response_cache`` opens one); the
        cache closes it. ``writer``: the run's writer thread, which then makes every change."""
        self.writer = writer
        self._lock = threading.Lock()
        self._conn = conn
        self._fresh: dict[str, str] = {}
        """Replies put whose write the writer thread has not made yet (key -> stored JSON): a read sees them at once,
        so the next identical request is a hit as soon as the first reply is in, not once it is committed."""

    @staticmethod
    def key_for(**parts: Any) -> str:
        """sha256 of the canonical JSON of ``parts`` (model, messages, params, schema, scorer id/version), each
        secret in them as a reference to its variable or redacted (``digestible``)."""
        canonical = json.dumps(digestible(parts), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                               default=str)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def _change(self, sql: str, params: tuple[Any, ...]) -> Future[Any] | None:
        if self.writer is not None:
            return self.writer.submit(lambda conn: conn.execute(sql, params))
        with self._lock:
            self._conn.execute(sql, params)
        return None

    def get(self, key: str) -> dict[str, Any] | None:
        """The cached response, counting the hit, with its secrets' values back; ``None`` when absent, when one of
        its secrets has no value now, when the database is too busy to say, or when the entry cannot be read (cut
        short or damaged: a miss, so the model is asked again and its reply replaces the entry; docs/models.md)."""
        try:
            with self._lock:
                row = (self._fresh[key],) if key in self._fresh else \
                    self._conn.execute("SELECT response FROM llm_cache WHERE key = ?", (key,)).fetchone()
        except sqlite3.DatabaseError:  # busy (OperationalError), or a damaged page of the table
            return None
        if row is None:
            return None
        try:
            value = json.loads(row[0])
        except (TypeError, ValueError):
            return None
        if isinstance(value, dict) and REFERENCES in value:
            try:
                value = restored(value[REFERENCES])
            except Unresolved:
                return None
        if not isinstance(value, dict):
            return None
        self._change("UPDATE llm_cache SET hits = hits + 1 WHERE key = ?", (key,))
        return value

    def put(self, key: str, model: str, response: dict[str, Any]) -> None:
        """Store (or replace) a response."""
        # a reply may repeat a secret it was shown (a simulated user its persona's PIN, a judge the transcript): it is
        # kept as a reference to its variable, never as its value
        data = redactor().dumps({REFERENCES: stored(response)}, sort_keys=True, default=str)
        now = datetime.now(UTC).isoformat()
        with self._lock:
            self._fresh[key] = data
        written = self._change("INSERT OR REPLACE INTO llm_cache (key, model, response, created_at, hits) "
                               "VALUES (?, ?, ?, ?, 0)", (key, redactor()(model), data, now))

        def committed(_: object = None) -> None:
            with self._lock:
                if self._fresh.get(key) is data:
                    del self._fresh[key]

        if written is None:
            committed()
        else:
            written.add_done_callback(committed)

    def clear(self) -> int:
        """Delete every cached response; returns how many there were."""
        with self._lock:
            return int(self._conn.execute("DELETE FROM llm_cache").rowcount)

    def stats(self) -> dict[str, int]:
        """``entries`` and total ``hits``."""
        with self._lock:
            entries, hits = self._conn.execute("SELECT COUNT(*), COALESCE(SUM(hits), 0) FROM llm_cache").fetchone()
        return {"entries": int(entries), "hits": int(hits)}

    def close(self) -> None:
        with self._lock:
            self._conn.close()
