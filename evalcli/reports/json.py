"""The JSON result of SPEC §7, streamed; and how one read of a run's conversations feeds every report.

After a run its conversations are read once, in dataset order, and each one is handed to every report in
turn (``deliver``): one stream feeds the terminal, JSON, JUnit, Markdown and HTML alike.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import IO, Any, Protocol

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
        text = self.redact.dumps(item.to_json(), ensure_ascii=False, default=str)
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
