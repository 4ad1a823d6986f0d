"""The HTML report of a run (docs/html-report.md): one self-contained file, written by ``evalcli run --html`` and
``evalcli report RUN [--baseline RUN] --html PATH``.

``HtmlReport`` is a report like the others in ``evalcli.reports``: it is handed each conversation once, in
dataset order, and renders jinja2 templates (autoescaped) into a page with inline CSS, script and
SVG that loads nothing from anywhere. ``report_sources`` reads what else the page shows from the
database (the run's row, registered scorers across earlier runs, the baseline diff).
"""

from __future__ import annotations

from .compare import comparison_page
from .page import HtmlReport, report_for_run
from .sources import ReportSources, report_sources

__all__ = ["HtmlReport", "ReportSources", "comparison_page", "report_for_run", "report_sources"]
