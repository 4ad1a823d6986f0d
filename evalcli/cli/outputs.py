"""Under ``--json -`` stdout carries only the JSON: everything else that reaches file descriptor 1 goes to stderr."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import IO

from ..streams import PipeSafe
from .console import own_stdout_fd


@contextlib.contextmanager
def stdout_for_json(active: bool) -> Iterator[IO[str] | None]:
    """While a run writes JSON to stdout, whatever else reaches file descriptor 1 (a target's prints,
    a C library's output) goes to stderr; the JSON alone goes to the real stdout."""
    if not active:
        yield None
        return
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    real = os.fdopen(os.dup(own_stdout_fd() if own_stdout_fd() != 1 else saved), "w", encoding="utf-8",
                     closefd=True)
    safe = PipeSafe(real)  # a reader that goes away (`| head -1`) ends the JSON quietly
    try:
        yield safe  # type: ignore[misc]  # a text stream: write, flush
    finally:
        safe.flush()
        real.close()
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
