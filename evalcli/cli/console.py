"""The console of the ``evalcli`` command: where output goes, the progress bar and warnings, and the one place
user errors become messages and exit codes."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterable, Iterator
from typing import IO, TYPE_CHECKING, Any

import typer

from ..errors import INTERNAL_ERROR, EvalcliError
from ..secrets import redact_text

if TYPE_CHECKING:  # rich is imported when something is printed: `evalcli --help` never loads it
    from rich.console import Console

    from ..results import ItemResult


class RedactedStream:
    """A text stream (stdout or stderr) whose every write has its secrets replaced (SPEC §23) before it reaches the
    terminal: what evalcli prints, a target's own prints, a traceback. Text is passed on a line at a time (what is
    after the last newline waits for the next write or a flush), so a secret written in two pieces is still whole
    when it is redacted."""

    HOLD = 1 << 16
    """Characters of an unfinished line held at most."""

    def __init__(self, raw: IO[str]) -> None:
        self.raw = raw
        self._held = ""

    def write(self, text: str) -> int:
        whole = self._held + text
        cut = whole.rfind("\n") + 1
        self._held = whole[cut:]
        if cut:
            self.raw.write(redact_text(whole[:cut]))
        if len(self._held) > self.HOLD:
            self._release()
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def _release(self) -> None:
        held, self._held = self._held, ""
        if held:
            self.raw.write(redact_text(held))

    def flush(self) -> None:
        self._release()
        self.raw.flush()

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, buffer... are the stream's own
        return getattr(self.raw, name)


def redact_terminal() -> None:
    """From now on, everything written to ``sys.stdout`` and ``sys.stderr`` is redacted (the CLI's entry point;
    for the rest of the process, so a traceback Python prints on the way out is redacted too)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, RedactedStream):
            setattr(sys, name, RedactedStream(stream))


_own_stderr: IO[str] | None = None
"""While ``quiet_target_output`` holds file descriptor 2, the real stderr, where evalcli's own lines still go."""


def make_console(stderr: bool = False) -> Console:
    """A console for stdout or stderr: no markup, no highlighting; off a terminal 160 columns and no wrapping."""
    from rich.console import Console

    file = _own_stderr if stderr else None
    console = Console(stderr=stderr, file=file, highlight=False, markup=False, soft_wrap=False)
    if not console.is_terminal:
        # a log or a pipe has no width to fit: tables get 160 columns, and lines of text are never wrapped
        console = Console(stderr=stderr, file=file, highlight=False, markup=False, soft_wrap=False, width=160)
    return console


@contextlib.contextmanager
def quiet_target_output(active: bool) -> Iterator[None]:
    """``run --quiet``: while the run goes on, file descriptor 2 is ``os.devnull``, so what the agent writes to stderr
    (its logging, its prints, a library's warnings, a subprocess's output) does not pass; evalcli's own lines (the
    verdict, the conversations that errored, an error) still reach the real stderr (docs/ci.md, "--quiet")."""
    global _own_stderr
    if not active or _own_stderr is not None:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 2)
    os.close(quiet)
    own = os.fdopen(os.dup(saved), "w", encoding="utf-8", errors="replace", closefd=True)
    redacted = RedactedStream(own)
    _own_stderr = redacted  # type: ignore[assignment]  # a text stream: write, flush, isatty, fileno
    try:
        yield
    finally:
        redacted.flush()
        _own_stderr = None
        own.close()
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


@contextlib.contextmanager
def user_errors(debug: bool = False) -> Iterator[None]:
    """The one place user errors become messages and exit codes; bugs keep their traceback behind --debug."""
    try:
        yield
    except EvalcliError as exc:
        err = make_console(stderr=True)
        err.print("error: " + redact_text(str(exc)), style="red", markup=False, soft_wrap=True)
        raise typer.Exit(exc.exit_code) from None
    except (typer.Exit, typer.Abort, KeyboardInterrupt):
        raise
    except Exception as exc:  # noqa: BLE001 - a bug: its message shown, its traceback under --debug
        if debug:
            import traceback

            sys.stderr.write(redact_text(traceback.format_exc()))
            sys.stderr.flush()
            raise typer.Exit(INTERNAL_ERROR) from None
        make_console(stderr=True).print(f"internal error: {type(exc).__name__}: {redact_text(str(exc))}\n"
                                    "  this is a bug in evalcli; run again with --debug for the traceback",
                                    style="red", markup=False, soft_wrap=True)
        raise typer.Exit(INTERNAL_ERROR) from None


class CliEvents:
    """Progress bar (only on a terminal) and warnings, on stderr."""

    def __init__(self, quiet: bool) -> None:
        self.err = make_console(stderr=True)
        self.quiet = quiet
        self.progress: Any = None
        self.task: Any = None
        self.signals = 0
        self.waiting_on: str | None = None
        self.limits: dict[str, tuple[int, int]] = {}
        """Models throttled after 429s (SPEC §27): their calls in flight and the configured concurrency."""

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
