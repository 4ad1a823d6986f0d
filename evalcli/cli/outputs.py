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


def per_run(path: Path, runs: list[tuple[Path, str | None]]) -> list[Path]:
    """One output path per run (a dataset, and the ``--target`` it runs against or ``None``): the path itself for one
    run, else ``out.<name>.ext`` with names made distinct: the dataset's stem (then its folder and stem) when there
    are several datasets, the target when there are several targets, then a number."""
    if len(runs) == 1:
        return [path]
    datasets = list(dict.fromkeys(d for d, _ in runs))
    names = {d: d.stem for d in datasets}
    if len(set(names.values())) < len(names):
        names = {d: f"{d.resolve().parent.name}-{d.stem}" for d in datasets}
    parts = []
    for dataset, target in runs:
        part = [names[dataset]] if len(datasets) > 1 else []
        if target is not None and len({t for _, t in runs}) > 1:
            part.append(_slug(target))
        parts.append(".".join(part) or "run")
    if len(set(parts)) < len(parts):
        parts = [f"{p}-{i + 1}" for i, p in enumerate(parts)]
    return [path.with_name(f"{path.stem}.{name}{path.suffix}") for name in parts]


def _slug(text: str) -> str:
    """A target as a file-name part: ``model:openai/gpt-4o`` -> ``model-openai-gpt-4o``."""
    import re

    for prefix in ("http://", "https://"):
        text = text.replace(prefix, "")
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")
    return slug[:60] or "target"


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
