"""OTLP trace files and transcripts read a line at a time (issue 48, "flat memory") broken as users would: each through
the real CLI, against what the code before the change printed (docs/otel.md "Scoring exported traces")."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import REPO, run_cli
from tests.test_memory_streams import line, turn_spans


def _run(tmp_path: Path, text: str) -> tuple[int, str]:
    (tmp_path / "traces.jsonl").write_text(text)
    (tmp_path / "d.yaml").write_text("gates: [{called_tool: get_weather}]\ndata_file: traces.jsonl\n")
    done = run_cli(["run", str(tmp_path / "d.yaml"), "--db", str(tmp_path / "e.db")], REPO, {})
    return done.code, done.stderr


def test_a_line_cut_short_is_located_where_its_json_breaks(tmp_path: Path) -> None:
    """A collector that died mid-write leaves a line cut short, followed by the lines written after its restart.
    The error names that line and the column where its JSON breaks, as before the file was read a line at a time
    (the line's own newline was parsed with it: "Invalid control character" at the line's end, column 201,
    instead of the string left open at column 177)."""
    rows = [line(turn_spans(n, f"c{n}", n * 100)) for n in range(1, 6)]
    rows[3] = rows[3][:200] + "\n"
    code, stderr = _run(tmp_path, "".join(rows))
    assert code == 2, stderr
    where = f"{tmp_path / 'traces.jsonl'}:4:"
    error = next(text for text in stderr.splitlines() if where in text)
    column = int(error.split(where, 1)[1].split(":", 1)[0])
    cut = rows[3][:200]
    assert column <= len(cut) and cut[column - 1] == '"' and '"' not in cut[column:], error  # the string left open
    assert "Unterminated string" in error, error


def test_a_pretty_printed_document_after_a_first_line_is_located_at_its_first_line(tmp_path: Path) -> None:
    """A file of one request a line with a pretty-printed request appended: line 2 (``{``) is located after its
    brace (column 2), not at column 1 of the line after it."""
    pretty = json.dumps(json.loads(line(turn_spans(2, "c2", 200))), indent=2)
    code, stderr = _run(tmp_path, line(turn_spans(1, "c1", 100)) + pretty + "\n")
    assert code == 2, stderr
    assert f"{tmp_path / 'traces.jsonl'}:2:2: not valid JSON" in stderr, stderr


def test_a_line_break_inside_a_string_is_not_a_line_of_the_file(tmp_path: Path) -> None:
    """U+2028, U+2029 and U+0085 are line breaks to ``str.splitlines`` but may stand raw in a JSON string (an export
    written with ``ensure_ascii=False``). Read a line at a time, the file's lines are its newlines only: the answer
    keeps them and the conversation is scored (the code before the change split the line there: exit 2, "not valid
    JSON" at line 1)."""
    texts = [line(turn_spans(n, f"c{n}", n * 100)).replace("sunny", "sun\\u2028ny\\u0085\\u2029") for n in (1, 2)]
    raw = "".join(json.dumps(json.loads(text), ensure_ascii=False) + "\n" for text in texts)
    assert "\u2028" in raw
    (tmp_path / "traces.jsonl").write_text(raw, encoding="utf-8")
    (tmp_path / "d.yaml").write_text("gates: [{called_tool: get_weather}]\ndata_file: traces.jsonl\n")
    done = run_cli(["run", str(tmp_path / "d.yaml"), "--db", str(tmp_path / "e.db"), "--json", "-"], REPO, {})
    assert done.code == 0, done.stderr
    items = json.loads(done.stdout)["items"]
    assert [i["id"] for i in items] == ["c1", "c2"]
    assert items[1]["turns"][0]["output"][-1]["content"] == "Paris: sun\u2028ny\u0085\u2029, 18 degrees."


def test_a_data_file_that_is_not_utf8_is_a_located_error(tmp_path: Path) -> None:
    """A transcript file saved as Latin-1, and a trace file with a Latin-1 byte on its fourth line: each is the file,
    line and column of the first byte that is not UTF-8, exit 2, nothing stored (both were 'internal error:
    UnicodeDecodeError', exit 70)."""
    transcript = '{"id": "a", "messages": [{"role": "user", "content": "caf\xe9?"}, {"role": "assistant", "content": "ok"}]}\n'
    (tmp_path / "t.jsonl").write_bytes(transcript.encode("latin-1"))
    (tmp_path / "d.yaml").write_text("gates: [{includes: ok}]\ndata_file: t.jsonl\n")
    done = run_cli(["run", str(tmp_path / "d.yaml"), "--db", str(tmp_path / "e.db")], REPO, {})
    assert done.code == 2, done.stderr
    column = transcript.index("\xe9") + 1
    assert f"t.jsonl:1:{column}: the file is not UTF-8 text (byte 0xe9)" in done.stderr, done.stderr
    assert "save it as UTF-8" in done.stderr and "internal error" not in done.stderr
    assert not (tmp_path / "e.db").exists()  # refused before anything is written
    traces = "".join(line(turn_spans(n, f"c{n}", n * 100)) for n in range(3)) + line(turn_spans(3, "caf\xe9", 300))
    (tmp_path / "traces.jsonl").write_bytes(traces.replace("\\u00e9", "\xe9").encode("latin-1"))
    (tmp_path / "d.yaml").write_text("gates: [{called_tool: get_weather}]\ndata_file: traces.jsonl\n")
    done = run_cli(["run", str(tmp_path / "d.yaml"), "--db", str(tmp_path / "f.db")], REPO, {})
    assert done.code == 2, done.stderr
    assert "traces.jsonl:4:" in done.stderr and "the file is not UTF-8 text (byte 0xe9)" in done.stderr
