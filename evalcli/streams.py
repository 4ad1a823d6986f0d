"""Text streams whose every write is redacted (docs/secrets.md) and whose reader may go away: the terminal of the
``evalcli`` command, and of each ``--workers`` worker (docs/performance.md#workers), which prints what its target
prints as the run's own process would. Apart from the command's console so a worker redacts without importing it."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterable
from typing import IO, Any

from .secrets import redact_text


class PipeSafe:
    """A text stream whose reader may go away (``evalcli run --json - | head -1``): once a write or a flush meets a
    closed pipe, its file descriptor points at ``os.devnull`` and every later write is dropped, so the command goes
    on (the run finishes, is stored, writes its files) and exits with its own code, never an internal error
    (docs/reference/exit-codes.md)."""

    def __init__(self, raw: IO[str]) -> None:
        self.raw = raw
        self.gone = False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                self.raw.write(text)
            except BrokenPipeError:
                self._reader_gone()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self.raw.flush()
            except BrokenPipeError:
                self._reader_gone()

    def _reader_gone(self) -> None:
        self.gone = True
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.raw.fileno())  # what the stream still buffers is flushed there, without an error
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, buffer... are the stream's own
        return getattr(self.raw, name)


class RedactedStream(PipeSafe):
    """A text stream (stdout or stderr) whose every write has its secrets replaced (docs/secrets.md) before it reaches the
    terminal: what evalcli prints, a target's own prints, a traceback. Text is passed on a line at a time (what is
    after the last newline waits for the next write or a flush), so a secret written in two pieces is still whole
    when it is redacted. A reader that went away ends its output quietly (``PipeSafe``)."""

    HOLD = 1 << 16
    """Characters of an unfinished line held at most."""

    def __init__(self, raw: IO[str]) -> None:
        super().__init__(raw)
        self._held = ""

    def write(self, text: str) -> int:
        whole = self._held + text
        cut = whole.rfind("\n") + 1
        self._held = whole[cut:]
        if cut:
            super().write(redact_text(whole[:cut]))
        if len(self._held) > self.HOLD:
            self._release()
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def _release(self) -> None:
        held, self._held = self._held, ""
        if held:
            super().write(redact_text(held))

    def flush(self) -> None:
        self._release()
        super().flush()


def redact_terminal() -> None:
    """From now on, everything written to ``sys.stdout`` and ``sys.stderr`` is redacted (the CLI's entry point;
    for the rest of the process, so a traceback Python prints on the way out is redacted too)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, RedactedStream):
            setattr(sys, name, RedactedStream(stream))
