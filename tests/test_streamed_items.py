"""Big JSONL datasets (docs/performance.md#memory): a ``data_file`` or a ``.jsonl`` dataset is validated one line at
a time (a bad line found before anything runs, at its file:line), loading keeps no raw line, the run's
configuration fingerprint is made one conversation at a time, and a resume reads its kept results back as it folds
them."""

from __future__ import annotations

import json
import sqlite3
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from evalcli.dataset import load_dataset
from evalcli.fingerprint import fingerprint
from tests.conftest import CliResult

HEAD = "target: agents:echo\nscorers: [{includes: q}]\n"


def _items(count: int) -> list[str]:
    return [json.dumps({"id": f"c{i}", "inputs": [f"q{i} first", f"q{i} second"]} if i % 2 else
                       {"input": f"q{i}", "tags": ["t"], "metadata": {"n": i}}) for i in range(count)]


def test_a_bad_line_at_row_70000_is_refused_before_anything_is_stored(workdir: Path,
                                                                         cli: Callable[..., CliResult]) -> None:
    lines = _items(70_000)
    lines[69_999] = json.dumps({"id": "late", "inputs": []})
    (workdir / "items.jsonl").write_text("\n".join(lines) + "\n")
    (workdir / "d.yaml").write_text(HEAD + "data_file: items.jsonl\n")
    result = cli("run", "d.yaml", "--db", "runs.db")
    assert result.code == 2, result.stderr
    assert "items.jsonl:70000:1: item 69999 (late): 'inputs' must be a non-empty array" in result.stderr
    assert "Traceback" not in result.stderr
    if (workdir / "runs.db").exists():
        with sqlite3.connect(workdir / "runs.db") as conn:
            assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'runs'").fetchone()[0] == 0 or \
                conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 0


def test_a_line_that_is_not_json_is_said_with_the_problems_before_it(workdir: Path,
                                                                      cli: Callable[..., CliResult]) -> None:
    lines = _items(50)
    lines[9] = json.dumps({"inputs": []})
    lines[39] = '{"input": "unterminated'
    (workdir / "items.jsonl").write_text("\n".join(lines) + "\n")
    (workdir / "d.yaml").write_text(HEAD + "data_file: items.jsonl\n")
    result = cli("run", "d.yaml", "--db", "runs.db")
    assert result.code == 2, result.stderr
    assert "items.jsonl:10:1: item 9: 'inputs' must be a non-empty array" in result.stderr
    assert "items.jsonl:40:" in result.stderr and "not valid JSON" in result.stderr


def test_a_jsonl_dataset_runs_its_items_in_order_with_their_ids(workdir: Path, cli: Callable[..., CliResult]) -> None:
    header = json.dumps({"target": "agents:echo", "scorers": [{"includes": "q"}]})
    (workdir / "d.jsonl").write_text("\n".join([header, *_items(30)]) + "\n")
    result = cli("run", "d.jsonl", "--db", "runs.db", "--json", "out.json")
    assert result.code == 0, result.stderr
    report = json.loads((workdir / "out.json").read_text())
    assert [item["id"] for item in report["items"]] == [str(i) if i % 2 == 0 else f"c{i}" for i in range(30)]
    assert [item["index"] for item in report["items"]] == list(range(30))


def _transient_per_item(action: Callable[[], object], count: int) -> float:
    """Bytes per item that ``action`` allocated at its peak beyond what its result keeps."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        kept = action()
        after, peak = tracemalloc.get_traced_memory()
        del kept
    finally:
        tracemalloc.stop()
    assert after >= before
    return (peak - after) / count


def test_loading_a_data_file_keeps_no_raw_line(workdir: Path) -> None:
    """Loading used to hold every parsed line and a ``Positions`` per line beside the validated items (1.8 KB a
    conversation at its peak): now one line at a time."""
    count = 4000
    (workdir / "items.jsonl").write_text("\n".join(_items(count)) + "\n")
    (workdir / "d.yaml").write_text(HEAD + "data_file: items.jsonl\n")
    load_dataset(workdir / "d.yaml")  # imports and caches first
    transient = _transient_per_item(lambda: load_dataset(workdir / "d.yaml"), count)
    assert transient < 500, f"{transient:.0f} bytes a conversation held only while loading"


def test_the_fingerprint_is_made_one_conversation_at_a_time(workdir: Path) -> None:
    """The run's stored fingerprint used to be made from the whole resolved configuration, every conversation's tree
    at once (about 1.3 KB each): now each tree is digested and let go."""
    count = 3000
    (workdir / "items.jsonl").write_text("\n".join(_items(count)) + "\n")
    (workdir / "d.yaml").write_text(HEAD + "data_file: items.jsonl\n")
    dataset = load_dataset(workdir / "d.yaml")
    streamed = fingerprint(dataset.resolved_configuration(streamed=True), salt="s")
    assert streamed == fingerprint(dataset.resolved_configuration(), salt="s")
    transient = _transient_per_item(lambda: fingerprint(dataset.resolved_configuration(streamed=True)), count)
    assert transient < 200, f"{transient:.0f} bytes a conversation held only while fingerprinting"


def test_a_data_file_run_stores_what_its_inline_dataset_stores_with_one_worker_or_two(tmp_path: Path) -> None:
    """The same conversations written inline and in a ``data_file``: the same rows (scores, ids, order), whether one
    process plays them or two workers (each loads the file again, one line at a time)."""
    import yaml

    from tests.reliability_helpers import query, write_project
    from tests.test_workers import AGENT, SCORERS, dataset, rows, run

    inline = dataset()
    write_project(tmp_path / "inline", agent=AGENT, dataset=inline, scorers=SCORERS)
    loaded = yaml.safe_load(inline)
    header = "\n".join(line for line in inline.splitlines() if not line.startswith(("data:", "  - ")))
    write_project(tmp_path / "file", agent=AGENT, dataset=header + "\ndata_file: items.jsonl\n", scorers=SCORERS)
    (tmp_path / "file" / "items.jsonl").write_text("".join(json.dumps(item) + "\n" for item in loaded["data"]))
    found = {}
    for name, folder, args in (("inline", tmp_path / "inline", ()), ("file", tmp_path / "file", ()),
                               ("file, 2 workers", tmp_path / "file", ("--workers", "2"))):
        done, result = run(folder, folder / "runs.db", *args)
        assert done.returncode == 4, done.stderr  # one conversation errors on purpose
        stored = rows(folder / "runs.db", result["run_id"])
        found[name] = {table: stored[table] for table in ("items", "turns", "scores")}
        assert [r[1] for r in stored["items"]] == [item["id"] for item in loaded["data"]]
    assert found["inline"] == found["file"] == found["file, 2 workers"]
    assert query(tmp_path / "file" / "runs.db", "SELECT count(*) FROM runs") == [(2,)]
