"""``python bench/run.py --only report``: the HTML report of a stored run of N conversations x T turns.

A run of the benchmark's check-only workload (zero latency) is stored once; then ``evalcli report
latest --html`` is timed as a whole process (start-up included) and, separately, its read + render +
write inside one process; the file's size is taken; and headless Chromium (Playwright, the system
``/usr/bin/chromium``, network blocked) opens it from ``file://`` and reports the page's own timings:
the ``load`` event and the moment the conversation list is ready (filters wired, ``evalcli-ready``).
Targets (docs/html-report.md): written in under 2 s, under 10 MB, loaded in under 2 s.
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench.workload import BENCH, ROOT, Measure, Workload, measure, write_dataset

RENDER = """
import json, sys, time
started = time.perf_counter()
from evalcli.cli.commands import report_command
imported = time.perf_counter()
report_command(__import__("pathlib").Path(sys.argv[1]), "latest", __import__("pathlib").Path(sys.argv[2]))
print(json.dumps({"import": imported - started, "report": time.perf_counter() - imported}))
"""


@dataclass
class ReportFigures:
    """What the section measured (seconds, bytes, milliseconds)."""

    work: Workload
    process: Measure
    imports: float
    render: float
    size: int
    browser: list[dict[str, float]] | None
    why_no_browser: str | None = None


def _python(args: list[str]) -> Measure:
    return measure([sys.executable, *args], cwd=ROOT, env={"PYTHONPATH": str(ROOT)})


def _browser_timings(html: Path, times: int) -> list[dict[str, float]]:
    """The page's own timings, one dict per opening (a fresh browser context each time)."""
    from tests.browser import chromium, open_report

    timings = []
    with chromium() as browser:
        for _ in range(times):
            with open_report(browser, html) as opened:
                if opened.errors or opened.blocked or opened.requests != [opened.url]:
                    raise SystemExit(f"the report did not open cleanly: {opened.errors} {opened.blocked}")
                timings.append(opened.page.evaluate(
                    "(() => { const n = performance.getEntriesByType('navigation')[0];"
                    " return {dom: n.domContentLoadedEventEnd, load: n.loadEventEnd,"
                    " ready: performance.getEntriesByName('evalcli-ready')[0].startTime}; })()"))
    return timings


def measure_report(work: Workload, repeat: int) -> ReportFigures:
    """Store a run of ``work``, then time, weigh and open its HTML report."""
    from tests.browser import chromium_missing

    dataset = write_dataset(work)
    with tempfile.TemporaryDirectory(prefix="evalcli-bench-report-") as tmp:
        db, html = Path(tmp) / "bench.db", Path(tmp) / "report.html"
        stored = _python(["-m", "evalcli", "run", str(dataset), "--db", str(db), "--scorers",
                          str(BENCH / "scorers.yaml"), "--quiet"])
        if stored.exit_code != 0:
            raise SystemExit(f"evalcli run failed (exit {stored.exit_code}): {stored.stderr[-2000:]}")
        command = ["-m", "evalcli", "report", "latest", "--db", str(db), "--html", str(html)]
        process = min((_python(command) for _ in range(max(1, repeat))), key=lambda m: m.wall)
        if process.exit_code != 0:
            raise SystemExit(f"evalcli report failed (exit {process.exit_code}): {process.stderr[-2000:]}")
        inside = [json.loads(_python(["-c", RENDER, str(db), str(html)]).stdout) for _ in range(max(1, repeat))]
        best = min(inside, key=lambda figures: figures["report"])
        why = chromium_missing()
        timings = None if why else _browser_timings(html, max(3, repeat))
        return ReportFigures(work, process, best["import"], best["report"], html.stat().st_size, timings, why)


def print_figures(figures: ReportFigures) -> None:
    work = figures.work
    print(f"\nHTML report of a stored run of {work.n} conversations x {work.turns} turns (targets: written < 2 s, "
          "< 10 MB, loaded < 2 s)")
    print(f"  evalcli report (whole process, start-up included): {figures.process.wall:.2f} s, peak RSS "
          f"{figures.process.peak_rss_mb:.0f} MB")
    print(f"  read + render + write in one process: {figures.render:.2f} s (+ {figures.imports:.2f} s importing "
          "the report and jinja2)")
    print(f"  file size: {figures.size / 1e6:.2f} MB")
    if figures.browser is None:
        print(f"  browser load: skipped ({figures.why_no_browser})")
        return
    best = min(figures.browser, key=lambda t: t["ready"])
    worst = max(figures.browser, key=lambda t: t["ready"])
    print(f"  Chromium from file:// (best of {len(figures.browser)}): DOMContentLoaded {best['dom']:.0f} ms, load "
          f"{best['load']:.0f} ms, conversation list ready {best['ready']:.0f} ms (worst ready {worst['ready']:.0f} ms)")
    sys.stdout.flush()


def report_section(size: tuple[int, int], concurrency: int, repeat: int) -> None:
    n, turns = size
    print_figures(measure_report(Workload(n, turns, 0.0, concurrency), repeat))
