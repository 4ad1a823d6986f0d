"""Where a run's results go: the terminal, JSON, JUnit, Markdown (and HTML) files.

Every output path is checked before anything runs (a path that cannot be written is exit 2, with no
conversation played and no LLM money spent). After a run its conversations are read once, in
dataset order, and each one is handed to every report in turn: one stream feeds every format.
With several datasets each file output gets one file per dataset, with distinct names.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from .errors import UsageError
from .result import ItemResult, RunResult
from .secrets import Redactor


class Report(Protocol):
    """A consumer of one run's conversations, in dataset order."""

    def item(self, item: ItemResult) -> None: ...


def deliver(items: Iterable[ItemResult], reports: list[Any]) -> None:
    """Hand each conversation to every report (each a ``Report``), reading the conversations once."""
    for item in items:
        for report in reports:
            report.item(item)


def per_dataset(path: Path, datasets: list[Path]) -> list[Path]:
    """One output path per dataset: the path itself for one dataset, else ``out.<name>.ext`` with names
    made distinct (the file's stem, then its folder and stem, then a number)."""
    if len(datasets) == 1:
        return [path]
    suffix = path.suffix
    names = [d.stem for d in datasets]
    if len(set(names)) < len(names):
        names = [f"{d.resolve().parent.name}-{d.stem}" for d in datasets]
    if len(set(names)) < len(names):
        names = [f"{n}-{i + 1}" for i, n in enumerate(names)]
    return [path.with_name(f"{path.stem}.{name}{suffix}") for name in names]


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


@dataclass
class JsonReport:
    """The JSON result of SPEC §7, written while conversations stream past (secrets redacted first)."""

    out: IO[str]
    result: RunResult
    redact: Redactor
    indent: str = ""
    count: int = 0

    def __post_init__(self) -> None:
        head = self.redact.value(self.result.to_json(items=[]))
        head.pop("items")
        body = json.dumps(head, ensure_ascii=False, indent=2)
        body = body.replace("\n", "\n" + self.indent)
        self.out.write(body[:-2] + ',\n' + self.indent + '  "items": [')

    def item(self, item: ItemResult) -> None:
        text = json.dumps(self.redact.value(item.to_json()), ensure_ascii=False, default=str)
        self.out.write(("," if self.count else "") + "\n" + self.indent + "    " + text)
        self.count += 1

    def close(self) -> None:
        self.out.write("\n" + self.indent + "  ]\n" + self.indent + "}")


@dataclass
class JsonStream:
    """``--json -``: exactly one JSON document on stdout; several datasets make ``{"runs": [...]}``."""

    out: IO[str]
    several: bool
    runs: int = 0
    reports: list[JsonReport] = field(default_factory=list)

    def report(self, result: RunResult, redact: Redactor) -> JsonReport:
        if self.several:
            self.out.write('{"runs": [\n' if not self.runs else ",\n")
        self.runs += 1
        return JsonReport(self.out, result, redact, indent="  " if self.several else "")

    def close(self) -> None:
        if self.several:
            self.out.write("\n]}" if self.runs else '{"runs": []}')
        self.out.write("\n")
        self.out.flush()


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
