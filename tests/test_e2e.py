"""End to end: the real ``evalcli`` process on YAML files in a temp dir; JSON, exit codes and SQLite rows."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import REPO, CliResult, run_cli

JSON_KEYS = ["run_id", "dataset", "target", "verdict", "scores", "summary", "gate_results", "threshold_results",
             "turn_results", "usage", "status", "conversations", "items"]
ITEM_KEYS = ["index", "id", "tags", "form", "status", "thread_id", "resource_id", "error", "scores", "gate_scores",
             "turns"]
ANSI = re.compile(r"\x1b\[")


@pytest.mark.slow  # the embedded judge model: a minute of CPU
def test_demo_dataset_runs_and_stores_everything(tmp_path: Path) -> None:
    result = run_cli(["run", str(REPO / "datasets/weather.yaml"), "--db", str(tmp_path / "demo.db"), "--json",
                      str(tmp_path / "out.json")], cwd=REPO, timeout=600)  # the embedded judge on a busy CPU
    assert result.code == 0, result.stderr
    out = json.loads((tmp_path / "out.json").read_text())
    assert list(out) == JSON_KEYS
    assert out["verdict"] == "passed"
    assert [i["id"] for i in out["items"]] == ["brooklyn-now", "favourite-city", "london-two-days"]
    assert all(list(i)[: len(ITEM_KEYS)] == ITEM_KEYS for i in out["items"])  # docs/reference/json.md keys first, in order
    assert out["items"][1]["turns"][1]["output"][-1]["content"] == "Today in Brooklyn: sunny, 72°F."
    assert out["items"][2]["turns"][1]["output"][-1]["content"] == "Tomorrow in London: cloudy, 57°F."
    for page in (REPO / "README.md", REPO / "docs/index.md"):  # the sample a newcomer compares their first run with
        assert sample_scores(page) == {i["id"]: [round(i["scores"][s], 3) for s in ("gave-temperature", "sunny-72",
                                                                                      "weather-judge")]
                                       for i in out["items"]}, page
    db = result.db(str(tmp_path / "demo.db"))
    run = db.execute("SELECT * FROM runs").fetchone()
    assert (run["id"], run["status"], run["verdict"], run["exit_code"]) == (out["run_id"], "completed", "passed", 0)
    assert [r[0] for r in db.execute("SELECT item_id FROM items ORDER BY item_index")] == [
        "brooklyn-now", "favourite-city", "london-two-days"]
    assert db.execute("SELECT COUNT(*) FROM turns").fetchone()[0] == 5
    rows = db.execute("SELECT scorer_id, item_id, turn_index, role, score FROM scores ORDER BY id").fetchall()
    stored = {(r["scorer_id"], r["item_id"], r["turn_index"]) for r in rows}
    assert ("gave-temperature", "brooklyn-now", None) in stored
    assert ("mentions-brooklyn", "london-two-days", 0) in stored
    gate_rows = [r for r in rows if r["role"] == "gate"]  # the registered gate no-tool-errors, per conversation
    assert sorted(r["item_id"] for r in gate_rows if r["scorer_id"] == "no-tool-errors") == [
        "brooklyn-now", "favourite-city", "london-two-days"]
    assert {r["scorer_id"] for r in gate_rows} == {"no-tool-errors", "called-weather"}
    assert ("said-tomorrow", "london-two-days", 1) in stored
    assert "warning" not in result.stderr  # the demo registers everything it uses: a first run warns of nothing
    # the seconds spent loading the embedded judge are said, not silent (a log has no progress bar)
    assert "loading the local model local/gemma-3-270m" in result.stderr
    quiet = run_cli(["run", str(REPO / "datasets/weather.yaml"), "--db", str(tmp_path / "demo.db"), "--quiet"],
                    cwd=REPO, timeout=600)
    assert quiet.code == 0 and quiet.stderr == ""


def sample_scores(page: Path) -> dict[str, list[float]]:
    """The scores of each conversation in a page's sample of the demo's table (README.md, docs/index.md)."""
    text = page.read_text(encoding="utf-8")
    sample = text[text.index("$ evalcli run datasets/weather.yaml"):]
    rows = [line.split() for line in sample[:sample.index("```")].splitlines() if line.endswith("  ok")]
    return {row[0]: [float(cell) for cell in row[3:6]] for row in rows}


AGENT_DATASET = """
target: agents:{agent}
scorers: [{{includes: said}}]
data:
  - id: one
    input: hello
  - id: many
    inputs: [first, second]
  - id: turns
    turns: [{{input: a}}, {{input: b}}]
