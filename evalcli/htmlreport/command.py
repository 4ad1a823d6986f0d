"""``evalcli report`` and the ``--html`` output of ``evalcli run``, as plain functions over the library."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..history import load_run, open_existing
from ..outputs import check_writable, deliver
from ..result import RunResult
from ..secrets import Redactor
from ..store import Store
from .page import HtmlReport
from .sources import report_sources


def report_for_run(store: Store, result: RunResult, redact: Redactor) -> HtmlReport:
    """The HTML report of a run that just finished (``evalcli run --html``), ready to be fed its conversations."""
    return HtmlReport(result, report_sources(store, result.run_id), redact)


@dataclass(frozen=True)
class Written:
    """What ``evalcli report`` wrote."""

    path: Path
    run_id: str
    dataset: str
    conversations: int
    baseline: str | None

    def line(self) -> str:
        against = f", compared with run {self.baseline}" if self.baseline else ""
        return (f"wrote {self.path}: run {self.run_id} of {self.dataset}, {self.conversations} "
                f"conversation{'' if self.conversations == 1 else 's'}{against}")


def report_command(db: Path, run_id: str, html: Path, baseline: str | None = None, tolerance: float = 0.0, *,
                   allow_different: bool = False) -> Written:
    """``evalcli report``: read the stored run (read-only) and write its HTML report to ``html``."""
    check_writable(html, "--html")
    store = open_existing(db)
    try:
        run = load_run(store, run_id)
        sources = report_sources(store, run.result.run_id, baseline, tolerance, allow_different=allow_different)
        report = HtmlReport(run.result, sources, Redactor())
        deliver(run.items(), [report])
    finally:
        store.close()
    report.write(html)
    base = sources.baseline.diff.a.run_id if sources.baseline else None
    return Written(html, run.result.run_id, run.result.dataset, len(report.rows), base)
