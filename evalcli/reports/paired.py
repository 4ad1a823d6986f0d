"""The paired statistics of two runs (docs/history.md) for people: a terminal table, Markdown lines, and the words
that say how to read them. ``diff`` and ``compare`` (terminal, Markdown, HTML) all render them from here."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..store import Detectable, Figure, PairedStats, PassFail, pvalue_text
from ..store.stats import ALPHA, CONFIDENCE, POWER
from .text import plural, titled


def points(change: float) -> str:
    """A change in pass rate as percentage points: ``+4.0 points``."""
    return f"{change * 100:+.1f} points"


def pass_fail_line(pf: PassFail) -> str:
    """``pass/fail over 50 conversations: A passed 40, B 36 (-8.0 points); b = 5 ..., c = 1 ...; McNemar p = 0.219``"""
    return (f"pass/fail over {pf.n} conversations in both runs: A passed {pf.passed_a}, B {pf.passed_b} "
            f"({points(pf.change)}); b = {pf.b} passed in A and fail in B, c = {pf.c} the other way; "
            f"McNemar exact p = {pvalue_text(pf.p)}")


def interval_text(figure: Figure) -> str:
    d = figure.difference
    return f"[{d.low:+.3f}, {d.high:+.3f}]"


def detectable_line(found: Detectable) -> str:
    """How large a change this many conversations can see, and with ``--detect`` how many a change needs."""
    over = plural(found.n, "conversation")
    if found.measure != "pass/fail":
        over += "'s pass rate over its plays" if found.n == 1 else "' pass rates over their plays"
    conditions = f"(alpha {ALPHA:g}, power {POWER:.0%}, from a spread of {found.spread:.3f} per conversation)"
    if found.change is None:
        line = (f"smallest detectable change ({found.measure}): none with {over}: too few to detect any change; "
                f"{found.needed_for_any} would detect a change of 100 points {conditions}")
    else:
        line = f"smallest detectable change ({found.measure}): {found.change * 100:.1f} points with {over} {conditions}"
    if found.detect is not None and found.needed is not None:
        # --detect 0.0004 is 0.04 points, never "0.0 points"
        asked = found.detect * 100
        line += f"; to detect {f'{asked:.1f}' if asked >= 0.1 else f'{asked:.2g}'} points: {found.needed} conversations"
    return line


def figure_rows(stats: PairedStats) -> list[tuple[str, str, str, str, str, str, str]]:
    """(what, n, A, B, B - A, interval, Wilcoxon p) per gate, scorer and pass rate."""
    rows = []
    for f in [*stats.figures, *([stats.rates] if stats.rates else [])]:
        d = f.difference
        rows.append((f"{f.role} {f.id}", str(d.n), f"{f.mean_a:.3f}", f"{f.mean_b:.3f}", f"{d.mean:+.3f}",
                     interval_text(f), pvalue_text(d.p)))
    return rows


def status_line(stats: PairedStats) -> str | None:
    """The conversations that errored in one run only (in no figure, but changed); ``None`` when none did."""
    if not stats.status_changed:
        return None
    return (f"{plural(stats.status_changed, 'conversation')} errored in one run and not the other: counted in "
            "pass/fail, in no gate or scorer figure")


HEADERS = ("", "n", "A", "B", "B - A", f"{CONFIDENCE:.0%} interval", "Wilcoxon p")


def stats_renderable(stats: PairedStats, title: str = "Paired statistics (B - A)") -> RenderableType:
    """The statistics for the terminal: the pass/fail line, a row per gate, scorer and pass rate, the detectable
    change."""
    parts: list[RenderableType] = [Text(pass_fail_line(stats.pass_fail))]
    rows = figure_rows(stats)
    if rows and stats.unchanged:
        parts.append(Text(f"no gate or scorer changed on any of the {stats.paired} conversations (B - A = 0)"))
    elif rows:
        table = Table()
        for n, header in enumerate(HEADERS):
            table.add_column(header, justify="left" if n == 0 else "right", no_wrap=n == 0)
        for row, figure in zip(rows, [*stats.figures, *([stats.rates] if stats.rates else [])], strict=True):
            style = "bold red" if figure.difference.below_zero else "green" if figure.difference.low > 0 else ""
            table.add_row(*row[:4], Text(row[4], style=style), Text(row[5], style=style), row[6])
        parts.append(titled("Per gate and scorer, over the conversations where both runs scored it", table,
                            f"interval: {CONFIDENCE:.0%} paired bootstrap of the mean of B - A; a red one lies "
                            "wholly below 0"))
    if (status := status_line(stats)) is not None:
        parts.append(Text(status, style="yellow"))
    parts.extend(Text(detectable_line(d), style="dim") for d in stats.detectable)
    if stats.only_a or stats.only_b:
        parts.append(Text(f"left out: {stats.only_a} conversation(s) only in A, {stats.only_b} only in B",
                          style="dim"))
    return Group(Text(title, style="bold"), *parts)


def stats_markdown(stats: PairedStats, heading: str = "#### Paired statistics (B - A)") -> list[str]:
    """The statistics as Markdown lines (a CI step summary or a PR comment)."""
    lines = [heading, "", pass_fail_line(stats.pass_fail).replace("McNemar", "McNemar's"), ""]
    rows = figure_rows(stats)
    if rows and stats.unchanged:
        lines += [f"No gate or scorer changed on any of the {stats.paired} conversations.", ""]
    elif rows:
        lines += ["| " + " | ".join(HEADERS) + " |", "|---|" + "---:|" * (len(HEADERS) - 1)]
        lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
        lines.append("")
    lines += [f"- {status}" for status in [status_line(stats)] if status is not None]
    lines += [f"- {detectable_line(d)}" for d in stats.detectable]
    if stats.only_a or stats.only_b:
        lines.append(f"- left out: {stats.only_a} conversation(s) only in A, {stats.only_b} only in B")
    return [*lines, ""]
