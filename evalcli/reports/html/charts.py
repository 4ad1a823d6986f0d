"""The report's charts as geometry: bars and polylines in SVG user units, drawn by the template.

Everything here is plain arithmetic on numbers the report collected; nothing is drawn in Python
(the template turns these into inline ``<svg>`` elements, so the charts need no script and no
network). Scores may lie outside [0, 1] (scaled judges, custom scorers): every axis spans [0, 1]
widened to the data.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import field
from typing import ClassVar

from ...records import record
from ..text import fmt

PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777", "#4b5563",
           "#65a30d")
"""Series colours, in order (the tenth and later series reuse them)."""

BINS = 10
PAD_LEFT, PAD_RIGHT, PAD_TOP, PAD_BOTTOM = 34.0, 34.0, 14.0, 22.0
HISTOGRAM_PAD_RIGHT = 10.0


class Frame:
    """What a chart of ``width`` by ``height`` plots in: the area inside its padding (the y ticks stand left of it,
    the x labels under it)."""

    width: float
    height: float
    left: ClassVar[float] = PAD_LEFT
    top: ClassVar[float] = PAD_TOP
    pad_right: ClassVar[float] = PAD_RIGHT

    @property
    def right(self) -> float:
        return self.width - self.pad_right

    @property
    def bottom(self) -> float:
        return self.height - PAD_BOTTOM


@record(frozen=True)
class Bar:
    """One histogram bin: its rectangle and what it counts."""

    x: float
    y: float
    width: float
    height: float
    count: int
    label: str
    """The bin's range, e.g. ``0.4..0.5``."""


@record(frozen=True)
class Histogram(Frame):
    """One scorer's distribution over the conversations where it scored."""

    title: str
    bars: list[Bar]
    count: int
    mean: float | None
    not_scorable: int
    low: str
    high: str
    peak: int
    width: float = 300.0
    height: float = 130.0
    pad_right: ClassVar[float] = HISTOGRAM_PAD_RIGHT

    @property
    def baseline(self) -> float:
        """The x axis, where the bars stand."""
        return self.bottom


@record(frozen=True)
class Point:
    x: float
    y: float
    label: str
    """What a tooltip says: where and how much."""


@record(frozen=True)
class Series:
    """One line of a line chart (``None`` values leave gaps)."""

    label: str
    color: str
    points: list[Point]
    segments: list[str]
    """SVG ``points`` attributes, one per unbroken run of values."""


@record(frozen=True)
class Tick:
    position: float
    text: str


@record(frozen=True)
class LineChart(Frame):
    """Several series over shared x labels (turn indexes, or runs)."""

    title: str
    series: list[Series]
    x_ticks: list[Tick]
    y_ticks: list[Tick]
    width: float = 640.0
    height: float = 220.0
    highlight: float | None = None
    """An x position to mark (this run, among earlier ones)."""
    notes: list[str] = field(default_factory=list)


def value_range(values: list[float]) -> tuple[float, float]:
    """[0, 1] widened to hold every finite value."""
    finite = [v for v in values if math.isfinite(v)]
    low, high = min([0.0, *finite]), max([1.0, *finite])
    return low, high


def histogram(title: str, values: list[float], not_scorable: int = 0, *, width: float = 300.0,
              height: float = 130.0) -> Histogram:
    """Counts of ``values`` in ten equal bins over [0, 1] (widened to the data); the top value falls in the last bin."""
    finite = [v for v in values if math.isfinite(v)]
    low, high = value_range(finite)
    step = (high - low) / BINS
    counts = [0] * BINS
    for value in finite:
        counts[min(BINS - 1, int((value - low) / step))] += 1
    peak = max(counts) if finite else 0
    plot_w, plot_h = width - PAD_LEFT - HISTOGRAM_PAD_RIGHT, height - PAD_TOP - PAD_BOTTOM
    bar_w = plot_w / BINS
    bars = []
    for n, count in enumerate(counts):
        bar_h = plot_h * count / peak if peak else 0.0
        bars.append(Bar(PAD_LEFT + n * bar_w + 1, height - PAD_BOTTOM - bar_h, bar_w - 2, bar_h, count,
                        f"{fmt(low + n * step)}..{fmt(low + (n + 1) * step)}"))
    mean = sum(finite) / len(finite) if finite else None
    return Histogram(title, bars, len(finite), mean, not_scorable, fmt(low), fmt(high), peak, width, height)


def line_chart(title: str, x_labels: list[str], series: dict[str, list[float | None]], *,
               width: float = 640.0, height: float = 220.0, highlight_last: bool = False) -> LineChart:
    """Each series drawn against ``x_labels`` (evenly spaced); the y axis spans [0, 1] widened to the data."""
    low, high = value_range([v for values in series.values() for v in values if v is not None])
    left, right, top, bottom = PAD_LEFT, width - PAD_RIGHT, PAD_TOP, height - PAD_BOTTOM

    def x_at(n: int) -> float:
        return (left + right) / 2 if len(x_labels) == 1 else left + (right - left) * n / (len(x_labels) - 1)

    def y_at(value: float) -> float:
        return bottom - (bottom - top) * (value - low) / (high - low)

    lines = [_series(label, PALETTE[n % len(PALETTE)], values, [f"{label}, {x}" for x in x_labels], x_at, y_at)
             for n, (label, values) in enumerate(series.items())]
    x_ticks = [Tick(round(x_at(n), 1), text) for n, text in enumerate(x_labels)]
    y_ticks = [Tick(round(y_at(v), 1), fmt(v)) for v in _y_values(low, high)]
    highlight = x_ticks[-1].position if highlight_last and x_ticks else None
    return LineChart(title, lines, _thin(x_ticks), y_ticks, width, height, highlight)


def _series(label: str, color: str, values: list[float | None], where: list[str], x_at: Callable[[int], float],
            y_at: Callable[[float], float]) -> Series:
    """One series' points, and its polylines broken where a value is missing."""
    points: list[Point] = []
    segments: list[str] = []
    run: list[str] = []
    for n, value in enumerate(values):
        if value is None or not math.isfinite(value):
            segments += [" ".join(run)] if len(run) > 1 else []
            run = []
            continue
        point = Point(round(x_at(n), 1), round(y_at(value), 1), f"{where[n]}: {fmt(value)}")
        points.append(point)
        run.append(f"{point.x},{point.y}")
    segments += [" ".join(run)] if len(run) > 1 else []
    return Series(label, color, points, segments)


def _y_values(low: float, high: float) -> list[float]:
    """Five evenly spaced gridline values from ``low`` to ``high``."""
    return [low + (high - low) * n / 4 for n in range(5)]


def _thin(ticks: list[Tick], most: int = 12) -> list[Tick]:
    """At most ``most`` x labels (every k-th, always the last), so long histories stay legible."""
    if len(ticks) <= most:
        return ticks
    every = math.ceil(len(ticks) / most)
    kept = ticks[::every]
    kept[-1] = ticks[-1]
    return kept
