"""A dataset's regular expressions run with a time limit (docs/checks.md, "A regex that never ends").

Python's ``re`` backtracks: ``(a+)+$`` on forty ``a`` and a ``b`` runs for hours, holding the interpreter, so one
pattern in a dataset (a ``matches`` check, a ``/.../`` in a mock's ``when`` or a ``tool_args`` gate) would stop the
whole run with no word. ``search`` gives a match ``LIMIT`` seconds and then raises ``RegexTooSlow``, which the caller
reports as that check's (or that call's) error naming the pattern.

The limit is a ``SIGALRM`` timer: ``re`` checks for signals while it matches, so the handler's exception ends the
match. It is set only where it can be: in the main thread (where Python runs signal handlers), with ``SIGALRM``
nobody else handles (pytest-timeout, a user's own alarm) and no timer already running. Elsewhere (another thread,
Windows) a pattern runs as ``re`` runs it.
"""

from __future__ import annotations

import re
import signal
import threading

LIMIT = 3.0
"""Seconds one match of a dataset's pattern may take before it is an error: far beyond any pattern that does not
backtrack (a simple pattern over a megabyte of text takes milliseconds)."""


class RegexTooSlow(Exception):
    """A pattern that ran past ``LIMIT`` on one text: catastrophic backtracking."""

    def __init__(self, pattern: str, length: int) -> None:
        super().__init__(f"the regular expression /{pattern}/ ran for more than {LIMIT:g} s on a text of {length:,} "
                         "characters and was stopped: it backtracks without end (nested repeats such as (a+)+); "
                         "write it without a repeat inside a repeat")
        self.pattern = pattern


class _Expired(BaseException):
    """Raised by the timer's handler inside ``re`` (a BaseException: no ``except Exception`` between swallows it)."""


def _expire(signum: int, frame: object) -> None:
    raise _Expired


def search(pattern: str, text: str, *, whole: bool = False) -> re.Match[str] | None:
    """``re.fullmatch`` (``whole``) or ``re.search`` of ``pattern`` in ``text``, stopped after ``LIMIT`` seconds with
    ``RegexTooSlow`` where a timer can be set (the module's docstring)."""
    find = re.fullmatch if whole else re.search
    if not _can_time():
        return find(pattern, text)
    previous = signal.signal(signal.SIGALRM, _expire)
    try:
        signal.setitimer(signal.ITIMER_REAL, LIMIT)
        try:
            return find(pattern, text)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except _Expired:
        raise RegexTooSlow(pattern, len(text)) from None
    finally:
        signal.signal(signal.SIGALRM, previous)


def _can_time() -> bool:
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        return False
    if signal.getsignal(signal.SIGALRM) not in (signal.SIG_DFL, None):
        return False  # someone else's alarm (pytest-timeout, the user's own)
    return signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
