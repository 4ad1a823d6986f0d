"""The HTML report's pieces on their own: chart geometry, per-conversation baseline changes, safe JSON."""

from __future__ import annotations

import json
import math

from evalcli.reports.html.charts import histogram, line_chart
from evalcli.reports.html.conversation import message_entries
from evalcli.reports.html.page import embedded_json
from evalcli.reports.html.sources import conversation_change
from evalcli.store.diff import Change, ItemChange


def test_histogram_bins_cover_zero_to_one_and_widen_for_larger_scores() -> None:
    plain = histogram("s", [0.0, 0.05, 0.5, 1.0, 1.0], not_scorable=2)
    assert [bar.count for bar in plain.bars] == [2, 0, 0, 0, 0, 1, 0, 0, 0, 2]
    assert (plain.low, plain.high, plain.count, plain.not_scorable, plain.peak) == ("0", "1", 5, 2, 2)
    assert plain.mean == 0.51
    tallest = max(plain.bars, key=lambda bar: bar.height)
    assert tallest.y >= 0 and tallest.y + tallest.height == plain.baseline
    scaled = histogram("judge x2", [0.0, 2.0, math.nan])
    assert scaled.high == "2" and scaled.count == 2 and scaled.bars[-1].count == 1
    empty = histogram("never scored", [], not_scorable=3)
    assert empty.count == 0 and empty.mean is None and all(bar.height == 0 for bar in empty.bars)


def test_line_chart_breaks_lines_where_a_value_is_missing() -> None:
    chart = line_chart("t", ["turn 0", "turn 1", "turn 2", "turn 3"], {"a": [1.0, None, 0.5, 0.0], "b": [0.5] * 4})
    a, b = chart.series
    assert len(a.points) == 3 and len(a.segments) == 1 and a.segments[0].count(",") == 2  # turns 2-3 joined
    assert len(b.segments) == 1 and b.segments[0].count(",") == 4
    assert a.points[0].y == chart.top and a.points[-1].y == chart.bottom  # 1.0 at the top, 0 at the bottom
    assert [tick.text for tick in chart.y_ticks] == ["0", "0.25", "0.5", "0.75", "1"]
    assert a.points[0].label == "a, turn 0: 1" and a.color != b.color
    many = line_chart("runs", [f"r{n}" for n in range(40)], {"x": [0.5] * 40}, highlight_last=True)
    assert len(many.x_ticks) <= 12 and many.x_ticks[-1].text == "r39" and many.highlight == many.x_ticks[-1].position


def test_conversation_changes_follow_diff() -> None:
    def item(a: bool | None, b: bool | None, *scores: Change) -> ItemChange:
        return ItemChange("x", a, b, list(scores))

    assert conversation_change(item(True, False), 0).kind == "regressed"
    assert conversation_change(item(False, True), 0).details == ["FAILED -> passed"]
    assert conversation_change(item(False, True), 0).kind == "improved"
    dropped = conversation_change(item(True, True, Change("s", 0.9, 0.5, True)), 0)
    assert (dropped.kind, dropped.details) == ("regressed", ["s: 0.9 -> 0.5"])
    gained = item(True, True, Change("s", 0.5, 0.9, False))
    assert conversation_change(gained, 0).kind == "improved"
    assert conversation_change(gained, 0.5).kind == "unchanged"  # within the tolerance
    assert conversation_change(item(None, True), 0).kind == "new"
    assert conversation_change(item(True, None), 0).kind == "missing"
    assert conversation_change(item(True, True, Change("s", math.nan, math.nan, False)), 0).details == []


def test_embedded_json_cannot_end_its_script_block() -> None:
    value = {"text": "</script><script>alert(1)</script> & \u2028 \ud800 <!--"}
    text = embedded_json(value)
    assert "<" not in text and ">" not in text and "&" not in text and text.isascii()
    assert json.loads(text) == value


def test_message_entries_match_show() -> None:
    output = [
        {"role": "assistant", "content": "Looking.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}},
            {"id": "c2", "type": "function", "function": {"name": "bad_args", "arguments": "not json"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"error": "timeout"}'},
        {"role": "tool", "tool_call_id": "c2", "content": "ok", "is_error": False},
        {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
        "not a message",
    ]
    assert message_entries(output) == [
        {"k": "text", "text": "Looking."},
        {"k": "call", "name": "get_weather", "id": "c1", "args": '{\n  "city": "Oslo"\n}'},
        {"k": "call", "name": "bad_args", "id": "c2", "args": "not json"},
        {"k": "result", "name": "get_weather", "id": "c1", "error": True, "text": '{\n  "error": "timeout"\n}'},
        {"k": "result", "name": "bad_args", "id": "c2", "error": False, "text": "ok"},
        {"k": "text", "text": "Done."},
    ]
