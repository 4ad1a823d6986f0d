"""What a run tells whoever watches it (docs/python-api.md): a class of no-op methods, each overridden as needed.

The runner never prints; it calls these. A watcher subclasses ``Events`` and overrides what it shows (the CLI's
progress bar and warnings, a test's counter); every method exists on the base, so nothing is looked up by name.
"""

from __future__ import annotations

from ..results import ItemResult


class Events:
    """Every event of a run, each a method that does nothing here (the default for library use: silence)."""

    def started(self, run_id: str, total: int, done: int) -> None:
        """The run began: ``total`` conversations selected, ``done`` of them kept from the run it resumes."""

    def item_done(self, result: ItemResult) -> None:
        """A conversation finished (played and scored, or errored)."""

    def item_kept(self, result: ItemResult) -> None:
        """A conversation a resumed run keeps from the invocation before, as stored (before any is played)."""

    def warning(self, text: str) -> None:
        """Something the user should know, once (validation warnings, conversations a re-run no longer finds)."""

    def notice(self, text: str | None) -> None:
        """A long step the run is waiting on ("loading the local model ..."); ``None`` when it is over."""

    def throttled(self, model: str, limit: int | None, ceiling: int) -> None:
        """A model's calls in flight are held at ``limit`` after 429s (``None``: back at ``ceiling``, the configured
        concurrency; docs/models.md)."""

    def stopping(self) -> None:
        """An interrupt arrived: conversations in flight get their grace period (a second one: stop now)."""

    def close(self) -> None:
        """The run (with its reports) is over: release what showing it held (a progress bar)."""
