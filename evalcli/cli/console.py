"""The console of the ``evalcli`` command: where output goes, the progress bar and warnings, and the one place
user errors become messages and exit codes."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterable, Iterator
from typing import IO, TYPE_CHECKING, Any

import typer

from ..errors import EvalcliError, ExitCode
from ..secrets import redact_text

if TYPE_CHECKING:  # rich is imported when something is printed: `evalcli --help` never loads it
    from rich.console import Console



class RedactedStream:
    """A text stream (stdout or stderr) whose every write has its secrets replaced (docs/secrets.md) before it reaches the
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
            raise typer.Exit(ExitCode.INTERNAL) from None
        make_console(stderr=True).print(f"internal error: {type(exc).__name__}: {redact_text(str(exc))}\n"
                                    "  this is a bug in evalcli; run again with --debug for the traceback",
                                    style="red", markup=False, soft_wrap=True)
        raise typer.Exit(ExitCode.INTERNAL) from None
