"""Output planning for ``evalcli run``: where each report goes, checked before anything runs.

A path that cannot be written is exit 2, with no conversation played and no LLM money spent. With several
datasets each file output gets one file per dataset, with distinct names. Under ``--json -`` stdout carries
only the JSON.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from ..errors import UsageError


def check_writable(path: Path, what: str) -> None:
    """A file that can be created or overwritten here; missing folders count as creatable when their
    nearest existing ancestor is writable."""
    if path.is_dir():
        raise UsageError(f"{what} {path} is a directory", f"give a file path, e.g. {path / ('out' + _ext(what))}")
    if path.exists():
        if not os.access(path, os.W_OK):
            raise UsageError(f"cannot write {what} {path}: permission denied", "choose a path you can write")
        return
    ancestor = path.parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir() or not os.access(ancestor, os.W_OK | os.X_OK):
        raise UsageError(f"cannot write {what} {path}: {ancestor} is not a folder you can write",
                         "choose a path in a folder you can write")


def _ext(what: str) -> str:
    return {"--json": ".json", "--junit": ".xml", "--markdown": ".md", "--html": ".html"}.get(what, "")


def open_for_writing(path: Path) -> IO[str]:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.open("w", encoding="utf-8")


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
    real = os.fdopen(os.dup(saved), "w", encoding="utf-8", closefd=True)
    try:
        yield real
    finally:
        real.flush()
        real.close()
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
