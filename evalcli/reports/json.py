"""The JSON result of docs/reference/json.md, streamed; and how one read of a run's conversations feeds every report.

After a run its conversations are read once, in dataset order, and each one is handed to every report in
turn (``deliver``): one stream feeds the terminal, JSON, JUnit, Markdown and HTML alike. When only the JSON
needs every conversation (``--quiet --json``), each one's JSON is rendered while the run goes on instead, as the
writer thread stores it (``JsonSpool``), and written out in dataset order at the end.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import field
from typing import IO, Any, Protocol

from ..records import record
from ..results import ItemResult, RunResult
from ..secrets import Redactor


class Report(Protocol):
    """A consumer of one run's conversations, in dataset order."""

    def item(self, item: ItemResult) -> None: ...


def deliver(items: Iterable[ItemResult], reports: list[Any]) -> None:
    """Hand each conversation to every report (each a ``Report``), reading the conversations once."""
    for item in items:
        for report in reports:
            report.item(item)


@record
class JsonReport:
    """The JSON result of docs/reference/json.md, written while conversations stream past (secrets redacted first)."""

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
        self.rendered(item_json(item, self.redact))

    def rendered(self, text: str) -> None:
        """A conversation's JSON, rendered already (``item_json``)."""
        self.out.write(("," if self.count else "") + "\n" + self.indent + "    " + text)
        self.count += 1

    def close(self) -> None:
        self.out.write("\n" + self.indent + "  ]\n" + self.indent + "}")


def item_json(item: ItemResult, redact: Redactor) -> str:
    """One conversation's entry in ``items``, on one line, secrets redacted."""
    return redact.dumps(item.to_json(), ensure_ascii=False, default=str)


class JsonSpool:
    """Each stored conversation's JSON, rendered as the writer thread stores it (``RunOptions.on_stored``), kept in
    a temporary file (memory stays flat in the number of conversations) and given back in dataset order.

    What it holds is what reading the run back would give: each conversation is rendered from its rows just
    written. If one cannot be kept (no temporary file, or its disk is full), ``usable`` is false and the report
    reads the run back after all."""

    def __init__(self, redact: Redactor) -> None:
        self.redact = redact
        self.spans: dict[int, tuple[int, int]] = {}
        self.failed: OSError | None = None
        self.file: IO[bytes] | None = None
        try:
            self.file = tempfile.TemporaryFile()
        except OSError as exc:
            self.failed = exc

    def add(self, item: ItemResult) -> None:
        if self.failed is not None or self.file is None:
            return
        data = item_json(item, self.redact).encode("utf-8")
        try:
            at = self.file.seek(0, 2)
            self.file.write(data)
        except OSError as exc:
            self.failed = exc
            return
        self.spans[item.index] = (at, len(data))  # a conversation written again (a retried batch) replaces its text

    @property
    def usable(self) -> bool:
        """Whether every conversation's text is kept (what is still buffered is written first)."""
        if self.failed is None and self.file is not None:
            try:
                self.file.flush()
            except OSError as exc:
                self.failed = exc
        return self.failed is None

    def texts(self) -> Iterator[str]:
        """The conversations' JSON in dataset order (once ``usable`` said so)."""
        assert self.file is not None
        for index in sorted(self.spans):
            at, size = self.spans[index]
            self.file.seek(at)
            yield self.file.read(size).decode("utf-8")

    def close(self) -> None:
        if self.file is not None:
            with contextlib.suppress(OSError):  # what it could not write out was reported as not usable
                self.file.close()


@record
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
