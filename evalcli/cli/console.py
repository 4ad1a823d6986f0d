"""The console of the ``evalcli`` command: where output goes, the progress bar and warnings, and the one place
user errors become messages and exit codes."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Iterable, Iterator
from typing import IO, TYPE_CHECKING

import typer

from ..errors import EvalcliError, ExitCode, locked_database
from ..secrets import redact_text
from ..streams import RedactedStream
from ..words import CONTROLS, inert

if TYPE_CHECKING:  # rich is imported when something is printed: `evalcli --help` never loads it
    from rich.console import Console
    from rich.segment import Segment



_own_stderr: IO[str] | None = None
"""While ``quiet_target_output`` holds file descriptor 2, the real stderr, where evalcli's own lines still go."""
_own_stdout: IO[str] | None = None
"""While ``quiet_target_output`` holds file descriptor 1, the real stdout (the table, the verdict, ``--json -``)."""


def make_console(stderr: bool = False) -> Console:
    """A console for stdout or stderr: no markup, no emoji codes (a user's ``auto:x:`` or an agent's ``:smile:`` is
    printed as written), no highlighting, no terminal control characters from what it prints (``_inert_console``);
    off a terminal 160 columns and no wrapping."""
    file = _own_stderr if stderr else _own_stdout
    console = _inert_console()(stderr=stderr, file=file, highlight=False, markup=False, emoji=False, soft_wrap=False)
    if not console.is_terminal:
        # a log or a pipe has no width to fit: tables get 160 columns, and lines of text are never wrapped
        console = _inert_console()(stderr=stderr, file=file, highlight=False, markup=False, emoji=False, soft_wrap=False,
                                width=160)
    return console


@functools.cache
def _inert_console() -> type[Console]:
    """rich's ``Console``, whose printed text never holds a character of ``words.CONTROLS``
    (docs/history.md#what-a-terminal-is-sent). rich drops BEL, BS, VT, FF and CR from text, and passes every other
    control character: an agent's ``ESC [2J`` cleared the screen of whoever ran ``evalcli show``, ``ESC ]52`` wrote
    their clipboard. They are dropped after rich has laid the text out: each is zero cells wide to rich, so tables
    keep their alignment. rich's own colours and cursor moves are its control segments, which pass."""
    from rich.console import Console, ConsoleOptions, RenderableType
    from rich.segment import Segment

    class InertConsole(Console):
        def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
            for segment in super().render(renderable, options):
                if segment.control or not CONTROLS.search(segment.text):
                    yield segment
                else:
                    yield Segment(inert(segment.text), segment.style)

    return InertConsole


def own_stdout_fd() -> int:
    """The file descriptor of the real stdout: 1, or its copy while ``quiet_target_output`` holds 1."""
    return _own_stdout.fileno() if _own_stdout is not None else 1


@contextlib.contextmanager
def quiet_target_output(active: bool) -> Iterator[None]:
    """``run --quiet``: while the run goes on, file descriptors 1 and 2 are ``os.devnull``, so nothing the agent
    writes (its logging, its prints to stdout or stderr, a library's warnings, a subprocess's output) passes;
    evalcli's own lines (the verdict, the conversations that errored, an error, ``--json -``) still reach the real
    stdout and stderr (docs/ci.md, "--quiet")."""
    global _own_stderr, _own_stdout
    if not active or _own_stderr is not None:
        yield
        return
    with _held_fd(2) as err, _held_fd(1) as out:
        _own_stderr, _own_stdout = err, out
        try:
            yield
        finally:
            _own_stderr = _own_stdout = None


@contextlib.contextmanager
def _held_fd(fd: int) -> Iterator[IO[str]]:
    """File descriptor ``fd`` pointed at ``os.devnull`` for a while, and a redacted stream to the real one."""
    stream = sys.stderr if fd == 2 else sys.stdout
    stream.flush()
    saved = os.dup(fd)
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, fd)
    os.close(quiet)
    own = os.fdopen(os.dup(saved), "w", encoding="utf-8", errors="replace", closefd=True)
    redacted = RedactedStream(own)
    try:
        yield redacted  # type: ignore[misc]  # a text stream: write, flush, isatty, fileno
    finally:
        redacted.flush()
        own.close()
        stream.flush()  # what the agent left buffered goes to os.devnull, not to the real stream
        os.dup2(saved, fd)
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
        locked = locked_database(exc)
        if locked is not None:
            make_console(stderr=True).print("error: " + str(locked), style="red", markup=False, soft_wrap=True)
            raise typer.Exit(locked.exit_code) from None
        if debug:
            import traceback

            sys.stderr.write(redact_text(traceback.format_exc()))
            sys.stderr.flush()
            raise typer.Exit(ExitCode.INTERNAL) from None
        make_console(stderr=True).print(f"internal error: {type(exc).__name__}: {redact_text(str(exc))}\n"
                                    "  this is a bug in evalcli; run again with --debug for the traceback",
                                    style="red", markup=False, soft_wrap=True)
        raise typer.Exit(ExitCode.INTERNAL) from None


def plain_argument_help() -> None:
    """Arguments read ``DATASET...`` and ``RUN_ID`` in help, as options do: typer would add Python types
    (``<list[Path]>``) and braces (``{DATASET}...``)."""
    import typer.core

    argument = typer.core.TyperArgument
    if hasattr(argument, "display_type_rich"):
        argument.display_type_rich = lambda self, ctx: None  # type: ignore[method-assign]
    if hasattr(argument, "_usage_display_name"):
        def usage_name(self: typer.core.TyperArgument) -> str:
            name = str(self.metavar or self.name).upper()
            name = name if self.required else f"[{name}]"
            return name + ("..." if self.nargs != 1 else "")

        argument._usage_display_name = usage_name  # type: ignore[method-assign]