"""


def test_json_to_stdout_is_pure_json_and_output_has_no_ansi(write: Callable[..., Path],
                                                            cli: Callable[..., CliResult]) -> None:
    write("d.yaml", AGENT_DATASET.format(agent="echo_agent"))
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 0
    out = result.json
    assert list(out) == JSON_KEYS
    assert out["dataset"] == "d.yaml" and out["target"] == "agents:echo_agent"
    assert out["verdict"] is None and out["scores"] == {"includes(said)": 1.0}
    assert out["summary"] == {"total_items": 3, "errors": 0, "not_scorable": {}}
    assert "Conversations" in result.stderr  # the human report moved to stderr
    assert not ANSI.search(result.stdout + result.stderr)


def test_memory_threads_and_resources(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", AGENT_DATASET.format(agent="recorder"))
    result = cli("run", "d.yaml", "--json", "-", "--concurrency", "1")
    assert result.code == 0, result.stderr
    calls = [json.loads(line) for line in (result.cwd / "calls.jsonl").read_text().splitlines()]
    assert calls[0] == {"input": "hello", "memory": None, "options": {}}  # single turn: nothing injected
    many, turns = calls[1:3], calls[3:5]
    for conversation in (many, turns):
        threads = {c["memory"]["thread"] for c in conversation}
        assert len(threads) == 1
        thread = threads.pop()
        uuid.UUID(thread)
        assert all(c["memory"]["resource"] == thread for c in conversation)
    assert many[0]["memory"]["thread"] != turns[0]["memory"]["thread"]
    items = result.json["items"]
    assert items[1]["thread_id"] == many[0]["memory"]["thread"] == items[1]["resource_id"]
    assert items[0]["thread_id"] is None


def test_pinned_resource_and_caller_memory(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", AGENT_DATASET.format(agent="recorder") + "target_options:\n  memory: {resource: user-42, "
          "thread: caller-thread}\n  temperature: 0\n")
    assert cli("run", "d.yaml", "--concurrency", "1").code == 0
    calls = [json.loads(line) for line in (Path(write("x", "")).parent / "calls.jsonl").read_text().splitlines()]
    assert calls[0]["memory"] == {"resource": "user-42", "thread": "caller-thread"}
    assert calls[0]["options"] == {"temperature": 0}
    assert {c["memory"]["resource"] for c in calls[1:]} == {"user-42"}
    assert "caller-thread" not in {c["memory"]["thread"] for c in calls[1:]}


def test_memory_warning_once_per_run(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", AGENT_DATASET.format(agent="forgetful"))
    result = cli("run", "d.yaml")
    assert result.code == 0
    assert result.stderr.count("has no 'memory' attribute: if it keeps no history of its own per thread") == 1
    assert "2 multi-turn conversations" in result.stderr
    write("e.yaml", AGENT_DATASET.format(agent="echo_agent"))
    assert "history of its own" not in cli("run", "e.yaml").stderr


def test_target_error_is_recorded_and_the_run_goes_on(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", """
        target: agents:boom
        gates: [{includes: fine}]
        data:
          - input: ok
          - {id: bad, inputs: [ok, boom now, never sent]}
          - input: ok again
    """)
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 4
    out = result.json
    assert out["summary"] == {"total_items": 3, "errors": 1, "not_scorable": {}}
    assert out["verdict"] == "passed"
    bad = out["items"][1]
    assert bad["status"] == "error"
    assert bad["error"] == "turn 1: the target raised ValueError: kaboom from the target"
    # the turn that failed is recorded with what the user said; "never sent" was not
    assert [(t["input"], bool(t["output"])) for t in bad["turns"]] == [("ok", True), ("boom now", False)]
    row = result.db().execute("SELECT status, error, traceback FROM items WHERE item_id = 'bad'").fetchone()
    assert row["status"] == "error" and "kaboom" in row["traceback"] and "Traceback" in row["traceback"]
    assert "Traceback" not in result.stderr


def test_async_target_and_user_messages_dropped(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", "target: agents:async_echo\nscorers: [{equals: async hi}]\ndata: [{input: hi}]\n")
    out = cli("run", "d.yaml", "--json", "-").json
    assert out["items"][0]["turns"][0]["output"] == [{"role": "assistant", "content": "async hi"}]
    assert out["scores"] == {"equals(async hi)": 1.0}


def test_gate_failure_exit_1_and_strict_exit_3(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("gate.yaml", "target: agents:echo\ngates: [{includes: nope}]\ndata: [{input: a}]\n")
    assert cli("run", "gate.yaml").code == 1
    write("thr.yaml", "target: agents:echo\nscorers: [{scorer: {includes: nope}, threshold: 1}]\ndata: [{input: a}]\n")
    assert cli("run", "thr.yaml").code == 0
    assert cli("run", "thr.yaml", "--strict").code == 3
    combined = cli("run", "thr.yaml", "gate.yaml", "--strict")
    assert combined.code == 1
    runs = combined.db().execute("SELECT dataset_path, verdict, exit_code FROM runs ORDER BY id").fetchall()
    assert [tuple(r) for r in runs[-2:]] == [("thr.yaml", "scored", 3), ("gate.yaml", "failed", 1)]


def test_filter_limit_and_shard(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    items = "\n".join(f"  - {{id: item-{i}, tags: [{'even' if i % 2 == 0 else 'odd'}], input: question {i}}}"
                      for i in range(12))
    write("d.yaml", f"target: agents:echo\nscorers: [{{includes: said}}]\ndata:\n{items}\n")

    def ids(*args: str) -> list[str]:
        result = cli("run", "d.yaml", "--json", "-", *args)
        assert result.code == 0, result.stderr
        return [i["id"] for i in result.json["items"]]

    assert ids("--filter", "^even$") == [f"item-{i}" for i in range(0, 12, 2)]
    assert ids("--filter", "question 1") == ["item-1", "item-10", "item-11"]
    assert ids("--filter", "item-[0-3]$", "--limit", "2") == ["item-0", "item-1"]
    shards = [ids("--shard", f"{i}/3") for i in (1, 2, 3)]
    everything = sorted(x for shard in shards for x in shard)
    assert everything == sorted(f"item-{i}" for i in range(12))
    assert sum(len(s) for s in shards) == 12 and all(shards)
    assert ids("--shard", "2/3") == shards[1]  # stable
    bad = cli("run", "d.yaml", "--shard", "4/3")
    assert bad.code == 2 and "--shard" in bad.stderr


def test_terminal_output_shows_square_brackets_as_written(write: Callable[..., Path],
                                                         cli: Callable[..., CliResult]) -> None:
    # ids, item ids and transcripts are text, never console markup ("[get_weather]" once vanished)
    write("d.yaml", """
        target: agents:echo
        scorers: [{tool_f1: [get_weather]}, {includes: "[1]"}]
        data:
          - id: "[draft] case"
            input: "Say [1] and [bold]x[/bold]"
    """)
    result = cli("run", "d.yaml")
    assert result.code == 0, result.stderr
    assert "tool_f1([get_weather])" in result.stdout and "includes([1])" in result.stdout
    assert "[draft] case" in result.stdout
    shown = cli("show", "latest", "[draft] case")
    assert shown.code == 0, shown.stderr
    assert "Say [1] and [bold]x[/bold]" in shown.stdout


def test_the_registration_example_is_the_reference_as_written(write: Callable[..., Path],
                                                             cli: Callable[..., CliResult]) -> None:
    # defaults left out, nested entries as written: copying the example registers the same scorer
    write("d.yaml", """
        target: agents:echo
        gates: [{trajectory: {expected: [search, {name: book, args: {n: 2}}], mode: in_order}}]
        data:
          - input: a
    """)
    example = "{trajectory: [search, {name: book, args: {n: 2}}]}"
    assert example in cli("validate", "d.yaml").stdout
    write("scorers.yaml", f"scorers:\n  ordered: {example}\n")
    write("e.yaml", "target: agents:echo\ngates: [ordered]\ndata:\n  - input: a\n")
    assert cli("validate", "e.yaml").code == 0
    first = cli("run", "d.yaml", "--json", "-").json["gate_results"]
    again = cli("run", "e.yaml", "--json", "-").json["gate_results"]
    assert [g["score"] for g in first] == [g["score"] for g in again] == [0.0]


def test_nested_arguments_are_stored_as_written() -> None:
    from evalcli.scorers.checks.tools import TrajectoryArgs
    from evalcli.scorers.judges.library import RubricArgs

    criteria = RubricArgs.model_validate({"criteria": ["Polite", {"criterion": "Short", "weight": 2}]})
    assert criteria.model_dump(by_alias=True)["criteria"] == ["Polite", {"criterion": "Short", "weight": 2.0,
                                                                         "required": False}]
    calls = TrajectoryArgs.model_validate({"expected": ["search", {"name": "book", "args": {}}]})
    assert calls.model_dump()["expected"] == ["search", {"name": "book", "args": {}}]
    assert TrajectoryArgs.model_validate(calls.model_dump()) == calls  # read back the same


def test_unregistered_warning_names_scorers_and_registered_rows_are_stored(write: Callable[..., Path],
                                                                          cli: Callable[..., CliResult]) -> None:
    write("scorers.yaml", "scorers:\n  said: {includes: said}\n")
    write("d.yaml", """
        target: agents:echo
        scorers: [said, {excludes: zzz}]
        data:
          - input: a
          - turns:
              - input: b
                scorers: [said]
    """)
    result = cli("run", "d.yaml", "--html", "r.html")
    assert result.code == 0
    assert "warning: excludes(zzz) of d.yaml: not registered in scorers.yaml, so the 'scores' table has no rows for " \
           "it" in result.stderr
    assert "    excludes(zzz): {excludes: zzz}" in cli("validate", "d.yaml").stdout.splitlines()
    rows = result.db().execute("SELECT scorer_id, item_index, turn_index, thread_id, score FROM scores").fetchall()
    assert sorted((r[0], r[1], -1 if r[2] is None else r[2]) for r in rows) == [
        ("said", 0, -1), ("said", 1, -1), ("said", 1, 0)]
    per_turn = next(r for r in rows if r["turn_index"] == 0)
    assert per_turn["thread_id"] is not None
    spec = result.db().execute("SELECT kind, spec FROM scorers").fetchone()
    assert spec["kind"] == "includes" and json.loads(spec["spec"])["args"]["value"] == "said"


def test_scorers_command_and_help(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("scorers.yaml", "scorers:\n  said: {includes: said}\n")
    listing = cli("scorers")
    assert listing.code == 0 and "said" in listing.stdout and "called_tool" in listing.stdout
    helptext = cli("run", "--help")
    assert helptext.code == 0 and "--shard" in helptext.stdout


def test_bad_reply_is_an_item_error(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    (write("weird.py", "def number(input, **kw):\n    return 42\n"))
    write("d.yaml", "target: weird:number\nscorers: [{includes: x}]\ndata: [{input: a}]\n")
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 4
    assert "the target returned int, not a response" in result.json["items"][0]["error"]
