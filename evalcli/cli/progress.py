"""What ``evalcli run`` and ``evalcli calibrate`` show while a run goes on: a progress bar (on a terminal) and
warnings, on stderr; the run's ``Events``. Imported when a command runs datasets (``evalcli --help`` never loads it)."""

from __future__ import annotations

import threading
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ..run import Events
from .console import make_console

if TYPE_CHECKING:
    from rich.console import Console

    from ..results import ItemResult


class CliEvents(Events):
    """Progress bar (only on a terminal) and warnings, on stderr."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.progress: Any = None
        self.task: Any = None
        self.signals = 0
        self.waiting_on: str | None = None
        self.limits: dict[str, tuple[int, int]] = {}
        """Models throttled after 429s (docs/budgets.md): their calls in flight and the configured concurrency."""
        self.warming: threading.Thread | None = None

    @cached_property
    def err(self) -> Console:
        """Stderr's console, made when first needed: a ``--quiet`` run draws no bar and prints no warning, so rich is
        imported only for its report, after the run (docs/performance.md "Start-up and finish")."""
        return make_console(stderr=True)

    def started(self, run_id: str, total: int, done: int) -> None:
        if self.quiet or not self.err.is_terminal:
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(TextColumn("conversations"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                 TextColumn("{task.description}"), console=self.err, transient=True)
        self.progress.start()
        self.task = self.progress.add_task("", total=total, completed=done)

    def item_done(self, result: ItemResult) -> None:
        if self.progress is not None:
            self.progress.advance(self.task)
        if self.warming is None:
            # the report's modules (rich, ~0.03 s) imported while the conversations wait on their targets, not after
            # the last one (docs/performance.md "Start-up and finish"); a --quiet run draws no table
            self.warming = threading.Thread(target=_import_report_modules, args=(not self.quiet,),
                                            name="evalcli-report-imports", daemon=True)
            self.warming.start()

    def notice(self, text: str | None) -> None:
        """A long step the run waits on: beside the progress bar on a terminal, else a line of its own (a CI log
        then shows why nothing moves); ``None`` when it is over."""
        if self.quiet:
            return
        self.waiting_on = text
        if self.progress is not None:
            self._describe()
        elif text is not None:
            self.err.print(text, markup=False, soft_wrap=True)

    def throttled(self, model: str, limit: int | None, ceiling: int) -> None:
        """A model met 429s: the progress line says it is throttled (without a terminal, a line when it starts and
        one when it ends)."""
        if self.quiet:
            return
        was = model in self.limits
        if limit is None:
            self.limits.pop(model, None)
        else:
            self.limits[model] = (limit, ceiling)
        if self.progress is not None:
            self._describe()
        elif limit is not None and not was:
            self.err.print(f"{model} is rate limited (HTTP 429): throttled to {limit} of {ceiling} calls in flight",
                           markup=False, soft_wrap=True)
        elif limit is None and was:
            self.err.print(f"{model} is no longer throttled: {ceiling} calls in flight", markup=False, soft_wrap=True)

    def _describe(self) -> None:
        parts = [self.waiting_on] if self.waiting_on else []
        parts += [f"{model} throttled ({limit}/{ceiling} in flight)" for model, (limit, ceiling) in self.limits.items()]
        self.progress.update(self.task, description="; ".join(parts))

    def warning(self, text: str) -> None:
        if not self.quiet:
            self.err.print("warning: " + text, style="yellow", markup=False, soft_wrap=True)

    def stopping(self) -> None:
        self.signals += 1
        text = ("interrupted: finishing conversations in flight (press Ctrl-C again to stop now)..."
                if self.signals == 1 else "stopping now: cancelling conversations in flight...")
        self.err.print(text, style="yellow", markup=False, soft_wrap=True)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def _import_report_modules(table: bool) -> None:
    """Import what the run's report is made and printed with (evalcli's reports, their console; the ``table`` unless
    ``--quiet``); a failure here is the report's own to meet and say."""
    try:
        import rich.console

        from ..reports import deliver  # noqa: F401 - the package, its terminal report and text with it

        if table:
            import rich.table  # noqa: F401
    except Exception:  # noqa: BLE001 - imported again, and failing visibly, where the report is made
        pass
